//! Interrupt levels and how an interrupt's level is decided (kernel spec §1.2-1.4).

use serde::Serialize;

/// Priority of an interrupt. Queued (non-interrupt) tasks have no level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[repr(u8)]
pub enum Level {
    /// Fully deferrable (async chat messages, bulk notices). The default.
    L1 = 1,
    /// Would like to see it soon.
    L2 = 2,
    /// Needs timely handling: timers, interactive input.
    L3 = 3,
    /// Interrupt immediately: kernel events, the stop button of a built-in channel.
    L4 = 4,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::L1, Level::L2, Level::L3, Level::L4];

    /// From 1..=4; anything else is `None`.
    pub fn from_u8(n: u8) -> Option<Level> {
        match n {
            1 => Some(Level::L1),
            2 => Some(Level::L2),
            3 => Some(Level::L3),
            4 => Some(Level::L4),
            _ => None,
        }
    }

    /// The descriptive name used in logs and the API.
    pub fn name(self) -> &'static str {
        match self {
            Level::L1 => "L1-background",
            Level::L2 => "L2-message",
            Level::L3 => "L3-interactive",
            Level::L4 => "L4-critical",
        }
    }

    /// Parses an injection's `priority` field leniently (plugins, spec §1.3): what
    /// [`str::parse`] accepts, and anything else (absent, not a string, `L7`, `紧急`,
    /// spaces) is L1: a new source gets no preemption power unless it asks correctly.
    /// The HTTP edge is strict instead and refuses a bad `priority` with `str::parse`.
    pub fn parse(priority: Option<&serde_json::Value>) -> Level {
        priority
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse().ok())
            .unwrap_or(Level::L1)
    }

    /// Non-privileged sources may ask for at most L3; privileged ones keep L4.
    pub fn clamp_for(self, privileged: bool) -> Level {
        if privileged { self } else { self.min(Level::L3) }
    }
}

/// A `priority` that is not `L1`..`L4` (or `l1`..`l4`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`priority` must be one of L1, L2, L3, L4 (got `{0}`)")]
pub struct UnknownLevel(pub String);

impl std::str::FromStr for Level {
    type Err = UnknownLevel;

    /// Exactly `L1`..`L4` or `l1`..`l4`; no spaces, no other spellings.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "L1" | "l1" => Ok(Level::L1),
            "L2" | "l2" => Ok(Level::L2),
            "L3" | "l3" => Ok(Level::L3),
            "L4" | "l4" => Ok(Level::L4),
            _ => Err(UnknownLevel(s.to_owned())),
        }
    }
}

impl std::fmt::Display for Level {
    /// `L1`..`L4`, what [`str::parse`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "L{}", *self as u8)
    }
}

/// The plugin part of an event source: `webui/<device>` → `webui`. A leading `/` is
/// not a separator (`/x` stays `/x`).
pub fn source_root(source: &str) -> &str {
    match source.find('/') {
        Some(i) if i > 0 => &source[..i],
        _ => source,
    }
}

/// Decides the level of an interrupt from its `priority` field and whether its source
/// is privileged (a built-in plugin, or this agent's kernel source).
pub fn interrupt_level(priority: Option<&serde_json::Value>, privileged: bool) -> Level {
    Level::parse(priority).clamp_for(privileged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn level_parsing_table() {
        let cases = [
            (json!("L1"), false, Level::L1),
            (json!("L2"), false, Level::L2),
            (json!("l2"), false, Level::L2),
            (json!("L3"), false, Level::L3),
            (json!("L4"), false, Level::L3), // unprivileged: clamped
            (json!("L4"), true, Level::L4),
            (json!("L7"), true, Level::L1),
            (json!(""), false, Level::L1),
            (json!("紧急"), false, Level::L1),
            (json!(" L2"), false, Level::L1),
            (json!(4), true, Level::L1),
        ];
        for (p, privileged, want) in cases {
            assert_eq!(
                interrupt_level(Some(&p), privileged),
                want,
                "{p} privileged={privileged}"
            );
        }
        assert_eq!(interrupt_level(None, true), Level::L1);
    }

    #[test]
    fn levels_parse_strictly_and_print_back() {
        for l in Level::ALL {
            assert_eq!(l.to_string().parse::<Level>(), Ok(l));
            assert_eq!(l.to_string().to_lowercase().parse::<Level>(), Ok(l));
        }
        for bad in ["L0", "L5", " L2", "l2 ", "", "紧急", "LL1"] {
            let e = bad.parse::<Level>().unwrap_err();
            assert!(e.to_string().contains("must be one of L1, L2, L3, L4"), "{e}");
        }
    }

    #[test]
    fn source_roots() {
        assert_eq!(source_root("webui/dev-1"), "webui");
        assert_eq!(source_root("webui"), "webui");
        assert_eq!(source_root("/abs"), "/abs");
        assert_eq!(source_root(""), "");
    }
}
