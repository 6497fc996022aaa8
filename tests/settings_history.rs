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

/// The model's settings tool (issue 33 item 7), through the real path (the scripted
/// model calls it in an owner's turn): a knob changes and is listed as the model's
/// change, which the owner can revert; a security key, a secret and a destination are
/// refused with what to do instead, and nothing of a mixed change is written.
#[test]
fn the_model_changes_knobs_in_the_owners_turn_but_never_doors() {
    let (_dir, _data, d, _v) = common::api::daemon_with_vendor();
    let said = common::api::call_tool(&d, "settings_set", json!({"values": {"core.agent.max_tool_turns": 7}}));
    assert!(said.contains("core.agent.max_tool_turns"), "{said}");
    assert_eq!(setting(&d, "core.agent.max_tool_turns"), 7);
    let top = &changes(&d, "")[0];
    assert_eq!(
        (top["key"].as_str(), top["author"].as_str()),
        (Some("core.agent.max_tool_turns"), Some("model")),
        "{top}"
    );
    let (status, body) = post(&d, &format!("/api/v1/settings/history/{}/revert", top["id"]), json!({}));
    assert_eq!(status, 200, "{body}");

    let listed = common::api::call_tool(&d, "settings_get", json!({"prefix": "core.security.sandbox"}));
    assert!(listed.contains("\"agent_may_change\":false"), "{listed}");
    for (key, value, why) in [
        ("core.security.sandbox.network", json!(true), "security setting"),
        ("core.llm.api_key", json!("sk-evil"), "secret"),
        (
            "core.telemetry.otlp_endpoint",
            json!("http://evil.example"),
            "destination",
        ),
    ] {
        let said = common::api::call_tool(
            &d,
            "settings_set",
            json!({"values": {"core.llm.temperature": 0.1, key: value}}),
        );
        assert!(said.contains(why), "{key}: {said}");
    }
    assert_ne!(
        setting(&d, "core.llm.temperature"),
        0.1,
        "a refused change writes nothing"
    );
    assert!(
        changes(&d, "").iter().all(|c| c["key"] != "core.llm.temperature"),
        "nothing of a refused change is recorded"
    );
}
