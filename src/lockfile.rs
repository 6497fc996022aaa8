//! The data-directory lock: one daemon per data directory.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Holds an exclusive lock on `DATA/homed.lock` for the daemon's lifetime. The OS
/// releases it when the process dies, even on `kill -9`, so a stale file never
/// blocks a restart.
pub struct DataLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another homed{pid} is already using the data directory {dir}; stop it first, or start this one with a different --data"
    )]
    Held { dir: String, pid: String },
    #[error("cannot open the lock file {path}: {source}; check the data directory's permissions")]
    Io { path: String, source: std::io::Error },
}

impl DataLock {
    pub fn acquire(data_dir: &Path) -> Result<Self, LockError> {
        let path = data_dir.join("homed.lock");
        let io = |source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(LockError::Held {
                    dir: data_dir.display().to_string(),
                    pid: if pid.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {pid})")
                    },
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_the_same_dir_is_refused_with_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataLock::acquire(dir.path()).unwrap();
        let err = DataLock::acquire(dir.path()).err().unwrap().to_string();
        assert!(err.contains("already using the data directory"), "{err}");
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        drop(first);
        DataLock::acquire(dir.path()).unwrap();
    }
}
