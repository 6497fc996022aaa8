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

/// The WebUI's backups (issue 33 item 3): "Back up now" while the daemon runs, a
/// download, a restore that takes the way back first, is put in place at the next
/// start, and leaves the daemon on the restored data; hostile names find nothing.
#[test]
fn the_webui_backs_up_and_restores_with_a_way_back() {
    let (_dir, data, d, _v) = daemon_with_vendor();
    let put = |d: &Daemon, text: &str| {
        let (status, body) = common::api::put(d, "/api/v1/persona", json!({ "text": text }));
        assert_eq!(status, 200, "{body}");
    };
    put(&d, "You are Mira.");
    common::api::put_settings(&d, json!({"core.agent.max_tool_turns": 11}));
    let (status, body) = post(&d, "/api/v1/backups", json!({}));
    assert_eq!(status, 200, "{body}");
    let taken = body["backup"]["name"].as_str().unwrap().to_owned();
    assert!(body["backup"]["bytes"].as_u64().unwrap() > 0, "{body}");
    let listed = get(&d, "/api/v1/backups");
    assert_eq!(listed["backups"][0]["name"], taken.as_str(), "{listed}");
    assert_eq!(listed["keep"], 7, "{listed}");
    assert!(data.join("backups").join(&taken).is_file());

    // The download is the archive itself.
    let r = d
        .client()
        .get(d.url(&format!("/api/v1/backups/{taken}")))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "application/zip");
    let got = r.bytes().unwrap();
    assert_eq!(&got[..2], b"PK");
    assert_eq!(
        got.as_ref(),
        std::fs::read(data.join("backups").join(&taken)).unwrap(),
        "streamed whole"
    );
    for bad in [
        "..%2Fconfig.db",
        "config.db",
        "homeagent-x.zip",
        "%2Fetc%2Fpasswd",
        "homeagent-20201205T131512.572Z.zip",
    ] {
        let r = d.client().get(d.url(&format!("/api/v1/backups/{bad}"))).send().unwrap();
        assert_eq!(r.status().as_u16(), 404, "{bad}");
    }

    // Later changes, then the restore: the way back is taken first.
    put(&d, "You are Ada.");
    common::api::put_settings(&d, json!({"core.agent.max_tool_turns": 3}));
    let (status, body) = post(&d, &format!("/api/v1/backups/{taken}/restore"), json!({}));
    assert_eq!(status, 202, "{body}");
    let undo = body["undo"].as_str().unwrap().to_owned();
    assert_ne!(undo, taken);
    assert_eq!(d.wait_exit().code(), Some(75), "it restarts to put the backup in place");

    let d = Daemon::start(&data);
    assert_eq!(get(&d, "/api/v1/persona")["text"], "You are Mira.");
    assert_eq!(get(&d, "/api/v1/settings")["settings"]["core.agent.max_tool_turns"], 11);
    let listed = get(&d, "/api/v1/backups");
    let names: Vec<&str> = listed["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&taken.as_str()) && names.contains(&undo.as_str()),
        "{listed}"
    );
    assert_eq!(listed["restore_pending"], false);
    assert!(!data.join("backups/.staged").exists() && !data.join("restore.pending").exists());

    // The way back works the same way.
    let (status, body) = post(&d, &format!("/api/v1/backups/{undo}/restore"), json!({}));
    assert_eq!(status, 202, "{body}");
    assert_eq!(d.wait_exit().code(), Some(75));
    let d = Daemon::start(&data);
    assert_eq!(get(&d, "/api/v1/persona")["text"], "You are Ada.");
}

/// Scheduled backups on the kernel's clock: advancing a virtual-clock daemon by ten
/// days takes one a day and keeps the newest `core.backup.keep`.
#[test]
fn scheduled_backups_follow_the_clock_and_keep_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start_env(&data, Some("info"), &[("HOMED_VIRTUAL_CLOCK", "1767225600")]);
    common::api::put_settings(&d, json!({"core.backup.keep": 3, "core.backup.interval": "1d"}));
    let (status, body) = post(&d, "/api/v1/clock/advance", json!({"by": "10d"}));
    assert_eq!(status, 200, "{body}");
    assert!(body["rounds"]["backup"].as_u64().unwrap() >= 10, "{body}");
    let listed = get(&d, "/api/v1/backups");
    let backups = listed["backups"].as_array().unwrap();
    assert_eq!(backups.len(), 3, "{listed}");
    // Named by the virtual calendar: one a day from 2026-01-01 (each due a day after
    // the last was written, a few milliseconds after its own due time).
    let newest = backups[0]["name"].as_str().unwrap();
    assert!(
        newest.starts_with("homeagent-20260110T") || newest.starts_with("homeagent-20260111T"),
        "{listed}"
    );
    let days: Vec<i64> = backups
        .iter()
        .map(|b| b["at_ms"].as_i64().unwrap() / 86_400_000)
        .collect();
    assert_eq!(days, [days[0], days[0] - 1, days[0] - 2], "one a day: {listed}");
    assert_eq!(listed["last"]["trigger"], "schedule", "{listed}");
    // Off: no more are taken, none are removed.
    common::api::put_settings(&d, json!({"core.backup.keep": 0}));
    let (status, body) = post(&d, "/api/v1/clock/advance", json!({"by": "3d"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(get(&d, "/api/v1/backups")["backups"].as_array().unwrap().len(), 3);
}
