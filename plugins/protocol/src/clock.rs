//! The kernel's clock as a plugin sees it (issue 28, "time you can drive").
//!
//! The kernel has one clock. In production it is the wall clock; with `homed
//! --virtual-clock` it is virtual and moves only when `POST /api/v1/clock/advance` moves
//! it. A plugin that keeps its own time — a timer sleeping on `Instant`, a note stamped
//! from `SystemTime` — does not move with it: a month's advance fires none of its
//! reminders, and its stamps are wall time beside the kernel's virtual ones. So the
//! kernel tells plugins its time:
//!
//! * in the handshake, [`ClockInfo`]: the clock's mode and the kernel's now;
//! * on a virtual clock, the request `clock.set` ([`ClockSet`]) when an advance starts,
//!   when it ends, and at every moment a plugin said it has something due. The plugin
//!   answers [`ClockAck`] once everything due by then has run (its reminders injected),
//!   naming when it is due next; the kernel's advance stops at that moment. So a
//!   reminder due inside an advanced span fires at the simulated moment it is due, and
//!   the advance answers only after it did.
//!
//! Only plugins that declare [`FEATURE`] in their handshake answer get `clock.set`: an
//! older plugin would answer "unknown method" to every advance. On the wall clock
//! nothing is sent after the handshake (the advance is refused there).
//!
//! [`Clock`] is the plugin's side, for the Rust SDK ([`crate::sdk::Plugin::clock`]):
//! `now_ms()` reads the kernel's time, and an [`Alarm`] waits until a kernel time — on
//! a virtual clock it wakes only when the kernel's `clock.set` reaches that time (never
//! by the wall clock ticking under it), on the wall clock when the time comes.
//!
//! Why the plugin answers with its next due time instead of the kernel sending the
//! time at every stop of an advance: a year's advance stops at every hourly heartbeat
//! (8,760 stops); a plugin with nothing due costs two round trips per advance instead
//! of one per stop, and a plugin with a reminder gets a stop at the reminder's own
//! moment, not at the next heartbeat after it.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The handshake feature a plugin declares when it follows the kernel's clock (it then
/// gets `clock.set`).
pub const FEATURE: &str = "clock";

/// Method of [`ClockSet`] (kernel → plugin).
pub const METHOD: &str = "clock.set";

/// How long a plugin's [`Clock::settle`] waits for its own alarms before it answers
/// anyway ([`ClockAck::unsettled`]); the kernel waits a little longer for the answer.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(8);

/// On the wall clock, the longest an [`Alarm`] sleeps before it looks at the time again
/// (a changed system time is noticed within this).
const WALL_RECHECK: Duration = Duration::from_secs(30);

/// Whether the kernel's clock is the machine's or driven.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockMode {
    /// The system time; `clock.set` never comes.
    #[default]
    Wall,
    /// Driven by `POST /api/v1/clock/advance`; time moves for the plugin at `clock.set`.
    Virtual,
}

/// The kernel's clock at the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockInfo {
    pub mode: ClockMode,
    /// The kernel's now, Unix milliseconds.
    pub now_ms: i64,
}

/// `clock.set`: the kernel's clock reached `now_ms` (Unix milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSet {
    pub now_ms: i64,
}

/// The answer to `clock.set`, sent once everything due by then has run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockAck {
    /// The next kernel time the plugin has something due (Unix ms); `null`: nothing.
    #[serde(default)]
    pub next_ms: Option<i64>,
    /// How many of the plugin's waits came due at this time (0: nothing ran).
    #[serde(default)]
    pub due: u32,
    /// The plugin stopped waiting for its own work ([`SETTLE_LIMIT`]) before it was
    /// done: what came due may still be running.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsettled: bool,
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The kernel's clock in a plugin. Cheap to clone (all clones are one clock). Until the
/// handshake (and in a plugin run outside the kernel) it is the wall clock.
#[derive(Clone, Default)]
pub struct Clock {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled on every change a waiter may be waiting for: the time set, an alarm
    /// poked, an alarm parked or gone.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    mode: ClockMode,
    /// Kernel time minus this process's system time (virtual only).
    offset_ms: i64,
    /// Virtual: the latest time the kernel set. What is due is due by this time, never
    /// by the wall clock ticking under the virtual one.
    reached_ms: i64,
    alarms: BTreeMap<u64, Slot>,
    next_alarm: u64,
    /// Waits that came due, counted since the clock was made (a settle reports the
    /// difference).
    due: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its thread is doing what came due (or what it was poked for).
    Running,
    /// Parked until the time (`None`: until poked).
    Waiting(Option<i64>),
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    phase: Phase,
    poked: bool,
}

impl State {
    fn now_ms(&self) -> i64 {
        match self.mode {
            ClockMode::Wall => wall_ms(),
            ClockMode::Virtual => wall_ms() + self.offset_ms,
        }
    }

    fn reached_ms(&self) -> i64 {
        match self.mode {
            ClockMode::Wall => wall_ms(),
            ClockMode::Virtual => self.reached_ms,
        }
    }

    fn is_due(&self, at: i64) -> bool {
        at <= self.reached_ms()
    }

    /// The kernel says its time is `now_ms`: time never goes back (a late `clock.set`
    /// is ignored), and the clock ticks on from it with the system time.
    fn set(&mut self, now_ms: i64) {
        if self.mode == ClockMode::Virtual {
            self.reached_ms = self.reached_ms.max(now_ms);
            self.offset_ms = self.offset_ms.max(now_ms - wall_ms());
        }
    }

    /// Every alarm parked, none poked, none due: what came due has run.
    fn quiet(&self) -> bool {
        self.alarms.values().all(|s| {
            !s.poked
                && match s.phase {
                    Phase::Running => false,
                    Phase::Waiting(None) => true,
                    Phase::Waiting(Some(at)) => !self.is_due(at),
                }
        })
    }

    /// The earliest time an alarm waits for.
    fn next_ms(&self) -> Option<i64> {
        self.alarms
            .values()
            .filter_map(|s| match s.phase {
                Phase::Waiting(at) => at,
                Phase::Running => None,
            })
            .min()
    }
}

impl Clock {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the kernel's clock from the handshake (the SDK does this; tests may too).
    pub fn adopt(&self, info: ClockInfo) {
        let mut st = self.lock();
        st.mode = info.mode;
        match info.mode {
            ClockMode::Wall => st.offset_ms = 0,
            ClockMode::Virtual => {
                st.offset_ms = info.now_ms - wall_ms();
                st.reached_ms = info.now_ms;
            }
        }
        drop(st);
        self.shared.changed.notify_all();
    }

    /// Unix milliseconds now on the kernel's clock: what to stamp records with. (On a
    /// virtual clock it ticks with the system time between the kernel's `clock.set`s,
    /// as the kernel's own clock does.)
    pub fn now_ms(&self) -> i64 {
        self.lock().now_ms()
    }

    /// Whether the kernel's clock is virtual.
    pub fn is_virtual(&self) -> bool {
        self.lock().mode == ClockMode::Virtual
    }

    /// How far time has come for what is due: on a virtual clock the last time the
    /// kernel set (a reminder at a later moment waits for the advance that reaches it),
    /// on the wall clock now.
    pub fn reached_ms(&self) -> i64 {
        self.lock().reached_ms()
    }

    /// A new alarm: one thread's wait for a kernel time. While it exists, `clock.set`
    /// is answered only once it is parked with nothing due — from its creation, so
    /// make it where its thread starts waiting soon (a `clock.set` before its first
    /// wait waits for that wait: what it will wait for is not known before).
    pub fn alarm(&self) -> Alarm {
        let mut st = self.lock();
        st.next_alarm += 1;
        let id = st.next_alarm;
        st.alarms.insert(
            id,
            Slot {
                phase: Phase::Running,
                poked: false,
            },
        );
        Alarm {
            clock: self.clone(),
            id,
        }
    }

    /// The kernel's `clock.set`: moves the clock to `now_ms`, wakes the alarms due by
    /// then and waits (at most `limit`) until each is parked again with nothing due;
    /// answers when the next is due. The SDK runs it on a worker thread and sends the
    /// answer.
    pub fn settle(&self, now_ms: i64, limit: Duration) -> ClockAck {
        let deadline = Instant::now() + limit;
        let mut st = self.lock();
        st.set(now_ms);
        let due_before = st.due;
        self.shared.changed.notify_all();
        let mut unsettled = false;
        while !st.quiet() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                unsettled = true;
                break;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        ClockAck {
            next_ms: st.next_ms(),
            due: st.due.wrapping_sub(due_before),
            unsettled,
        }
    }
}

/// Why [`Alarm::wait_until`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The time waited for has come.
    Due,
    /// [`Alarm::poke`]: something changed (a timer set or cancelled); look again.
    Poked,
}

/// One thread's wait for a kernel time (see [`Clock::alarm`]). The thread that owns it
/// calls [`Alarm::wait_until`]; any thread may [`Alarm::poke`] it. Dropping it takes it
/// off the clock.
pub struct Alarm {
    clock: Clock,
    id: u64,
}

impl Alarm {
    /// Parks until the kernel's clock reaches `at` (Unix ms; `None`: no time, only a
    /// poke wakes it) or until poked. Returns at once when `at` has already come. On a
    /// virtual clock only `clock.set` moves time; on the wall clock the system time
    /// does. Between a return and the next call the alarm counts as running: a
    /// `clock.set` waits for it.
    pub fn wait_until(&self, at: Option<i64>) -> Wake {
        let shared = &self.clock.shared;
        let mut st = self.clock.lock();
        loop {
            let due = at.is_some_and(|at| st.is_due(at));
            let mode = st.mode;
            let now = st.now_ms();
            let Some(slot) = st.alarms.get_mut(&self.id) else {
                return Wake::Poked;
            };
            if slot.poked {
                slot.poked = false;
                slot.phase = Phase::Running;
                return Wake::Poked;
            }
            if due {
                slot.phase = Phase::Running;
                st.due = st.due.wrapping_add(1);
                return Wake::Due;
            }
            // Signal only the change into waiting: waking every parked alarm at every
            // spurious wake-up would have them wake each other forever.
            if slot.phase != Phase::Waiting(at) {
                slot.phase = Phase::Waiting(at);
                shared.changed.notify_all();
            }
            st = match (mode, at) {
                (ClockMode::Wall, Some(at)) => {
                    let left = Duration::from_millis((at - now).clamp(1, WALL_RECHECK.as_millis() as i64) as u64);
                    shared
                        .changed
                        .wait_timeout(st, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                _ => shared.changed.wait(st).unwrap_or_else(PoisonError::into_inner),
            };
        }
    }

    /// Wakes the alarm's thread (at once, or at its next wait): something it waits for
    /// changed.
    pub fn poke(&self) {
        if let Some(slot) = self.clock.lock().alarms.get_mut(&self.id) {
            slot.poked = true;
        }
        self.clock.shared.changed.notify_all();
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        self.clock.lock().alarms.remove(&self.id);
        self.clock.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    const T0: i64 = 1_000_000_000_000; // 2001-09-09, far from any wall clock
    const HOUR: i64 = 3_600_000;

    fn virtual_clock() -> Clock {
        let c = Clock::default();
        c.adopt(ClockInfo {
            mode: ClockMode::Virtual,
            now_ms: T0,
        });
        c
    }

    #[test]
    fn the_wire_shapes() {
        let info = ClockInfo {
            mode: ClockMode::Virtual,
            now_ms: 5,
        };
        assert_eq!(
            serde_json::to_value(info).unwrap(),
            serde_json::json!({"mode": "virtual", "now_ms": 5})
        );
        let ack = ClockAck {
            next_ms: None,
            due: 0,
            unsettled: false,
        };
        assert_eq!(
            serde_json::to_value(ack).unwrap(),
            serde_json::json!({"next_ms": null, "due": 0})
        );
        let back: ClockAck = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(back, ClockAck::default());
    }

    #[test]
    fn a_virtual_clock_reads_the_kernels_time_and_never_goes_back() {
        let c = virtual_clock();
        assert!(c.is_virtual());
        assert_eq!(c.reached_ms(), T0);
        assert!((c.now_ms() - T0).abs() < 5_000, "{}", c.now_ms());
        assert_eq!(c.settle(T0 + HOUR, Duration::ZERO), ClockAck::default());
        assert_eq!(c.reached_ms(), T0 + HOUR);
        assert!(c.now_ms() >= T0 + HOUR);
        // A late `clock.set` of an earlier time changes nothing.
        c.settle(T0, Duration::ZERO);
        assert_eq!(c.reached_ms(), T0 + HOUR);
        assert!(c.now_ms() >= T0 + HOUR);
        // The default is the wall clock.
        let wall = Clock::default();
        assert!(!wall.is_virtual());
        assert!((wall.now_ms() - wall_ms()).abs() < 5_000);
    }

    /// The core of determinism: a `clock.set` is answered only after every alarm due by
    /// then has woken, done its work and parked again, and the answer names the next
    /// time one waits for; the wall clock ticking under a virtual one wakes nothing.
    #[test]
    fn settle_waits_for_what_came_due_and_names_the_next_time() {
        let c = virtual_clock();
        let alarm = Arc::new(c.alarm());
        let (fired_tx, fired) = mpsc::channel::<i64>();
        let (clock, own) = (c.clone(), alarm.clone());
        let worker = std::thread::spawn(move || {
            let alarm = own;
            // A reminder an hour ahead, then one every hour: two, then nothing.
            let mut next = Some(T0 + HOUR);
            let mut left = 2;
            loop {
                match alarm.wait_until(next) {
                    Wake::Poked => return,
                    Wake::Due => {
                        // Work takes wall time: the settle must wait for it.
                        std::thread::sleep(Duration::from_millis(30));
                        fired_tx.send(clock.reached_ms()).unwrap();
                        left -= 1;
                        next = (left > 0).then(|| next.unwrap() + HOUR);
                    }
                }
            }
        });
        // Parked at its first time (the settle at the start of an advance learns it).
        let ack = c.settle(T0, Duration::from_secs(10));
        assert_eq!(
            ack,
            ClockAck {
                next_ms: Some(T0 + HOUR),
                due: 0,
                unsettled: false
            }
        );
        std::thread::sleep(Duration::from_millis(50));
        assert!(fired.try_recv().is_err(), "the wall clock wakes nothing");

        let ack = c.settle(T0 + HOUR, Duration::from_secs(10));
        assert_eq!(fired.try_recv(), Ok(T0 + HOUR), "ran before the answer");
        assert_eq!(
            ack,
            ClockAck {
                next_ms: Some(T0 + 2 * HOUR),
                due: 1,
                unsettled: false
            }
        );
        let ack = c.settle(T0 + 3 * HOUR, Duration::from_secs(10));
        assert_eq!(fired.try_recv(), Ok(T0 + 3 * HOUR));
        assert_eq!((ack.next_ms, ack.due), (None, 1), "nothing left to wait for");
        alarm.poke();
        worker.join().unwrap();
    }

    #[test]
    fn a_poke_wakes_a_parked_alarm_and_a_busy_one_holds_the_answer() {
        let c = virtual_clock();
        let alarm = Arc::new(c.alarm());
        // A poke before the wait is not lost.
        alarm.poke();
        assert_eq!(alarm.wait_until(None), Wake::Poked);
        // Running (returned, not yet waiting again): a settle cannot finish...
        let ack = c.settle(T0, Duration::from_millis(50));
        assert!(ack.unsettled, "{ack:?}");
        // ...until it parks.
        let a = alarm.clone();
        let parked = std::thread::spawn(move || a.wait_until(Some(T0 + HOUR)));
        let ack = c.settle(T0, Duration::from_secs(10));
        assert_eq!((ack.next_ms, ack.unsettled), (Some(T0 + HOUR), false));
        alarm.poke();
        assert_eq!(parked.join().unwrap(), Wake::Poked);
        // A dropped alarm holds nothing.
        drop(Arc::try_unwrap(alarm).ok().unwrap());
        assert_eq!(c.settle(T0, Duration::ZERO), ClockAck::default());
    }

    #[test]
    fn on_the_wall_clock_an_alarm_wakes_when_its_time_comes() {
        let c = Clock::default();
        let alarm = c.alarm();
        let started = Instant::now();
        assert_eq!(alarm.wait_until(Some(c.now_ms() + 40)), Wake::Due);
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert_eq!(alarm.wait_until(Some(c.now_ms() - 1)), Wake::Due, "a past time at once");
    }
}
