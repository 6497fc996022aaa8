//! Memory: three tiers (the context window → documents → the graph) plus the knowledge
//! base, media, the text log, embeddings and search indexes, and the lifecycle that
//! moves what was said between them as time passes. One folder per tier or role:
//!
//! * [`context`]: the window (`kernel/memory/context`), history import;
//! * [`documents`]: documents and their passages (`kernel/memory/documents`);
//! * [`graph`]: entities, relations, sentences (`kernel/memory/graph`), social ties;
//! * [`knowledge`]: the knowledge base (plain files);
//! * [`media`]: images as memory blocks;
//! * [`embed`]: dense embedders and `kernel/memory/embedder`;
//! * [`index`]: the search indexes and rankers shared by the tiers;
//! * [`text`]: token counts, keywords, names, dates, the distiller's rules (en + zh);
//! * [`lifecycle`]: heartbeats on the kernel clock, their policy core, the owner's deletion;
//! * [`recall`]: per-turn recall across the tiers (a plain core);
//! * [`store`]: `DATA/memory/memory.db` (write-through), shared by the context and
//!   document tiers (one connection each);
//! * [`textlog`]: the raw record of every turn (`DATA/memory/text`);
//! * [`start`]: starts the subsystem and answers its typed [`start::MemoryHandles`].
//!
//! Each module has one name, its path (`memory::graph::actor`, `memory::text::keywords`):
//! no flat re-exports. Every memory timestamp is `crate::clock::now_ms()`.

pub mod context;
pub mod documents;
pub mod embed;
pub mod graph;
pub mod index;
pub mod knowledge;
pub mod lifecycle;
pub mod media;
pub mod recall;
pub mod start;
pub mod store;
pub mod text;
pub mod textlog;

/// The first `n` characters of `s`, with `ellipsis` appended when something was cut.
pub(crate) fn truncate_chars(s: &str, n: usize, ellipsis: &str) -> String {
    let mut it = s.chars();
    let head: String = it.by_ref().take(n).collect();
    if it.next().is_some() {
        format!("{head}{ellipsis}")
    } else {
        head
    }
}

/// The civil date (year, month 1–12, day 1–31) of a day number since 1970-01-01 (UTC,
/// proleptic Gregorian; Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Opens (creating its directory) a memory database the way every tier wants it:
/// WAL with `synchronous=NORMAL` (committed data survives a killed daemon; see
/// `store.rs` for why not FULL) and a 5 s busy timeout.
///
/// Several connections write each database (the context actor, the embedder, the
/// importer, the heartbeats), so every write transaction of the tiers is `IMMEDIATE`:
/// a deferred one that reads first and then writes cannot be upgraded once another
/// connection committed in between, and fails at once with "database is locked"
/// whatever the busy timeout (seen as the embedder's "storing vectors" retries during
/// `homed bench turn`). Taking the write lock at `BEGIN` makes it wait its turn instead.
pub(crate) fn open_db(path: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}
