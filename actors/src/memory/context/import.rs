//! Importing a history: the pure part of `POST /api/v1/memory/import`.
//!
//! The body is NDJSON, one turn a line:
//! `{"time": "<RFC 3339>" | <unix seconds>, "speaker": "…", "text": "…"}` with optional
//! `"source"` (where the history comes from, e.g. `whatsapp`) and `"id"` (the turn's id
//! there, e.g. a LoCoMo `dia_id`). [`decode`] validates the *whole* body before anything
//! is written: the first bad line is an [`ImportError`] naming its line number and
//! field, and the shell then imports nothing. Each valid line becomes a [`ImportLine`]
//! whose [`ImportLine::digest`] is stable (who said what, when), so re-importing the
//! same lines imports nothing twice.
//!
//! [`plan`] cuts the lines, in time order, into batches (one store transaction each)
//! and says after which batch the distill heartbeat would have fired had the turns been
//! said live: a history is remembered exactly as if it had been said then, so the
//! window is pruned at the same points of its timeline. The shell that executes a plan
//! is [`crate::memory::context::importer`].

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::memory::context::Event;
use crate::memory::textlog::TextEvent;

/// Largest accepted body: 32 MiB, about 200k turns of chat. Bigger histories are sent
/// in parts (each part is validated on its own; lines already imported are skipped).
pub const MAX_IMPORT_BYTES: usize = 32 * 1024 * 1024;
/// Longest accepted speaker name, in characters.
pub const MAX_SPEAKER_CHARS: usize = 200;
/// Most lines one store transaction writes.
pub const BATCH_LINES: usize = 500;

/// What a line may be: its text's size and its time's bounds (the settings of
/// [`crate::config::InputLimits`]), with the time it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub now_ms: i64,
    /// Earliest accepted time (`core.memory.import.earliest`, default 1970-01-02: a
    /// turn dated 0 or year 1 is a broken export, not a memory).
    pub earliest_ms: i64,
    /// How far ahead of `now_ms` a turn may be dated (`core.memory.import.max_future`,
    /// clock skew): a later one would sort after turns said live afterwards.
    pub max_future_ms: i64,
    /// Largest text of one line (`core.input_processing.text.max_bytes`).
    pub max_text_bytes: usize,
}

impl Bounds {
    /// The bounds of `limits` at `now_ms`.
    pub fn new(now_ms: i64, limits: &crate::config::InputLimits) -> Self {
        Self {
            now_ms,
            earliest_ms: limits.import_earliest.saturating_mul(1000),
            max_future_ms: limits.import_max_future.as_millis().min(i64::MAX as u128) as i64,
            max_text_bytes: limits.max_text_bytes,
        }
    }

    /// The default settings' bounds at `now_ms`.
    pub fn defaults(now_ms: i64) -> Self {
        Self::new(
            now_ms,
            &crate::config::InputLimits::read(&crate::config::Settings::default()),
        )
    }
}

/// The fields a line may have.
const FIELDS: &[&str] = &["time", "speaker", "text", "source", "id"];

/// Why a body cannot be imported. Every variant but [`ImportError::Empty`] names the
/// 1-based line; field errors name the field too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("the body holds no turns; send NDJSON, one {{\"time\", \"speaker\", \"text\"}} object a line")]
    Empty,
    #[error("line {line}: not UTF-8; save the file as UTF-8 and send it again")]
    NotUtf8 { line: usize },
    #[error(
        "line {line}: not a JSON object ({reason}); each line must be one {{\"time\", \"speaker\", \"text\"}} object"
    )]
    NotJson { line: usize, reason: String },
    #[error("line {line}: field `{field}` is missing; every line needs `time`, `speaker` and `text`")]
    Missing { line: usize, field: &'static str },
    #[error("line {line}: field `{field}`: {reason}")]
    Invalid {
        line: usize,
        field: &'static str,
        reason: String,
    },
    #[error("line {line}: unknown field `{field}`; a line may only have time, speaker, text, source and id")]
    Unknown { line: usize, field: String },
    /// The line's text is over the text cap of one input (answered 413).
    #[error(
        "line {line}: field `text` is {bytes} bytes, over the limit of {limit} bytes (core.input_processing.text.max_bytes); split the turn into several lines or raise the setting"
    )]
    TooLarge { line: usize, bytes: usize, limit: usize },
}

impl ImportError {
    /// The 1-based line at fault (none for an empty body).
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Empty => None,
            Self::NotUtf8 { line }
            | Self::NotJson { line, .. }
            | Self::Missing { line, .. }
            | Self::Invalid { line, .. }
            | Self::Unknown { line, .. }
            | Self::TooLarge { line, .. } => Some(*line),
        }
    }

    /// The field at fault, when one is.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Missing { field, .. } | Self::Invalid { field, .. } => Some(field),
            Self::Unknown { field, .. } => Some(field),
            Self::TooLarge { .. } => Some("text"),
            _ => None,
        }
    }
}

/// One valid line: a turn at its own time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportLine {
    /// 1-based line number in the body.
    pub line: usize,
    /// Unix milliseconds.
    pub ts_ms: i64,
    pub speaker: String,
    pub text: String,
    pub source: Option<String>,
    pub id: Option<String>,
}

impl ImportLine {
    /// The line's identity: SHA-256 over its time, speaker and text. Where it came from
    /// (`source`, `id`) is not part of it: the same words said by the same person at
    /// the same moment are one turn, whichever export they arrive in.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.ts_ms.to_le_bytes());
        h.update(self.speaker.as_bytes());
        h.update([0]);
        h.update(self.text.as_bytes());
        let mut out = String::with_capacity(71);
        out.push_str("sha256:");
        for b in h.finalize() {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }

    /// The context event this turn becomes: said by `speaker` (the event's source, so
    /// the timeline shows who spoke), at its own time.
    pub fn event(&self) -> Event {
        Event {
            id: 0,
            ts_ms: self.ts_ms,
            source: self.speaker.clone(),
            input: self.text.clone(),
            response: String::new(),
            tools_used: vec![],
            tool_results: vec![],
            principal: String::new(),
        }
    }
}

/// The text log line of an imported turn's event (what the rule distiller reads),
/// marked `imported`: the import distils it, the distiller's timer does not.
pub fn text_event(e: &Event) -> TextEvent {
    TextEvent {
        ts: e.ts_ms,
        source: e.source.clone(),
        input: e.input.clone(),
        response: String::new(),
        tools_used: vec![],
        imported: true,
        level: None,
        media: Vec::new(),
    }
}

/// [`decode_within`] the default settings' [`Bounds`] at `now_ms`.
pub fn decode(body: &[u8], now_ms: i64) -> Result<Vec<ImportLine>, ImportError> {
    decode_within(body, &Bounds::defaults(now_ms))
}

/// Validates a whole NDJSON body (blank lines are allowed and skipped) within `bounds`:
/// each text at most the text cap, each time between the floor and a little ahead of now.
pub fn decode_within(body: &[u8], bounds: &Bounds) -> Result<Vec<ImportLine>, ImportError> {
    let mut out = Vec::new();
    for (i, raw) in body.split(|b| *b == b'\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = std::str::from_utf8(raw).map_err(|_| ImportError::NotUtf8 { line })?;
        if text.trim().is_empty() {
            continue;
        }
        out.push(decode_line(line, text, bounds)?);
    }
    if out.is_empty() {
        return Err(ImportError::Empty);
    }
    Ok(out)
}

fn decode_line(line: usize, text: &str, bounds: &Bounds) -> Result<ImportLine, ImportError> {
    use serde_json::Value;
    let obj = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => m,
        Ok(other) => {
            return Err(ImportError::NotJson {
                line,
                reason: format!("found a JSON {}", kind(&other)),
            });
        }
        Err(e) => {
            return Err(ImportError::NotJson {
                line,
                reason: e.to_string(),
            });
        }
    };
    if let Some(k) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ImportError::Unknown { line, field: k.clone() });
    }
    let invalid = |field: &'static str, reason: String| ImportError::Invalid { line, field, reason };
    let string = |field: &'static str, required: bool| -> Result<Option<String>, ImportError> {
        match obj.get(field) {
            None | Some(Value::Null) if required => Err(ImportError::Missing { line, field }),
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(invalid(
                field,
                format!("must be a string, found a JSON {}", kind(other)),
            )),
        }
    };
    let ts_ms = parse_time(obj.get("time").unwrap_or(&Value::Null)).map_err(|reason| match reason {
        TimeError::Missing => ImportError::Missing { line, field: "time" },
        TimeError::Invalid(r) => invalid("time", r),
    })?;
    if ts_ms > bounds.now_ms.saturating_add(bounds.max_future_ms) {
        return Err(invalid(
            "time",
            format!(
                "is more than {} in the future (core.memory.import.max_future); a remembered turn must have been said already (check the time zone)",
                crate::config::format_duration(std::time::Duration::from_millis(bounds.max_future_ms.max(0) as u64))
            ),
        ));
    }
    if ts_ms < bounds.earliest_ms {
        return Err(invalid(
            "time",
            format!(
                "is before unix second {} (core.memory.import.earliest); a turn of 1970 or earlier is a broken export: fix its time",
                bounds.earliest_ms / 1000
            ),
        ));
    }
    let speaker = string("speaker", true)?.unwrap_or_default().trim().to_owned();
    if speaker.is_empty() {
        return Err(invalid("speaker", "is empty; name who said the turn".into()));
    }
    if speaker.chars().count() > MAX_SPEAKER_CHARS {
        return Err(invalid(
            "speaker",
            format!("is longer than {MAX_SPEAKER_CHARS} characters; is it the text?"),
        ));
    }
    let text = string("text", true)?.unwrap_or_default();
    if text.len() > bounds.max_text_bytes {
        return Err(ImportError::TooLarge {
            line,
            bytes: text.len(),
            limit: bounds.max_text_bytes,
        });
    }
    if text.trim().is_empty() {
        return Err(invalid(
            "text",
            "is empty; drop the line or give the turn's words".into(),
        ));
    }
    let source = string("source", false)?.filter(|s| !s.trim().is_empty());
    let id = match obj.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Err(invalid(
                "id",
                format!("must be a string or a number, found a JSON {}", kind(other)),
            ));
        }
    };
    Ok(ImportLine {
        line,
        ts_ms,
        speaker,
        text,
        source,
        id,
    })
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// Why a `time` value is not a time.
#[derive(Debug, PartialEq, Eq)]
enum TimeError {
    Missing,
    Invalid(String),
}

/// Latest accepted time: 9999-12-31T23:59:59Z, in unix seconds.
const MAX_UNIX_SECONDS: f64 = 253_402_300_799.0;

/// `time` as Unix milliseconds: an RFC 3339 string (`2023-05-08T13:56:00Z`, any
/// offset), or unix seconds as a number or a numeric string (fractions kept to the ms).
fn parse_time(v: &serde_json::Value) -> Result<i64, TimeError> {
    use serde_json::Value;
    let secs = match v {
        Value::Null => return Err(TimeError::Missing),
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| TimeError::Invalid("is not a number of seconds".into()))?,
        Value::String(s) => {
            let s = s.trim();
            if let Ok(n) = s.parse::<f64>() {
                n
            } else {
                let t =
                    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).map_err(|e| {
                        TimeError::Invalid(format!(
                            "{s:?} is neither RFC 3339 (e.g. 2023-05-08T13:56:00Z) nor unix seconds ({e})"
                        ))
                    })?;
                return Ok((t.unix_timestamp_nanos() / 1_000_000) as i64);
            }
        }
        other => {
            return Err(TimeError::Invalid(format!(
                "must be an RFC 3339 string or unix seconds, found a JSON {}",
                kind(other)
            )));
        }
    };
    if !secs.is_finite() || !(0.0..=MAX_UNIX_SECONDS).contains(&secs) {
        return Err(TimeError::Invalid(format!(
            "{secs} is not unix seconds between 1970 and 9999 (milliseconds by mistake?)"
        )));
    }
    Ok((secs * 1000.0).round() as i64)
}

/// One store transaction of an import, and whether the distill heartbeat fires after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Indices into the decoded lines, in time order.
    pub lines: Vec<usize>,
    /// A heartbeat tick falls between this batch and the next (or the import ends):
    /// run a distill round before going on.
    pub distill_after: bool,
}

/// Cuts `lines` (in any order) into batches in time order (stable for equal times):
/// at most [`BATCH_LINES`] each, and never across a tick of the distill heartbeat,
/// which fires every `distill_every` (ticks at multiples of it since the epoch). The
/// last batch always distills: a live daemon's heartbeat would get to it too.
pub fn plan(lines: &[ImportLine], distill_every: Duration) -> Vec<Batch> {
    let every = (distill_every.as_millis() as i64).max(1);
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| lines[i].ts_ms);
    let mut out: Vec<Batch> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut period: Option<i64> = None;
    for i in order {
        let p = lines[i].ts_ms.div_euclid(every);
        if period.is_some_and(|q| q != p) && !current.is_empty() {
            out.push(Batch {
                lines: std::mem::take(&mut current),
                distill_after: true,
            });
        } else if current.len() >= BATCH_LINES {
            out.push(Batch {
                lines: std::mem::take(&mut current),
                distill_after: false,
            });
        }
        period = Some(p);
        current.push(i);
    }
    if !current.is_empty() {
        out.push(Batch {
            lines: current,
            distill_after: true,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_460_800_000; // 2025-11-30

    fn body(lines: &[&str]) -> Vec<u8> {
        lines.join("\n").into_bytes()
    }

    #[test]
    fn lines_decode_with_every_time_form() {
        let b = body(&[
            r#"{"time": "2023-05-08T13:56:00Z", "speaker": "Caroline", "text": "Hi Mel!"}"#,
            "",
            r#"{"time": 1683554161, "speaker": " Melanie ", "text": "Hey", "source": "locomo", "id": "D1:2"}"#,
            "{\"time\": \"1683554162.5\", \"speaker\": \"Caroline\", \"text\": \"ok\", \"id\": 7}\r",
            r#"{"time": "2023-05-08T15:56:03+02:00", "speaker": "Caroline", "text": "same zone"}"#,
        ]);
        let lines = decode(&b, NOW).unwrap();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0].ts_ms, 1_683_554_160_000);
        assert_eq!((lines[0].line, lines[1].line, lines[3].line), (1, 3, 5));
        assert_eq!(lines[1].speaker, "Melanie", "trimmed");
        assert_eq!(lines[1].source.as_deref(), Some("locomo"));
        assert_eq!(lines[1].id.as_deref(), Some("D1:2"));
        assert_eq!(lines[2].ts_ms, 1_683_554_162_500);
        assert_eq!(lines[2].id.as_deref(), Some("7"));
        assert_eq!(lines[3].ts_ms, 1_683_554_163_000, "offsets are honoured");
        let e = lines[1].event();
        assert_eq!(
            (e.source.as_str(), e.input.as_str(), e.ts_ms),
            ("Melanie", "Hey", 1_683_554_161_000)
        );
        let t = text_event(&e);
        assert_eq!(
            (t.source.as_str(), t.ts, t.imported),
            ("Melanie", 1_683_554_161_000, true)
        );
    }

    #[test]
    fn a_bad_line_names_its_number_and_field() {
        let good = r#"{"time": 1683554161, "speaker": "A", "text": "fine"}"#;
        let mut ls = vec![good; 6];
        let cases: &[(&str, Option<&str>, &str)] = &[
            (
                r#"{"time": "yesterday", "speaker": "A", "text": "x"}"#,
                Some("time"),
                "RFC 3339",
            ),
            (r#"{"speaker": "A", "text": "x"}"#, Some("time"), "missing"),
            (
                r#"{"time": 1683554161000, "speaker": "A", "text": "x"}"#,
                Some("time"),
                "milliseconds",
            ),
            (
                r#"{"time": 4102444800, "speaker": "A", "text": "x"}"#,
                Some("time"),
                "future",
            ),
            (
                r#"{"time": true, "speaker": "A", "text": "x"}"#,
                Some("time"),
                "boolean",
            ),
            (
                r#"{"time": 1683554161, "speaker": "", "text": "x"}"#,
                Some("speaker"),
                "empty",
            ),
            (
                r#"{"time": 1683554161, "speaker": 3, "text": "x"}"#,
                Some("speaker"),
                "must be a string",
            ),
            (
                r#"{"time": 1683554161, "speaker": "A", "text": "  "}"#,
                Some("text"),
                "empty",
            ),
            (r#"{"time": 1683554161, "speaker": "A"}"#, Some("text"), "missing"),
            (
                r#"{"time": 1683554161, "speaker": "A", "text": "x", "txt": "y"}"#,
                Some("txt"),
                "unknown field",
            ),
            (
                r#"{"time": 1683554161, "speaker": "A", "text": "x", "id": [1]}"#,
                Some("id"),
                "array",
            ),
            (
                r#"{"time": "0001-01-01T00:00:00Z", "speaker": "A", "text": "x"}"#,
                Some("time"),
                "core.memory.import.earliest",
            ),
            (
                r#"{"time": 0, "speaker": "A", "text": "x"}"#,
                Some("time"),
                "broken export",
            ),
            // 23 h ahead: past the 5 minutes of skew.
            (
                r#"{"time": 1764543600, "speaker": "A", "text": "x"}"#,
                Some("time"),
                "more than 5m in the future",
            ),
            (r#"[1, 2]"#, None, "found a JSON array"),
            (r#"{"time": 1683554161, "#, None, "not a JSON object"),
        ];
        for (bad, field, words) in cases {
            ls.push(bad);
            let err = decode(&body(&ls), NOW).unwrap_err();
            ls.pop();
            assert_eq!(err.line(), Some(7), "{bad}: {err}");
            assert_eq!(err.field(), *field, "{bad}: {err}");
            let msg = err.to_string();
            assert!(msg.starts_with("line 7: "), "{msg}");
            assert!(msg.contains(words), "{bad}: {msg}");
        }
        // Over the text cap: its own error (the edge answers 413), naming the limit.
        let long = format!(
            r#"{{"time": 1683554161, "speaker": "A", "text": "{}"}}"#,
            "x".repeat(300 << 10)
        );
        ls.push(&long);
        let err = decode(&body(&ls), NOW).unwrap_err();
        ls.pop();
        assert!(matches!(err, ImportError::TooLarge { line: 7, .. }), "{err}");
        assert!(err.to_string().contains("262144 bytes"), "{err}");
        let within = Bounds {
            max_text_bytes: 400 << 10,
            ..Bounds::defaults(NOW)
        };
        ls.push(&long);
        assert!(decode_within(&body(&ls), &within).is_ok(), "the setting raises it");
        ls.pop();
        let mut bytes = body(&ls);
        bytes.extend_from_slice(b"\n{\"time\": 1, \"speaker\": \"\xff\", \"text\": \"x\"}");
        assert_eq!(decode(&bytes, NOW).unwrap_err(), ImportError::NotUtf8 { line: 7 });
        assert_eq!(decode(b"\n  \n", NOW).unwrap_err(), ImportError::Empty);
    }

    #[test]
    fn the_digest_is_who_said_what_when() {
        let b = body(&[
            r#"{"time": 1683554100, "speaker": "A", "text": "hello"}"#,
            r#"{"time": 1683554100, "speaker": "A", "text": "hello", "source": "elsewhere", "id": "x"}"#,
            r#"{"time": 1683554101, "speaker": "A", "text": "hello"}"#,
            r#"{"time": 1683554100, "speaker": "B", "text": "hello"}"#,
            r#"{"time": 1683554100, "speaker": "Ah", "text": "ello"}"#,
        ]);
        let d: Vec<String> = decode(&b, NOW).unwrap().iter().map(ImportLine::digest).collect();
        assert_eq!(d[0], d[1], "source and id are not identity");
        assert!(d[0].starts_with("sha256:") && d[0].len() == 71);
        for other in &d[2..] {
            assert_ne!(&d[0], other);
        }
        assert_ne!(d[3], d[4], "speaker and text do not run together");
    }

    #[test]
    fn the_plan_follows_time_and_the_heartbeat() {
        let every = Duration::from_secs(1800);
        let at = |secs: i64| ImportLine {
            line: 0,
            ts_ms: secs * 1000,
            speaker: "A".into(),
            text: "t".into(),
            source: None,
            id: None,
        };
        // Out of order; two periods of 30 min; the second has more than a batch.
        let mut lines = vec![at(1800 + 5), at(10), at(20)];
        lines.extend((0..BATCH_LINES + 3).map(|i| at(1800 + 10 + i as i64)));
        let batches = plan(&lines, every);
        assert_eq!(batches.len(), 3);
        assert_eq!(batches[0].lines, vec![1, 2]);
        assert!(batches[0].distill_after, "a tick falls between 00:00:20 and 00:30:05");
        assert_eq!(batches[1].lines.len(), BATCH_LINES);
        assert_eq!(batches[1].lines[0], 0, "time order across the input order");
        assert!(!batches[1].distill_after, "cut by size, not by a tick");
        assert_eq!(batches[2].lines.len(), 4);
        assert!(batches[2].distill_after, "the end distills");
        let all: usize = batches.iter().map(|b| b.lines.len()).sum();
        assert_eq!(all, lines.len());
        assert!(plan(&[], every).is_empty());
    }
}
