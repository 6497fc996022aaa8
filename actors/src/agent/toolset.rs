//! Which tools a request offers when not all of them fit (kernel spec §3.8's per-plugin
//! catalogue and `get_plugin_tools`).
//!
//! Why: every schema rides along with every request. With the bundled plugins that is
//! ~60 tools, ~6k tokens — at an 8k window (the conservative default for an unknown
//! model) the fixed prompt and the schemas would take the whole target and recalled
//! memory would get nothing, which breaks the daemon's central promise. So when the
//! schemas would take more than their share of the prompt budget, a request offers a
//! subset and the system prompt lists the rest as a catalogue (owner, names, what the
//! first one does); the model asks `get_plugin_tools` for an owner's schemas, and from
//! the next step of the same turn that owner's tools are offered. A deferred tool stays
//! callable by name: the tool runner runs whatever the registry holds.
//!
//! The policy is a plain function of the tools' sizes, the input's terms and the owners
//! expanded so far; the same input gives the same subset on every step of a turn, so a
//! tool never disappears mid-turn.
//!
//! Shares (of `available` = target − fixed, see [`super::budget`]): everything is offered
//! while the schemas take at most two thirds (memory keeps its full third then). Past
//! that, the first offer is held to a half and expansions may grow it to two thirds: the
//! sixth in between is the room one owner's schemas get inside the same turn, so the
//! budget computed at the turn's start stays true after an expansion.

use std::collections::BTreeSet;

/// What the policy knows of one tool (computed once per registry change).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolMeta {
    pub name: String,
    /// The plugin (or kernel part) that owns it: `get_plugin_tools`' argument.
    pub owner: String,
    /// Tokens of its schema as sent.
    pub tokens: usize,
    /// Analysed terms of its name (weighted double) and description.
    pub name_terms: Vec<String>,
    pub desc_terms: Vec<String>,
    /// Its description's first sentence, for the catalogue.
    pub summary: String,
}

/// Tools offered whatever the input, when a subset is offered: the catalogue's own
/// tool, the channel list, the skill bodies and the two read paths into memory.
pub const ALWAYS: &[&str] = &[
    crate::plugins::manager::PLUGIN_TOOLS,
    "output_list_channels",
    "skill_info",
    "memory_recall",
    "knowledge_search",
];

/// The room a request's tools get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Everything is offered up to this many tokens.
    pub full: usize,
    /// A subset's first offer (catalogue included) stays within this.
    pub first: usize,
    /// Expanded owners may grow the offer up to this.
    pub expanded: usize,
}

impl Room {
    /// The room out of `available` tokens (target − fixed).
    pub fn of(available: usize) -> Self {
        Self {
            full: available * 2 / 3,
            first: available / 2,
            expanded: available * 2 / 3,
        }
    }
}

/// The policy's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Every tool.
    All,
    /// These tools (indices into the metas, in registry order), their tokens with the
    /// catalogue's, and the catalogue of the rest for the system prompt.
    Subset {
        offered: Vec<usize>,
        tokens: usize,
        catalogue: String,
    },
}

/// Chooses the tools of one request.
///
/// * `all_tokens`: the tokens of the whole list as sent;
/// * `scores`: each tool's relevance to the input ([`relevance`]): the choice depends
///   on the input through these alone, so two inputs of equal scores get one choice;
/// * `always`: names offered whatever the input (see [`ALWAYS`], plus the send tools of
///   the input's channel when it is asynchronous);
/// * `expanded`: owners the model asked about (or called a tool of) in this turn.
pub fn choose(
    metas: &[ToolMeta],
    all_tokens: usize,
    room: Room,
    scores: &[usize],
    always: &dyn Fn(&str) -> bool,
    expanded: &BTreeSet<String>,
) -> Choice {
    if all_tokens <= room.full {
        return Choice::All;
    }
    let mut chosen = vec![false; metas.len()];
    let mut used = 0usize;
    for (i, m) in metas.iter().enumerate() {
        if always(&m.name) {
            chosen[i] = true;
            used += m.tokens;
        }
    }
    // By relevance to the input, then in registry order: what fits the first offer.
    let mut order: Vec<(usize, usize)> = metas
        .iter()
        .enumerate()
        .filter(|(i, _)| !chosen[*i])
        .map(|(i, _)| (i, scores.get(i).copied().unwrap_or(0)))
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut added = Vec::new();
    for &(i, _) in &order {
        if used + metas[i].tokens <= room.first {
            chosen[i] = true;
            used += metas[i].tokens;
            added.push(i);
        }
    }
    // The catalogue of what is left comes out of the same room: give back the least
    // relevant picks until both fit (a deferred tool costs a name, its schema far more).
    // Counted by line, each line remembered (`count_memo`): a pop changes one owner's
    // line, and the same lines come back turn after turn, so the loop encodes almost
    // nothing. The per-line sum is an estimate for the loop only; the final count is of
    // the catalogue as sent (and the loop resumes in the unlikely case it is larger).
    let mut cat = catalogue_estimate(metas, &chosen);
    loop {
        while used + cat > room.first
            && let Some(i) = added.pop()
        {
            chosen[i] = false;
            used -= metas[i].tokens;
            cat = catalogue_estimate(metas, &chosen);
        }
        let exact = crate::memory::tokens::count_memo(&catalogue(metas, &chosen));
        if exact <= cat || used + exact <= room.first || added.is_empty() {
            cat = cat.max(exact);
            break;
        }
        cat = exact;
    }
    // Owners asked about in this turn: whole, while the expansion room lasts (a tool
    // left out stays callable by name; `get_plugin_tools` gave the model its schema).
    // The catalogue only shrinks as tools join, so its current size is an upper bound.
    for (i, m) in metas.iter().enumerate() {
        if !chosen[i] && expanded.contains(&m.owner) && used + m.tokens + cat <= room.expanded {
            chosen[i] = true;
            used += m.tokens;
        }
    }
    let catalogue = catalogue(metas, &chosen);
    let offered: Vec<usize> = (0..metas.len()).filter(|&i| chosen[i]).collect();
    if offered.len() == metas.len() {
        return Choice::All;
    }
    Choice::Subset {
        offered,
        tokens: used + crate::memory::tokens::count_memo(&catalogue),
        catalogue,
    }
}

/// Each tool's relevance to the input's analysed terms
/// ([`crate::memory::retrieve::analyze`]), in the order of `metas`.
pub fn relevance(metas: &[ToolMeta], query: &[String]) -> Vec<usize> {
    let mut terms: Vec<&str> = query.iter().map(String::as_str).collect();
    terms.sort_unstable();
    terms.dedup();
    metas.iter().map(|m| score(m, &terms)).collect()
}

/// How well a tool matches the input's distinct terms: a term of its name counts twice,
/// one of its description once.
fn score(m: &ToolMeta, terms: &[&str]) -> usize {
    terms
        .iter()
        .map(|t| {
            if m.name_terms.iter().any(|n| n == t) {
                2
            } else if m.desc_terms.iter().any(|d| d == t) {
                1
            } else {
                0
            }
        })
        .sum()
}

/// The deferred tools by owner, in registry order.
fn deferred<'a>(metas: &'a [ToolMeta], chosen: &[bool]) -> Vec<(&'a str, Vec<&'a ToolMeta>)> {
    let mut owners: Vec<(&str, Vec<&ToolMeta>)> = Vec::new();
    for (m, _) in metas.iter().zip(chosen).filter(|(_, c)| !**c) {
        match owners.iter_mut().find(|(o, _)| *o == m.owner) {
            Some((_, list)) => list.push(m),
            None => owners.push((&m.owner, vec![m])),
        }
    }
    owners
}

const CATALOGUE_HEAD: &str = "\n\n# More tools\nTo save room, these tools are not listed with their parameters. Call \
     get_plugin_tools with {\"plugin\": \"<owner>\"} to see an owner's tools; from your next \
     step on they are offered.\n";

/// One owner's line of the catalogue.
fn catalogue_line(owner: &str, list: &[&ToolMeta]) -> String {
    let names: Vec<&str> = list.iter().map(|m| m.name.as_str()).collect();
    format!("- {owner}: {} — {}\n", names.join(", "), list[0].summary)
}

/// The catalogue of deferred tools, grouped by owner in registry order.
fn catalogue(metas: &[ToolMeta], chosen: &[bool]) -> String {
    let owners = deferred(metas, chosen);
    if owners.is_empty() {
        return String::new();
    }
    let mut s = String::from(CATALOGUE_HEAD);
    for (owner, list) in owners {
        s.push_str(&catalogue_line(owner, &list));
    }
    s
}

/// The catalogue's tokens as the sum of its parts, each remembered. The o200k
/// pre-tokenizer does not join pieces across a `\n` followed by `-`, so this is the
/// exact count in practice; [`choose`] checks the final text all the same.
fn catalogue_estimate(metas: &[ToolMeta], chosen: &[bool]) -> usize {
    let owners = deferred(metas, chosen);
    if owners.is_empty() {
        return 0;
    }
    let count = crate::memory::tokens::count_memo;
    count(CATALOGUE_HEAD) + owners.iter().map(|(o, l)| count(&catalogue_line(o, l))).sum::<usize>()
}

/// A description's first sentence, at most 60 bytes (cut at a character boundary).
pub fn summary_of(description: &str) -> String {
    let first = description
        .split_terminator(['.', '\n', '。'])
        .next()
        .unwrap_or("")
        .trim();
    if first.len() <= 60 {
        return first.to_owned();
    }
    let mut end = 60;
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &first[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, owner: &str, tokens: usize, desc: &str) -> ToolMeta {
        let analyze = crate::memory::retrieve::analyze;
        ToolMeta {
            name: name.into(),
            owner: owner.into(),
            tokens,
            name_terms: analyze(name),
            desc_terms: analyze(desc),
            summary: summary_of(desc),
        }
    }

    fn tools() -> Vec<ToolMeta> {
        vec![
            meta("get_plugin_tools", "builtin.pluginmgr", 90, "List tools by owner."),
            meta("memory_recall", "builtin.agent", 130, "Recall facts about an entity."),
            meta("files_read", "files", 150, "Read a text file inside the roots."),
            meta("files_write", "files", 140, "Write a text file inside the roots."),
            meta(
                "terminal_create",
                "terminal",
                220,
                "Open a terminal session (a shell in a PTY).",
            ),
            meta("terminal_send", "terminal", 150, "Type text into a terminal session."),
            meta("web_fetch", "web", 160, "Fetch a web page as readable text."),
            meta("timer_set", "timer", 120, "Set a reminder at a time."),
        ]
    }

    fn always(n: &str) -> bool {
        ALWAYS.contains(&n)
    }

    fn names(metas: &[ToolMeta], c: &Choice) -> Vec<String> {
        match c {
            Choice::All => metas.iter().map(|m| m.name.clone()).collect(),
            Choice::Subset { offered, .. } => offered.iter().map(|&i| metas[i].name.clone()).collect(),
        }
    }

    #[test]
    fn everything_is_offered_while_it_fits_two_thirds() {
        let t = tools();
        let total: usize = t.iter().map(|m| m.tokens).sum();
        let room = Room::of(total * 3 / 2);
        assert_eq!(room.full, total);
        let c = choose(&t, total, room, &relevance(&t, &[]), &always, &BTreeSet::new());
        assert_eq!(c, Choice::All);
    }

    #[test]
    fn a_small_window_offers_the_relevant_tools_and_lists_the_rest() {
        let t = tools();
        let total: usize = t.iter().map(|m| m.tokens).sum();
        let room = Room::of(1400);
        let query = crate::memory::retrieve::analyze("please read the file notes.txt");
        let c = choose(&t, total, room, &relevance(&t, &query), &always, &BTreeSet::new());
        let offered = names(&t, &c);
        assert!(offered.contains(&"files_read".to_owned()), "{offered:?}");
        assert!(offered.contains(&"get_plugin_tools".to_owned()) && offered.contains(&"memory_recall".to_owned()));
        let Choice::Subset {
            tokens,
            catalogue,
            offered: idx,
        } = &c
        else {
            panic!("{c:?}")
        };
        assert!(*tokens <= room.first, "{tokens} > {}", room.first);
        let sum: usize = idx.iter().map(|&i| t[i].tokens).sum();
        assert_eq!(*tokens, sum + crate::memory::tokens::count(catalogue));
        // Whatever was left out is in the catalogue, by owner.
        for m in t.iter().filter(|m| !offered.contains(&m.name)) {
            assert!(
                catalogue.contains(&m.name) && catalogue.contains(&format!("- {}:", m.owner)),
                "{catalogue}"
            );
        }
        assert!(!catalogue.contains("files_read"), "{catalogue}");
        // The loop's per-line count is the count of the text as sent.
        let mask: Vec<bool> = (0..t.len()).map(|i| idx.contains(&i)).collect();
        assert_eq!(catalogue_estimate(&t, &mask), crate::memory::tokens::count(catalogue));
        // The same input gives the same subset (a tool never vanishes mid-turn).
        assert_eq!(
            c,
            choose(&t, total, room, &relevance(&t, &query), &always, &BTreeSet::new())
        );
    }

    #[test]
    fn an_owner_asked_about_joins_the_offer_within_the_expansion_room() {
        let t = tools();
        let total: usize = t.iter().map(|m| m.tokens).sum();
        let room = Room {
            full: 1000,
            first: 700,
            expanded: 1100,
        };
        let query = crate::memory::retrieve::analyze("what time is it");
        let first = choose(&t, total, room, &relevance(&t, &query), &always, &BTreeSet::new());
        assert!(!names(&t, &first).contains(&"terminal_create".to_owned()), "{first:?}");
        let expanded: BTreeSet<String> = ["terminal".to_owned()].into();
        let next = choose(&t, total, room, &relevance(&t, &query), &always, &expanded);
        let offered = names(&t, &next);
        assert!(offered.contains(&"terminal_create".to_owned()) && offered.contains(&"terminal_send".to_owned()));
        for n in names(&t, &first) {
            assert!(offered.contains(&n), "{n} stays offered after the expansion");
        }
        let Choice::Subset { tokens, .. } = next else { panic!() };
        assert!(tokens <= room.expanded);
    }

    #[test]
    fn summaries_are_short_and_cut_on_a_character() {
        assert_eq!(summary_of("Read a file. Then more."), "Read a file");
        let long = "读".repeat(40);
        let s = summary_of(&long);
        assert!(s.len() <= 64 && s.ends_with('…'), "{s}");
    }
}
