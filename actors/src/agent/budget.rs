//! The token budget of a prompt (kernel spec §5.8) as a plain function: out of the
//! model's window, the target is min(0.8 × window, 600k); what is fixed (system
//! prompt, tool schemas, the current input) comes off the top; recalled memory gets at
//! most a third of the rest and the recency timeline the remainder.

/// The target never exceeds this, whatever the window: a prompt beyond it is slow and
/// costly, and long-context models recall worse from its middle.
pub const TARGET_CAP: usize = 600_000;

/// The figures of one prompt's budget (tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub window: usize,
    pub target: usize,
    pub fixed: usize,
    /// Recalled memory (relevance-ranked items).
    pub memory: usize,
    /// The recency timeline (the last events verbatim).
    pub timeline: usize,
}

impl Budget {
    /// The budget for a model of `window` tokens when `fixed` tokens are taken already.
    pub fn new(window: usize, fixed: usize) -> Self {
        let target = (window.saturating_mul(4) / 5).min(TARGET_CAP);
        let available = target.saturating_sub(fixed);
        let memory = available / 3;
        Self {
            window,
            target,
            fixed,
            memory,
            timeline: available - memory,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_the_spec_says() {
        let b = Budget::new(8192, 1553);
        assert_eq!(b.target, 6553);
        assert_eq!(b.memory, 1666);
        assert_eq!(b.timeline, 3334);
        assert!(b.fixed + b.memory + b.timeline <= b.target);
        assert_eq!(Budget::new(1_000_000, 0).target, TARGET_CAP);
        let full = Budget::new(1000, 5000);
        assert_eq!((full.memory, full.timeline), (0, 0), "nothing left: no memory");
    }
}
