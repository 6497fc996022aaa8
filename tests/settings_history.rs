//! Settings history (issue 33 item 2): every change through the API, the CLI socket or
//! a plugin is recorded with its author; one change or everything since a moment can be
//! reverted; a secret's values are never kept (so its change cannot be reverted).

mod common;

use common::Daemon;
use common::api::{get, post, put_settings};
use serde_json::{Value, json};

fn changes(d: &Daemon, q: &str) -> Vec<Value> {
    get(d, &format!("/api/v1/settings/history{q}"))["changes"]
        .as_array()
        .unwrap()
        .clone()
}

fn setting(d: &Daemon, key: &str) -> Value {
    get(d, "/api/v1/settings")["settings"][key].clone()
}

#[test]
fn changes_are_listed_with_their_author_and_can_be_reverted() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    assert!(changes(&d, "").is_empty(), "a fresh daemon's defaults are not changes");

    put_settings(&d, json!({"core.agent.max_tool_turns": 12}));
    let top = &changes(&d, "")[0];
    assert_eq!(
        (
            top["key"].as_str(),
            top["old"].clone(),
            top["new"].clone(),
            top["author"].as_str()
        ),
        (Some("core.agent.max_tool_turns"), json!(10), json!(12), Some("owner")),
        "{top}"
    );

    // The CLI socket's `/settings set` is the owner too, through another door.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_waiter"))
        .args(["--socket", d.data.join("cli.sock").to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"/settings set core.agent.tool_timeout 45s\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let top = &changes(&d, "?key=core.agent.tool_timeout")[0];
    assert_eq!(top["author"], "cli", "{top}");

    // A secret: recorded, its values not kept, its change not revertible.
    put_settings(&d, json!({"core.llm.api_key": "sk-history-secret-0123456789"}));
    let secret = changes(&d, "?key=core.llm.api_key")[0].clone();
    assert_eq!(
        (secret["secret"].clone(), secret["old"].clone(), secret["new"].clone()),
        (json!(true), Value::Null, Value::Null)
    );
    assert!(
        !get(&d, "/api/v1/settings/history")
            .to_string()
            .contains("sk-history-secret")
    );
    let (code, body) = post(
        &d,
        &format!("/api/v1/settings/history/{}/revert", secret["id"]),
        json!({}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("is a secret"), "{body}");

    // One change undone.
    let turns = changes(&d, "?key=core.agent.max_tool_turns")[0].clone();
    let (code, body) = post(
        &d,
        &format!("/api/v1/settings/history/{}/revert", turns["id"]),
        json!({}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(setting(&d, "core.agent.max_tool_turns"), json!(10));
    assert_eq!(changes(&d, "")[0]["author"], format!("revert:{}", turns["id"]));

    // Back to a moment: both later changes undone at once.
    let moment = changes(&d, "")[0]["at_ms"].as_i64().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    put_settings(
        &d,
        json!({"core.agent.max_tool_turns": 7, "core.agent.personal_prompt": "Call me Sam."}),
    );
    put_settings(&d, json!({"core.agent.max_tool_turns": 8}));
    let (code, body) = post(&d, &format!("/api/v1/settings/history/revert?to={moment}"), json!({}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(setting(&d, "core.agent.max_tool_turns"), json!(10));
    assert_eq!(setting(&d, "core.agent.personal_prompt"), json!(""));
}
