//! A turn's recall as a plain core: which memory tiers it asks ([`Tiers::of`]) and what
//! it makes of their answers ([`join`]). The fan-out itself — the actor messages, how
//! long a tier is waited for, the memory thread the answers are joined on — is the
//! shell's (`task::recall`); the rules are here, unit-tested without actix:
//!
//! * A guest's turn recalls its own words and what the owner made public, nothing by
//!   meaning: the owner's documents, facts and other knowledge are not a guest's.
//! * A turn on a channel declared `recall_policy: none` sees the recency window only:
//!   no tier but the window is asked, and nothing is ranked by relevance.
//! * A tier that does not answer leaves its part out of this prompt only; but an input
//!   the context tier was to record and did not fails the turn (it would be lost).
//! * The tiers are merged and cut to the memory share of the budget, the recency tail
//!   included (`memory::recall::assemble`).
//! * What the prompt shows of the documents counts as read (coldness is by last
//!   access), except in the kernel's own upkeep turns, which read on nobody's behalf.

use super::budget::Budget;
use crate::addr::SendError;
use crate::memory::context::Event;
use crate::memory::context::actor::ContextError;
use crate::memory::index::docindex::Ranked;
use crate::memory::recall::{Item, Origin, RecallBudget, Recollection, WindowRecall};

/// Which memory tiers a turn asks, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tiers {
    /// The context window: only this principal's events (a guest's turn), or all.
    pub window_of: Option<String>,
    /// The owner's own memory: the documents' passages and the graph's facts.
    pub owners_memory: bool,
    /// The knowledge base: only the items the owner made public.
    pub public_knowledge_only: bool,
    /// The query is embedded (the dense half of the rankings).
    pub by_meaning: bool,
    /// Memory ranked by relevance (the knowledge base asked, the relevant block kept);
    /// without it the turn sees the recency window alone.
    pub relevance: bool,
}

impl Tiers {
    /// What a turn of `guest` (its principal; `None`: the owner's or the kernel's turn)
    /// asks; `recalls`: its channel recalls from memory (`false` for
    /// `recall_policy: none`).
    pub fn of(guest: Option<String>, recalls: bool) -> Self {
        let owner = guest.is_none();
        Self {
            window_of: guest,
            owners_memory: owner && recalls,
            public_knowledge_only: !owner,
            by_meaning: owner && recalls,
            relevance: recalls,
        }
    }
}

/// How the input recorded with a recall fared.
pub type Recorded = Result<(), NotRecorded>;

/// Why the input a recall was to record is not on disk. Both are outages a durable
/// input waits out; they differ in what the owner is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRecorded {
    /// The store refused it (a full disk, a locked database).
    #[error("{0}")]
    Refused(String),
    /// The context tier did not answer (restarting, or stopped).
    #[error("{0}")]
    Unanswered(SendError),
}

/// The context window's part of a recall: its items and the input it recorded.
pub type WindowAnswer = (WindowRecall, Option<Result<Event, ContextError>>);

/// What the memory tiers answered a turn's recall (a part left empty, or the error,
/// when its tier did not answer or was not asked).
#[derive(Default)]
pub struct Answers {
    /// The graph's facts.
    pub facts: Vec<Item>,
    /// The graph's index line (the most connected entities), empty for none.
    pub index: String,
    pub knowledge: Vec<Item>,
    /// The context window's recall and the recorded input, or why it did not answer.
    pub window: Option<Result<WindowAnswer, SendError>>,
    pub passages: Option<Result<Ranked<Item>, SendError>>,
}

impl Answers {
    /// No tier answered (the memory thread stopped): `why` for each.
    pub fn none(why: SendError) -> Self {
        Self {
            window: Some(Err(why.clone())),
            passages: Some(Err(why)),
            ..Default::default()
        }
    }
}

/// What a turn makes of a recall.
pub struct Joined {
    pub recollection: Recollection,
    /// How the input asked to be recorded fared (`None`: none was).
    pub recorded: Option<Recorded>,
    /// The documents whose passages the prompt shows: read now.
    pub read: Vec<String>,
}

/// The tiers' `answers` to `query` as the turn's memory, within `budget`; `recording`:
/// an input was to be recorded with the read; `upkeep`: the kernel's own turn.
pub fn join(query: &str, answers: Answers, budget: &Budget, recording: bool, upkeep: bool) -> Joined {
    let Answers {
        facts,
        index,
        knowledge,
        window,
        passages,
    } = answers;
    let (window, recorded) = match window {
        Some(Ok((w, recorded))) => (
            w,
            recorded.map(|r| r.map(drop).map_err(|e| NotRecorded::Refused(e.to_string()))),
        ),
        Some(Err(e)) => {
            tracing::warn!("recall without the context window this turn (is kernel/memory/context running?): {e}");
            (Default::default(), recording.then_some(Err(NotRecorded::Unanswered(e))))
        }
        None => (Default::default(), None),
    };
    let passages = match passages {
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            tracing::warn!("recall without documents this turn (kernel/memory/documents did not answer): {e}");
            Default::default()
        }
        None => Default::default(),
    };
    let recollection = crate::memory::recall::assemble(
        query,
        window,
        passages,
        vec![facts, knowledge],
        (!index.is_empty()).then_some(index),
        // The recency tail is part of the memory share (`Budget::tail`), so many tool
        // schemas can leave no `timeline` remainder without losing the last turns.
        RecallBudget {
            memory: budget.memory,
            timeline: budget.tail,
        },
    );
    let read = if upkeep {
        Vec::new()
    } else {
        recollection
            .relevant
            .iter()
            .filter_map(|i| match &i.origin {
                Origin::Passage { doc_id } => Some(doc_id.clone()),
                _ => None,
            })
            .collect()
    };
    Joined {
        recollection,
        recorded,
        read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::index::docindex::Scored;

    fn item(origin: Origin, text: &str) -> Item {
        Item::counted(origin, Some(1_700_000_000_000), "Mel", text)
    }

    fn passages(doc: &str, texts: &[&str]) -> Ranked<Item> {
        Ranked {
            stats: Default::default(),
            rows: texts
                .iter()
                .enumerate()
                .map(|(i, t)| Scored {
                    row: item(Origin::Passage { doc_id: doc.to_owned() }, t),
                    bm25: Some(10.0 - i as f32),
                    len: 0,
                    tf: Vec::new(),
                    cos: None,
                    scopes: 0,
                })
                .collect(),
        }
    }

    fn recorded() -> Event {
        Event {
            id: 1,
            ts_ms: 1_700_000_000_000,
            source: "http".into(),
            input: "what does Mel paint".into(),
            response: String::new(),
            tools_used: vec![],
            tool_results: vec![],
            principal: String::new(),
        }
    }

    #[test]
    fn a_guests_turn_asks_for_its_own_words_and_public_knowledge_only() {
        let owner = Tiers::of(None, true);
        assert_eq!(
            (
                owner.window_of,
                owner.owners_memory,
                owner.public_knowledge_only,
                owner.by_meaning
            ),
            (None, true, false, true)
        );
        let guest = Tiers::of(Some("onebot:42".into()), true);
        assert_eq!(guest.window_of.as_deref(), Some("onebot:42"));
        assert!(!guest.owners_memory && guest.public_knowledge_only && !guest.by_meaning);
    }

    #[test]
    fn a_channel_that_recalls_nothing_asks_the_window_alone() {
        for guest in [None, Some("onebot:42".to_owned())] {
            let t = Tiers::of(guest.clone(), false);
            assert_eq!(t.window_of, guest, "the window is still read (and records the input)");
            assert!(!t.owners_memory && !t.by_meaning && !t.relevance);
        }
        assert!(Tiers::of(None, true).relevance);
    }

    /// What a tier whose thread stopped answers.
    fn stopped() -> SendError {
        SendError::Exited {
            id: "kernel/memory/context".into(),
            reason: "the memory thread has stopped".into(),
        }
    }

    #[test]
    fn a_silent_tier_leaves_its_part_out_but_an_unrecorded_input_is_told() {
        let budget = Budget::new(8192, 500);
        // The documents did not answer: the graph's facts still make the memory.
        let answers = Answers {
            facts: vec![item(
                Origin::Fact {
                    relation: String::new(),
                },
                "Mel paints sunsets",
            )],
            passages: Some(Err(stopped())),
            window: Some(Ok((Default::default(), Some(Ok(recorded()))))),
            ..Default::default()
        };
        let j = join("what does Mel paint", answers, &budget, true, false);
        assert_eq!(j.recollection.relevant.len(), 1);
        assert_eq!(j.recorded, Some(Ok(())));
        // The context tier did not answer while it was to record the input.
        let j = join("hello", Answers::none(stopped()), &budget, true, false);
        assert!(j.recollection.relevant.is_empty());
        assert_eq!(j.recorded, Some(Err(NotRecorded::Unanswered(stopped()))));
        // Nothing to record: nothing to tell.
        assert_eq!(
            join("hello", Answers::none(stopped()), &budget, false, false).recorded,
            None
        );
    }

    #[test]
    fn the_documents_a_prompt_shows_are_read_unless_the_kernel_reads_them_for_itself() {
        let budget = Budget::new(8192, 500);
        let answers = || Answers {
            passages: Some(Ok(passages(
                "doc_7",
                &["Mel painted a lake at dawn", "a lake trip in May"],
            ))),
            ..Default::default()
        };
        let j = join("the lake painting", answers(), &budget, false, false);
        assert_eq!(j.read, vec!["doc_7".to_owned(), "doc_7".to_owned()]);
        assert!(
            join("the lake painting", answers(), &budget, false, true)
                .read
                .is_empty()
        );
    }
}
