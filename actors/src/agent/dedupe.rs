//! The duplicate-input guard, as a plain state machine (no actix, no clock of its own).
//!
//! Events in: an input was [`seen`](DuplicateGuard::seen) (or re-tracked at a
//! [`replay`](DuplicateGuard::track)), and an admitted input
//! [`finished`](DuplicateGuard::finished) well or badly. Verdict out: admit (with a
//! [`Ticket`]) or [`Verdict::Duplicate`].
//!
//! An identical input (same source + text) is dropped only when it arrives within
//! [`WINDOW`] of the last identical one **and** that one is still queued or running, or
//! succeeded. Why: the guard exists to swallow re-deliveries (a channel plugin that
//! retries, a double click), not to punish a user who resends because the first
//! attempt failed. Upstream dropped those retries too (the key stayed "seen" whatever
//! the outcome), which is the defect this type fixes. Each hit refreshes the window, so
//! a flood of re-deliveries stays blocked.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long an identical input counts as a re-delivery (kernel spec §1.17).
pub const WINDOW: Duration = Duration::from_secs(10);

/// Above this many keys, the expired ones are swept on the next `seen`.
const SWEEP_ABOVE: usize = 4096;

/// An admitted input's claim on its key; hand it back in [`DuplicateGuard::finished`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    key: String,
    n: u64,
}

/// The guard's answer to an arriving input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Admit(Ticket),
    Duplicate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Queued or running, under ticket `n`.
    InFlight(u64),
    /// Answered.
    Succeeded,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    state: State,
    /// The last arrival of this key (admitted or dropped): the window runs from here.
    last: Instant,
}

#[derive(Debug, Default)]
pub struct DuplicateGuard {
    entries: HashMap<String, Entry>,
    next: u64,
    /// The next sweep happens above this many keys: twice what the last one left (at
    /// least [`SWEEP_ABOVE`]). Why: a burst of distinct inputs inside one window (a
    /// flooding plugin, a benchmark) keeps more than `SWEEP_ABOVE` keys alive, and
    /// sweeping on every arrival would cost a pass over all of them per input.
    sweep_at: usize,
}

fn key(source: &str, text: &str) -> String {
    format!("{source}|{text}")
}

impl DuplicateGuard {
    /// An input arrived: admit it (it is now in flight) or call it a duplicate.
    pub fn seen(&mut self, source: &str, text: &str, now: Instant) -> Verdict {
        if self.entries.len() > self.sweep_at.max(SWEEP_ABOVE) {
            self.entries
                .retain(|_, e| now.saturating_duration_since(e.last) < WINDOW);
            self.sweep_at = 2 * self.entries.len();
        }
        let key = key(source, text);
        if let Some(e) = self.entries.get_mut(&key)
            && now.saturating_duration_since(e.last) < WINDOW
        {
            e.last = now;
            return Verdict::Duplicate;
        }
        Verdict::Admit(self.admit(key, now))
    }

    /// Tracks an input that must run whatever the guard thinks (an input replayed from
    /// the durable inbox after a restart was admitted before the restart).
    pub fn track(&mut self, source: &str, text: &str, now: Instant) -> Ticket {
        self.admit(key(source, text), now)
    }

    fn admit(&mut self, key: String, now: Instant) -> Ticket {
        self.next += 1;
        let n = self.next;
        self.entries.insert(
            key.clone(),
            Entry {
                state: State::InFlight(n),
                last: now,
            },
        );
        Ticket { key, n }
    }

    /// The admitted input of `ticket` ended. A success keeps blocking repeats for the
    /// rest of the window; anything else (failed, cancelled, refused later, dropped)
    /// frees the key at once, so a retry goes through. A stale ticket (its key was
    /// admitted again since) changes nothing.
    pub fn finished(&mut self, ticket: &Ticket, succeeded: bool) {
        let Some(e) = self.entries.get_mut(&ticket.key) else {
            return;
        };
        if e.state != State::InFlight(ticket.n) {
            return;
        }
        if succeeded {
            e.state = State::Succeeded;
        } else {
            self.entries.remove(&ticket.key);
        }
    }

    /// Keys currently remembered (for tests and logs).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(g: &mut DuplicateGuard, source: &str, text: &str, now: Instant) -> Ticket {
        match g.seen(source, text, now) {
            Verdict::Admit(t) => t,
            Verdict::Duplicate => panic!("{source}|{text} should be admitted"),
        }
    }

    #[test]
    fn a_repeat_is_dropped_while_the_first_is_queued_or_running() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        let _first = admit(&mut g, "qq", "hi", t);
        assert_eq!(g.seen("qq", "hi", t + Duration::from_secs(9)), Verdict::Duplicate);
        assert!(matches!(g.seen("webui", "hi", t), Verdict::Admit(_)), "per source");
        assert!(matches!(g.seen("qq", "hi!", t), Verdict::Admit(_)), "per text");
    }

    #[test]
    fn a_repeat_after_a_success_is_dropped_and_refreshes_the_window() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        let first = admit(&mut g, "qq", "hi", t);
        g.finished(&first, true);
        assert_eq!(g.seen("qq", "hi", t + Duration::from_secs(9)), Verdict::Duplicate);
        assert_eq!(
            g.seen("qq", "hi", t + Duration::from_secs(18)),
            Verdict::Duplicate,
            "refreshed by the last hit: a flood stays blocked"
        );
        assert!(matches!(
            g.seen("qq", "hi", t + Duration::from_secs(29)),
            Verdict::Admit(_)
        ));
    }

    #[test]
    fn a_retry_after_a_failure_goes_through_at_once() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        let first = admit(&mut g, "http", "hello", t);
        g.finished(&first, false);
        let retry = admit(&mut g, "http", "hello", t + Duration::from_millis(10));
        assert_eq!(
            g.seen("http", "hello", t + Duration::from_millis(20)),
            Verdict::Duplicate,
            "the retry itself is in flight"
        );
        g.finished(&retry, true);
        assert_eq!(g.seen("http", "hello", t + Duration::from_secs(1)), Verdict::Duplicate);
    }

    #[test]
    fn a_stale_ticket_does_not_free_a_newer_admission() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        let old = admit(&mut g, "qq", "hi", t);
        // Past the window the same text is admitted again while the first still runs.
        let new = admit(&mut g, "qq", "hi", t + Duration::from_secs(11));
        g.finished(&old, false);
        assert_eq!(
            g.seen("qq", "hi", t + Duration::from_secs(12)),
            Verdict::Duplicate,
            "the newer one is still in flight"
        );
        g.finished(&new, false);
        assert!(matches!(
            g.seen("qq", "hi", t + Duration::from_secs(13)),
            Verdict::Admit(_)
        ));
    }

    #[test]
    fn replayed_inputs_are_tracked_without_a_verdict() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        let a = g.track("http", "same", t);
        let b = g.track("http", "same", t);
        assert_ne!(a, b, "two stored copies both run");
        assert_eq!(g.seen("http", "same", t), Verdict::Duplicate);
        g.finished(&b, false);
        assert!(matches!(g.seen("http", "same", t), Verdict::Admit(_)));
    }

    #[test]
    fn expired_keys_are_swept_when_the_map_grows() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        for i in 0..=SWEEP_ABOVE {
            let tk = admit(&mut g, "s", &i.to_string(), t);
            g.finished(&tk, true);
        }
        admit(&mut g, "s", "late", t + WINDOW);
        assert_eq!(g.len(), 1, "only the fresh key is left");
    }

    #[test]
    fn a_burst_of_live_keys_is_swept_once_per_doubling() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        // More live keys than the threshold: one sweep (nothing expired), then none
        // until the map doubles, and every key stays a duplicate inside its window.
        for i in 0..=SWEEP_ABOVE + 10 {
            admit(&mut g, "s", &i.to_string(), t);
        }
        assert_eq!(
            g.sweep_at,
            2 * (SWEEP_ABOVE + 1),
            "one sweep, which kept every live key"
        );
        assert_eq!(g.seen("s", "3", t), Verdict::Duplicate);
        // Once the window passed, the next sweep (at the doubled size) drops them all.
        let later = t + WINDOW;
        for i in 0..=2 * (SWEEP_ABOVE + 1) {
            admit(&mut g, "late", &i.to_string(), later);
        }
        assert!(
            g.len() < 2 * (SWEEP_ABOVE + 1) + 2,
            "the expired keys went: {}",
            g.len()
        );
        assert_eq!(
            g.seen("s", "3", later),
            Verdict::Admit(Ticket {
                key: key("s", "3"),
                n: g.next
            })
        );
    }
}
