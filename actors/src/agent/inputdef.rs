//! Input channels' definitions and the text cleaners: what memory keeps of a
//! channel's inputs and a tool's outputs (spec §3.1, §5.3, §5.6).
//!
//! A chat bridge wraps what people write in its own template (which group, which
//! member, which number); the model needs that to answer the right person, memory
//! does not — in the vectors, the search index and the distilled facts it is noise
//! that matches every question about "the group". So a plugin declares its channel
//! (`input.register`, or `sdk.register_input_channel` in Lua) with a [`Cleaner`],
//! whether its inputs are remembered at all, and its context and recall policies; a
//! tool may carry a cleaner for its outputs (`tool.register`'s `cleaner`).
//!
//! The definition is applied once, at the door (intake's admission), and its result
//! travels with the input in its payload — `memory_text`, `recall_policy`,
//! `context_policy` (the seed's payload keys) — so an input stored in the inbox and
//! run after a restart is remembered the way it was admitted, whether or not its
//! plugin has registered again yet. The turn reads them through `Payload::policy`.
//!
//! A plugin may declare only channels under its own name (the sources it may inject
//! under), and its rules are `regex` patterns (linear time, size-capped): a hostile
//! plugin can neither clean another channel nor stall the kernel.

use std::sync::Arc;

use homeagent_plugin_protocol::methods::{CleanerRules, InputRegister};
use regex::Regex;

/// Most rules in one cleaner.
pub const MAX_RULES: usize = 32;
/// Longest pattern, in bytes.
pub const MAX_PATTERN: usize = 1000;
/// Compiled size cap of one pattern (the `regex` crate's limit).
const SIZE_LIMIT: usize = 1 << 20;

/// Why a cleaner or a channel definition was refused; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefError {
    #[error("a cleaner has {0} rules; at most {MAX_RULES}: merge some patterns")]
    TooManyRules(usize),
    #[error("cleaner rule {index}: the pattern is {len} bytes; at most {MAX_PATTERN}")]
    PatternTooLong { index: usize, len: usize },
    #[error("cleaner rule {index}: `{pattern}` is not a valid pattern ({why}); the syntax is Rust's regex crate's")]
    BadPattern { index: usize, pattern: String, why: String },
    #[error(
        "input channel `{name}` is not the plugin's: declare `{plugin}` or `{plugin}/<part>` (the sources it injects under)"
    )]
    NotOwn { name: String, plugin: String },
    #[error("{field} `{value}` is not one of: {allowed}")]
    Policy {
        field: &'static str,
        value: String,
        allowed: &'static str,
    },
}

/// Compiled cleaner rules.
#[derive(Clone, Debug)]
pub struct Cleaner {
    rules: Arc<Vec<(Regex, String)>>,
}

impl Cleaner {
    pub fn compile(def: &CleanerRules) -> Result<Self, DefError> {
        if def.rules.len() > MAX_RULES {
            return Err(DefError::TooManyRules(def.rules.len()));
        }
        let mut rules = Vec::with_capacity(def.rules.len());
        for (index, r) in def.rules.iter().enumerate() {
            if r.pattern.len() > MAX_PATTERN {
                return Err(DefError::PatternTooLong {
                    index,
                    len: r.pattern.len(),
                });
            }
            let re = regex::RegexBuilder::new(&r.pattern)
                .size_limit(SIZE_LIMIT)
                .build()
                .map_err(|e| DefError::BadPattern {
                    index,
                    pattern: r.pattern.clone(),
                    why: e.to_string(),
                })?;
            rules.push((re, r.replace.clone()));
        }
        Ok(Self { rules: Arc::new(rules) })
    }

    /// The text memory keeps: every rule in order, whitespace runs made one; the
    /// original when nothing would be left.
    pub fn apply(&self, text: &str) -> String {
        let mut t = text.to_owned();
        for (re, with) in self.rules.iter() {
            if let std::borrow::Cow::Owned(o) = re.replace_all(&t, with.as_str()) {
                t = o;
            }
        }
        let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
        if t.is_empty() { text.to_owned() } else { t }
    }

    /// As a tool spec's cleaner.
    pub fn into_fn(self) -> crate::stages::tools::Cleaner {
        Arc::new(move |s: &str| self.apply(s))
    }
}

/// When the context window is pruned for a channel's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextPolicy {
    /// By the distill heartbeat and on overflow only.
    #[default]
    None,
    /// Also against each input as it arrives.
    Prune,
}

/// Whether a channel's inputs recall from memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecallPolicy {
    #[default]
    Auto,
    None,
}

/// A registered input channel.
#[derive(Debug, Clone)]
pub struct InputDef {
    /// Whose it is.
    pub plugin: String,
    /// `plugin` or `plugin/<part>`.
    pub name: String,
    pub no_memory: bool,
    pub cleaner: Option<Cleaner>,
    pub context: ContextPolicy,
    pub recall: RecallPolicy,
}

impl InputDef {
    /// A plugin's declaration, checked.
    pub fn from_register(plugin: &str, reg: &InputRegister) -> Result<Self, DefError> {
        let own = reg.name == plugin
            || reg
                .name
                .strip_prefix(plugin)
                .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1);
        if !own {
            return Err(DefError::NotOwn {
                name: reg.name.clone(),
                plugin: plugin.to_owned(),
            });
        }
        let context = match reg.context_policy.trim() {
            "" | "none" => ContextPolicy::None,
            "prune" => ContextPolicy::Prune,
            other => {
                return Err(DefError::Policy {
                    field: "context_policy",
                    value: other.to_owned(),
                    allowed: "none, prune",
                });
            }
        };
        let recall = match reg.recall_policy.trim() {
            "" | "auto" => RecallPolicy::Auto,
            "none" => RecallPolicy::None,
            other => {
                return Err(DefError::Policy {
                    field: "recall_policy",
                    value: other.to_owned(),
                    allowed: "auto, none",
                });
            }
        };
        Ok(Self {
            plugin: plugin.to_owned(),
            name: reg.name.clone(),
            no_memory: reg.no_memory,
            cleaner: reg.cleaner.as_ref().map(Cleaner::compile).transpose()?,
            context,
            recall,
        })
    }

    /// Whether inputs from `source` follow this channel: the source is the channel,
    /// or lies under it (`onebot/group:1`, `onebot:x` under `onebot`).
    pub fn covers(&self, source: &str) -> bool {
        source
            .strip_prefix(self.name.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || rest.starts_with(':'))
    }

    /// What the definition says about an input being admitted with `text`: whether
    /// memory keeps it at all, and its [`Policy`] (what memory keeps of it, whether it
    /// recalls, whether the context is pruned against it). No definition: keep it,
    /// the text as it is, the defaults — whatever the caller set is replaced.
    pub fn apply(def: Option<&Self>, text: &str) -> (bool, Policy) {
        let Some(def) = def else {
            return (false, Policy::default());
        };
        let memory_text = def
            .cleaner
            .as_ref()
            .map(|c| c.apply(text))
            .filter(|clean| clean != text);
        (
            def.no_memory,
            Policy {
                memory_text,
                recall: def.recall,
                context: def.context,
            },
        )
    }
}

/// What an admitted input's channel says about its memory (carried in its payload,
/// read by the turn).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// What memory keeps of the input; `None`: the text as it is.
    pub memory_text: Option<String>,
    pub recall: RecallPolicy,
    pub context: ContextPolicy,
}

#[cfg(test)]
mod tests {
    use super::*;
    use homeagent_plugin_protocol::methods::CleanRule;

    fn rules(r: &[(&str, &str)]) -> CleanerRules {
        CleanerRules {
            rules: r
                .iter()
                .map(|(p, w)| CleanRule {
                    pattern: (*p).into(),
                    replace: (*w).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_cleaner_strips_the_template_and_keeps_the_words() {
        let c = Cleaner::compile(&rules(&[(r"^\[QQ group \d+ · (.+?) \(\d+\)\]\s*", "$1: ")])).unwrap();
        assert_eq!(
            c.apply("[QQ group 4242 · Alice (10001)]  the ferry   leaves at 9"),
            "Alice: the ferry leaves at 9"
        );
        assert_eq!(c.apply("no template here"), "no template here");
        // Nothing left: the original stays.
        let all = Cleaner::compile(&rules(&[(".*", "")])).unwrap();
        assert_eq!(all.apply("keep me"), "keep me");
    }

    #[test]
    fn hostile_rules_are_refused_with_what_to_change() {
        assert!(matches!(
            Cleaner::compile(&rules(&[("(", "")])),
            Err(DefError::BadPattern { index: 0, .. })
        ));
        let long = "a".repeat(MAX_PATTERN + 1);
        assert!(matches!(
            Cleaner::compile(&rules(&[(&long, "")])),
            Err(DefError::PatternTooLong { .. })
        ));
        let many: Vec<(&str, &str)> = vec![("a", ""); MAX_RULES + 1];
        assert_eq!(
            Cleaner::compile(&rules(&many)).unwrap_err(),
            DefError::TooManyRules(MAX_RULES + 1)
        );
        // A pattern whose compiled form is huge (a counted repetition of a class).
        assert!(Cleaner::compile(&rules(&[(r"\w{1000}\w{1000}\w{1000}", "")])).is_err());
    }

    #[test]
    fn a_plugin_declares_only_its_own_channels_and_they_cover_their_sources() {
        let reg = |name: &str| InputRegister {
            name: name.into(),
            ..Default::default()
        };
        assert!(InputDef::from_register("onebot", &reg("onebot")).is_ok());
        assert!(InputDef::from_register("onebot", &reg("onebot/group")).is_ok());
        for bad in ["webui", "onebotx", "onebot/", "http"] {
            assert!(
                matches!(
                    InputDef::from_register("onebot", &reg(bad)),
                    Err(DefError::NotOwn { .. })
                ),
                "{bad}"
            );
        }
        let d = InputDef::from_register("onebot", &reg("onebot")).unwrap();
        assert!(d.covers("onebot") && d.covers("onebot/group:1") && d.covers("onebot:x"));
        assert!(!d.covers("onebotx") && !d.covers("webui"));
        let bad_policy = InputRegister {
            recall_policy: "sometimes".into(),
            ..reg("onebot")
        };
        assert!(matches!(
            InputDef::from_register("onebot", &bad_policy),
            Err(DefError::Policy { .. })
        ));
    }

    #[test]
    fn the_definition_travels_in_the_payload_and_replaces_what_a_caller_sent() {
        let d = InputDef::from_register(
            "onebot",
            &InputRegister {
                name: "onebot".into(),
                cleaner: Some(rules(&[(r"^\[.*?\]\s*", "")])),
                recall_policy: "none".into(),
                context_policy: "prune".into(),
                ..Default::default()
            },
        )
        .unwrap();
        let (no_memory, p) = InputDef::apply(Some(&d), "[group 1] hello");
        assert!(!no_memory);
        assert_eq!(p.memory_text.as_deref(), Some("hello"));
        assert_eq!((p.recall, p.context), (RecallPolicy::None, ContextPolicy::Prune));
        // Carried in the payload, stored under the names it always had; whatever the
        // caller set is replaced.
        let mut payload = super::super::input::Payload {
            memory_text: Some("forged".into()),
            ..Default::default()
        };
        payload.set_policy(p);
        assert_eq!(
            payload.to_value(),
            serde_json::json!({"memory_text": "hello", "recall_policy": "none", "context_policy": "prune"})
        );
        // No definition: nothing the caller sent survives.
        payload.set_policy(InputDef::apply(None, "hi").1);
        assert_eq!(payload.policy(), Policy::default());
    }
}
