//! Upgrades that cannot lose data (issue 33 item 1), with the real `homed` binary on a
//! real data dir: an older schema is snapshotted and migrated before anything opens
//! it, a migration that fails leaves every database as it was and says why, a newer
//! schema is refused with the versions named, and `homed rollback` puts the snapshot
//! back (never under a running daemon).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Daemon;
use rusqlite::Connection;

fn version(path: &Path) -> i64 {
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

fn graph_sql(n: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/graph").join(n)).unwrap()
}

/// `homed ARGS --data DATA`, expected to exit within 60 s: (success, stdout, stderr).
fn homed(data: &Path, args: &[&str]) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(args)
        .args(["--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("homed {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A data dir whose graph memory was written by an older build (schema 2 of 5), with
/// one relation in it.
fn older_data_dir(data: &Path) {
    std::fs::create_dir_all(data.join("memory")).unwrap();
    let c = Connection::open(data.join("memory/graph.db")).unwrap();
    c.execute_batch(&graph_sql("0001_init.sql")).unwrap();
    c.execute_batch(&graph_sql("0002_no_merge.sql")).unwrap();
    c.execute_batch(
        "INSERT INTO entities (id, name, type, created_at, updated_at) VALUES
             (1, 'Anna', 'Person', 1, 1), (2, 'Lyon', 'Place', 1, 1);
         INSERT INTO relations (source_id, target_id, relation_type, created_at, updated_at, date_bucket)
             VALUES (1, 2, 'lives_in', 1, 1, '1970-01-01');
         PRAGMA user_version = 2;",
    )
    .unwrap();
}

#[test]
fn an_older_data_dir_is_snapshotted_then_migrated_and_rollback_puts_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    older_data_dir(&data);
    let d = Daemon::start(&data);
    let graph = data.join("memory/graph.db");
    assert_eq!(version(&graph), 5, "migrated to this build's schema");
    let snaps: Vec<_> = std::fs::read_dir(data.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(snaps.len(), 1, "{snaps:?}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(snaps[0].join("snapshot.json")).unwrap()).unwrap();
    assert_eq!(manifest["databases"]["memory/graph.db"], 2, "{manifest}");
    assert_eq!(manifest["homed"], "unknown", "no VERSION before: {manifest}");
    assert_eq!(version(&snaps[0].join("memory__graph.db")), 2);
    assert_eq!(
        std::fs::read_to_string(data.join("VERSION")).unwrap().trim(),
        env!("CARGO_PKG_VERSION")
    );
    // The relation made it through, and the daemon serves it.
    let g = common::api::get(&d, "/api/v1/memory/graph?q=Anna");
    assert!(g.to_string().contains("lives_in"), "{g}");

    // Not under a running daemon.
    let (ok, _, err) = homed(&data, &["rollback"]);
    assert!(!ok && err.contains("already using the data directory"), "{err}");
    assert!(d.terminate().success());

    let (ok, out, err) = homed(&data, &["rollback"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("memory/graph.db at schema 2"), "{out}");
    assert_eq!(version(&graph), 2, "put back");
    let c = Connection::open(&graph).unwrap();
    let n: i64 = c.query_row("SELECT COUNT(*) FROM relations", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1);
}

#[test]
fn a_failed_migration_leaves_every_database_as_it_was_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A data dir of this build, then its graph marked as two migrations older than it
    // is: migration 3 runs again and fails (its column exists) — a real failure.
    let d = Daemon::start(&data);
    assert!(d.terminate().success());
    let graph = data.join("memory/graph.db");
    Connection::open(&graph)
        .unwrap()
        .execute_batch("PRAGMA user_version = 2;")
        .unwrap();
    let memory_before = version(&data.join("memory/memory.db"));

    let (ok, _, err) = homed(&data, &[]);
    assert!(!ok, "the start must stop");
    assert!(
        err.contains("the upgrade of memory/graph.db failed")
            && err.contains("duplicate column")
            && err.contains("put back from the snapshot"),
        "{err}"
    );
    assert_eq!(version(&graph), 2, "as it was");
    assert_eq!(version(&data.join("memory/memory.db")), memory_before);
    let c = Connection::open(&graph).unwrap();
    let cols: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM pragma_table_info('relations') WHERE name = 'reviewed_at'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(cols, 1, "the file is the one that was there, not a half-migrated one");
}

#[test]
fn an_older_binary_refuses_a_newer_data_dir_and_names_the_versions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    assert!(d.terminate().success());
    let memory = data.join("memory/memory.db");
    let target = version(&memory);
    Connection::open(&memory)
        .unwrap()
        .execute_batch(&format!("PRAGMA user_version = {};", target + 3))
        .unwrap();
    std::fs::write(data.join("VERSION"), "9.9.9\n").unwrap();
    let (ok, _, err) = homed(&data, &[]);
    assert!(!ok);
    assert!(
        err.contains("written by a newer homed (9.9.9)")
            && err.contains(&format!(
                "memory/memory.db is at schema {}, this homed knows {target}",
                target + 3
            ))
            && err.contains("homed rollback"),
        "{err}"
    );
    assert_eq!(version(&memory), target + 3, "untouched");
    assert!(!data.join("snapshots").exists() || std::fs::read_dir(data.join("snapshots")).unwrap().next().is_none());
}
