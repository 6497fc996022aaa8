//! Damage is noticed at start (issue 30, item 3), through the real daemon: a database
//! with an overwritten page, a zero-length or deleted database that held data, and a
//! cut-off token file are refused with the file named and the way out; following the
//! way out starts the daemon again.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::Daemon;
use serde_json::json;

/// A daemon that wrote a history of `turns` long turns into memory.db, stopped cleanly.
fn data_with_history(dir: &Path, turns: usize) -> std::path::PathBuf {
    let data = dir.join("data");
    let d = Daemon::start(&data);
    let body: String = (0..turns)
        .map(|i| {
            let text = format!(
                "turn {i}: {}",
                "the quick brown fox jumps over the lazy dog ".repeat(20)
            );
            format!(
                "{}\n",
                json!({"time": 1_683_554_161 + i as i64 * 60, "speaker": "Ann", "text": text})
            )
        })
        .collect();
    let r = d
        .client()
        .post(d.url("/api/v1/memory/import"))
        .header("content-type", "application/x-ndjson")
        .timeout(Duration::from_secs(300))
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap_or_default());
    assert!(d.terminate().success());
    data
}

/// Starts homed on `data` expecting a refusal: its stderr.
fn refused_start(data: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "homed started on a damaged data dir:\n{err}");
    err
}

#[test]
fn an_overwritten_page_of_memory_db_is_refused_and_moving_it_aside_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_history(dir.path(), 300);
    let db = data.join("memory/memory.db");
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 64 * 1024, "the history filled pages: {}", bytes.len());
    let mid = bytes.len() / 2;
    bytes[mid..mid + 4096].fill(0x5a);
    std::fs::write(&db, bytes).unwrap();

    let err = refused_start(&data);
    assert!(err.contains("memory/memory.db is damaged"), "{err}");
    assert!(err.contains("quick_check") && err.contains("Restore it"), "{err}");
    assert!(err.contains(&format!("mv '{}'", db.display())), "the way out: {err}");

    // The way out: moved aside as the message says, the memory starts empty.
    std::fs::rename(&db, data.join("memory/memory.db.damaged")).unwrap();
    let d = Daemon::start(&data);
    assert!(
        d.log_text().contains("the damaged file was moved aside"),
        "{}",
        d.log_text()
    );
    let ctx = common::api::get(&d, "/api/v1/memory/context");
    assert_eq!(ctx["events"].as_array().map(Vec::len), Some(0), "{ctx}");
    assert!(
        d.log_text().contains("quick_check ok"),
        "each check is logged with its time"
    );
}

#[test]
fn a_zero_length_memory_db_or_a_deleted_config_db_is_reported_not_started_empty() {
    let dir = tempfile::tempdir().unwrap();
    let data = data_with_history(dir.path(), 5);
    assert!(data.join("databases.json").exists(), "the manifest of a good start");

    let mem = data.join("memory/memory.db");
    let kept = std::fs::read(&mem).unwrap();
    std::fs::write(&mem, b"").unwrap();
    let err = refused_start(&data);
    assert!(
        err.contains("memory/memory.db held") && err.contains("is now empty (0 bytes)"),
        "{err}"
    );
    assert!(err.contains("databases.json") && err.contains("backup"), "{err}");
    std::fs::write(&mem, kept).unwrap();

    std::fs::remove_file(data.join("config.db")).unwrap();
    let err = refused_start(&data);
    assert!(
        err.contains("config.db held") && err.contains("is now missing"),
        "{err}"
    );

    // The owner accepts the loss by deleting the manifest: the settings start anew.
    std::fs::remove_file(data.join("databases.json")).unwrap();
    let d = Daemon::start(&data);
    assert_eq!(
        common::api::get(&d, "/api/v1/memory/context")["events"]
            .as_array()
            .map(Vec::len),
        Some(5),
        "the memory that was not lost is served"
    );
}

#[test]
fn a_cut_off_token_file_is_refused_never_the_owners_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    Daemon::start(&data).terminate();
    std::fs::write(data.join("api-token"), "x\n").unwrap();
    let err = refused_start(&data);
    assert!(
        err.contains("only 1 characters long") && err.contains("homed token --rotate"),
        "{err}"
    );
    // The flags go after the subcommand too, as its help shows them.
    let out = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["token", "--rotate", "--data", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = Daemon::start(&data);
    assert_eq!(d.token().len(), 64);
    let printed = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["token", "--data", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), d.token());
    assert_eq!(
        d.client()
            .get(d.url("/api/v1/actors"))
            .send()
            .unwrap()
            .status()
            .as_u16(),
        200
    );
}
