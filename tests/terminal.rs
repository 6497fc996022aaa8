//! The terminal plugin on the user's path: HTTP → turn → the vendor asks for the
//! terminal tools → the bundled plugin (`homed plugin terminal`) drives a real PTY →
//! the reply. A session outlives its turn, its output reaches the SSE stream as
//! `plugin_event`s, the firewall refuses a `cwd` outside the roots before the plugin
//! is asked, and a guest cannot use it at all.

mod common;

use common::Daemon;
use common::api::ask;
use serde_json::{Value, json};

/// `call-tools` through the scripted vendor: the tools' results, in order.
fn tools(d: &Daemon, steps: Value) -> Vec<String> {
    let reply = ask(d, &format!("call-tools {steps}"));
    reply
        .strip_prefix("tools said: ")
        .unwrap_or_else(|| panic!("the model did not get the tool results: {reply}"))
        .split(" | ")
        .map(str::to_owned)
        .collect()
}

fn plugin_events(events: &std::sync::Mutex<Vec<(String, Value)>>, topic: &str) -> Vec<Value> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, e)| name == "plugin_event" && e["plugin"] == "terminal" && e["topic"] == topic)
        .map(|(_, e)| e["data"].clone())
        .collect()
}

#[test]
fn a_terminal_session_runs_two_commands_across_two_turns() {
    let (_dir, _data, d, v) = common::api::daemon_with_plugins(&[], &["terminal"]);
    let events = common::api::listen(&d);
    let ws = d.data.join("workspace").canonicalize().unwrap();

    // Turn 1: start a shell and run the first command.
    let first = tools(
        &d,
        json!([
            {"tool": "terminal_create", "args": {}},
            {"tool": "terminal_send", "args": {"session": 1, "text": "X=6; echo first-$((X*7))\n"}}
        ]),
    );
    assert!(
        first[0].starts_with("terminal session 1 started: `/bin/bash") && first[0].contains(ws.to_str().unwrap()),
        "{first:?}"
    );
    assert!(first[1].starts_with("sent "), "{first:?}");

    // Turn 2: the same shell (its variable survived), a second command, one read.
    let second = tools(
        &d,
        json!([
            {"tool": "terminal_send", "args": {"session": 1, "text": "echo second-$((X*8))\n"}},
            {"tool": "terminal_read", "args": {"session": 1, "until": "second-48", "timeout_ms": 20000}}
        ]),
    );
    let read = &second[1];
    assert!(read.starts_with("session 1 (running): "), "{read}");
    assert!(
        read.contains("first-42") && read.contains("second-48"),
        "the read sees the output of both turns' commands: {read}"
    );
    assert!(!read.contains("\u{1b}["), "plain text for the model: {read:?}");
    let sent = v.last.lock().unwrap().to_string();
    assert!(sent.contains("second-48"), "the model received the output");

    let list = common::api::ask(&d, "call-tool terminal_list {}");
    assert!(
        list.contains(r#""id":1"#) && list.contains(r#""running":true"#),
        "{list}"
    );
    let closed = ask(&d, r#"call-tool terminal_close {"session": 1}"#);
    assert!(closed.contains("session 1 closed"), "{closed}");

    // The plugin published the session's life and its output on the kernel bus.
    common::api::wait_for(&d, "/healthz", "the closed event on the stream", |_| {
        plugin_events(&events, "terminal.session")
            .iter()
            .any(|e| e["state"] == "closed")
    });
    let states: Vec<Value> = plugin_events(&events, "terminal.session")
        .iter()
        .map(|e| e["state"].clone())
        .collect();
    assert_eq!(states.first(), Some(&json!("started")), "{states:?}");
    let streamed: String = plugin_events(&events, "terminal.output")
        .iter()
        .filter_map(|e| e["data"].as_str().map(str::to_owned))
        .collect();
    assert!(
        streamed.contains("first-42") && streamed.contains("second-48"),
        "{streamed:?}"
    );
}

#[test]
fn a_cwd_outside_the_roots_is_refused_by_the_firewall() {
    let (dir, _data, d, _v) = common::api::daemon_with_plugins(&[], &["terminal"]);
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    for cwd in [outside.to_str().unwrap(), "/etc", "../"] {
        let reply = ask(&d, &format!("call-tool terminal_create {}", json!({ "cwd": cwd })));
        assert!(
            reply.starts_with("tool said: firewall (sandbox) refused terminal_create: `cwd`:"),
            "{cwd}: {reply}"
        );
        assert!(
            reply.contains("outside the read roots") || reply.contains("contains `..`"),
            "says why: {reply}"
        );
    }
    let refused = common::api::get(&d, "/api/v1/security")["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["gate"] == "sandbox" && x["tool"] == "terminal_create" && x["allowed"] == false)
        .count();
    assert_eq!(refused, 3, "each refusal is a firewall decision");
    let list = ask(&d, "call-tool terminal_list {}");
    assert_eq!(list, r#"tool said: {"sessions":[]}"#, "no session was started");
}

#[test]
fn a_guest_cannot_use_the_terminal() {
    let (_dir, _data, d, _v) = common::api::daemon_with_plugins(&["bridge"], &["terminal", "bridge"]);
    let args =
        json!({"text": r#"call-tool terminal_create {"argv": ["touch", "guest-was-here"]}"#, "profile": "guest"});
    assert_eq!(
        ask(&d, &format!("call-tool bridge_inject {args}")),
        "tool said: injected"
    );
    let security = common::api::wait_for(&d, "/api/v1/security", "the guest refused", |s| {
        s["decisions"].as_array().is_some_and(|ds| {
            ds.iter().any(|x| {
                x["gate"] == "principal"
                    && x["tool"] == "terminal_create"
                    && x["reason"].as_str().unwrap_or("").contains("reserved for the owner")
            })
        })
    });
    assert!(security.to_string().contains("bridge.guest"), "{security}");
    assert!(
        !d.data.join("workspace/guest-was-here").exists(),
        "nothing ran for the guest"
    );
    let list = ask(&d, "call-tool terminal_list {}");
    assert_eq!(list, r#"tool said: {"sessions":[]}"#);
}

/// The panel's routes are the plugin's tools under the owner's policy: input reaches
/// the session, the deny list and unknown sessions answer 400 with the tool's reason,
/// a denied `terminal_send` answers 403; xterm.js is served gzip-compressed as stored,
/// or decompressed for a client that does not take gzip.
#[test]
fn the_panel_routes_type_into_a_session_under_the_tool_policy() {
    let (_dir, _data, d, _v) = common::api::daemon_with_plugins(&[], &["terminal"]);
    assert!(ask(&d, "call-tool terminal_create {}").starts_with("tool said: terminal session 1 started"));
    let input = |id: u32, body: Value| {
        let r = d
            .client()
            .post(d.url(&format!("/api/v1/terminals/{id}/input")))
            .json(&body)
            .send()
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap_or(Value::Null))
    };
    let (status, body) = input(1, json!({"text": "echo panel-$((3*3))\r"}));
    assert_eq!(status, 200, "{body}");
    let out = common::api::wait_for(
        &d,
        "/api/v1/terminals/1/output?offset=0",
        "the panel's command ran",
        |o| o["data"].as_str().is_some_and(|s| s.contains("panel-9\r\n")),
    );
    assert_eq!(out["offset"], 0);
    let listed = common::api::get(&d, "/api/v1/terminals");
    assert_eq!(listed["sessions"][0]["id"], 1, "{listed}");
    assert_eq!(
        listed["sessions"][0]["unread"].as_u64().map(|n| n > 0),
        Some(true),
        "the panel's reads do not move the model's position: {listed}"
    );

    let (status, body) = input(1, json!({"text": "sudo id\r"}));
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("`sudo` is on the deny list"),
        "{body}"
    );
    let (status, body) = input(7, json!({"text": "x"}));
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("no terminal session 7"),
        "{body}"
    );
    common::api::put_settings(&d, json!({"core.security.tool_deny": "terminal_send"}));
    common::api::wait_for(&d, "/api/v1/security", "the deny list", |x| {
        x["tool_deny"] == json!(["terminal_send"])
    });
    let (status, body) = input(1, json!({"text": "echo no\r"}));
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("core.security.tool_deny"),
        "{body}"
    );

    let get = |encoding: Option<&str>| {
        let mut r = d.client().get(d.url("/vendor/xterm.mjs"));
        if let Some(e) = encoding {
            r = r.header("Accept-Encoding", e);
        }
        let r = r.send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let ce = r
            .headers()
            .get("content-encoding")
            .map(|v| v.to_str().unwrap().to_owned());
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        (ce, ct, r.bytes().unwrap())
    };
    let (ce, ct, gz) = get(Some("gzip, deflate"));
    assert_eq!(ce.as_deref(), Some("gzip"));
    assert!(ct.starts_with("text/javascript"), "{ct}");
    assert_eq!(&gz[..2], [0x1f, 0x8b], "gzip as stored");
    let (ce, _, plain) = get(None);
    assert_eq!(ce, None);
    let text = String::from_utf8(plain.to_vec()).unwrap();
    assert!(
        text.contains("export{") && text.contains(" as Terminal"),
        "the ES module"
    );
    assert!(gz.len() * 3 < plain.len(), "{} vs {}", gz.len(), plain.len());
}

/// A terminal plugin that never answers makes the panel's routes answer 504 within the
/// tool timeout, naming the setting and what to do, instead of holding the owner's
/// page; the daemon stays healthy. (`stuckterm` declares the terminal tools and ignores
/// every call; the bundled terminal plugin is disabled so its tools are the ones asked.)
#[test]
fn a_stuck_terminal_plugin_makes_the_panel_answer_504_naming_the_timeout() {
    let (_dir, _data, d, _v) = common::api::daemon_with_plugins(&["stuckterm"], &["terminal"]);
    let post = |path: &str, body: Value| {
        let r = d.client().post(d.url(path)).json(&body).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap_or(Value::Null))
    };
    assert_eq!(post("/api/v1/plugins/terminal/disable", json!({})).0, 200);
    assert_eq!(post("/api/v1/plugins/stuckterm/restart", json!({})).0, 200);
    common::api::put_settings(&d, json!({"core.agent.tool_timeout": "1s"}));

    // While stuckterm restarts, the panel answers what it finds: 400 "being restarted"
    // (the old instance's tools, still registered), then 503 "not running" (none yet).
    // Once the new instance has registered its tools, every call times out.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (status, body) = loop {
        let r = d.client().get(d.url("/api/v1/terminals")).send().unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().unwrap_or(Value::Null);
        if status == 504 || std::time::Instant::now() > deadline {
            break (status, body);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status, 504, "{body}\nlog:\n{}", d.log_text());
    let text = body["error"].as_str().unwrap_or_default();
    assert!(
        text.contains("core.agent.tool_timeout") && text.contains("restart it"),
        "{text}"
    );
    let (status, body) = post("/api/v1/terminals/1/input", json!({"text": "ls\r"}));
    assert_eq!(status, 504, "{body}");
    assert_eq!(d.client().get(d.url("/healthz")).send().unwrap().status().as_u16(), 200);
}
