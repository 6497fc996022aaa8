//! A task's answer as it streams, read off the kernel bus: the one reading every
//! streaming client shares (the OpenAI-compatible SSE answer, the CLI socket that
//! `waiter` reads). A client follows one task's events through [`TurnStream`] and gets
//! [`Piece`]s: text as the model writes it — a new round after the model's own tool
//! calls starts with a blank line — and each tool call as it ends. At the end,
//! [`remainder`] is what the final reply holds beyond what streamed.

use homeagent_actors::bus::{Event, KernelEvent, ToolStatus};

/// What one bus event of the followed task means to a stream.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Text the model wrote.
    Text(String),
    /// A round of the model ended with its own tool calls: separate the next text.
    RoundEnded,
    /// A tool call ran, failed or was refused.
    ToolEnded {
        name: String,
        status: ToolStatus,
    },
    Nothing,
}

/// The step for `ev` when streaming task `task`.
pub fn step(ev: &KernelEvent, task: u64) -> Step {
    match &ev.event {
        Event::StreamDelta {
            task_id,
            content,
            reset: false,
            ..
        } if *task_id == task && !content.is_empty() => Step::Text(content.clone()),
        Event::AgentLlmChain {
            task_id, tool_calls, ..
        } if *task_id == task && !tool_calls.is_empty() => Step::RoundEnded,
        Event::ToolCall {
            task_id, name, status, ..
        } if *task_id == task => Step::ToolEnded {
            name: name.clone(),
            status: *status,
        },
        _ => Step::Nothing,
    }
}

/// What a client sends for one event.
#[derive(Debug, PartialEq)]
pub enum Piece {
    Text(String),
    Tool { name: String, status: ToolStatus },
}

/// One task's stream: which task, what streamed so far, whether the next text starts a
/// new round.
#[derive(Debug)]
pub struct TurnStream {
    task: u64,
    streamed: String,
    separate: bool,
}

impl TurnStream {
    pub fn new(task: u64) -> Self {
        Self {
            task,
            streamed: String::new(),
            separate: false,
        }
    }

    /// What `ev` adds to the stream, if anything.
    pub fn next(&mut self, ev: &KernelEvent) -> Option<Piece> {
        match step(ev, self.task) {
            Step::Text(t) => {
                let t = if std::mem::take(&mut self.separate) {
                    format!("\n\n{t}")
                } else {
                    t
                };
                self.streamed.push_str(&t);
                Some(Piece::Text(t))
            }
            Step::RoundEnded => {
                self.separate = !self.streamed.is_empty();
                None
            }
            Step::ToolEnded { name, status } => Some(Piece::Tool { name, status }),
            Step::Nothing => None,
        }
    }

    /// What of `reply` did not stream (see [`remainder`]).
    pub fn rest<'a>(&self, reply: &'a str) -> &'a str {
        remainder(&self.streamed, reply)
    }
}

/// What of the final reply did not stream: all of it when nothing streamed, its tail
/// when the stream was its beginning, nothing when the stream already carried it (or
/// the rounds' texts, of which the reply is the last).
pub fn remainder<'a>(streamed: &str, reply: &'a str) -> &'a str {
    if streamed.is_empty() {
        reply
    } else {
        reply.strip_prefix(streamed).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tasks_text_deltas_and_tool_rounds_count() {
        let ev = |event| KernelEvent { event, ts_ms: 0 };
        let delta = |task_id, content: &str, reset| {
            ev(Event::StreamDelta {
                task_id,
                channel: "http".into(),
                content: content.into(),
                reasoning: None,
                reset,
            })
        };
        assert_eq!(step(&delta(3, "hi", false), 3), Step::Text("hi".into()));
        assert_eq!(step(&delta(4, "hi", false), 3), Step::Nothing, "another task");
        assert_eq!(step(&delta(3, "", true), 3), Step::Nothing, "a reset is not text");
        assert_eq!(step(&delta(3, "", false), 3), Step::Nothing, "reasoning only");
    }

    #[test]
    fn the_remainder_is_what_did_not_stream() {
        assert_eq!(remainder("", "all of it"), "all of it");
        assert_eq!(remainder("Hello", "Hello world"), " world");
        assert_eq!(remainder("Hello world", "Hello world"), "");
        assert_eq!(remainder("Let me check\n\nAnswer", "Answer"), "");
    }
}
