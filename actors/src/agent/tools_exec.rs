//! Executing one batch of tool calls: `before_toolcall`, execution (with a timeout),
//! `after_toolcall` — serially, or in parallel when every tool of the batch allows it.

use std::time::Duration;

use serde_json::{Value, json};

use super::channels::{Channels, Outgoing, parse_send_tool};
use super::seq;
use crate::addr::TAddr;
use crate::bus::{EventBus, ToolStatus};
use crate::firewall::sandbox::SANDBOX_ARG;
use crate::i18n::Msg;
use crate::llm::ToolCall;
use crate::stages::{RunStage, Stage, StageContext, StageHost, StageToolCall, StageToolResult, ToolRegistry};

/// How long one tool may run.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// The result of one call, ready to become a `tool` message.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub text: String,
    pub status: ToolStatus,
}

/// Removes what only the kernel may put in a call's arguments: the sandbox the tool
/// must honour ([`SANDBOX_ARG`]) and the caller it speaks for
/// ([`crate::stages::ORIGIN_ARG`]). A model or a `before_toolcall` plugin that wrote
/// either would otherwise pick its own sandbox or speak as the owner.
pub fn strip_kernel_args(args: &mut Value) {
    if let Some(obj) = args.as_object_mut() {
        obj.remove(SANDBOX_ARG);
        obj.remove(crate::stages::ORIGIN_ARG);
    }
}

/// Why a turn is untrusted after `tool`'s result, if it now is: the review flagged
/// the result, or the tool read from outside (it declared network use, or it is an
/// MCP server's). From then on a risky call waits for the owner (`approval`); the
/// first reason is the one kept.
pub fn untrusted_by(tool: &str, network: bool, flagged: bool) -> Option<String> {
    if flagged {
        Some(format!("the review flagged the result of {tool}"))
    } else if network || tool.starts_with("mcp__") {
        Some(format!("it read the result of {tool}"))
    } else {
        None
    }
}

/// Everything needed to run tools, detached from the task actor.
#[derive(Clone)]
pub struct ToolRunner {
    pub stages: TAddr<StageHost>,
    pub tools: ToolRegistry,
    pub channels: Channels,
    pub bus: EventBus,
    pub task_id: u64,
    pub source: String,
    pub channel: String,
    pub timeout: Duration,
    /// Tool policy and credential gate on the way out, masking and review on the way in.
    pub firewall: std::sync::Arc<crate::firewall::Firewall>,
    /// Who the task's input speaks for (owner-only tools are refused to guests).
    pub principal: crate::firewall::Principal,
    /// Which agent runs the calls (`TaskDeps::agent`; `""` for the main agent).
    pub agent: String,
    /// The routing fields the input came with (a chat bridge's user or group id):
    /// the `meta` of what the kernel itself sends back there (an approval question).
    pub meta: Value,
    /// Why the task is untrusted, once it is (a guest's input, a fetched page, an MCP
    /// answer, a flagged result): its risky calls then ask the owner
    /// (`firewall::approval`). Shared by the task's batches.
    pub untrusted: std::sync::Arc<parking_lot::Mutex<Option<String>>>,
    /// The turn's span ([`crate::trace`]): each call's `tool_call` span is its child.
    pub span: tracing::Span,
}

/// Runs a stage, or returns the context unchanged when the stage host is down.
pub async fn run_stage(stages: &TAddr<StageHost>, stage: Stage, mut ctx: StageContext) -> StageContext {
    if !crate::stages::has_handlers(stage) {
        ctx.phase = Some(stage);
        return ctx; // nobody hooks this stage: no round trip
    }
    let fallback = ctx.clone();
    match stages.send(RunStage(stage, ctx)).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(stage = stage.as_str(), "stage host unavailable, stage skipped: {e}");
            fallback
        }
    }
}

impl ToolRunner {
    /// Shows an approval question on the plugin channel the owner's input came from
    /// (a chat bridge), so the owner can answer there with `/approve N` or `/deny N`
    /// (the intake takes those from the owner's inputs). Never on a guest's turn: the
    /// question is the owner's to answer, not the chat's.
    fn ask_on_channel(&self, q: &crate::firewall::approval::Question) {
        if !self.principal.is_owner() {
            return;
        }
        let Some(deliver) = self.channels.deliver(&self.channel) else {
            return;
        };
        let question = Msg::ApprovalAsk {
            id: q.id,
            tool: &q.tool,
            summary: &q.summary,
            why: &q.why,
        };
        let msg = Outgoing::text(&self.channel, question.text(), self.meta.clone()).to_wire(self.task_id, &self.source);
        let channel = self.channel.clone();
        actix::spawn(async move {
            if let Err(e) = deliver.call(msg).await {
                tracing::warn!(%channel, "the approval question could not be shown on the channel: {e}; answer it in the WebUI or with waiter");
            }
        });
    }

    fn plugin_of(&self, name: &str) -> String {
        self.tools.get(name).map(|t| t.spec.plugin.clone()).unwrap_or_default()
    }

    fn base_ctx(&self) -> StageContext {
        let mut c = StageContext::default();
        c.extra.insert("output_channel".into(), json!(self.channel));
        c.extra.insert("input_source".into(), json!(self.source));
        c
    }

    /// Runs a batch; outcomes are in call order.
    pub async fn run_batch(&self, calls: &[ToolCall]) -> Vec<Outcome> {
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        use tracing::Instrument as _;
        let traced = |c: &ToolCall| crate::trace_span!(parent: &self.span, "tool_call", tool = %c.name);
        let pre: Vec<(Option<Outcome>, Value, bool)> = if self.tools.batch_is_parallel(&names) {
            futures_util::future::join_all(calls.iter().map(|c| self.before_and_exec(c).instrument(traced(c)))).await
        } else {
            let mut v = Vec::with_capacity(calls.len());
            for c in calls {
                v.push(self.before_and_exec(c).instrument(traced(c)).await);
            }
            v
        };
        // after_toolcall runs in call order, whatever way the batch ran.
        let mut out = Vec::with_capacity(calls.len());
        for (call, (denied, raw, success)) in calls.iter().zip(pre) {
            if let Some(d) = denied {
                out.push(d);
                continue;
            }
            let mut sctx = self.base_ctx();
            sctx.tool_results = vec![StageToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                plugin: self.plugin_of(&call.name),
                success,
                result: raw.clone(),
            }];
            let after = run_stage(&self.stages, Stage::AfterToolcall, sctx).await;
            let (result, success) = after
                .tool_results
                .first()
                .map_or((raw, success), |r| (r.result.clone(), r.success));
            let text = match result {
                Value::String(s) => s,
                other => other.to_string(),
            };
            out.push(Outcome {
                text,
                status: if success { ToolStatus::Ok } else { ToolStatus::Error },
            });
        }
        out
    }

    /// `before_toolcall` then execution: `(Some(denial), ..)` or `(None, raw result, success)`.
    async fn before_and_exec(&self, call: &ToolCall) -> (Option<Outcome>, Value, bool) {
        let denied = |text: String| {
            (
                Some(Outcome {
                    text,
                    status: ToolStatus::Denied,
                }),
                Value::Null,
                false,
            )
        };
        // The owner's policy first: a denied tool is not even shown to stage plugins.
        if let Err(refused) = self.firewall.check_tool_for(&call.name, &self.principal) {
            return denied(refused.reason);
        }
        let mut sctx = self.base_ctx();
        sctx.tool_calls = vec![StageToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            plugin: self.plugin_of(&call.name),
            arguments: call.arguments.clone(),
        }];
        let before = run_stage(&self.stages, Stage::BeforeToolcall, sctx).await;
        if let Some(reason) = before.response {
            let text = if reason.trim().is_empty() {
                Msg::ToolDeniedByPlugin { tool: &call.name }.text()
            } else {
                reason.trim().to_owned()
            };
            return (
                Some(Outcome {
                    text,
                    status: ToolStatus::Denied,
                }),
                Value::Null,
                false,
            );
        }
        let mut args = before
            .tool_calls
            .into_iter()
            .next()
            .map_or(call.arguments.clone(), |c| c.arguments);
        strip_kernel_args(&mut args);
        // Which task called: the kernel's own agent and memory tools learn it from the
        // arguments they receive. Added last, so neither the firewall's filling nor the
        // owner's approval question ever sees it as something the model wrote.
        let caller = self.tools.get(&call.name).is_some_and(|t| t.spec.origin).then(|| {
            json!(crate::stages::Caller {
                source: self.source.clone(),
                channel: self.channel.clone(),
                task_id: self.task_id,
                principal: self.principal.clone(),
                agent: self.agent.clone(),
            })
        });
        let with_caller = |mut args: Value| {
            if let (Some(c), Some(obj)) = (&caller, args.as_object_mut()) {
                obj.insert(crate::stages::ORIGIN_ARG.into(), c.clone());
            }
            args
        };
        if call.name == seq::SEQ_TOOL {
            // Not filled here: each step is filled (and checked) on its own way out,
            // so no stage plugin ever sees a step's secret values. Nor reviewed again
            // on the way back: every step's result was masked and reviewed already.
            let (text, ok) = self.run_seq(&call.id, &with_caller(args)).await;
            return (None, Value::String(text), ok);
        }
        // Kept for the owner's eyes if the call must be approved: the arguments as the
        // model wrote them (aliases, not values).
        let written = args;
        // Aliases become values only in the copy the tool receives.
        let network = self.tools.get(&call.name).is_some_and(|t| t.spec.network);
        let mut args = match self
            .firewall
            .outbound(&call.name, network, self.principal.is_owner(), &written)
        {
            Ok(a) => a,
            Err(e) => return denied(e.to_string()),
        };
        // Tools that touch the machine or the network: the sandbox checks (and makes
        // real) every declared path, and rides along for the plugin's own check.
        if let Some(spec) = self.tools.get(&call.name).map(|t| &t.spec).filter(|s| s.sandboxed())
            && let Err(refused) = self.firewall.guard(&call.name, &spec.paths, spec.network, &mut args)
        {
            return denied(format!("firewall (sandbox) refused {}: {refused}", call.name));
        }
        // After untrusted content, a risky call waits for the owner's yes.
        let why = self.untrusted.lock().clone();
        if let Err(refused) = self
            .firewall
            .approve(&self.bus, self.task_id, &call.name, &written, why.as_deref(), |q| {
                self.ask_on_channel(q)
            })
            .await
        {
            return denied(refused.reason);
        }
        let args = with_caller(args);
        let (text, ok) = self.execute(&call.name, args).await;
        // Masked and reviewed before anything else (after_toolcall plugins included) sees it.
        let (text, flagged) = self.firewall.inbound_reviewed(&call.name, text);
        // What the turn read from outside makes it untrusted from here on.
        if let Some(why) = untrusted_by(&call.name, network, flagged) {
            self.untrusted.lock().get_or_insert(why);
        }
        (None, Value::String(text), ok)
    }

    /// `seq_run`: each group of the plan through [`Self::run_batch`] (the whole path
    /// of a model's call), stopping after the first group with a step that failed.
    /// Boxed: the steps run through the function that called this one.
    fn run_seq<'a>(&'a self, id: &'a str, args: &'a Value) -> futures_util::future::BoxFuture<'a, (String, bool)> {
        Box::pin(async move {
            let plan = match seq::parse(args) {
                Ok(p) => p,
                Err(e) => return (format!("seq_run: {e}"), false),
            };
            tracing::debug!(groups = plan.len(), "seq_run");
            let mut results = Vec::new();
            let mut n = 0;
            for group in &plan {
                let calls: Vec<ToolCall> = group
                    .iter()
                    .map(|s| {
                        n += 1;
                        ToolCall {
                            id: format!("{id}-seq{n}"),
                            name: s.tool.clone(),
                            arguments: s.args.clone(),
                            raw_arguments: s.args.to_string(),
                        }
                    })
                    .collect();
                let outcomes = self.run_batch(&calls).await;
                let failed = outcomes.iter().any(|o| o.status != ToolStatus::Ok);
                results.extend(group.iter().zip(outcomes).map(|(s, o)| seq::StepResult {
                    tool: s.tool.clone(),
                    status: o.status,
                    text: o.text,
                }));
                if failed {
                    break;
                }
            }
            seq::report(&plan, &results)
        })
    }

    /// Runs one tool: argument errors, output channels, then the registry.
    async fn execute(&self, name: &str, args: Value) -> (String, bool) {
        if let Some(err) = args.get("__arg_error").and_then(Value::as_str) {
            return (err.to_owned(), false);
        }
        match parse_send_tool(name) {
            Some((channel, true)) => return (self.channels.help(channel), true),
            Some((channel, false)) => return self.send(channel, &args).await,
            None => {}
        }
        let Some(tool) = self.tools.get(name) else {
            let mut names: Vec<String> = self.tools.defs().into_iter().map(|d| d.function.name).collect();
            names.extend(self.channels.tools().into_iter().map(|d| d.function.name));
            return (
                Msg::NoSuchTool {
                    tool: name,
                    available: &names.join(", "),
                }
                .text(),
                false,
            );
        };
        match tokio::time::timeout(self.timeout, tool.handler.call(args)).await {
            Ok(Ok(text)) => (text, true),
            Ok(Err(e)) => (
                Msg::ToolFailed {
                    tool: name,
                    error: &e.to_string(),
                }
                .text(),
                false,
            ),
            Err(_) => (
                Msg::ToolTimedOut {
                    tool: name,
                    timeout: self.timeout,
                }
                .text(),
                false,
            ),
        }
    }

    /// `output_send__<channel>`: checks, `before_output` on the payload, delivery.
    async fn send(&self, channel: &str, args: &Value) -> (String, bool) {
        let mut msg = match self.channels.check_send(channel, args) {
            Ok(m) => m,
            Err(refused) => return (refused.to_string(), false),
        };
        let mut sctx = self.base_ctx();
        sctx.final_text = std::mem::take(&mut msg.payload);
        let out = run_stage(&self.stages, Stage::BeforeOutput, sctx).await;
        if let Some(r) = out.response {
            return (Msg::OutputBlocked { reason: &r }.text(), false);
        }
        if out.final_text.is_empty() {
            return (Msg::OutputEmptied.text(), false);
        }
        msg.payload = out.final_text.clone();
        let deliver = self.channels.deliver(channel);
        self.bus.publish(crate::bus::Event::Output {
            channel: channel.to_owned(),
            payload: out.final_text,
            content_type: msg.kind.clone(),
            meta: msg.meta.clone(),
            task_id: self.task_id,
            source: self.source.clone(),
        });
        // A plugin's channel: the plugin delivers it and its answer is the tool's reply.
        let Some(deliver) = deliver else {
            return ("ok".into(), true);
        };
        let wire = msg.to_wire(self.task_id, &self.source);
        match tokio::time::timeout(self.timeout, deliver.call(wire)).await {
            Ok(Ok(text)) if text.is_empty() => ("ok".into(), true),
            Ok(Ok(text)) => (text, true),
            Ok(Err(e)) => (
                Msg::SendFailed {
                    channel,
                    error: &e.to_string(),
                }
                .text(),
                false,
            ),
            Err(_) => (
                Msg::SendTimedOut {
                    channel,
                    timeout: self.timeout,
                }
                .text(),
                false,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_cannot_bring_its_own_sandbox_or_caller() {
        let mut args = json!({
            "path": "a.txt",
            SANDBOX_ARG: {"roots": ["/"]},
            crate::stages::ORIGIN_ARG: {"principal": {"name": "owner"}},
        });
        strip_kernel_args(&mut args);
        assert_eq!(args, json!({"path": "a.txt"}));
        let mut not_an_object = json!("text");
        strip_kernel_args(&mut not_an_object);
        assert_eq!(not_an_object, json!("text"));
    }

    #[test]
    fn what_was_read_from_outside_or_flagged_makes_the_turn_untrusted() {
        assert_eq!(untrusted_by("files_read", false, false), None);
        assert_eq!(
            untrusted_by("web_fetch", true, false).as_deref(),
            Some("it read the result of web_fetch")
        );
        assert_eq!(
            untrusted_by("mcp__fs__read", false, false).as_deref(),
            Some("it read the result of mcp__fs__read")
        );
        assert_eq!(
            untrusted_by("files_read", false, true).as_deref(),
            Some("the review flagged the result of files_read"),
            "a flag names the review, even for a network tool"
        );
    }
}
