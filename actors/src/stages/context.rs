//! The stage context and the rules for what each stage may change (kernel spec §4.1).
//!
//! Handlers do not share one mutable object: each gets a copy of the context and
//! returns a [`Patch`] of what it wants to change. The host applies the patches in
//! registration order under the stage's write rules, which makes the outcome
//! deterministic (the reference runs handlers on one locked object, so "who wins"
//! depended on timing).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The seven points of a turn where handlers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Input arrived, before anything: may rewrite it or answer it directly.
    OnInput,
    /// Prefix built, before the first LLM call: may add context messages or answer.
    PreAction,
    /// After each LLM call: may rewrite its text and tool calls, or answer.
    PostAction,
    /// Before one tool runs: may rewrite its arguments or deny it.
    BeforeToolcall,
    /// After one tool ran: may rewrite its result.
    AfterToolcall,
    /// Before the final text (or an `output_send` payload) goes out: may rewrite it.
    BeforeOutput,
    /// After the reply was sent: read-only.
    AfterOutput,
}

impl Stage {
    pub const ALL: [Stage; 7] = [
        Stage::OnInput,
        Stage::PreAction,
        Stage::PostAction,
        Stage::BeforeToolcall,
        Stage::AfterToolcall,
        Stage::BeforeOutput,
        Stage::AfterOutput,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::OnInput => "on_input",
            Stage::PreAction => "pre_action",
            Stage::PostAction => "post_action",
            Stage::BeforeToolcall => "before_toolcall",
            Stage::AfterToolcall => "after_toolcall",
            Stage::BeforeOutput => "before_output",
            Stage::AfterOutput => "after_output",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// A context message a `pre_action` handler adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextMsg {
    pub role: String,
    pub content: String,
}

/// A tool call as stages see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageToolCall {
    pub id: String,
    pub name: String,
    /// The plugin that owns the tool ("" for built-ins).
    pub plugin: String,
    pub arguments: Value,
}

/// A tool result as stages see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageToolResult {
    pub call_id: String,
    pub name: String,
    pub plugin: String,
    pub success: bool,
    pub result: Value,
}

/// Everything a handler can see.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageContext {
    pub phase: Option<Stage>,
    pub raw_message: String,
    pub user_id: String,
    pub context_msgs: Vec<ContextMsg>,
    pub llm_text: String,
    pub reasoning_content: String,
    pub tool_calls: Vec<StageToolCall>,
    pub tool_results: Vec<StageToolResult>,
    pub final_text: String,
    /// Set by a handler to answer in place of the kernel (where the stage honours it).
    pub response: Option<String>,
    pub no_memory: bool,
    /// `input_source`, `output_channel`, and whatever plugins share.
    pub extra: serde_json::Map<String, Value>,
    /// Errors handlers reported (they never stop the pipeline).
    pub errors: Vec<String>,
}

/// What one handler wants to change. `None` = unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Patch {
    #[serde(default)]
    pub raw_message: Option<String>,
    #[serde(default)]
    pub context_msgs: Vec<ContextMsg>,
    #[serde(default)]
    pub llm_text: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<StageToolCall>>,
    #[serde(default)]
    pub tool_results: Option<Vec<StageToolResult>>,
    #[serde(default)]
    pub final_text: Option<String>,
    #[serde(default)]
    pub response: Option<String>,
    #[serde(default)]
    pub extra: serde_json::Map<String, Value>,
}

impl StageContext {
    /// Applies one handler's patch under `stage`'s write rules. Fields the stage does
    /// not honour are ignored (with a debug log, so plugin authors can see it).
    pub fn apply(&mut self, stage: Stage, handler: &str, p: Patch) {
        let ignored = |field: &str| {
            tracing::debug!(
                handler,
                stage = stage.as_str(),
                field,
                "field not honoured at this stage"
            )
        };
        // `Response`: the first handler (in registration order) to set it wins, at the
        // stages that honour it.
        if let Some(r) = p.response {
            match stage {
                Stage::OnInput | Stage::PreAction | Stage::PostAction | Stage::BeforeToolcall | Stage::BeforeOutput => {
                    self.response.get_or_insert(r);
                }
                _ => ignored("response"),
            }
        }
        if let Some(m) = p.raw_message {
            if stage == Stage::OnInput {
                self.raw_message = m
            } else {
                ignored("raw_message")
            }
        }
        if !p.context_msgs.is_empty() {
            if stage == Stage::PreAction {
                self.context_msgs.extend(p.context_msgs)
            } else {
                ignored("context_msgs")
            }
        }
        if let Some(t) = p.llm_text {
            if stage == Stage::PostAction {
                self.llm_text = t
            } else {
                ignored("llm_text")
            }
        }
        if let Some(calls) = p.tool_calls {
            match stage {
                Stage::PostAction => self.tool_calls = calls,
                // Only the arguments of this stage's single call may change.
                Stage::BeforeToolcall => {
                    if let (Some(mine), Some(new)) = (self.tool_calls.first_mut(), calls.into_iter().next()) {
                        mine.arguments = new.arguments;
                    }
                }
                _ => ignored("tool_calls"),
            }
        }
        if let Some(results) = p.tool_results {
            if stage == Stage::AfterToolcall {
                if let (Some(mine), Some(new)) = (self.tool_results.first_mut(), results.into_iter().next()) {
                    mine.result = new.result;
                    mine.success = new.success;
                }
            } else {
                ignored("tool_results")
            }
        }
        if let Some(t) = p.final_text {
            if stage == Stage::BeforeOutput {
                self.final_text = t
            } else {
                ignored("final_text")
            }
        }
        self.extra.extend(p.extra);
    }

    /// True when a handler answered in place of the kernel.
    pub fn short_circuited(&self) -> bool {
        self.response.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(args: Value) -> StageToolCall {
        StageToolCall {
            id: "c1".into(),
            name: "t".into(),
            plugin: "p".into(),
            arguments: args,
        }
    }

    #[test]
    fn write_rules_per_stage() {
        let mut c = StageContext {
            raw_message: "hi".into(),
            ..Default::default()
        };
        c.apply(
            Stage::PreAction,
            "h",
            Patch {
                raw_message: Some("changed".into()),
                ..Default::default()
            },
        );
        assert_eq!(c.raw_message, "hi", "raw_message is only honoured at on_input");
        c.apply(
            Stage::OnInput,
            "h",
            Patch {
                raw_message: Some("changed".into()),
                ..Default::default()
            },
        );
        assert_eq!(c.raw_message, "changed");
        c.apply(
            Stage::AfterToolcall,
            "h",
            Patch {
                response: Some("x".into()),
                ..Default::default()
            },
        );
        assert!(!c.short_circuited(), "after_toolcall ignores response");
        c.apply(
            Stage::PreAction,
            "a",
            Patch {
                response: Some("first".into()),
                ..Default::default()
            },
        );
        c.apply(
            Stage::PreAction,
            "b",
            Patch {
                response: Some("second".into()),
                ..Default::default()
            },
        );
        assert_eq!(c.response.as_deref(), Some("first"));
    }

    #[test]
    fn before_toolcall_rewrites_only_arguments() {
        let mut c = StageContext {
            tool_calls: vec![call(json!({"a": 1}))],
            ..Default::default()
        };
        let mut other = call(json!({"a": 2}));
        other.name = "sneaky".into();
        c.apply(
            Stage::BeforeToolcall,
            "h",
            Patch {
                tool_calls: Some(vec![other]),
                ..Default::default()
            },
        );
        assert_eq!(c.tool_calls[0].name, "t");
        assert_eq!(c.tool_calls[0].arguments, json!({"a": 2}));
    }

    #[test]
    fn pre_action_appends_context_messages_in_order() {
        let mut c = StageContext::default();
        for h in ["a", "b"] {
            let m = ContextMsg {
                role: "system".into(),
                content: h.into(),
            };
            c.apply(
                Stage::PreAction,
                h,
                Patch {
                    context_msgs: vec![m],
                    ..Default::default()
                },
            );
        }
        assert_eq!(
            c.context_msgs.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(Stage::parse("before_output"), Some(Stage::BeforeOutput));
    }
}
