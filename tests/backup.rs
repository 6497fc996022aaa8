//! `homed backup` of a busy daemon and `homed restore` into a fresh data dir whose
//! memory answers the same (issue 33 item 3), with the real binary; a hostile archive
//! is refused before anything is written.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Command;

use common::Daemon;
use common::api::{daemon_with_vendor, get, post};
use serde_json::json;

fn homed(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_backup_of_a_running_daemon_restores_into_a_memory_that_answers_the_same() {
    let (dir, data, d, _v) = daemon_with_vendor();
    let call = r#"call-tool doc_commit {"content":"The spare key is under the blue flowerpot"}"#;
    let (code, body) = post(&d, "/api/v1/messages", json!({ "text": call }));
    assert_eq!(code, 200, "{body}");
    let (code, _) = post(
        &d,
        "/api/v1/messages",
        json!({ "text": "my sister Anna lives in Lyon" }),
    );
    assert_eq!(code, 200);
    let archive = dir.path().join("home.zip");
    // While the daemon runs.
    let (ok, out, err) = homed(&["backup", archive.to_str().unwrap(), "--data", data.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("databases copied consistently"), "{out}");
    let zip = zip::ZipArchive::new(std::fs::File::open(&archive).unwrap()).unwrap();
    let names: Vec<String> = zip.file_names().map(|n| n.unwrap().into_owned()).collect();
    let has = |n: &str| names.iter().any(|x| x == n);
    assert!(
        has("memory/memory.db") && has("config.db") && has("api-token"),
        "{names:?}"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("-wal") || n == "homed.lock" || n == "cli.sock"),
        "{names:?}"
    );
    drop(d);

    let restored = dir.path().join("restored");
    let (ok, out, err) = homed(&[
        "restore",
        archive.to_str().unwrap(),
        "--data",
        restored.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    // Not over a data dir that has something in it.
    let (ok, _, err) = homed(&[
        "restore",
        archive.to_str().unwrap(),
        "--data",
        restored.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("is not empty"), "{err}");

    let d2 = Daemon::start(&restored);
    let docs = get(&d2, "/api/v1/memory/documents?q=flowerpot");
    assert!(docs.to_string().contains("blue flowerpot"), "{docs}");
    let history = get(&d2, "/api/v1/chat/history?q=lyon");
    assert!(history.to_string().contains("Anna lives in Lyon"), "{history}");
}

#[test]
fn an_archive_with_an_entry_outside_the_data_dir_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("evil.zip");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&archive).unwrap());
    let o = zip::write::SimpleFileOptions::default();
    z.start_file("backup.json", o).unwrap();
    z.write_all(br#"{"homed":"0","taken_at_ms":0,"files":1,"databases":{}}"#)
        .unwrap();
    z.start_file("../escaped", o).unwrap();
    z.write_all(b"x").unwrap();
    z.finish().unwrap();
    let target = dir.path().join("data");
    let (ok, _, err) = homed(&["restore", archive.to_str().unwrap(), "--data", target.to_str().unwrap()]);
    assert!(!ok && err.contains("outside the data directory"), "{err}");
    assert!(!dir.path().join("escaped").exists() && !Path::new(&target).join("backup.json").exists());
}
