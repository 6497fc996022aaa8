//! The knobs of a supervisor: restart policy, strategy, intensity and backoff.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// When a child that exited is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Always restarted (unless its supervisor is shutting down).
    Permanent,
    /// Restarted only after an abnormal exit (panic or error).
    Transient,
    /// Never restarted.
    Temporary,
}

/// Which siblings are restarted with a child that must be restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Only the child itself.
    OneForOne,
    /// Every child: for siblings that share state they cannot rebuild alone.
    OneForAll,
    /// The child and every sibling started after it (they depend on it).
    RestForOne,
}

/// Restart intensity: more than `max_restarts` restarts within `window` means the
/// problem is not transient, and the supervisor gives up and escalates to its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intensity {
    pub max_restarts: u32,
    pub window: Duration,
}

impl Default for Intensity {
    fn default() -> Self {
        Self {
            max_restarts: 5,
            window: Duration::from_secs(30),
        }
    }
}

/// Delay between a crash and the restart, growing exponentially while a child keeps
/// crashing, so a failing dependency is not hammered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// First delay.
    pub initial: Duration,
    /// Upper bound of any delay (jitter included).
    pub max: Duration,
    /// A child that ran this long without crashing starts over at `initial`.
    pub reset_after: Duration,
    /// Adds a random 0-100 % to each delay so siblings do not restart in lock-step.
    pub jitter: bool,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl BackoffPolicy {
    /// A fresh delay sequence (the `backon` crate does the exponential/jitter math).
    pub(crate) fn sequence(&self) -> ExponentialBackoff {
        let mut b = ExponentialBuilder::new()
            .with_min_delay(self.initial)
            .with_max_delay(self.max)
            .with_factor(2.0)
            .without_max_times();
        if self.jitter {
            b = b.with_jitter();
        }
        b.build()
    }
}

/// Everything that configures one supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupervisorConfig {
    pub strategy: Strategy,
    pub intensity: Intensity,
    pub backoff: BackoffPolicy,
    /// How long each child gets to stop before it is abandoned.
    pub shutdown_timeout: Duration,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            strategy: Strategy::OneForOne,
            intensity: Intensity::default(),
            backoff: BackoffPolicy::default(),
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

impl SupervisorConfig {
    pub fn with_strategy(mut self, s: Strategy) -> Self {
        self.strategy = s;
        self
    }
}
