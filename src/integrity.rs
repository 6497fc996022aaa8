//! Damage is noticed at start: before anything opens them, the data dir's databases get
//! SQLite's `PRAGMA quick_check`, and a database that held data at the last start but is
//! now missing or empty is reported.
//!
//! Why refuse instead of warn: SQLite opens a damaged file and answers most queries, and
//! it opens a missing or zero-length file as a new empty database. Either way the daemon
//! would serve on, and the owner would find out (if ever) when a memory is gone. A
//! refusal that names the file and the way out costs one restart; a silent empty tier
//! costs the memory. The daemon's own snapshots are taken only before an upgrade
//! (`crate::upgrade`, `homed rollback`), so the way out is the owner's backup, such a
//! snapshot, or moving the file aside to start that tier empty — a choice the owner
//! makes, never the daemon.
//!
//! How the daemon knows a file held data: after every successful start it writes
//! `DATA/databases.json`, the size of each kernel database (main file and WAL). A file
//! recorded there with bytes that is now gone or zero-length is refused. Deleting the
//! manifest is the owner's way to accept the loss (it is written anew at that start);
//! so is a damaged file moved aside as the refusal says (`<file>.damaged` beside it).
//!
//! Plugins' own databases (`DATA/plugin_data/<plugin>/*.db`) are checked too, but only
//! reported: the plugin owns them and the kernel does not depend on them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The kernel's databases, relative to the data dir, with the part of the daemon each
/// one holds (named in the refusal, so the owner knows what starting it empty loses):
/// the one list the upgrade gate uses too (`homeagent_actors::schema`).
fn kernel_databases() -> impl Iterator<Item = (&'static str, &'static str)> {
    homeagent_actors::schema::databases()
        .into_iter()
        .map(|d| (d.file, d.holds))
}

/// The manifest of what each kernel database held at the last successful start.
pub const MANIFEST: &str = "databases.json";

/// How long one database's `quick_check` may take before the start goes on without
/// its end (logged; `homed selftest` checks it fully). A check reads every page: a
/// few hundred milliseconds for a year of turns, seconds for a huge memory.
pub const CHECK_BUDGET: Duration = Duration::from_secs(10);

/// Why the daemon refuses to start on its data dir.
#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    #[error(
        "{path} is damaged (PRAGMA quick_check: {problem}); homed will not start on it. Restore it (with its -wal file) from your backup of the data directory, or move it aside to start the {tier} empty: mv '{path}' '{path}.damaged' (and its -wal and -shm files, if any); then start homed again"
    )]
    Damaged {
        path: PathBuf,
        tier: &'static str,
        problem: String,
    },
    #[error(
        "{path} cannot be read as a SQLite database ({source}); homed will not start on it. Restore it from your backup of the data directory, or move it aside to start the {tier} empty: mv '{path}' '{path}.damaged'; then start homed again"
    )]
    Unreadable {
        path: PathBuf,
        tier: &'static str,
        source: rusqlite::Error,
    },
    #[error(
        "{path} held {bytes} bytes at the last start (recorded in {manifest}) but is now {state}; homed will not start the {tier} empty on its own. Restore the file from your backup of the data directory, or, to start with that part empty, delete {manifest}; then start homed again"
    )]
    Vanished {
        path: PathBuf,
        tier: &'static str,
        bytes: u64,
        state: Vanish,
        manifest: PathBuf,
    },
    #[error("cannot write {path}: {source}; is the disk full or the data directory read-only?")]
    WriteManifest { path: PathBuf, source: std::io::Error },
}

/// How a recorded database went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vanish {
    Missing,
    Empty,
}

impl std::fmt::Display for Vanish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Vanish::Missing => "missing",
            Vanish::Empty => "empty (0 bytes)",
        })
    }
}

/// `DATA/databases.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    /// Bytes of each kernel database (main file + WAL) by its path in the data dir.
    databases: BTreeMap<String, u64>,
}

/// What the check of one database found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// The check ran past [`CHECK_BUDGET`] and was interrupted: not known to be damaged.
    Unfinished,
    /// Its problems, as `quick_check` lists them (at most a few).
    Damaged(String),
}

/// Bytes of a database: its main file and its WAL (a database whose last writes are in
/// the WAL only is not empty). `None` when the main file does not exist.
fn size_of(path: &Path) -> Option<u64> {
    let main = std::fs::metadata(path).ok()?.len();
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    Some(main + std::fs::metadata(PathBuf::from(wal)).map_or(0, |m| m.len()))
}

/// `PRAGMA quick_check` of the database at `path` (which must exist: the open never
/// creates it), interrupted after `budget`.
pub fn quick_check(path: &Path, budget: Duration) -> Result<Verdict, rusqlite::Error> {
    use rusqlite::OpenFlags;
    // Read-write (not read-only) so a WAL left by a `kill -9` is recovered and checked
    // with the rest; no CREATE, so a file is never made here.
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // The watchdog interrupts the check at the budget; dropping `done` ends it early.
    let handle = conn.get_interrupt_handle();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if wait.recv_timeout(budget) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            handle.interrupt();
        }
    });
    let rows = (|| {
        let mut stmt = conn.prepare("PRAGMA quick_check(5)")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<Result<Vec<_>, _>>()
    })();
    drop(done);
    let _ = watchdog.join();
    match rows {
        Ok(rows) if rows.len() == 1 && rows[0] == "ok" => Ok(Verdict::Ok),
        Ok(rows) => Ok(Verdict::Damaged(
            rows.iter()
                .flat_map(|r| r.lines())
                .take(5)
                .collect::<Vec<_>>()
                .join("; "),
        )),
        Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::OperationInterrupted => {
            Ok(Verdict::Unfinished)
        }
        // A page so damaged that the check itself stops is a finding, not an open error.
        Err(rusqlite::Error::SqliteFailure(e, msg)) if e.code == rusqlite::ErrorCode::DatabaseCorrupt => Ok(
            Verdict::Damaged(msg.unwrap_or_else(|| "database disk image is malformed".into())),
        ),
        Err(e) => Err(e),
    }
}

/// The group-0 check of `data`: every kernel database that exists is `quick_check`ed,
/// every one the manifest says held data must still exist with bytes, and plugins'
/// databases are checked and reported. The first refusal is returned.
pub fn check_data_dir(data: &Path) -> Result<(), IntegrityError> {
    let manifest_path = data.join(MANIFEST);
    let manifest: Manifest = std::fs::read(&manifest_path)
        .ok()
        .and_then(|b| match serde_json::from_slice(&b) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!(path = %manifest_path.display(), "unreadable database manifest ignored ({e}); it is written anew after this start");
                None
            }
        })
        .unwrap_or_default();
    for (name, tier) in kernel_databases() {
        let path = data.join(name);
        let recorded = manifest.databases.get(name).copied().unwrap_or(0);
        let state = match std::fs::metadata(&path) {
            Err(_) => Some(Vanish::Missing),
            Ok(m) if m.len() == 0 && size_of(&path) == Some(0) => Some(Vanish::Empty),
            Ok(_) => None,
        };
        if let Some(state) = state {
            if recorded > 0 && state == Vanish::Missing && aside(&path).exists() {
                // The owner followed the way out of a damaged file: that tier starts empty.
                tracing::warn!(
                    db = %path.display(),
                    "starting the {tier} empty: the damaged file was moved aside to {}",
                    aside(&path).display()
                );
                continue;
            }
            if recorded > 0 {
                return Err(IntegrityError::Vanished {
                    path,
                    tier,
                    bytes: recorded,
                    state,
                    manifest: manifest_path,
                });
            }
            // Never held anything (first start, or a tier not used yet): nothing to check.
            continue;
        }
        check_one(&path, tier)?;
    }
    for path in plugin_databases(data) {
        if let Err(e) = check_one(&path, "plugin's data") {
            tracing::warn!("{e}");
        }
    }
    Ok(())
}

/// Where the way out of a damaged `path` moves it: `<file>.damaged` beside it. Its
/// presence tells the next start that a missing file is the owner's choice.
pub fn aside(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".damaged");
    PathBuf::from(name)
}

/// One database's check, logged with how long it took.
fn check_one(path: &Path, tier: &'static str) -> Result<(), IntegrityError> {
    let t0 = Instant::now();
    let verdict = quick_check(path, CHECK_BUDGET).map_err(|source| IntegrityError::Unreadable {
        path: path.to_owned(),
        tier,
        source,
    })?;
    let ms = t0.elapsed().as_millis() as u64;
    let bytes = size_of(path).unwrap_or(0);
    match verdict {
        Verdict::Ok => {
            tracing::info!(db = %path.display(), bytes, ms, "quick_check ok");
            Ok(())
        }
        Verdict::Unfinished => {
            tracing::warn!(
                db = %path.display(),
                bytes,
                ms,
                "quick_check did not finish within {CHECK_BUDGET:?} and was stopped; starting without a full check (run `homed selftest` once the daemon is up)"
            );
            Ok(())
        }
        Verdict::Damaged(problem) => Err(IntegrityError::Damaged {
            path: path.to_owned(),
            tier,
            problem,
        }),
    }
}

/// `DATA/plugin_data/<plugin>/*.db`.
fn plugin_databases(data: &Path) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(data.join("plugin_data")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = dirs
        .flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "db") && p.is_file())
        .collect();
    out.sort();
    out
}

/// Records what each kernel database holds now (after a successful start), replacing
/// the manifest whole (a temporary file renamed), so a crash never leaves half of it.
pub fn write_manifest(data: &Path) -> Result<(), IntegrityError> {
    let manifest = Manifest {
        databases: kernel_databases()
            .filter_map(|(name, _)| size_of(&data.join(name)).map(|b| (name.to_owned(), b)))
            .collect(),
    };
    let path = data.join(MANIFEST);
    let tmp = data.join(format!("{MANIFEST}.tmp"));
    let text = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| IntegrityError::WriteManifest { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db_with_rows(path: &Path, rows: usize) {
        let c = rusqlite::Connection::open(path).unwrap();
        c.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE t(x TEXT);")
            .unwrap();
        c.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO t SELECT printf('%.500c', 'x') FROM n",
            [rows as i64],
        )
        .unwrap();
    }

    #[test]
    fn a_sound_database_passes_and_an_overwritten_page_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        db_with_rows(&path, 400);
        assert_eq!(quick_check(&path, CHECK_BUDGET).unwrap(), Verdict::Ok);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2 / 4096 * 4096;
        bytes[mid..mid + 4096].fill(0x5a);
        std::fs::write(&path, bytes).unwrap();
        assert!(matches!(quick_check(&path, CHECK_BUDGET).unwrap(), Verdict::Damaged(_)));
    }

    #[test]
    fn a_recorded_database_that_vanished_or_emptied_is_refused_until_the_manifest_goes() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        std::fs::create_dir_all(data.join("memory")).unwrap();
        check_data_dir(data).expect("a fresh data dir starts");
        db_with_rows(&data.join("config.db"), 3);
        db_with_rows(&data.join("memory/memory.db"), 3);
        write_manifest(data).unwrap();
        check_data_dir(data).expect("as recorded");

        std::fs::write(data.join("memory/memory.db"), b"").unwrap();
        let e = check_data_dir(data).unwrap_err().to_string();
        assert!(e.contains("memory/memory.db") && e.contains("empty (0 bytes)"), "{e}");
        assert!(e.contains("delete") && e.contains(MANIFEST), "{e}");

        std::fs::rename(data.join("memory/memory.db"), aside(&data.join("memory/memory.db"))).unwrap();
        check_data_dir(data).expect("moved aside as the way out says");
        std::fs::remove_file(data.join("config.db")).unwrap();
        let e = check_data_dir(data).unwrap_err().to_string();
        assert!(e.contains("config.db") && e.contains("missing"), "{e}");

        std::fs::remove_file(data.join(MANIFEST)).unwrap();
        check_data_dir(data).expect("the owner accepted the loss");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_refused_with_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("inbox.db"), vec![7u8; 8192]).unwrap();
        let e = check_data_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("inbox.db") && e.contains("mv "), "{e}");
    }
}
