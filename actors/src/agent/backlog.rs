//! The intake's backlog as a plain struct: stored inputs waiting for room in the ready
//! queue, offered to the scheduler one at a time in arrival order.
//!
//! The event loop ([`super::intake::EventLoop`]) is its shell: it submits what
//! [`Backlog::head_to_send`] hands it, reports the scheduler's answer, and runs the retry timer
//! and the guard and inbox hooks of what [`Backlog::answered`] gives back. The rules
//! live here, unit-tested without actix:
//!
//! * **Arrival order**: a new stored input goes straight to the scheduler only when
//!   nothing waits and nothing is on its way; otherwise it queues behind the others.
//! * **One at a time**: at most one input is on its way to the scheduler; the next is
//!   offered when that one is answered.
//! * **A full queue is waited out**: the head stays and is offered again after a pause
//!   (the shell's timer, [`Backlog::retry`]); so does one the scheduler could not be
//!   asked about (restarting).
//! * **A refusal for good drops the head** (the shell settles it) and the next goes.
//! * **A stop cancels what waits**, but not the head on its way (the scheduler cancels
//!   it, had it arrived before the stop, or it runs).

use std::collections::VecDeque;

/// What the scheduler answered the submit of the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// It took it.
    Taken,
    /// The ready queue is full, or the scheduler could not be asked: offer it again
    /// after a pause.
    Later,
    /// Refused for good (the agent stopped, the input is refused): drop it.
    Refused,
}

/// What the shell does after an answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Then<T> {
    /// Taken: offer the next ([`Backlog::head_to_send`]).
    Next(T),
    /// Wait, then call [`Backlog::retry`].
    Pause,
    /// Settle this dropped input (its guard ticket, its inbox row), then offer the next.
    Drop(T),
}

/// Stored inputs waiting for the ready queue (see the module docs).
#[derive(Debug)]
pub struct Backlog<T> {
    waiting: VecDeque<T>,
    /// The head was handed to the shell and is not answered yet (or waits for its retry).
    feeding: bool,
}

impl<T> Default for Backlog<T> {
    fn default() -> Self {
        Self {
            waiting: VecDeque::new(),
            feeding: false,
        }
    }
}

impl<T> Backlog<T> {
    /// Whether a newly stored input must queue here instead of going to the scheduler
    /// at once: others wait, or one is on its way.
    pub fn must_wait(&self) -> bool {
        self.feeding || !self.waiting.is_empty()
    }

    /// Queues `t` behind the others.
    pub fn push(&mut self, t: T) {
        self.waiting.push_back(t);
    }

    /// The head to submit now, when none is on its way (it stays queued until answered).
    pub fn head_to_send(&mut self) -> Option<&T> {
        if self.feeding {
            return None;
        }
        let head = self.waiting.front()?;
        self.feeding = true;
        Some(head)
    }

    /// The scheduler's answer to the head handed out by [`Self::head_to_send`].
    pub fn answered(&mut self, answer: Answer) -> Then<T> {
        let popped = match answer {
            Answer::Later => return Then::Pause,
            Answer::Taken | Answer::Refused => self.waiting.pop_front(),
        };
        self.feeding = false;
        let t = popped.expect("answered only after head_to_send handed it out");
        match answer {
            Answer::Taken => Then::Next(t),
            _ => Then::Drop(t),
        }
    }

    /// The pause after [`Then::Pause`] is over: the head may be offered again.
    pub fn retry(&mut self) {
        self.feeding = false;
    }

    /// Stop: takes every waiting input but the head on its way.
    pub fn cancel(&mut self) -> Vec<T> {
        let keep = usize::from(self.feeding).min(self.waiting.len());
        self.waiting.drain(keep..).collect()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_go_one_at_a_time_in_arrival_order() {
        let mut b = Backlog::default();
        assert!(!b.must_wait(), "nothing waits: straight to the scheduler");
        b.push(1);
        b.push(2);
        assert!(b.must_wait());
        assert_eq!(b.head_to_send(), Some(&1));
        assert_eq!(b.head_to_send(), None, "one on its way at a time");
        assert!(b.must_wait(), "a new input queues behind");
        assert_eq!(b.answered(Answer::Taken), Then::Next(1));
        assert_eq!(b.head_to_send(), Some(&2));
        assert_eq!(b.answered(Answer::Taken), Then::Next(2));
        assert_eq!(b.head_to_send(), None);
        assert!(!b.must_wait());
    }

    #[test]
    fn a_full_queue_is_waited_out_and_a_refusal_drops_only_the_head() {
        let mut b = Backlog::default();
        b.push("a");
        b.push("b");
        assert_eq!(b.head_to_send(), Some(&"a"));
        assert_eq!(b.answered(Answer::Later), Then::Pause);
        assert_eq!(b.head_to_send(), None, "not before the pause is over");
        assert_eq!(b.len(), 2);
        b.retry();
        assert_eq!(b.head_to_send(), Some(&"a"), "the same head again");
        assert_eq!(b.answered(Answer::Refused), Then::Drop("a"));
        assert_eq!(b.head_to_send(), Some(&"b"));
    }

    #[test]
    fn a_stop_cancels_what_waits_but_not_the_head_on_its_way() {
        let mut b = Backlog::default();
        for i in 0..4 {
            b.push(i);
        }
        assert_eq!(b.cancel(), vec![0, 1, 2, 3], "nothing on its way: all cancelled");
        for i in 0..4 {
            b.push(i);
        }
        b.head_to_send();
        assert_eq!(b.cancel(), vec![1, 2, 3]);
        assert_eq!(b.answered(Answer::Taken), Then::Next(0));
        assert!(b.is_empty());
        // A head waiting out a pause is on its way too.
        b.push(7);
        b.push(8);
        b.head_to_send();
        b.answered(Answer::Later);
        assert_eq!(b.cancel(), vec![8]);
    }
}
