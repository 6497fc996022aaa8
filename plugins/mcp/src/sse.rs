//! Server-sent events (the `text/event-stream` format of the HTML standard) as a pure
//! line-fed parser: the Streamable HTTP transport answers a POST, and serves its GET
//! stream, in this format. The parser keeps the last event id and the `retry:` delay
//! across events, which is what resuming a stream with `Last-Event-ID` needs.
//!
//! Written by hand rather than taken from a crate: the format is a dozen lines of
//! rules, the crates that parse it are async-stream adapters, and this bridge reads
//! blocking bodies on plain threads.

use std::io::BufRead;
use std::time::Duration;

/// Longest event we buffer (a server sending one endless event is cut off).
pub const MAX_EVENT: usize = 4 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `event:` (`message` when absent).
    pub kind: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The stream's last event id when this event was dispatched.
    pub id: Option<String>,
}

/// The parser's state between lines.
#[derive(Debug, Default)]
pub struct Parser {
    kind: String,
    data: String,
    has_data: bool,
    /// The last event id seen (kept across events, as the standard says).
    pub last_id: Option<String>,
    /// The last `retry:` the server sent.
    pub retry: Option<Duration>,
    /// Some event grew past [`MAX_EVENT`] and was dropped.
    pub overflowed: bool,
}

impl Parser {
    /// Feeds one line (without its line ending); an event when the line ends one.
    pub fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None; // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.kind = value.to_owned(),
            "data" => {
                if self.data.len() + value.len() > MAX_EVENT {
                    self.overflowed = true;
                    self.data.clear();
                    self.has_data = false;
                    return None;
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // An id with a NUL is ignored, per the standard.
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" => {
                if let Ok(ms) = value.trim().parse::<u64>() {
                    self.retry = Some(Duration::from_millis(ms));
                }
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        let kind = std::mem::take(&mut self.kind);
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(Event {
            kind: if kind.is_empty() { "message".into() } else { kind },
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
        })
    }

    /// Reads `r` to its end, calling `on_event` for each event; stops early when it
    /// returns `false`. `Err` on a read error (a dropped connection).
    pub fn read(&mut self, r: impl BufRead, mut on_event: impl FnMut(Event) -> bool) -> std::io::Result<()> {
        for line in r.lines() {
            let line = line?;
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if let Some(ev) = self.line(line)
                && !on_event(ev)
            {
                return Ok(());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str) -> (Vec<Event>, Parser) {
        let mut p = Parser::default();
        let mut out = Vec::new();
        p.read(text.as_bytes(), |e| {
            out.push(e);
            true
        })
        .unwrap();
        (out, p)
    }

    #[test]
    fn events_ids_and_retry_are_read() {
        let (ev, p) = events(
            ": keep-alive\r\nid: e-1\r\nretry: 500\r\ndata: \r\n\r\nevent: message\nid: e-2\ndata: {\"a\":\ndata: 1}\n\n",
        );
        // The priming event (an id and an empty data line) is an event with empty data.
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].data, "");
        assert_eq!(ev[0].id.as_deref(), Some("e-1"));
        assert_eq!(ev[1].data, "{\"a\":\n1}");
        assert_eq!(ev[1].kind, "message");
        assert_eq!(p.last_id.as_deref(), Some("e-2"));
        assert_eq!(p.retry, Some(Duration::from_millis(500)));
    }

    #[test]
    fn no_data_no_event_and_bad_fields_are_ignored() {
        let (ev, p) = events("id: only-an-id\n\nretry: soon\nfoo: bar\nevent: x\n\n");
        assert!(ev.is_empty());
        assert_eq!(p.last_id.as_deref(), Some("only-an-id"));
        assert_eq!(p.retry, None);
        let (ev, _) = events("data\n\n");
        assert_eq!(ev[0].data, "", "a field name alone is an empty value");
    }

    #[test]
    fn an_endless_event_is_dropped() {
        let mut p = Parser::default();
        let chunk = "x".repeat(1024 * 1024);
        for _ in 0..5 {
            assert!(p.line(&format!("data: {chunk}")).is_none());
        }
        assert!(p.overflowed);
        assert!(p.line("").is_none_or(|e| e.data.len() <= MAX_EVENT));
    }
}
