//! The `spawn_child` book as a plain state machine: which helpers exist, their limits,
//! their results and who has fetched them (spec §6.3). No actix here: the shell
//! ([`super::Children`]) asks the book, starts or removes actors, and feeds back what
//! happened; everything it must do is a [`ChildCmd`].

use std::collections::{BTreeMap, VecDeque};

/// Turns a child gets when the call does not say.
pub const DEFAULT_TURNS: u32 = 5;
/// The range `max_turns` is clamped to.
pub const MIN_TURNS: u32 = 1;
pub const MAX_TURNS: u32 = 30;
/// Completed results kept; the oldest is evicted beyond this (spec §6.3).
pub const KEPT_RESULTS: usize = 20;
/// Children running at once. The spec sets no bound; one is needed so that a model
/// looping on `spawn_child` cannot fork without limit (see docs/DECISIONS.md).
pub const MAX_RUNNING: usize = 8;

/// Why a `spawn_child` or `child_result` call was refused; each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildError {
    #[error("`task` is required: describe the self-contained job the helper should do")]
    NoTask,
    #[error(
        "{0} helpers are already running (at most {MAX_RUNNING}); wait for one to finish (its result is announced) or do the job yourself"
    )]
    TooMany(usize),
    #[error("`id` is required: the child id spawn_child answered (child_<n>)")]
    NoId,
    #[error("no helper `{0}` was ever spawned; ids look like child_<n>, as spawn_child answered")]
    Unknown(String),
}

/// A child's end, as its one-shot task reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildEnd {
    /// Its final answer.
    Done(String),
    /// It failed or crashed; the text says why.
    Failed(String),
}

impl ChildEnd {
    pub fn text(&self) -> &str {
        match self {
            Self::Done(t) | Self::Failed(t) => t,
        }
    }
}

/// A child accepted by [`ChildBook::spawn`]: the shell starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawn {
    pub id: String,
    pub task: String,
    pub max_turns: u32,
    /// Where the completion notice goes (the spawning task's channel).
    pub notify: String,
}

/// What the shell must do after a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildCmd {
    /// Post a self message on `channel` telling the parent that `id` ended.
    Announce { id: String, channel: String, end: ChildEnd },
    /// Take the child's subtree out of the supervision tree.
    Remove { id: String },
}

/// What `child_result` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    Running,
    /// The first fetch: the result.
    Result(ChildEnd),
    /// Fetched before (idempotent: never "not found" for a known id).
    AlreadyDelivered,
    /// Completed but evicted before anyone fetched it (more than [`KEPT_RESULTS`] ended since).
    Evicted,
}

#[derive(Debug, Clone)]
enum State {
    Running { notify: String },
    Ended { end: ChildEnd, delivered: bool },
}

/// Every child of one agent.
#[derive(Debug, Default)]
pub struct ChildBook {
    next: u64,
    children: BTreeMap<String, State>,
    /// Ended children, oldest first (for the eviction).
    ended: VecDeque<String>,
    /// The first [`VIEW_TASK_CHARS`] characters of each known helper's task (the view).
    tasks: BTreeMap<String, String>,
}

/// Characters of a helper's task its view shows.
pub const VIEW_TASK_CHARS: usize = 120;

/// One helper as the operator sees it (`GET /api/v1/residents`, the WebUI task view).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChildView {
    pub id: String,
    /// `running`, `done` or `failed`.
    pub state: &'static str,
    /// Its result was fetched with `child_result`.
    pub delivered: bool,
    pub task: String,
}

/// `max_turns` as asked, clamped to 1..=30; absent or not a number: the default.
pub fn clamp_turns(asked: Option<i64>) -> u32 {
    asked.map_or(DEFAULT_TURNS, |n| n.clamp(MIN_TURNS as i64, MAX_TURNS as i64) as u32)
}

/// The channel a completion notice goes to: the spawning task's, except the kernel's
/// consolidation channel and nothing at all, which become `cli` (spec §6.3).
pub fn notice_channel(spawning: &str) -> String {
    match spawning.trim() {
        "" | super::super::input::CONSOLIDATION_CHANNEL => "cli".into(),
        c => c.to_owned(),
    }
}

impl ChildBook {
    /// How many run now.
    pub fn running(&self) -> usize {
        self.children
            .values()
            .filter(|s| matches!(s, State::Running { .. }))
            .count()
    }

    /// The ids of the running children, in order.
    pub fn running_ids(&self) -> Vec<String> {
        self.children
            .iter()
            .filter(|(_, s)| matches!(s, State::Running { .. }))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Accepts a new child (`child_<n>`, numbered from 1).
    pub fn spawn(&mut self, task: &str, max_turns: Option<i64>, spawning_channel: &str) -> Result<Spawn, ChildError> {
        let task = task.trim();
        if task.is_empty() {
            return Err(ChildError::NoTask);
        }
        let running = self.running();
        if running >= MAX_RUNNING {
            return Err(ChildError::TooMany(running));
        }
        self.next += 1;
        let id = format!("child_{}", self.next);
        let notify = notice_channel(spawning_channel);
        self.children
            .insert(id.clone(), State::Running { notify: notify.clone() });
        self.tasks
            .insert(id.clone(), task.chars().take(VIEW_TASK_CHARS).collect());
        Ok(Spawn {
            id,
            task: task.to_owned(),
            max_turns: clamp_turns(max_turns),
            notify,
        })
    }

    /// A child ended (once; a second report of the same child is ignored). Announces
    /// it, removes its actors and evicts the oldest result beyond [`KEPT_RESULTS`].
    pub fn ended(&mut self, id: &str, end: ChildEnd) -> Vec<ChildCmd> {
        let Some(State::Running { notify }) = self.children.get(id).cloned() else {
            return Vec::new();
        };
        self.children.insert(
            id.to_owned(),
            State::Ended {
                end: end.clone(),
                delivered: false,
            },
        );
        self.ended.push_back(id.to_owned());
        while self.ended.len() > KEPT_RESULTS {
            if let Some(old) = self.ended.pop_front() {
                self.children.remove(&old);
                self.tasks.remove(&old);
            }
        }
        vec![
            ChildCmd::Remove { id: id.to_owned() },
            ChildCmd::Announce {
                id: id.to_owned(),
                channel: notify,
                end,
            },
        ]
    }

    /// Every helper the book still knows (running ones and kept results), by id.
    pub fn view(&self) -> Vec<ChildView> {
        self.children
            .iter()
            .map(|(id, s)| {
                let (state, delivered) = match s {
                    State::Running { .. } => ("running", false),
                    State::Ended {
                        end: ChildEnd::Done(_),
                        delivered,
                    } => ("done", *delivered),
                    State::Ended {
                        end: ChildEnd::Failed(_),
                        delivered,
                    } => ("failed", *delivered),
                };
                ChildView {
                    id: id.clone(),
                    state,
                    delivered,
                    task: self.tasks.get(id).cloned().unwrap_or_default(),
                }
            })
            .collect()
    }

    /// `child_result`: the result the first time, "already delivered" after.
    pub fn fetch(&mut self, id: &str) -> Result<Fetch, ChildError> {
        let id = id.trim();
        if id.is_empty() {
            return Err(ChildError::NoId);
        }
        let known = self.was_spawned(id);
        match self.children.get_mut(id) {
            Some(State::Running { .. }) => Ok(Fetch::Running),
            Some(State::Ended { delivered: true, .. }) => Ok(Fetch::AlreadyDelivered),
            Some(State::Ended { end, delivered }) => {
                *delivered = true;
                Ok(Fetch::Result(end.clone()))
            }
            None if known => Ok(Fetch::Evicted),
            None => Err(ChildError::Unknown(id.to_owned())),
        }
    }

    fn was_spawned(&self, id: &str) -> bool {
        id.strip_prefix("child_")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n >= 1 && n <= self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_default_to_five_and_clamp_to_one_through_thirty() {
        assert_eq!(clamp_turns(None), 5);
        assert_eq!(clamp_turns(Some(0)), 1);
        assert_eq!(clamp_turns(Some(-3)), 1);
        assert_eq!(clamp_turns(Some(12)), 12);
        assert_eq!(clamp_turns(Some(99)), 30);
    }

    #[test]
    fn the_notice_goes_to_the_spawning_channel_and_consolidation_becomes_cli() {
        assert_eq!(notice_channel("http"), "http");
        assert_eq!(notice_channel(""), "cli");
        assert_eq!(notice_channel("_consolidation_"), "cli");
    }

    #[test]
    fn a_child_is_announced_once_and_its_result_delivered_once() {
        let mut b = ChildBook::default();
        assert_eq!(b.spawn("  ", None, "http"), Err(ChildError::NoTask));
        let s = b.spawn("sum the logs", Some(50), "webui").unwrap();
        assert_eq!(
            (s.id.as_str(), s.max_turns, s.notify.as_str()),
            ("child_1", 30, "webui")
        );
        assert_eq!(b.fetch("child_1"), Ok(Fetch::Running));
        let cmds = b.ended("child_1", ChildEnd::Done("42".into()));
        assert_eq!(
            cmds,
            vec![
                ChildCmd::Remove { id: "child_1".into() },
                ChildCmd::Announce {
                    id: "child_1".into(),
                    channel: "webui".into(),
                    end: ChildEnd::Done("42".into())
                }
            ]
        );
        assert!(
            b.ended("child_1", ChildEnd::Failed("late".into())).is_empty(),
            "ends once"
        );
        assert_eq!(b.fetch("child_1"), Ok(Fetch::Result(ChildEnd::Done("42".into()))));
        assert_eq!(b.fetch("child_1"), Ok(Fetch::AlreadyDelivered));
        assert_eq!(b.fetch("child_1"), Ok(Fetch::AlreadyDelivered));
        assert_eq!(b.fetch("child_9"), Err(ChildError::Unknown("child_9".into())));
        assert_eq!(b.fetch(""), Err(ChildError::NoId));
    }

    #[test]
    fn running_children_are_bounded_and_old_results_are_evicted_not_forgotten() {
        let mut b = ChildBook::default();
        for _ in 0..MAX_RUNNING {
            b.spawn("t", None, "http").unwrap();
        }
        assert_eq!(b.spawn("t", None, "http"), Err(ChildError::TooMany(MAX_RUNNING)));
        assert_eq!(b.running_ids().len(), MAX_RUNNING);
        b.ended("child_1", ChildEnd::Done("a".into()));
        assert!(b.spawn("t", None, "http").is_ok(), "room again");
        // End more than KEPT_RESULTS: the oldest result goes, its id stays known.
        for n in 2..=(MAX_RUNNING as u64 + 1) {
            b.ended(&format!("child_{n}"), ChildEnd::Done(n.to_string()));
        }
        for _ in 0..KEPT_RESULTS {
            let s = b.spawn("t", None, "http").unwrap();
            b.ended(&s.id, ChildEnd::Done("x".into()));
        }
        assert_eq!(b.fetch("child_1"), Ok(Fetch::Evicted));
        assert_eq!(b.fetch("child_2"), Ok(Fetch::Evicted));
        let last = format!("child_{}", MAX_RUNNING + 1 + KEPT_RESULTS);
        assert_eq!(b.fetch(&last), Ok(Fetch::Result(ChildEnd::Done("x".into()))));
        assert_eq!(b.running(), 0);
    }

    #[test]
    fn the_view_shows_running_and_kept_helpers_with_their_task() {
        let mut b = ChildBook::default();
        let a = b.spawn("count the files", None, "http").unwrap();
        let c = b.spawn(&"long ".repeat(60), None, "http").unwrap();
        b.ended(&a.id, ChildEnd::Done("42".into()));
        b.fetch(&a.id).unwrap();
        let v = b.view();
        assert_eq!(
            (v[0].id.as_str(), v[0].state, v[0].delivered, v[0].task.as_str()),
            ("child_1", "done", true, "count the files")
        );
        assert_eq!((v[1].id.as_str(), v[1].state), (c.id.as_str(), "running"));
        assert_eq!(v[1].task.chars().count(), VIEW_TASK_CHARS);
    }
}
