//! Small HTTP helpers over a test daemon's API (blocking reqwest).

use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Daemon, vendor};

pub fn post(d: &Daemon, path: &str, body: Value) -> (u16, Value) {
    send(d, reqwest::Method::POST, path, body)
}

pub fn put(d: &Daemon, path: &str, body: Value) -> (u16, Value) {
    send(d, reqwest::Method::PUT, path, body)
}

fn send(d: &Daemon, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
    let r = d
        .client()
        .request(method, d.url(path))
        .timeout(Duration::from_secs(60))
        .json(&body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

pub fn put_settings(d: &Daemon, body: Value) {
    let r = d.client().put(d.url("/api/v1/settings")).json(&body).send().unwrap();
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text());
}

/// Offers the model every tool on each request (`core.agent.tool_tokens` = 0), as a
/// test of what a plugin, helper or resident registers reads the request's list: by
/// default a request offers only the tools relevant to its input and names the rest
/// (`tests/lean.rs` tests that policy).
pub fn offer_every_tool(d: &Daemon) {
    put_settings(d, serde_json::json!({"core.agent.tool_tokens": 0}));
}

/// Waits until the LLM actor picked up the configured sources.
pub fn wait_sources(d: &Daemon, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let v: Value = d
            .client()
            .get(d.url("/api/v1/llm/sources"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        if v["sources"].as_array().is_some_and(|s| s.len() == n) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("sources not configured; log:\n{}", d.log_text());
}

/// A daemon on a fresh data dir with one fake vendor configured and loaded. The
/// temporary dir must outlive the daemon, so it is returned too.
pub fn daemon_with_vendor() -> (tempfile::TempDir, std::path::PathBuf, Daemon, vendor::Vendor) {
    daemon_with_vendor_env(&[])
}

/// [`daemon_with_vendor`] with extra environment variables for the daemon.
pub fn daemon_with_vendor_env(env: &[(&str, &str)]) -> (tempfile::TempDir, std::path::PathBuf, Daemon, vendor::Vendor) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = Daemon::start_env(&data, Some("info"), env);
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    wait_sources(&d, 1);
    (dir, data, d, v)
}

/// [`daemon_with_vendor`] with the test plugins `install` (from tests/plugins) added,
/// once each plugin of `running` has registered its tools.
pub fn daemon_with_plugins(
    install: &[&str],
    running: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, Daemon, vendor::Vendor) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for p in install {
        install_test_plugin(&data, p);
    }
    let d = Daemon::start(&data);
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    wait_sources(&d, 1);
    for p in running {
        wait_for(&d, "/api/v1/plugins", &format!("plugin {p} running with tools"), |v| {
            v["plugins"].as_array().is_some_and(|ps| {
                ps.iter()
                    .any(|x| x["name"] == *p && x["tools"].as_array().is_some_and(|t| !t.is_empty()))
            })
        });
    }
    (dir, data, d, v)
}

/// `GET path` as JSON.
pub fn get(d: &Daemon, path: &str) -> Value {
    d.client()
        .get(d.url(path))
        .timeout(Duration::from_secs(60))
        .send()
        .unwrap_or_else(|e| panic!("GET {path}: {e}\nlog:\n{}", d.log_text()))
        .json()
        .unwrap_or(Value::Null)
}

/// Polls `GET path` until `ok` holds for its JSON (60 s), returning that JSON.
pub fn wait_for(d: &Daemon, path: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        last = get(d, path);
        if ok(&last) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "timed out waiting for {what}; last {path}: {last}\nlog:\n{}",
        d.log_text()
    );
}

/// One plugin's entry of `GET /api/v1/plugins` (`null` when there is none).
pub fn plugin(d: &Daemon, name: &str) -> Value {
    get(d, "/api/v1/plugins")["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Switches the daemon's texts to Chinese (`core.agent.language = "zh"`), for tests
/// that assert the reference's texts. Applied before the write is answered.
pub fn chinese(d: &Daemon) {
    put_settings(d, serde_json::json!({"core.agent.language": "zh"}));
}

/// Sends `text` as a synchronous message and answers the agent's reply (200 asserted).
pub fn ask(d: &Daemon, text: &str) -> String {
    let (status, body) = post(d, "/api/v1/messages", serde_json::json!({ "text": text }));
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_owned()
}

/// The scripted model calls `tool` with `args`; answers the tool's result as the model
/// read it (panics with the reply when there was none).
pub fn call_tool(d: &Daemon, tool: &str, args: Value) -> String {
    let reply = ask(d, &format!("call-tool {tool} {args}"));
    reply
        .strip_prefix("tool said: ")
        .unwrap_or_else(|| panic!("the model did not get a tool result: {reply}"))
        .to_owned()
}

/// Installs the test plugin `name` (from tests/plugins) into `data/plugins` (the copy
/// keeps the executable bit).
pub fn install_test_plugin(data: &std::path::Path, name: &str) {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/plugins")
        .join(name);
    let dst = data.join("plugins").join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dst.join(f.file_name().unwrap())).unwrap();
    }
}

/// Collects SSE events (name, data) in the background.
pub fn listen(d: &Daemon) -> Arc<Mutex<Vec<(String, Value)>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let e = events.clone();
    let url = d.url("/api/v1/events?interval_ms=60000");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let client = d.client();
    std::thread::spawn(move || {
        let resp = client.get(url).timeout(Duration::from_secs(120)).send().unwrap();
        let _ = ready_tx.send(());
        let mut name = String::new();
        for line in BufReader::new(resp).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_owned();
            } else if let Some(data) = line.strip_prefix("data: ") {
                e.lock()
                    .unwrap()
                    .push((name.clone(), serde_json::from_str(data).unwrap_or(Value::Null)));
            }
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    events
}
