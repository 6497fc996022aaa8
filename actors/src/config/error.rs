//! [`ConfigError`]: everything that can go wrong in the configuration registry, in its
//! own module so the registry's files (store, actor, definitions, settings) share it
//! without importing the module face that hands their names on.

use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong in the configuration registry. Messages are shown to the
/// user as they are, so each one says what to do next.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The key is not a known setting (and not in an open-ended family).
    #[error("unknown setting `{key}`; {hint}")]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The closest known key and/or the keys of its namespace.
        hint: String,
    },
    /// The key is in an open-ended family but malformed (bad plugin or source name).
    #[error("invalid setting key `{key}`: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// The expected shape.
        reason: String,
    },
    /// The value does not follow the setting's rule; nothing was written.
    #[error("invalid value for `{key}`: expected {expected}, for example {example}; got {got}")]
    InvalidValue {
        /// The setting.
        key: String,
        /// The expected type, e.g. "an integer from 1 to 100".
        expected: String,
        /// A valid value, written as JSON.
        example: String,
        /// What was received and why it is wrong.
        got: String,
    },
    /// A typed read of a setting that has neither a stored value nor a default.
    #[error("setting `{key}` has no value and no default; set it before using it")]
    Missing {
        /// The setting.
        key: String,
    },
    /// A typed read found a value of another type (written by an older version, or
    /// asked for with the wrong getter).
    #[error(
        "setting `{key}` holds {got}, but {expected} is needed; set a valid value, or set it to null to restore the default"
    )]
    WrongType {
        /// The setting.
        key: String,
        /// What the getter needs.
        expected: String,
        /// What is stored.
        got: String,
    },
    /// A stored value is not valid JSON (the database was edited by hand).
    #[error("stored value of `{key}` is not valid JSON ({source}); set it to null to restore the default")]
    Corrupt {
        /// The setting.
        key: String,
        /// The JSON parse error.
        source: serde_json::Error,
    },
    /// A secret setting could not be sealed or opened (see [`super::seal`]).
    #[error(transparent)]
    Seal(#[from] super::seal::SealError),
    /// SQLite failed.
    #[error("config database error: {0}; check that the data directory is writable and that no other daemon uses it")]
    Database(#[from] rusqlite::Error),
    /// The schema could not be brought up to date.
    #[error(
        "could not update the config database schema: {0}; if the file comes from a newer HomeAgent, upgrade, or restore a backup"
    )]
    Migration(#[from] rusqlite_migration::Error),
    /// A file next to the database (the LLM snapshot) could not be read or written.
    #[error("could not {action} `{path}`: {source}; check that the data directory exists and is writable")]
    Io {
        /// What was being done ("write", "read", ...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A history entry asked for by id does not exist.
    #[error("no settings change #{id}; GET /api/v1/settings/history lists them")]
    NoSuchChange { id: i64 },
    /// A secret's old value is not kept, so its change cannot be undone.
    #[error("`{key}` is a secret: its old value is not kept, so the change cannot be reverted; set it again instead")]
    SecretNotKept { key: String },
    /// [`super::store::ConfigStore::restore_llm_snapshot`] found no snapshot.
    #[error(
        "no LLM settings snapshot at `{path}`; one is written automatically before every change to a `core.llm.*` setting"
    )]
    NoSnapshot {
        /// Where the snapshot was expected.
        path: PathBuf,
    },
    /// The snapshot file exists but cannot be applied.
    #[error("LLM settings snapshot `{path}` cannot be restored: {reason}; fix or delete the file")]
    BadSnapshot {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl ConfigError {
    /// Whether the request was at fault (a key or value to fix), as opposed to the
    /// daemon's storage (a full disk, a damaged or unwritable file): the HTTP edge
    /// answers 4xx for the first and 5xx for the second, so a client retries only what
    /// can succeed unchanged.
    pub fn is_request_error(&self) -> bool {
        matches!(
            self,
            Self::UnknownKey { .. }
                | Self::InvalidKey { .. }
                | Self::InvalidValue { .. }
                | Self::Missing { .. }
                | Self::WrongType { .. }
                | Self::NoSnapshot { .. }
                | Self::BadSnapshot { .. }
                | Self::NoSuchChange { .. }
                | Self::SecretNotKept { .. }
        )
    }

    /// The storage is full (SQLite's `SQLITE_FULL`, or `ENOSPC` on a file next to it).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Database(rusqlite::Error::SqliteFailure(e, _)) => e.code == rusqlite::ErrorCode::DiskFull,
            Self::Io { source, .. } => source.raw_os_error() == Some(28),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ConfigError;

    #[test]
    fn a_full_disk_is_the_stores_fault_not_the_requests() {
        let full = ConfigError::Database(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        ));
        assert!(!full.is_request_error() && full.is_disk_full());
        let locked = ConfigError::Database(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        ));
        assert!(!locked.is_request_error() && !locked.is_disk_full());
        let unknown = ConfigError::UnknownKey {
            key: "core.nope".into(),
            hint: String::new(),
        };
        assert!(unknown.is_request_error());
    }
}
