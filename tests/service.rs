//! Running homed as a service (issue 33 item 4, first part): `homed service install
//! --print` gives a unit that systemd accepts, and the daemon speaks systemd's notify
//! protocol (READY=1 once it serves, WATCHDOG=1 with each heartbeat, STOPPING=1) to
//! the socket in NOTIFY_SOCKET.

mod common;

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

use common::Daemon;

#[test]
fn the_printed_unit_is_one_systemd_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args([
            "service",
            "install",
            "--print",
            "--data",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:18123",
        ])
        .env("HOME", dir.path())
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("Type=notify") && text.contains("WatchdogSec=45s") && text.contains(" --failback\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("--data {}", data.display())) && text.contains("--listen 127.0.0.1:18123"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}/.config/systemd/user/homed.service", dir.path().display())),
        "{text}"
    );
    // The unit part, as systemd reads it.
    let unit: String = text
        .lines()
        .take_while(|l| !l.starts_with("# No user systemd"))
        .collect::<Vec<_>>()
        .join("\n");
    let path = dir.path().join("homed.service");
    std::fs::write(&path, unit + "\n").unwrap();
    match Command::new("systemd-analyze")
        .args(["verify", path.to_str().unwrap()])
        .output()
    {
        Ok(v) => {
            let err = String::from_utf8_lossy(&v.stderr);
            // Lines about the host's own units are not ours.
            let ours: Vec<&str> = err.lines().filter(|l| l.contains("homed.service")).collect();
            assert!(v.status.success() || ours.is_empty(), "systemd-analyze verify:\n{err}");
        }
        Err(e) => eprintln!("SKIPPED the systemd-analyze check: {e}"),
    }
}

#[test]
fn the_daemon_tells_a_service_manager_it_is_ready_alive_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let d = Daemon::start_env(
        &dir.path().join("data"),
        None,
        &[("NOTIFY_SOCKET", sock_path.to_str().unwrap())],
    );
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 256];
    while Instant::now() < deadline && !(seen.iter().any(|s| s == "READY=1") && seen.iter().any(|s| s == "WATCHDOG=1"))
    {
        if let Ok(n) = sock.recv(&mut buf) {
            seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    assert!(
        seen.iter().any(|s| s == "READY=1") && seen.iter().any(|s| s == "WATCHDOG=1"),
        "{seen:?}"
    );
    assert!(d.terminate().success());
    let mut stopping = false;
    while let Ok(n) = sock.recv(&mut buf) {
        stopping |= &buf[..n] == b"STOPPING=1";
    }
    assert!(stopping, "no STOPPING=1 after SIGTERM");
}

/// `POST /api/v1/daemon/restart`: the daemon stops gracefully and exits with 75, the
/// status its unit's `RestartForceExitStatus` answers by starting it again.
#[test]
fn a_restart_asked_for_ends_the_process_with_the_status_the_unit_restarts_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = loop {
        if let Ok(a) = std::fs::read_to_string(data.join("http-address"))
            && !a.trim().is_empty()
            && std::fs::metadata(data.join("api-token")).is_ok()
        {
            break a.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "homed never named its address");
        std::thread::sleep(Duration::from_millis(50));
    };
    let token = std::fs::read_to_string(data.join("api-token")).unwrap();
    let client = reqwest::blocking::Client::new();
    let url = format!("http://{addr}/api/v1/daemon/restart");
    let r = loop {
        match client.post(&url).bearer_auth(token.trim()).send() {
            Ok(r) => break r,
            Err(e) => {
                assert!(Instant::now() < deadline, "{e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    assert_eq!(r.status().as_u16(), 202);
    let body: serde_json::Value = r.json().unwrap();
    assert_eq!(body["service_manager"], false, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("start it again yourself"),
        "{body}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "homed did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(75));
}

/// `homed service status`: the unit, whether a daemon holds the data dir, and what the
/// last start left (a failed boot the next `--failback` start will report).
#[test]
fn service_status_says_what_runs_and_what_the_last_start_left() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let status = || {
        let out = Command::new(env!("CARGO_BIN_EXE_homed"))
            .args(["service", "status", "--data", data.to_str().unwrap()])
            .env("HOME", dir.path())
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let d = Daemon::start(&data);
    let text = status();
    assert!(
        text.contains("unit: not installed") && text.contains("daemon: running"),
        "{text}"
    );
    assert!(d.terminate().success());
    std::fs::write(data.join("boot-failure"), "module `memory` did not start").unwrap();
    let text = status();
    assert!(text.contains("daemon: not running"), "{text}");
    assert!(
        text.contains("last boot failed: module `memory` did not start"),
        "{text}"
    );
}
