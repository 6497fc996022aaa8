//! The kernel's one clock: every timestamp the kernel writes and every heartbeat's
//! schedule read it, so time can be driven.
//!
//! Why one process-wide clock and not a handle threaded through every actor: the
//! timestamps are written deep inside stores (`memory.db`, `graph.db`, the inbox, the
//! text log, the bus) that are also used outside any actor (tests, `homed eval`), and a
//! daemon has exactly one notion of "now". The clock is read lock-free (one relaxed
//! atomic beside the system time).
//!
//! Two modes:
//!
//! * **wall** (production): `now_ms()` is the system time; heartbeats run on their
//!   own timers (actix intervals of their period).
//! * **virtual** (evals and tests, `homed --virtual-clock START`): `now_ms()` is the
//!   system time plus an offset that starts at `START − wall` and only grows when
//!   someone advances it ([`advance_to`]); heartbeats arm no timers, they run when the
//!   clock passes their next due time ([`Beats::advance`]). So a test moves a daemon
//!   through a simulated year in seconds, and every heartbeat round happens at the
//!   simulated moment its interval says, in a fixed order. Subprocess plugins that
//!   follow the clock are told its time the same way ([`Beats::follow`],
//!   `plugins::clock`): their reminders fire at the simulated moment they are due.
//!
//! Durations that bound an operation (timeouts, backoff, cooldowns) stay on
//! `Instant`: they measure the machine, not the simulated calendar.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use futures_util::future::LocalBoxFuture;

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
static VIRTUAL: AtomicBool = AtomicBool::new(false);

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Unix milliseconds now, on the kernel's clock (0 if the system clock is before 1970).
pub fn now_ms() -> i64 {
    wall_ms() + OFFSET_MS.load(Ordering::Relaxed)
}

/// [`now_ms`] as a `SystemTime` (for APIs that take one: the text log's rotation).
pub fn now_system() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_millis(now_ms().max(0) as u64)
}

/// Is the clock virtual (driven by [`advance_to`])?
pub fn is_virtual() -> bool {
    VIRTUAL.load(Ordering::Relaxed)
}

/// Makes the clock virtual, reading `at_ms` now. Called once, before the kernel
/// boots (`homed --virtual-clock`); tests of stores may call it too.
pub fn start_virtual(at_ms: i64) {
    OFFSET_MS.store(at_ms - wall_ms(), Ordering::Relaxed);
    VIRTUAL.store(true, Ordering::Relaxed);
}

/// The start of a virtual clock as `homed --virtual-clock` takes it: `now`, an RFC 3339
/// time (`2023-05-08T13:56:00Z`) or Unix seconds. Answers Unix ms.
pub fn parse_start(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("now") {
        return Ok(wall_ms());
    }
    if let Ok(secs) = s.parse::<i64>() {
        return Ok(secs.saturating_mul(1000));
    }
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .map_err(|e| {
            format!("{s:?} is not a time: give `now`, RFC 3339 (e.g. 2023-05-08T13:56:00Z) or Unix seconds ({e})")
        })
}

/// Why the clock cannot be moved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    #[error("the clock is the wall clock; start the daemon with --virtual-clock to drive time")]
    NotVirtual,
    #[error("time only moves forward: {to_ms} is before now ({now_ms})")]
    Backwards { to_ms: i64, now_ms: i64 },
}

/// Moves a virtual clock forward to `to_ms` (a time already passed is refused).
pub fn advance_to(to_ms: i64) -> Result<(), ClockError> {
    if !is_virtual() {
        return Err(ClockError::NotVirtual);
    }
    let now = now_ms();
    if to_ms < now {
        return Err(ClockError::Backwards { to_ms, now_ms: now });
    }
    OFFSET_MS.fetch_add(to_ms - now, Ordering::Relaxed);
    Ok(())
}

/// Moves a virtual clock forward to `to_ms`, or leaves it where it is when it has
/// already passed that (the wall clock ticks under a virtual one: reading "now" and then
/// moving to it could find it a millisecond in the past — a race `advance_to` would
/// refuse as going backwards).
fn advance_to_at_least(to_ms: i64) -> Result<(), ClockError> {
    if !is_virtual() {
        return Err(ClockError::NotVirtual);
    }
    let now = now_ms();
    OFFSET_MS.fetch_add(to_ms.max(now) - now, Ordering::Relaxed);
    Ok(())
}

/// A heartbeat as the clock drives it: asked with the current time, it runs its round
/// when that round is due (and waits for it), then answers when it is due next.
pub type DueFn = std::sync::Arc<dyn Fn(i64) -> LocalBoxFuture<'static, Due> + Send + Sync>;

/// A heartbeat's answer to the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// A round ran now.
    pub ran: bool,
    /// The round failed (its error is in the log and the heartbeat's status).
    pub failed: bool,
    /// When it is due next (Unix ms, on this clock).
    pub next_ms: i64,
}

/// The heartbeats a virtual clock drives, in the order they run at one moment
/// (distill before the rules, the rules before archive, archive before merge and
/// review: the order in which material flows from the window to the graph), and the
/// followers told its time before them.
#[derive(Clone, Default)]
pub struct Beats {
    beats: Vec<Beat>,
    /// Held for a whole advance: two callers moving the clock at once would interleave
    /// their stops (one finding the other's time already passed).
    one_at_a_time: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// What an advance did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Advanced {
    /// The clock after the advance (Unix ms).
    pub now_ms: i64,
    /// Rounds run, per heartbeat (every check that found it due).
    pub rounds: std::collections::BTreeMap<&'static str, u64>,
    /// Rounds that failed (their error is in the log and the heartbeat's status).
    pub failed: u64,
}

/// One participant of an advance.
#[derive(Clone)]
struct Beat {
    name: &'static str,
    due: DueFn,
    /// A follower ([`Beats::follow`]): also told the time where an advance ends.
    follower: bool,
}

impl Beats {
    pub fn add(&mut self, name: &'static str, due: DueFn) {
        self.beats.push(Beat {
            name,
            due,
            follower: false,
        });
    }

    /// Adds a follower of the clock: asked like a heartbeat (when an advance starts,
    /// and at every moment it said it is due next), and also where an advance ends, so
    /// what it stamps afterwards has the clock's new time. Followers are asked before
    /// the heartbeats at a moment, in the order added: a reminder due at a moment is
    /// queued before that moment's upkeep runs. (The subprocess plugins, which keep
    /// their own timers: `plugins::clock`.)
    pub fn follow(&mut self, name: &'static str, due: DueFn) {
        let at = self.beats.iter().take_while(|b| b.follower).count();
        self.beats.insert(
            at,
            Beat {
                name,
                due,
                follower: true,
            },
        );
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.beats.iter().map(|b| b.name).collect()
    }

    /// Advances the virtual clock to `to_ms`, stopping at every moment a heartbeat or a
    /// follower is due and running the due ones there (in order, each waited for), so
    /// a long advance is the same sequence of rounds a daemon living through it would
    /// run; the followers are told the end too. `progress` is called after every stop
    /// with the time reached.
    pub async fn advance(&self, to_ms: i64, mut progress: impl FnMut(i64)) -> Result<Advanced, ClockError> {
        if !is_virtual() {
            return Err(ClockError::NotVirtual);
        }
        let _one_at_a_time = self.one_at_a_time.lock().await;
        let start = now_ms();
        if to_ms < start {
            return Err(ClockError::Backwards { to_ms, now_ms: start });
        }
        let mut out = Advanced::default();
        // Each heartbeat's next due time (asking at `start` runs what is due already).
        let mut next = Vec::with_capacity(self.beats.len());
        // When each was last asked: a follower already told the end is not told again.
        let mut told = vec![start; self.beats.len()];
        for b in &self.beats {
            next.push(self.check(b, start, &mut out).await);
        }
        while let Some(&t) = next.iter().filter(|t| **t <= to_ms).min() {
            advance_to_at_least(t)?;
            let now = now_ms();
            for (i, b) in self.beats.iter().enumerate() {
                if next[i] <= now {
                    next[i] = self.check(b, now, &mut out).await;
                    told[i] = now;
                }
            }
            progress(now);
        }
        advance_to_at_least(to_ms)?;
        let end = now_ms();
        for (i, b) in self.beats.iter().enumerate() {
            if b.follower && told[i] < to_ms {
                self.check(b, end, &mut out).await;
            }
        }
        out.now_ms = end;
        Ok(out)
    }

    async fn check(&self, b: &Beat, now: i64, out: &mut Advanced) -> i64 {
        let d = (b.due)(now).await;
        if d.ran {
            *out.rounds.entry(b.name).or_default() += 1;
        }
        out.failed += u64::from(d.failed);
        // A heartbeat never makes the clock stop twice at one moment.
        d.next_ms.max(now + 1)
    }
}
