//! The scheduling logic as a plain struct (kernel spec §1, CURRENT semantics).
//!
//! Owns the ready queue of queued tasks, the four interrupt queues, the `immediate`
//! slot, the LIFO stack of suspended frames and the running task's bookkeeping. The
//! Scheduler actor feeds it events and executes what it decides; nothing here knows
//! about actors, clocks (the caller passes `now`) or what a task actually does (`P` is
//! the task's payload, `F` a suspended task's saved frame).

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::level::Level;

/// Default capacity of the ready queue and, separately, of all interrupt queues together.
pub const MAX_QUEUE: usize = 256;
/// Depth of the interrupt stack: queued ← L1 ← L2 ← L3 with L4 running.
pub const MAX_FRAMES: usize = 4;
/// A just-suspended (or just-resumed) task cannot be preempted again for this long.
pub const PREEMPT_COOLDOWN: Duration = Duration::from_secs(2);
/// Starvation guard: each suspension promotes an interrupt by one level, at most this many.
pub const MAX_PROMOTION: u32 = 2;

/// Which injection path created a task (never inferred from the channel name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Normal input, handled in FIFO order; preempted by any interrupt.
    Queued,
    /// An interrupt at a level; preempts only strictly lower effective levels.
    Interrupt(Level),
}

/// Where a task came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// From a channel (a plugin injected it).
    Input,
    /// From the kernel itself (consolidation, memory merges).
    SelfMsg,
}

/// Scheduling facts about one task (its payload travels separately).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Meta {
    pub id: u64,
    pub class: Class,
    pub kind: Kind,
    /// Times this task has been suspended.
    pub preempt_count: u32,
    /// When it was last suspended (starts its cooldown).
    #[serde(skip)]
    pub last_preempt_at: Option<Instant>,
}

impl Meta {
    /// 0 for queued tasks; for interrupts `min(4, level + min(preempt_count, 2))`.
    pub fn effective(&self) -> u8 {
        match self.class {
            Class::Queued => 0,
            Class::Interrupt(l) => (l as u8 + self.preempt_count.min(MAX_PROMOTION) as u8).min(4),
        }
    }

    pub fn level(&self) -> Option<Level> {
        match self.class {
            Class::Queued => None,
            Class::Interrupt(l) => Some(l),
        }
    }

    fn in_cooldown(&self, now: Instant) -> bool {
        self.last_preempt_at
            .is_some_and(|t| now.saturating_duration_since(t) < PREEMPT_COOLDOWN)
    }
}

/// `incoming` may preempt `running`: it is an interrupt with a strictly greater
/// effective level. Queued tasks never preempt; equal levels never preempt.
pub fn can_preempt(incoming: &Meta, running: &Meta) -> bool {
    matches!(incoming.class, Class::Interrupt(_)) && incoming.effective() > running.effective()
}

/// A task waiting in a queue.
#[derive(Debug)]
pub struct Task<P> {
    pub meta: Meta,
    pub payload: P,
}

/// What the scheduler hands to the executor next.
#[derive(Debug)]
pub enum Pick<P, F> {
    /// A task that has not run yet (from `immediate`, an interrupt queue or the ready queue).
    Start(Task<P>),
    /// A suspended task to continue from its saved frame.
    Resume(Task<P>, F),
}

/// Why an interrupt was queued instead of preempting (for the log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueuedBecause {
    Idle,
    Critical,
    Cooldown,
    LevelInsufficient,
    ImmediateTaken,
}

/// Result of registering an interrupt.
#[derive(Debug)]
pub struct Registered<P> {
    pub id: u64,
    /// True when the running task must yield: cancel its in-flight LLM call now.
    pub preempts: bool,
    pub queued_because: Option<QueuedBecause>,
    /// A task dropped to make room (oldest of the lowest level); answer its caller.
    pub dropped: Option<Task<P>>,
}

/// Counters, as the spec's status surface names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub enqueued: u64,
    pub executed: u64,
    pub rejected: u64,
    pub suspended: u64,
    pub resumed: u64,
    /// Interrupts registered, by level (index 0 = L1).
    pub interrupts_by_level: [u64; 4],
    /// Preemptions granted, by level of the preempting interrupt.
    pub preempts_by_level: [u64; 4],
}

/// What a task is about, as its shell describes it (the core never looks inside a
/// payload): where it came from and the start of its text, for the operator's view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TaskLabel {
    pub source: String,
    pub channel: String,
    /// The first [`LABEL_CHARS`] characters of its text, on one line.
    pub text: String,
}

/// Characters of a task's text its label keeps.
pub const LABEL_CHARS: usize = 120;

impl TaskLabel {
    pub fn new(source: &str, channel: &str, text: &str) -> Self {
        Self {
            source: source.to_owned(),
            channel: channel.to_owned(),
            text: text
                .chars()
                .take(LABEL_CHARS)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
        }
    }
}

/// One task in a snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub id: u64,
    pub class: Class,
    pub kind: Kind,
    pub level: Option<Level>,
    pub effective_level: u8,
    pub preempt_count: u32,
    /// Filled by the shell ([`Snapshot::label`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<TaskLabel>,
}

impl From<&Meta> for TaskView {
    fn from(m: &Meta) -> Self {
        Self {
            id: m.id,
            class: m.class,
            kind: m.kind,
            level: m.level(),
            effective_level: m.effective(),
            preempt_count: m.preempt_count,
            label: None,
        }
    }
}

/// Everything the scheduler holds, for `GET /api/v1/tasks`.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub running: Option<TaskView>,
    pub immediate: Option<TaskView>,
    pub ready: Vec<TaskView>,
    /// Interrupt queues, L1 first.
    pub interrupts: [Vec<TaskView>; 4],
    /// Suspended frames, bottom first.
    pub stack: Vec<TaskView>,
    pub max_frames: usize,
    pub preempt_armed: bool,
    pub stats: Stats,
}

impl Snapshot {
    /// Attaches the shell's labels to every task of the snapshot, by task id.
    pub fn label(&mut self, of: impl Fn(u64) -> Option<TaskLabel>) {
        let views = self
            .running
            .iter_mut()
            .chain(self.immediate.iter_mut())
            .chain(self.ready.iter_mut())
            .chain(self.interrupts.iter_mut().flatten())
            .chain(self.stack.iter_mut());
        for v in views {
            v.label = of(v.id);
        }
    }
}

/// The scheduler's state and rules.
pub struct Core<P, F> {
    max_queue: usize,
    ready: VecDeque<Task<P>>,
    interrupts: [VecDeque<Task<P>>; 4],
    immediate: Option<Task<P>>,
    stack: Vec<(Task<P>, F)>,
    running: Option<Meta>,
    /// The running task has been asked to yield at its next safe point.
    preempt_armed: bool,
    /// Level of the interrupt that armed the yield.
    preempt_level: u8,
    /// The running task is in a whole-task critical section (consolidation).
    critical: bool,
    /// Tasks that were waiting when the user pressed stop: each is answered
    /// `已取消（用户停止）` instead of being run (see `arm_stop`).
    cancel_ids: HashSet<u64>,
    /// The task that was running when stop was pressed: its cancelled LLM call ends it.
    stop_task: Option<u64>,
    seq: u64,
    stats: Stats,
}

impl<P, F> Default for Core<P, F> {
    fn default() -> Self {
        Self::new(MAX_QUEUE)
    }
}

impl<P, F> Core<P, F> {
    /// A scheduler whose ready queue and interrupt queues each hold `max_queue` tasks
    /// (0 means the default, 256).
    pub fn new(max_queue: usize) -> Self {
        Self {
            max_queue: if max_queue == 0 { MAX_QUEUE } else { max_queue },
            ready: VecDeque::new(),
            interrupts: Default::default(),
            immediate: None,
            stack: Vec::new(),
            running: None,
            preempt_armed: false,
            preempt_level: 0,
            critical: false,
            cancel_ids: HashSet::new(),
            stop_task: None,
            seq: 0,
            stats: Stats::default(),
        }
    }

    fn next_id(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Enqueues a queued-class task; `Err` gives the payload back when the ready queue
    /// is full (the caller answers `queue_full`).
    pub fn enqueue(&mut self, payload: P, kind: Kind) -> Result<u64, P> {
        if self.ready.len() >= self.max_queue {
            self.stats.rejected += 1;
            return Err(payload);
        }
        let id = self.next_id();
        self.stats.enqueued += 1;
        self.ready.push_back(Task {
            meta: meta(id, Class::Queued, kind),
            payload,
        });
        Ok(id)
    }

    fn pending_interrupts(&self) -> usize {
        self.interrupts.iter().map(VecDeque::len).sum::<usize>() + usize::from(self.immediate.is_some())
    }

    /// Files an interrupt in its level queue; when all interrupt queues are full the
    /// oldest task of the lowest non-empty level is dropped and returned.
    fn enqueue_interrupt(&mut self, task: Task<P>) -> Option<Task<P>> {
        let mut dropped = None;
        if self.pending_interrupts() >= self.max_queue
            && let Some(q) = self.interrupts.iter_mut().find(|q| !q.is_empty())
        {
            dropped = q.pop_front();
            self.stats.rejected += 1;
        }
        let idx = task.meta.level().map_or(0, |l| l as usize - 1);
        self.interrupts[idx].push_back(task);
        dropped
    }

    /// Registers a new interrupt at an already-decided level (spec §1.6).
    pub fn register_interrupt(&mut self, payload: P, level: Level, kind: Kind, now: Instant) -> Registered<P> {
        self.stats.interrupts_by_level[level as usize - 1] += 1;
        let id = self.next_id();
        self.stats.enqueued += 1;
        let task = Task {
            meta: meta(id, Class::Interrupt(level), kind),
            payload,
        };
        let because = match &self.running {
            None => Some(QueuedBecause::Idle),
            Some(_) if self.critical => Some(QueuedBecause::Critical),
            Some(r) if !can_preempt(&task.meta, r) => Some(QueuedBecause::LevelInsufficient),
            Some(r) if r.in_cooldown(now) => Some(QueuedBecause::Cooldown),
            Some(_) => match &self.immediate {
                Some(imm) if task.meta.effective() <= imm.meta.effective() => Some(QueuedBecause::ImmediateTaken),
                _ => None,
            },
        };
        if let Some(because) = because {
            let dropped = self.enqueue_interrupt(task);
            return Registered {
                id,
                preempts: false,
                queued_because: Some(because),
                dropped,
            };
        }
        // It wins the immediate slot; a weaker occupant goes back to its level queue.
        let mut dropped = None;
        if let Some(previous) = self.immediate.take() {
            dropped = self.enqueue_interrupt(previous);
        }
        self.immediate = Some(task);
        self.arm(level);
        Registered {
            id,
            preempts: true,
            queued_because: None,
            dropped,
        }
    }

    fn arm(&mut self, level: Level) {
        self.preempt_armed = true;
        self.preempt_level = level as u8;
        self.stats.preempts_by_level[level as usize - 1] += 1;
    }

    /// Chooses the next task (spec §1.8) and makes it the running one.
    pub fn pick_next(&mut self) -> Option<Pick<P, F>> {
        debug_assert!(self.running.is_none(), "one task runs at a time");
        let pick = if let Some(t) = self.immediate.take() {
            Pick::Start(t)
        } else {
            let head_level = (0..4)
                .rev()
                .find(|&i| !self.interrupts[i].is_empty())
                .map(|i| i as u8 + 1);
            let top_wins = match (self.stack.last(), head_level) {
                (Some(_), None) => true,
                // Only the top of the stack competes; ties go to the stack.
                (Some((top, _)), Some(q)) => top.meta.effective() >= q,
                (None, _) => false,
            };
            if top_wins {
                let (t, frame) = self.stack.pop().expect("checked");
                self.stats.resumed += 1;
                Pick::Resume(t, frame)
            } else if let Some(q) = head_level {
                Pick::Start(self.interrupts[q as usize - 1].pop_front().expect("checked"))
            } else {
                Pick::Start(self.ready.pop_front()?)
            }
        };
        let meta = match &pick {
            Pick::Start(t) | Pick::Resume(t, _) => t.meta.clone(),
        };
        self.running = Some(meta);
        self.preempt_armed = false;
        self.preempt_level = 0;
        Some(pick)
    }

    /// At a safe point of the running task (between steps): re-arms a pending
    /// interrupt if one can now preempt (§1.10), then says whether the task must yield.
    /// `consolidation` tasks never yield.
    pub fn safe_point(&mut self, consolidation: bool, now: Instant) -> bool {
        self.rearm_pending(now);
        !consolidation && self.preempt_granted() && self.can_suspend()
    }

    fn preempt_granted(&self) -> bool {
        self.preempt_armed
            && self
                .running
                .as_ref()
                .is_some_and(|r| self.preempt_level > r.effective())
    }

    /// Whether one more frame fits on the stack.
    pub fn can_suspend(&self) -> bool {
        self.stack.len() < MAX_FRAMES
    }

    fn rearm_pending(&mut self, now: Instant) {
        let Some(running) = &self.running else { return };
        if self.preempt_armed || self.immediate.is_some() || self.critical || running.in_cooldown(now) {
            return;
        }
        for i in (0..4).rev() {
            if self.interrupts[i]
                .front()
                .is_some_and(|h| can_preempt(&h.meta, running))
            {
                let t = self.interrupts[i].pop_front().expect("checked");
                let level = t.meta.level().unwrap_or(Level::L1);
                self.immediate = Some(t);
                self.arm(level);
                return;
            }
        }
    }

    /// The running task yields at a safe point: its payload and frame go on the stack.
    pub fn suspend(&mut self, payload: P, frame: F, now: Instant) {
        let Some(mut meta) = self.running.take() else { return };
        if self.stack.len() >= MAX_FRAMES {
            self.stats.rejected += 1; // kept anyway: frames are never dropped
        }
        meta.preempt_count += 1;
        meta.last_preempt_at = Some(now);
        self.stats.suspended += 1;
        self.stack.push((Task { meta, payload }, frame));
        self.preempt_armed = false;
        self.preempt_level = 0;
    }

    /// The running task reached a terminal state.
    pub fn finish(&mut self) {
        if let Some(r) = self.running.take() {
            self.stats.executed += 1;
            self.cancel_ids.remove(&r.id);
            if self.stop_task == Some(r.id) {
                self.stop_task = None;
            }
        }
        self.critical = false;
        self.preempt_armed = false;
        self.preempt_level = 0;
    }

    /// Enters or leaves a whole-task critical section (no preemption at all).
    pub fn set_critical(&mut self, on: bool) {
        self.critical = on;
    }

    /// The user pressed stop. The running task's LLM call ends it (see
    /// [`take_stop`](Self::take_stop)); with `clear_queue`, the tasks waiting in the
    /// ready queue right now are answered `已取消（用户停止）` when they reach
    /// pre-action too (without it they run: a stop is about the turn in front of the
    /// owner, not the inputs the owner queued — issue 30). Later inputs are not
    /// affected. Returns how many waiting tasks will be cancelled.
    ///
    /// Unlike the reference (a bare counter consumed by whichever tasks come next), the
    /// cancellation is bound to the ids that were waiting, and the stop to the task that
    /// was running, so a stop pressed while idle cannot end some later task.
    pub fn arm_stop(&mut self, clear_queue: bool) -> usize {
        if clear_queue {
            self.cancel_ids.extend(self.ready.iter().map(|t| t.meta.id));
        }
        self.stop_task = self.running.as_ref().map(|r| r.id);
        self.cancel_ids.len()
    }

    /// Called when task `id`'s LLM call was cancelled: true when that was a stop (the
    /// task ends with `已停止生成。`), false for a preemption (the call is re-sent later).
    pub fn take_stop(&mut self, id: u64) -> bool {
        if self.stop_task == Some(id) {
            self.stop_task = None;
            true
        } else {
            false
        }
    }

    /// Called at pre-action: true when task `id` was waiting at a stop and must be
    /// short-circuited instead of run.
    pub fn consume_cancel(&mut self, id: u64) -> bool {
        self.cancel_ids.remove(&id)
    }

    /// The running task's scheduling facts.
    pub fn running(&self) -> Option<&Meta> {
        self.running.as_ref()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Nothing running and nothing waiting.
    pub fn is_idle(&self) -> bool {
        self.running.is_none()
            && self.immediate.is_none()
            && self.stack.is_empty()
            && self.ready.is_empty()
            && self.interrupts.iter().all(VecDeque::is_empty)
    }

    /// Takes every waiting and suspended task out (daemon shutdown: each synchronous
    /// caller gets an `agent_stopped` answer instead of hanging).
    pub fn drain(&mut self) -> Vec<Task<P>> {
        let mut out: Vec<Task<P>> = self.ready.drain(..).collect();
        for q in &mut self.interrupts {
            out.extend(q.drain(..));
        }
        out.extend(self.immediate.take());
        out.extend(self.stack.drain(..).map(|(t, _)| t));
        out
    }

    /// Takes every task not yet run — the ready queue, every interrupt queue and the
    /// immediate slot — but leaves the suspended frames (their actors are mid-turn):
    /// a resident's residual work on reclaim or destroy (spec §6.2).
    pub fn take_waiting(&mut self) -> Vec<Task<P>> {
        let mut out: Vec<Task<P>> = self.ready.drain(..).collect();
        for q in &mut self.interrupts {
            out.extend(q.drain(..));
        }
        out.extend(self.immediate.take());
        out
    }

    /// Takes the first `n` queued tasks from the front of the ready queue that `ok`
    /// accepts, all or nothing: fewer than `n` qualify → nothing moves (the offload's
    /// backlog hand-over, spec §6.1). Tasks `ok` refuses stay where they are.
    pub fn take_front(&mut self, n: usize, ok: impl Fn(&Task<P>) -> bool) -> Vec<Task<P>> {
        let picked: Vec<usize> = self
            .ready
            .iter()
            .enumerate()
            .filter(|(_, t)| ok(t))
            .map(|(i, _)| i)
            .take(n)
            .collect();
        if n == 0 || picked.len() < n {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(n);
        for i in picked.into_iter().rev() {
            out.extend(self.ready.remove(i));
        }
        out.reverse();
        out
    }

    /// How many tasks of the ready queue `ok` accepts.
    pub fn count_ready(&self, ok: impl Fn(&Task<P>) -> bool) -> usize {
        self.ready.iter().filter(|t| ok(t)).count()
    }

    /// Puts tasks taken by [`Self::take_front`] back at the front, in their order.
    pub fn put_front(&mut self, tasks: Vec<Task<P>>) {
        for t in tasks.into_iter().rev() {
            self.ready.push_front(t);
        }
    }

    /// A copy of the whole state for observers.
    pub fn snapshot(&self) -> Snapshot {
        let view = |t: &Task<P>| TaskView::from(&t.meta);
        Snapshot {
            running: self.running.as_ref().map(TaskView::from),
            immediate: self.immediate.as_ref().map(view),
            ready: self.ready.iter().map(view).collect(),
            interrupts: std::array::from_fn(|i| self.interrupts[i].iter().map(view).collect()),
            stack: self.stack.iter().map(|(t, _)| view(t)).collect(),
            max_frames: MAX_FRAMES,
            preempt_armed: self.preempt_armed,
            stats: self.stats.clone(),
        }
    }
}

fn meta(id: u64, class: Class, kind: Kind) -> Meta {
    Meta {
        id,
        class,
        kind,
        preempt_count: 0,
        last_preempt_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type C = Core<&'static str, &'static str>;

    fn now() -> Instant {
        Instant::now()
    }

    /// Starts the next task and returns its payload and whether it was a resume.
    fn run_next(c: &mut C) -> (&'static str, bool) {
        match c.pick_next().expect("a task to run") {
            Pick::Start(t) => (t.payload, false),
            Pick::Resume(t, _) => (t.payload, true),
        }
    }

    /// Makes `payload` (already running) yield with its preemption checks.
    fn yield_now(c: &mut C, payload: &'static str, t: Instant) {
        assert!(c.safe_point(false, t), "{payload} should yield");
        c.suspend(payload, "llm", t);
    }

    #[test]
    fn effective_level_promotion_is_capped() {
        let m = |l, n| Meta {
            id: 1,
            class: Class::Interrupt(l),
            kind: Kind::Input,
            preempt_count: n,
            last_preempt_at: None,
        };
        assert_eq!([0, 1, 2, 99].map(|n| m(Level::L1, n).effective()), [1, 2, 3, 3]);
        assert_eq!(m(Level::L3, 99).effective(), 4);
        assert_eq!(meta(1, Class::Queued, Kind::Input).effective(), 0);
    }

    #[test]
    fn idle_interrupt_is_queued_not_lost() {
        let mut c = C::default();
        let r = c.register_interrupt("i", Level::L4, Kind::Input, now());
        assert!(!r.preempts);
        assert_eq!(r.queued_because, Some(QueuedBecause::Idle));
        assert_eq!(run_next(&mut c), ("i", false));
    }

    #[test]
    fn queued_task_is_preempted_by_any_interrupt_but_queued_input_never_preempts() {
        let mut c = C::default();
        c.enqueue("a", Kind::Input).unwrap();
        run_next(&mut c);
        c.enqueue("b", Kind::Input).unwrap();
        assert!(!c.safe_point(false, now()), "a queued input never preempts");
        let r = c.register_interrupt("x", Level::L1, Kind::Input, now());
        assert!(r.preempts, "even L1 preempts a queued task");
        assert!(c.safe_point(false, now()));
        assert!(!c.safe_point(true, now()), "consolidation tasks never yield");
    }

    #[test]
    fn lower_or_equal_does_not_preempt() {
        let mut c = C::default();
        c.register_interrupt("run", Level::L3, Kind::Input, now());
        run_next(&mut c);
        for l in [Level::L3, Level::L1] {
            let r = c.register_interrupt("x", l, Kind::Input, now());
            assert!(!r.preempts);
            assert_eq!(r.queued_because, Some(QueuedBecause::LevelInsufficient));
        }
        assert!(!c.safe_point(false, now()));
        let s = c.snapshot();
        assert_eq!(s.interrupts[0].len() + s.interrupts[2].len(), 2);
    }

    #[test]
    fn nested_preemption_resumes_lifo() {
        let mut c = C::default();
        let t = now();
        c.enqueue("A", Kind::Input).unwrap();
        run_next(&mut c);
        assert!(c.register_interrupt("B", Level::L2, Kind::Input, t).preempts);
        yield_now(&mut c, "A", t);
        assert_eq!(c.snapshot().stack.len(), 1);
        assert_eq!(run_next(&mut c), ("B", false));
        assert!(c.register_interrupt("C", Level::L3, Kind::Input, t).preempts);
        yield_now(&mut c, "B", t);
        assert_eq!(c.snapshot().stack.len(), 2);
        assert_eq!(run_next(&mut c), ("C", false));
        c.finish();
        assert_eq!(run_next(&mut c), ("B", true));
        c.finish();
        assert_eq!(run_next(&mut c), ("A", true));
        c.finish();
        assert!(c.is_idle());
        let s = c.stats();
        assert_eq!((s.suspended, s.resumed, s.executed), (2, 2, 3));
    }

    fn push_frame(c: &mut C, payload: &'static str, level: Level, preempt_count: u32) {
        let id = c.next_id();
        let meta = Meta {
            id,
            class: Class::Interrupt(level),
            kind: Kind::Input,
            preempt_count,
            last_preempt_at: None,
        };
        c.stack.push((Task { meta, payload }, "llm"));
    }

    #[test]
    fn only_the_stack_top_competes() {
        let mut c = C::default();
        push_frame(&mut c, "deep-L3", Level::L3, 0);
        push_frame(&mut c, "top-L2", Level::L2, 0);
        assert_eq!(
            run_next(&mut c),
            ("top-L2", true),
            "the top, not the highest, is resumed"
        );
    }

    #[test]
    fn promotion_is_visible_in_selection() {
        let mut c = C::default();
        push_frame(&mut c, "top", Level::L1, 1); // effective 2
        c.register_interrupt("q2", Level::L2, Kind::Input, now());
        assert_eq!(run_next(&mut c), ("top", true), "ties go to the stack top");
        c.finish();
        let mut c = C::default();
        push_frame(&mut c, "top", Level::L1, 1);
        c.register_interrupt("q3", Level::L3, Kind::Input, now());
        assert_eq!(run_next(&mut c), ("q3", false), "a strictly higher head wins");
    }

    #[test]
    fn cooldown_blocks_even_l4_then_rearm_after_expiry() {
        let mut c = C::default();
        let t0 = now();
        c.enqueue("A", Kind::Input).unwrap();
        run_next(&mut c);
        assert!(c.register_interrupt("B", Level::L1, Kind::Input, t0).preempts);
        yield_now(&mut c, "A", t0);
        run_next(&mut c); // B
        c.finish();
        assert_eq!(run_next(&mut c), ("A", true)); // A resumes, still in cooldown
        let r = c.register_interrupt("K", Level::L4, Kind::SelfMsg, t0 + Duration::from_millis(500));
        assert!(!r.preempts);
        assert_eq!(r.queued_because, Some(QueuedBecause::Cooldown));
        assert!(!c.safe_point(false, t0 + Duration::from_secs(1)), "still cooling down");
        let later = t0 + PREEMPT_COOLDOWN + Duration::from_millis(1);
        assert!(
            c.safe_point(false, later),
            "re-armed at the first safe point after expiry"
        );
        assert!(c.safe_point(false, later), "still granted, not re-armed twice");
        let s = c.snapshot();
        assert_eq!(s.immediate.as_ref().map(|t| t.id), Some(r.id));
        assert!(s.interrupts[3].is_empty(), "moved, not duplicated");
        assert_eq!(s.stats.preempts_by_level[3], 1, "counted once");
    }

    #[test]
    fn same_level_second_preempter_is_queued_not_counted() {
        let mut c = C::default();
        c.enqueue("A", Kind::Input).unwrap();
        run_next(&mut c);
        assert!(c.register_interrupt("X", Level::L2, Kind::Input, now()).preempts);
        let r = c.register_interrupt("Y", Level::L2, Kind::Input, now());
        assert!(!r.preempts);
        assert_eq!(r.queued_because, Some(QueuedBecause::ImmediateTaken));
        let s = c.snapshot();
        assert_eq!(s.stats.preempts_by_level[1], 1);
        assert_eq!(s.interrupts[1].len(), 1);
        // A stronger one takes the slot and the weaker goes back to its queue.
        assert!(c.register_interrupt("Z", Level::L3, Kind::Input, now()).preempts);
        let s = c.snapshot();
        assert_eq!(s.interrupts[1].len(), 2);
        assert_eq!(s.immediate.map(|t| t.level), Some(Some(Level::L3)));
    }

    #[test]
    fn critical_section_defers_preemption() {
        let mut c = C::default();
        c.enqueue("consolidation", Kind::SelfMsg).unwrap();
        run_next(&mut c);
        c.set_critical(true);
        let r = c.register_interrupt("X", Level::L4, Kind::Input, now());
        assert_eq!(r.queued_because, Some(QueuedBecause::Critical));
        assert!(!c.safe_point(false, now()));
        c.set_critical(false);
        assert!(c.safe_point(false, now()), "re-armed once the critical section ends");
    }

    #[test]
    fn depth_cap_blocks_suspension_but_never_drops_a_frame() {
        let mut c = C::default();
        let t = now();
        c.enqueue("q", Kind::Input).unwrap();
        run_next(&mut c);
        for (name, level) in [
            ("l1", Level::L1),
            ("l2", Level::L2),
            ("l3", Level::L3),
            ("l4", Level::L4),
        ] {
            let running = c.running().unwrap().id;
            assert!(c.register_interrupt(name, level, Kind::Input, t).preempts, "{name}");
            c.suspend("prev", "llm", t);
            assert_ne!(c.running().map(|r| r.id), Some(running));
            run_next(&mut c);
        }
        assert_eq!(c.snapshot().stack.len(), 4);
        assert!(!c.can_suspend());
        c.suspend("forced", "llm", t);
        assert_eq!(c.snapshot().stack.len(), 5, "kept");
        assert_eq!(c.stats().rejected, 1, "but counted");
    }

    #[test]
    fn stop_cancels_exactly_the_tasks_waiting_at_that_moment() {
        let mut c = C::default();
        c.enqueue("running", Kind::Input).unwrap();
        let running = match c.pick_next().unwrap() {
            Pick::Start(t) => t.meta.id,
            _ => unreachable!(),
        };
        let b = c.enqueue("b", Kind::Input).unwrap();
        let d = c.enqueue("d", Kind::Input).unwrap();
        assert_eq!(c.arm_stop(true), 2);
        assert_eq!(c.arm_stop(true), 2, "a second stop takes the max, not the sum");
        let later = c.enqueue("later", Kind::Input).unwrap();
        assert!(c.take_stop(running), "the running task's cancelled call ends it");
        assert!(!c.take_stop(running), "consumed");
        c.finish();
        assert!(c.consume_cancel(b) && c.consume_cancel(d));
        assert!(!c.consume_cancel(later), "inputs after the stop are unaffected");
    }

    #[test]
    fn a_plain_stop_ends_the_running_task_and_leaves_the_queue() {
        let mut c = C::default();
        c.enqueue("running", Kind::Input).unwrap();
        let running = match c.pick_next().unwrap() {
            Pick::Start(t) => t.meta.id,
            _ => unreachable!(),
        };
        let waiting = c.enqueue("waiting", Kind::Input).unwrap();
        assert_eq!(c.arm_stop(false), 0);
        assert!(c.take_stop(running));
        c.finish();
        assert!(!c.consume_cancel(waiting), "the queued input runs");
    }

    #[test]
    fn stop_while_idle_does_not_end_a_later_task() {
        let mut c = C::default();
        assert_eq!(c.arm_stop(true), 0);
        let id = c.enqueue("x", Kind::Input).unwrap();
        run_next(&mut c);
        assert!(!c.take_stop(id), "a preemption of this task stays a preemption");
    }

    #[test]
    fn full_queues() {
        let mut c = C::new(2);
        c.enqueue("a", Kind::Input).unwrap();
        c.enqueue("b", Kind::Input).unwrap();
        assert_eq!(c.enqueue("c", Kind::Input), Err("c"));
        c.register_interrupt("i1", Level::L1, Kind::Input, now());
        c.register_interrupt("i3", Level::L3, Kind::Input, now());
        let r = c.register_interrupt("i2", Level::L2, Kind::Input, now());
        assert_eq!(
            r.dropped.map(|t| t.payload),
            Some("i1"),
            "oldest of the lowest level goes"
        );
        assert_eq!(c.stats().rejected, 2);
        let drained: Vec<_> = c.drain().into_iter().map(|t| t.payload).collect();
        assert_eq!(drained, ["a", "b", "i2", "i3"]);
    }

    #[test]
    fn residual_work_is_everything_waiting_but_not_the_suspended_frames() {
        let mut c: Core<&str, ()> = Core::default();
        let t0 = Instant::now();
        c.enqueue("running", Kind::Input).unwrap();
        assert!(matches!(c.pick_next(), Some(Pick::Start(_))));
        let r = c.register_interrupt("urgent", Level::L2, Kind::Input, t0);
        assert!(r.preempts);
        assert!(c.safe_point(false, t0));
        c.suspend("running-frame", (), t0);
        c.enqueue("queued", Kind::Input).unwrap();
        c.register_interrupt("later", Level::L1, Kind::SelfMsg, t0);
        let taken: Vec<&str> = c.take_waiting().into_iter().map(|t| t.payload).collect();
        assert_eq!(taken, ["queued", "later", "urgent"]);
        assert_eq!(c.snapshot().stack.len(), 1, "the suspended frame stays");
    }

    #[test]
    fn the_front_hand_over_is_all_or_nothing_and_goes_back_in_order() {
        let mut c: Core<&str, ()> = Core::default();
        for p in ["a", "self", "b", "c"] {
            let kind = if p == "self" { Kind::SelfMsg } else { Kind::Input };
            c.enqueue(p, kind).unwrap();
        }
        let inputs = |t: &Task<&str>| t.meta.kind == Kind::Input;
        assert!(c.take_front(4, inputs).is_empty(), "only three qualify");
        assert_eq!(c.snapshot().ready.len(), 4, "nothing moved");
        let got: Vec<&str> = c.take_front(2, inputs).into_iter().map(|t| t.payload).collect();
        assert_eq!(got, ["a", "b"]);
        let rest: Vec<u64> = c.snapshot().ready.iter().map(|t| t.id).collect();
        assert_eq!(rest, [2, 4]);
        let back = c.take_front(1, inputs);
        c.put_front(back);
        let order: Vec<u64> = c.snapshot().ready.iter().map(|t| t.id).collect();
        assert_eq!(order, [4, 2], "put back at the front");
    }
}
