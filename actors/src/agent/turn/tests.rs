//! The turn's rules, driven event by event without actix: each test feeds what the
//! shell would report and asserts the commands the core answers.

use super::*;
use crate::addr::SendError;
use crate::agent::recollect::NotRecorded;
use crate::bus::{Event as BusEvent, ToolStatus};
use crate::llm::CompletionResponse;
use crate::stages::ContextMsg;

/// A core with the settings and channels a shell would pass.
struct Turn {
    core: TurnCore,
    prompt: PromptSettings,
    channels: Channels,
    limits: Limits,
    /// What `Env::mono_ms` says.
    mono_ms: i64,
    gate: CredentialGate,
}

fn limits() -> Limits {
    Limits {
        max_tool_turns: 10,
        max_tokens: 4096,
        temperature: 0.7,
        max_context_size: 30,
        window: 8192,
        media_reserve: 0,
        outage_wait_ms: 3_600_000,
        max_turn_ms: 1_800_000,
    }
}

fn input(text: &str) -> TurnInput {
    TurnInput {
        source: "http".into(),
        channel: "http".into(),
        text: text.into(),
        ..Default::default()
    }
}

impl Turn {
    fn new(input: TurnInput) -> Self {
        Self {
            core: TurnCore::new(7, input),
            prompt: PromptSettings {
                system_prompt: "You are HomeAgent.".into(),
                ..Default::default()
            },
            channels: Channels::builtin(),
            limits: limits(),
            mono_ms: 0,
            gate: CredentialGate::default(),
        }
    }

    /// Feeds one event; a gather it answers is answered as a shell with no plugin
    /// tools and no images would ([`Gathered::default`]), the commands of both joined.
    fn feed(&mut self, e: Event) -> Vec<Cmd> {
        let mut cmds = self.feed_only(e);
        if matches!(cmds.last(), Some(Cmd::Gather { .. })) {
            cmds.pop();
            cmds.extend(self.feed_only(Event::Gathered(Gathered::default())));
        }
        cmds
    }

    /// Feeds one event, nothing answered on the shell's behalf.
    fn feed_only(&mut self, e: Event) -> Vec<Cmd> {
        let env = Env {
            prompt: &self.prompt,
            channels: &self.channels,
            limits: self.limits,
            now_ms: 1_000,
            mono_ms: self.mono_ms,
            gate: &self.gate,
        };
        self.core.handle(e, &env)
    }

    /// Feeds a stage's context back unchanged (what the shell does when no plugin
    /// hooks the stage), asserting the stage asked for.
    fn echo(&mut self, cmds: Vec<Cmd>, want: Stage) -> Vec<Cmd> {
        let c = stage(&cmds, want);
        self.feed(Event::stage(want, c))
    }

    /// Prepare phase of a queued input with `timeline`, up to the first safe point.
    fn prepare(&mut self, timeline: &str) -> Vec<Cmd> {
        let c = self.feed(Event::Started);
        let c = self.echo(c, Stage::OnInput);
        assert!(matches!(c[..], [Cmd::ReadTimeline { record: Some(_), .. }]), "{c:?}");
        let c = self.feed(Event::Timeline(timeline.into()));
        assert!(c.is_empty(), "the input's commit answers next: {c:?}");
        let c = self.feed(Event::InputRecorded(Ok(())));
        let c = self.echo(c, Stage::PreAction);
        assert!(matches!(c[..], [Cmd::ConsumeCancel]), "{c:?}");
        let c = self.feed(Event::StopBudget(false));
        assert!(is_safe_point(&c), "{c:?}");
        c
    }

    /// Prepare, then go on at the safe point: the first request.
    fn first_request(&mut self) -> CompletionRequest {
        self.prepare("");
        request(self.feed(Event::SafePoint(Ok(false))))
    }

    /// The model answers (no plugin hooks post_action); the commands after it.
    fn answer(&mut self, c: Completion) -> Vec<Cmd> {
        let cmds = self.feed(Event::Llm { result: Ok(c) });
        self.echo(cmds, Stage::PostAction)
    }

    /// A tool batch ran with these results; then the safe point said go on.
    fn tools_ran(&mut self, results: &[&str]) -> Vec<Cmd> {
        let outcomes = results
            .iter()
            .map(|t| Outcome {
                text: (*t).into(),
                status: ToolStatus::Ok,
            })
            .collect();
        let c = self.feed(Event::ToolsDone(outcomes));
        assert!(is_safe_point(&c), "{c:?}");
        self.feed(Event::SafePoint(Ok(false)))
    }

    /// before_output unchanged, then the commit: the final commands.
    fn output(&mut self, cmds: Vec<Cmd>) -> Vec<Cmd> {
        let c = self.echo(cmds, Stage::BeforeOutput);
        assert!(c.iter().any(|c| matches!(c, Cmd::Commit { .. })), "{c:?}");
        self.feed(Event::Committed(Ok(())))
    }
}

fn stage(cmds: &[Cmd], want: Stage) -> StageContext {
    match cmds.iter().find(|c| matches!(c, Cmd::RunStage(..))) {
        Some(Cmd::RunStage(s, c)) if *s == want => c.clone(),
        _ => panic!("expected RunStage({want:?}) in {cmds:?}"),
    }
}

fn is_safe_point(cmds: &[Cmd]) -> bool {
    matches!(cmds.last(), Some(Cmd::AskSafePoint { consolidation: false }))
}

fn request(cmds: Vec<Cmd>) -> CompletionRequest {
    match cmds.into_iter().last() {
        Some(Cmd::CallLlm(r)) => r,
        other => panic!("expected CallLlm, got {other:?}"),
    }
}

fn completion(text: &str, calls: &[(&str, &str)]) -> Completion {
    Completion {
        response: CompletionResponse {
            content: text.into(),
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                cached_tokens: 0,
                cost_micros: 0,
            },
            tool_calls: calls
                .iter()
                .map(|(id, name)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: json!({"q": 1}),
                    raw_arguments: r#"{"q":1}"#.into(),
                })
                .collect(),
            ..Default::default()
        },
        source: "primary".into(),
        model: "m1".into(),
    }
}

fn reply_of(cmds: &[Cmd]) -> &Reply {
    cmds.iter()
        .find_map(|c| match c {
            Cmd::Reply(r) => Some(r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no reply in {cmds:?}"))
}

fn final_text(cmds: &[Cmd]) -> String {
    match cmds.iter().find(|c| matches!(c, Cmd::RunStage(Stage::BeforeOutput, _))) {
        Some(Cmd::RunStage(_, c)) => c.final_text.clone(),
        _ => panic!("expected before_output in {cmds:?}"),
    }
}

fn texts(r: &CompletionRequest) -> Vec<(String, String)> {
    r.messages
        .iter()
        .map(|m| (m.role.clone(), m.content.as_str().unwrap_or("").to_owned()))
        .collect()
}

fn ended(cmds: &[Cmd]) -> Option<End> {
    cmds.iter().find_map(|c| match c {
        Cmd::Finish(e) => Some(*e),
        _ => None,
    })
}

#[test]
fn a_text_answer_records_the_input_then_commits_and_replies_once() {
    let mut t = Turn::new(input("hello"));
    let c = t.feed(Event::Started);
    let c = t.echo(c, Stage::OnInput);
    match &c[..] {
        [Cmd::ReadTimeline { record: Some(e), .. }] => {
            assert_eq!((e.source.as_str(), e.input.as_str(), e.ts_ms), ("http", "hello", 1_000));
            assert!(e.response.is_empty());
        }
        _ => panic!("{c:?}"),
    }
    let c = t.feed(Event::Timeline("【对话时序】\nearlier".into()));
    assert!(c.is_empty(), "the commit of the input answers next: {c:?}");
    let c = t.feed(Event::InputRecorded(Ok(())));
    t.echo(c, Stage::PreAction);
    t.feed(Event::StopBudget(false));
    let req = request(t.feed(Event::SafePoint(Ok(false))));
    let m = texts(&req);
    assert_eq!(m.len(), 4, "system, timeline, source context, user: {m:?}");
    assert_eq!(m[1].1, "【对话时序】\nearlier");
    assert_eq!(m[3], ("user".into(), "hello".into()));
    assert_eq!((req.max_tokens, req.temperature, req.stream), (4096, 0.7, true));
    let c = t.answer(completion("hi there", &[]));
    let chain = c.iter().find_map(|c| match c {
        Cmd::Publish(e @ BusEvent::AgentLlmChain { .. }) => Some(bus(e)),
        _ => None,
    });
    let (kind, data) = chain.expect("agent_llm_chain after post_action");
    assert_eq!(kind, "agent_llm_chain");
    assert_eq!(data["content"], "hi there");
    assert_eq!(data["phase"], "intermediate");
    assert_eq!(data["usage"]["total"], 15);
    assert_eq!(final_text(&c), "hi there");
    let c = t.echo(c, Stage::BeforeOutput);
    match &c[..] {
        [Cmd::LogText(l), Cmd::Commit { event: e, .. }] => {
            assert_eq!((l.input.as_str(), l.response.as_str()), ("hello", "hi there"));
            assert_eq!((e.source.as_str(), e.response.as_str()), ("agent", "hi there"));
        }
        _ => panic!("{c:?}"),
    }
    let c = t.feed(Event::Committed(Ok(())));
    assert_eq!(reply_of(&c).content, "hi there");
    assert_eq!(reply_of(&c).usage.total_tokens, 15);
    let out = c.iter().find_map(|c| match c {
        Cmd::Publish(e @ BusEvent::AgentOutput { error: false, .. }) => Some(bus(e)),
        _ => None,
    });
    assert_eq!(
        out,
        Some((
            "agent_output",
            json!({"task_id": 7, "text": "hi there", "channel": "http", "source": "http"})
        ))
    );
    assert!(c.iter().any(|c| matches!(c, Cmd::AfterOutput(_))));
    assert_eq!(ended(&c), Some(End::Done));
    assert!(t.core.is_done());
}

#[test]
fn the_tool_turn_cap_ends_with_the_last_text_or_the_limit_message() {
    for (text, want) in [
        ("working on it", "working on it".to_owned()),
        ("", Msg::MaxToolTurns { limit: 2 }.text()),
    ] {
        let mut t = Turn::new(input("loop"));
        t.limits.max_tool_turns = 2;
        t.first_request();
        let c = t.answer(completion(text, &[("c1", "demo_tool")]));
        assert!(is_safe_point(&c));
        assert!(matches!(t.feed(Event::SafePoint(Ok(false)))[..], [Cmd::RunTools(_)]));
        request(t.tools_ran(&["r1"]));
        let c = t.answer(completion("", &[("c2", "demo_tool")]));
        assert!(is_safe_point(&c));
        t.feed(Event::SafePoint(Ok(false)));
        let c = t.tools_ran(&["r2"]);
        assert_eq!(t.core.turn(), 2);
        assert_eq!(final_text(&c), want, "no third LLM call");
    }
    // 0 = unlimited.
    let mut t = Turn::new(input("loop"));
    t.limits.max_tool_turns = 0;
    t.first_request();
    for i in 0..12 {
        t.answer(completion("", &[("c", "demo_tool")]));
        t.feed(Event::SafePoint(Ok(false)));
        request(t.tools_ran(&[&format!("r{i}")]));
    }
}

#[test]
fn one_assistant_message_per_batch_then_the_continuation_placeholder() {
    let mut t = Turn::new(input("send it"));
    let first = t.first_request();
    assert!(
        !texts(&first).iter().any(|(_, c)| prompt::is_continuation(c)),
        "never after the first round"
    );
    // A reply-only batch (two sends, no help): plain text is the way to end.
    t.answer(completion(
        "sending",
        &[("a", "output_send__http"), ("b", "output_send__cli")],
    ));
    t.feed(Event::SafePoint(Ok(false)));
    let req = request(t.tools_ran(&["ok", "ok"]));
    let m = texts(&req);
    let assistants: Vec<_> = req.messages.iter().filter(|m| m.role == "assistant").collect();
    assert_eq!(assistants.len(), 1);
    assert_eq!(assistants[0].tool_calls.len(), 2, "every call of the batch");
    assert_eq!(assistants[0].content, "sending");
    let tail: Vec<_> = m[m.len() - 3..].iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(tail, ["tool", "tool", "user"]);
    assert_eq!(m.last().unwrap().1, Msg::ContinueAfterSend.text());
    // A batch with a help call is not reply-only; the old placeholder is replaced.
    t.answer(completion("", &[("c", "output_send__http_help")]));
    t.feed(Event::SafePoint(Ok(false)));
    let req = request(t.tools_ran(&["help text"]));
    let m = texts(&req);
    assert_eq!(m.last().unwrap().1, Msg::ContinueAfterTools.text());
    let placeholders = m.iter().filter(|(_, c)| prompt::is_continuation(c)).count();
    assert_eq!(placeholders, 1);
    let second = req.messages.iter().filter(|m| m.role == "assistant").nth(1).unwrap();
    assert_eq!(second.content, Value::Null, "no text: null content");
}

#[test]
fn tool_results_become_tool_messages_events_and_the_committed_tool_outputs() {
    let mut t = Turn::new(input("look it up"));
    t.first_request();
    t.answer(completion("", &[("c1", "demo_search"), ("c2", "demo_other")]));
    let c = t.feed(Event::SafePoint(Ok(false)));
    match &c[..] {
        [Cmd::RunTools(calls)] => assert_eq!(calls.len(), 2),
        _ => panic!("{c:?}"),
    }
    let c = t.feed(Event::ToolsDone(vec![
        Outcome {
            text: "found".into(),
            status: ToolStatus::Ok,
        },
        Outcome {
            text: "denied".into(),
            status: ToolStatus::Denied,
        },
    ]));
    let events: Vec<_> = c
        .iter()
        .filter_map(|c| match c {
            Cmd::Publish(e) => Some(bus(e)),
            _ => None,
        })
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[1],
        (
            "tool_call",
            json!({"task_id": 7, "id": "c2", "name": "demo_other", "arguments": {"q": 1}, "status": "denied", "result": "denied"})
        )
    );
    t.feed(Event::SafePoint(Ok(false)));
    let c = t.answer(completion("done", &[]));
    let c = t.echo(c, Stage::BeforeOutput);
    let commit = c.iter().find_map(|c| match c {
        Cmd::Commit { event: e, .. } => Some(e),
        _ => None,
    });
    let e = commit.expect("commit");
    assert_eq!(e.tools_used, ["demo_search", "demo_other"]);
    assert_eq!(e.tool_results.len(), 2);
    assert_eq!(
        (e.tool_results[0].output.as_str(), e.tool_results[0].compute.as_deref()),
        ("found", None)
    );
    let c = t.feed(Event::Committed(Ok(())));
    assert_eq!(reply_of(&c).tools_used, ["demo_search", "demo_other"]);
    assert_eq!(reply_of(&c).usage.total_tokens, 30, "usage of both calls");
}

/// A timeline of about 50k estimated tokens: past 1.25 × 32k.
fn huge() -> String {
    "字".repeat(25_000)
}

#[test]
fn overflow_precheck_prunes_notifies_and_rebuilds_the_prefix() {
    let mut t = Turn::new(input("hello"));
    t.prepare(&huge());
    let c = t.feed(Event::SafePoint(Ok(false)));
    match &c[..] {
        [
            Cmd::Prune {
                context_tokens,
                max_context_size,
            },
        ] => {
            assert_eq!(*max_context_size, 30);
            assert!(*context_tokens > 0 && *context_tokens < 32_768);
        }
        _ => panic!("expected a prune, not a request: {c:?}"),
    }
    let c = t.feed(Event::Pruned(Ok(4)));
    match &c[..] {
        [Cmd::SubmitNotice { source, text }, Cmd::ReadTimeline { query, .. }] => {
            assert_eq!(*source, "kernel/overflow");
            assert_eq!(*text, Msg::OverflowNotice { pruned: 4 }.text());
            assert_eq!(query, "hello");
        }
        _ => panic!("{c:?}"),
    }
    let c = t.feed(Event::Timeline("【对话时序】\nshort".into()));
    assert!(is_safe_point(&c), "rebuilt, then a safe point: {c:?}");
    let req = request(t.feed(Event::SafePoint(Ok(false))));
    let m = texts(&req);
    assert_eq!(m[1].1, "【对话时序】\nshort");
    assert_eq!(m.len(), 4, "the old prefix is replaced, not kept: {}", m.len());
    assert_eq!(t.core.turn(), 0, "the local overflow path does not count a turn");
}

#[test]
fn nothing_pruned_means_no_notice_and_the_third_overflow_fails_naming_the_setting() {
    let mut t = Turn::new(input("hello"));
    t.prepare(&huge());
    for round in 0..2 {
        let c = t.feed(Event::SafePoint(Ok(false)));
        assert!(matches!(c[..], [Cmd::Prune { .. }]), "round {round}: {c:?}");
        let pruned = if round == 0 {
            Ok(0)
        } else {
            Err(PruneFailure::Store("disk full".into()))
        };
        let c = t.feed(Event::Pruned(pruned));
        assert!(
            matches!(c[..], [Cmd::ReadTimeline { record: None, .. }]),
            "no notice when nothing moved, and a rebuilt timeline records nothing: {c:?}"
        );
        t.feed(Event::Timeline(huge().into()));
    }
    let c = t.feed(Event::SafePoint(Ok(false)));
    let r = reply_of(&c);
    let e = r.error.as_deref().unwrap();
    assert!(
        e.contains("core.agent.max_context_size") && e.contains("pruned 2 times"),
        "{e}"
    );
    assert_eq!(r.content, Msg::TaskFailed { error: e }.text());
    assert_eq!(ended(&c), Some(End::Failed));
    assert!(
        c.iter()
            .any(|c| matches!(c, Cmd::Publish(BusEvent::AgentOutput { error: true, .. })))
    );
}

#[test]
fn the_store_unavailable_during_a_prune_fails_the_task() {
    let mut t = Turn::new(input("hello"));
    t.prepare(&huge());
    t.feed(Event::SafePoint(Ok(false)));
    let c = t.feed(Event::Pruned(Err(PruneFailure::Unavailable(exited(
        "kernel/memory/context",
    )))));
    assert_eq!(
        reply_of(&c).error.as_deref(),
        Some(
            "the context store is unavailable: actor `kernel/memory/context` exited before answering (mailbox closed); the supervisor restarts it per its policy"
        )
    );
}

#[test]
fn a_vendor_context_full_recovers_twice_then_fails_with_both_messages() {
    let mut t = Turn::new(input("hello"));
    t.first_request();
    for _ in 0..2 {
        let c = t.feed(Event::Llm {
            result: Err(LlmFailure::ContextFull("too long".into())),
        });
        assert!(matches!(c[..], [Cmd::Prune { .. }]), "{c:?}");
        t.feed(Event::Pruned(Ok(2)));
        let c = t.feed(Event::Timeline(Default::default()));
        assert!(is_safe_point(&c));
        request(t.feed(Event::SafePoint(Ok(false))));
    }
    let c = t.feed(Event::Llm {
        result: Err(LlmFailure::ContextFull("too long".into())),
    });
    let e = reply_of(&c).error.clone().unwrap();
    assert!(
        e.contains("core.agent.max_context_size") && e.ends_with("(too long)"),
        "{e}"
    );
    assert!(e.contains("4 events moved out"), "{e}");
}

#[test]
fn other_llm_errors_fail_the_task_with_the_error() {
    let mut t = Turn::new(input("hello"));
    t.first_request();
    let c = t.feed(Event::Llm {
        result: Err(LlmFailure::from(LlmError::AllFailed("boom".into()))),
    });
    let e = reply_of(&c).error.clone().unwrap();
    assert!(e.starts_with("all LLM sources failed: boom"), "{e}");
    assert_eq!(ended(&c), Some(End::Failed));
}

#[test]
fn a_durable_input_waits_out_an_outage_and_then_answers() {
    let mut t = Turn::new(TurnInput {
        durable: true,
        ..input("hello")
    });
    let first = t.first_request();
    let unavailable = |t: &mut Turn, e: LlmError| {
        t.feed(Event::Llm {
            result: Err(LlmFailure::from(e)),
        })
    };
    // No hint: doubling from 2 s.
    let c = unavailable(&mut t, LlmError::AllFailed("503".into()));
    assert!(
        matches!(&c[..], [Cmd::Publish(BusEvent::TaskWaiting { attempt: 1, retry_in_ms: 2_000, .. }), Cmd::Backoff(w)] if w.as_millis() == 2_000),
        "{c:?}"
    );
    assert!(is_safe_point(&t.feed(Event::BackoffOver)));
    assert_eq!(
        request(t.feed(Event::SafePoint(Ok(false)))).messages,
        first.messages,
        "the same request again"
    );
    // The paused sources' hint wins.
    let c = unavailable(
        &mut t,
        LlmError::AllPaused {
            wait_s: 7,
            detail: String::new(),
        },
    );
    assert!(matches!(c[..], [_, Cmd::Backoff(w)] if w.as_millis() == 7_000), "{c:?}");
    t.feed(Event::BackoffOver);
    t.feed(Event::SafePoint(Ok(false)));
    let c = t.answer(completion("hi there", &[]));
    assert_eq!(ended(&t.output(c)), Some(End::Done));
}

#[test]
fn an_outage_fails_a_synchronous_input_at_once_and_a_durable_one_after_its_limit() {
    let mut t = Turn::new(input("hello"));
    t.first_request();
    let c = t.feed(Event::Llm {
        result: Err(LlmFailure::from(LlmError::NoSource("no source is configured".into()))),
    });
    assert_eq!(ended(&c), Some(End::Failed), "a caller waits: it sees the error");

    let mut t = Turn::new(TurnInput {
        durable: true,
        ..input("hello")
    });
    t.limits.outage_wait_ms = 0;
    t.first_request();
    let c = t.feed(Event::Llm {
        result: Err(LlmFailure::from(LlmError::AllFailed("503".into()))),
    });
    assert_eq!(ended(&c), Some(End::Failed));
}

#[test]
fn a_turn_past_its_time_limit_ends_before_its_next_llm_call_outage_waits_aside() {
    let mut t = Turn::new(TurnInput {
        durable: true,
        ..input("long job")
    });
    t.limits.max_turn_ms = 10_000;
    t.first_request();
    // 30 s of outage wait do not count...
    t.mono_ms = 30_000;
    let c = t.feed(Event::Llm {
        result: Err(LlmFailure::from(LlmError::AllPaused {
            wait_s: 30,
            detail: String::new(),
        })),
    });
    assert!(matches!(c[..], [_, Cmd::Backoff(_)]), "{c:?}");
    t.feed(Event::BackoffOver);
    let c = t.feed(Event::SafePoint(Ok(false)));
    assert!(matches!(c[..], [Cmd::CallLlm(_)]), "waiting is not working: {c:?}");
    // ...but working past the limit does.
    t.mono_ms = 45_000;
    let c = t.answer(completion("", &[("c1", "demo_tool")]));
    assert!(is_safe_point(&c));
    assert!(matches!(t.feed(Event::SafePoint(Ok(false)))[..], [Cmd::RunTools(_)]));
    let c = t.tools_ran(&["r1"]);
    let e = reply_of(&c).error.clone().unwrap();
    assert!(e.contains("core.agent.max_turn_time"), "{e}");
    assert_eq!(ended(&c), Some(End::Failed));
}

#[test]
fn a_durable_input_waits_for_a_full_disk_and_is_recorded_once() {
    let mut t = Turn::new(TurnInput {
        durable: true,
        ..input("remember this")
    });
    let c = t.feed(Event::Started);
    let c = t.echo(c, Stage::OnInput);
    assert!(matches!(c[..], [Cmd::ReadTimeline { record: Some(_), .. }]), "{c:?}");
    t.feed(Event::Timeline(Default::default()));
    let c = t.feed(Event::InputRecorded(Err(NotRecorded::Refused(
        "database or disk is full".into(),
    ))));
    assert!(
        matches!(&c[..], [Cmd::Publish(BusEvent::TaskWaiting { error, .. }), Cmd::Backoff(_)] if error.contains("disk is full")),
        "{c:?}"
    );
    let c = t.feed(Event::BackoffOver);
    assert!(
        matches!(c[..], [Cmd::ReadTimeline { record: Some(_), .. }]),
        "recorded again: {c:?}"
    );
    t.feed(Event::Timeline(Default::default()));
    let c = t.feed(Event::InputRecorded(Ok(())));
    stage(&c, Stage::PreAction);

    // Not for a caller who waits: it sees the error.
    let mut t = Turn::new(input("remember this"));
    let c = t.feed(Event::Started);
    t.echo(c, Stage::OnInput);
    t.feed(Event::Timeline(Default::default()));
    let c = t.feed(Event::InputRecorded(Err(NotRecorded::Refused(
        "database or disk is full".into(),
    ))));
    assert_eq!(ended(&c), Some(End::Failed));
}

#[test]
fn a_stop_during_an_outage_wait_does_not_wait_for_it() {
    let mut t = Turn::new(TurnInput {
        durable: true,
        ..input("hello")
    });
    t.first_request();
    let c = t.feed(Event::Llm {
        result: Err(LlmFailure::from(LlmError::AllFailed("503".into()))),
    });
    assert!(matches!(c[..], [_, Cmd::Backoff(_)]));
    assert!(is_safe_point(&t.feed(Event::Cancel)), "the safe point comes at once");
    assert!(t.feed(Event::BackoffOver).is_empty(), "the wait's end is moot now");
}

#[test]
fn a_stop_in_flight_keeps_what_streamed_marked_as_stopped() {
    for (partial, want) in [
        ("half an ans", Msg::StoppedPartial { partial: "half an ans" }.text()),
        ("", Msg::Stopped.text()),
    ] {
        let mut t = Turn::new(input("long answer"));
        t.first_request();
        assert!(matches!(t.feed(Event::Cancel)[..], [Cmd::CancelLlm]));
        let c = t.feed(Event::Llm {
            result: Err(LlmFailure::Cancelled {
                partial: partial.into(),
            }),
        });
        assert!(matches!(c[..], [Cmd::TakeStop]), "the stream is not reset: {c:?}");
        let c = t.feed(Event::StopTaken(true));
        assert_eq!(final_text(&c), want);
        let c = t.output(c);
        assert_eq!(reply_of(&c).content, want);
        assert_eq!(ended(&c), Some(End::Cancelled));
    }
    assert!(
        Msg::StoppedPartial { partial: "half an ans" }
            .text()
            .starts_with("half an ans")
    );
}

#[test]
fn a_preemption_in_flight_discards_the_output_counts_a_turn_and_resends_after_resume() {
    let mut t = Turn::new(input("long answer"));
    let first = t.first_request();
    t.feed(Event::Cancel);
    t.feed(Event::Llm {
        result: Err(LlmFailure::Cancelled {
            partial: "the first words".into(),
        }),
    });
    let c = t.feed(Event::StopTaken(false));
    match &c[..] {
        [Cmd::Publish(reset), Cmd::AskSafePoint { .. }] => assert_eq!(
            bus(reset),
            (
                "stream_delta",
                json!({"task_id": 7, "channel": "http", "content": "", "reset": true})
            ),
            "a preemption discards what streamed"
        ),
        _ => panic!("{c:?}"),
    }
    assert!(is_safe_point(&c));
    assert_eq!(t.core.turn(), 1, "the cancelled call counts toward the cap");
    assert!(matches!(t.feed(Event::SafePoint(Ok(true)))[..], [Cmd::Park]));
    assert!(t.feed(Event::Cancel).is_empty(), "parked: kept for later");
    let c = t.feed(Event::Resume);
    assert!(matches!(c[..], [Cmd::ReadTimeline { .. }]), "{c:?}");
    let c = t.feed(Event::Timeline("【对话时序】\nthe interrupt's turn".into()));
    assert!(is_safe_point(&c));
    // The cancel that came while parked is honoured before the re-sent call.
    assert!(matches!(t.feed(Event::SafePoint(Ok(false)))[..], [Cmd::TakeStop]));
    t.feed(Event::StopTaken(false));
    assert_eq!(t.core.turn(), 1, "nothing was in flight: no turn counted");
    let again = request(t.feed(Event::SafePoint(Ok(false))));
    assert_eq!(texts(&again)[1].1, "【对话时序】\nthe interrupt's turn");
    assert_eq!(
        again.messages.len(),
        first.messages.len() + 1,
        "nothing of the cancelled call added"
    );
}

#[test]
fn a_cancel_while_the_prompt_is_built_is_honoured_before_the_call() {
    for (stop, want_call) in [(true, false), (false, true)] {
        let mut t = Turn::new(input("hello"));
        let c = t.feed(Event::Started);
        assert!(
            t.feed(Event::Cancel).is_empty(),
            "no call in flight: nothing to cancel yet"
        );
        let c = t.echo(c, Stage::OnInput);
        assert!(matches!(c[..], [Cmd::ReadTimeline { .. }]));
        t.feed(Event::Timeline(Default::default()));
        let c = t.feed(Event::InputRecorded(Ok(())));
        let c = t.echo(c, Stage::PreAction);
        t.feed(Event::StopBudget(false));
        let c2 = t.feed(Event::SafePoint(Ok(false)));
        assert!(
            matches!(c2[..], [Cmd::TakeStop]),
            "no stream reset, no call: {c2:?} after {c:?}"
        );
        let c = t.feed(Event::StopTaken(stop));
        if want_call {
            assert!(is_safe_point(&c));
            request(t.feed(Event::SafePoint(Ok(false))));
            assert_eq!(t.core.turn(), 0);
        } else {
            assert_eq!(final_text(&c), Msg::Stopped.text());
        }
    }
}

#[test]
fn an_input_waiting_when_stop_was_pressed_ends_at_pre_action() {
    let mut t = Turn::new(input("queued"));
    let c = t.feed(Event::Started);
    let c = t.echo(c, Stage::OnInput);
    let _ = c;
    t.feed(Event::Timeline(Default::default()));
    let c = t.feed(Event::InputRecorded(Ok(())));
    let mut pre = stage(&c, Stage::PreAction);
    pre.context_msgs.push(ContextMsg {
        role: "system".into(),
        content: "from a plugin".into(),
    });
    t.feed(Event::PreAction(pre));
    let c = t.feed(Event::StopBudget(true));
    assert_eq!(final_text(&c), Msg::CancelledByStop.text());
    let c = t.output(c);
    assert_eq!(ended(&c), Some(End::Cancelled));
}

#[test]
fn pre_action_context_messages_join_the_tail_and_survive_a_resume() {
    let mut t = Turn::new(input("hello"));
    let c = t.feed(Event::Started);
    t.echo(c, Stage::OnInput);
    t.feed(Event::Timeline("T1".into()));
    let c = t.feed(Event::InputRecorded(Ok(())));
    let mut pre = stage(&c, Stage::PreAction);
    pre.context_msgs = vec![
        ContextMsg {
            role: "system".into(),
            content: "plugin context".into(),
        },
        ContextMsg {
            role: String::new(),
            content: "dropped: no role".into(),
        },
    ];
    t.feed(Event::PreAction(pre));
    t.feed(Event::StopBudget(false));
    assert_eq!(t.core.prefix_len(), 4);
    // A tool round, then a preemption at the safe point before the next call.
    request(t.feed(Event::SafePoint(Ok(false))));
    t.answer(completion("", &[("c1", "demo_tool")]));
    t.feed(Event::SafePoint(Ok(false)));
    let c = t.feed(Event::ToolsDone(vec![Outcome {
        text: "r1".into(),
        status: ToolStatus::Ok,
    }]));
    assert!(is_safe_point(&c));
    let tail_before = t.core.messages()[t.core.prefix_len()..].to_vec();
    assert_eq!(tail_before.len(), 3, "context, assistant, tool");
    t.feed(Event::SafePoint(Ok(true)));
    t.feed(Event::Resume);
    t.feed(Event::Timeline("T2 (with the interrupt's turn)".into()));
    let msgs = t.core.messages();
    assert_eq!(msgs[1].content, "T2 (with the interrupt's turn)", "prefix rebuilt");
    assert_eq!(msgs[t.core.prefix_len()..], tail_before[..], "tail kept");
    let req = request(t.feed(Event::SafePoint(Ok(false))));
    assert_eq!(texts(&req).last().unwrap().1, Msg::ContinueAfterTools.text());
}

#[test]
fn a_parked_tool_step_runs_the_batch_after_resume() {
    let mut t = Turn::new(input("hello"));
    t.first_request();
    t.answer(completion("", &[("c1", "demo_tool")]));
    assert!(matches!(t.feed(Event::SafePoint(Ok(true)))[..], [Cmd::Park]));
    assert!(t.feed(Event::ToolsDone(vec![])).is_empty(), "stale events are ignored");
    t.feed(Event::Resume);
    t.feed(Event::Timeline(Default::default()));
    assert!(matches!(t.feed(Event::SafePoint(Ok(false)))[..], [Cmd::RunTools(_)]));
}

#[test]
fn post_action_may_rewrite_the_answer_or_answer_itself() {
    let mut t = Turn::new(input("hello"));
    t.first_request();
    let c = t.feed(Event::Llm {
        result: Ok(completion("original", &[("c1", "demo_tool")])),
    });
    let mut post = stage(&c, Stage::PostAction);
    assert_eq!(post.llm_text, "original");
    assert_eq!(post.tool_calls.len(), 1);
    post.llm_text = "rewritten".into();
    post.tool_calls.clear();
    let c = t.feed(Event::PostAction(post));
    let chain = c.iter().find_map(|c| match c {
        Cmd::Publish(e @ BusEvent::AgentLlmChain { .. }) => Some(bus(e).1),
        _ => None,
    });
    assert_eq!(chain.unwrap()["content"], "rewritten");
    assert_eq!(final_text(&c), "rewritten", "no calls left: the turn ends");

    let mut t = Turn::new(input("hello"));
    t.first_request();
    let c = t.feed(Event::Llm {
        result: Ok(completion("original", &[])),
    });
    let mut post = stage(&c, Stage::PostAction);
    post.response = Some("the plugin answers".into());
    let c = t.feed(Event::PostAction(post));
    assert!(!c.iter().any(|c| matches!(c, Cmd::Publish(_))), "no chain event: {c:?}");
    assert_eq!(final_text(&c), "the plugin answers");
    let c = t.output(c);
    assert_eq!(
        reply_of(&c).usage,
        Usage::default(),
        "a short-circuited call is not accounted"
    );
}

#[test]
fn before_output_rewrites_the_final_text_and_its_response_is_ignored() {
    let mut t = Turn::new(input("hello"));
    t.first_request();
    let c = t.answer(completion("raw", &[]));
    let mut out = stage(&c, Stage::BeforeOutput);
    out.final_text = "polished".into();
    out.response = Some("ignored".into());
    let c = t.feed(Event::BeforeOutput(out));
    let commit = c.iter().find_map(|c| match c {
        Cmd::Commit { event: e, .. } => Some(e.response.clone()),
        _ => None,
    });
    assert_eq!(commit.as_deref(), Some("polished"));
    let c = t.feed(Event::Committed(Err(NotRecorded::Refused("disk full".into()))));
    assert_eq!(
        reply_of(&c).content,
        "polished",
        "a failed commit is logged, the reply goes out"
    );
    assert_eq!(ended(&c), Some(End::Done));
}

#[test]
fn on_input_may_answer_or_rewrite_the_input() {
    let mut t = Turn::new(input("hello"));
    let c = t.feed(Event::Started);
    let mut on = stage(&c, Stage::OnInput);
    assert_eq!(on.raw_message, "hello");
    assert_eq!(on.extra["output_channel"], "http");
    on.response = Some("answered at once".into());
    let c = t.feed(Event::OnInput(on));
    assert_eq!(final_text(&c), "answered at once");

    let mut t = Turn::new(input("hello"));
    let c = t.feed(Event::Started);
    let mut on = stage(&c, Stage::OnInput);
    on.raw_message = "hello, cleaned".into();
    let c = t.feed(Event::OnInput(on));
    match &c[..] {
        [
            Cmd::ReadTimeline {
                query, record: Some(e), ..
            },
        ] => {
            assert_eq!(query, "hello, cleaned");
            assert_eq!(e.input, "hello, cleaned", "the cleaned text is what is recorded");
        }
        _ => panic!("{c:?}"),
    }
}

#[test]
fn the_done_guard_finishes_once_and_ignores_what_comes_after() {
    let mut t = Turn::new(input("hello"));
    t.first_request();
    let c = t.answer(completion("answer", &[]));
    assert!(t.core.is_done());
    assert!(t.feed(Event::Cancel).is_empty(), "nothing in flight, already finishing");
    assert!(
        t.feed(Event::SafePoint(Err(exited("kernel/agent/scheduler"))))
            .is_empty(),
        "no second end"
    );
    assert!(
        t.feed(Event::Llm {
            result: Ok(completion("late", &[])),
        })
        .is_empty()
    );
    let c = t.output(c);
    assert_eq!(c.iter().filter(|c| matches!(c, Cmd::Finish(_))).count(), 1);
    assert!(
        t.feed(Event::Committed(Ok(()))).is_empty(),
        "a duplicate commit answer does nothing"
    );
    assert!(t.feed(Event::Resume).is_empty());
}

#[test]
fn failures_end_the_task_once_with_the_reason() {
    let mut t = Turn::new(input("hello"));
    let c = t.feed(Event::Started);
    t.echo(c, Stage::OnInput);
    t.feed(Event::Timeline(Default::default()));
    let c = t.feed(Event::InputRecorded(Err(NotRecorded::Refused(
        "database is locked".into(),
    ))));
    assert_eq!(
        reply_of(&c).error.as_deref(),
        Some("cannot record the input in memory: database is locked")
    );
    assert_eq!(ended(&c), Some(End::Failed));
    assert!(t.feed(Event::PreAction(StageContext::default())).is_empty());

    let mut t = Turn::new(input("hello"));
    t.prepare("");
    let c = t.feed(Event::SafePoint(Err(exited("kernel/agent/scheduler"))));
    assert_eq!(
        reply_of(&c).error.as_deref(),
        Some(
            "the scheduler is unavailable: actor `kernel/agent/scheduler` exited before answering (mailbox closed); the supervisor restarts it per its policy"
        )
    );
    let failed = c.iter().find_map(|c| match c {
        Cmd::Publish(e @ BusEvent::AgentOutput { error: true, .. }) => Some(bus(e)),
        _ => None,
    });
    assert_eq!(
        failed,
        Some((
            "agent_output",
            json!({"task_id": 7, "text": "Error: the scheduler is unavailable: actor `kernel/agent/scheduler` exited before answering (mailbox closed); the supervisor restarts it per its policy", "channel": "http", "error": true})
        ))
    );
}

#[test]
fn interrupt_inputs_are_not_recorded_but_their_reply_is() {
    let mut t = Turn::new(TurnInput {
        interrupt: true,
        level: Some(crate::scheduler::Level::L3),
        source: "timer".into(),
        channel: "timer".into(),
        ..input("wake up")
    });
    let c = t.feed(Event::Started);
    let c = t.echo(c, Stage::OnInput);
    assert!(matches!(c[..], [Cmd::ReadTimeline { record: None, .. }]), "{c:?}");
    let c = t.feed(Event::Timeline(Default::default()));
    stage(&c, Stage::PreAction);
    let c = t.echo(c, Stage::PreAction);
    t.feed(Event::StopBudget(false));
    let _ = c;
    let req = request(t.feed(Event::SafePoint(Ok(false))));
    let last = texts(&req).pop().unwrap();
    assert_eq!(last, ("system".into(), format!("{}wake up", Msg::InterruptMark)));
    let c = t.answer(completion("noted", &[]));
    let c = t.echo(c, Stage::BeforeOutput);
    assert!(
        c.iter()
            .any(|c| matches!(c, Cmd::Commit { event: e, .. } if e.source == "agent" && e.response == "noted"))
    );
    // The text log keeps it as an interrupt (the chat shows it as one).
    assert!(
        c.iter()
            .any(|c| matches!(c, Cmd::LogText(e) if e.input == "wake up" && e.level.as_deref() == Some("L3"))),
        "{c:?}"
    );
}

#[test]
fn consolidation_records_nothing_and_no_memory_skips_the_text_log() {
    let mut t = Turn::new(TurnInput {
        consolidation: true,
        channel: super::super::input::CONSOLIDATION_CHANNEL.into(),
        ..input("merge these")
    });
    let c = t.feed(Event::Started);
    t.echo(c, Stage::OnInput);
    let c = t.feed(Event::Timeline(Default::default()));
    t.echo(c, Stage::PreAction);
    let c = t.feed(Event::StopBudget(false));
    assert!(matches!(c[..], [Cmd::AskSafePoint { consolidation: true }]));
    request(t.feed(Event::SafePoint(Ok(false))));
    let c = t.answer(completion("merged", &[]));
    let c = t.echo(c, Stage::BeforeOutput);
    assert!(
        !c.iter().any(|c| matches!(c, Cmd::Commit { .. } | Cmd::LogText(_))),
        "{c:?}"
    );
    assert_eq!(reply_of(&c).content, "merged");
    assert_eq!(ended(&c), Some(End::Done));

    let mut t = Turn::new(TurnInput {
        no_memory: true,
        ..input("secret")
    });
    t.first_request();
    let c = t.answer(completion("ok", &[]));
    let c = t.echo(c, Stage::BeforeOutput);
    assert!(
        matches!(c[..], [Cmd::Commit { .. }]),
        "committed, not text-logged: {c:?}"
    );
}

#[test]
fn turn_events_keep_their_bus_names_and_fields() {
    let d = BusEvent::StreamDelta {
        task_id: 3,
        channel: "http".into(),
        content: "he".into(),
        reasoning: Some(String::new()),
        reset: false,
    };
    assert_eq!(
        bus(&d),
        (
            "stream_delta",
            json!({"task_id": 3, "channel": "http", "content": "he", "reasoning": ""})
        )
    );
    let chain = BusEvent::AgentLlmChain {
        task_id: 3,
        content: "c".into(),
        reasoning: "r".into(),
        tool_calls: completion("", &[("i", "n")])
            .response
            .tool_calls
            .into_iter()
            .map(|t| crate::bus::ChainToolCall {
                id: t.id,
                name: t.name,
                arguments: t.arguments,
            })
            .collect(),
        phase: "intermediate",
        turn: 2,
        source: "s".into(),
        model: "m".into(),
        usage: crate::bus::ChainUsage {
            prompt: 1,
            completion: 2,
            total: 3,
        },
    };
    assert_eq!(
        bus(&chain).1,
        json!({
            "task_id": 3, "content": "c", "reasoning": "r",
            "tool_calls": [{"id": "i", "name": "n", "arguments": {"q": 1}}],
            "phase": "intermediate", "turn": 2, "source": "s", "model": "m",
            "usage": {"prompt": 1, "completion": 2, "total": 3},
        })
    );
    let send = BusEvent::Output {
        channel: "qq".into(),
        payload: "hi".into(),
        content_type: "text".into(),
        meta: json!({}),
        task_id: 3,
        source: "http".into(),
    };
    assert_eq!(
        bus(&send),
        (
            "output",
            json!({"channel": "qq", "payload": "hi", "content_type": "text", "meta": {}, "task_id": 3, "source": "http"})
        )
    );
}

/// A turn event as subscribers see it: its kind and its JSON fields (without `type`
/// and `ts_ms`, which the bus adds).
fn bus(e: &BusEvent) -> (&'static str, serde_json::Value) {
    let kind = e.kind();
    let mut v = serde_json::to_value(e).unwrap();
    v.as_object_mut().unwrap().remove("type");
    (kind, v)
}

/// An input with `n` images of `w` × `h`.
fn with_images(text: &str, n: usize, w: u32, h: u32) -> TurnInput {
    let mut i = input(text);
    i.media = (0..n)
        .map(|k| crate::memory::media::parts::MediaRef {
            id: format!("blk_media_{k:012}"),
            mime: "image/png".into(),
            width: w,
            height: h,
        })
        .collect();
    i
}

fn fixed_of(c: &[Cmd]) -> usize {
    match c {
        [Cmd::ReadTimeline { fixed, .. }] => *fixed,
        _ => panic!("expected ReadTimeline, got {c:?}"),
    }
}

#[test]
fn images_count_in_the_budget_at_what_a_vendor_charges_and_recall_room_is_kept() {
    use crate::memory::media::parts::{IMAGE_TOKENS_MAX, image_tokens};
    let start = |t: &mut Turn| {
        let c = t.feed(Event::Started);
        fixed_of(&t.echo(c, Stage::OnInput))
    };
    let plain = start(&mut Turn::new(input("what is in this photo?")));
    let one = start(&mut Turn::new(with_images("what is in this photo?", 1, 1024, 1024)));
    assert!(
        one >= plain + image_tokens(1024, 1024) && one < plain + image_tokens(1024, 1024) + 60,
        "{plain} → {one}"
    );
    let mut t = Turn::new(input("what is in this photo?"));
    t.limits.media_reserve = 2 * IMAGE_TOKENS_MAX;
    assert_eq!(start(&mut t), plain + 2 * IMAGE_TOKENS_MAX);

    // The overflow check weighs each placeholder as its image: four 12-megapixel
    // photos (4 × 6,192 tokens) do not fit an 8k window, though their frame is a few
    // hundred bytes.
    let mut t = Turn::new(with_images("compare these", 4, 4000, 3000));
    t.prepare("");
    let c = t.feed(Event::SafePoint(Ok(false)));
    assert!(
        !matches!(c.last(), Some(Cmd::CallLlm(_))),
        "the request would not fit: {c:?}"
    );
    // One small image does.
    let mut t = Turn::new(with_images("what is this?", 1, 200, 200));
    t.prepare("");
    let req = request(t.feed(Event::SafePoint(Ok(false))));
    let parts = req.messages.last().unwrap().content.as_array().unwrap();
    assert!(
        parts
            .iter()
            .any(|p| crate::memory::media::parts::placeholder_of(p).is_some())
    );
}

/// An input that cannot fit the window even alone fails before it is recorded: no
/// `ReadTimeline` with a record, so the window never keeps it (issue 30, item 4).
#[test]
fn an_input_over_the_window_fails_before_it_is_recorded() {
    let mut t = Turn::new(input(&"word ".repeat(10_000)));
    let c = t.feed(Event::Started);
    let c = t.echo(c, Stage::OnInput);
    assert!(
        !c.iter().any(|c| matches!(c, Cmd::ReadTimeline { .. })),
        "nothing read, nothing recorded: {c:?}"
    );
    assert_eq!(ended(&c), Some(End::Failed), "{c:?}");
    let error = reply_of(&c).error.clone().unwrap_or_default();
    assert!(error.contains("does not fit") && error.contains("8192"), "{error}");
}

/// The gather asked before each LLM call: the tools query is the input as memory keeps
/// it, the images are recalled by the input's text (none for the kernel's own turns),
/// within the same window and fixed tokens the memory was cut to.
#[test]
fn each_llm_call_first_gathers_its_tools_and_images_for_the_input() {
    let mut t = Turn::new(input("show me the beach photo"));
    t.prepare("");
    let c = t.feed_only(Event::SafePoint(Ok(false)));
    let fixed = t.core.fixed_tokens(&Env {
        prompt: &t.prompt,
        channels: &t.channels,
        limits: t.limits,
        now_ms: 1_000,
        mono_ms: 0,
        gate: &t.gate,
    });
    match &c[..] {
        [
            Cmd::Gather {
                tools_query,
                media_query,
                window,
                fixed: f,
            },
        ] => {
            assert_eq!(tools_query, "show me the beach photo");
            assert_eq!(media_query, "show me the beach photo");
            assert_eq!((*window, *f), (8192, fixed));
        }
        _ => panic!("expected Gather, got {c:?}"),
    }
    let mut t = Turn::new(TurnInput {
        consolidation: true,
        ..input("distil the day")
    });
    let c = t.feed(Event::Started);
    let c = t.echo(c, Stage::OnInput);
    assert!(matches!(c[..], [Cmd::ReadTimeline { record: None, .. }]), "{c:?}");
    let c = t.feed(Event::Timeline("".into()));
    let c = t.echo(c, Stage::PreAction);
    assert!(matches!(c[..], [Cmd::ConsumeCancel]), "{c:?}");
    t.feed(Event::StopBudget(false));
    match &t.feed_only(Event::SafePoint(Ok(false)))[..] {
        [Cmd::Gather { media_query, .. }] => assert_eq!(media_query, "", "the kernel's own turn recalls no images"),
        c => panic!("expected Gather, got {c:?}"),
    }
}

/// What the core sends is what it composed from the gathered parts: the offered tools
/// as they were chosen (the same list), the catalogue of the rest at the end of the
/// system prompt, secrets that a tool returned masked, the recalled images that fit the
/// reserve on the last user message; and the gathered registry is what the tool step
/// of that call runs.
#[test]
fn the_request_sent_is_composed_by_the_core_from_what_was_gathered() {
    use crate::llm::types::{ToolDef, ToolFunction};
    use crate::memory::media::parts::{IMAGE_TOKENS_MAX, placeholders};
    let mut t = Turn::new(input("look it up"));
    t.gate = CredentialGate::new(
        &[("bank".to_owned(), "s3cr3t-pin-8841".to_owned())]
            .into_iter()
            .collect(),
        &Default::default(),
    );
    t.limits.media_reserve = IMAGE_TOKENS_MAX + 200;
    t.prepare("");
    let c = t.feed_only(Event::SafePoint(Ok(false)));
    assert!(matches!(c[..], [Cmd::Gather { .. }]), "{c:?}");

    let def = |name: &str| ToolDef {
        kind: "function".into(),
        function: ToolFunction {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        },
    };
    let list: crate::llm::types::ToolList = std::sync::Arc::new(vec![def("demo_search")]);
    let mut tools = ToolRegistry::default();
    let handler: std::sync::Arc<dyn crate::stages::ToolHandler> = std::sync::Arc::new(
        |args: Value| -> futures_util::future::BoxFuture<'static, crate::stages::ToolResult> {
            Box::pin(async move { Ok(args.to_string()) })
        },
    );
    tools
        .register(crate::stages::ToolSpec::new("demo_search", "d", json!({})), handler)
        .unwrap();
    let meta = |id: &str, w: u32, h: u32| MediaMeta {
        id: id.into(),
        mime: "image/png".into(),
        width: w,
        height: h,
        size: 1,
        source: "http".into(),
        created_ms: 0,
        seen_ms: 0,
        seen_count: 0,
        fingerprint: None,
        links: vec![],
    };
    let gathered = Gathered {
        tools,
        offered: Offered {
            list: list.clone(),
            tokens: 40,
            catalogue: "\n\nOther tools: weather.".into(),
        },
        // The first fits the reserve; the second (another full-size image) does not.
        recalled: vec![
            meta("blk_media_000000000001", 512, 512),
            meta("blk_media_000000000002", 4000, 3000),
        ],
    };
    let req = request(t.feed_only(Event::Gathered(gathered)));
    assert!(std::sync::Arc::ptr_eq(&req.tools, &list), "the offered list itself");
    let system = req.messages[0].content.as_str().unwrap();
    assert!(
        system.starts_with("You are HomeAgent.") && system.ends_with("Other tools: weather."),
        "{system}"
    );
    assert_eq!(placeholders(&req), vec!["blk_media_000000000001".to_owned()]);
    assert_eq!(t.core.tools().len(), 1, "the gathered registry runs the call's tools");

    // A tool returns the secret: the next request shows its alias only.
    t.answer(completion("", &[("c1", "demo_search")]));
    t.feed(Event::SafePoint(Ok(false)));
    t.feed(Event::ToolsDone(vec![Outcome {
        text: "pin is s3cr3t-pin-8841".into(),
        status: ToolStatus::Ok,
    }]));
    let req = request(t.feed(Event::SafePoint(Ok(false))));
    let tool = texts(&req).into_iter().find(|(role, _)| role == "tool").unwrap().1;
    assert_eq!(tool, "pin is @{bank}");
    assert!(!serde_json::to_string(&req).unwrap().contains("s3cr3t-pin-8841"));
}

/// A stop or a preemption that comes while the call's parts are gathered: nothing is
/// sent, and a preemption neither resets a stream nor counts a turn (no call was made).
#[test]
fn a_cancel_while_gathering_sends_nothing() {
    let mut t = Turn::new(input("hello"));
    t.prepare("");
    let c = t.feed_only(Event::SafePoint(Ok(false)));
    assert!(matches!(c[..], [Cmd::Gather { .. }]), "{c:?}");
    assert!(t.feed_only(Event::Cancel).is_empty(), "nothing in flight to cancel");
    let c = t.feed_only(Event::Gathered(Gathered::default()));
    assert!(matches!(c[..], [Cmd::TakeStop]), "{c:?}");
    let c = t.feed_only(Event::StopTaken(false));
    assert!(
        !c.iter().any(|c| matches!(c, Cmd::Publish(_))),
        "no stream to reset: {c:?}"
    );
    assert!(is_safe_point(&c), "{c:?}");
    assert_eq!(t.core.turn(), 0);
    let c = t.feed(Event::SafePoint(Ok(false)));
    assert!(matches!(c[..], [Cmd::CallLlm(_)]), "sent after the safe point: {c:?}");
}

/// A channel's declared memory policies are the core's to apply: `recall_policy: none`
/// asks for the recency window alone, `context_policy: prune` commits with a prune of
/// the window against the input; a channel that declares neither gets memory and no
/// per-input prune.
#[test]
fn a_channels_recall_and_context_policies_reach_the_shell_as_commands() {
    use crate::agent::inputdef::{ContextPolicy, Policy, RecallPolicy};
    let run = |memory: Policy| {
        let mut t = Turn::new(TurnInput {
            memory,
            ..input("hello")
        });
        let c = t.feed(Event::Started);
        let c = t.echo(c, Stage::OnInput);
        let recalls = match &c[..] {
            [Cmd::ReadTimeline { memory, .. }] => *memory,
            _ => panic!("{c:?}"),
        };
        t.feed(Event::Timeline("".into()));
        let c = t.feed(Event::InputRecorded(Ok(())));
        t.echo(c, Stage::PreAction);
        t.feed(Event::StopBudget(false));
        t.feed(Event::SafePoint(Ok(false)));
        let c = t.answer(completion("hi", &[]));
        let c = t.echo(c, Stage::BeforeOutput);
        let prunes = c
            .iter()
            .find_map(|c| match c {
                Cmd::Commit { prune_window, .. } => Some(*prune_window),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no commit: {c:?}"));
        (recalls, prunes)
    };
    assert_eq!(run(Policy::default()), (true, false));
    assert_eq!(
        run(Policy {
            recall: RecallPolicy::None,
            ..Policy::default()
        }),
        (false, false)
    );
    assert_eq!(
        run(Policy {
            context: ContextPolicy::Prune,
            ..Policy::default()
        }),
        (true, true)
    );
}

/// What an actor that went away answers a message: the error every kernel address
/// gives (`addr::SendError`), as the turn shows it.
fn exited(actor: &str) -> SendError {
    SendError::Exited {
        id: actor.into(),
        reason: "mailbox closed".into(),
    }
}
