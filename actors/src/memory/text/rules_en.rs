//! The rule distiller's English statements: what someone says about themself ("I live
//! in Lisbon", "I'm allergic to peanuts", "my favourite food is sushi") and about the
//! people and animals around them ("my sister Carla lives in Lisbon", "my sister
//! adopted a greyhound called Biscuit").
//!
//! Like the Chinese rules these are prefix rules on one clause (case-insensitive, no
//! regular expressions): the clause must start with the subject ("I", "we", "my …"),
//! then a known verb phrase, and the value is the rest of the clause, cut at the first
//! connective ("with", "because", …) and rejected when it is longer than a fact.
//! A relative without a name becomes the entity "`<subject>'s <relative>`".

use crate::memory::graph::Triple;

/// Relatives, partners, pets and the like that "my …" may introduce.
const RELATIVES: &[&str] = &[
    "sister",
    "brother",
    "mom",
    "mum",
    "mother",
    "dad",
    "father",
    "parents",
    "wife",
    "husband",
    "partner",
    "son",
    "daughter",
    "kids",
    "children",
    "boyfriend",
    "girlfriend",
    "fiance",
    "fiancee",
    "friend",
    "cousin",
    "aunt",
    "uncle",
    "niece",
    "nephew",
    "grandma",
    "grandmother",
    "grandpa",
    "grandfather",
    "boss",
    "colleague",
    "roommate",
    "neighbor",
    "neighbour",
    "dog",
    "cat",
    "puppy",
    "kitten",
    "pet",
    "horse",
    "rabbit",
    "parrot",
];
/// Words that may stand before a relative ("my little sister", "my best friend").
const RELATIVE_ADJECTIVES: &[&str] = &[
    "little ", "big ", "older ", "younger ", "elder ", "best ", "new ", "old ", "baby ", "twin ",
];
/// Words that end a value: what follows is circumstance, not the fact.
const CUT_AT: &[&str] = &[
    " with ",
    " because ",
    " since ",
    " for ",
    " and ",
    " but ",
    " so ",
    " when ",
    " which ",
    " who ",
    " that ",
    " last ",
    " this ",
    " next ",
    " now",
    " too",
    " as well",
    " right ",
    " these days",
    " every ",
    " at the ",
];
/// Adverbs skipped between the subject and the verb ("I just moved to …").
const ADVERBS: &[&str] = &[
    "just ",
    "recently ",
    "finally ",
    "also ",
    "really ",
    "actually ",
    "still ",
    "now ",
    "currently ",
    "totally ",
    "absolutely ",
    "kind of ",
    "sort of ",
];
/// Openers skipped before the subject ("Yeah, I …" is split at the comma already).
const OPENERS: &[&str] = &[
    "yeah ",
    "yes ",
    "well ",
    "oh ",
    "so ",
    "and ",
    "but ",
    "actually ",
    "also ",
    "honestly ",
    "btw ",
];
/// "I'm a …" that is not an occupation.
const NOT_JOBS: &[&str] = &[
    "fan", "bit", "big", "little", "huge", "lot", "kind", "sort", "great", "good", "bad", "real", "total", "very",
    "really", "lucky", "mess", "wreck",
];
/// Longest value, in words.
const MAX_WORDS: usize = 6;

/// `s` without its case-insensitive ASCII prefix `p`.
fn ci<'a>(s: &'a str, p: &str) -> Option<&'a str> {
    (s.len() >= p.len() && s.is_char_boundary(p.len()) && s[..p.len()].eq_ignore_ascii_case(p)).then(|| &s[p.len()..])
}

fn ci_any<'a>(s: &'a str, ps: &[&str]) -> Option<&'a str> {
    ps.iter().find_map(|p| ci(s, p))
}

fn skip_adverbs(mut s: &str) -> &str {
    while let Some(r) = ci_any(s, ADVERBS) {
        s = r;
    }
    s
}

/// The fact in `raw`: cut at a connective, punctuation trimmed, a leading article
/// dropped; `None` when empty or longer than [`MAX_WORDS`].
fn value(raw: &str) -> Option<String> {
    let mut v = raw.trim();
    let lower = v.to_ascii_lowercase();
    if let Some(i) = CUT_AT.iter().filter_map(|c| lower.find(c)).min() {
        v = &v[..i];
    }
    let v = v.trim().trim_end_matches(|c: char| !c.is_alphanumeric()).trim();
    let v = ci_any(v, &["a ", "an ", "the "]).unwrap_or(v).trim();
    let words = v.split_whitespace().count();
    (words > 0 && words <= MAX_WORDS).then(|| v.to_owned())
}

fn is_capitalised(w: &str) -> bool {
    w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

struct Out<'a> {
    sentence: &'a str,
    triples: Vec<Triple>,
}

impl Out<'_> {
    fn push(&mut self, subject: &str, relation: &str, object: &str) {
        self.triples.push(Triple {
            subject: subject.into(),
            subject_type: "Person".into(),
            relation: relation.into(),
            object: object.into(),
            confidence: 0.8,
            sentence: self.sentence.trim().into(),
            ..Default::default()
        });
    }
}

/// "a greyhound called Biscuit" → ("Biscuit", Some("greyhound")); "a cat" → ("cat", None).
fn named_thing(raw: &str) -> Option<(String, Option<String>)> {
    let lower = raw.to_ascii_lowercase();
    for cue in [" called ", " named ", " whose name is "] {
        if let Some(i) = lower.find(cue) {
            let kind = value(&raw[..i]);
            let name = value(&raw[i + cue.len()..])?;
            return Some((name, kind));
        }
    }
    Some((value(raw)?, None))
}

/// A verb phrase about `who`; `be` when the subject's "am/is/are" was already read.
fn predicate(rest: &str, who: &str, be: bool, out: &mut Out<'_>) {
    let rest = skip_adverbs(rest.trim());
    let rest = if be {
        rest
    } else if let Some(r) = ci_any(rest, &["am ", "is ", "are ", "'m ", "'s ", "'re "]) {
        return predicate(r, who, true, out);
    } else {
        rest
    };
    let has_value = |rel: &str, r: &str, out: &mut Out<'_>| {
        if let Some(v) = value(r) {
            out.push(who, rel, &v);
        }
    };
    if be {
        if let Some(r) = ci(rest, "allergic to ") {
            return has_value("allergic_to", r, out);
        }
        if let Some(r) = ci_any(rest, &["called ", "named "]) {
            return has_value("name", r, out);
        }
        if let Some(r) = ci_any(rest, &["living in ", "based in ", "from "]) {
            let rel = if ci(rest, "from ").is_some() {
                "from"
            } else {
                "lives_in"
            };
            return has_value(rel, r, out);
        }
        if let Some(r) = ci_any(rest, &["working at ", "working for ", "employed at ", "employed by "]) {
            return has_value("works_at", r, out);
        }
        if let Some(r) = ci(rest, "into ") {
            return has_value("likes", r, out);
        }
        if let Some((n, _)) = rest.split_once(" years old")
            && n.trim().chars().all(|c| c.is_ascii_digit())
            && !n.trim().is_empty()
        {
            return out.push(who, "age", n.trim());
        }
        if let Some(r) = ci_any(rest, &["a ", "an "]) {
            let first = r.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
            if !NOT_JOBS.contains(&first.as_str()) && r.split_whitespace().count() <= 3 {
                return has_value("occupation", r, out);
            }
            return;
        }
        // "I'm Sam": one capitalised word is a name.
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() == 1 && is_capitalised(w[0]) && w[0].chars().all(char::is_alphabetic) {
            out.push(who, "name", w[0]);
        }
        return;
    }
    const VERBS: &[(&str, &[&str])] = &[
        ("lives_in", &["live in ", "lives in ", "live at ", "lives at "]),
        ("moved_to", &["moved to ", "move to ", "relocated to "]),
        ("works_at", &["work at ", "works at ", "work for ", "works for "]),
        ("occupation", &["work as ", "works as "]),
        (
            "dislikes",
            &[
                "hate ",
                "hates ",
                "dislike ",
                "dislikes ",
                "don't like ",
                "doesn't like ",
                "do not like ",
                "can't stand ",
                "cannot stand ",
            ],
        ),
        ("loves", &["love ", "loves ", "adore ", "adores "]),
        (
            "likes",
            &["like ", "likes ", "enjoy ", "enjoys ", "prefer ", "prefers "],
        ),
        ("studies", &["study ", "studies ", "major in ", "majored in "]),
    ];
    for (rel, verbs) in VERBS {
        if let Some(r) = ci_any(rest, verbs) {
            return has_value(rel, r, out);
        }
    }
    const GETS: &[(&str, &[&str])] = &[
        ("adopted", &["adopted "]),
        ("has", &["have ", "has ", "got ", "bought ", "own ", "owns "]),
    ];
    for (rel, verbs) in GETS {
        if let Some(r) = ci_any(rest, verbs)
            && let Some((name, kind)) = named_thing(r)
        {
            out.push(who, rel, &name);
            if let Some(k) = kind {
                out.push(&name, "is_a", &k);
            }
            return;
        }
    }
}

/// "my …": a relative (optionally named), a favourite, a name, or "my X is Y".
fn my_statement(rest: &str, subject: &str, out: &mut Out<'_>) {
    if let Some(r) = ci(rest, "name is ") {
        if let Some(v) = value(r) {
            out.push(subject, "name", &v);
        }
        return;
    }
    if let Some(r) = ci_any(rest, &["favorite ", "favourite "])
        && let Some((what, v)) = r.split_once(" is ").or_else(|| r.split_once(" are "))
        && let (Some(what), Some(v)) = (value(what), value(v))
    {
        return out.push(
            subject,
            &format!("favorite_{}", what.to_lowercase().replace(' ', "_")),
            &v,
        );
    }
    let mut r = rest;
    while let Some(x) = ci_any(r, RELATIVE_ADJECTIVES) {
        r = x;
    }
    let word_end = r.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(r.len());
    let rel = r[..word_end].to_ascii_lowercase();
    let rel = rel.as_str();
    if !RELATIVES.contains(&rel) {
        // "my birthday is in May", "my job is nursing".
        if let Some((what, v)) = rest.split_once(" is ")
            && what.split_whitespace().count() <= 2
            && let (Some(what), Some(v)) = (value(what), value(v))
        {
            let rel = if what.eq_ignore_ascii_case("job") {
                "occupation".to_owned()
            } else {
                what.to_lowercase().replace(' ', "_")
            };
            out.push(subject, &rel, &v);
        }
        return;
    }
    let mut after = r[word_end..].trim_start_matches(',').trim_start();
    // "my sister Carla …" / "my sister, Carla, …"
    let mut name: Option<String> = None;
    let parts: Vec<&str> = after.split_whitespace().take(2).collect();
    let caps = parts
        .iter()
        .take_while(|w| is_capitalised(w) && w.trim_end_matches(',').chars().all(char::is_alphabetic))
        .count();
    if caps > 0 {
        let n: Vec<&str> = parts[..caps].iter().map(|w| w.trim_end_matches(',')).collect();
        let joined = n.join(" ");
        name = Some(joined.clone());
        let consumed: usize = after.find(n[caps - 1]).map_or(0, |i| i + n[caps - 1].len());
        after = after[consumed..].trim_start_matches(',').trim_start();
    }
    // "my sister's name is Carla", "my dog is called Rex".
    if let Some(r) = ci_any(
        after,
        &[
            "'s name is ",
            "’s name is ",
            "is called ",
            "is named ",
            "called ",
            "named ",
        ],
    ) {
        if let Some(v) = value(r) {
            out.push(subject, rel, &v);
        }
        return;
    }
    let display = if subject == crate::memory::graph::USER {
        "user"
    } else {
        subject
    };
    let who = name.clone().unwrap_or_else(|| format!("{display}'s {rel}"));
    let before = out.triples.len();
    predicate(after, &who, false, out);
    if name.is_some() || out.triples.len() > before {
        out.push(subject, rel, &who);
    }
}

/// The facts of one English clause said by `subject`.
pub fn extract_clause(clause: &str, subject: &str, sentence: &str) -> Vec<Triple> {
    let mut c = clause.trim();
    while let Some(r) = ci_any(c, OPENERS) {
        c = r.trim_start();
    }
    let mut out = Out {
        sentence,
        triples: Vec::new(),
    };
    // Another name ("everyone calls me Mel"): the graph makes it an alias of the speaker.
    if let Some(r) = ci_any(c, crate::memory::text::aliases::EN_CUES) {
        if let Some(v) = value(r) {
            out.push(subject, "nickname", &v);
        }
        return out.triples;
    }
    if let Some(r) = ci(c, "my ") {
        my_statement(r, subject, &mut out);
    } else if let Some(r) = ci_any(c, &["i am ", "i'm ", "i’m ", "im ", "we are ", "we're "]) {
        predicate(r, subject, true, &mut out);
    } else if let Some(r) = ci_any(c, &["i ", "we "]) {
        predicate(r, subject, false, &mut out);
    }
    out.triples
}

/// Is `c` an English clause (ASCII letters, no CJK)?
pub fn is_english(c: &str) -> bool {
    c.chars().any(|ch| ch.is_ascii_alphabetic()) && !c.chars().any(|ch| ('\u{4E00}'..='\u{9FFF}').contains(&ch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(text: &str) -> Vec<(String, String, String)> {
        extract_clause(text, "用户", text)
            .into_iter()
            .map(|t| (t.subject, t.relation, t.object))
            .collect()
    }

    fn f(s: &str, r: &str, o: &str) -> (String, String, String) {
        (s.into(), r.into(), o.into())
    }

    #[test]
    fn self_statements() {
        assert_eq!(
            facts("I live in Lisbon with my two cats"),
            [f("用户", "lives_in", "Lisbon")]
        );
        assert_eq!(facts("I just moved to New York"), [f("用户", "moved_to", "New York")]);
        assert_eq!(facts("I work at a bakery"), [f("用户", "works_at", "bakery")]);
        assert_eq!(facts("I'm allergic to peanuts"), [f("用户", "allergic_to", "peanuts")]);
        assert_eq!(facts("I love hiking with my dog"), [f("用户", "loves", "hiking")]);
        assert_eq!(facts("I really hate cilantro"), [f("用户", "dislikes", "cilantro")]);
        assert_eq!(facts("I'm a nurse"), [f("用户", "occupation", "nurse")]);
        assert_eq!(facts("I'm 34 years old"), [f("用户", "age", "34")]);
        assert_eq!(facts("My name is Sam"), [f("用户", "name", "Sam")]);
        assert_eq!(
            facts("my favourite food is sushi"),
            [f("用户", "favorite_food", "sushi")]
        );
        assert_eq!(facts("My birthday is in May"), [f("用户", "birthday", "in May")]);
        assert_eq!(facts("Everyone calls me Mel"), [f("用户", "nickname", "Mel")]);
        assert_eq!(facts("my friends call me Jo"), [f("用户", "nickname", "Jo")]);
        assert_eq!(facts("My nickname is Sunny"), [f("用户", "nickname", "Sunny")]);
    }

    #[test]
    fn relatives_and_pets_named_or_not() {
        assert_eq!(
            facts("my sister adopted a greyhound called Biscuit"),
            [
                f("user's sister", "adopted", "Biscuit"),
                f("Biscuit", "is_a", "greyhound"),
                f("用户", "sister", "user's sister")
            ]
        );
        assert_eq!(
            facts("My sister Carla lives in Lisbon"),
            [f("Carla", "lives_in", "Lisbon"), f("用户", "sister", "Carla")]
        );
        assert_eq!(facts("my dog is called Rex"), [f("用户", "dog", "Rex")]);
        assert_eq!(facts("my little brother's name is Tom"), [f("用户", "brother", "Tom")]);
        assert_eq!(
            facts("My best friend works at Google"),
            [
                f("user's friend", "works_at", "Google"),
                f("用户", "friend", "user's friend")
            ]
        );
    }

    #[test]
    fn other_sentences_state_nothing() {
        for t in [
            "I'm a big fan of jazz",
            "I think so",
            "It was great",
            "I'm tired",
            "I did not know you had a sister",
            "my goodness",
        ] {
            assert!(facts(t).is_empty(), "{t}: {:?}", facts(t));
        }
        assert!(
            facts("I love the way the light falls on the old harbour in the evening").is_empty(),
            "too long"
        );
    }
}
