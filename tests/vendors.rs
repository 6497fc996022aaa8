//! A real `homed` against vendor doubles on loopback that misbehave the way real
//! vendors and proxies do (tests/common/vendor/raw.rs writes the exact bytes): every
//! HTTP/1.x framing answers, a hung source falls back within its first-byte timeout, a
//! cut-off stream is a 502 naming the cause, a paused source answers at once after its
//! settings are corrected, a dripping source counts as down, and `Retry-After` holds.

mod common;

use std::time::{Duration, Instant};

use common::Daemon;
use common::api::{get, post, put_settings, wait_for, wait_sources};
use common::vendor::raw::{self, Framing, Mode};
use common::vendor::source_settings;
use serde_json::{Value, json};

fn daemon() -> (tempfile::TempDir, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    (dir, d)
}

/// Merges JSON objects of settings.
fn merged(parts: &[Value]) -> Value {
    let mut out = serde_json::Map::new();
    for p in parts {
        out.extend(p.as_object().unwrap().clone());
    }
    Value::Object(out)
}

#[test]
fn every_http1_framing_of_a_streamed_answer_reaches_the_reply() {
    let (_dir, d) = daemon();
    let v = raw::start("raw", Mode::Answer(Framing::Close));
    put_settings(&d, source_settings("main", &v.url, 0));
    wait_sources(&d, 1);
    for (i, framing) in [Framing::Close, Framing::Chunked, Framing::Http10, Framing::Length]
        .into_iter()
        .enumerate()
    {
        v.set(Mode::Answer(framing));
        let (status, body) = post(&d, "/api/v1/messages", json!({"text": format!("framing {i}")}));
        assert_eq!(status, 200, "{framing:?}: {body}\nlog:\n{}", d.log_text());
        assert_eq!(body["reply"], "raw answered", "{framing:?}: {body}");
    }
}

#[test]
fn a_never_answering_primary_with_a_3s_first_byte_timeout_falls_back_within_10s() {
    let (_dir, d) = daemon();
    let primary = raw::start("primary", Mode::Hang);
    let backup = raw::start("backup", Mode::Answer(Framing::Chunked));
    put_settings(
        &d,
        merged(&[
            source_settings("primary", &primary.url, 10),
            json!({"core.llm.sources.primary.first_byte_timeout": "3s"}),
            source_settings("backup", &backup.url, 0),
        ]),
    );
    wait_sources(&d, 2);
    let t = Instant::now();
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "are you there"}));
    let took = t.elapsed();
    assert_eq!(status, 200, "{body}\nlog:\n{}", d.log_text());
    assert_eq!(body["reply"], "backup answered");
    eprintln!("reply with a hung primary (first_byte_timeout 3s): {took:?}");
    assert!(took >= Duration::from_secs(3), "the primary had its 3 s: {took:?}");
    assert!(took < Duration::from_secs(10), "fell back in {took:?}");
    assert_eq!(primary.calls(), 1, "a timed-out source is not retried");
    let sources = get(&d, "/api/v1/llm/sources");
    let p = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "primary")
        .unwrap();
    assert_eq!(p["first_byte_timeout"], "3s", "{p}");
    assert!(
        p["last_error"].as_str().unwrap().contains("no first byte within 3s"),
        "{p}"
    );
}

#[test]
fn a_stream_cut_before_its_end_is_a_502_naming_the_cause_not_a_partial_200() {
    let (_dir, d) = daemon();
    let v = raw::start("cut", Mode::Cut(Framing::Close));
    put_settings(&d, source_settings("main", &v.url, 0));
    wait_sources(&d, 1);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "tell me everything"}));
    assert_eq!(status, 502, "{body}");
    let err = body["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("closed after") && err.contains("without finish_reason or [DONE]"),
        "{body}"
    );
    assert!(body.get("reply").is_none(), "no partial answer: {body}");
    assert_eq!(v.calls(), 2, "retried once, per the attempt rules");

    // Chunked: the body ends without its last chunk; also an error, never a reply.
    let w = raw::start("cut2", Mode::Cut(Framing::Chunked));
    put_settings(&d, json!({"core.llm.sources.main.base_url": w.url}));
    wait_for(&d, "/api/v1/llm/sources", "the new base_url", |s| {
        s["sources"][0]["base_url"] == w.url.as_str()
    });
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "and again"}));
    assert_eq!(status, 502, "{body}");
    assert!(body["error"].as_str().unwrap_or_default().contains(" bytes"), "{body}");
}

#[test]
fn a_source_paused_after_failures_answers_at_once_after_its_base_url_is_corrected() {
    let (_dir, d) = daemon();
    // Port 9 (discard) on loopback: nothing listens, the connection is refused.
    put_settings(&d, source_settings("main", "http://127.0.0.1:9/v1", 0));
    wait_sources(&d, 1);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "first try"}));
    assert_eq!(status, 502, "{body}");
    let s = get(&d, "/api/v1/llm/sources");
    assert_eq!(s["sources"][0]["available"], false, "paused: {s}");
    assert!(s["sources"][0]["paused_for_s"].as_u64().unwrap() > 10, "{s}");

    let v = raw::start("fixed", Mode::Answer(Framing::Close));
    put_settings(&d, json!({"core.llm.sources.main.base_url": v.url}));
    wait_for(&d, "/api/v1/llm/sources", "the corrected source to be available", |s| {
        s["sources"][0]["base_url"] == v.url.as_str() && s["sources"][0]["available"] == true
    });
    let t = Instant::now();
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "second try"}));
    assert_eq!(status, 200, "{body}\nlog:\n{}", d.log_text());
    assert_eq!(body["reply"], "fixed answered");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "answered at once: {:?}",
        t.elapsed()
    );
    assert!(
        d.log_text().contains("failure count and pause are reset"),
        "the reset is logged"
    );
}

/// A primary that drips a byte every 200 ms is a slow source, not a working one: with
/// a 2 s idle limit it fails once (no second try), pauses, and the healthy backup
/// answers.
#[test]
fn a_dripping_primary_falls_back_to_a_healthy_backup_within_its_idle_limit() {
    let (_dir, d) = daemon();
    let primary = raw::start("primary", Mode::Drip(Framing::Chunked));
    let backup = raw::start("backup", Mode::Answer(Framing::Chunked));
    put_settings(
        &d,
        merged(&[
            source_settings("primary", &primary.url, 10),
            json!({"core.llm.sources.primary.idle_timeout": "2s"}),
            source_settings("backup", &backup.url, 0),
        ]),
    );
    wait_sources(&d, 2);
    let t = Instant::now();
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "drip drip"}));
    eprintln!("reply with a dripping primary (idle_timeout 2s): {:?}", t.elapsed());
    assert_eq!(status, 200, "{body}\nlog:\n{}", d.log_text());
    assert_eq!(body["reply"], "backup answered");
    assert_eq!(primary.calls(), 1, "a slow source is not tried twice");
    let sources = get(&d, "/api/v1/llm/sources");
    let p = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "primary")
        .unwrap()
        .clone();
    assert!(p["last_error"].as_str().unwrap().contains("trickle"), "{p}");
    assert_eq!(p["available"], false, "the slow source is paused: {p}");
    // The next message goes to the backup at once: the primary is paused.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "again"}));
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("backup answered")),
        "{body}"
    );
    assert_eq!(primary.calls(), 1);
}

/// A 429 with `Retry-After: 120` pauses the source that long (its own first pause
/// would be 30 s), without the 2 s retry a plain error gets; the backup answers
/// meanwhile.
#[test]
fn retry_after_is_respected() {
    let (_dir, d) = daemon();
    let primary = raw::start("primary", Mode::RateLimited(120));
    let backup = raw::start("backup", Mode::Answer(Framing::Chunked));
    put_settings(
        &d,
        merged(&[
            source_settings("primary", &primary.url, 10),
            source_settings("backup", &backup.url, 0),
        ]),
    );
    wait_sources(&d, 2);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "busy?"}));
    assert_eq!(status, 200, "{body}\nlog:\n{}", d.log_text());
    assert_eq!(body["reply"], "backup answered");
    assert_eq!(primary.calls(), 1, "not asked again before its Retry-After");
    let sources = get(&d, "/api/v1/llm/sources");
    let p = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "primary")
        .unwrap()
        .clone();
    let paused = p["paused_for_s"].as_u64().unwrap_or(0);
    assert!(
        (110..=120).contains(&paused),
        "paused for {paused} s, not the asked 120: {p}"
    );
    assert!(p["last_error"].as_str().unwrap().contains("rate limited"), "{p}");
}
