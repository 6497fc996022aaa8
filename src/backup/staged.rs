//! A restore from the WebUI: checked while the daemon runs, put in place at the next
//! start, before anything opens a database.
//!
//! A running daemon cannot swap its own data dir, so `POST /api/v1/backups/{name}/restore`
//! (1) takes a backup of the data dir as it is now — the way back, in the same list —
//! (2) unpacks the chosen one into `DATA/backups/.staged` with every check
//! [`super::restore`] makes (no entry outside, `quick_check` on each database), (3) writes
//! `DATA/restore.pending`, and the daemon restarts. At the start, [`finish`] moves the
//! current contents to `DATA/backups/.replaced` (phase 1), the staged ones into the data
//! dir (phase 2), and removes both folders and the marker. Each phase is a series of
//! renames on one file system, and the marker records the phase, so a crash at any
//! point resumes where it stopped: never a mix of two data dirs.

use std::path::{Path, PathBuf};

use super::BackupError;

/// The marker: `1` (moving the current contents out) or `2` (moving the staged in).
pub const PENDING: &str = "restore.pending";
const STAGED: &str = "backups/.staged";
const REPLACED: &str = "backups/.replaced";

/// What stays in the data dir across a restore: the backups themselves, the upgrade
/// snapshots, the downloaded embedder (never in a backup), the lock and the marker.
fn kept(name: &str) -> bool {
    matches!(name, "backups" | "snapshots" | "models" | "homed.lock" | PENDING)
}

fn werr(p: &Path, e: std::io::Error) -> BackupError {
    BackupError::Write {
        path: p.display().to_string(),
        reason: e.to_string(),
    }
}

/// Checks and unpacks `file` for the next start; answers its manifest. With
/// `keep_replaced` (a restore from the recovery page, where no backup of the data as
/// it is could be taken) the contents it replaces are kept as `backups/replaced-<ms>`.
pub fn stage(data: &Path, file: &Path, keep_replaced: bool) -> Result<super::Manifest, BackupError> {
    let staged = data.join(STAGED);
    if staged.exists() {
        std::fs::remove_dir_all(&staged).map_err(|e| werr(&staged, e))?;
    }
    let manifest = super::restore(file, &staged)?;
    write_marker(data, 1, keep_replaced)?;
    Ok(manifest)
}

/// Whether a restore waits for the next start.
pub fn pending(data: &Path) -> bool {
    data.join(PENDING).is_file()
}

fn write_marker(data: &Path, phase: u8, keep: bool) -> Result<(), BackupError> {
    let path = data.join(PENDING);
    let tmp = data.join(format!("{PENDING}.tmp"));
    let keep = if keep { "keep\n" } else { "" };
    std::fs::write(&tmp, format!("{phase}\n{keep}")).map_err(|e| werr(&tmp, e))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| werr(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| werr(&path, e))
}

fn entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, BackupError> {
    let rd = std::fs::read_dir(dir).map_err(|e| BackupError::Read {
        path: dir.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(rd
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(n, _)| !kept(n))
        .collect())
}

/// At the start (the data dir locked, nothing opened): puts a staged restore in place.
/// Answers whether one was.
pub fn finish(data: &Path) -> Result<bool, BackupError> {
    let marker = data.join(PENDING);
    let Ok(phase) = std::fs::read_to_string(&marker) else {
        return Ok(false);
    };
    let (staged, replaced) = (data.join(STAGED), data.join(REPLACED));
    let keep = phase.lines().any(|l| l.trim() == "keep");
    if phase.lines().next().map(str::trim) == Some("1") {
        if !staged.is_dir() {
            // Staging never finished: nothing to put in place.
            let _ = std::fs::remove_file(&marker);
            tracing::warn!("a restore was asked for but its unpacked copy is gone; starting on the data as it is");
            return Ok(false);
        }
        std::fs::create_dir_all(&replaced).map_err(|e| werr(&replaced, e))?;
        for (name, path) in entries(data)? {
            let to = replaced.join(&name);
            std::fs::rename(&path, &to).map_err(|e| werr(&to, e))?;
        }
        write_marker(data, 2, keep)?;
    }
    if staged.is_dir() {
        for (name, path) in entries(&staged)? {
            let to = data.join(&name);
            std::fs::rename(&path, &to).map_err(|e| werr(&to, e))?;
        }
    }
    if keep && replaced.is_dir() {
        let aside = data
            .join("backups")
            .join(format!("replaced-{}", homeagent_actors::clock::now_ms()));
        std::fs::rename(&replaced, &aside).map_err(|e| werr(&aside, e))?;
        tracing::warn!(kept = %aside.display(), "what the data dir held before the restore is kept");
    }
    std::fs::remove_file(&marker).map_err(|e| werr(&marker, e))?;
    let _ = std::fs::remove_dir_all(&staged);
    let _ = std::fs::remove_dir_all(&replaced);
    tracing::warn!(
        "a backup was restored into the data directory (the data as it was is the backup taken just before)"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    /// A crash after phase 1 (or in the middle of phase 2) resumes and ends with the
    /// staged contents only, the kept folders untouched.
    #[test]
    fn a_restore_interrupted_at_any_phase_completes_at_the_next_start() {
        for stop_after_phase_1 in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let data = dir.path();
            write(&data.join("config.db"), "current");
            write(&data.join("memory/text/a.jsonl"), "current");
            write(&data.join("backups/homeagent-x.zip"), "zip");
            write(&data.join("snapshots/s/snapshot.json"), "{}");
            write(&data.join(STAGED).join("config.db"), "restored");
            write(&data.join(STAGED).join("personal/personal.md"), "restored");
            write_marker(data, 1, false).unwrap();
            if stop_after_phase_1 {
                // Phase 1 done, one staged entry already moved, then the crash.
                std::fs::create_dir_all(data.join(REPLACED)).unwrap();
                for (n, p) in entries(data).unwrap() {
                    std::fs::rename(p, data.join(REPLACED).join(n)).unwrap();
                }
                write_marker(data, 2, false).unwrap();
                std::fs::rename(data.join(STAGED).join("config.db"), data.join("config.db")).unwrap();
            }
            assert!(finish(data).unwrap());
            assert_eq!(std::fs::read_to_string(data.join("config.db")).unwrap(), "restored");
            assert_eq!(
                std::fs::read_to_string(data.join("personal/personal.md")).unwrap(),
                "restored"
            );
            assert!(
                !data.join("memory").exists(),
                "the replaced data is gone from the data dir"
            );
            assert!(data.join("backups/homeagent-x.zip").exists() && data.join("snapshots/s").exists());
            assert!(!data.join(PENDING).exists() && !data.join(STAGED).exists() && !data.join(REPLACED).exists());
            assert!(!finish(data).unwrap(), "nothing pending any more");
        }
    }

    /// A restore from the recovery page keeps what it replaced beside the backups.
    #[test]
    fn a_recovery_restore_keeps_what_it_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        write(&data.join("config.db"), "damaged");
        write(&data.join(STAGED).join("config.db"), "restored");
        write_marker(data, 1, true).unwrap();
        assert!(finish(data).unwrap());
        assert_eq!(std::fs::read_to_string(data.join("config.db")).unwrap(), "restored");
        let kept: Vec<_> = std::fs::read_dir(data.join("backups"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("replaced-"))
            .collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(std::fs::read_to_string(kept[0].join("config.db")).unwrap(), "damaged");
    }
}
