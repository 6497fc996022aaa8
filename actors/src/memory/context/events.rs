//! The context tier (working memory): the events of the window and pruning by
//! relevance (kernel spec §5). What the prompt shows of them is per-turn recall's
//! (`memory::recall`).

use serde::{Deserialize, Serialize};

use crate::memory::index::tfidf::{Tfidf, cosine};

/// The most recent events a prune never removes.
pub const PROTECTED: usize = 10;
/// Budget assumed per event when nothing is known yet.
pub const DEFAULT_AVG_EVENT_TOKENS: usize = 2000;

/// One tool result kept with an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    pub name: String,
    pub output: String,
    /// What the compute layer (vectors, prune, distillation) sees of the output, when
    /// it differs from `output`: the tool's cleaner applied, or `""` for a `no_memory`
    /// tool. The stored `output` is never altered (spec kernel §4, §5.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<String>,
}

/// One thing that happened in the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Row id once stored (0 before).
    #[serde(default)]
    pub id: i64,
    /// Unix milliseconds.
    pub ts_ms: i64,
    /// Who: a channel (`http`, `webui/tab`), `agent` for replies, `cold_storage` for
    /// documents restored into the timeline.
    pub source: String,
    pub input: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub response: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_used: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<ToolOutput>,
    /// Whose input it was when not the owner's (`onebot.guest`): empty for the owner
    /// (and the kernel). A guest's turn recalls only its own principal's events, and
    /// the owner's prompt shows a guest's words labelled as such.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub principal: String,
}

impl Event {
    /// Who said what this event remembers, as recall shows it: `assistant` for the
    /// agent's replies, otherwise the source (a channel such as `http`, or the speaker's
    /// name for an imported conversation).
    pub fn speaker(&self) -> &str {
        match self.source.as_str() {
            "agent" => "assistant",
            s => s,
        }
    }

    /// The words this event adds to memory, verbatim: an agent reply's response (its
    /// input repeats the user's event), a restored document's content, otherwise the
    /// input. Empty when there is nothing to remember.
    pub fn said(&self) -> &str {
        match self.source.as_str() {
            "agent" | "cold_storage" => &self.response,
            _ => &self.input,
        }
    }

    /// The text an event is compared by (three-branch rule, spec §5.3): agent replies
    /// by their response, restored documents by both, everything else by the input;
    /// tool outputs are appended.
    pub fn text_for_vector(&self) -> String {
        let mut t = match self.source.as_str() {
            "agent" if !self.response.is_empty() => self.response.clone(),
            "cold_storage" => format!("{} {}", self.input, self.response),
            _ => self.input.clone(),
        };
        for r in &self.tool_results {
            let text = r.compute.as_deref().unwrap_or(&r.output);
            if !text.is_empty() {
                t.push(' ');
                t.push_str(text);
            }
        }
        t.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// o200k tokens of what the event holds (the overflow prune's size per event).
    fn tokens(&self) -> usize {
        crate::llm::tokens::count(&self.input)
            + crate::llm::tokens::count(&self.response)
            + self
                .tool_results
                .iter()
                .map(|r| crate::llm::tokens::count(&r.output))
                .sum::<usize>()
    }
}

/// The outcome of a prune: what stays (chronological) and what goes to the documents.
#[derive(Debug, Default)]
pub struct Pruned {
    pub kept: Vec<Event>,
    pub archived: Vec<Event>,
}

/// Keeps the last `protected` events, plus the `top_k - protected` others most similar
/// to `query`; the rest are archived. Returns everything in chronological order.
pub fn prune(events: Vec<Event>, query: &str, top_k: usize, protected: usize) -> Pruned {
    if events.len() <= top_k {
        return Pruned {
            kept: events,
            archived: Vec::new(),
        };
    }
    let p = protected.min(events.len());
    let split = events.len() - p;
    let mut candidates = events;
    let protected_events = candidates.split_off(split);
    if candidates.is_empty() {
        return Pruned {
            kept: protected_events,
            archived: Vec::new(),
        };
    }
    let texts: Vec<String> = candidates.iter().map(Event::text_for_vector).collect();
    let (model, grams) = Tfidf::fit(texts.iter().map(String::as_str));
    let q = model.vectorize(query);
    let mut scored: Vec<(f32, Event)> = candidates
        .into_iter()
        .zip(&grams)
        .map(|(e, g)| (cosine(&q, &model.vectorize_grams(g)), e))
        .collect();
    // Stable: among equal scores, newer events are kept first.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.ts_ms.cmp(&a.1.ts_ms)));
    let keep = top_k.saturating_sub(p);
    let archived: Vec<Event> = scored
        .split_off(keep.min(scored.len()))
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let mut kept: Vec<Event> = scored.into_iter().map(|(_, e)| e).chain(protected_events).collect();
    kept.sort_by_key(|e| (e.ts_ms, e.id));
    let mut archived = archived;
    archived.sort_by_key(|e| (e.ts_ms, e.id));
    Pruned { kept, archived }
}

/// How many events to keep and protect for a context budget (spec §5.7).
pub fn top_k_and_protected(events: &[Event], context_tokens: usize, max_context_size: usize) -> (usize, usize) {
    let total: usize = events.iter().map(Event::tokens).sum();
    let avg = if events.is_empty() || total == 0 {
        DEFAULT_AVG_EVENT_TOKENS
    } else {
        (total / events.len()).max(1)
    };
    let protected = if context_tokens == 0 {
        PROTECTED
    } else {
        PROTECTED.min((context_tokens / avg).max(1))
    };
    let hard_cap = max_context_size.saturating_sub(1).max(1);
    let mut top_k = if context_tokens == 0 {
        hard_cap
    } else {
        (context_tokens / avg).max(1).min(hard_cap)
    };
    top_k = top_k.max(protected + 1).min(hard_cap);
    (top_k, protected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(i: i64, input: &str) -> Event {
        Event {
            id: i,
            ts_ms: 1_000 * i,
            source: "http".into(),
            input: input.into(),
            response: String::new(),
            tools_used: vec![],
            tool_results: vec![],
            principal: String::new(),
        }
    }

    #[test]
    fn prune_protects_the_last_ten_and_keeps_the_most_relevant() {
        let mut events: Vec<Event> = (0..20).map(|i| ev(i, &format!("闲聊 第{i}条 天气"))).collect();
        events[3].input = "我的猫叫咪咪".into();
        let p = prune(events, "猫", 12, PROTECTED);
        assert_eq!(p.kept.len(), 12);
        assert_eq!(p.archived.len(), 8);
        let kept: Vec<i64> = p.kept.iter().map(|e| e.id).collect();
        assert!(kept.contains(&3), "the relevant old event survives: {kept:?}");
        assert!((10..20).all(|i| kept.contains(&i)), "the last ten are protected");
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "chronological");
        let small = prune((0..5).map(|i| ev(i, "x")).collect(), "q", 12, PROTECTED);
        assert!(small.archived.is_empty());
    }

    #[test]
    fn budget_rules() {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(50);
        let per = crate::llm::tokens::count(&text);
        assert!((400..600).contains(&per), "{per}");
        let events: Vec<Event> = (0..3).map(|i| ev(i, &text)).collect();
        let (top_k, protected) = top_k_and_protected(&events, 10 * per, 30);
        assert_eq!((top_k, protected), (11, 10), "sized in real tokens");
        assert_eq!(top_k_and_protected(&[], 0, 30), (29, 10));
    }

    #[test]
    fn three_branch_vector_text() {
        let mut e = ev(1, "question");
        e.response = "answer".into();
        assert_eq!(e.text_for_vector(), "question");
        e.source = "agent".into();
        assert_eq!(e.text_for_vector(), "answer");
        e.source = "cold_storage".into();
        assert_eq!(e.text_for_vector(), "question answer");
    }

    #[test]
    fn tool_outputs_enter_the_vector_text_as_the_compute_layer_sees_them() {
        let mut e = ev(1, "question");
        let out = |name: &str, output: &str, compute: Option<&str>| ToolOutput {
            name: name.into(),
            output: output.into(),
            compute: compute.map(String::from),
        };
        e.tool_results = vec![
            out("plain", "raw result", None),
            out("secret", "do not vectorise", Some("")),
            out("noisy", "<html>clean</html>", Some("clean")),
        ];
        assert_eq!(e.text_for_vector(), "question raw result clean");
        // Stored as it was; the compute view survives a round trip.
        let back: Event = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back.tool_results[1].output, "do not vectorise");
        assert_eq!(back.text_for_vector(), "question raw result clean");
    }
}
