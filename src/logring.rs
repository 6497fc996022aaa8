//! The daemon's recent log in memory, for the WebUI's log view (`GET /api/v1/logs`).
//!
//! A `tracing` layer beside the stderr writer, under the same filter, so the page shows
//! exactly what stderr shows. Bounded twice: at most [`CAPACITY`] lines, each at most
//! [`MAX_LINE`] bytes, so a chatty or hostile component cannot grow it. Lines are kept
//! as they were logged; secrets are masked where they leave the process (the HTTP
//! handler runs every line through the firewall's mask, the same one tool results get).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Lines kept (the oldest is dropped first).
pub const CAPACITY: usize = 2000;
/// Longest message kept per line, in bytes (longer ones are cut at a char boundary).
pub const MAX_LINE: usize = 4096;
/// Default and largest number of lines one query returns.
pub const DEFAULT_LIMIT: usize = 500;

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LogLine {
    /// Increasing per line since the daemon started; pass the last one as `after`.
    pub seq: u64,
    /// Unix milliseconds.
    pub ts_ms: u64,
    /// `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE`.
    pub level: String,
    /// The module that logged it.
    pub target: String,
    /// The message and its fields (`message key=value ...`), plain text.
    pub message: String,
}

/// What a reader asks for.
#[derive(Debug, Default, Clone)]
pub struct LogQuery {
    /// Only lines with a larger `seq`.
    pub after: Option<u64>,
    /// Only lines at this level or more severe.
    pub level: Option<Level>,
    /// Only lines whose target or message contains this (case-insensitive).
    pub q: Option<String>,
    /// At most this many (the newest of the matches).
    pub limit: usize,
}

/// The ring itself (a plain struct behind a mutex; pushes are short).
#[derive(Debug)]
pub struct LogRing {
    inner: Mutex<Ring>,
}

#[derive(Debug)]
struct Ring {
    lines: VecDeque<LogLine>,
    next: u64,
    cap: usize,
}

impl LogRing {
    pub fn new(cap: usize) -> Self {
        Self {
            inner: Mutex::new(Ring {
                lines: VecDeque::with_capacity(cap.min(CAPACITY)),
                next: 1,
                cap,
            }),
        }
    }

    /// Appends a line, dropping the oldest when full.
    pub fn push(&self, ts_ms: u64, level: Level, target: &str, mut message: String) {
        if message.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str(" …(cut)");
        }
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let seq = r.next;
        r.next += 1;
        if r.lines.len() == r.cap {
            r.lines.pop_front();
        }
        r.lines.push_back(LogLine {
            seq,
            ts_ms,
            level: level.as_str().to_owned(),
            target: target.to_owned(),
            message,
        });
    }

    /// The matching lines, oldest first, and the newest `seq` logged so far (a reader
    /// passes it as `after` next time even when nothing matched).
    pub fn query(&self, q: &LogQuery) -> (Vec<LogLine>, u64) {
        let needle = q.q.as_deref().filter(|s| !s.is_empty()).map(str::to_lowercase);
        let r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<LogLine> = r
            .lines
            .iter()
            .rev()
            .take_while(|l| q.after.is_none_or(|a| l.seq > a))
            .filter(|l| {
                q.level
                    .is_none_or(|min| l.level.parse::<Level>().is_ok_and(|lv| lv <= min))
            })
            .filter(|l| {
                needle
                    .as_ref()
                    .is_none_or(|n| l.message.to_lowercase().contains(n) || l.target.to_lowercase().contains(n))
            })
            .take(q.limit)
            .cloned()
            .collect();
        out.reverse();
        (out, r.next - 1)
    }
}

/// The `tracing` layer feeding a [`LogRing`].
pub struct RingLayer(pub Arc<LogRing>);

/// Collects an event's fields as `message key=value ...`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for RingLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut t = Text::default();
        event.record(&mut t);
        t.message.push_str(&t.fields);
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let meta = event.metadata();
        self.0.push(ts_ms, *meta.level(), meta.target(), t.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(after: Option<u64>, level: Option<Level>, text: Option<&str>) -> LogQuery {
        LogQuery {
            after,
            level,
            q: text.map(str::to_owned),
            limit: DEFAULT_LIMIT,
        }
    }

    #[test]
    fn bounded_ring_drops_the_oldest_and_readers_follow_by_seq() {
        let r = LogRing::new(3);
        for i in 0..5 {
            r.push(i, Level::INFO, "t", format!("line {i}"));
        }
        let (lines, last) = r.query(&q(None, None, None));
        assert_eq!(last, 5);
        assert_eq!(lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [3, 4, 5]);
        let (lines, _) = r.query(&q(Some(4), None, None));
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].message, "line 4");
        let (lines, last) = r.query(&q(Some(5), None, None));
        assert!(lines.is_empty());
        assert_eq!(last, 5);
    }

    #[test]
    fn level_is_a_minimum_and_search_ignores_case() {
        let r = LogRing::new(10);
        r.push(1, Level::DEBUG, "a", "debug".into());
        r.push(2, Level::INFO, "homeagent::http", "Info here".into());
        r.push(3, Level::WARN, "b", "warned".into());
        r.push(4, Level::ERROR, "c", "failed".into());
        let (l, _) = r.query(&q(None, Some(Level::WARN), None));
        assert_eq!(
            l.iter().map(|l| l.level.as_str()).collect::<Vec<_>>(),
            ["WARN", "ERROR"]
        );
        let (l, _) = r.query(&q(None, None, Some("INFO")));
        assert_eq!(l.len(), 1);
        let (l, _) = r.query(&q(None, None, Some("http")));
        assert_eq!(l[0].target, "homeagent::http");
        let (l, _) = r.query(&LogQuery {
            limit: 2,
            ..q(None, None, None)
        });
        assert_eq!(
            l.iter().map(|l| l.seq).collect::<Vec<_>>(),
            [3, 4],
            "the newest matches"
        );
    }

    #[test]
    fn huge_lines_are_cut_at_a_char_boundary() {
        let r = LogRing::new(2);
        r.push(1, Level::INFO, "t", "é".repeat(MAX_LINE));
        let (l, _) = r.query(&q(None, None, None));
        assert!(l[0].message.len() <= MAX_LINE + 16);
        assert!(l[0].message.ends_with("…(cut)"));
    }

    #[test]
    fn the_layer_records_message_and_fields_as_plain_text() {
        use tracing_subscriber::prelude::*;
        let ring = Arc::new(LogRing::new(10));
        let sub = tracing_subscriber::registry().with(RingLayer(ring.clone()));
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(plugin = "echo", n = 3, "plugin \"restarted\"");
        });
        let (l, _) = ring.query(&q(None, None, None));
        assert_eq!(l[0].message, "plugin \"restarted\" plugin=\"echo\" n=3");
        assert_eq!(l[0].level, "WARN");
        assert!(!l[0].message.contains('\u{1b}'));
    }
}
