//! The actor registry: live, lock-free counters for every kernel actor.
//!
//! Every actor in the supervision tree has one [`ActorStats`] entry, keyed by its
//! path in the tree (`kernel/config`). Senders and the actor's own host update the
//! counters with relaxed atomics; only observers (the HTTP API, the dashboard, the
//! SSE stream) read them, through [`Registry::snapshot`]. Nothing in the kernel makes
//! a decision based on these numbers, so relaxed ordering is enough: a snapshot may be
//! a few nanoseconds stale, never wrong for long.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;

use crate::control::SupervisorControl;

/// How many enqueue timestamps each actor remembers. The age of the oldest queued
/// message is exact while fewer messages than this are queued, and a lower bound
/// beyond that (the slot was reused by a newer message).
const RING: usize = 256;

/// CLOCK_MONOTONIC_COARSE in nanoseconds (vDSO, no syscall).
fn coarse_now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a Linux constant.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Lifecycle state of an actor, as shown in the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum ActorState {
    /// Declared or being started; no instance handles messages yet.
    Starting = 0,
    /// Running and idle (or between messages).
    Running = 1,
    /// Running and inside a handler right now.
    Busy = 2,
    /// Exited abnormally; its supervisor waits out the backoff before restarting it.
    Backoff = 3,
    /// Stopped on purpose (shutdown, or a normal exit that is not restarted).
    Stopped = 4,
    /// Exited and will not be restarted (policy, or its supervisor gave up).
    Failed = 5,
}

impl ActorState {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Starting,
            1 => Self::Running,
            2 => Self::Busy,
            3 => Self::Backoff,
            4 => Self::Stopped,
            _ => Self::Failed,
        }
    }

    /// The lower-case name used in JSON and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Busy => "busy",
            Self::Backoff => "backoff",
            Self::Stopped => "stopped",
            Self::Failed => "failed",
        }
    }
}

/// Live counters of one actor. Shared by its tracked address (senders), its host
/// (the running instance) and the registry (observers).
pub struct ActorStats {
    /// Path in the supervision tree, e.g. `kernel/config`; stable across restarts.
    pub id: String,
    /// Path of the supervising parent; `None` for the root.
    pub parent: Option<String>,
    /// What the actor is (`supervisor`, `config`, ...), for grouping in the UI.
    pub kind: &'static str,
    /// Time base for all timestamps below (coarse-clock nanoseconds at registry creation).
    epoch: u64,
    state: AtomicU8,
    /// Messages accepted into the mailbox (monotonic).
    sent: AtomicU64,
    /// Messages taken out of the mailbox: handled, or discarded with a dead instance.
    taken: AtomicU64,
    /// Messages whose handler ran to completion (or panicked).
    handled: AtomicU64,
    /// Enqueue time (ns since epoch, +1 so that 0 means "unset") of message `n` at `n % RING`.
    ring: Box<[AtomicU64]>,
    /// Start of the current handler (ns since epoch, +1); 0 when idle.
    busy_since: AtomicU64,
    /// End of the current backoff wait (ns since epoch, +1); 0 when not waiting.
    backoff_until: AtomicU64,
    restarts: AtomicU64,
    /// Why the last instance exited; written only on exits, so a mutex is fine.
    last_exit: Mutex<Option<String>>,
}

impl ActorStats {
    fn new(id: String, parent: Option<String>, kind: &'static str, epoch: u64) -> Self {
        Self {
            id,
            parent,
            kind,
            epoch,
            state: AtomicU8::new(ActorState::Starting as u8),
            sent: AtomicU64::new(0),
            taken: AtomicU64::new(0),
            handled: AtomicU64::new(0),
            ring: (0..RING).map(|_| AtomicU64::new(0)).collect(),
            busy_since: AtomicU64::new(0),
            backoff_until: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            last_exit: Mutex::new(None),
        }
    }

    /// Nanoseconds since the registry's epoch, +1 (so 0 can mean "unset"). Uses the
    /// coarse monotonic clock: a few ns per read instead of ~20, at a resolution of a
    /// scheduler tick (1-4 ms), which is plenty for ages shown in milliseconds.
    #[inline]
    fn now_ns(&self) -> u64 {
        coarse_now_ns().saturating_sub(self.epoch) + 1
    }

    /// A sender is about to enqueue one message: count it and stamp its enqueue time.
    #[inline]
    pub(crate) fn on_send(&self) {
        let n = self.sent.fetch_add(1, Relaxed);
        self.ring[(n as usize) % RING].store(self.now_ns(), Relaxed);
    }

    /// A handler starts.
    #[inline]
    pub(crate) fn on_handle_start(&self) {
        self.taken.fetch_add(1, Relaxed);
        self.busy_since.store(self.now_ns(), Relaxed);
    }

    /// A handler returned (or panicked).
    #[inline]
    pub(crate) fn on_handle_end(&self) {
        self.busy_since.store(0, Relaxed);
        self.handled.fetch_add(1, Relaxed);
    }

    /// A new instance starts: whatever the previous instance left in its mailbox
    /// died with it, so the queue depth restarts from zero.
    pub(crate) fn on_new_instance(&self) {
        let sent = self.sent.load(Relaxed);
        self.taken.store(sent, Relaxed);
        self.busy_since.store(0, Relaxed);
        self.backoff_until.store(0, Relaxed);
    }

    pub(crate) fn set_state(&self, s: ActorState) {
        self.state.store(s as u8, Relaxed);
        if s != ActorState::Backoff {
            self.backoff_until.store(0, Relaxed);
        }
    }

    pub(crate) fn set_backoff(&self, delay: Duration) {
        self.backoff_until
            .store(self.now_ns() + delay.as_nanos() as u64, Relaxed);
        self.state.store(ActorState::Backoff as u8, Relaxed);
    }

    pub(crate) fn record_exit(&self, reason: &str) {
        *self.last_exit.lock() = Some(reason.to_owned());
    }

    pub(crate) fn inc_restarts(&self) -> u64 {
        self.restarts.fetch_add(1, Relaxed) + 1
    }

    /// Current state (without the busy refinement; see [`ActorSnapshot::state`]).
    pub fn state(&self) -> ActorState {
        ActorState::from_u8(self.state.load(Relaxed))
    }

    /// Restarts so far.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Relaxed)
    }

    /// Messages handled so far.
    pub fn handled(&self) -> u64 {
        self.handled.load(Relaxed)
    }

    /// Why the last instance exited, if one did.
    pub fn last_exit(&self) -> Option<String> {
        self.last_exit.lock().clone()
    }

    /// Reads all counters into a plain value for observers.
    pub fn snapshot(&self, stuck_after: Duration, restartable: bool) -> ActorSnapshot {
        let now = self.now_ns();
        let sent = self.sent.load(Relaxed);
        let taken = self.taken.load(Relaxed);
        let queued = sent.saturating_sub(taken);
        let oldest_queued_ms = if queued > 0 {
            let stamp = self.ring[(taken as usize) % RING].load(Relaxed);
            if stamp == 0 {
                0
            } else {
                now.saturating_sub(stamp) / 1_000_000
            }
        } else {
            0
        };
        let busy = self.busy_since.load(Relaxed);
        let busy_ms = if busy == 0 {
            0
        } else {
            now.saturating_sub(busy) / 1_000_000
        };
        let mut state = self.state();
        if state == ActorState::Running && busy != 0 {
            state = ActorState::Busy;
        }
        let until = self.backoff_until.load(Relaxed);
        let backoff_ms = if state == ActorState::Backoff && until > now {
            (until - now) / 1_000_000
        } else {
            0
        };
        ActorSnapshot {
            id: self.id.clone(),
            parent: self.parent.clone(),
            kind: self.kind,
            state,
            stuck: busy != 0 && Duration::from_millis(busy_ms) >= stuck_after,
            queued,
            handled: self.handled.load(Relaxed),
            oldest_queued_ms,
            busy_ms,
            restarts: self.restarts.load(Relaxed),
            last_exit: self.last_exit(),
            restartable,
            backoff_ms,
        }
    }
}

/// A point-in-time copy of one actor's counters, as served by the HTTP API.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ActorSnapshot {
    pub id: String,
    pub parent: Option<String>,
    pub kind: &'static str,
    pub state: ActorState,
    /// Inside one handler for longer than the configured stuck threshold.
    pub stuck: bool,
    pub queued: u64,
    pub handled: u64,
    pub oldest_queued_ms: u64,
    pub busy_ms: u64,
    pub restarts: u64,
    pub last_exit: Option<String>,
    /// Whether `POST /api/v1/actors/{id}/restart` can act on it (it has a supervisor).
    pub restartable: bool,
    /// Time left before the supervisor restarts it, while in `backoff`.
    pub backoff_ms: u64,
}

struct Entry {
    stats: Arc<ActorStats>,
    /// Set for supervisors: how the API reaches them to restart one of their children.
    control: Option<Arc<dyn SupervisorControl>>,
}

/// Why a registration was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("an actor with id `{0}` is already registered; give the child spec a unique name")]
    Duplicate(String),
    #[error(
        "invalid actor name `{0}`: use 1-64 characters of [a-z0-9_.-] (the path separator `/` is added by the tree)"
    )]
    InvalidName(String),
}

/// All actors of the daemon, in tree order.
pub struct Registry {
    epoch: u64,
    /// Keyed by path; insertion order is kept separately so the tree renders in start order.
    entries: RwLock<(BTreeMap<String, Entry>, Vec<String>)>,
    stuck_after_ms: AtomicU64,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new(Duration::from_secs(5))
    }
}

impl Registry {
    /// A registry whose actors are reported `stuck` after `stuck_after` in one handler.
    pub fn new(stuck_after: Duration) -> Self {
        Self {
            epoch: coarse_now_ns(),
            entries: RwLock::new((BTreeMap::new(), Vec::new())),
            stuck_after_ms: AtomicU64::new(stuck_after.as_millis() as u64),
        }
    }

    /// Changes the stuck threshold (a setting; takes effect at the next snapshot).
    pub fn set_stuck_after(&self, d: Duration) {
        self.stuck_after_ms.store(d.as_millis() as u64, Relaxed);
    }

    /// Validates one path segment of an actor id.
    pub fn check_name(name: &str) -> Result<(), RegistryError> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b));
        if ok {
            Ok(())
        } else {
            Err(RegistryError::InvalidName(name.to_owned()))
        }
    }

    /// Registers an actor at `parent/name` (or `name` for a root).
    pub fn register(
        &self,
        parent: Option<&str>,
        name: &str,
        kind: &'static str,
    ) -> Result<Arc<ActorStats>, RegistryError> {
        Self::check_name(name)?;
        let id = match parent {
            Some(p) => format!("{p}/{name}"),
            None => name.to_owned(),
        };
        let mut guard = self.entries.write();
        let (map, order) = &mut *guard;
        if map.contains_key(&id) {
            return Err(RegistryError::Duplicate(id));
        }
        let stats = Arc::new(ActorStats::new(id.clone(), parent.map(str::to_owned), kind, self.epoch));
        map.insert(
            id.clone(),
            Entry {
                stats: stats.clone(),
                control: None,
            },
        );
        // Keep children right after their parent's subtree so the list reads as a tree.
        let pos = match parent {
            Some(p) => {
                let prefix = format!("{p}/");
                order
                    .iter()
                    .rposition(|o| o == p || o.starts_with(&prefix))
                    .map_or(order.len(), |i| i + 1)
            }
            None => order.len(),
        };
        order.insert(pos, id);
        Ok(stats)
    }

    /// Makes a supervisor reachable for operator restarts of its children.
    pub fn set_control(&self, id: &str, control: Arc<dyn SupervisorControl>) {
        if let Some(e) = self.entries.write().0.get_mut(id) {
            e.control = Some(control);
        }
    }

    /// Removes an actor and its whole subtree (a dynamic child that was removed).
    pub fn unregister(&self, id: &str) {
        let mut guard = self.entries.write();
        let (map, order) = &mut *guard;
        let prefix = format!("{id}/");
        map.retain(|k, _| k != id && !k.starts_with(&prefix));
        order.retain(|k| k != id && !k.starts_with(&prefix));
    }

    /// The counters of one actor.
    pub fn get(&self, id: &str) -> Option<Arc<ActorStats>> {
        self.entries.read().0.get(id).map(|e| e.stats.clone())
    }

    /// The supervisor control of `id`'s parent, if `id` exists and has a parent.
    pub fn parent_control(&self, id: &str) -> Option<Arc<dyn SupervisorControl>> {
        let guard = self.entries.read();
        let parent = guard.0.get(id)?.stats.parent.clone()?;
        guard.0.get(&parent)?.control.clone()
    }

    /// Every actor, parents before children, siblings in start order.
    pub fn snapshot(&self) -> Vec<ActorSnapshot> {
        let stuck = Duration::from_millis(self.stuck_after_ms.load(Relaxed));
        let guard = self.entries.read();
        let (map, order) = &*guard;
        order
            .iter()
            .filter_map(|id| map.get(id))
            .map(|e| {
                let restartable = e
                    .stats
                    .parent
                    .as_ref()
                    .and_then(|p| map.get(p))
                    .is_some_and(|p| p.control.is_some());
                e.stats.snapshot(stuck, restartable)
            })
            .collect()
    }

    /// Number of registered actors.
    pub fn len(&self) -> usize {
        self.entries.read().1.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_depth_and_oldest_age() {
        let r = Registry::default();
        let s = r.register(None, "kernel", "supervisor").unwrap();
        s.set_state(ActorState::Running);
        s.on_send();
        s.on_send();
        std::thread::sleep(Duration::from_millis(20));
        let snap = s.snapshot(Duration::from_secs(5), false);
        assert_eq!(snap.queued, 2);
        assert!(snap.oldest_queued_ms >= 10, "{snap:?}");
        s.on_handle_start();
        let snap = s.snapshot(Duration::from_millis(0), false);
        assert_eq!(snap.queued, 1);
        assert_eq!(snap.state, ActorState::Busy);
        assert!(snap.stuck, "a zero threshold reports any busy actor as stuck");
        s.on_handle_end();
        let snap = s.snapshot(Duration::from_secs(5), false);
        assert_eq!((snap.handled, snap.state, snap.busy_ms), (1, ActorState::Running, 0));
        s.on_new_instance();
        assert_eq!(s.snapshot(Duration::from_secs(5), false).queued, 0);
    }

    #[test]
    fn tree_order_and_names() {
        let r = Registry::default();
        r.register(None, "kernel", "supervisor").unwrap();
        r.register(Some("kernel"), "a", "x").unwrap();
        r.register(Some("kernel/a"), "a1", "x").unwrap();
        r.register(Some("kernel"), "b", "x").unwrap();
        r.register(Some("kernel/a"), "a2", "x").unwrap();
        let ids: Vec<_> = r.snapshot().into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["kernel", "kernel/a", "kernel/a/a1", "kernel/a/a2", "kernel/b"]);
        assert!(matches!(
            r.register(Some("kernel"), "a", "x"),
            Err(RegistryError::Duplicate(_))
        ));
        assert!(r.register(Some("kernel"), "Bad/Name", "x").is_err());
        r.unregister("kernel/a");
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn backoff_is_visible() {
        let r = Registry::default();
        let s = r.register(None, "k", "x").unwrap();
        s.set_backoff(Duration::from_secs(3));
        let snap = s.snapshot(Duration::from_secs(5), false);
        assert_eq!(snap.state, ActorState::Backoff);
        assert!(snap.backoff_ms > 2000 && snap.backoff_ms <= 3000);
    }
}
