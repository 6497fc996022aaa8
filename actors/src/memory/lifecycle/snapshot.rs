//! The graph → document snapshot (the seed's `syncGraphToDocs`, run with the distill
//! heartbeat): what the graph holds about each entity whose facts changed becomes a
//! readable document `graph:<entity>` in the document store, replaced as the facts
//! change.
//!
//! Why: the graph is a derived, lossy store whose rows a person cannot read; the
//! snapshot is its human-readable, searchable face — `doc_query` finds it, the Memory
//! view lists it, a backup carries it as text — with each fact's source sentence. It is
//! never a recall passage (`MemoryStore::upsert_snapshot` says why) and never distilled
//! back into the graph.
//!
//! [`render`] is the pure part; [`sync`] asks the graph what changed since the last
//! round's high-water mark and writes each entity (at most [`PER_ROUND`] a round, so a
//! large graph is worked off over several rounds instead of in one long one).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::addr::TAddr;
use crate::memory::documents::{DocumentsActor, UpsertSnapshot};
use crate::memory::graph::actor::{ChangedSince, GraphActor};
use crate::memory::graph::store::{Entity, Relation};

/// Entities written in one round at most.
pub const PER_ROUND: usize = 200;

/// One entity's document: its name and kind, then one line per fact with the sentence
/// it came from when the graph kept it.
pub fn render(entity: &Entity, facts: &[Relation]) -> String {
    let mut out = format!("{} ({})\n", entity.name, entity.kind);
    for f in facts {
        out.push_str(&format!("- {} {} {}", f.source, f.relation.replace('_', " "), f.target));
        if let Some(s) = f.sentence.as_deref().filter(|s| !s.trim().is_empty()) {
            out.push_str(&format!(" — \"{}\"", s.trim()));
        }
        out.push('\n');
    }
    out
}

/// Where the snapshot has got to: the time of the last change written (shared with the
/// heartbeat's restarts; a daemon start begins again from 0, which rewrites nothing
/// that did not change).
pub type Mark = Arc<AtomicI64>;

/// One round: writes the entities whose facts changed since `mark`; answers how many
/// documents changed.
pub async fn sync(
    graph: &TAddr<GraphActor>,
    documents: &TAddr<DocumentsActor>,
    mark: &Mark,
) -> Result<usize, super::RoundError> {
    let since = mark.load(Ordering::SeqCst);
    let changed = graph
        .send(ChangedSince {
            since_ms: since,
            limit: PER_ROUND,
        })
        .await??;
    let mut written = 0;
    for (entity, facts, at) in changed {
        // An entity without a fact (all deleted, or none yet) keeps whatever it had.
        if !facts.is_empty() {
            let content = render(&entity, &facts);
            if documents
                .send(UpsertSnapshot {
                    entity: entity.name.clone(),
                    content,
                })
                .await??
            {
                written += 1;
            }
        }
        mark.fetch_max(at, Ordering::SeqCst);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_as_facts_with_their_sentences() {
        let e = Entity {
            id: 1,
            name: "Ingrid".into(),
            kind: "Person".into(),
            mention_count: 3,
            updated_at_ms: 0,
        };
        let fact = |rel: &str, target: &str, sentence: Option<&str>| Relation {
            id: 1,
            source: "Ingrid".into(),
            target: target.into(),
            relation: rel.into(),
            confidence: 1.0,
            session: String::new(),
            turn: 0,
            created_at_ms: 0,
            sentence: sentence.map(String::from),
        };
        let text = render(
            &e,
            &[
                fact("lives_in", "Tromsø", Some("My sister Ingrid moved to Tromsø.")),
                fact("works_as", "marine biologist", None),
            ],
        );
        assert_eq!(
            text,
            "Ingrid (Person)\n- Ingrid lives in Tromsø — \"My sister Ingrid moved to Tromsø.\"\n- Ingrid works as marine biologist\n"
        );
    }
}
