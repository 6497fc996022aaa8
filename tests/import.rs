//! Importing a history on a real daemon: `POST /api/v1/memory/import`,
//! `homed memory import` and `homed eval locomo --live`.

mod common;

use std::time::Duration;

use common::Daemon;
use common::api::get;
use serde_json::{Value, json};

/// Posts an NDJSON body to the import endpoint: (status, JSON answer).
fn import(d: &Daemon, body: impl Into<Vec<u8>>) -> (u16, Value) {
    let r = d
        .client()
        .post(d.url("/api/v1/memory/import"))
        .header("content-type", "application/x-ndjson")
        .timeout(Duration::from_secs(300))
        .body(body.into())
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn ndjson(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn context(d: &Daemon) -> Vec<Value> {
    get(d, "/api/v1/memory/context")["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Every line of the text log.
fn text_log(d: &Daemon) -> Vec<Value> {
    let mut out = Vec::new();
    for f in std::fs::read_dir(d.data.join("memory/text")).into_iter().flatten() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        out.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    out
}

#[test]
fn imported_turns_are_remembered_at_their_times_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let body = ndjson(&[
        json!({"time": "2023-05-08T13:56:00Z", "speaker": "Caroline", "text": "I went to a support group yesterday."}),
        json!({"time": 1683554161, "speaker": "Melanie", "text": "That's great, Caroline!", "source": "locomo", "id": "D1:2"}),
        json!({"time": "2023-05-08T15:56:02+02:00", "speaker": "Caroline", "text": "It was powerful."}),
    ]);
    let (status, v) = import(&d, body.clone());
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["imported"].as_u64(), v["skipped"].as_u64()),
        (Some(3), Some(0)),
        "{v}"
    );
    let events = context(&d);
    let seen: Vec<(i64, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["ts_ms"].as_i64().unwrap(),
                e["source"].as_str().unwrap(),
                e["input"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1_683_554_160_000, "Caroline", "I went to a support group yesterday."),
            (1_683_554_161_000, "Melanie", "That's great, Caroline!"),
            (1_683_554_162_000, "Caroline", "It was powerful."),
        ],
        "each turn at its own time, said by its speaker"
    );
    let log = text_log(&d);
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(
        log.iter()
            .all(|l| l["imported"] == true && l["ts"].as_i64().unwrap() < 1_700_000_000_000)
    );

    // The same lines again: nothing twice.
    let (status, v) = import(&d, body);
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["imported"].as_u64(), v["skipped"].as_u64()),
        (Some(0), Some(3)),
        "{v}"
    );
    assert_eq!(context(&d).len(), 3);
    assert_eq!(text_log(&d).len(), 3);

    // Not NDJSON: said how to send it.
    let r = d
        .client()
        .post(d.url("/api/v1/memory/import"))
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    assert!(r.text().unwrap().contains("application/x-ndjson"));
    // Only the owner: without the token, the guard answers first.
    let r = reqwest::blocking::Client::new()
        .post(d.url("/api/v1/memory/import"))
        .header("content-type", "application/x-ndjson")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(get(&d, "/api/v1/openapi.json")["paths"]["/api/v1/memory/import"]["post"].is_object());
}

#[test]
fn a_bad_line_names_its_number_and_field_and_imports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let mut lines: Vec<Value> = (0..10)
        .map(|i| json!({"time": 1683554160 + i, "speaker": "Ana", "text": format!("turn {i}")}))
        .collect();
    lines[6] = json!({"time": "last tuesday", "speaker": "Ana", "text": "turn 6"});
    let (status, v) = import(&d, ndjson(&lines));
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["line"], 7, "{v}");
    assert_eq!(v["field"], "time", "{v}");
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.starts_with("line 7: field `time`") && msg.contains("nothing was imported"),
        "{msg}"
    );
    assert!(context(&d).is_empty(), "nothing imported");
    assert!(text_log(&d).is_empty());
    // Over the cap: a clear 413 before anything is read.
    let big = vec![b' '; 32 * 1024 * 1024 + 1];
    let r = d
        .client()
        .post(d.url("/api/v1/memory/import"))
        .header("content-type", "application/x-ndjson")
        .body(big)
        .send();
    if let Ok(r) = r {
        // (the daemon may close the connection before the client finished sending)
        assert_eq!(r.status().as_u16(), 413);
        assert!(r.text().unwrap().contains("split the history into parts"));
    }
}

#[test]
fn a_long_history_is_pruned_and_distilled_as_if_said_live() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let progress = common::api::listen(&d);
    // 20 sessions of 30 turns, a day apart (600 turns), with a self-statement in the
    // first one for the rule distiller.
    let day0 = 1_683_504_000; // 2023-05-08 00:00 UTC
    let mut lines = Vec::new();
    for s in 0..20 {
        for t in 0..30 {
            let text = if s == 0 && t == 0 {
                "我叫张三".to_owned()
            } else {
                format!("session {s} turn {t}: we talked about the weather and the garden")
            };
            let speaker = if t % 2 == 0 { "Ana" } else { "Ben" };
            lines.push(json!({"time": day0 + s * 86_400 + t, "speaker": speaker, "text": text}));
        }
    }
    let (status, v) = import(&d, ndjson(&lines));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["imported"], 600, "{v}");
    assert!(v["archived"].as_u64().unwrap() >= 500, "{v}");
    // The window is kept in size as the distill heartbeat keeps it live (at most
    // 2 × core.agent.max_context_size = 60); the rest went into documents.
    let status = get(&d, "/api/v1/memory/status");
    let events = status["context_events"].as_u64().unwrap();
    assert!((30..=60).contains(&events), "{status}");
    assert!(status["documents"].as_u64().unwrap() >= 1, "{status}");
    let window = context(&d);
    assert!(
        window
            .iter()
            .any(|e| e["input"].as_str().unwrap().starts_with("session 19 turn 29"))
    );
    // The self-statement reached the graph.
    let graph = get(&d, "/api/v1/memory/graph?q=张三");
    assert!(graph.to_string().contains("张三"), "{graph}");
    // Progress on the bus, ending with a finished event.
    std::thread::sleep(Duration::from_millis(300));
    let seen: Vec<Value> = progress
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _)| name == "memory_import")
        .map(|(_, data)| data.clone())
        .collect();
    assert!(seen.len() >= 2, "{seen:?}");
    let last = seen.last().unwrap();
    assert_eq!(
        (last["finished"].as_bool(), last["done"].as_u64()),
        (Some(true), Some(600)),
        "{last}"
    );
    assert_eq!(last["imported"], 600);
    let log = d.log_text();
    assert!(log.contains("history import finished"), "{log}");
}

#[test]
fn homed_memory_import_sends_a_locomo_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start(&data);
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/locomo-mini.json");
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
            .args([
                "--data",
                data.to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{}", d.port),
            ])
            .args(["memory", "import", fixture])
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("imported 11 turns"), "{stdout}");
    let events = context(&d);
    assert_eq!(events.len(), 11);
    // 9:15 am on 3 March 2024, one second a turn.
    assert_eq!(events[0]["ts_ms"], 1_709_457_300_000i64);
    assert_eq!(events[1]["ts_ms"], 1_709_457_301_000i64);
    assert_eq!(
        (events[0]["source"].as_str(), events[1]["source"].as_str()),
        (Some("Ana"), Some("Ben"))
    );
    assert!(
        events[3]["input"]
            .as_str()
            .unwrap()
            .contains("[shares a photo: a photo of running shoes"),
        "images by their caption: {}",
        events[3]
    );
    let again = run();
    assert!(String::from_utf8_lossy(&again.stdout).contains("imported 0 turns (11 skipped"));
}

#[test]
fn the_live_evaluation_measures_the_requests_the_vendor_received() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/locomo-mini.json");
    let (r, stderr) = eval_live(&[fixture]);
    assert_eq!(r["conversations"], 1);
    assert_eq!(r["questions"], 4, "{r}");
    assert_eq!(
        r["requests"], r["questions"],
        "one vendor request per question: {r}\n{stderr}"
    );
    assert_eq!(r["failed"], 0);
    assert_eq!(r["window"], 8192);
    assert_eq!(r["imported_turns"], 11);
    for f in [&r["overall"], &r["by_category"]["1"]] {
        let recall = f["evidence_recall"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&recall), "{f}");
        for k in ["memory_tokens", "prompt_tokens", "latency_ms"] {
            assert!(f[k]["p50"].as_f64().unwrap() > 0.0, "{k}: {f}");
            assert!(
                f[k]["p95"].as_f64().unwrap() >= f[k]["p50"].as_f64().unwrap(),
                "{k}: {f}"
            );
        }
        assert!(
            f["prompt_tokens"]["p50"].as_f64().unwrap() > f["memory_tokens"]["p50"].as_f64().unwrap(),
            "{f}"
        );
    }
    assert!(
        stderr.contains("conversation 1/1") && stderr.contains("question 4/4"),
        "{stderr}"
    );
}

#[test]
fn the_lifecycle_evaluation_lives_the_conversation_through_months_and_compares() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/locomo-zh.json");
    let (r, stderr) = eval_live(&[fixture, "--lifecycle", "--months", "2", "--limit-conversations", "1"]);
    let l = &r["lifecycle"];
    assert_eq!(l["months"], 2, "{l}");
    assert_eq!(l["questions"], r["questions"], "the same questions: {l}");
    assert_eq!(
        (l["failed"].as_u64(), l["over_window"].as_u64()),
        (Some(0), Some(0)),
        "{l}"
    );
    assert_eq!(l["recall"]["fresh"], r["overall"]["evidence_recall"], "{l}");
    // Living through time (every heartbeat, as often as its interval says) loses nothing
    // the fresh import finds.
    let ratio = l["recall"]["ratio"].as_f64().unwrap();
    assert!(ratio >= 0.98, "recall after the lifecycle / fresh = {ratio}: {l}");
    for k in ["distill", "rules", "archive", "merge", "review"] {
        assert!(l["rounds"][k].as_u64().unwrap() > 0, "{k} ran: {l}");
    }
    assert_eq!(l["round_failures"], 0, "{l}");
    let s = &l["storage"];
    assert!(
        s["archived_documents"].as_u64().unwrap() >= 1,
        "cold documents distilled: {s}"
    );
    assert!(
        s["documents"].as_u64().unwrap() >= s["archived_documents"].as_u64().unwrap(),
        "and kept: {s}"
    );
    assert_eq!(
        s["passages"].as_u64().unwrap() + s["events"].as_u64().unwrap(),
        r["imported_turns"].as_u64().unwrap(),
        "every turn is in the window or kept verbatim as a passage: {s}"
    );
    assert!(s["bytes_per_turn"].as_f64().unwrap() > 0.0, "{s}");
    assert!(stderr.contains("month 2/2 lived"), "{stderr}");
}

/// `homed eval locomo <args> --live --json --window 8192`: its report and its stderr
/// (progress), once it succeeded.
fn eval_live(args: &[&str]) -> (Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_homed"))
        .args(["eval", "locomo"])
        .args(args)
        .args(["--live", "--json", "--window", "8192"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (r, stderr)
}
