//! The measures of `homed eval locomo --live`, as plain functions: what part of a
//! request the vendor received is memory, whether a question's evidence is in it, token
//! counts and percentiles. No IO; the run itself is [`crate::eval_live`].
//!
//! The prompt's shape (`actors/src/agent/prompt.rs`, `prefix_of`): the system prompt
//! first, then the memory (system messages), then the source-context message, then the
//! current input. *Memory* is everything but the system prompt, the source context, the
//! current input and the tool schemas (sent beside the messages).

use serde::{Deserialize, Serialize};

/// Evidence counts as present when at least this many leading characters of it (after
/// [`normalize`]) are in the prompt: a long turn may reach the model as an extract.
pub const EVIDENCE_PREFIX_CHARS: usize = 150;

/// Lower-cased, with every run of punctuation and whitespace collapsed to one space
/// (letters and digits of every script are kept), trimmed.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.extend(c.to_lowercase());
        } else {
            gap = true;
        }
    }
    out
}

/// Whether one evidence turn is in a normalised prompt: in full, or its first
/// [`EVIDENCE_PREFIX_CHARS`] characters. An empty evidence text is never present.
pub fn evidence_present(prompt_norm: &str, evidence: &str) -> bool {
    let e = normalize(evidence);
    if e.is_empty() {
        return false;
    }
    if prompt_norm.contains(&e) {
        return true;
    }
    let head: String = e.chars().take(EVIDENCE_PREFIX_CHARS).collect();
    head.chars().count() == EVIDENCE_PREFIX_CHARS && prompt_norm.contains(head.trim_end())
}

/// The share of `evidence` present whole in `prompt_norm` (0 for no evidence): the
/// strict reading beside [`evidence_recall`], under which an extract or a cut turn
/// ([`homeagent_actors::memory::recall::cut_to_match`]) never counts.
pub fn evidence_whole(prompt_norm: &str, evidence: &[&str]) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    let whole = |e: &&&str| {
        let e = normalize(e);
        !e.is_empty() && prompt_norm.contains(&e)
    };
    evidence.iter().filter(whole).count() as f64 / evidence.len() as f64
}

/// The share of `evidence` present in `prompt_norm` (0 for no evidence).
pub fn evidence_recall(prompt_norm: &str, evidence: &[&str]) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    evidence.iter().filter(|e| evidence_present(prompt_norm, e)).count() as f64 / evidence.len() as f64
}

/// Tokens of `text` with the o200k BPE (what current OpenAI models use).
///
/// The one place the live evaluation counts tokens: when the kernel gets a counter of
/// its own for the budget, this calls it, so both count alike.
pub fn count_tokens(text: &str) -> usize {
    homeagent_actors::llm::tokens::count(text)
}

/// The value at quantile `q` (0–1) of `values`, nearest rank; 0 when there are none.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize]
}

/// p50 and p95 of a sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub p50: f64,
    pub p95: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Self {
        Self {
            p50: percentile(values, 0.5),
            p95: percentile(values, 0.95),
        }
    }
}

/// A message of a chat request as the vendor receives it: text content, or parts.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
}

/// OpenAI message content: a string or a list of parts (only text parts count here).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// One part of a multi-part content.
#[derive(Debug, Clone, Deserialize)]
pub struct Part {
    #[serde(default)]
    pub text: Option<String>,
}

impl ChatMessage {
    pub fn text(&self) -> String {
        match &self.content {
            None => String::new(),
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Parts(p)) => p
                .iter()
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A chat request as the vendor receives it (the fields measured).
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    #[serde(default)]
    pub messages: Vec<ChatMessage>,
    /// The tool schemas, counted as part of the whole prompt.
    #[serde(default)]
    pub tools: Option<serde_json::Value>,
}

/// A request cut into the parts the measures need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptParts {
    /// The memory messages' texts, in order.
    pub memory: Vec<String>,
    /// Tokens of the memory messages.
    pub memory_tokens: usize,
    /// Tokens of every message and of the tool schemas.
    pub prompt_tokens: usize,
}

impl PromptParts {
    /// Splits a request: the first message when it is a system message (the system
    /// prompt), the last user message (the current input) and the system message right
    /// before it (the source context) are not memory; every other message is.
    pub fn of(req: &ChatRequest) -> Self {
        let msgs = &req.messages;
        let input = msgs.iter().rposition(|m| m.role == "user");
        let context = input
            .and_then(|i| i.checked_sub(1))
            .filter(|&i| msgs[i].role == "system" && i > 0);
        let system = (msgs.first().is_some_and(|m| m.role == "system")).then_some(0);
        let mut parts = Self::default();
        for (i, m) in msgs.iter().enumerate() {
            let text = m.text();
            let tokens = count_tokens(&text);
            parts.prompt_tokens += tokens;
            if Some(i) != input && Some(i) != context && Some(i) != system {
                parts.memory_tokens += tokens;
                parts.memory.push(text);
            }
        }
        if let Some(tools) = &req.tools {
            parts.prompt_tokens += count_tokens(&tools.to_string());
        }
        parts
    }

    /// The memory, normalised for [`evidence_present`].
    pub fn memory_norm(&self) -> String {
        normalize(&self.memory.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_collapses_punctuation_and_space_and_keeps_every_script() {
        assert_eq!(normalize("  Hey, Mel!!  How's\n it\tgoing? "), "hey mel how s it going");
        assert_eq!(normalize("我的猫，叫咪咪。"), "我的猫 叫咪咪");
        assert_eq!(normalize("...!"), "");
    }

    #[test]
    fn evidence_counts_in_full_or_by_its_first_150_characters() {
        let prompt = normalize("[13:56:00] Caroline: I went to a LGBTQ support group yesterday — it was so powerful!");
        assert!(evidence_present(
            &prompt,
            "I went to a LGBTQ support group yesterday, it was so powerful."
        ));
        assert!(!evidence_present(&prompt, "I went to a support group"));
        assert!(!evidence_present(&prompt, "!!"));
        let long = format!("{} tail that was cut off", "word ".repeat(40));
        let extract = normalize(&format!("Caroline: {}…", &long[..160]));
        assert!(evidence_present(&extract, &long), "a 150-character extract counts");
        let short_extract = normalize(&long[..100]);
        assert!(
            !evidence_present(&short_extract, &long),
            "less than 150 characters does not"
        );
        assert_eq!(
            evidence_recall(
                &prompt,
                &["I went to a LGBTQ support group yesterday, it was so powerful", "nope"]
            ),
            0.5
        );
        assert_eq!(evidence_recall(&prompt, &[]), 0.0);
    }

    #[test]
    fn whole_evidence_counts_only_in_full() {
        let long = "a".repeat(10) + &" word".repeat(60);
        let head: String = normalize(&long).chars().take(EVIDENCE_PREFIX_CHARS).collect();
        assert_eq!(evidence_recall(&head, &[long.as_str()]), 1.0);
        assert_eq!(evidence_whole(&head, &[long.as_str()]), 0.0, "an extract is not whole");
        assert_eq!(evidence_whole(&normalize(&long), &[long.as_str(), "elsewhere"]), 0.5);
        assert_eq!(evidence_whole("anything", &[]), 0.0);
        assert_eq!(
            evidence_whole("anything", &["!!"]),
            0.0,
            "an empty evidence text is never present"
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.95), 95.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Spread { p50: 2.0, p95: 3.0 });
    }

    #[test]
    fn the_memory_is_what_lies_between_the_system_prompt_and_the_source_context() {
        let req: ChatRequest = serde_json::from_value(serde_json::json!({
            "messages": [
                {"role": "system", "content": "You are HomeAgent."},
                {"role": "system", "content": "【对话时序】\n[13:56:00] Caroline: I adopted a greyhound"},
                {"role": "system", "content": [{"type": "text", "text": "recalled: Biscuit"}]},
                {"role": "system", "content": "这是一条来自 http 的输入"},
                {"role": "user", "content": "What dog did Caroline adopt?"}
            ],
            "tools": [{"type": "function", "function": {"name": "output_send__http"}}]
        }))
        .unwrap();
        let p = PromptParts::of(&req);
        assert_eq!(p.memory.len(), 2);
        assert!(p.memory[1].contains("Biscuit"));
        assert!(p.memory_norm().contains("caroline i adopted a greyhound"));
        assert!(p.memory_tokens > 5 && p.prompt_tokens > p.memory_tokens + 10, "{p:?}");
        assert_eq!(count_tokens("hello world"), 2);
        let bare: ChatRequest =
            serde_json::from_value(serde_json::json!({"messages": [{"role": "user", "content": "hi"}]})).unwrap();
        assert!(PromptParts::of(&bare).memory.is_empty());
    }
}
