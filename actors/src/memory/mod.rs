//! Memory tiers: the context window and documents (`memory.db`), the graph
//! (`graph.db`), the knowledge base, the text log, the distillers and heartbeats.
//!
//! * [`tfidf`]: character 1-2 gram TF-IDF vectors and cosine;
//! * [`context`]: events, relevance pruning, budgets and the timeline block;
//! * [`graph`]: the graph tier (entities, relations, sentences) in `DATA/memory/graph.db`;
//! * [`graph_actor`]: `kernel/memory/graph` and the `memory_*` tools;
//! * [`keywords`]: jieba keyword extraction for recall queries;
//! * [`names`] + [`dates`]: names and absolute dates mentioned in English and Chinese text;
//! * [`summary`]: extractive document summaries (topics, names, dates, key sentences);
//! * [`rules`] (Chinese) + [`rules_en`] (English) + [`distiller`]: the rule distiller
//!   (self-statements in the text log → graph);
//! * [`maintenance`] + [`graph_heartbeat`]: the archive, merge and review heartbeats;
//! * [`social`]: people's traits and ties on the graph (`person_*` tools);
//! * [`store`]: `DATA/memory/memory.db` (write-through);
//! * [`forget`]: the owner's deletion of a document, complete across the tiers;
//! * [`docindex`]: the in-memory search index of the document tier (BM25 + vectors);
//! * [`quant`]: those vectors as `i8` codes, and the scan over them;
//! * [`actor`]: the `kernel/memory/context` actor (the context window);
//! * [`documents`]: the `kernel/memory/documents` actor (documents, passages, their indexes);
//! * [`embed`]: dense embedders (ONNX MiniLM, remote `/v1/embeddings`) and `kernel/memory/embedder`;
//! * [`retrieve`]: BM25, dense and hybrid ranking (agent document lookup, `homed eval`);
//! * [`import`] + [`importer`]: importing a history (validation and plan; its execution);
//! * [`start`]: starts the subsystem and answers its typed [`start::MemoryHandles`].

pub mod actor;
pub mod bpe;
pub mod context;
pub mod dates;
pub mod distiller;
pub mod docindex;
pub mod documents;
pub mod embed;
pub mod forget;
pub mod graph;
pub mod graph_actor;
pub mod graph_heartbeat;
pub mod heartbeat;
pub mod import;
pub mod importer;
pub mod keywords;
pub mod knowledge;
pub mod maintenance;
pub mod media;
pub mod names;
pub mod quant;
pub mod recall;
pub mod retrieve;
pub mod rules;
pub mod rules_en;
pub mod social;
pub mod start;
pub mod store;
pub mod summary;
pub mod textlog;
pub mod tfidf;
pub mod tokens;

pub use context::Event;

/// Unix milliseconds now on the kernel's clock ([`crate::clock`]): the unit of every
/// memory timestamp.
pub fn now_ms() -> i64 {
    crate::clock::now_ms()
}

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
