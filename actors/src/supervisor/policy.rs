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
    /// How delays grow between consecutive crashes.
    pub growth: Growth,
}

/// The shape of a backoff sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Growth {
    /// initial, 2×, 4×, … (kernel actors: back off fast from a failing dependency).
    #[default]
    Exponential,
    /// initial, 2×, 3×, … (plugins: the spec's 1 s, 2 s, 3 s).
    Linear,
}

/// The delays of one crash streak.
#[derive(Debug)]
pub enum Delays {
    Exponential(ExponentialBackoff),
    Linear { step: Duration, n: u32 },
}

impl Iterator for Delays {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        match self {
            Delays::Exponential(b) => b.next(),
            Delays::Linear { step, n } => {
                *n += 1;
                Some(step.saturating_mul(*n))
            }
        }
    }
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(60),
            jitter: true,
            growth: Growth::Exponential,
        }
    }
}

impl BackoffPolicy {
    /// A fresh delay sequence (the `backon` crate does the exponential/jitter math;
    /// linear sequences take no jitter).
    pub(crate) fn sequence(&self) -> Delays {
        if self.growth == Growth::Linear {
            return Delays::Linear {
                step: self.initial,
                n: 0,
            };
        }
        let mut b = ExponentialBuilder::new()
            .with_min_delay(self.initial)
            .with_max_delay(self.max)
            .with_factor(2.0)
            .without_max_times();
        if self.jitter {
            b = b.with_jitter();
        }
        Delays::Exponential(b.build())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_exponential_sequences() {
        let lin = BackoffPolicy {
            initial: Duration::from_secs(1),
            growth: Growth::Linear,
            jitter: false,
            ..Default::default()
        };
        let d: Vec<u64> = lin.sequence().take(4).map(|d| d.as_secs()).collect();
        assert_eq!(d, [1, 2, 3, 4]);
        let exp = BackoffPolicy {
            initial: Duration::from_secs(1),
            jitter: false,
            ..Default::default()
        };
        let d: Vec<u64> = exp.sequence().take(4).map(|d| d.as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8]);
    }
}
