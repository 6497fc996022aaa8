//! Which LLM source to try, in what order, and which to skip (spec subsystems §2.3; kernel spec §3.6).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::source::SourceConfig;

/// First pause after a source failed (both attempts); doubles per consecutive failure.
pub const BASE_PAUSE: Duration = Duration::from_secs(30);
/// Longest pause.
pub const MAX_PAUSE: Duration = Duration::from_secs(30 * 60);
/// Attempts per source before moving to the next one.
pub const ATTEMPTS: u32 = 2;
/// Wait between the attempts on one source.
pub const RETRY_DELAY: Duration = Duration::from_secs(2);

/// Pause after `failures` consecutive failures: 30 s × 2^(failures−1), at most 30 min.
pub fn pause_for(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let exp = (failures - 1).min(16);
    BASE_PAUSE.saturating_mul(1 << exp).min(MAX_PAUSE)
}

/// Availability of one source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceHealth {
    /// Consecutive failed rounds (each round = all attempts on this source).
    pub failures: u32,
    pub paused_until: Option<Instant>,
    /// Set by a 401/403: the fingerprint of the API key that was refused. The source
    /// stays disabled until its key changes (a bad key is never retried).
    pub rejected_key: Option<u64>,
    /// The last error, for the status page.
    pub last_error: Option<String>,
}

impl SourceHealth {
    /// Whether to try the source now, given its current key's fingerprint.
    pub fn available(&self, now: Instant, key_fingerprint: u64) -> bool {
        if self.rejected_key == Some(key_fingerprint) {
            return false;
        }
        self.paused_until.is_none_or(|t| now >= t)
    }

    pub fn record_success(&mut self) {
        self.failures = 0;
        self.paused_until = None;
        self.last_error = None;
    }

    /// A failed round; returns the pause now in force.
    pub fn record_failure(&mut self, now: Instant, error: String) -> Duration {
        self.record_failure_at_least(now, error, None)
    }

    /// [`Self::record_failure`], paused at least `asked` (the vendor's `Retry-After`).
    pub fn record_failure_at_least(&mut self, now: Instant, error: String, asked: Option<Duration>) -> Duration {
        self.failures += 1;
        let pause = pause_for(self.failures).max(asked.unwrap_or_default());
        self.paused_until = Some(now + pause);
        self.last_error = Some(error);
        pause
    }

    /// 401/403: disabled until the key changes.
    pub fn record_auth_failure(&mut self, key_fingerprint: u64, error: String) {
        self.rejected_key = Some(key_fingerprint);
        self.last_error = Some(error);
    }
}

/// The health to keep after the sources were reconfigured: a source keeps its failure
/// count, pause and last error only while its settings are exactly as they were. A
/// changed setting (base URL, model, key, adapter, a timeout…) is the operator's fix
/// for whatever made it fail, so it is tried again at once instead of sitting out a
/// pause earned by the old settings. Removed sources lose their health.
pub fn carry_over(
    mut health: HashMap<String, SourceHealth>,
    old: &[&SourceConfig],
    new: &[&SourceConfig],
) -> HashMap<String, SourceHealth> {
    let mut kept = HashMap::new();
    for cfg in new {
        let Some(h) = health.remove(&cfg.name) else { continue };
        if old.contains(cfg) {
            kept.insert(cfg.name.clone(), h);
        } else if h != SourceHealth::default() {
            tracing::info!(
                source = %cfg.name,
                failures = h.failures,
                "LLM source settings changed: its failure count and pause are reset"
            );
        }
    }
    kept
}

/// What ordering needs to know about a source.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub name: &'a str,
    pub model: &'a str,
    pub priority: i64,
}

/// Orders sources for a request: exact model matches first, then higher priority,
/// then the default source, then by name.
pub fn order<'a>(sources: &[Candidate<'a>], requested_model: Option<&str>, default: &str) -> Vec<&'a str> {
    let mut v: Vec<&Candidate<'a>> = sources.iter().collect();
    let wanted = requested_model.filter(|m| !m.is_empty() && *m != "AUTO");
    v.sort_by(|a, b| {
        let model_match = |c: &Candidate| wanted.is_some_and(|m| c.model == m);
        model_match(b)
            .cmp(&model_match(a))
            .then(b.priority.cmp(&a.priority))
            .then((b.name == default).cmp(&(a.name == default)))
            .then(a.name.cmp(b.name))
    });
    v.into_iter().map(|c| c.name).collect()
}

/// A stable fingerprint of an API key (so the key itself is never kept in health state).
pub fn key_fingerprint(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_thirty_minutes() {
        let secs: Vec<u64> = (1..=8).map(|n| pause_for(n).as_secs()).collect();
        assert_eq!(secs, [30, 60, 120, 240, 480, 960, 1800, 1800]);
        assert_eq!(pause_for(1000), MAX_PAUSE);
    }

    #[test]
    fn failure_pauses_and_success_resets() {
        let t = Instant::now();
        let mut h = SourceHealth::default();
        let k = key_fingerprint("sk-1");
        assert!(h.available(t, k));
        h.record_failure(t, "500".into());
        assert!(!h.available(t + Duration::from_secs(29), k));
        assert!(h.available(t + Duration::from_secs(30), k));
        h.record_failure(t, "500".into());
        assert!(!h.available(t + Duration::from_secs(59), k));
        h.record_success();
        assert!(h.available(t, k));
    }

    #[test]
    fn auth_failure_disables_until_the_key_changes() {
        let t = Instant::now();
        let mut h = SourceHealth::default();
        h.record_auth_failure(key_fingerprint("bad"), "401".into());
        assert!(!h.available(t + Duration::from_secs(100_000), key_fingerprint("bad")));
        assert!(h.available(t, key_fingerprint("good")));
    }

    fn cfg(name: &str, base_url: &str) -> SourceConfig {
        SourceConfig {
            name: name.into(),
            base_url: base_url.into(),
            model: "m".into(),
            api_key: "k".into(),
            adapter: "openai".into(),
            adapter_path: String::new(),
            priority: 0,
            max_concurrent: 8,
            daily_tokens: 0,
            monthly_tokens: 0,
            daily_usd: 0.0,
            monthly_usd: 0.0,
            context_window: 0,
            thinking_enabled: false,
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(180),
            idle_timeout: Duration::from_secs(120),
            vision: true,
        }
    }

    #[test]
    fn changed_settings_reset_health_and_unchanged_ones_keep_it() {
        let t = Instant::now();
        let mut failed = SourceHealth::default();
        failed.record_failure(t, "connect refused".into());
        let health: HashMap<String, SourceHealth> = ["a", "b", "c", "gone"]
            .iter()
            .map(|n| (n.to_string(), failed.clone()))
            .collect();
        let old = [
            cfg("a", "http://x"),
            cfg("b", "http://wrong"),
            cfg("c", "http://x"),
            cfg("gone", "http://x"),
        ];
        let mut c = cfg("c", "http://x");
        c.first_byte_timeout = Duration::from_secs(3);
        let new = [cfg("a", "http://x"), cfg("b", "http://right"), c];
        let kept = carry_over(health, &old.iter().collect::<Vec<_>>(), &new.iter().collect::<Vec<_>>());
        assert_eq!(kept.get("a"), Some(&failed), "unchanged: still paused");
        assert!(!kept.contains_key("b"), "base_url corrected: fresh health");
        assert!(!kept.contains_key("c"), "a timeout changed: fresh health");
        assert!(!kept.contains_key("gone"));
    }

    #[test]
    fn ordering_rules() {
        let s = [
            Candidate {
                name: "b",
                model: "m1",
                priority: 0,
            },
            Candidate {
                name: "a",
                model: "m1",
                priority: 0,
            },
            Candidate {
                name: "hi",
                model: "m2",
                priority: 5,
            },
            Candidate {
                name: "def",
                model: "m1",
                priority: 0,
            },
        ];
        assert_eq!(order(&s, None, "def"), ["hi", "def", "a", "b"]);
        assert_eq!(order(&s, Some("m1"), "def"), ["def", "a", "b", "hi"]);
        assert_eq!(order(&s, Some("AUTO"), "zzz"), ["hi", "a", "b", "def"]);
    }
}
