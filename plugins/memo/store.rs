//! The notes in SQLite (`memo.db` in the plugin's data directory), and the search.
//!
//! Every write is one autocommitted statement in WAL mode with `synchronous=FULL`: it
//! is on disk before the tool or API answers, so a `kill -9` of the plugin or of the
//! daemon right after the answer loses nothing.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Value, json};

/// One note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub id: i64,
    pub text: String,
    pub tags: Vec<String>,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// When the reminder is due (none: no reminder).
    pub remind_at_ms: Option<i64>,
    /// When the reminder reached the agent.
    pub reminded_ms: Option<i64>,
    /// When the note was marked done.
    pub done_ms: Option<i64>,
}

impl Note {
    /// The note as the page's API answers it.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "text": self.text,
            "tags": self.tags,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "remind_at_ms": self.remind_at_ms,
            "reminded_ms": self.reminded_ms,
            "done_ms": self.done_ms,
        })
    }

    fn from_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        let tags: String = r.get("tags")?;
        Ok(Note {
            id: r.get("id")?,
            text: r.get("text")?,
            tags: serde_json::from_str(&tags).unwrap_or_default(),
            created_ms: r.get("created_ms")?,
            updated_ms: r.get("updated_ms")?,
            remind_at_ms: r.get("remind_at_ms")?,
            reminded_ms: r.get("reminded_ms")?,
            done_ms: r.get("done_ms")?,
        })
    }
}

/// Tags as given: trimmed, without a leading `#`, empty ones and repeats dropped.
pub fn clean_tags<'a>(tags: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.trim().trim_start_matches('#').trim();
        if !t.is_empty() && !out.iter().any(|o| o.to_lowercase() == t.to_lowercase()) {
            out.push(t.to_owned());
        }
    }
    out
}

/// Whether `note` matches every word of `query` (split at whitespace), each a
/// case-insensitive substring of its text or of one of its tags. Chinese needs no
/// word breaks: `牛奶` is found inside `买牛奶和面包`. An empty query matches all.
pub fn matches(note: &Note, query: &str) -> bool {
    let text = note.text.to_lowercase();
    let tags: Vec<String> = note.tags.iter().map(|t| t.to_lowercase()).collect();
    query.split_whitespace().all(|w| {
        let w = w.to_lowercase();
        let w = w.trim_start_matches('#');
        w.is_empty() || text.contains(w) || tags.iter().any(|t| t.contains(w))
    })
}

/// What a listing includes.
#[derive(Debug, Clone, Default)]
pub struct Filter<'a> {
    /// Words that must all match (see [`matches`]).
    pub query: &'a str,
    /// A tag the notes must carry (case-insensitive, exact).
    pub tag: Option<&'a str>,
    pub include_done: bool,
}

pub struct Store {
    conn: Connection,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    remind_at_ms INTEGER,
    reminded_ms INTEGER,
    done_ms INTEGER
);
CREATE INDEX IF NOT EXISTS notes_due ON notes (remind_at_ms) WHERE reminded_ms IS NULL AND done_ms IS NULL;
";

impl Store {
    /// Opens (creating) `memo.db` in `dir`.
    pub fn open(dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("memo.db");
        let conn = Connection::open(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        Self::init(conn).map_err(|e| format!("cannot prepare {}: {e}", path.display()))
    }

    /// A store in memory (tests).
    pub fn in_memory() -> Self {
        Self::init(Connection::open_in_memory().expect("sqlite in memory")).expect("schema")
    }

    fn init(conn: Connection) -> rusqlite::Result<Self> {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self { conn })
    }

    fn err(e: rusqlite::Error) -> String {
        format!("the notes database failed: {e}")
    }

    pub fn add(&self, text: &str, tags: &[String], remind_at_ms: Option<i64>, now_ms: i64) -> Result<Note, String> {
        self.conn
            .execute(
                "INSERT INTO notes (text, tags, created_ms, updated_ms, remind_at_ms) VALUES (?1, ?2, ?3, ?3, ?4)",
                params![text, json!(tags).to_string(), now_ms, remind_at_ms],
            )
            .map_err(Self::err)?;
        let id = self.conn.last_insert_rowid();
        self.get(id)?.ok_or_else(|| format!("note #{id} vanished"))
    }

    pub fn get(&self, id: i64) -> Result<Option<Note>, String> {
        self.conn
            .query_row("SELECT * FROM notes WHERE id = ?1", [id], Note::from_row)
            .optional()
            .map_err(Self::err)
    }

    /// Notes matching `f`, open ones first, then newest first; at most `limit`, and
    /// how many matched in all.
    pub fn list(&self, f: &Filter<'_>, limit: usize) -> Result<(Vec<Note>, usize), String> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT * FROM notes ORDER BY done_ms IS NOT NULL, id DESC")
            .map_err(Self::err)?;
        let rows = stmt.query_map([], Note::from_row).map_err(Self::err)?;
        let mut out = Vec::new();
        let mut total = 0;
        for n in rows {
            let n = n.map_err(Self::err)?;
            if (!f.include_done && n.done_ms.is_some())
                || f.tag
                    .is_some_and(|t| !n.tags.iter().any(|x| x.to_lowercase() == t.to_lowercase()))
                || !matches(&n, f.query)
            {
                continue;
            }
            total += 1;
            if out.len() < limit {
                out.push(n);
            }
        }
        Ok((out, total))
    }

    /// Changes what is given (`remind_at`: `Some(None)` clears the reminder; a new
    /// time re-arms it). Answers the note after the change, `None` when there is none.
    pub fn update(
        &self,
        id: i64,
        text: Option<&str>,
        tags: Option<&[String]>,
        remind_at: Option<Option<i64>>,
        now_ms: i64,
    ) -> Result<Option<Note>, String> {
        let tx = self.conn.unchecked_transaction().map_err(Self::err)?;
        if self.get(id)?.is_none() {
            return Ok(None);
        }
        if let Some(text) = text {
            tx.execute("UPDATE notes SET text = ?2 WHERE id = ?1", params![id, text])
                .map_err(Self::err)?;
        }
        if let Some(tags) = tags {
            tx.execute(
                "UPDATE notes SET tags = ?2 WHERE id = ?1",
                params![id, json!(tags).to_string()],
            )
            .map_err(Self::err)?;
        }
        if let Some(at) = remind_at {
            tx.execute(
                "UPDATE notes SET remind_at_ms = ?2, reminded_ms = NULL WHERE id = ?1",
                params![id, at],
            )
            .map_err(Self::err)?;
        }
        tx.execute("UPDATE notes SET updated_ms = ?2 WHERE id = ?1", params![id, now_ms])
            .map_err(Self::err)?;
        tx.commit().map_err(Self::err)?;
        self.get(id)
    }

    /// Marks a note done (its pending reminder will not come). Answers the note,
    /// `None` when there is none.
    pub fn done(&self, id: i64, now_ms: i64) -> Result<Option<Note>, String> {
        self.conn
            .execute(
                "UPDATE notes SET done_ms = COALESCE(done_ms, ?2), updated_ms = ?2 WHERE id = ?1",
                params![id, now_ms],
            )
            .map_err(Self::err)?;
        self.get(id)
    }

    /// Deletes a note; answers whether there was one.
    pub fn delete(&self, id: i64) -> Result<bool, String> {
        self.conn
            .execute("DELETE FROM notes WHERE id = ?1", [id])
            .map(|n| n > 0)
            .map_err(Self::err)
    }

    /// The earliest reminder not yet delivered, of a note not done.
    pub fn next_due(&self) -> Result<Option<Note>, String> {
        self.conn
            .query_row(
                "SELECT * FROM notes WHERE remind_at_ms IS NOT NULL AND reminded_ms IS NULL AND done_ms IS NULL
                 ORDER BY remind_at_ms, id LIMIT 1",
                [],
                Note::from_row,
            )
            .optional()
            .map_err(Self::err)
    }

    /// Records that the reminder due at `due_ms` reached the agent (unless the note's
    /// reminder changed meanwhile).
    pub fn mark_reminded(&self, id: i64, due_ms: i64, now_ms: i64) -> Result<(), String> {
        self.conn
            .execute(
                "UPDATE notes SET reminded_ms = ?3 WHERE id = ?1 AND remind_at_ms = ?2",
                params![id, due_ms, now_ms],
            )
            .map(|_| ())
            .map_err(Self::err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(t: &[&str]) -> Vec<String> {
        clean_tags(t.iter().copied())
    }

    #[test]
    fn search_is_case_insensitive_substring_over_text_and_tags_and_finds_chinese() {
        let s = Store::in_memory();
        let milk = s.add("买牛奶和面包", &tags(&["购物"]), None, 1).unwrap();
        let call = s
            .add("Call Alice about the Rust meetup", &tags(&["Work", "#people"]), None, 2)
            .unwrap();
        let q = |query: &str| -> Vec<i64> {
            let f = Filter {
                query,
                ..Filter::default()
            };
            s.list(&f, 10).unwrap().0.into_iter().map(|n| n.id).collect()
        };
        assert_eq!(q("牛奶"), [milk.id]);
        assert_eq!(q("购物"), [milk.id], "a tag matches");
        assert_eq!(q("alice RUST"), [call.id], "every word, any case");
        assert_eq!(q("#work"), [call.id]);
        assert_eq!(q("peop"), [call.id], "substring of a tag");
        assert!(q("alice 牛奶").is_empty());
        assert_eq!(q(""), [call.id, milk.id], "newest first");
        assert_eq!(call.tags, ["Work", "people"]);
    }

    #[test]
    fn done_notes_leave_the_default_listing_and_their_reminders() {
        let s = Store::in_memory();
        let a = s.add("a", &[], Some(100), 1).unwrap();
        let b = s.add("b", &tags(&["x"]), Some(50), 1).unwrap();
        assert_eq!(s.next_due().unwrap().unwrap().id, b.id);
        assert!(s.done(b.id, 5).unwrap().unwrap().done_ms == Some(5));
        assert_eq!(s.next_due().unwrap().unwrap().id, a.id);
        let (open, total) = s.list(&Filter::default(), 10).unwrap();
        assert_eq!((open.len(), total), (1, 1));
        let all = Filter {
            include_done: true,
            ..Filter::default()
        };
        let (all_notes, _) = s.list(&all, 10).unwrap();
        assert_eq!(
            all_notes.iter().map(|n| n.id).collect::<Vec<_>>(),
            [a.id, b.id],
            "open first"
        );
        let tagged = Filter {
            tag: Some("X"),
            include_done: true,
            ..Filter::default()
        };
        assert_eq!(s.list(&tagged, 10).unwrap().1, 1);
        s.mark_reminded(a.id, 100, 7).unwrap();
        assert!(s.next_due().unwrap().is_none());
    }

    #[test]
    fn updates_rearm_the_reminder_and_a_stale_delivery_does_not_count() {
        let s = Store::in_memory();
        let a = s.add("a", &[], Some(100), 1).unwrap();
        s.mark_reminded(a.id, 100, 101).unwrap();
        let u = s.update(a.id, Some("a2"), None, Some(Some(300)), 200).unwrap().unwrap();
        assert_eq!(
            (u.text.as_str(), u.remind_at_ms, u.reminded_ms, u.updated_ms),
            ("a2", Some(300), None, 200)
        );
        // A delivery of the old time (raced with the update) leaves the new one armed.
        s.mark_reminded(a.id, 100, 301).unwrap();
        assert_eq!(s.next_due().unwrap().unwrap().remind_at_ms, Some(300));
        let cleared = s
            .update(a.id, None, Some(&tags(&["t"])), Some(None), 400)
            .unwrap()
            .unwrap();
        assert_eq!((cleared.remind_at_ms, cleared.tags.len()), (None, 1));
        assert!(s.update(99, Some("x"), None, None, 1).unwrap().is_none());
        assert!(s.delete(a.id).unwrap());
        assert!(!s.delete(a.id).unwrap());
    }

    #[test]
    fn notes_survive_reopening_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let id = Store::open(dir.path())
            .unwrap()
            .add("keep me", &[], None, 1)
            .unwrap()
            .id;
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(s.get(id).unwrap().unwrap().text, "keep me");
    }
}
