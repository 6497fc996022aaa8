//! `kernel/llm` against a fake vendor on 127.0.0.1 speaking the OpenAI Chat
//! Completions wire format (JSON and SSE), scripted per request.

mod common;

use common::{llm, request, source};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use homeagent_actors::llm::CompletionRequest;
use homeagent_actors::llm::provider::{Complete, Configure, GetLlmStatus, LlmError};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// What the fake answers next.
#[derive(Clone)]
enum Reply {
    Json(u16, Value),
    Raw(u16, &'static str),
    Sse(Vec<Value>),
    Slow(Duration),
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    seen: Vec<(String, Value)>,
}

async fn chat(req: HttpRequest, body: web::Bytes, script: web::Data<Arc<Mutex<Script>>>) -> HttpResponse {
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = {
        let mut s = script.lock();
        s.seen.push((auth, body));
        s.replies
            .pop_front()
            .unwrap_or(Reply::Json(500, json!({"error": {"message": "script exhausted"}})))
    };
    match reply {
        Reply::Json(status, v) => HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).json(v),
        Reply::Raw(status, text) => {
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).body(text)
        }
        Reply::Sse(chunks) => {
            let mut out = String::new();
            for c in chunks {
                out.push_str(&format!("data: {c}\n\n"));
            }
            out.push_str("data: [DONE]\n\n");
            HttpResponse::Ok().content_type("text/event-stream").body(out)
        }
        Reply::Slow(d) => {
            actix_web::rt::time::sleep(d).await;
            HttpResponse::Ok().json(completion("late"))
        }
    }
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    })
}

struct Fake {
    url: String,
    script: Arc<Mutex<Script>>,
}

fn fake() -> Fake {
    let script = Arc::new(Mutex::new(Script::default()));
    let data = web::Data::new(script.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/v1/chat/completions", web::post().to(chat))
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")
    .unwrap();
    let addr = server.addrs()[0];
    actix_web::rt::spawn(server.run());
    Fake {
        url: format!("http://{addr}/v1"),
        script,
    }
}

fn complete(req: CompletionRequest, stream: bool) -> Complete {
    Complete {
        purpose: Default::default(),
        request: req,
        stream,
        deltas: None,
        cancel: CancellationToken::new(),
    }
}

#[actix_rt::test]
async fn no_source_is_a_clear_error() {
    let llm = llm().await;
    llm.send(Configure(BTreeMap::new())).await.unwrap();
    let err = llm.send(complete(request("hi"), false)).await.unwrap().unwrap_err();
    assert!(
        matches!(&err, LlmError::NoSource(m) if m.contains("core.llm.sources.<name>.base_url")),
        "{err}"
    );
}

#[actix_rt::test]
async fn json_and_stream_completions() {
    let f = fake();
    let llm = llm().await;
    let mut s = BTreeMap::new();
    source(&mut s, "a", &f.url, "sk-a", 0);
    llm.send(Configure(s)).await.unwrap();

    f.script.lock().replies.push_back(Reply::Json(200, completion("hello")));
    let c = llm.send(complete(request("hi"), false)).await.unwrap().unwrap();
    assert_eq!(
        (
            c.response.content.as_str(),
            c.source.as_str(),
            c.response.usage.total_tokens
        ),
        ("hello", "a", 10)
    );
    let (auth, body) = f.script.lock().seen.last().cloned().unwrap();
    assert_eq!(auth, "Bearer sk-a");
    assert_eq!(body["model"], "gpt-test", "empty model → the source's model");
    assert_eq!(body["messages"][0]["content"], "hi");

    let chunks = vec![
        json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}),
        json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}),
        json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"output_send__http","arguments":""}}]},"finish_reason":null}]}),
        json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"payload\":\"x\"}"}}]},"finish_reason":null}]}),
        json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
        json!({"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}),
    ];
    f.script.lock().replies.push_back(Reply::Sse(chunks));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let msg = Complete {
        purpose: Default::default(),
        request: request("hi"),
        stream: true,
        deltas: Some(tx),
        cancel: CancellationToken::new(),
    };
    let c = llm.send(msg).await.unwrap().unwrap();
    assert_eq!(c.response.content, "Hello");
    assert_eq!(c.response.finish_reason, "tool_calls");
    assert_eq!(c.response.tool_calls.len(), 1);
    assert_eq!(c.response.tool_calls[0].name, "output_send__http");
    assert_eq!(c.response.tool_calls[0].arguments, json!({"payload": "x"}));
    assert_eq!(c.response.usage.total_tokens, 9);
    let mut streamed = String::new();
    while let Ok(d) = rx.try_recv() {
        streamed.push_str(&d.content);
    }
    assert_eq!(streamed, "Hello", "deltas arrive as they stream");
}

#[actix_rt::test]
async fn server_error_falls_back_and_bad_key_disables() {
    let primary = fake();
    let backup = fake();
    let llm = llm().await;
    let mut s = BTreeMap::new();
    source(&mut s, "primary", &primary.url, "sk-p", 10);
    source(&mut s, "backup", &backup.url, "sk-b", 0);
    llm.send(Configure(s.clone())).await.unwrap();

    // Two attempts on the primary (500, then garbage), then the backup answers.
    primary.script.lock().replies.extend([
        Reply::Json(500, json!({"error": "boom"})),
        Reply::Raw(200, "not json at all"),
    ]);
    backup
        .script
        .lock()
        .replies
        .push_back(Reply::Json(200, completion("from backup")));
    let t = Instant::now();
    let c = llm.send(complete(request("hi"), false)).await.unwrap().unwrap();
    assert_eq!(
        (c.source.as_str(), c.response.content.as_str()),
        ("backup", "from backup")
    );
    assert!(t.elapsed() >= Duration::from_secs(2), "2 s between the two attempts");
    let status = llm.send(GetLlmStatus).await.unwrap();
    let p = status.sources.iter().find(|s| s.config.name == "primary").unwrap();
    assert!(
        !p.available && p.failures == 1 && p.paused_for_s > 20,
        "paused ~30 s: {p:?}"
    );
    assert!(
        p.last_error.as_deref().unwrap().contains("does not match")
            || p.last_error.as_deref().unwrap().contains("not json")
    );

    // A 401 on the backup: no retry, disabled until its key changes.
    backup
        .script
        .lock()
        .replies
        .push_back(Reply::Json(401, json!({"error": {"message": "bad key"}})));
    let err = llm.send(complete(request("hi"), false)).await.unwrap().unwrap_err();
    assert!(matches!(&err, LlmError::AllFailed(m) if m.contains("401")), "{err}");
    assert_eq!(backup.script.lock().seen.len(), 2, "a 401 is not retried");
    let err = llm.send(complete(request("hi"), false)).await.unwrap().unwrap_err();
    assert!(matches!(err, LlmError::AllPaused { .. }), "{err}");
    s.insert("core.llm.sources.backup.api_key".into(), json!("sk-new"));
    llm.send(Configure(s)).await.unwrap();
    backup
        .script
        .lock()
        .replies
        .push_back(Reply::Json(200, completion("new key works")));
    let c = llm.send(complete(request("hi"), false)).await.unwrap().unwrap();
    assert_eq!(c.response.content, "new key works");
}

#[actix_rt::test]
async fn cancellation_stops_the_call_at_once() {
    let f = fake();
    let llm = llm().await;
    let mut s = BTreeMap::new();
    source(&mut s, "a", &f.url, "sk", 0);
    llm.send(Configure(s)).await.unwrap();
    f.script.lock().replies.push_back(Reply::Slow(Duration::from_secs(5)));
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    actix_web::rt::spawn(async move {
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
        c2.cancel();
    });
    let t = Instant::now();
    let msg = Complete {
        purpose: Default::default(),
        request: request("hi"),
        stream: false,
        deltas: None,
        cancel,
    };
    let err = llm.send(msg).await.unwrap().unwrap_err();
    assert_eq!(err, LlmError::Cancelled);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "cancelled before the vendor's 5 s answer"
    );
    let status = llm.send(GetLlmStatus).await.unwrap();
    assert!(
        status.sources[0].available,
        "a cancellation does not count against the source"
    );
}
