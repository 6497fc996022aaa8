//! Graph maintenance decided by the model: the merge heartbeat proposes entities that
//! look like the same thing, the review heartbeat asks the model to check relations
//! against the sentence they came from. Both only *write a task* (kernel self-input);
//! the model decides and acts through `memory_merge` / `memory_edit`.
//!
//! Plain functions; the heartbeat actor is in [`crate::memory::lifecycle::graph_heartbeat`].

use std::collections::{HashMap, HashSet};

use crate::i18n::Msg;
use crate::memory::graph::{Entity, Relation, Triple};
use crate::memory::store::{Document, Passage};

/// The graph session a document's facts are committed under: deleting the document
/// finds them by it (`GraphStore::forget_source`).
pub fn doc_session(doc_id: &str) -> String {
    format!("doc:{doc_id}")
}

/// Speakers whose turns are the agent's own words: no facts about anyone are taken
/// from them.
fn is_agent(speaker: &str) -> bool {
    matches!(speaker, "assistant" | "agent")
}

/// The facts in a cold document, each group with the time it was said: the
/// self-statements the rule distiller finds ([`crate::memory::text::rules::extract_triples`], Chinese
/// and English). An archived conversation's passages are said by a named speaker (an
/// imported conversation's `Caroline`) or, on the owner's channels, by the user; a
/// written document (`doc_commit`, source `manual`) is the owner's, line by line, at its
/// writing. Each fact keeps its source sentence as `[YYYY-MM-DD] Speaker: text`, so a
/// recalled fact brings when and by whom it was said.
///
/// No document metadata becomes a fact (the reference's `文档 →主题→ …` and `→来源→`
/// triples tied every document's topic to one entity, in Chinese whatever the language).
pub fn doc_to_triples(doc: &Document, passages: &[Passage]) -> Vec<(i64, Vec<Triple>)> {
    if doc.source == "graph" {
        return Vec::new();
    }
    let said: Vec<(i64, String, String)> = if doc.source == "manual" {
        doc.content
            .lines()
            .map(|l| (doc.created_at_ms, String::new(), l.trim().to_owned()))
            .collect()
    } else {
        passages
            .iter()
            .filter(|p| !is_agent(&p.speaker))
            .map(|p| (p.ts_ms, p.speaker.trim().to_owned(), p.text.trim().to_owned()))
            .collect()
    };
    let mut out = Vec::new();
    for (ts, speaker, text) in said {
        if text.is_empty() {
            continue;
        }
        let input = crate::memory::text::rules::said_by(&speaker, &text);
        let (y, m, d) = crate::memory::civil_from_days(ts.div_euclid(86_400_000));
        let who = if speaker.is_empty() {
            String::new()
        } else {
            format!("{speaker}: ")
        };
        let sentence = format!(
            "[{y:04}-{m:02}-{d:02}] {}",
            crate::memory::truncate_chars(&format!("{who}{text}"), 300, "…")
        );
        let triples: Vec<Triple> = crate::memory::text::rules::extract_triples(&input)
            .into_iter()
            .map(|mut t| {
                t.sentence = sentence.clone();
                t
            })
            .collect();
        if !triples.is_empty() {
            out.push((ts, triples));
        }
    }
    out
}

/// Similarity above which two entities are proposed for a merge.
pub const MERGE_THRESHOLD: f64 = 0.75;

fn bigrams(s: &str) -> HashSet<(char, char)> {
    let cs: Vec<char> = s.chars().collect();
    cs.windows(2).map(|w| (w[0], w[1])).collect()
}

/// Character-bigram Jaccard similarity. Identical names are 1; a name under two
/// characters is 1 only against the same character, else 0.
pub fn bigram_jaccard(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    if a.chars().count() < 2 || b.chars().count() < 2 {
        return 0.0;
    }
    let (x, y) = (bigrams(a), bigrams(b));
    let inter = x.intersection(&y).count();
    let union = x.union(&y).count();
    if union == 0 { 0.0 } else { inter as f64 / union as f64 }
}

/// Up to `max` pairs of distinct entities whose names are more similar than
/// [`MERGE_THRESHOLD`], most similar first. Only pairs sharing a bigram are compared
/// (a pair sharing none has similarity 0), so this stays fast on large graphs.
pub fn merge_candidates(entities: &[Entity], max: usize) -> Vec<(Entity, Entity, f64)> {
    merge_candidates_except(entities, max, &HashSet::new(), &HashMap::new(), None).0
}

/// Entities whose names are embedded for the merge round (the most mentioned first):
/// the pairwise comparison is quadratic.
pub const MERGE_EMBED_LIMIT: usize = 400;

/// [`merge_candidates`] skipping pairs under a no-merge marker (keys of
/// [`crate::memory::graph::no_merge_key`]); also returns the blocked pairs that came up, whose
/// markers then count one round down.
///
/// `vectors` (name → unit vector of one space) add the spec's second measure: a pair's
/// similarity is the larger of the bigram Jaccard and the names' cosine.
///
/// `proposed` (pair key → when a round proposed it): such a pair counts again only once
/// one of its entities was updated after that — what the model was asked about and did
/// not merge is not asked again until it changes.
pub fn merge_candidates_except(
    entities: &[Entity],
    max: usize,
    blocked: &HashSet<String>,
    vectors: &HashMap<String, Vec<f32>>,
    proposed: Option<&HashMap<String, i64>>,
) -> (Vec<(Entity, Entity, f64)>, Vec<String>) {
    let grams: Vec<HashSet<(char, char)>> = entities.iter().map(|e| bigrams(&e.name)).collect();
    let mut index: HashMap<(char, char), Vec<usize>> = HashMap::new();
    for (i, g) in grams.iter().enumerate() {
        for b in g {
            index.entry(*b).or_default().push(i);
        }
    }
    let mut seen: HashSet<(usize, usize)> = HashSet::new();
    let mut out: Vec<(usize, usize, f64)> = Vec::new();
    for list in index.values() {
        for (k, &i) in list.iter().enumerate() {
            for &j in &list[k + 1..] {
                if !seen.insert((i.min(j), i.max(j))) {
                    continue;
                }
                let sim = bigram_jaccard(&entities[i].name, &entities[j].name);
                if sim > MERGE_THRESHOLD {
                    out.push((i.min(j), i.max(j), sim));
                }
            }
        }
    }
    // The dense side: every pair of embedded names (few hundred at most).
    let embedded: Vec<(usize, &Vec<f32>)> = entities
        .iter()
        .enumerate()
        .filter_map(|(i, e)| vectors.get(&e.name).map(|v| (i, v)))
        .collect();
    for (k, &(i, vi)) in embedded.iter().enumerate() {
        for &(j, vj) in &embedded[k + 1..] {
            let cos = f64::from(crate::memory::embed::cosine(vi, vj));
            if cos <= MERGE_THRESHOLD {
                continue;
            }
            let key = (i.min(j), i.max(j));
            match out.iter_mut().find(|(a, b, _)| (*a, *b) == key) {
                Some(p) => p.2 = p.2.max(cos),
                None => out.push((key.0, key.1, cos)),
            }
        }
    }
    if let Some(proposed) = proposed {
        out.retain(|&(i, j, _)| {
            let key = crate::memory::graph::no_merge_key(&entities[i].name, &entities[j].name);
            proposed
                .get(&key)
                .is_none_or(|at| entities[i].updated_at_ms.max(entities[j].updated_at_ms) > *at)
        });
    }
    out.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    let mut skipped = Vec::new();
    let mut chosen = Vec::new();
    for (i, j, s) in out {
        let key = crate::memory::graph::no_merge_key(&entities[i].name, &entities[j].name);
        if blocked.contains(&key) {
            skipped.push(key);
        } else if chosen.len() < max {
            chosen.push((entities[i].clone(), entities[j].clone(), s));
        }
    }
    (chosen, skipped)
}

/// The consolidation task for one merge candidate.
pub fn merge_task(a: &Entity, b: &Entity, similarity: f64) -> String {
    Msg::MergeTask {
        a: &a.name,
        a_kind: &a.kind,
        a_mentions: a.mention_count as u64,
        b: &b.name,
        b_kind: &b.kind,
        b_mentions: b.mention_count as u64,
        percent: similarity * 100.0,
    }
    .text()
}

/// The review task for one relation that still has its source sentence.
pub fn review_task(r: &Relation) -> String {
    Msg::ReviewTask {
        sentence: r.sentence.as_deref().unwrap_or(""),
        source: &r.source,
        relation: &r.relation,
        target: &r.target,
        confidence: r.confidence,
    }
    .text()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: i64, name: &str) -> Entity {
        Entity {
            id,
            name: name.into(),
            kind: "Concept".into(),
            mention_count: id,
            updated_at_ms: 0,
        }
    }

    #[test]
    fn jaccard_edge_cases() {
        assert_eq!(bigram_jaccard("北京", "北京"), 1.0);
        assert_eq!(bigram_jaccard("a", "b"), 0.0);
        assert_eq!(bigram_jaccard("a", "ab"), 0.0);
        assert!((bigram_jaccard("北京市", "北京") - 0.5).abs() < 1e-9);
        assert!(bigram_jaccard("OpenAI GPT-4o", "OpenAI GPT-4") > MERGE_THRESHOLD);
    }

    #[test]
    fn name_embeddings_add_pairs_jaccard_misses_and_markers_skip_pairs() {
        let es = [
            e(1, "NYC"),
            e(2, "New York City"),
            e(3, "banana"),
            e(4, "OpenAI GPT-4o"),
            e(5, "OpenAI GPT-4"),
        ];
        let vectors: HashMap<String, Vec<f32>> = [
            ("NYC", vec![1.0, 0.1]),
            ("New York City", vec![0.95, 0.15]),
            ("banana", vec![0.0, 1.0]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let (chosen, skipped) = merge_candidates_except(&es, 5, &HashSet::new(), &vectors, None);
        let names: Vec<(String, String)> = chosen
            .iter()
            .map(|(a, b, _)| (a.name.clone(), b.name.clone()))
            .collect();
        assert!(names.contains(&("NYC".into(), "New York City".into())), "{names:?}");
        assert!(
            names.contains(&("OpenAI GPT-4o".into(), "OpenAI GPT-4".into())),
            "{names:?}"
        );
        assert!(!names.iter().any(|(a, b)| a == "banana" || b == "banana"));
        assert!(skipped.is_empty());
        let blocked: HashSet<String> = [crate::memory::graph::no_merge_key("New York City", "NYC")].into();
        let (chosen, skipped) = merge_candidates_except(&es, 5, &blocked, &vectors, None);
        assert_eq!(chosen.len(), 1);
        assert_eq!(skipped, vec!["NYC||New York City".to_string()]);
    }

    #[test]
    fn a_pair_proposed_before_is_proposed_again_only_once_it_changed() {
        let mut es = vec![e(1, "Visual Studio Code"), e(2, "Visual Studio Code!")];
        es[0].updated_at_ms = 100;
        es[1].updated_at_ms = 200;
        let none = (&HashSet::new(), &HashMap::new());
        let key = crate::memory::graph::no_merge_key("Visual Studio Code", "Visual Studio Code!");
        let at = |t: i64| HashMap::from([(key.clone(), t)]);
        assert_eq!(
            merge_candidates_except(&es, 5, none.0, none.1, Some(&at(100))).0.len(),
            1
        );
        assert!(
            merge_candidates_except(&es, 5, none.0, none.1, Some(&at(200)))
                .0
                .is_empty(),
            "proposed before and unchanged since: not again"
        );
        es[0].updated_at_ms = 300;
        assert_eq!(
            merge_candidates_except(&es, 5, none.0, none.1, Some(&at(200))).0.len(),
            1
        );
    }

    #[test]
    fn candidates_are_similar_pairs_most_similar_first_capped() {
        let es = vec![
            e(1, "Visual Studio Code"),
            e(2, "Visual Studio Code!"),
            e(3, "北京"),
            e(4, "上海"),
            e(5, "machine learning"),
            e(6, "machine learnings"),
        ];
        let c = merge_candidates(&es, 5);
        let names: Vec<(&str, &str)> = c.iter().map(|(a, b, _)| (a.name.as_str(), b.name.as_str())).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains(&("Visual Studio Code", "Visual Studio Code!")));
        assert!(c[0].2 >= c[1].2);
        assert_eq!(merge_candidates(&es, 1).len(), 1);
    }

    fn passage(ts_ms: i64, speaker: &str, text: &str) -> Passage {
        Passage {
            id: 1,
            doc_id: "d".into(),
            ts_ms,
            speaker: speaker.into(),
            text: text.into(),
            tokens: 0,
            principal: String::new(),
        }
    }

    #[test]
    fn cold_passages_give_their_speakers_facts_dated_with_their_sentence() {
        let day = 19_485 * 86_400_000; // 2023-05-08
        let ps = [
            passage(day, "Caroline", "I live in Boston and my dog is called Rex"),
            passage(day + 1, "assistant", "I am an assistant"),
            passage(day + 2, "http", "我叫李四，我住在上海"),
            passage(day + 3, "Melanie", "Nice weather today"),
        ];
        let conversation = Document {
            id: "d".into(),
            created_at_ms: day,
            source: "context_archived".into(),
            summary: String::new(),
            content: String::new(),
            access_count: 1,
        };
        let got = doc_to_triples(&conversation, &ps);
        assert_eq!(
            got.len(),
            2,
            "the agent's words and turns without facts give nothing: {got:?}"
        );
        assert_eq!(got[0].0, day);
        let caroline: Vec<(&str, &str)> = got[0]
            .1
            .iter()
            .map(|t| (t.subject.as_str(), t.object.as_str()))
            .collect();
        assert!(caroline.iter().all(|(s, _)| *s == "Caroline"), "{caroline:?}");
        assert!(caroline.iter().any(|(_, o)| o.contains("Boston")), "{caroline:?}");
        assert_eq!(
            got[0].1[0].sentence,
            "[2023-05-08] Caroline: I live in Boston and my dog is called Rex"
        );
        let owner: Vec<(&str, &str, &str)> = got[1]
            .1
            .iter()
            .map(|t| (t.subject.as_str(), t.relation.as_str(), t.object.as_str()))
            .collect();
        assert_eq!(owner, vec![("用户", "姓名", "李四"), ("用户", "居住地", "上海")]);
        assert!(
            got.iter().flat_map(|(_, ts)| ts).all(|t| t.subject != "文档"),
            "no document metadata facts"
        );
        // A written document is the owner's, line by line, whatever its summary.
        let written = Document {
            source: "manual".into(),
            summary: "个人信息".into(),
            content: "我叫李四，我住在上海\n今天天气很好".into(),
            ..conversation
        };
        let got = doc_to_triples(&written, &[passage(day, "document", "个人信息: 我叫李四，我住在上海")]);
        let facts: Vec<(&str, &str, &str)> = got[0]
            .1
            .iter()
            .map(|t| (t.subject.as_str(), t.relation.as_str(), t.object.as_str()))
            .collect();
        assert_eq!(facts, vec![("用户", "姓名", "李四"), ("用户", "居住地", "上海")]);
        assert_eq!(got[0].1[0].sentence, "[2023-05-08] 我叫李四，我住在上海");
        assert!(
            doc_to_triples(
                &Document {
                    source: "graph".into(),
                    ..written
                },
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn task_texts_carry_what_the_model_needs() {
        let t = merge_task(&e(1, "张三"), &e(2, "张三丰"), 0.8);
        assert!(t.starts_with(
            "[Memory maintenance task]\nType: entity_merge\nDescription: the entity \"张三\" (type: Concept, mentioned 1 times) and \"张三丰\""
        ));
        assert!(t.contains("80% similar"));
        let r = Relation {
            id: 1,
            source: "用户".into(),
            target: "北京".into(),
            relation: "居住地".into(),
            confidence: 0.8,
            session: String::new(),
            turn: 0,
            created_at_ms: 0,
            sentence: Some("我住在北京".into()),
        };
        assert!(review_task(&r).starts_with(
            "[Relation review] Original sentence: '我住在北京'\nCurrent triple: (用户 → 居住地 → 北京) confidence 0.80"
        ));
    }
}
