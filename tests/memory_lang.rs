//! English and Chinese alike, through the path a user's message takes: a message is
//! answered (fake vendor), the rule distiller turns its self-statements into graph
//! facts, the graph answers a question phrased as a sentence, and a later turn that
//! names an entity — in any case — carries the memory index to the model. Archived
//! turns become a document whose summary says what it holds.

mod common;

use std::time::Duration;

use common::api::{daemon_with_vendor, post, put_settings, wait_sources};
use common::{Daemon, vendor};
use serde_json::{Value, json};

/// Runs the rule distiller until it has read a record (the text log is written just
/// after the reply), answering its round.
fn distil(d: &Daemon) -> Value {
    for _ in 0..600 {
        let (status, r) = post(d, "/api/v1/heartbeats/rules/run", json!({}));
        assert_eq!(status, 200, "{r}");
        if r["records"].as_u64() > Some(0) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the distiller never saw the message in 30 s");
}

fn names(graph: &Value) -> Vec<String> {
    graph["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

fn has_relation(graph: &Value, s: &str, r: &str, o: &str) -> bool {
    graph["relations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["source"] == s && x["relation"] == r && x["target"] == o)
}

#[test]
fn english_and_chinese_self_statements_become_graph_facts() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let text = "My sister adopted a greyhound called Biscuit. I live in Lisbon, and I'm allergic to peanuts.";
    let (status, _) = post(&d, "/api/v1/messages", json!({ "text": text }));
    assert_eq!(status, 200);
    let round = distil(&d);
    assert_eq!(
        round["triples"], 5,
        "adopted, is_a, sister, lives_in, allergic_to: {round}"
    );

    let g: Value = common::api::get(&d, "/api/v1/memory/graph?q=What%20did%20my%20sister%20adopt%3F");
    assert!(has_relation(&g, "user's sister", "adopted", "Biscuit"), "{g}");
    assert!(has_relation(&g, "Biscuit", "is_a", "greyhound"), "{g}");
    let g: Value = common::api::get(&d, "/api/v1/memory/graph?q=where%20does%20biscuit%20live");
    assert_eq!(
        names(&g).first().map(String::as_str),
        Some("Biscuit"),
        "a lower-cased mention finds the name: {g}"
    );
    let g: Value = common::api::get(&d, "/api/v1/memory/graph?q=are%20peanuts%20ok");
    assert!(has_relation(&g, "用户", "allergic_to", "peanuts"), "{g}");

    // A later turn that names Biscuit brings the memory index to the model.
    let (status, _) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "should biscuit get a new collar?"}),
    );
    assert_eq!(status, 200);
    let sent = v.last.lock().unwrap().to_string();
    assert!(sent.contains("[Memory index]") && sent.contains("Biscuit"), "{sent}");

    let (status, _) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "我妹妹叫李婷，我从小就对花生过敏"}),
    );
    assert_eq!(status, 200);
    let round = distil(&d);
    assert_eq!(round["triples"], 2, "{round}");
    let g: Value = common::api::get(&d, "/api/v1/memory/graph?q=李婷是谁");
    assert!(has_relation(&g, "用户", "妹妹", "李婷"), "{g}");
    let g: Value = common::api::get(&d, "/api/v1/memory/graph?q=花生");
    assert!(has_relation(&g, "用户", "过敏", "花生"), "{g}");
}

#[test]
fn an_archived_conversation_is_summarised_by_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    put_settings(&d, json!({"core.agent.max_context_size": 12}));
    wait_sources(&d, 1);
    let said = [
        "My sister adopted a greyhound called Biscuit last Saturday.",
        "Biscuit sleeps on the sofa all day, Biscuit is very lazy.",
        "We are taking Biscuit to the beach in Cascais tomorrow.",
    ];
    for text in said {
        let (status, _) = post(&d, "/api/v1/messages", json!({ "text": text }));
        assert_eq!(status, 200);
    }
    for i in 0..10 {
        let (status, _) = post(&d, "/api/v1/messages", json!({"text": format!("filler number {i}")}));
        assert_eq!(status, 200);
    }
    // 26 events > 2 × 12: a distill round archives the oldest 14 into a document.
    let (status, round) = post(&d, "/api/v1/heartbeats/distill/run", json!({}));
    assert_eq!((status, round["archived"].as_u64()), (200, Some(14)), "{round}");
    let docs: Value = common::api::get(&d, "/api/v1/memory/documents");
    let doc = docs["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["content"].as_str().unwrap().contains("greyhound"))
        .cloned()
        .unwrap_or_else(|| panic!("the first turns were not archived: {docs}"));
    let summary = doc["summary"].as_str().unwrap();
    assert!(summary.contains("turns between http and agent."), "who: {summary}");
    assert!(summary.contains("Mentions: Biscuit"), "the name said most: {summary}");
    assert!(summary.contains("Key points: ["), "key sentences: {summary}");
    // The dates said relative to today are absolute in the summary.
    assert!(summary.contains("Dates: "), "{summary}");
    assert!(!summary.contains("条对话 ("), "not the old count line: {summary}");
}
