//! The bridge's client against real MCP servers: the npm reference server
//! (`tests/mcp/node_modules`, installed by scripts/install-mcp-deps.sh) for the
//! 2025-11-25 path and cancellation, and the scripted `tests/mcp/fake_server.py` for
//! the 2026-07-28 path and a server that ignores the discovery probe.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::Receiver;
use std::time::{Duration, Instant};

use homeagent_mcp::bridge::{self, Negotiated};
use homeagent_mcp::client::{Client, Event};
use homeagent_mcp::config::ServerConfig;
use homeagent_mcp::protocol::{Era, MODERN};
use homeagent_plugin_protocol::sdk::Call;
use serde_json::json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The installed npm server, or `None` (a skip) outside CI; in CI a missing server fails.
fn npm_server(bin: &str) -> Option<PathBuf> {
    let p = root().join("tests/mcp/node_modules/.bin").join(bin);
    if p.exists() {
        return Some(p);
    }
    let msg = format!("{} is not installed; run scripts/install-mcp-deps.sh", p.display());
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

fn cfg(command: &str, args: &[&str], env: &[(&str, &str)]) -> ServerConfig {
    ServerConfig {
        command: command.into(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        cwd: None,
    }
}

fn connect(name: &str, c: &ServerConfig) -> (Arc<Client>, Receiver<Event>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let client = Client::spawn(name, c, 1, tx.clone()).unwrap();
    match bridge::negotiate(&client).unwrap() {
        Negotiated::Done => (client, rx),
        Negotiated::Restart => {
            client.kill();
            let client = Client::spawn(name, c, 2, tx).unwrap();
            bridge::initialize(&client).unwrap();
            (client, rx)
        }
    }
}

fn p(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

#[test]
fn the_reference_server_lists_calls_cancels_and_reports_its_death() {
    let Some(bin) = npm_server("mcp-server-everything") else {
        return;
    };
    let (client, events) = connect("everything", &cfg(bin.to_str().unwrap(), &["stdio"], &[]));
    assert_eq!(client.era(), Some(Era::Legacy("2025-11-25".into())));
    let tools = bridge::list_tools(&client).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"echo") && names.len() >= 10, "{names:?}");

    let text = bridge::call_tool(&client, "echo", json!({"message": "hi there"}), None).unwrap();
    assert_eq!(text, "Echo: hi there");
    let err = bridge::call_tool(&client, "get-sum", json!({"a": "x"}), None).unwrap_err();
    assert!(!err.is_empty());

    // The MCP hop alone: echo round trips on one connection.
    let mut times = Vec::new();
    for i in 0..200 {
        let t = Instant::now();
        let r = bridge::call_tool(&client, "echo", json!({"message": i.to_string()}), None).unwrap();
        times.push(t.elapsed());
        assert_eq!(r, format!("Echo: {i}"));
    }
    let (p50, p99) = (p(&mut times, 0.5), p(&mut times, 0.99));
    eprintln!("MEASURE mcp echo round trip (client → server-everything): p50 {p50:?}, p99 {p99:?} over 200 calls");

    // A cancelled call returns at once, and the connection stays usable.
    let call = Call::new(7);
    let c2 = call.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c2.cancel();
    });
    let err = bridge::call_tool(
        &client,
        "trigger-long-running-operation",
        json!({"duration": 30, "steps": 3}),
        Some(&call),
    )
    .unwrap_err();
    canceller.join().unwrap();
    assert!(err.contains("cancelled"), "{err}");
    assert_eq!(
        bridge::call_tool(&client, "echo", json!({"message": "after"}), None).unwrap(),
        "Echo: after"
    );

    // Death: a call in flight fails at once with the reason, and the supervisor hears of it.
    let c3 = client.clone();
    let inflight = std::thread::spawn(move || {
        bridge::call_tool(
            &c3,
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 3}),
            None,
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    client.kill();
    let err = inflight.join().unwrap().unwrap_err();
    assert!(
        err.contains("MCP server `everything`") && err.contains("exited"),
        "{err}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::Exited(1, reason)) => {
                assert!(reason.contains("exited"), "{reason}");
                break;
            }
            Ok(_) => continue,
            Err(e) => panic!("no exit event: {e}"),
        }
    }
}

fn fake(mode: &str, log: &std::path::Path) -> ServerConfig {
    let script = root().join("tests/mcp/fake_server.py");
    cfg(
        "python3",
        &[script.to_str().unwrap(), mode],
        &[("FAKE_MCP_LOG", log.to_str().unwrap())],
    )
}

#[test]
fn a_stateless_server_is_discovered_and_gets_meta_on_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (client, _events) = connect("modern", &fake("modern", &log));
    assert_eq!(client.era(), Some(Era::Modern(MODERN.into())));
    let tools = bridge::list_tools(&client).unwrap();
    assert_eq!(
        tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["echo", "wait"],
        "both pages"
    );
    assert_eq!(
        bridge::call_tool(&client, "echo", json!({"message": "stateless"}), None).unwrap(),
        "Echo: stateless"
    );
    let call = Call::new(1);
    call.cancel();
    let err = bridge::call_tool(&client, "wait", json!({}), Some(&call)).unwrap_err();
    assert!(err.contains("cancelled"), "{err}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().any(|l| l.starts_with("cancelled ")) {
            assert!(text.contains("discover") && !text.contains("initialize"), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server never saw the cancellation: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    client.shutdown(Duration::from_secs(2));
    assert!(client.exited().is_some());
}

#[test]
fn a_server_that_ignores_the_probe_is_restarted_and_initialized() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (client, _events) = connect("old", &fake("silent", &log));
    assert_eq!(client.era(), Some(Era::Legacy("2025-06-18".into())));
    assert_eq!(
        bridge::call_tool(&client, "echo", json!({"message": "old"}), None).unwrap(),
        "Echo: old"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("spawned silent").count(), 2, "{text}");
    client.shutdown(Duration::from_secs(2));
}
