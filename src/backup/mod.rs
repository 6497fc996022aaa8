//! `homed backup FILE` and `homed restore FILE`: the whole data dir as one archive.
//!
//! A backup may be taken while the daemon runs: every SQLite database (the kernel's and
//! the plugins' own) is copied with `VACUUM INTO` (a consistent copy of a live file;
//! the -wal and -shm files are never archived), every other file as it is. Left out:
//! what the daemon makes anew (the lock, the socket, the address file), the upgrade
//! snapshots and the downloaded embedding model (fetched again from the Memory page).
//! The archive is a zip with `backup.json` (the build that wrote it, when, each
//! database's schema), written beside FILE and renamed into place when complete.
//!
//! A restore goes only into an empty (or new) data dir: it unpacks beside it, refuses
//! any entry that would land outside it (`..`, absolute paths), runs `PRAGMA
//! quick_check` on every database, and only then moves the directory into place. The
//! next start then upgrades it as any older data dir (`crate::upgrade`).

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

pub mod actor;
pub mod schedule;
pub mod staged;

/// The manifest inside the archive.
pub const MANIFEST: &str = "backup.json";

/// What `backup.json` says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub homed: String,
    pub taken_at_ms: u64,
    pub files: usize,
    /// Database path (relative) → schema version.
    pub databases: std::collections::BTreeMap<String, i64>,
}

/// Why a backup or restore did not happen; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("cannot write {path}: {reason}; check the free space and the permissions there")]
    Write { path: String, reason: String },
    #[error("{0} is not a HomeAgent backup (no backup.json): pick the file `homed backup` wrote")]
    NotABackup(String),
    #[error(
        "{entry} in the backup would be written outside the data directory; the file is refused, nothing was restored"
    )]
    Outside { entry: String },
    #[error(
        "the data directory {0} is not empty; restore into a new or empty directory (--data NEW), then start homed on it"
    )]
    NotEmpty(String),
    #[error("{path} in the backup is damaged (PRAGMA quick_check: {problem}); nothing was restored")]
    Damaged { path: String, problem: String },
}

/// Whether `rel` (a path inside the data dir) is left out of a backup.
pub fn skipped(rel: &Path) -> bool {
    let s = rel.to_string_lossy();
    let first = rel
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    matches!(first.as_str(), "snapshots" | "models" | "backups")
        || matches!(s.as_ref(), "homed.lock" | "cli.sock" | "http-address")
        || s.ends_with("-wal")
        || s.ends_with("-shm")
        || s.ends_with(".restoring")
        || s.ends_with(".partial")
}

/// An SQLite connection to `path` when it is a database (`None` for any other file).
///
/// Why SQLite opens the file to look at it, not `std::fs`: a database this process
/// has open holds POSIX advisory locks, and closing *any* descriptor of that file in
/// the process drops them all (POSIX semantics SQLite works around only for its own
/// descriptors). A header read through `std::fs` once let the daemon's own scheduled
/// backup drop `memory.db`'s locks, after which another process's reader took itself
/// for the last one and removed the WAL the daemon was still writing.
fn open_sqlite(path: &Path) -> Option<Connection> {
    // An empty file would open as a new, empty database.
    if std::fs::metadata(path).map_or(true, |m| m.len() < 100) {
        return None;
    }
    let conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).ok();
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).ok()?;
    Some(conn)
}

fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            if skipped(&rel) {
                continue;
            }
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn rerr(p: &Path, reason: String) -> BackupError {
    BackupError::Read {
        path: p.display().to_string(),
        reason,
    }
}

fn werr(p: &Path, reason: String) -> BackupError {
    BackupError::Write {
        path: p.display().to_string(),
        reason,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Writes the archive of `data` to `file`; answers what it holds.
pub fn backup(data: &Path, file: &Path) -> Result<Manifest, BackupError> {
    if !data.join("config.db").is_file() {
        return Err(rerr(
            &data.join("config.db"),
            "no settings database: is this a data directory?".into(),
        ));
    }
    let partial = PathBuf::from(format!("{}.partial", file.display()));
    let out = std::fs::File::create(&partial).map_err(|e| werr(&partial, e.to_string()))?;
    let mut zip = zip::ZipWriter::new(out);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    let tmp = tempfile::tempdir().map_err(|e| werr(Path::new("a temporary directory"), e.to_string()))?;
    let mut manifest = Manifest {
        homed: crate::upgrade::HOMED_VERSION.to_owned(),
        taken_at_ms: now_ms(),
        files: 0,
        databases: Default::default(),
    };
    for rel in files_under(data) {
        let path = data.join(&rel);
        let name = rel.to_string_lossy().replace('\\', "/");
        let source = if let Some(conn) = open_sqlite(&path) {
            // A consistent copy, even while the daemon writes.
            let copy = tmp.path().join(format!("{}.db", manifest.files));
            conn.execute("VACUUM INTO ?1", [copy.to_string_lossy()])
                .map_err(|e| rerr(&path, e.to_string()))?;
            let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap_or(0);
            manifest.databases.insert(name.clone(), v);
            copy
        } else {
            path.clone()
        };
        let mut f = std::fs::File::open(&source).map_err(|e| rerr(&path, e.to_string()))?;
        zip.start_file(name, opts).map_err(|e| werr(&partial, e.to_string()))?;
        std::io::copy(&mut f, &mut zip).map_err(|e| werr(&partial, e.to_string()))?;
        manifest.files += 1;
    }
    zip.start_file(MANIFEST, opts)
        .map_err(|e| werr(&partial, e.to_string()))?;
    zip.write_all(&serde_json::to_vec_pretty(&manifest).unwrap_or_default())
        .map_err(|e| werr(&partial, e.to_string()))?;
    let out = zip.finish().map_err(|e| werr(&partial, e.to_string()))?;
    out.sync_all().map_err(|e| werr(&partial, e.to_string()))?;
    std::fs::rename(&partial, file).map_err(|e| werr(file, e.to_string()))?;
    Ok(manifest)
}

/// A zip entry's path, only when it stays inside the directory it is unpacked into.
fn inside(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.components().all(|c| matches!(c, Component::Normal(_))) && !name.is_empty() {
        Some(p.to_path_buf())
    } else {
        None
    }
}

/// Unpacks the archive `file` into `data` (new or empty), checked before it is used.
pub fn restore(file: &Path, data: &Path) -> Result<Manifest, BackupError> {
    if data.exists() && std::fs::read_dir(data).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(BackupError::NotEmpty(data.display().to_string()));
    }
    let f = std::fs::File::open(file).map_err(|e| rerr(file, e.to_string()))?;
    let mut zip = zip::ZipArchive::new(f).map_err(|_| BackupError::NotABackup(file.display().to_string()))?;
    let manifest: Manifest = {
        let mut m = zip
            .by_name(MANIFEST)
            .map_err(|_| BackupError::NotABackup(file.display().to_string()))?;
        let mut buf = Vec::new();
        m.read_to_end(&mut buf).map_err(|e| rerr(file, e.to_string()))?;
        serde_json::from_slice(&buf).map_err(|_| BackupError::NotABackup(file.display().to_string()))?
    };
    // Every entry is checked before anything is written.
    for i in 0..zip.len() {
        let name = zip
            .by_index(i)
            .map_err(|e| rerr(file, e.to_string()))?
            .name()
            .map_err(|e| rerr(file, e.to_string()))?
            .into_owned();
        if inside(&name).is_none() {
            return Err(BackupError::Outside { entry: name });
        }
    }
    let parent = data.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| werr(parent, e.to_string()))?;
    let staging = parent.join(format!(
        ".{}.restoring",
        data.file_name().map_or("data".into(), |n| n.to_string_lossy())
    ));
    let _ = std::fs::remove_dir_all(&staging);
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| rerr(file, e.to_string()))?;
        let name = entry.name().map_err(|e| rerr(file, e.to_string()))?.into_owned();
        if name == MANIFEST || entry.is_dir() {
            continue;
        }
        let rel = inside(&name).ok_or(BackupError::Outside { entry: name.clone() })?;
        let to = staging.join(&rel);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| werr(dir, e.to_string()))?;
        }
        let mut out = std::fs::File::create(&to).map_err(|e| werr(&to, e.to_string()))?;
        std::io::copy(&mut entry, &mut out).map_err(|e| werr(&to, e.to_string()))?;
        out.sync_all().map_err(|e| werr(&to, e.to_string()))?;
    }
    for rel in manifest.databases.keys() {
        let path = staging.join(rel);
        let problem = Connection::open(&path)
            .and_then(|c| c.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0)))
            .unwrap_or_else(|e| e.to_string());
        if problem != "ok" {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(BackupError::Damaged {
                path: rel.clone(),
                problem,
            });
        }
    }
    // The token file keeps its owner-only mode.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(staging.join("api-token"), std::fs::Permissions::from_mode(0o600));
    }
    if data.exists() {
        std::fs::remove_dir(data).map_err(|e| werr(data, e.to_string()))?;
    }
    std::fs::rename(&staging, data).map_err(|e| werr(data, e.to_string()))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_daemon_makes_anew_is_left_out() {
        for p in [
            "homed.lock",
            "cli.sock",
            "http-address",
            "config.db-wal",
            "memory/memory.db-shm",
            "snapshots/x/config.db",
            "models/embedder/x",
            "backups/homeagent-20261205T131512.572Z.zip",
        ] {
            assert!(skipped(Path::new(p)), "{p}");
        }
        for p in [
            "config.db",
            "api-token",
            "memory/text/2026-12-05.jsonl",
            "plugin_data/timer/timer.db",
        ] {
            assert!(!skipped(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn only_entries_inside_the_directory_are_unpacked() {
        assert!(inside("memory/memory.db").is_some());
        for bad in ["../evil", "/etc/passwd", "memory/../../x", ""] {
            assert!(inside(bad).is_none(), "{bad}");
        }
    }
}
