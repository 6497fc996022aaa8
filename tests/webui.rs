//! The WebUI's API, black-box over HTTP against a real `homed`: the chat history
//! (paged, every channel with its source, surviving a restart) and the live log.

mod common;

use common::api::{self, get, post};
use common::{Daemon, vendor};
use serde_json::{Value, json};

fn texts(page: &Value) -> Vec<(String, String, String)> {
    page["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {page}"))
        .iter()
        .map(|i| {
            (
                i["role"].as_str().unwrap().to_owned(),
                i["source"].as_str().unwrap().to_owned(),
                i["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn chat_history_pages_back_through_every_channel_and_survives_a_restart() {
    let (_dir, data, d, v) = api::daemon_with_vendor();
    for (i, source) in ["webui", "cli", "webui"].iter().enumerate() {
        let (s, body) = post(
            &d,
            "/api/v1/messages",
            json!({"text": format!("message {i}"), "source": source, "channel": source}),
        );
        assert_eq!(s, 200, "{body}");
        assert_eq!(body["reply"], format!("echo: message {i}"));
    }
    // The text log is written by its actor after the reply: wait for the last turn.
    let first = api::wait_for(&d, "/api/v1/chat/history", "three turns in the history", |p| {
        p["total"] == 6
    });
    assert_eq!(
        texts(&first),
        [
            ("user", "webui", "message 0"),
            ("assistant", "agent", "echo: message 0"),
            ("user", "cli", "message 1"),
            ("assistant", "agent", "echo: message 1"),
            ("user", "webui", "message 2"),
            ("assistant", "agent", "echo: message 2"),
        ]
        .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    );
    assert!(first.get("next_before").is_none(), "the whole history fits: {first}");
    assert!(first["items"][0]["ts_ms"].as_i64().unwrap() > 1_600_000_000_000);
    assert!(
        first["items"][0].get("level").is_none(),
        "a queued input is no interrupt"
    );
    // An interrupt keeps its level in the history, so the chat can show it as one.
    let (s, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "urgent ping", "interrupt": true, "priority": "L2"}),
    );
    assert_eq!(s, 200, "{body}");
    let with_interrupt = api::wait_for(&d, "/api/v1/chat/history", "the interrupt in the history", |p| {
        p["total"] == 8
    });
    let urgent = &with_interrupt["items"][6];
    assert_eq!(
        (urgent["text"].as_str(), urgent["level"].as_str()),
        (Some("urgent ping"), Some("L2")),
        "{with_interrupt}"
    );
    assert!(with_interrupt["items"][7].get("level").is_none(), "{with_interrupt}");

    d.terminate();
    let d = Daemon::start(&data);
    api::put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    api::wait_sources(&d, 1);

    // After the restart: newest page of two, then page back to the start.
    let p = get(&d, "/api/v1/chat/history?limit=2");
    assert_eq!(p["total"], 8, "{p}");
    assert_eq!(texts(&p)[0].2, "urgent ping");
    assert_eq!(p["items"][0]["level"], "L2", "the level survives the restart: {p}");
    assert_eq!(p["next_before"], 6);
    let p = get(&d, "/api/v1/chat/history?limit=2&before=6");
    assert_eq!(texts(&p)[0].2, "message 2");
    assert_eq!(p["next_before"], 4);
    let p = get(&d, "/api/v1/chat/history?limit=2&before=4");
    assert_eq!(texts(&p)[0], ("user".into(), "cli".into(), "message 1".into()));
    let p = get(&d, "/api/v1/chat/history?limit=2&before=2");
    assert_eq!(texts(&p)[0].2, "message 0");
    assert!(p.get("next_before").is_none(), "{p}");

    // Bad paging answers 400 with what to do.
    let r = d.client().get(d.url("/api/v1/chat/history?limit=0")).send().unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().unwrap();
    assert!(body["error"].as_str().unwrap().contains("omit it"), "{body}");
    let r = d.client().get(d.url("/api/v1/chat/history?before=-1")).send().unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // And it needs the owner's token like every other route.
    let r = reqwest::blocking::get(d.url("/api/v1/chat/history")).unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

/// A plugin that writes a secret to its stderr (which the daemon logs): the page's log
/// view must show it masked.
fn install_leaky_plugin(data: &std::path::Path, secret: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/echo");
    let dst = data.join("plugins/leaky");
    std::fs::create_dir_all(&dst).unwrap();
    let script = std::fs::read_to_string(root.join("plugin.bin")).unwrap();
    let start = r#"print("echo plugin starting", file=sys.stderr, flush=True)"#;
    assert!(script.contains(start), "the echo plugin changed: update this test");
    let script = script.replace(
        start,
        &format!("{start}\nprint(\"leaky plugin: my key is {secret}\", file=sys.stderr, flush=True)"),
    );
    std::fs::write(dst.join("plugin.bin"), script).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dst.join("plugin.bin"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let manifest = std::fs::read_to_string(root.join("plugin.json"))
        .unwrap()
        .replace("\"echo\"", "\"leaky\"");
    std::fs::write(dst.join("plugin.json"), manifest).unwrap();
}

#[test]
fn live_log_is_filtered_masked_and_plain_text() {
    const SECRET: &str = "sk-canary-webui-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    install_leaky_plugin(&data, SECRET);
    let d = Daemon::start(&data);
    let v = vendor::start();
    let mut s = vendor::source_settings("fake", &v.url, 0);
    s["core.llm.sources.fake.api_key"] = json!(SECRET);
    api::put_settings(&d, s);
    api::wait_sources(&d, 1);

    let all = api::wait_for(
        &d,
        "/api/v1/logs?q=leaky",
        "the leaky plugin's stderr in the log",
        |v| {
            v["lines"]
                .as_array()
                .is_some_and(|l| l.iter().any(|l| l["message"].as_str().unwrap().contains("my key is")))
        },
    );
    let line = all["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["message"].as_str().unwrap().contains("my key is"))
        .unwrap();
    let msg = line["message"].as_str().unwrap();
    assert!(!msg.contains(SECRET), "the secret reached the page: {line}");
    assert!(msg.contains("@{setting:core.llm.sources.fake.api_key}"), "{line}");
    for l in all["lines"].as_array().unwrap() {
        let text = format!("{} {}", l["target"], l["message"]).to_lowercase();
        assert!(text.contains("leaky"), "q=leaky let through {l}");
    }
    let raw = d
        .client()
        .get(d.url("/api/v1/logs?limit=500"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(!raw.contains(SECRET), "the secret is in GET /api/v1/logs");

    // A level is a minimum: a source without its key is a warning.
    api::put_settings(
        &d,
        json!({
            "core.llm.sources.keyless.base_url": "https://api.example.com/v1",
            "core.llm.sources.keyless.model": "m",
            "core.llm.sources.keyless.adapter": "openai",
        }),
    );
    let warn = api::wait_for(&d, "/api/v1/logs?level=warn", "the keyless source's warning", |w| {
        w["lines"].as_array().is_some_and(|l| !l.is_empty())
    });
    let lines = warn["lines"].as_array().unwrap();
    assert!(!lines.is_empty(), "{warn}");
    assert!(
        lines.iter().all(|l| l["level"] == "WARN" || l["level"] == "ERROR"),
        "{warn}"
    );
    // Following: nothing is repeated after `last_seq`, new lines come.
    let last = warn["last_seq"].as_u64().unwrap();
    let (s, _) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "log me", "source": "webui", "channel": "webui"}),
    );
    assert_eq!(s, 200);
    let after = get(&d, &format!("/api/v1/logs?after={last}"));
    assert!(
        after["lines"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["seq"].as_u64().unwrap() > last),
        "{after}"
    );
    assert!(after["last_seq"].as_u64().unwrap() >= last);

    let r = d.client().get(d.url("/api/v1/logs?level=loud")).send().unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("error, warn, info"));

    // stderr is a file here: no colour codes in it.
    let log = d.log_text();
    assert!(log.contains("INFO"), "{log}");
    assert!(!log.contains('\u{1b}'), "ANSI escapes in a non-terminal log");
}

/// `DELETE path` as (status, JSON).
fn delete(d: &Daemon, path: &str) -> (u16, Value) {
    let r = d.client().delete(d.url(path)).send().unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

/// `PUT /api/v1/settings` as (status, JSON), whatever the status.
fn put(d: &Daemon, body: Value) -> (u16, Value) {
    let r = d.client().put(d.url("/api/v1/settings")).json(&body).send().unwrap();
    (r.status().as_u16(), r.json().unwrap_or(Value::Null))
}

#[test]
fn the_settings_page_gets_definitions_never_a_secret_and_tests_a_source_with_a_real_call() {
    let (_dir, _data, d, v) = api::daemon_with_vendor();
    let defs = get(&d, "/api/v1/settings/definitions");
    let def = |key: &str| {
        defs["definitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("no definition of {key}: {defs}"))
    };
    let level = def("core.daemon.log_level");
    assert_eq!(
        (&level["type"], &level["namespace"], &level["default"]),
        (&json!("enum"), &json!("core.daemon"), &json!("info"))
    );
    assert!(level["options"].as_array().unwrap().contains(&json!("debug")));
    assert_eq!(def("core.llm.api_key")["secret"], true);
    assert_eq!(def("core.agent.tool_timeout")["type"], "duration");
    assert!(def("core.agent.tool_timeout")["unit"].as_str().unwrap().contains("30s"));
    let fields: Vec<&str> = defs["source_fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    for f in [
        "base_url",
        "model",
        "api_key",
        "adapter",
        "priority",
        "context_window",
        "first_byte_timeout",
    ] {
        assert!(fields.contains(&f), "source field {f} missing: {fields:?}");
    }
    // Each description comes with its Chinese (`description_zh`, from the one catalog).
    let turns = def("core.agent.max_tool_turns");
    assert_eq!(
        turns["description"],
        "Most tool-call rounds in one task before it is stopped; 0 means unlimited"
    );
    assert_eq!(
        turns["description_zh"],
        "单个任务最多的工具调用轮数，超出即停止；0 表示不限"
    );
    let base_url = defs["source_fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "base_url")
        .unwrap();
    assert_eq!(base_url["description_zh"], "服务商 API 的 HTTP 端点");

    // Secrets: a source key and the secret map are listed masked, and sending the mask
    // back changes nothing (the page never has the real value).
    // Even with no secret stored yet, the mask is never stored as a value.
    let (status, body) = put(&d, json!({"core.security.secrets": {"pypi": "********"}}));
    assert_eq!(status, 400, "{body}");
    const KEY: &str = "sk-live-0123456789abcdef";
    const GH: &str = "ghp_0123456789abcdefXYZ";
    api::put_settings(
        &d,
        json!({"core.llm.sources.fake.api_key": KEY, "core.security.secrets": {"github": GH}}),
    );
    let listing = d
        .client()
        .get(d.url("/api/v1/settings"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        !listing.contains(KEY) && !listing.contains(GH),
        "a secret in clear: {listing}"
    );
    let s: Value = serde_json::from_str(&listing).unwrap();
    assert_eq!(
        s["settings"]["webui.listen_addr"],
        json!(format!("127.0.0.1:{}", d.port)),
        "the setting shows where this daemon really listens"
    );
    assert_eq!(s["settings"]["core.llm.sources.fake.api_key"], "********");
    assert_eq!(s["settings"]["core.security.secrets"], json!({"github": "********"}));
    let (status, body) = put(
        &d,
        json!({"core.llm.sources.fake.api_key": "********", "core.security.secrets": {"github": "********"}, "core.agent.max_tool_turns": 7}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["changed"],
        json!(["core.agent.max_tool_turns"]),
        "the masks were stored: {body}"
    );
    // A new secret next to a kept one; the mask cannot stand for a new name.
    let (status, body) = put(
        &d,
        json!({"core.security.secrets": {"github": "********", "npm": "npm_abcdefghijkl"}}),
    );
    assert_eq!(
        (status, &body["changed"]),
        (200, &json!(["core.security.secrets"])),
        "{body}"
    );
    // The firewall picks the map up through the settings relay, a moment later.
    api::wait_for(&d, "/api/v1/security", "both secrets in the firewall", |s| {
        s["secrets"] == json!(["github", "npm"])
    });
    let (status, body) = put(
        &d,
        json!({"core.security.secrets": {"github": "********", "pypi": "********"}}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("type the value"), "{body}");
    // A validation error is the PUT's text, naming the key and the expected type.
    let (status, body) = put(&d, json!({"core.agent.max_tool_turns": "many"}));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("core.agent.max_tool_turns"),
        "{body}"
    );

    // The test button: one real call to that source alone.
    let before = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/llm/sources/fake/test", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], true);
    assert!(body["content"].as_str().unwrap().starts_with("echo: "), "{body}");
    assert_eq!(v.calls.load(std::sync::atomic::Ordering::SeqCst), before + 1);
    let sent = v.last.lock().unwrap().clone();
    assert!(sent["messages"].to_string().contains("reply with OK"), "{sent}");
    v.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/llm/sources/fake/test", json!({}));
    assert_eq!(status, 502, "{body}");
    assert!(body["error"].as_str().unwrap().contains("fake"), "{body}");
    v.failing.store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/llm/sources/nosuch/test", json!({}));
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("core.llm.sources.nosuch"),
        "{body}"
    );

    // Every route the views use is in the OpenAPI document.
    let spec = get(&d, "/api/v1/openapi.json");
    for (path, method) in [
        ("/api/v1/settings/definitions", "get"),
        ("/api/v1/llm/sources/{name}/test", "post"),
        ("/api/v1/plugins/{name}/tools", "get"),
        ("/api/v1/plugins/{name}", "delete"),
        ("/api/v1/memory/documents/{id}", "delete"),
        ("/api/v1/memory/graph/relations", "put"),
        ("/api/v1/memory/graph/relations/{id}", "delete"),
        ("/api/v1/memory/knowledge", "get"),
        ("/api/v1/memory/knowledge", "post"),
        ("/api/v1/memory/knowledge/{name}", "delete"),
    ] {
        assert!(spec["paths"][path][method].is_object(), "{method} {path} undocumented");
    }
}

#[test]
fn a_plugin_lists_its_tool_schemas_and_uninstalls_out_of_the_tree_the_disk_and_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    api::install_test_plugin(&data, "greeter");
    let d = Daemon::start(&data);
    let v = vendor::start();
    api::put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    api::offer_every_tool(&d);
    api::wait_sources(&d, 1);
    api::wait_for(&d, "/api/v1/plugins", "greeter running", |p| {
        p.to_string().contains("greeter_hello")
    });
    let tools = get(&d, "/api/v1/plugins/greeter/tools");
    let hello = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "greeter_hello")
        .cloned()
        .unwrap_or_else(|| panic!("{tools}"));
    assert_eq!(hello["description"], "Say hello to someone");
    // A third-party plugin's tool has no Chinese in the catalog.
    assert_eq!(hello["description_zh"], Value::Null, "{hello}");
    assert_eq!(hello["parameters"]["properties"]["name"]["type"], "string");
    assert_eq!(
        get(&d, "/api/v1/plugins/nosuch/tools")["error"]
            .as_str()
            .map(|e| e.contains("nosuch")),
        Some(true)
    );

    api::ask(&d, "before the uninstall");
    assert!(v.last.lock().unwrap()["tools"].to_string().contains("greeter_hello"));
    let (status, body) = delete(&d, "/api/v1/plugins/greeter");
    assert_eq!((status, &body["status"]), (200, &json!("uninstalled")), "{body}");
    assert!(!data.join("plugins/greeter").exists(), "its directory is still there");
    assert_eq!(api::plugin(&d, "greeter"), Value::Null);
    let actors = get(&d, "/api/v1/actors").to_string();
    assert!(!actors.contains("kernel/plugins/greeter"), "{actors}");
    api::ask(&d, "after the uninstall");
    let last = v.last.lock().unwrap().clone();
    assert!(last["messages"].to_string().contains("after the uninstall"));
    assert!(
        !last["tools"].to_string().contains("greeter_hello"),
        "the tool is still offered: {}",
        last["tools"]
    );
    let (status, body) = delete(&d, "/api/v1/plugins/greeter");
    assert_eq!(status, 404, "{body}");
}

#[test]
fn the_memory_page_deletes_a_document_and_a_relation_edits_one_and_keeps_knowledge() {
    let (_dir, _data, d, _v) = api::daemon_with_vendor();
    let call = json!({"summary": "garden notes", "content": "The tomatoes need water every morning"}).to_string();
    api::ask(&d, &format!("call-tool doc_commit {call}"));
    let found = get(&d, "/api/v1/memory/documents?q=tomatoes water");
    let id = found["documents"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{found}"))
        .to_owned();
    assert_eq!(found["documents"][0]["summary"], "garden notes");
    let (status, body) = delete(&d, &format!("/api/v1/memory/documents/{id}"));
    assert_eq!(status, 200, "{body}");
    assert!(!get(&d, "/api/v1/memory/documents").to_string().contains(&id));
    assert_eq!(delete(&d, &format!("/api/v1/memory/documents/{id}")).0, 404);

    let commit = r#"call-tool memory_commit {"triples":[{"subject":"Alice","relation":"likes","object":"chess"},{"subject":"Alice","relation":"lives_in","object":"Paris"},{"subject":"Malice","relation":"likes","object":"chess"}]}"#;
    api::ask(&d, commit);
    let g = api::wait_for(&d, "/api/v1/memory/graph?q=Alice&depth=1", "Alice's relations", |g| {
        g["relations"].as_array().is_some_and(|r| r.len() >= 2)
    });
    let rel = |g: &Value, s: &str, r: &str| {
        g["relations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["source"] == s && x["relation"] == r)
            .cloned()
    };
    let likes = rel(&g, "Alice", "likes").unwrap_or_else(|| panic!("{g}"));
    let (status, body) = delete(&d, &format!("/api/v1/memory/graph/relations/{}", likes["id"]));
    assert_eq!(status, 200, "{body}");
    let g = get(&d, "/api/v1/memory/graph?q=Alice&depth=1");
    assert!(rel(&g, "Alice", "likes").is_none(), "{g}");
    assert!(rel(&g, "Alice", "lives_in").is_some(), "only that relation goes: {g}");
    let m = get(&d, "/api/v1/memory/graph?q=Malice&depth=1");
    assert!(
        rel(&m, "Malice", "likes").is_some(),
        "a name containing Alice is untouched: {m}"
    );
    let r = d
        .client()
        .put(d.url("/api/v1/memory/graph/relations"))
        .json(&json!({"old": ["Alice", "lives_in", "Paris"], "new": [null, null, "Lyon"]}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text());
    let g = get(&d, "/api/v1/memory/graph?q=Alice&depth=1");
    assert_eq!(
        rel(&g, "Alice", "lives_in").map(|r| r["target"].clone()),
        Some(json!("Lyon")),
        "{g}"
    );
    let r = d
        .client()
        .put(d.url("/api/v1/memory/graph/relations"))
        .json(&json!({"old": ["Alice", "", "Paris"], "new": [null, null, "Lyon"]}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);

    let (status, body) = post(
        &d,
        "/api/v1/memory/knowledge",
        json!({"name": "howto/watering", "content": "Water tomatoes at dawn."}),
    );
    assert_eq!(status, 200, "{body}");
    let list = get(&d, "/api/v1/memory/knowledge");
    assert!(list["items"].to_string().contains("howto/watering"), "{list}");
    let hits = get(&d, "/api/v1/memory/knowledge?q=tomatoes dawn");
    assert!(
        hits["results"][0]["content"].as_str().unwrap().contains("at dawn"),
        "{hits}"
    );
    let (status, body) = delete(&d, "/api/v1/memory/knowledge/howto/watering");
    assert_eq!(status, 200, "{body}");
    assert!(
        !get(&d, "/api/v1/memory/knowledge")
            .to_string()
            .contains("howto/watering")
    );
    assert_eq!(delete(&d, "/api/v1/memory/knowledge/howto/watering").0, 404);
}

/// `get_plugin_tools` called by the scripted model with `args` (the registry's own
/// listing, as the model gets it), parsed. `n` varies the message so the duplicate
/// guard lets a repeat through.
fn plugin_tools(d: &Daemon, args: &str, n: usize) -> Value {
    let reply = api::ask(d, &format!("call-tool get_plugin_tools {{{args}{}}}", " ".repeat(n)));
    let text = reply
        .strip_prefix("tool said: ")
        .unwrap_or_else(|| panic!("no tool result: {reply}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Every setting and tool description the pages show has its Chinese beside it, and
/// each Chinese keeps its English's numbers and names (`check_zh`): the settings page's
/// definitions (core settings, source fields, the settings the bundled plugins declare)
/// and every tool a fresh daemon registers, the kernel's and the bundled plugins'. The
/// tools are the registry's own list (`get_plugin_tools`, which also names the tools
/// only residents are offered), not a copy: the bundled subprocess plugins declare
/// theirs only when they run. Not covered: `mcp__*` (an MCP server's own tools; none
/// run here) and `output_send__*` (made per channel, not in the registry). The other
/// way round, every catalog entry must be registered or declared here, so a renamed
/// tool or setting leaves no stale Chinese behind.
#[test]
fn every_description_the_pages_show_is_also_in_chinese() {
    use homeagent_actors::i18n::describe::{SETTINGS_ZH, TOOLS_ZH};
    use homeagent_actors::i18n::{check_zh, tool_zh};
    fn check(what: &str, en: &Value, zh: &Value) -> Option<String> {
        match (en.as_str(), zh.as_str()) {
            (Some(en), Some(zh)) => check_zh(en, zh).err().map(|e| format!("{what}: {e}")),
            _ => Some(format!("{what}: no description_zh beside {en}")),
        }
    }
    let (_dir, _data, d, _v) = api::daemon_with_vendor();
    let mut wrong = Vec::new();

    // The settings page; the QQ bridge declares its settings as it starts.
    let declared = |defs: &Value| -> Vec<String> {
        defs["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "plugin.{}.{}",
                    p["plugin"].as_str().unwrap(),
                    p["key"].as_str().unwrap()
                )
            })
            .collect()
    };
    let defs = api::wait_for(
        &d,
        "/api/v1/settings/definitions",
        "the bundled plugins' settings in the catalog declared",
        |defs| {
            let have = declared(defs);
            SETTINGS_ZH
                .iter()
                .filter(|(k, _)| k.starts_with("plugin."))
                .all(|(k, _)| have.iter().any(|h| h == k))
        },
    );
    for x in defs["definitions"].as_array().unwrap() {
        wrong.extend(check(
            x["key"].as_str().unwrap(),
            &x["description"],
            &x["description_zh"],
        ));
    }
    for x in defs["source_fields"].as_array().unwrap() {
        let what = format!("source field {}", x["name"]);
        wrong.extend(check(&what, &x["description"], &x["description_zh"]));
    }
    for (x, key) in defs["plugins"].as_array().unwrap().iter().zip(declared(&defs)) {
        wrong.extend(check(&key, &x["description"], &x["description_zh"]));
    }

    // The tools, once every tool of the catalog is registered (plugins start a moment
    // after the daemon answers).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut n = 0;
    let listing = loop {
        let listing = plugin_tools(&d, r#""plugin": """#, n);
        n += 1;
        let names = listing.to_string();
        let missing: Vec<&str> = TOOLS_ZH
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| !names.contains(&format!("\"{t}\"")))
            .collect();
        if missing.is_empty() {
            break listing;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "in the catalog, never registered: {missing:?}\n{listing}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let mut seen = 0;
    for owner in listing["plugins"].as_array().unwrap() {
        let name = owner["plugin"].as_str().unwrap();
        n += 1;
        let tools = plugin_tools(&d, &format!(r#""plugin": "{name}""#), n);
        for t in tools["tools"].as_array().unwrap() {
            let tool = t["name"].as_str().unwrap();
            if tool.starts_with("mcp__") {
                continue;
            }
            seen += 1;
            let zh = tool_zh(tool).map_or(Value::Null, |z| json!(z));
            wrong.extend(check(&format!("tool {tool} ({name})"), &t["description"], &zh));
        }
    }
    assert!(seen >= TOOLS_ZH.len(), "{seen} tools checked: {listing}");

    // The plugins page reads it beside each plugin's tools.
    for p in get(&d, "/api/v1/plugins")["plugins"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        for t in get(&d, &format!("/api/v1/plugins/{name}/tools"))["tools"]
            .as_array()
            .unwrap()
        {
            let what = format!("GET /api/v1/plugins/{name}/tools: {}", t["name"]);
            wrong.extend(check(&what, &t["description"], &t["description_zh"]));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
