//! The duplicate-input guard: the same text from the same source within 10 s is
//! dropped (each hit refreshes the window, so a flood stays blocked).

use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct DuplicateGuard {
    seen: HashMap<String, Instant>,
}

impl DuplicateGuard {
    /// True when `text` from `source` was seen within the window (and refreshes it).
    pub fn is_duplicate(&mut self, source: &str, text: &str, now: Instant) -> bool {
        if self.seen.len() > 4096 {
            self.seen.retain(|_, t| now.saturating_duration_since(*t) < WINDOW);
        }
        let key = format!("{source}|{text}");
        let dup = self
            .seen
            .get(&key)
            .is_some_and(|t| now.saturating_duration_since(*t) < WINDOW);
        self.seen.insert(key, now);
        dup
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_inside_the_window_are_dropped_and_refresh_it() {
        let mut g = DuplicateGuard::default();
        let t = Instant::now();
        assert!(!g.is_duplicate("qq", "hi", t));
        assert!(g.is_duplicate("qq", "hi", t + Duration::from_secs(9)));
        assert!(
            g.is_duplicate("qq", "hi", t + Duration::from_secs(18)),
            "refreshed by the last hit"
        );
        assert!(!g.is_duplicate("qq", "hi", t + Duration::from_secs(29)));
        assert!(!g.is_duplicate("webui", "hi", t), "per source");
    }
}
