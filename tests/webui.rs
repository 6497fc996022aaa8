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

    d.terminate();
    let d = Daemon::start(&data);
    api::put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    api::wait_sources(&d, 1);

    // After the restart: newest page of two, then page back to the start.
    let p = get(&d, "/api/v1/chat/history?limit=2");
    assert_eq!(p["total"], 6, "{p}");
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

    // A level is a minimum: the missing default source's key is a warning.
    let warn = get(&d, "/api/v1/logs?level=warn");
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
