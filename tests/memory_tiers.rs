//! The memory tiers as separate supervised actors (issue 9 item 6): a real panic in the
//! document tier (`HOMEAGENT_FAULT`, debug builds) while turns go on is invisible to
//! the context tier, and an archive asked while the document tier is down loses no
//! event. Measured through the user's path: HTTP → turn → the request the fake vendor
//! receives, and the memory API.

mod common;

use common::api::{daemon_with_vendor_env, get, post, put_settings, wait_for, wait_sources};
use common::{Daemon, vendor};
use serde_json::{Value, json};

fn say(d: &Daemon, text: &str) -> Value {
    let (status, body) = post(d, "/api/v1/messages", json!({"text": text}));
    assert_eq!(status, 200, "{body}\n{}", d.log_text());
    body
}

fn chatter(i: usize) -> String {
    const TOPICS: [&str; 5] = [
        "the train to work was late again",
        "we cooked a lentil soup with cumin",
        "the football match ended in a draw",
        "I planted tomatoes on the balcony",
        "the bakery sold out of croissants",
    ];
    format!("Note {i}: {} (day {}).", TOPICS[i % TOPICS.len()], i / TOPICS.len() + 1)
}

/// The distill heartbeat's round, now; answers how many events it archived.
fn distill(d: &Daemon) -> u64 {
    let (status, body) = post(d, "/api/v1/heartbeats/distill/run", json!({}));
    assert_eq!(status, 200, "{body}");
    body["archived"].as_u64().unwrap_or(0)
}

fn actor(d: &Daemon, id: &str) -> Value {
    get(d, "/api/v1/actors")["actors"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Running (idle or inside a handler).
fn up(a: &Value) -> bool {
    a["state"] == "running" || a["state"] == "busy"
}

fn restarts(d: &Daemon, id: &str) -> u64 {
    actor(d, id)["restarts"].as_u64().unwrap_or(0)
}

/// Waits until the supervisor has restarted the documents actor and it runs again.
fn wait_documents_restarted(d: &Daemon) {
    wait_for(d, "/api/v1/actors", "kernel/memory/documents restarted", |a| {
        a["actors"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["id"] == "kernel/memory/documents" && x["restarts"].as_u64().unwrap_or(0) >= 1 && up(x))
    });
}

fn last_prompt(v: &vendor::Vendor) -> String {
    v.last.lock().unwrap()["messages"].to_string()
}

fn window(d: &Daemon) -> Vec<String> {
    get(d, "/api/v1/memory/context")["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["input"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_crash_of_the_document_tier_is_invisible_to_the_context_tier_and_to_turns() {
    let (_dir, _data, d, v) = daemon_with_vendor_env(&[("HOMEAGENT_FAULT", "documents.recall:BOOM-DOCS")]);
    put_settings(&d, json!({"core.agent.max_context_size": 5}));
    // Its own child of kernel/memory, shown with its mailbox.
    let docs = actor(&d, "kernel/memory/documents");
    assert!(up(&docs), "{docs}");
    assert_eq!(docs["parent"], "kernel/memory", "{docs}");
    assert!(
        docs["queued"].is_u64() && docs["handled"].is_u64(),
        "its mailbox counters: {docs}"
    );
    say(&d, "My sister adopted a greyhound called Biscuit.");
    for i in 0..20 {
        say(&d, &chatter(i));
    }
    assert!(distill(&d) > 0, "the window was archived into documents");
    assert!(
        !window(&d).iter().any(|t| t.contains("greyhound")),
        "the fact left the window"
    );
    say(&d, "What breed is the dog my sister adopted?");
    assert!(
        last_prompt(&v).contains("greyhound called Biscuit"),
        "recalled from a passage: {}",
        last_prompt(&v)
    );

    // The document tier panics while ranking this turn's passages: the turn answers
    // anyway, without documents.
    let reply = say(&d, "BOOM-DOCS: what did my sister adopt, the greyhound?");
    assert!(reply["reply"].is_string(), "{reply}");
    wait_documents_restarted(&d);
    let log = d.log_text();
    assert!(log.contains("injected fault at documents.recall"), "a real panic");
    assert!(log.contains("recall without documents this turn"), "logged");
    assert_eq!(
        restarts(&d, "kernel/memory/context"),
        0,
        "the context tier never noticed"
    );
    assert_eq!(restarts(&d, "kernel/memory"), 0);

    // Restarted with its indexes rebuilt from SQLite: it answers again.
    say(&d, "Tell me again about the dog my sister adopted.");
    assert!(
        last_prompt(&v).contains("greyhound called Biscuit"),
        "recalled after the restart: {}",
        last_prompt(&v)
    );
}

#[test]
fn an_archive_while_the_document_tier_is_down_loses_no_event() {
    let (dir, data, d, v) = daemon_with_vendor_env(&[("HOMEAGENT_FAULT", "documents.archive:FRAGILE-NOTE")]);
    put_settings(&d, json!({"core.agent.max_context_size": 5}));
    // The oldest event is archived first: the document tier panics on it.
    say(&d, "FRAGILE-NOTE: my locker code is 4711.");
    for i in 0..15 {
        say(&d, &chatter(i));
    }
    let before = window(&d);
    assert_eq!(before.len(), 32, "{before:?}");
    assert_eq!(distill(&d), 0, "nothing archived while the tier is down");
    wait_documents_restarted(&d);
    assert!(
        d.log_text().contains("injected fault at documents.archive"),
        "a real panic"
    );
    assert_eq!(window(&d), before, "every event stayed in the window");
    assert_eq!(restarts(&d, "kernel/memory/context"), 0);
    assert_eq!(get(&d, "/api/v1/memory/status")["documents"], 0);
    // Turns go on meanwhile.
    say(&d, "And what about the weather?");
    drop(v);
    d.terminate();

    // The next prune (a daemon without the fault, on the same data) archives them, once.
    let d = Daemon::start_env(&data, Some("info"), &[]);
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    wait_sources(&d, 1);
    let held = window(&d);
    assert_eq!(held.len(), before.len() + 2, "the restart kept every event");
    let archived = distill(&d) as usize;
    assert!(archived > 0);
    assert_eq!(window(&d).len(), held.len() - archived);
    let docs = get(&d, "/api/v1/memory/documents");
    let holding = docs["documents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| {
            x["content"]
                .as_str()
                .unwrap_or_default()
                .contains("my locker code is 4711")
        })
        .count();
    assert_eq!(holding, 1, "archived once: {docs}");
    assert_eq!(get(&d, "/api/v1/memory/status")["documents"], 1);
    d.terminate();
    drop(dir);
}
