//! The two intake actors in front of the scheduler.
//!
//! * `kernel/agent/event-loop` takes queued input from channels and the kernel's own
//!   self-input (consolidation tasks on the `_consolidation_` channel).
//! * `kernel/agent/intercept-loop` takes interrupts: it decides their level (parsed
//!   from `priority`, clamped to L3 for sources that are not built in, L4 for the
//!   kernel itself) and handles stop requests.

use actix::prelude::*;
use serde_json::{Value, json};

use super::input::{CONSOLIDATION_CHANNEL, Input};
use super::scheduler::{SchedulerActor, Stop, Submit};
use crate::addr::TAddr;
use crate::host::{Handles, HostContext, KernelActor};
use crate::scheduler::{Level, interrupt_level, source_root};

/// Sources compiled into the daemon: they may raise L4 interrupts.
pub const BUILTIN_SOURCES: &[&str] = &["webui", "http", "cli"];

/// Whether `source` is privileged (a built-in channel plugin).
pub fn is_builtin_source(source: &str) -> bool {
    BUILTIN_SOURCES.contains(&source_root(source))
}

type Forwarded = ResponseFuture<Result<u64, String>>;

fn forward(scheduler: &TAddr<SchedulerActor>, input: Input) -> Forwarded {
    let s = scheduler.clone();
    Box::pin(async move { s.send(Submit(input)).await.map_err(|e| e.to_string())? })
}

/// Intake of queued input and kernel self-input.
pub struct EventLoop {
    scheduler: TAddr<SchedulerActor>,
}

impl EventLoop {
    pub fn new(scheduler: TAddr<SchedulerActor>) -> Self {
        Self { scheduler }
    }
}

impl KernelActor for EventLoop {
    const KIND: &'static str = "event-loop";
}

/// Queued input from a channel. Replies with the task id.
#[derive(Message)]
#[rtype(result = "Result<u64, String>")]
pub struct Inject(pub Input);

/// Kernel self-input (memory merges, distillation follow-ups): runs on the
/// `_consolidation_` channel, never preempted.
#[derive(Message)]
#[rtype(result = "Result<u64, String>")]
pub struct SelfInput(pub String);

impl Handles<Inject> for EventLoop {
    type Reply = Forwarded;
    fn handle(&mut self, Inject(mut input): Inject, _: &mut HostContext<Self>) -> Forwarded {
        input.level = None;
        forward(&self.scheduler, input)
    }
}

impl Handles<SelfInput> for EventLoop {
    type Reply = Forwarded;
    fn handle(&mut self, SelfInput(text): SelfInput, _: &mut HostContext<Self>) -> Forwarded {
        let mut input = Input::text("kernel", &text);
        input.channel = CONSOLIDATION_CHANNEL.into();
        input.kernel = true;
        input.no_memory = true;
        forward(&self.scheduler, input)
    }
}

/// Intake of interrupts and stop requests.
pub struct InterceptLoop {
    scheduler: TAddr<SchedulerActor>,
}

impl InterceptLoop {
    pub fn new(scheduler: TAddr<SchedulerActor>) -> Self {
        Self { scheduler }
    }
}

impl KernelActor for InterceptLoop {
    const KIND: &'static str = "intercept-loop";
}

/// An interrupt from a channel: `priority` as sent (`"L1"`..`"L4"`), `stop` to cancel
/// the current inference (with `text` as an optional remark for the model).
#[derive(Message)]
#[rtype(result = "Result<Option<u64>, String>")]
pub struct InjectInterrupt {
    pub input: Input,
    pub priority: Option<Value>,
    pub stop: bool,
}

/// An interrupt raised by the kernel itself: always L4.
#[derive(Message)]
#[rtype(result = "Result<u64, String>")]
pub struct KernelInterrupt(pub String);

impl Handles<InjectInterrupt> for InterceptLoop {
    type Reply = ResponseFuture<Result<Option<u64>, String>>;
    fn handle(&mut self, msg: InjectInterrupt, _: &mut HostContext<Self>) -> Self::Reply {
        let InjectInterrupt {
            mut input,
            priority,
            stop,
        } = msg;
        let s = self.scheduler.clone();
        Box::pin(async move {
            if input.text.trim().is_empty() && !stop {
                input.reply.skip("empty_input");
                return Err("empty_input".into());
            }
            if stop {
                s.send(Stop).await.map_err(|e| e.to_string())?;
                if input.text.trim().is_empty() {
                    return Ok(None);
                }
            }
            let level = interrupt_level(priority.as_ref(), is_builtin_source(&input.source));
            input.level = Some(level);
            input.payload.insert("interrupt".into(), json!(true));
            input.payload.insert("interrupt_source".into(), json!(input.source));
            input.payload.insert("interrupt_channel".into(), json!(input.channel));
            s.send(Submit(input)).await.map_err(|e| e.to_string())?.map(Some)
        })
    }
}

impl Handles<KernelInterrupt> for InterceptLoop {
    type Reply = Forwarded;
    fn handle(&mut self, KernelInterrupt(text): KernelInterrupt, _: &mut HostContext<Self>) -> Forwarded {
        let mut input = Input::text("kernel", &text);
        input.channel = "kernel".into();
        input.kernel = true;
        input.level = Some(Level::L4);
        input.payload.insert("kernel".into(), json!(true));
        forward(&self.scheduler, input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_sources_are_privileged() {
        assert!(is_builtin_source("webui/tab-1"));
        assert!(is_builtin_source("http"));
        assert!(!is_builtin_source("qq"));
        assert!(!is_builtin_source("/webui"));
    }
}
