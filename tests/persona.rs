//! The persona (issue 33 item 5): the first conversation of a fresh data dir asks for
//! it, the model writes it with `persona_set` once the owner confirms, and from the
//! next turn on every prompt carries it — through the real path (HTTP → turn → the
//! request the vendor receives), across a restart, and editable from the WebUI's API.

mod common;

use serde_json::{Value, json};

use common::api::{ask, get, post};

/// The system message of the last request the vendor received.
fn last_system(v: &common::vendor::Vendor) -> String {
    let last = v.last.lock().unwrap().clone();
    last["messages"][0]["content"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_persona_written_at_first_run_is_in_the_next_prompt() {
    let (_dir, data, d, v) = common::api::daemon_with_vendor();
    // No persona yet: the first prompt asks for one.
    ask(&d, "hello");
    let first = last_system(&v);
    assert!(
        first.contains("# First run") && first.contains("persona_set"),
        "{first}"
    );
    assert!(!first.contains("# Persona"), "{first}");
    assert_eq!(get(&d, "/api/v1/persona")["set"], false);

    // The model writes it; the owner confirms (persona_set=ask by default).
    let args = json!({"name": "Mira", "address": "Sam", "tone": "warm and brief"});
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": format!("call-tool persona_set {args}"), "sync": false}),
    );
    assert_eq!(status, 202, "{body}");
    common::api::wait_for(&d, "/api/v1/approvals", "the owner is asked", |a| {
        !a["approvals"][0].is_null()
    });
    let q: Value = get(&d, "/api/v1/approvals")["approvals"][0].clone();
    assert_eq!(q["tool"], "persona_set", "{q}");
    assert!(q["summary"].as_str().unwrap_or_default().contains("Mira"), "{q}");
    let (status, body) = post(&d, &format!("/api/v1/approvals/{}", q["id"]), json!({"allow": true}));
    assert_eq!(status, 200, "{body}");
    let file = data.join("personal/personal.md");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "persona never written; log:\n{}",
            d.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        written,
        "- Your name: Mira\n- Address the owner as: Sam\n- Tone: warm and brief\n"
    );

    // The next turn's prompt carries it, and no longer asks (it queues behind the
    // persona's turn, so its request is the last the vendor sees).
    ask(&d, "hello again");
    let next = last_system(&v);
    assert!(next.contains("# Persona\n- Your name: Mira"), "{next}");
    assert!(next.contains("Address the owner as: Sam"), "{next}");
    assert!(!next.contains("# First run"), "{next}");
    assert_eq!(get(&d, "/api/v1/persona")["set"], true);

    // The owner edits it from the page; the previous text is kept.
    let (status, body) = common::api::put(&d, "/api/v1/persona", json!({"text": "You are Ada. Call me Sam."}));
    assert_eq!(status, 200, "{body}");
    ask(&d, "and now");
    assert!(last_system(&v).contains("# Persona\nYou are Ada. Call me Sam."));
    let kept: Vec<String> = std::fs::read_dir(data.join("personal/history"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(kept, [written], "the previous persona is kept");
    // Bad input is refused with what to do and changes nothing.
    let (status, body) = common::api::put(&d, "/api/v1/persona", json!({"text": "   "}));
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("at least a name"), "{body}");
    let (status, body) = common::api::put(&d, "/api/v1/persona", json!({"text": "x".repeat(5000)}));
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("4000"), "{body}");

    // It outlives the process.
    drop(d);
    let d = common::Daemon::start(&data);
    common::api::wait_sources(&d, 1);
    ask(&d, "after a restart");
    assert!(last_system(&v).contains("# Persona\nYou are Ada. Call me Sam."));
}
