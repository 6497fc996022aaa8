//! The self-check, black box: `homed selftest` against a running daemon with a healthy
//! fake vendor, a broken one and one without a key, and the `selftest` tool through
//! the tool loop (HTTP → turn → the vendor's tool call → the report in the reply).

mod common;

use std::process::Command;
use std::sync::atomic::Ordering;

use common::Daemon;
use serde_json::json;

fn selftest(d: &Daemon) -> (i32, String) {
    let listen = format!("127.0.0.1:{}", d.port);
    selftest_with(d, &["--listen", &listen])
}

fn selftest_with(d: &Daemon, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["--data", d.data.to_str().unwrap()])
        .args(extra)
        .arg("selftest")
        .env_remove("RUST_LOG")
        .env_remove("HOMED_LISTEN")
        .output()
        .expect("run homed selftest");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text + &String::from_utf8_lossy(&out.stderr),
    )
}

fn line<'a>(report: &'a str, start: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting `{start}` in:\n{report}"))
}

#[test]
fn selftest_names_the_broken_source_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let good = common::vendor::start();
    let bad = common::vendor::start();
    bad.failing.store(true, Ordering::SeqCst);
    common::api::put_settings(&d, common::vendor::source_settings("good", &good.url, 5));
    common::api::put_settings(&d, common::vendor::source_settings("bad", &bad.url, 0));
    common::api::put_settings(
        &d,
        json!({
            "core.llm.sources.nokey.base_url": "https://vendor.example.invalid/v1",
            "core.llm.sources.nokey.model": "m",
            "core.llm.sources.nokey.adapter": "openai",
        }),
    );
    common::api::wait_sources(&d, 2);
    common::api::wait_for(&d, "/api/v1/plugins", "the bundled plugins running", |p| {
        p["plugins"]
            .as_array()
            .is_some_and(|ps| !ps.is_empty() && ps.iter().all(|p| p["state"] == "running"))
    });

    let (code, report) = selftest(&d);
    assert_eq!(code, 1, "a broken source fails the check:\n{report}");
    assert!(line(&report, "FAIL llm      bad:").contains("500"), "{report}");
    assert!(line(&report, "OK   llm      good:").contains("answered in"), "{report}");
    assert!(line(&report, "N/C  llm      nokey:").contains("key"), "{report}");
    assert!(line(&report, "OK   database config.db:").contains("quick_check ok"));
    assert!(line(&report, "OK   database memory/memory.db:").contains("quick_check ok"));
    assert!(line(&report, "OK   plugin   files:").contains("files_read"), "{report}");
    assert!(report.lines().any(|l| l.contains(" embedder ")), "{report}");
    assert!(report.trim_end().ends_with("see the lines marked FAIL)"), "{report}");
    assert!(
        bad.calls.load(Ordering::SeqCst) >= 1,
        "the broken source was really called"
    );

    // Through the tool loop: the model calls `selftest` and reads the same verdict;
    // inside the daemon the embedder makes a real test embedding (the vendor's
    // `/v1/embeddings`).
    common::api::put_settings(
        &d,
        json!({"core.memory.embedder": "remote", "core.memory.embed_url": good.url, "core.memory.embed_model": "fake-embed"}),
    );
    common::api::wait_for(&d, "/api/v1/memory/status", "the remote embedder active", |s| {
        s["embedder"]["active"] == "remote"
    });
    let (status, body) = common::api::post(&d, "/api/v1/messages", json!({"text": "call-tool selftest {}"}));
    assert_eq!(status, 200, "{body}");
    let reply = body["reply"].as_str().unwrap();
    assert!(
        reply.contains("FAIL llm      bad:") && reply.contains("verdict: BROKEN"),
        "{reply}"
    );
    assert!(reply.contains("OK   plugin   files:"), "{reply}");
    assert!(
        reply.contains("OK   embedder remote: test embedding of 8 dimensions"),
        "{reply}"
    );

    // Fixed: the same check passes and exits 0 (unless another part is broken here).
    bad.failing.store(false, Ordering::SeqCst);
    let (code, report) = selftest(&d);
    assert!(line(&report, "OK   llm      bad:").contains("answered in"), "{report}");
    let others_failing = report.lines().any(|l| l.starts_with("FAIL"));
    assert_eq!(code, if others_failing { 1 } else { 0 }, "{report}");
    assert!(
        !others_failing,
        "nothing else may be broken on a fresh daemon:\n{report}"
    );
    assert!(report.contains("verdict: healthy"), "{report}");
    // Without --listen, the daemon is found where it said it listens (DATA/http-address:
    // the harness starts it on port 0, so the default 127.0.0.1:8080 would be wrong).
    let (code, found) = selftest_with(&d, &[]);
    assert_eq!(code, 0, "{found}");
    assert!(found.contains("verdict: healthy"), "{found}");

    // No daemon at the address: the daemon itself is a failed part.
    drop(d);
    let out = Command::new(env!("CARGO_BIN_EXE_homed"))
        .args([
            "--data",
            data.to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{}", common::free_port()),
            "selftest",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(line(&text, "FAIL daemon").contains("is homed running"), "{text}");
}
