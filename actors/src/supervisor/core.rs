//! The supervisor's decision logic as a plain state machine (no actix, no clocks).
//!
//! The actor shell feeds it events (a child started, exited, a timer fired) with the
//! current time, and executes the [`Cmd`]s it returns. Everything about restart
//! policies, strategies, intensity, backoff and ordered stopping lives here, so it is
//! tested without starting a single actor.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::policy::{RestartPolicy, Strategy, SupervisorConfig};
use crate::host::Exit;

/// What the shell must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cmd {
    /// Start child `i` now. `restart` says whether this is a restart (counted).
    Start { child: usize, restart: bool },
    /// Show `children` as waiting in backoff, then call [`Core::backoff_elapsed`]
    /// with `plan` after `delay`.
    StartAfter {
        plan: u64,
        children: Vec<usize>,
        delay: Duration,
    },
    /// Ask child `i` to stop; call [`Core::stop_timeout`] if it has not exited by `timeout`.
    Stop {
        child: usize,
        generation: u64,
        timeout: Duration,
    },
    /// All children are stopped; the supervisor must now fail with this reason.
    Escalate(String),
    /// Shutdown complete: the supervisor may stop.
    Finished,
}

/// Where a child is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Declared, never started.
    Idle,
    Running,
    /// Asked to stop, exit not seen yet.
    Stopping,
    /// Waiting out a backoff (or stopped as part of a group restart).
    Waiting,
    /// Exited and not restarted (policy or shutdown).
    Stopped,
    /// Exited abnormally and not restarted.
    Failed,
    /// Taken out of the tree for good (an uninstalled plugin, or one whose install was
    /// rolled back): never started, restarted or stopped again. Its slot stays so the
    /// other children's indices do not move.
    Removed,
}

#[derive(Debug)]
struct Child {
    restart: RestartPolicy,
    status: Status,
    /// Incremented at each start; exits and timeouts of older generations are ignored.
    generation: u64,
    started_at: Option<Instant>,
    ever_started: bool,
    /// Present while the child is crashing repeatedly; dropped after a stable run.
    backoff: Option<super::policy::Delays>,
    /// The delayed start this child waits for (`Cmd::StartAfter::plan`), if any.
    plan: Option<u64>,
}

/// What happens once the current stop sequence has drained.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AfterStops {
    /// A (group) restart: start these children, in start order, after `delay`.
    Restart {
        children: Vec<usize>,
        delay: Duration,
    },
    /// Operator restart of one child: start it at once.
    RestartNow(usize),
    /// Operator stop of one child: leave it stopped until restarted.
    Park(usize),
    /// Removal of one child: once stopped, it is gone.
    Remove(usize),
    Shutdown,
    Escalate(String),
}

/// Why an operator restart was refused (defined with the operator interface).
pub use crate::control::RestartRefused;

/// A supervisor's children and its decisions about them.
pub struct Core {
    config: SupervisorConfig,
    children: Vec<Child>,
    /// Times of recent restarts, for the intensity check.
    restarts: VecDeque<Instant>,
    /// Children to stop, one at a time, front first.
    stop_queue: VecDeque<usize>,
    /// The child currently being stopped.
    stopping: Option<usize>,
    after: Option<AfterStops>,
    /// Removals asked for while another stop sequence ran, done after it in order (two
    /// helpers that end together are both removed; refusing the second left its subtree
    /// behind for good).
    removals: VecDeque<usize>,
    /// Source of delayed-start ids; each waiting child remembers the one it waits
    /// for, so a stale or cancelled timer starts nothing.
    plan: u64,
    shutting_down: bool,
    failed: bool,
}

impl Core {
    pub fn new(config: SupervisorConfig) -> Self {
        Self {
            config,
            children: Vec::new(),
            restarts: VecDeque::new(),
            stop_queue: VecDeque::new(),
            stopping: None,
            after: None,
            removals: VecDeque::new(),
            plan: 0,
            shutting_down: false,
            failed: false,
        }
    }

    pub fn config(&self) -> &SupervisorConfig {
        &self.config
    }

    /// Declares a new child (appended: it starts after every existing one and stops
    /// before them). Returns its index and the command to start it.
    pub fn add_child(&mut self, restart: RestartPolicy) -> Option<(usize, Cmd)> {
        if self.shutting_down || self.failed {
            return None;
        }
        self.children.push(Child {
            restart,
            status: Status::Idle,
            generation: 0,
            started_at: None,
            ever_started: false,
            backoff: None,
            plan: None,
        });
        let i = self.children.len() - 1;
        Some((
            i,
            Cmd::Start {
                child: i,
                restart: false,
            },
        ))
    }

    pub fn len(&self) -> usize {
        self.children.len()
    }

    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    pub fn status(&self, i: usize) -> Status {
        self.children[i].status
    }

    pub fn generation(&self, i: usize) -> u64 {
        self.children[i].generation
    }

    /// The shell started child `i`. Returns the generation to tag its exit with.
    pub fn started(&mut self, i: usize, now: Instant) -> u64 {
        let c = &mut self.children[i];
        c.generation += 1;
        c.status = Status::Running;
        c.started_at = Some(now);
        c.ever_started = true;
        c.generation
    }

    /// Child `i` could not be started at all: treated as an abnormal exit.
    pub fn start_failed(&mut self, i: usize, reason: String, now: Instant) -> Vec<Cmd> {
        let g = self.started(i, now);
        self.exited(i, g, &Exit::Error(reason), now)
    }

    /// Child `i` of `generation` exited.
    pub fn exited(&mut self, i: usize, generation: u64, exit: &Exit, now: Instant) -> Vec<Cmd> {
        let c = &mut self.children[i];
        if generation != c.generation || !matches!(c.status, Status::Running | Status::Stopping) {
            return Vec::new(); // stale: an older instance, or already accounted for
        }
        if c.status == Status::Stopping || self.stop_queue.contains(&i) {
            // We asked for it (or were about to): continue the stop sequence.
            self.stop_queue.retain(|&q| q != i);
            c.status = Status::Waiting;
            if self.stopping == Some(i) {
                self.stopping = None;
            }
            return self.drain_stops();
        }
        // An unexpected exit.
        let ran_for = c.started_at.map(|t| now.saturating_duration_since(t));
        let wants_restart = match c.restart {
            RestartPolicy::Permanent => true,
            RestartPolicy::Transient => exit.is_abnormal(),
            RestartPolicy::Temporary => false,
        };
        if !wants_restart || self.shutting_down || self.failed {
            c.status = if exit.is_abnormal() {
                Status::Failed
            } else {
                Status::Stopped
            };
            return Vec::new();
        }
        if ran_for.is_some_and(|d| d >= self.config.backoff.reset_after) {
            c.backoff = None; // it was stable: start the delays over
        }
        c.status = Status::Waiting;

        // Intensity: too many restarts in the window → give up and escalate.
        let window = self.config.intensity.window;
        while self
            .restarts
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > window)
        {
            self.restarts.pop_front();
        }
        self.restarts.push_back(now);
        if self.restarts.len() > self.config.intensity.max_restarts as usize {
            let reason = format!(
                "restart intensity exceeded: more than {} restarts in {:?} (last: child #{i} {exit})",
                self.config.intensity.max_restarts, window
            );
            self.failed = true;
            return self.stop_all_then(AfterStops::Escalate(reason));
        }

        let c = &mut self.children[i];
        let backoff = c.backoff.get_or_insert_with(|| self.config.backoff.sequence());
        let delay = backoff
            .next()
            .unwrap_or(self.config.backoff.max)
            .min(self.config.backoff.max);
        // backon computes in f32; whole milliseconds are plenty and read better in logs.
        let delay = Duration::from_millis(delay.as_millis() as u64);

        let group: Vec<usize> = match self.config.strategy {
            Strategy::OneForOne => vec![i],
            Strategy::OneForAll => (0..self.children.len()).collect(),
            Strategy::RestForOne => (i..self.children.len()).collect(),
        };
        // Temporary siblings are stopped with the group but never started again; removed
        // ones are not part of any group.
        let group: Vec<usize> = group
            .into_iter()
            .filter(|&g| self.children[g].status != Status::Removed)
            .filter(|&g| g == i || self.children[g].restart != RestartPolicy::Temporary || self.is_live(g))
            .collect();
        let to_stop: Vec<usize> = group.iter().copied().filter(|&g| g != i && self.is_live(g)).collect();
        let restart: Vec<usize> = group
            .iter()
            .copied()
            .filter(|&g| self.children[g].restart != RestartPolicy::Temporary)
            .collect();
        // Nothing to stop first: restart on its own (its delayed start is independent), unless
        // a group restart is pending, which it then joins.
        if to_stop.is_empty() && !matches!(self.after, Some(AfterStops::Restart { .. })) {
            let plan = self.new_plan(&restart);
            return vec![Cmd::StartAfter {
                plan,
                children: restart,
                delay,
            }];
        }
        // Merge with a restart already in progress.
        let (mut all, mut d) = match self.after.take() {
            Some(AfterStops::Restart { children, delay: d }) => (children, d),
            Some(AfterStops::RestartNow(j)) => (vec![j], Duration::ZERO),
            Some(other) => {
                self.after = Some(other);
                return self.drain_stops();
            }
            None => (Vec::new(), Duration::ZERO),
        };
        all.extend(restart);
        all.sort_unstable();
        all.dedup();
        d = d.max(delay);
        // Stop later children first.
        let mut to_stop = to_stop;
        to_stop.sort_unstable_by(|a, b| b.cmp(a));
        for s in to_stop {
            if !self.stop_queue.contains(&s) && self.stopping != Some(s) {
                self.stop_queue.push_back(s);
            }
        }
        self.after = Some(AfterStops::Restart {
            children: all,
            delay: d,
        });
        self.drain_stops()
    }

    /// A fresh delayed-start id, remembered by each of `children`.
    fn new_plan(&mut self, children: &[usize]) -> u64 {
        self.plan += 1;
        for &i in children {
            self.children[i].plan = Some(self.plan);
        }
        self.plan
    }

    fn is_live(&self, i: usize) -> bool {
        matches!(self.children[i].status, Status::Running | Status::Stopping)
    }

    /// Stops every live child, last started first, then does `after`.
    fn stop_all_then(&mut self, after: AfterStops) -> Vec<Cmd> {
        self.stop_queue.clear();
        for i in (0..self.children.len()).rev() {
            if self.children[i].status == Status::Running {
                self.stop_queue.push_back(i);
            }
            if self.children[i].status == Status::Waiting {
                self.children[i].status = Status::Stopped;
            }
        }
        self.after = Some(after);
        for c in &mut self.children {
            c.plan = None; // cancels every pending delayed start
        }
        self.drain_stops()
    }

    /// Issues the next stop, or the follow-up once all stops are done.
    fn drain_stops(&mut self) -> Vec<Cmd> {
        if self.stopping.is_some() {
            return Vec::new();
        }
        while let Some(i) = self.stop_queue.pop_front() {
            if self.children[i].status == Status::Running {
                self.children[i].status = Status::Stopping;
                self.stopping = Some(i);
                return vec![Cmd::Stop {
                    child: i,
                    generation: self.children[i].generation,
                    timeout: self.config.shutdown_timeout,
                }];
            }
        }
        match self.after.take() {
            None => self.next_removal(),
            // A child whose removal waits is not started again (it is removed next).
            Some(AfterStops::Restart { mut children, delay }) if !self.removals.is_empty() => {
                children.retain(|c| !self.removals.contains(c));
                let mut cmds = Vec::new();
                if !children.is_empty() {
                    let plan = self.new_plan(&children);
                    cmds.push(Cmd::StartAfter { plan, children, delay });
                }
                cmds.extend(self.next_removal());
                cmds
            }
            Some(AfterStops::Restart { children, delay }) => {
                let plan = self.new_plan(&children);
                vec![Cmd::StartAfter { plan, children, delay }]
            }
            Some(AfterStops::RestartNow(i)) if self.removals.contains(&i) => self.next_removal(),
            Some(AfterStops::RestartNow(i)) => vec![Cmd::Start {
                child: i,
                restart: true,
            }],
            Some(AfterStops::Park(i)) => {
                self.children[i].status = Status::Stopped;
                self.next_removal()
            }
            Some(AfterStops::Remove(i)) => {
                self.children[i].status = Status::Removed;
                self.next_removal()
            }
            Some(AfterStops::Shutdown) => {
                self.mark_waiting_stopped();
                vec![Cmd::Finished]
            }
            Some(AfterStops::Escalate(reason)) => {
                self.mark_waiting_stopped();
                vec![Cmd::Escalate(reason)]
            }
        }
    }

    fn mark_waiting_stopped(&mut self) {
        for c in &mut self.children {
            if matches!(c.status, Status::Waiting | Status::Idle) {
                c.status = Status::Stopped;
            }
        }
    }

    /// Child `i` did not exit within its shutdown timeout: abandon it and go on.
    pub fn stop_timeout(&mut self, i: usize, generation: u64) -> Vec<Cmd> {
        let c = &mut self.children[i];
        if c.generation != generation || c.status != Status::Stopping {
            return Vec::new();
        }
        c.status = Status::Waiting;
        self.stopping = None;
        self.drain_stops()
    }

    /// The delay of `plan` is over: start its children in start order.
    pub fn backoff_elapsed(&mut self, plan: u64, children: &[usize]) -> Vec<Cmd> {
        if self.shutting_down || self.failed {
            return Vec::new();
        }
        children
            .iter()
            .copied()
            .filter(|&i| {
                let c = &mut self.children[i];
                let due = c.status == Status::Waiting && c.plan == Some(plan);
                if due {
                    c.plan = None;
                }
                due
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|i| Cmd::Start {
                child: i,
                restart: self.children[i].ever_started,
            })
            .collect()
    }

    /// An operator asked to restart child `i` now (not counted against intensity).
    pub fn operator_restart(&mut self, i: usize) -> Result<Vec<Cmd>, RestartRefused> {
        if self.shutting_down || self.failed {
            return Err(RestartRefused::NotRunning);
        }
        if self.stopping.is_some() || self.after.is_some() {
            return Err(RestartRefused::Busy);
        }
        let c = &mut self.children[i];
        c.backoff = None;
        match c.status {
            Status::Running => {
                self.stop_queue.push_back(i);
                self.after = Some(AfterStops::RestartNow(i));
                Ok(self.drain_stops())
            }
            Status::Stopping => Err(RestartRefused::Busy),
            Status::Removed => Err(RestartRefused::Removed),
            Status::Idle | Status::Waiting | Status::Stopped | Status::Failed => {
                c.status = Status::Waiting;
                c.plan = None; // a pending delayed start for it is superseded
                Ok(vec![Cmd::Start {
                    child: i,
                    restart: c.ever_started,
                }])
            }
        }
    }

    /// An operator asked to stop child `i` and leave it stopped (a disabled plugin):
    /// no restart until [`operator_restart`](Self::operator_restart).
    pub fn operator_stop(&mut self, i: usize) -> Result<Vec<Cmd>, RestartRefused> {
        if self.shutting_down || self.failed {
            return Err(RestartRefused::NotRunning);
        }
        if self.stopping.is_some() || self.after.is_some() {
            return Err(RestartRefused::Busy);
        }
        let c = &mut self.children[i];
        c.backoff = None;
        match c.status {
            Status::Running => {
                self.stop_queue.push_back(i);
                self.after = Some(AfterStops::Park(i));
                Ok(self.drain_stops())
            }
            Status::Stopping => Err(RestartRefused::Busy),
            Status::Removed => Err(RestartRefused::Removed),
            Status::Idle | Status::Waiting | Status::Stopped | Status::Failed => {
                c.status = Status::Stopped;
                c.plan = None; // cancels a pending delayed start
                Ok(Vec::new())
            }
        }
    }

    /// Takes child `i` out of the tree for good: a running child is stopped first (in
    /// the stop sequence, like an operator stop); a pending delayed start is cancelled.
    /// Removing a removed child is a no-op. While another stop sequence runs, a running
    /// child's removal waits for it (queued, in order) instead of being refused: removal
    /// is what a finished sub-tree asks for, and nobody is there to ask again.
    pub fn remove(&mut self, i: usize) -> Result<Vec<Cmd>, RestartRefused> {
        if self.shutting_down || self.failed {
            return Err(RestartRefused::NotRunning);
        }
        let busy = self.stopping.is_some() || self.after.is_some();
        if busy && matches!(self.children[i].status, Status::Running | Status::Stopping) {
            if !self.removals.contains(&i) {
                self.removals.push_back(i);
            }
            return Ok(Vec::new());
        }
        Ok(self.remove_now(i))
    }

    /// [`Self::remove`] with no other stop sequence running.
    fn remove_now(&mut self, i: usize) -> Vec<Cmd> {
        let c = &mut self.children[i];
        c.backoff = None;
        c.plan = None;
        match c.status {
            Status::Removed => Vec::new(),
            Status::Running => {
                self.stop_queue.push_back(i);
                self.after = Some(AfterStops::Remove(i));
                self.drain_stops()
            }
            Status::Stopping | Status::Idle | Status::Waiting | Status::Stopped | Status::Failed => {
                c.status = Status::Removed;
                Vec::new()
            }
        }
    }

    /// The next queued removal, once a stop sequence has drained.
    fn next_removal(&mut self) -> Vec<Cmd> {
        while let Some(i) = self.removals.pop_front() {
            let cmds = self.remove_now(i);
            if !cmds.is_empty() || self.after.is_some() {
                return cmds;
            }
        }
        Vec::new()
    }

    /// Orderly shutdown: stop children last-started first, then [`Cmd::Finished`].
    pub fn shutdown(&mut self) -> Vec<Cmd> {
        if self.shutting_down {
            return Vec::new();
        }
        self.shutting_down = true;
        if let Some(AfterStops::Escalate(_)) = self.after {
            return self.drain_stops(); // already stopping everything
        }
        self.stop_all_then(AfterStops::Shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::policy::{BackoffPolicy, Intensity};

    fn cfg(strategy: Strategy, max_restarts: u32) -> SupervisorConfig {
        SupervisorConfig {
            strategy,
            intensity: Intensity {
                max_restarts,
                window: Duration::from_secs(10),
            },
            backoff: BackoffPolicy {
                initial: Duration::from_millis(100),
                max: Duration::from_secs(1),
                reset_after: Duration::from_secs(60),
                jitter: false,
                growth: Default::default(),
            },
            shutdown_timeout: Duration::from_secs(5),
        }
    }

    /// Adds and starts `n` children with `policy`; returns their generations.
    fn boot(core: &mut Core, n: usize, policy: RestartPolicy, now: Instant) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let (i, cmd) = core.add_child(policy).unwrap();
                assert_eq!(
                    cmd,
                    Cmd::Start {
                        child: i,
                        restart: false
                    }
                );
                core.started(i, now)
            })
            .collect()
    }

    fn panic_exit() -> Exit {
        Exit::Panic("boom".into())
    }

    #[test]
    fn one_for_one_restarts_only_the_child_after_growing_backoff() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 3, RestartPolicy::Permanent, t0);
        let cmds = core.exited(1, g[1], &panic_exit(), t0);
        assert_eq!(
            cmds,
            vec![Cmd::StartAfter {
                plan: 1,
                children: vec![1],
                delay: Duration::from_millis(100)
            }]
        );
        assert_eq!(core.status(1), Status::Waiting);
        assert_eq!(
            core.backoff_elapsed(1, &[1]),
            vec![Cmd::Start {
                child: 1,
                restart: true
            }]
        );
        let g1 = core.started(1, t0);
        let cmds = core.exited(1, g1, &panic_exit(), t0 + Duration::from_secs(1));
        assert_eq!(
            cmds,
            vec![Cmd::StartAfter {
                plan: 2,
                children: vec![1],
                delay: Duration::from_millis(200)
            }]
        );
        // A stale timer does nothing.
        assert!(core.backoff_elapsed(1, &[1]).is_empty());
    }

    #[test]
    fn backoff_resets_after_a_stable_run() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 100));
        let g = boot(&mut core, 1, RestartPolicy::Permanent, t0);
        let mut g_ = g[0];
        let mut t = t0;
        for expect in [100, 200, 400, 800, 1000, 1000] {
            t += Duration::from_millis(1);
            let cmds = core.exited(0, g_, &panic_exit(), t);
            let Cmd::StartAfter { delay, .. } = &cmds[0] else {
                panic!("{cmds:?}")
            };
            assert_eq!(*delay, Duration::from_millis(expect), "capped exponential growth");
            g_ = core.started(0, t);
        }
        let cmds = core.exited(0, g_, &panic_exit(), t + Duration::from_secs(61));
        let Cmd::StartAfter { delay, .. } = &cmds[0] else {
            panic!()
        };
        assert_eq!(*delay, Duration::from_millis(100));
    }

    #[test]
    fn jittered_delay_stays_within_cap() {
        let mut c = cfg(Strategy::OneForOne, 100);
        c.backoff.jitter = true;
        let mut core = Core::new(c);
        let t0 = Instant::now();
        let mut g_ = boot(&mut core, 1, RestartPolicy::Permanent, t0)[0];
        for _ in 0..10 {
            let cmds = core.exited(0, g_, &panic_exit(), t0);
            let Cmd::StartAfter { delay, .. } = &cmds[0] else {
                panic!()
            };
            assert!(*delay >= Duration::from_millis(100) && *delay <= Duration::from_secs(1));
            g_ = core.started(0, t0);
        }
    }

    #[test]
    fn transient_is_not_restarted_after_normal_exit_but_is_after_panic() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 2, RestartPolicy::Transient, t0);
        assert!(core.exited(0, g[0], &Exit::Normal, t0).is_empty());
        assert_eq!(core.status(0), Status::Stopped);
        let cmds = core.exited(1, g[1], &panic_exit(), t0);
        assert!(matches!(&cmds[..], [Cmd::StartAfter { children, .. }] if children == &[1]));
    }

    #[test]
    fn temporary_never_restarts() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 1, RestartPolicy::Temporary, t0);
        assert!(core.exited(0, g[0], &panic_exit(), t0).is_empty());
        assert_eq!(core.status(0), Status::Failed);
    }

    #[test]
    fn rest_for_one_stops_later_siblings_in_reverse_and_restarts_them_in_order() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::RestForOne, 10));
        let g = boot(&mut core, 4, RestartPolicy::Permanent, t0);
        let cmds = core.exited(1, g[1], &panic_exit(), t0);
        assert_eq!(
            cmds,
            vec![Cmd::Stop {
                child: 3,
                generation: g[3],
                timeout: Duration::from_secs(5)
            }]
        );
        let cmds = core.exited(3, g[3], &Exit::Shutdown, t0);
        assert_eq!(
            cmds,
            vec![Cmd::Stop {
                child: 2,
                generation: g[2],
                timeout: Duration::from_secs(5)
            }]
        );
        // Child 2 hangs: the timeout abandons it and the plan goes on.
        let cmds = core.stop_timeout(2, g[2]);
        let Cmd::StartAfter { plan, children, .. } = &cmds[0] else {
            panic!("{cmds:?}")
        };
        assert_eq!(children, &vec![1, 2, 3], "child 0 (earlier sibling) is untouched");
        assert_eq!(core.status(0), Status::Running);
        let starts = core.backoff_elapsed(*plan, children);
        assert_eq!(
            starts,
            vec![
                Cmd::Start {
                    child: 1,
                    restart: true
                },
                Cmd::Start {
                    child: 2,
                    restart: true
                },
                Cmd::Start {
                    child: 3,
                    restart: true
                }
            ]
        );
    }

    #[test]
    fn one_for_all_restarts_everyone() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForAll, 10));
        let g = boot(&mut core, 3, RestartPolicy::Permanent, t0);
        let mut cmds = core.exited(0, g[0], &panic_exit(), t0);
        let mut stopped = Vec::new();
        while let [Cmd::Stop { child, generation, .. }] = cmds[..] {
            stopped.push(child);
            cmds = core.exited(child, generation, &Exit::Shutdown, t0);
        }
        assert_eq!(stopped, vec![2, 1]);
        assert!(matches!(&cmds[..], [Cmd::StartAfter { children, .. }] if children == &[0, 1, 2]));
    }

    #[test]
    fn intensity_exceeded_stops_all_in_reverse_and_escalates() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 2));
        let g = boot(&mut core, 3, RestartPolicy::Permanent, t0);
        let mut gen0 = g[0];
        for _ in 0..2 {
            let cmds = core.exited(0, gen0, &panic_exit(), t0);
            assert!(matches!(cmds[0], Cmd::StartAfter { .. }));
            gen0 = core.started(0, t0);
        }
        let cmds = core.exited(0, gen0, &panic_exit(), t0);
        assert_eq!(
            cmds,
            vec![Cmd::Stop {
                child: 2,
                generation: g[2],
                timeout: Duration::from_secs(5)
            }]
        );
        let cmds = core.exited(2, g[2], &Exit::Shutdown, t0);
        assert_eq!(
            cmds,
            vec![Cmd::Stop {
                child: 1,
                generation: g[1],
                timeout: Duration::from_secs(5)
            }]
        );
        let cmds = core.exited(1, g[1], &Exit::Shutdown, t0);
        assert!(matches!(&cmds[..], [Cmd::Escalate(r)] if r.contains("restart intensity exceeded")));
        assert!(
            core.add_child(RestartPolicy::Permanent).is_none(),
            "a failed supervisor takes no children"
        );
    }

    #[test]
    fn restarts_outside_the_window_do_not_count() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 2));
        let mut g_ = boot(&mut core, 1, RestartPolicy::Permanent, t0)[0];
        for k in 0..6u64 {
            let t = t0 + Duration::from_secs(6 * k);
            let cmds = core.exited(0, g_, &panic_exit(), t);
            assert!(matches!(cmds[0], Cmd::StartAfter { .. }), "round {k}: {cmds:?}");
            g_ = core.started(0, t);
        }
    }

    #[test]
    fn shutdown_stops_in_reverse_start_order() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 3, RestartPolicy::Permanent, t0);
        let mut cmds = core.shutdown();
        let mut order = Vec::new();
        while let [Cmd::Stop { child, .. }] = cmds[..] {
            order.push(child);
            cmds = core.exited(child, g[child], &Exit::Shutdown, t0);
        }
        assert_eq!(order, vec![2, 1, 0]);
        assert_eq!(cmds, vec![Cmd::Finished]);
        assert_eq!(core.status(0), Status::Stopped);
    }

    #[test]
    fn operator_restart_stops_then_starts_without_backoff() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 0));
        let g = boot(&mut core, 2, RestartPolicy::Permanent, t0);
        let cmds = core.operator_restart(1).unwrap();
        assert_eq!(
            cmds,
            vec![Cmd::Stop {
                child: 1,
                generation: g[1],
                timeout: Duration::from_secs(5)
            }]
        );
        assert_eq!(core.operator_restart(0), Err(RestartRefused::Busy));
        let cmds = core.exited(1, g[1], &Exit::Shutdown, t0);
        assert_eq!(
            cmds,
            vec![Cmd::Start {
                child: 1,
                restart: true
            }]
        );
        // Intensity 0 was not consumed by the operator's restart.
        core.started(1, t0);
        core.shutdown();
        assert_eq!(core.operator_restart(0), Err(RestartRefused::NotRunning));
    }

    #[test]
    fn operator_restart_of_a_failed_child_starts_it() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 1, RestartPolicy::Temporary, t0);
        core.exited(0, g[0], &panic_exit(), t0);
        assert_eq!(
            core.operator_restart(0).unwrap(),
            vec![Cmd::Start {
                child: 0,
                restart: true
            }]
        );
    }

    #[test]
    fn two_children_in_backoff_both_restart() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 2, RestartPolicy::Permanent, t0);
        let a = core.exited(0, g[0], &panic_exit(), t0);
        let b = core.exited(1, g[1], &panic_exit(), t0);
        for cmds in [a, b] {
            let Cmd::StartAfter { plan, children, .. } = &cmds[0] else {
                panic!("{cmds:?}")
            };
            assert_eq!(
                core.backoff_elapsed(*plan, children).len(),
                1,
                "each timer starts its own child"
            );
        }
    }

    #[test]
    fn a_crash_during_an_operator_stop_still_restarts() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 2, RestartPolicy::Permanent, t0);
        core.operator_stop(1).unwrap();
        let cmds = core.exited(0, g[0], &panic_exit(), t0);
        let Cmd::StartAfter { plan, children, .. } = &cmds[0] else {
            panic!("{cmds:?}")
        };
        assert_eq!(
            core.backoff_elapsed(*plan, children),
            vec![Cmd::Start {
                child: 0,
                restart: true
            }]
        );
        assert!(core.exited(1, g[1], &Exit::Shutdown, t0).is_empty());
        assert_eq!(core.status(1), Status::Stopped);
    }

    #[test]
    fn operator_stop_parks_a_child_until_restarted() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 2, RestartPolicy::Permanent, t0);
        let cmds = core.operator_stop(1).unwrap();
        assert_eq!(
            cmds,
            vec![Cmd::Stop {
                child: 1,
                generation: g[1],
                timeout: Duration::from_secs(5)
            }]
        );
        assert!(core.exited(1, g[1], &Exit::Shutdown, t0).is_empty(), "not restarted");
        assert_eq!(core.status(1), Status::Stopped);
        // A child waiting out a backoff is parked too (its delayed start is cancelled).
        let cmds = core.exited(0, g[0], &panic_exit(), t0);
        let Cmd::StartAfter { plan, children, .. } = &cmds[0] else {
            panic!()
        };
        assert!(core.operator_stop(0).unwrap().is_empty());
        assert!(core.backoff_elapsed(*plan, children).is_empty());
        assert_eq!(
            core.operator_restart(1).unwrap(),
            vec![Cmd::Start {
                child: 1,
                restart: true
            }]
        );
    }

    #[test]
    fn a_removed_child_is_stopped_and_never_started_again() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForAll, 10));
        let g = boot(&mut core, 3, RestartPolicy::Permanent, t0);
        let cmds = core.remove(1).unwrap();
        assert_eq!(
            cmds,
            vec![Cmd::Stop {
                child: 1,
                generation: g[1],
                timeout: Duration::from_secs(5)
            }]
        );
        assert!(core.exited(1, g[1], &Exit::Shutdown, t0).is_empty());
        assert_eq!(core.status(1), Status::Removed);
        // A crash of a sibling restarts the group without the removed child.
        let mut cmds = core.exited(0, g[0], &panic_exit(), t0);
        while let Some(Cmd::Stop { child, generation, .. }) = cmds.first().cloned() {
            cmds = core.exited(child, generation, &Exit::Shutdown, t0);
        }
        let Cmd::StartAfter { plan, children, .. } = &cmds[0] else {
            panic!("{cmds:?}")
        };
        assert_eq!(children, &vec![0, 2]);
        let starts = core.backoff_elapsed(*plan, children);
        assert!(
            starts.iter().all(|c| !matches!(c, Cmd::Start { child: 1, .. })),
            "{starts:?}"
        );
        // Nor by an operator; removing twice is a no-op.
        assert_eq!(core.operator_restart(1), Err(RestartRefused::Removed));
        assert_eq!(core.remove(1), Ok(Vec::new()));
        // A child that is not running is removed at once.
        let (j, _) = core.add_child(RestartPolicy::Permanent).unwrap();
        assert_eq!(core.remove(j), Ok(Vec::new()));
        assert_eq!(core.status(j), Status::Removed);
    }

    #[test]
    fn a_removal_asked_during_another_stop_sequence_waits_for_it() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let g = boot(&mut core, 3, RestartPolicy::Permanent, t0);
        let stop = |child: usize| Cmd::Stop {
            child,
            generation: g[child],
            timeout: Duration::from_secs(5),
        };
        assert_eq!(core.remove(0), Ok(vec![stop(0)]));
        // Two more while child 0 is stopping: accepted, nothing issued yet.
        assert_eq!(core.remove(2), Ok(Vec::new()));
        assert_eq!(core.remove(1), Ok(Vec::new()));
        assert_eq!(core.remove(2), Ok(Vec::new()), "asked twice, queued once");
        assert_eq!(core.status(2), Status::Running);
        // Each starts once the one before has stopped, in the order asked.
        assert_eq!(core.exited(0, g[0], &Exit::Shutdown, t0), vec![stop(2)]);
        assert_eq!(core.status(0), Status::Removed);
        assert_eq!(core.exited(2, g[2], &Exit::Shutdown, t0), vec![stop(1)]);
        assert!(core.exited(1, g[1], &Exit::Shutdown, t0).is_empty());
        assert!((0..3).all(|i| core.status(i) == Status::Removed));

        // A removal asked during a group restart: that child is not started again.
        let mut core = Core::new(cfg(Strategy::OneForAll, 10));
        let g = boot(&mut core, 3, RestartPolicy::Permanent, t0);
        let mut cmds = core.exited(0, g[0], &panic_exit(), t0);
        assert_eq!(core.remove(1), Ok(Vec::new()), "queued behind the restart's stops");
        while let Some(Cmd::Stop { child, generation, .. }) = cmds.first().cloned() {
            cmds = core.exited(child, generation, &Exit::Shutdown, t0);
        }
        let Cmd::StartAfter { children, .. } = &cmds[0] else {
            panic!("{cmds:?}")
        };
        assert_eq!(children, &vec![0, 2]);
        assert_eq!(core.status(1), Status::Removed);
    }

    #[test]
    fn start_failure_counts_as_crash() {
        let t0 = Instant::now();
        let mut core = Core::new(cfg(Strategy::OneForOne, 10));
        let (i, _) = core.add_child(RestartPolicy::Permanent).unwrap();
        let cmds = core.start_failed(i, "cannot open db".into(), t0);
        assert!(matches!(cmds[0], Cmd::StartAfter { .. }));
    }
}
