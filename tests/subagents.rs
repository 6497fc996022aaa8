//! Sub-agents end to end (spec §6): a real daemon, the fake vendor on loopback, and
//! every assertion on what crossed HTTP — the replies, the requests the vendor got
//! (told apart by their last input: a helper's task text, the parent's notice), and
//! the supervision tree of `GET /api/v1/actors`.

mod common;

use common::api::{ask, daemon_with_vendor, get, wait_for};
use common::vendor::{Stamp, Vendor};
use serde_json::Value;

/// The ids of every actor in the tree.
fn actor_ids(d: &common::Daemon) -> Vec<String> {
    get(d, "/api/v1/actors")["actors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["id"].as_str().map(str::to_owned))
        .collect()
}

/// The chat requests whose last input starts with `prefix`.
fn requests_for(v: &Vendor, prefix: &str) -> Vec<Value> {
    v.all
        .lock()
        .unwrap()
        .iter()
        .filter(|body| {
            let msgs = body["messages"].as_array().cloned().unwrap_or_default();
            msgs.iter()
                .rev()
                .find(|m| m["role"] == "user")
                .and_then(|m| m["content"].as_str())
                .is_some_and(|t| t.starts_with(prefix))
        })
        .cloned()
        .collect()
}

/// Waits (60 s at most) until the vendor got a request whose last input starts with `prefix`.
fn wait_request(d: &common::Daemon, v: &Vendor, prefix: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if let Some(r) = requests_for(v, prefix).pop() {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no request for `{prefix}` reached the vendor; log:\n{}", d.log_text());
}

fn stamps_of<'a>(stamps: &'a [Stamp], text: &str, answered: bool) -> Vec<&'a Stamp> {
    stamps
        .iter()
        .filter(|s| s.text == text && s.answered == answered)
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn two_helpers_run_in_parallel_announce_their_end_and_deliver_their_result_once() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    // The parent's model starts two helpers in one parallel group; each helper's model
    // takes a while (the vendor's `slow` script) and answers `slow done: <name>`.
    let plan = r#"{"steps":[{"parallel":[{"tool":"spawn_child","args":{"task":"slow 1500 alpha"}},{"tool":"spawn_child","args":{"task":"slow 1500 beta","max_turns":99}}]}]}"#;
    let reply = ask(&d, &format!("call-tool seq_run {plan}"));
    assert!(
        reply.contains("child_1") && reply.contains("child_2"),
        "both helpers started: {reply}"
    );
    assert!(
        reply.contains("at most 30 tool rounds"),
        "max_turns clamped to 30: {reply}"
    );

    // Each helper is a supervised subtree of the agent while it runs.
    wait_for(&d, "/api/v1/actors", "both helpers in the tree", |v| {
        let ids: Vec<&str> = v["actors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["id"].as_str())
            .collect();
        ["1", "2"].iter().all(|n| {
            ids.contains(&format!("kernel/agent/children/child_{n}/task").as_str())
                && ids.contains(&format!("kernel/agent/children/child_{n}/context").as_str())
        })
    });

    // The parent hears of each end through a self message (its own later turn).
    let notice_a = wait_request(&d, &v, "Helper child_1 finished");
    let notice_b = wait_request(&d, &v, "Helper child_2 finished");
    let text = |r: &Value| r["messages"].to_string();
    assert!(text(&notice_a).contains("slow done: alpha"), "{notice_a}");
    assert!(text(&notice_b).contains("slow done: beta"), "{notice_b}");

    // Overlap, from the vendor's own record: each helper's request arrived before the
    // other's answer left.
    let stamps = v.stamps.lock().unwrap().clone();
    let (a_in, a_out) = (
        stamps_of(&stamps, "slow 1500 alpha", false),
        stamps_of(&stamps, "slow 1500 alpha", true),
    );
    let (b_in, b_out) = (
        stamps_of(&stamps, "slow 1500 beta", false),
        stamps_of(&stamps, "slow 1500 beta", true),
    );
    assert!(
        !a_in.is_empty() && !a_out.is_empty() && !b_in.is_empty() && !b_out.is_empty(),
        "{stamps:?}"
    );
    assert!(
        b_in[0].at < a_out.last().unwrap().at,
        "helper B started before A answered: {stamps:?}"
    );
    assert!(
        a_in[0].at < b_out.last().unwrap().at,
        "helper A started before B answered: {stamps:?}"
    );

    // A helper's request: its task alone (nothing of the parent's conversation), no
    // output channels, no spawn_child; the parent's own request offers both tools.
    let child_req = requests_for(&v, "slow 1500 alpha").remove(0);
    assert!(!text(&child_req).contains("call-tool seq_run"), "{child_req}");
    let tools = tool_names(&child_req);
    assert!(tools.iter().all(|t| !t.starts_with("output_send__")), "{tools:?}");
    assert!(!tools.contains(&"spawn_child".to_owned()), "{tools:?}");
    assert!(tools.contains(&"child_result".to_owned()), "{tools:?}");
    let parent_tools = tool_names(&requests_for(&v, "call-tool seq_run").remove(0));
    assert!(parent_tools.contains(&"spawn_child".to_owned()), "{parent_tools:?}");

    // The result, once; then "already delivered", never "not found".
    let first = ask(&d, r#"call-tool child_result {"id":"child_1"}"#);
    assert_eq!(first, "tool said: slow done: alpha");
    // (Another spelling of the same call: the duplicate guard drops a repeated text.)
    let again = ask(&d, r#"call-tool child_result {"id": "child_1"}"#);
    assert!(again.contains("already delivered"), "{again}");
    let unknown = ask(&d, r#"call-tool child_result {"id":"child_77"}"#);
    assert!(unknown.contains("no helper `child_77`"), "{unknown}");

    // Ended helpers leave the tree.
    wait_for(&d, "/api/v1/actors", "the helpers' subtrees removed", |v| {
        !v["actors"].to_string().contains("kernel/agent/children/child_")
    });
    assert!(actor_ids(&d).contains(&"kernel/agent/children".to_owned()));
}

#[test]
fn a_helper_cannot_spawn_helpers_and_says_so_in_its_result() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let task = r#"call-tool spawn_child {\"task\":\"grandchild\"}"#;
    let reply = ask(&d, &format!(r#"call-tool spawn_child {{"task":"{task}"}}"#));
    assert!(reply.contains("child_1"), "{reply}");
    wait_request(&d, &v, "Helper child_1 finished");
    let result = ask(&d, r#"call-tool child_result {"id":"child_1"}"#);
    assert!(
        result.contains("Tool spawn_child does not exist"),
        "the helper's call was refused: {result}"
    );
    assert!(requests_for(&v, "grandchild").is_empty(), "no grandchild ever ran");
    assert!(!d.log_text().contains("child_2"), "no second helper was booked");
}
