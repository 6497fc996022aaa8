//! Context overflow (kernel spec §5.9): the decision part. Before every LLM request the
//! task compares the prompt's estimated size with the model's window; past 1.25× (or
//! when the vendor answers "context full") it prunes the context window into the
//! document tier and rebuilds the prompt — at most twice per task, the third time it
//! fails with an error that says which setting to lower.

/// Prompt size / window above which a recovery starts.
pub const THRESHOLD: f64 = 1.25;
/// Recoveries a task may make.
pub const BUDGET: u32 = 2;
/// The window assumed when the model's is unknown (spec §5.8; `llm::window`).
pub const DEFAULT_WINDOW: usize = crate::llm::window::DEFAULT_WINDOW;

/// What to do before a request.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Send it.
    Fits,
    /// Prune the context and rebuild the prompt first.
    Recover,
    /// Give up: the message for the caller.
    Fail(String),
}

/// One task's overflow state.
#[derive(Debug, Default)]
pub struct Guard {
    recoveries: u32,
    /// Events moved out by this task's recoveries (for the failure message).
    pruned: usize,
}

impl Guard {
    /// Checks a prompt of `tokens` against `window`.
    pub fn check(&mut self, tokens: usize, window: usize) -> Verdict {
        let window = if window == 0 { DEFAULT_WINDOW } else { window };
        if (tokens as f64) / (window as f64) <= THRESHOLD {
            return Verdict::Fits;
        }
        self.detected()
    }

    /// An overflow was detected (by the check or by the vendor).
    pub fn detected(&mut self) -> Verdict {
        if self.recoveries >= BUDGET {
            return Verdict::Fail(
                crate::i18n::Msg::OverflowFailed {
                    recoveries: self.recoveries as usize,
                    pruned: self.pruned,
                }
                .text(),
            );
        }
        self.recoveries += 1;
        Verdict::Recover
    }

    /// A recovery moved `n` events out of the window.
    pub fn pruned(&mut self, n: usize) {
        self.pruned += n;
    }
}

/// The L4 notice after a recovery that moved events out.
pub fn notice(pruned: usize) -> String {
    crate::i18n::Msg::OverflowNotice { pruned }.text()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_recoveries_then_a_failure_naming_the_setting() {
        let mut g = Guard::default();
        assert_eq!(
            g.check(40_000, 32_768),
            Verdict::Fits,
            "1.22× is within the 1.25 threshold"
        );
        assert_eq!(g.check(41_000, 32_768), Verdict::Recover);
        g.pruned(7);
        assert_eq!(g.detected(), Verdict::Recover, "the vendor's 'context full' counts too");
        match g.check(50_000, 0) {
            Verdict::Fail(m) => {
                assert!(m.contains("pruned 2 times") && m.contains("7 events"), "{m}");
                assert!(m.contains("core.agent.max_context_size"), "{m}");
            }
            v => panic!("{v:?}"),
        }
        assert!(notice(3).contains("3 low-relevance events were moved to document memory"));
    }
}
