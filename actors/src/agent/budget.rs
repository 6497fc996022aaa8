//! The token budget of a prompt (kernel spec §5.8) as a plain function: out of the
//! model's window, the target is min(0.8 × window, 600k); what is fixed (system
//! prompt, the source context, the current input) comes off the top; recalled memory
//! gets at most a third of the rest (the recency tail included) and the tool schemas
//! come out of the remainder.
//!
//! Why the schemas come out of the timeline's share, not the memory's: §5.8's `fixed` is
//! the base system prompt, and a third of (target − fixed) is what the agent may
//! remember. Counting the schemas as fixed made every new plugin tool shrink the memory
//! (the files/cmd/web/seq tools took ~1,300 tokens: the live LoCoMo recall at an 8k
//! window fell from 0.739 to 0.679). The recency tail (six events verbatim) is recalled
//! inside the memory third (`tail`: at most half of it), so the timeline's share is free
//! to absorb the schemas, and the whole prompt still stays within the target:
//! fixed + tools + memory ≤ target.

/// The target never exceeds this, whatever the window: a prompt beyond it is slow and
/// costly, and long-context models recall worse from its middle.
pub const TARGET_CAP: usize = 600_000;

/// The figures of one prompt's budget (tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub window: usize,
    pub target: usize,
    pub fixed: usize,
    /// The tool schemas sent with the prompt.
    pub tools: usize,
    /// Recalled memory: the recency tail and the relevance-ranked items together.
    pub memory: usize,
    /// The recency tail's bound, inside `memory` (half of it): the relevant items get at
    /// least the other half.
    pub tail: usize,
    /// The recency timeline (the last events verbatim).
    pub timeline: usize,
}

impl Budget {
    /// The budget for a model of `window` tokens when `fixed` tokens are taken already
    /// and no tools ride along.
    pub fn new(window: usize, fixed: usize) -> Self {
        Self::with_tools(window, fixed, 0)
    }

    /// The budget when `tools` tokens of tool schemas are sent too: memory keeps its
    /// third of (target − fixed) unless the schemas leave less than that; the timeline
    /// gets what remains after both, so fixed + tools + memory + timeline ≤ target.
    pub fn with_tools(window: usize, fixed: usize, tools: usize) -> Self {
        let target = (window.saturating_mul(4) / 5).min(TARGET_CAP);
        let available = target.saturating_sub(fixed);
        let memory = (available / 3).min(available.saturating_sub(tools));
        Self {
            window,
            target,
            fixed,
            tools,
            memory,
            tail: memory / 2,
            timeline: available.saturating_sub(tools).saturating_sub(memory),
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
        // Tool schemas come out of the timeline's share; memory keeps its third.
        let t = Budget::with_tools(8192, 1553, 1300);
        assert_eq!((t.memory, t.tail, t.timeline), (1666, 833, 3334 - 1300));
        assert!(t.fixed + t.tools + t.memory + t.timeline <= t.target);
        // Schemas larger than the timeline's share eat into the memory, never past target.
        let big = Budget::with_tools(8192, 1553, 4000);
        assert_eq!((big.memory, big.timeline), (1000, 0));
        assert_eq!(Budget::with_tools(8192, 1553, 9000).memory, 0);
    }
}
