//! Failback boot (issue 33 item 4): `homed --failback` (how the service unit runs it)
//! does not exit when its start fails; it serves the WebUI's recovery page with what
//! failed and the backups, every other route refused with the way out, and a backup
//! restored from there brings the daemon back with its data. Through the real binary.

mod common;

use common::Daemon;
use common::api::{get, post};
use serde_json::json;

#[test]
fn a_failed_start_serves_the_recovery_page_and_a_backup_brings_the_daemon_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A daemon with something to lose, and a backup of it.
    let d = Daemon::start(&data);
    let (status, body) = common::api::put(&d, "/api/v1/persona", json!({"text": "You are Mira."}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&d, "/api/v1/backups", json!({}));
    assert_eq!(status, 200, "{body}");
    let backup = body["backup"]["name"].as_str().unwrap().to_owned();
    assert!(d.terminate().success());

    // The settings database is damaged: the start fails at the damage check.
    let config = data.join("config.db");
    let mut bytes = std::fs::read(&config).unwrap();
    let n = bytes.len();
    bytes[n / 2..].fill(0x5a);
    std::fs::write(&config, bytes).unwrap();
    for side in ["config.db-wal", "config.db-shm"] {
        let _ = std::fs::remove_file(data.join(side));
    }

    let d = Daemon::start_recovering(&data);
    let r = get(&d, "/api/v1/recovery");
    assert_eq!(r["recovery"], true, "{r}");
    assert_eq!(r["stage"], "prepare", "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("config.db"),
        "the failure names the file: {r}"
    );
    assert_eq!(r["backups"][0]["name"], backup.as_str(), "{r}");
    // The page itself, in place of the dashboard; its script and the catalog load.
    let page = d.client().get(d.url("/")).send().unwrap().text().unwrap();
    assert!(page.contains("recovery.js"), "{page}");
    let js = d.client().get(d.url("/recovery.js")).send().unwrap();
    assert_eq!(js.status().as_u16(), 200);
    // Routes that need the kernel say where to go, and nothing needs the token less.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "hello"}));
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().unwrap().contains("recovery mode"), "{body}");
    let anonymous = reqwest::blocking::get(d.url("/api/v1/recovery")).unwrap();
    assert_eq!(
        anonymous.status().as_u16(),
        401,
        "the recovery routes need the owner token too"
    );

    // Restore the backup: the daemon exits for its restart, and starts on it.
    let (status, body) = post(&d, &format!("/api/v1/recovery/backups/{backup}/restore"), json!({}));
    assert_eq!(status, 202, "{body}");
    assert_eq!(d.wait_exit().code(), Some(75));
    let d = Daemon::start(&data);
    assert_eq!(get(&d, "/api/v1/persona")["text"], "You are Mira.");
    assert_eq!(get(&d, "/api/v1/recovery")["recovery"], false);
    // What the data dir held is kept beside the backups (the damaged file is evidence).
    let kept: Vec<_> = std::fs::read_dir(data.join("backups"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("replaced-"))
        .collect();
    assert_eq!(kept.len(), 1);
    assert!(kept[0].path().join("config.db").exists());
}

/// Without `--failback` (a person at a terminal) the failed start exits with the
/// reason, as before; a start whose kernel would not boot is remembered, and the next
/// `--failback` start serves the recovery page at once, until "try again".
#[test]
fn without_failback_a_failed_start_exits_and_a_failed_boot_is_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    assert!(d.terminate().success());
    std::fs::write(data.join("config.db"), b"").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env_remove("HOMED_FAILBACK")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("config.db"));

    // A remembered failed boot (as the kernel's would be written): straight to recovery.
    let data2 = dir.path().join("data2");
    let d = Daemon::start(&data2);
    assert!(d.terminate().success());
    std::fs::write(
        data2.join("boot-failure"),
        "module `memory` did not start: cannot open memory.db",
    )
    .unwrap();
    let d = Daemon::start_recovering(&data2);
    let r = get(&d, "/api/v1/recovery");
    assert_eq!(
        (r["stage"].as_str(), r["error"].as_str()),
        (
            Some("boot"),
            Some("module `memory` did not start: cannot open memory.db")
        ),
        "{r}"
    );
    let (status, body) = post(&d, "/api/v1/recovery/retry", json!({}));
    assert_eq!(status, 202, "{body}");
    assert_eq!(d.wait_exit().code(), Some(75));
    assert!(
        !data2.join("boot-failure").exists(),
        "try again forgets the failed boot"
    );
    let d = Daemon::start(&data2);
    assert_eq!(get(&d, "/api/v1/recovery")["recovery"], false);
}
