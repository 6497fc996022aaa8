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
