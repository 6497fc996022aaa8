//! The text log: every turn as one JSON line, in files that rotate by age or size
//! (`DATA/memory/text/text_YYYY-MM-DD_HH-MM-SS.jsonl`). It is the raw record the
//! distiller and audits read; nothing in it is ever rewritten by the kernel.
//!
//! Unlike the reference (whose size check only looked at the file when it was opened,
//! so size-based rotation never fired within one process), the bytes written are
//! counted as they are written.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use serde::{Deserialize, Serialize};

use crate::host::{Handles, HostContext, KernelActor};

/// Default rotation age.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Default rotation size.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextEvent {
    /// Unix milliseconds.
    pub ts: i64,
    pub source: String,
    pub input: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub response: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_used: Vec<String>,
    /// Written by a history import (`POST /api/v1/memory/import`), which distils its
    /// turns itself: the rule distiller's timer rounds skip such lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub imported: bool,
    /// `L1`..`L4` when the input was an interrupt (a timer reminder, an urgent message):
    /// the chat shows it as such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The media blocks (image ids) the input carried: the chat shows them again from
    /// the media memory after a reload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<String>,
}

/// The writer (a plain struct; the actor below only forwards to it).
pub struct TextLog {
    dir: PathBuf,
    max_age: Duration,
    max_bytes: u64,
    current: Option<(File, PathBuf, SystemTime, u64)>,
}

fn file_name(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = super::civil_from_days(days);
    format!(
        "text_{y:04}-{m:02}-{d:02}_{:02}-{:02}-{:02}.jsonl",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

impl TextLog {
    pub fn new(dir: &Path, max_age: Duration, max_bytes: u64) -> Self {
        Self {
            dir: dir.to_owned(),
            max_age,
            max_bytes,
            current: None,
        }
    }

    fn open_new(&mut self, now: SystemTime) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut path = self.dir.join(file_name(now));
        let mut n = 1;
        while path.exists() {
            // Two rotations in one second (tiny size limits): keep names unique.
            // `_NN` sorts after the plain name (`.` < `_`), so replay order holds.
            path = self
                .dir
                .join(format!("{}_{n:02}.jsonl", file_name(now).trim_end_matches(".jsonl")));
            n += 1;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        self.current = Some((file, path, now, 0));
        Ok(())
    }

    /// Appends one event (rotating first when the current file is too old or too big).
    pub fn append(&mut self, event: &TextEvent, now: SystemTime) -> std::io::Result<()> {
        let rotate = match &self.current {
            None => true,
            Some((_, _, opened, bytes)) => {
                now.duration_since(*opened).unwrap_or_default() > self.max_age || *bytes >= self.max_bytes
            }
        };
        if rotate {
            self.open_new(now)?;
        }
        let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let (file, _, _, bytes) = self.current.as_mut().expect("opened above");
        file.write_all(&line)?;
        *bytes += line.len() as u64;
        Ok(())
    }

    /// Every event of every file, oldest file first; malformed lines are skipped.
    pub fn replay(dir: &Path) -> Vec<TextEvent> {
        Self::replay_since(dir, SystemTime::UNIX_EPOCH)
    }

    /// Like [`Self::replay`], but skips files last written before `since`: they cannot
    /// hold a newer event, so a reader that keeps a cursor does not re-read the whole
    /// history every round.
    pub fn replay_since(dir: &Path, since: SystemTime) -> Vec<TextEvent> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter(|e| e.metadata().and_then(|m| m.modified()).map_or(true, |t| t >= since))
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        let mut out = Vec::new();
        for f in files {
            let Ok(file) = File::open(&f) else { continue };
            for line in BufReader::new(file).lines().map_while(Result::ok) {
                if let Ok(e) = serde_json::from_str(&line) {
                    out.push(e);
                }
            }
        }
        out
    }
}

impl TextLog {
    /// Rewrites every file of the log, keeping the events `edit` returns `Some` for
    /// (changed or not) and dropping the others; files left empty are deleted. Each
    /// file is replaced atomically (temporary file + rename), and appends go to a fresh
    /// file afterwards. Returns how many events were dropped or changed.
    pub fn rewrite(&mut self, mut edit: impl FnMut(&TextEvent) -> Edit) -> std::io::Result<usize> {
        // The current file is about to be replaced: appends must not go to its old inode.
        self.current = None;
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        files.sort();
        let mut affected = 0;
        for f in files {
            let text = std::fs::read_to_string(&f)?;
            let mut out = String::with_capacity(text.len());
            let mut changed = false;
            for line in text.lines() {
                let Ok(ev) = serde_json::from_str::<TextEvent>(line) else {
                    // Not ours to judge: malformed lines stay as they were.
                    out.push_str(line);
                    out.push('\n');
                    continue;
                };
                match edit(&ev) {
                    Edit::Keep => {
                        out.push_str(line);
                        out.push('\n');
                    }
                    Edit::Drop => {
                        affected += 1;
                        changed = true;
                    }
                    Edit::Replace(new) => {
                        affected += 1;
                        changed = true;
                        out.push_str(&serde_json::to_string(&new).map_err(std::io::Error::other)?);
                        out.push('\n');
                    }
                }
            }
            if !changed {
                continue;
            }
            if out.is_empty() {
                std::fs::remove_file(&f)?;
            } else {
                let tmp = f.with_extension("jsonl.tmp");
                std::fs::write(&tmp, out.as_bytes())?;
                File::open(&tmp)?.sync_all()?;
                std::fs::rename(&tmp, &f)?;
            }
        }
        Ok(affected)
    }
}

/// What [`TextLog::rewrite`] does with one event.
pub enum Edit {
    Keep,
    Drop,
    Replace(TextEvent),
}

/// Why the text log could not do what it was asked (the texts say where to look).
#[derive(Debug, thiserror::Error)]
pub enum TextLogError {
    /// A purge or an edit could not rewrite a day's file.
    #[error("{0}; check DATA/memory/text")]
    Rewrite(std::io::Error),
    /// An append failed.
    #[error("cannot write the text log: {0}; check disk space and DATA/memory/text")]
    Append(std::io::Error),
}

/// `kernel/memory/textlog`.
pub struct TextLogActor {
    log: TextLog,
    /// Consecutive failures, to log the first one loudly only.
    failures: u32,
}

impl TextLogActor {
    pub fn new(log: TextLog) -> Self {
        Self { log, failures: 0 }
    }
}

impl KernelActor for TextLogActor {
    const KIND: &'static str = "textlog";
}

/// Appends one event.
#[derive(Message)]
#[rtype(result = "()")]
pub struct LogText(pub TextEvent);

/// `memory_purge`'s text side: drops events whose source, input or response contains
/// the text. Answers how many were dropped.
#[derive(Message)]
#[rtype(result = "Result<usize, TextLogError>")]
pub struct PurgeText(pub String);

/// `memory_edit`'s text side: replaces `old` by `new` in events' input and response.
/// Answers how many events changed.
#[derive(Message)]
#[rtype(result = "Result<usize, TextLogError>")]
pub struct ReplaceText {
    pub old: String,
    pub new: String,
}

impl Handles<PurgeText> for TextLogActor {
    type Reply = Result<usize, TextLogError>;
    fn handle(&mut self, PurgeText(needle): PurgeText, _: &mut HostContext<Self>) -> Self::Reply {
        if needle.trim().is_empty() {
            return Ok(0);
        }
        let n = self
            .log
            .rewrite(|e| {
                if e.source.contains(&needle) || e.input.contains(&needle) || e.response.contains(&needle) {
                    Edit::Drop
                } else {
                    Edit::Keep
                }
            })
            .map_err(TextLogError::Rewrite)?;
        tracing::info!(needle = %needle, dropped = n, "text log purged");
        Ok(n)
    }
}

impl Handles<ReplaceText> for TextLogActor {
    type Reply = Result<usize, TextLogError>;
    fn handle(&mut self, m: ReplaceText, _: &mut HostContext<Self>) -> Self::Reply {
        if m.old.trim().is_empty() || m.old == m.new {
            return Ok(0);
        }
        let n = self
            .log
            .rewrite(|e| {
                if e.input.contains(&m.old) || e.response.contains(&m.old) {
                    let mut e = e.clone();
                    e.input = e.input.replace(&m.old, &m.new);
                    e.response = e.response.replace(&m.old, &m.new);
                    Edit::Replace(e)
                } else {
                    Edit::Keep
                }
            })
            .map_err(TextLogError::Rewrite)?;
        tracing::info!(old = %m.old, new = %m.new, changed = n, "text log edited");
        Ok(n)
    }
}

impl Handles<LogText> for TextLogActor {
    type Reply = ();
    fn handle(&mut self, LogText(e): LogText, _: &mut HostContext<Self>) {
        match self.log.append(&e, crate::clock::now_system()) {
            Ok(()) => self.failures = 0,
            Err(err) => {
                if self.failures == 0 {
                    tracing::error!("{}", TextLogError::Append(err));
                }
                self.failures += 1;
            }
        }
    }
}

/// Appends several events and answers once they are written (an import waits for its
/// record before it answers; a turn's [`LogText`] does not wait).
#[derive(Message)]
#[rtype(result = "Result<(), TextLogError>")]
pub struct LogTexts(pub Vec<TextEvent>);

impl Handles<LogTexts> for TextLogActor {
    type Reply = Result<(), TextLogError>;
    fn handle(&mut self, LogTexts(events): LogTexts, _: &mut HostContext<Self>) -> Self::Reply {
        let now = crate::clock::now_system();
        for e in &events {
            self.log.append(e, now).map_err(TextLogError::Append)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(i: i64) -> TextEvent {
        TextEvent {
            media: Vec::new(),
            ts: i,
            source: "http".into(),
            input: format!("message {i}"),
            response: "ok".into(),
            tools_used: vec![],
            imported: false,
            level: None,
        }
    }

    #[test]
    fn rewrite_drops_and_replaces_events_and_appends_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_764_460_800);
        let mut log = TextLog::new(dir.path(), MAX_AGE, 150);
        for i in 0..6 {
            log.append(&ev(i), t0).unwrap();
        }
        std::fs::write(dir.path().join("text_2025-11-29_00-00-00.jsonl"), "not json\n").unwrap();
        let dropped = log
            .rewrite(|e| {
                if e.input.ends_with(" 0") || e.input.ends_with(" 1") {
                    Edit::Drop
                } else {
                    Edit::Keep
                }
            })
            .unwrap();
        assert_eq!(dropped, 2);
        let changed = log
            .rewrite(|e| {
                if e.input == "message 5" {
                    let mut e = e.clone();
                    e.input = "edited 5".into();
                    Edit::Replace(e)
                } else {
                    Edit::Keep
                }
            })
            .unwrap();
        assert_eq!(changed, 1);
        log.append(&ev(6), t0 + Duration::from_secs(1)).unwrap();
        let inputs: Vec<String> = TextLog::replay(dir.path()).into_iter().map(|e| e.input).collect();
        assert_eq!(inputs, ["message 2", "message 3", "message 4", "edited 5", "message 6"]);
        // Malformed lines are left alone; no temporary files remain.
        let all: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(all.iter().all(|n| n.ends_with(".jsonl")), "{all:?}");
        assert!(all.contains(&"text_2025-11-29_00-00-00.jsonl".to_string()));
    }

    #[test]
    fn rotates_by_size_within_one_process_and_by_age() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_764_460_800); // 2025-11-30 00:00:00 UTC
        let mut log = TextLog::new(dir.path(), MAX_AGE, 200);
        for i in 0..6 {
            log.append(&ev(i), t0).unwrap();
        }
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert!(files >= 2, "size rotation fired ({files} files)");
        log.append(&ev(6), t0 + Duration::from_secs(25 * 3600)).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().any(|n| n == "text_2025-12-01_01-00-00.jsonl"), "{names:?}");
        assert!(
            names.iter().any(|n| n.starts_with("text_2025-11-30_00-00-00")),
            "{names:?}"
        );
        std::fs::write(dir.path().join("text_2099-01-01_00-00-00.jsonl"), "not json\n").unwrap();
        let all = TextLog::replay(dir.path());
        assert_eq!(
            all.iter().map(|e| e.ts).collect::<Vec<_>>(),
            (0..7).collect::<Vec<_>>(),
            "malformed lines skipped"
        );
    }
}
