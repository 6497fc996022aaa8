//! The kernel's databases and the schema this build expects of each.
//!
//! Every database migrates itself forward when its actor opens it
//! (`rusqlite_migration`, the applied count in `PRAGMA user_version`). Upgrading a data
//! dir safely needs the whole list in one place before any actor runs: what each file
//! is at, what this build wants, so the daemon can refuse a newer data dir and take a
//! snapshot before it migrates an older one (`src/upgrade.rs`). The target is counted
//! by applying the migrations to an in-memory database, so it cannot drift from the
//! lists the stores use.

use rusqlite::Connection;
use rusqlite_migration::Migrations;

/// One kernel database.
#[derive(Clone, Copy)]
pub struct Database {
    /// Its file, relative to the data dir.
    pub file: &'static str,
    /// What it holds, for messages.
    pub holds: &'static str,
    migrations: fn() -> Migrations<'static>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("file", &self.file).finish()
    }
}

impl Database {
    /// The schema version this build migrates the database to.
    pub fn target(&self) -> usize {
        let mut conn = Connection::open_in_memory().expect("an in-memory database");
        (self.migrations)()
            .to_latest(&mut conn)
            .expect("the built-in migrations apply to an empty database");
        user_version(&conn).unwrap_or(0)
    }

    /// Brings `conn` to [`Database::target`].
    pub fn migrate(&self, conn: &mut Connection) -> Result<(), rusqlite_migration::Error> {
        (self.migrations)().to_latest(conn)
    }
}

/// `PRAGMA user_version`: how many migrations were applied.
pub fn user_version(conn: &Connection) -> rusqlite::Result<usize> {
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map(|v| v.max(0) as usize)
}

/// Every kernel database, in the order they are checked and snapshotted.
pub fn databases() -> [Database; 5] {
    [
        Database {
            file: "config.db",
            holds: "settings",
            migrations: crate::config::store::migrations,
        },
        Database {
            file: "inbox.db",
            holds: "inbox of acknowledged inputs",
            migrations: crate::agent::inbox::migrations,
        },
        Database {
            file: "usage.db",
            holds: "usage ledger",
            migrations: crate::usage::store::migrations,
        },
        Database {
            file: "memory/memory.db",
            holds: "memory (context window, documents, images)",
            migrations: crate::memory::store::migrations,
        },
        Database {
            file: "memory/graph.db",
            holds: "graph memory",
            migrations: crate::memory::graph::store::migrations,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_database_has_a_target_of_at_least_one_migration() {
        for db in databases() {
            assert!(db.target() >= 1, "{}", db.file);
        }
        let memory = databases().into_iter().find(|d| d.file == "memory/memory.db").unwrap();
        assert_eq!(memory.target(), 9);
    }
}
