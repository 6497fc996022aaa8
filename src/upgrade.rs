//! Upgrades that cannot lose data: before anything opens them, the kernel's databases
//! are compared with the schemas this build expects ([`homeagent_actors::schema`]).
//!
//! * A database at a **newer** schema than this build knows means an older binary on a
//!   newer data dir: refused, with the versions named (migrations only go forward; an
//!   older build would otherwise fail on a column it never heard of, or worse, write
//!   rows the newer one misreads).
//! * A database at an **older** schema is migrated here, at start, and not by its
//!   actor later: first every database is copied with `VACUUM INTO` (SQLite's
//!   consistent copy of a live file, not a byte copy) into
//!   `DATA/snapshots/<time>-<version>/`, then each is migrated and checked
//!   (`PRAGMA quick_check`). If any step fails, every database is put back from the
//!   snapshot and the start stops with the reason: never half-migrated.
//! * `DATA/VERSION` records the build that last started on the data dir (for
//!   messages and `homed rollback`).
//!
//! Snapshots are pruned to the newest [`KEEP`], and none older than [`MAX_AGE`] unless
//! it is the newest. `homed rollback` puts the newest snapshot back.
//!
//! The policy ([`plan`], [`prune`]) is plain functions over values, unit-tested; the
//! shell ([`prepare`], [`rollback`]) does the file work.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use homeagent_actors::schema::{self, Database};
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

/// Snapshots kept.
pub const KEEP: usize = 5;
/// Snapshots older than this are pruned (the newest is always kept).
pub const MAX_AGE: Duration = Duration::from_secs(180 * 24 * 3600);
/// Where snapshots live, in the data dir.
pub const SNAPSHOTS: &str = "snapshots";
/// The file recording the build that last started here.
pub const VERSION_FILE: &str = "VERSION";
/// This build's version.
pub const HOMED_VERSION: &str = env!("CARGO_PKG_VERSION");

/// One database as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub file: String,
    /// `None`: the file does not exist (a new data dir, or a database added since).
    pub version: Option<usize>,
    /// What this build migrates it to.
    pub target: usize,
}

/// What the start must do with the data dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Every database is at this build's schema (or does not exist yet).
    Current,
    /// These are behind: snapshot, then migrate.
    Upgrade(Vec<Found>),
    /// These are ahead of this build: refuse.
    Refuse(Vec<Found>),
}

/// The decision, from what was found.
pub fn plan(found: &[Found]) -> Plan {
    let ahead: Vec<Found> = found
        .iter()
        .filter(|f| f.version.is_some_and(|v| v > f.target))
        .cloned()
        .collect();
    if !ahead.is_empty() {
        return Plan::Refuse(ahead);
    }
    let behind: Vec<Found> = found
        .iter()
        .filter(|f| f.version.is_some_and(|v| v < f.target))
        .cloned()
        .collect();
    if behind.is_empty() {
        Plan::Current
    } else {
        Plan::Upgrade(behind)
    }
}

/// Which snapshots to delete: all but the newest [`KEEP`], and any older than
/// `max_age` except the newest. `snaps` are `(name, taken_at_ms)`.
pub fn prune(snaps: &[(String, u64)], now_ms: u64, keep: usize, max_age: Duration) -> Vec<String> {
    let mut sorted: Vec<&(String, u64)> = snaps.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    sorted
        .iter()
        .enumerate()
        .filter(|(i, (_, at))| *i > 0 && (*i >= keep || now_ms.saturating_sub(*at) > max_age.as_millis() as u64))
        .map(|(_, (name, _))| name.clone())
        .collect()
}

/// What a snapshot holds (`snapshot.json` inside it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The build that had last started on the data dir ("unknown" before VERSION existed).
    pub homed: String,
    pub taken_at_ms: u64,
    /// Database file (relative to the data dir) → its schema version then.
    pub databases: std::collections::BTreeMap<String, usize>,
    /// Why it was taken.
    pub reason: String,
}

/// Why the data dir cannot be used, or an upgrade failed; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error(
        "this data directory was written by a newer homed ({recorded}): {list}; this homed is {HOMED_VERSION}. Start the newer homed, or put the data directory back to before it with `homed rollback --data {data}` (the newest snapshot in {data}/snapshots)"
    )]
    Newer {
        recorded: String,
        list: String,
        data: String,
    },
    #[error(
        "the upgrade of {file} failed ({reason}); every database was put back from the snapshot {snapshot}, so the data directory is as it was. Start the homed that wrote it ({recorded}), and report this with the log"
    )]
    Failed {
        file: String,
        reason: String,
        snapshot: String,
        recorded: String,
    },
    #[error(
        "cannot take the snapshot before the upgrade ({reason}); nothing was changed. Free some space in {data} (the snapshot needs about {need_mb} MB) and start again"
    )]
    Snapshot { reason: String, data: String, need_mb: u64 },
    #[error(
        "cannot read {file} to check its schema: {reason}; restore it from your backup, or move it aside to start that part empty"
    )]
    Unreadable { file: String, reason: String },
    #[error("no snapshot in {0}: nothing to roll back to")]
    NoSnapshot(String),
    #[error("cannot put {file} back from the snapshot: {reason}")]
    Restore { file: String, reason: String },
}

/// What [`prepare`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Databases migrated (file, from, to); empty when nothing was behind.
    pub migrated: Vec<(String, usize, usize)>,
    /// The snapshot taken first, if any.
    pub snapshot: Option<PathBuf>,
    /// Snapshots pruned.
    pub pruned: usize,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The build recorded in `DATA/VERSION`, or "unknown".
pub fn recorded_version(data: &Path) -> String {
    std::fs::read_to_string(data.join(VERSION_FILE))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn found(data: &Path) -> Result<Vec<(Database, Found)>, UpgradeError> {
    schema::databases()
        .into_iter()
        .map(|db| {
            let path = data.join(db.file);
            let version = if path.is_file() && std::fs::metadata(&path).map(|m| m.len() > 0).unwrap_or(false) {
                let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| {
                    UpgradeError::Unreadable {
                        file: path.display().to_string(),
                        reason: e.to_string(),
                    }
                })?;
                Some(schema::user_version(&conn).map_err(|e| UpgradeError::Unreadable {
                    file: path.display().to_string(),
                    reason: e.to_string(),
                })?)
            } else {
                None
            };
            let f = Found {
                file: db.file.to_owned(),
                version,
                target: db.target(),
            };
            Ok((db, f))
        })
        .collect()
}

/// Checks the data dir's schemas before anything opens them; snapshots and migrates
/// an older one, refuses a newer one; records this build in `DATA/VERSION`.
pub fn prepare(data: &Path) -> Result<Report, UpgradeError> {
    let dbs = found(data)?;
    let all: Vec<Found> = dbs.iter().map(|(_, f)| f.clone()).collect();
    let recorded = recorded_version(data);
    let mut report = Report {
        migrated: Vec::new(),
        snapshot: None,
        pruned: 0,
    };
    match plan(&all) {
        Plan::Refuse(ahead) => {
            return Err(UpgradeError::Newer {
                recorded,
                list: ahead
                    .iter()
                    .map(|f| {
                        format!(
                            "{} is at schema {}, this homed knows {}",
                            f.file,
                            f.version.unwrap_or(0),
                            f.target
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                data: data.display().to_string(),
            });
        }
        Plan::Current => {}
        Plan::Upgrade(behind) => {
            let snap = take_snapshot(
                data,
                &dbs,
                &recorded,
                "before upgrading to homed ".to_owned() + HOMED_VERSION,
            )?;
            for f in &behind {
                let db = dbs
                    .iter()
                    .find(|(_, x)| x.file == f.file)
                    .map(|(d, _)| *d)
                    .expect("listed");
                if let Err(reason) = migrate_one(data, &db) {
                    let _ = restore(data, &snap);
                    return Err(UpgradeError::Failed {
                        file: f.file.clone(),
                        reason,
                        snapshot: snap.display().to_string(),
                        recorded,
                    });
                }
                tracing::info!(file = %f.file, from = f.version.unwrap_or(0), to = f.target, "database migrated");
                report.migrated.push((f.file.clone(), f.version.unwrap_or(0), f.target));
            }
            report.snapshot = Some(snap);
        }
    }
    if recorded != HOMED_VERSION {
        let _ = std::fs::write(data.join(VERSION_FILE), format!("{HOMED_VERSION}\n"));
    }
    report.pruned = prune_snapshots(data);
    Ok(report)
}

/// Migrates one database and checks it; `Err` is the reason, for the message.
fn migrate_one(data: &Path, db: &Database) -> Result<(), String> {
    // A test build can make one migration fail, to prove the way back works.
    if cfg!(debug_assertions) && std::env::var("HOMEAGENT_FAIL_MIGRATION").ok().as_deref() == Some(db.file) {
        return Err("a failure injected by HOMEAGENT_FAIL_MIGRATION".to_owned());
    }
    let path = data.join(db.file);
    let mut conn = Connection::open(&path).map_err(|e| e.to_string())?;
    db.migrate(&mut conn).map_err(|e| e.to_string())?;
    let verdict: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if verdict != "ok" {
        return Err(format!("PRAGMA quick_check after migrating: {verdict}"));
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The snapshot's file name for a database (`memory/graph.db` → `memory__graph.db`).
fn flat(file: &str) -> String {
    file.replace('/', "__")
}

fn take_snapshot(
    data: &Path,
    dbs: &[(Database, Found)],
    recorded: &str,
    reason: String,
) -> Result<PathBuf, UpgradeError> {
    let need: u64 = dbs
        .iter()
        .filter_map(|(d, _)| std::fs::metadata(data.join(d.file)).ok().map(|m| m.len()))
        .sum();
    let err = |reason: String| UpgradeError::Snapshot {
        reason,
        data: data.display().to_string(),
        need_mb: need / (1 << 20) + 1,
    };
    // Room for the copies and what the migration adds, before anything is written.
    if let Some(free) = free_bytes(data) {
        let want = need.saturating_mul(2) + (16 << 20);
        if free < want {
            return Err(err(format!("{} MB free, {} MB needed", free >> 20, want >> 20)));
        }
    }
    let taken_at_ms = now_ms();
    let stamp = chrono_like(taken_at_ms);
    let dir = data.join(SNAPSHOTS).join(format!("{stamp}-{}", sanitize(recorded)));
    let staging = data.join(SNAPSHOTS).join(format!(".{stamp}.partial"));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| err(e.to_string()))?;
    let mut manifest = Manifest {
        homed: recorded.to_owned(),
        taken_at_ms,
        databases: Default::default(),
        reason,
    };
    for (db, f) in dbs {
        let Some(version) = f.version else { continue };
        let src = data.join(db.file);
        let to = staging.join(flat(db.file));
        let conn = Connection::open(&src).map_err(|e| err(format!("{}: {e}", db.file)))?;
        conn.execute("VACUUM INTO ?1", [to.to_string_lossy()])
            .map_err(|e| err(format!("{}: {e}", db.file)))?;
        manifest.databases.insert(db.file.to_owned(), version);
    }
    let json = serde_json::to_vec_pretty(&manifest).map_err(|e| err(e.to_string()))?;
    std::fs::write(staging.join("snapshot.json"), json).map_err(|e| err(e.to_string()))?;
    std::fs::rename(&staging, &dir).map_err(|e| err(e.to_string()))?;
    tracing::info!(snapshot = %dir.display(), "snapshot of every database taken before the upgrade");
    Ok(dir)
}

/// Bytes free for an unprivileged writer on the file system of `dir` (`statvfs`).
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Puts every database of the snapshot `dir` back (its -wal and -shm removed first).
pub fn restore(data: &Path, dir: &Path) -> Result<Manifest, UpgradeError> {
    let manifest: Manifest = std::fs::read(dir.join("snapshot.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| UpgradeError::Restore {
            file: dir.join("snapshot.json").display().to_string(),
            reason: "missing or unreadable".to_owned(),
        })?;
    for file in manifest.databases.keys() {
        let target = data.join(file);
        let fail = |reason: String| UpgradeError::Restore {
            file: target.display().to_string(),
            reason,
        };
        for ext in ["-wal", "-shm"] {
            let side = PathBuf::from(format!("{}{ext}", target.display()));
            if side.exists() {
                std::fs::remove_file(&side).map_err(|e| fail(e.to_string()))?;
            }
        }
        // Copied beside, then renamed over: a crash mid-way leaves the old file whole.
        let tmp = PathBuf::from(format!("{}.restoring", target.display()));
        std::fs::copy(dir.join(flat(file)), &tmp).map_err(|e| fail(e.to_string()))?;
        std::fs::rename(&tmp, &target).map_err(|e| fail(e.to_string()))?;
    }
    Ok(manifest)
}

/// The snapshots of `data`, `(dir name, taken_at_ms)`.
pub fn snapshots(data: &Path) -> Vec<(String, u64)> {
    let Ok(rd) = std::fs::read_dir(data.join(SNAPSHOTS)) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| {
            let m: Manifest = serde_json::from_slice(&std::fs::read(e.path().join("snapshot.json")).ok()?).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), m.taken_at_ms))
        })
        .collect()
}

fn prune_snapshots(data: &Path) -> usize {
    let gone = prune(&snapshots(data), now_ms(), KEEP, MAX_AGE);
    for name in &gone {
        let _ = std::fs::remove_dir_all(data.join(SNAPSHOTS).join(name));
    }
    gone.len()
}

/// `homed rollback`: puts the newest snapshot back (the daemon must be stopped; the
/// caller holds the data dir's lock). Answers what was restored.
pub fn rollback(data: &Path) -> Result<String, UpgradeError> {
    let mut snaps = snapshots(data);
    snaps.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let Some((name, _)) = snaps.first() else {
        return Err(UpgradeError::NoSnapshot(data.join(SNAPSHOTS).display().to_string()));
    };
    let dir = data.join(SNAPSHOTS).join(name);
    let m = restore(data, &dir)?;
    let _ = std::fs::write(data.join(VERSION_FILE), format!("{}\n", m.homed));
    let list = m
        .databases
        .iter()
        .map(|(f, v)| format!("{f} at schema {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "restored {} (taken {}, {}): {list}. Start the homed that wrote it ({}).",
        dir.display(),
        chrono_like(m.taken_at_ms),
        m.reason,
        m.homed
    ))
}

/// `20261205T142233Z` from unix milliseconds (UTC), without a date library.
pub(crate) fn chrono_like(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(file: &str, version: Option<usize>, target: usize) -> Found {
        Found {
            file: file.into(),
            version,
            target,
        }
    }

    #[test]
    fn the_plan_refuses_a_newer_schema_and_upgrades_an_older_one() {
        assert_eq!(plan(&[f("a.db", None, 3), f("b.db", Some(2), 2)]), Plan::Current);
        assert_eq!(
            plan(&[f("a.db", Some(1), 3), f("b.db", Some(2), 2)]),
            Plan::Upgrade(vec![f("a.db", Some(1), 3)])
        );
        // Ahead wins over behind: an older build must not touch any of it.
        assert_eq!(
            plan(&[f("a.db", Some(1), 3), f("b.db", Some(5), 2)]),
            Plan::Refuse(vec![f("b.db", Some(5), 2)])
        );
    }

    #[test]
    fn pruning_keeps_the_newest_few_and_nothing_too_old_but_the_newest() {
        let day = 86_400_000u64;
        let now = 400 * day;
        let snaps: Vec<(String, u64)> = (0..8).map(|i| (format!("s{i}"), now - i * day)).collect();
        let mut gone = prune(&snaps, now, 5, MAX_AGE);
        gone.sort();
        assert_eq!(gone, ["s5", "s6", "s7"]);
        let old = vec![
            ("new".to_owned(), now - 300 * day),
            ("older".to_owned(), now - 301 * day),
        ];
        assert_eq!(prune(&old, now, 5, MAX_AGE), ["older"]);
    }

    #[test]
    fn stamps_are_utc_calendar_times() {
        assert_eq!(chrono_like(0), "19700101T000000Z");
        assert_eq!(chrono_like(1_796_476_512_572), "20261205T131512Z");
    }
}
