//! Which known entities a text mentions, found by the words of their names rather than
//! by the exact name: "Melanie's sister" mentions `Melanie`, "where does Ingrid study
//! marine biology" mentions `Tromsø to study marine biology`, "她在杭州学会了做龙井虾仁"
//! mentions `龙井虾仁`. One analyser for both languages ([`crate::memory::index::retrieve::analyze`]:
//! English words stemmed without function words, Chinese as character bigrams), so an
//! inflected or possessive form still counts.
//!
//! Why an index and not the store's substring scan: per-turn recall asks on every turn,
//! and the scan (`instr` over every entity name) grows with the graph; postings cost in
//! proportion to the entities sharing a word with the input. The index only grows: the
//! graph actor adds the entities committed since it last looked (ids only grow); an
//! entity merged away or deleted stays in it and simply recalls nothing. Aliases
//! (another name of an entity: a merged entity's name, a nickname a fact gave) are
//! names of the entity they belong to, indexed the same way by their own row ids.

use std::collections::{HashMap, HashSet};

/// A name covering at least this share of its words in the input counts as mentioned,
/// when it has several (a lone word must be there itself).
const PARTIAL: f64 = 0.7;

/// The index of entity names.
#[derive(Debug, Default)]
pub struct Mentions {
    /// term → entities whose name has it.
    postings: HashMap<String, Vec<u32>>,
    /// Per entity (by slot): its name and how many distinct terms it has.
    names: Vec<(String, u16)>,
    /// Names without any term (all function words, punctuation), with their lower-case
    /// form: matched as text.
    termless: Vec<(String, String)>,
    /// The highest entity id added.
    pub last_id: i64,
    /// The highest alias row added.
    pub last_alias: i64,
}

impl Mentions {
    /// Adds entity `id` named `name` (ids arrive in increasing order).
    pub fn add(&mut self, id: i64, name: &str) {
        self.last_id = self.last_id.max(id);
        self.index(name, name);
    }

    /// Adds alias row `row`: `alias` is another name of entity `entity` (rows arrive in
    /// increasing order). A mention of the alias finds the entity's name.
    pub fn add_alias(&mut self, row: i64, alias: &str, entity: &str) {
        self.last_alias = self.last_alias.max(row);
        self.index(alias, entity);
    }

    /// Indexes the words of `text` as a mention of `entity`.
    fn index(&mut self, text: &str, entity: &str) {
        let terms: HashSet<String> = crate::memory::index::retrieve::analyze(text).into_iter().collect();
        if terms.is_empty() {
            self.termless.push((entity.to_owned(), text.to_lowercase()));
            return;
        }
        let slot = self.names.len() as u32;
        self.names
            .push((entity.to_owned(), terms.len().min(u16::MAX as usize) as u16));
        for t in terms {
            self.postings.entry(t).or_default().push(slot);
        }
    }

    /// How many names (entities and aliases) are indexed.
    pub fn len(&self) -> usize {
        self.names.len() + self.termless.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entities `text` mentions, best first, at most `max`: every word of the name
    /// there first (longer names before shorter), then names with most of their words
    /// there.
    pub fn find(&self, text: &str, max: usize) -> Vec<String> {
        let input: HashSet<String> = crate::memory::index::retrieve::analyze(text).into_iter().collect();
        let mut hits: HashMap<u32, u16> = HashMap::new();
        for t in &input {
            if let Some(slots) = self.postings.get(t) {
                for s in slots {
                    *hits.entry(*s).or_default() += 1;
                }
            }
        }
        let mut found: Vec<(f64, u16, &str)> = hits
            .into_iter()
            .filter_map(|(slot, n)| {
                let (name, total) = &self.names[slot as usize];
                let share = f64::from(n) / f64::from(*total);
                (share >= 1.0 || (*total >= 2 && share >= PARTIAL)).then_some((share, *total, name.as_str()))
            })
            .collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(b.2)));
        let lower = text.to_lowercase();
        // An entity found by its name and by an alias counts once.
        let mut out: Vec<String> = Vec::new();
        for (_, _, n) in found {
            if out.len() < max && !out.iter().any(|o| o == n) {
                out.push(n.to_owned());
            }
        }
        for (name, low) in &self.termless {
            if out.len() < max && !low.trim().is_empty() && lower.contains(low.as_str()) && !out.contains(name) {
                out.push(name.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(names: &[&str]) -> Mentions {
        let mut m = Mentions::default();
        for (i, n) in names.iter().enumerate() {
            m.add(i as i64 + 1, n);
        }
        m
    }

    #[test]
    fn an_alias_finds_its_entity_once() {
        let mut m = index(&["Melanie", "王伟"]);
        m.add_alias(1, "Mel", "Melanie");
        m.add_alias(2, "Lanie Park", "Melanie");
        m.add_alias(3, "小王", "王伟");
        assert_eq!(m.last_alias, 3);
        assert_eq!(m.find("What does Mel paint?", 5), vec!["Melanie"]);
        assert_eq!(m.find("Melanie, or Mel, or Lanie Park", 5), vec!["Melanie"], "once");
        assert_eq!(m.find("小王住在哪里", 5), vec!["王伟"]);
        assert!(m.find("Mellow music", 5).is_empty());
    }

    #[test]
    fn names_are_found_by_their_words_in_english_and_chinese() {
        let m = index(&[
            "Melanie",
            "Tromsø to study marine biology",
            "龙井虾仁",
            "Visual Studio Code",
            "home",
            "杭州",
        ]);
        assert_eq!(m.len(), 6);
        assert_eq!(m.last_id, 6);
        assert_eq!(m.find("Where did Melanie's sister move to?", 5), vec!["Melanie"]);
        assert_eq!(
            m.find("does Ingrid still study marine biology?", 5),
            vec!["Tromsø to study marine biology"],
            "most of a long name's words"
        );
        assert_eq!(m.find("她在杭州学会了做龙井虾仁", 5), vec!["龙井虾仁", "杭州"]);
        assert!(
            m.find("虾很好吃", 5).is_empty(),
            "one character of a name is not the name"
        );
        assert!(
            m.find("I use Visual Studio every day", 5).is_empty(),
            "two of three words of a three-word name are not enough"
        );
        assert_eq!(m.find("code in visual studio code", 5), vec!["Visual Studio Code"]);
        assert_eq!(m.find("I went home early", 5), vec!["home"]);
        assert!(m.find("my homework", 5).is_empty(), "words, not substrings");
        assert_eq!(m.find("Melanie and 杭州 and home", 2).len(), 2, "capped");
    }

    #[test]
    fn a_name_of_function_words_only_is_matched_as_text() {
        let m = index(&["The Who"]);
        assert_eq!(m.find("I saw the who live", 5), vec!["The Who"]);
        assert!(m.find("whoever", 5).is_empty());
    }
}
