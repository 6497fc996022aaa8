//! `kernel/llm` against raw vendors on 127.0.0.1 that choose their HTTP/1.x framing
//! byte by byte (`tests/common/vendor/raw.rs`): every valid framing answers, a stream
//! without its end marker is an error naming the cause, and the per-source connect /
//! first-byte / idle timeouts end an attempt so the fallback moves on.

#[path = "../../tests/common/vendor/raw.rs"]
mod raw;

mod common;

use common::{llm, request, source};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use homeagent_actors::TAddr;
use homeagent_actors::llm::provider::{Complete, Configure, GetLlmStatus, LlmActor, LlmError};
use raw::{Framing, Mode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn complete(stream: bool) -> Complete {
    Complete {
        purpose: Default::default(),
        request: request("hi"),
        stream,
        deltas: None,
        cancel: CancellationToken::new(),
    }
}

/// One source on a raw vendor in `mode`.
async fn single(mode: Mode) -> (raw::RawVendor, TAddr<LlmActor>) {
    let v = raw::start("raw", mode);
    let llm = llm().await;
    let mut s = BTreeMap::new();
    source(&mut s, "a", &v.url, "sk-test", 0);
    llm.send(Configure(s)).await.unwrap();
    (v, llm)
}

#[actix_rt::test]
async fn every_http1_framing_answers_json_and_streams() {
    for framing in [Framing::Length, Framing::Chunked, Framing::Close, Framing::Http10] {
        let (v, llm) = single(Mode::Answer(framing)).await;
        for stream in [false, true] {
            let got = llm.send(complete(stream)).await.unwrap();
            let c = got.unwrap_or_else(|e| panic!("{framing:?} stream={stream}: {e}"));
            assert_eq!(c.response.content, v.reply(), "{framing:?} stream={stream}");
            assert_eq!(c.response.usage.total_tokens, 15, "{framing:?} stream={stream}");
        }
    }
}

/// Settings of two sources: `primary` (tried first) and `backup`.
fn two(primary: &str, backup: &str) -> BTreeMap<String, Value> {
    let mut s = BTreeMap::new();
    source(&mut s, "primary", primary, "sk-test", 10);
    source(&mut s, "backup", backup, "sk-test", 0);
    s
}

#[actix_rt::test]
async fn a_stream_cut_before_its_end_marker_is_an_error_naming_the_cause() {
    for framing in [Framing::Length, Framing::Chunked, Framing::Close, Framing::Http10] {
        let (v, llm) = single(Mode::Cut(framing)).await;
        let err = llm.send(complete(true)).await.unwrap().unwrap_err();
        let LlmError::AllFailed(msg) = &err else {
            panic!("{framing:?}: {err:?}")
        };
        assert_eq!(v.calls(), 2, "{framing:?}: a truncation is retried once on the source");
        // Close-delimited bodies end cleanly at the close, so only the missing end marker
        // tells; announced lengths and chunked bodies also report the broken framing.
        match framing {
            Framing::Close | Framing::Http10 => assert!(
                msg.contains("closed after") && msg.contains("bytes without finish_reason or [DONE]"),
                "{framing:?}: {msg}"
            ),
            _ => assert!(
                msg.contains("closed after") || msg.contains("connection broke after"),
                "{framing:?}: {msg}"
            ),
        }
        let status = llm.send(GetLlmStatus).await.unwrap();
        assert_eq!(status.sources[0].failures, 1, "{framing:?}: the source is paused");

        // A cut JSON answer is no answer either.
        let (_v, llm) = single(Mode::Cut(framing)).await;
        let err = llm.send(complete(false)).await.unwrap().unwrap_err();
        assert!(matches!(err, LlmError::AllFailed(_)), "{framing:?}: {err:?}");
    }
}

#[actix_rt::test]
async fn a_truncating_primary_falls_back_to_the_backup() {
    let primary = raw::start("primary", Mode::Cut(Framing::Close));
    let backup = raw::start("backup", Mode::Answer(Framing::Chunked));
    let llm = llm().await;
    llm.send(Configure(two(&primary.url, &backup.url))).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let msg = Complete {
        purpose: Default::default(),
        request: request("hi"),
        stream: true,
        deltas: Some(tx),
        cancel: CancellationToken::new(),
    };
    let c = llm.send(msg).await.unwrap().unwrap();
    assert_eq!(
        (c.source.as_str(), c.response.content.as_str()),
        ("backup", "backup answered")
    );
    let mut streamed = String::new();
    while let Ok(d) = rx.try_recv() {
        streamed.push_str(&d.content);
    }
    assert!(streamed.ends_with("backup answered"), "{streamed}");
}

#[actix_rt::test]
async fn a_hung_primary_falls_back_after_its_first_byte_timeout() {
    let primary = raw::start("primary", Mode::Hang);
    let backup = raw::start("backup", Mode::Answer(Framing::Length));
    let llm = llm().await;
    let mut s = two(&primary.url, &backup.url);
    s.insert("core.llm.sources.primary.first_byte_timeout".into(), json!("1s"));
    llm.send(Configure(s)).await.unwrap();
    let t = Instant::now();
    let c = llm.send(complete(true)).await.unwrap().unwrap();
    let took = t.elapsed();
    assert_eq!(c.source, "backup");
    assert!(took >= Duration::from_secs(1), "the primary had its 1 s: {took:?}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(primary.calls(), 1, "a timeout is not retried on the same source");
    let status = llm.send(GetLlmStatus).await.unwrap();
    let p = status.sources.iter().find(|s| s.config.name == "primary").unwrap();
    let e = p.last_error.as_deref().unwrap();
    assert!(
        e.contains("no first byte within 1s") && e.contains("core.llm.sources.primary.first_byte_timeout"),
        "{e}"
    );
}

#[actix_rt::test]
async fn a_stalled_stream_fails_after_its_idle_timeout() {
    let (_v, llm) = single(Mode::Stall(Framing::Chunked)).await;
    let mut s = BTreeMap::new();
    source(&mut s, "a", &_v.url, "sk-test", 0);
    s.insert("core.llm.sources.a.idle_timeout".into(), json!("500ms"));
    llm.send(Configure(s)).await.unwrap();
    let err = llm.send(complete(true)).await.unwrap().unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("went silent for 500ms after") && msg.contains("core.llm.sources.a.idle_timeout"),
        "{msg}"
    );
}

#[actix_rt::test]
async fn a_vendor_that_never_finishes_the_tls_handshake_hits_the_connect_timeout() {
    // The raw vendor reads "a request" line by line and never answers: a TLS client
    // hello stays unanswered, so the connection is never up.
    let v = raw::start("tls", Mode::Hang);
    let url = v.url.replace("http://", "https://");
    let llm = llm().await;
    let mut s = BTreeMap::new();
    source(&mut s, "a", &url, "sk-test", 0);
    s.insert("core.llm.sources.a.connect_timeout".into(), json!("300ms"));
    llm.send(Configure(s)).await.unwrap();
    let err = llm.send(complete(false)).await.unwrap().unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("connect to {url}/chat/completions timed out after 300ms")),
        "{msg}"
    );
}

#[actix_rt::test]
async fn a_paused_source_is_tried_at_once_after_its_settings_change() {
    let good = raw::start("good", Mode::Answer(Framing::Close));
    let llm = llm().await;
    let mut s = BTreeMap::new();
    source(&mut s, "a", "http://127.0.0.1:9/v1", "sk-test", 0); // the discard port: refused
    llm.send(Configure(s.clone())).await.unwrap();
    let err = llm.send(complete(false)).await.unwrap().unwrap_err();
    assert!(err.to_string().contains("cannot reach http://127.0.0.1:9/v1"), "{err}");
    let err = llm.send(complete(false)).await.unwrap().unwrap_err();
    assert!(matches!(err, LlmError::AllPaused { .. }), "paused: {err}");

    // Unchanged settings (another key was written): still paused.
    llm.send(Configure(s.clone())).await.unwrap();
    let err = llm.send(complete(false)).await.unwrap().unwrap_err();
    assert!(matches!(err, LlmError::AllPaused { .. }), "still paused: {err}");

    s.insert("core.llm.sources.a.base_url".into(), json!(good.url));
    llm.send(Configure(s)).await.unwrap();
    let status = llm.send(GetLlmStatus).await.unwrap();
    assert!(
        status.sources[0].available && status.sources[0].failures == 0,
        "{status:?}"
    );
    let c = llm.send(complete(false)).await.unwrap().unwrap();
    assert_eq!(c.response.content, "good answered");
}
