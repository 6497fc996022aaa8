//! A fake LLM vendor on 127.0.0.1 speaking the OpenAI Chat Completions wire format
//! (JSON, and SSE when the request asks to stream). Its behaviour is chosen by the
//! text of the last input message, so every test scenario is deterministic:
//!
//! * `slow <ms> ...` — waits that long, then answers `slow done: ...`;
//! * `trickle <ms> w1 w2 ...` — streams the words one delta each, `<ms>` apart (a
//!   long answer a person watches being written, and may stop half-way);
//! * `call-tool NAME ARGS` — calls one tool, then answers `tool said: RESULT`;
//! * `call-tools [{"tool", "args"}, ...]` — calls them one per answer, then answers
//!   `tools said: R1 | R2 | ...`;
//! * `call-help` — calls `output_send__http_help`; after the tool result it answers
//!   `done after tool`;
//! * `fail` — answers HTTP 500;
//! * `too-long` — answers HTTP 400 `context_length_exceeded` (OpenAI's wording);
//! * anything else — answers `echo: <text>`.
//!
//! A chat bridge's `[QQ …] ` header before the words is read past (as a model would).
//!
//! It also serves OpenAI `POST /v1/embeddings` (deterministic 8-dimensional vectors)
//! for the remote-embedder tests.
//!
//! [`raw`] is a second double on a bare `TcpListener` for what a server framework will
//! not do on purpose: close-delimited and HTTP/1.0 bodies, cut-off streams, hangs.

#![allow(dead_code)]

/// A vendor double writing exact HTTP/1.x bytes (framings, cut streams, hangs).
pub mod raw;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use homeagent_actors::i18n::{Lang, Msg};
use serde_json::{Value, json};

pub struct Vendor {
    pub url: String,
    pub calls: Arc<AtomicUsize>,
    /// When set, every request answers HTTP 500.
    pub failing: Arc<std::sync::atomic::AtomicBool>,
    /// The body of the last chat request.
    pub last: Arc<std::sync::Mutex<Value>>,
    /// Requests served by `/v1/embeddings`.
    pub embeddings: Arc<AtomicUsize>,
    /// The body of every chat request, oldest first.
    pub all: Arc<std::sync::Mutex<Vec<Value>>>,
    /// When each chat request arrived and was answered, with its last input's text, in
    /// the order they happened: what overlapped is read from these, never from a
    /// wall-clock bound.
    pub stamps: Arc<std::sync::Mutex<Vec<Stamp>>>,
}

/// One moment of the chat handler's life.
#[derive(Debug, Clone)]
pub struct Stamp {
    /// The last input's text of the request.
    pub text: String,
    /// `false`: the request arrived; `true`: its answer left.
    pub answered: bool,
    pub at: std::time::Instant,
}

#[derive(Clone)]
struct Stamps(Arc<std::sync::Mutex<Vec<Stamp>>>);

impl Stamps {
    fn push(&self, text: &str, answered: bool) {
        self.0.lock().unwrap().push(Stamp {
            text: text.to_owned(),
            answered,
            at: std::time::Instant::now(),
        });
    }
}

/// Where the chat handler records every request body.
#[derive(Clone)]
struct AllRequests(Arc<std::sync::Mutex<Vec<Value>>>);

impl Vendor {
    /// How many `/v1/embeddings` requests were answered.
    pub fn embedding_calls(&self) -> usize {
        self.embeddings.load(Ordering::SeqCst)
    }
}

/// The kernel's continuation placeholders, in any language.
fn is_placeholder(text: &str) -> bool {
    Msg::ContinueAfterTools.is(text) || Msg::ContinueAfterSend.is(text)
}

fn last_input(messages: &[Value]) -> (String, bool) {
    // (text of the last user/interrupt input, whether a tool result follows it)
    let mut tool_after = false;
    for m in messages.iter().rev() {
        let role = m["role"].as_str().unwrap_or("");
        let content = m["content"].as_str().unwrap_or("");
        if role == "tool" {
            tool_after = true;
        }
        if role == "user" && !is_placeholder(content) {
            return (read_past_bridge_header(content).to_owned(), tool_after);
        }
        if role == "system"
            && let Some(text) = Lang::ALL
                .iter()
                .find_map(|l| content.strip_prefix(Msg::InterruptMark.render(*l).as_str()))
        {
            return (text.to_owned(), tool_after);
        }
    }
    (String::new(), tool_after)
}

/// A chat bridge's header (`[QQ group 777 · Alice (20002)] `) is read past, as a
/// model reads past it to the words: the scripts decide by what the person wrote.
fn read_past_bridge_header(text: &str) -> &str {
    if text.starts_with("[QQ ")
        && let Some(end) = text.find("] ")
    {
        return &text[end + 2..];
    }
    text
}

/// A streamed call of `name` with `args` (a JSON string).
fn answer_tool(stream: bool, name: &str, args: &str) -> HttpResponse {
    answer_tool_id(stream, "call_t", name, args)
}

/// [`answer_tool`] with the call's id.
fn answer_tool_id(stream: bool, id: &str, name: &str, args: &str) -> HttpResponse {
    if !stream {
        return HttpResponse::Ok().json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args}}]}, "finish_reason": "tool_calls"}]
        }));
    }
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ];
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    HttpResponse::Ok().content_type("text/event-stream").body(body)
}

fn answer(stream: bool, text: &str, tool: Option<&str>) -> HttpResponse {
    if !stream {
        let message = match tool {
            Some(name) => {
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}]})
            }
            None => json!({"role": "assistant", "content": text}),
        };
        return HttpResponse::Ok().json(json!({
            "id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": if tool.is_some() { "tool_calls" } else { "stop" }}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }));
    }
    let mut chunks = Vec::new();
    match tool {
        Some(name) => {
            chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}]}));
            chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, "finish_reason": null}]}));
            chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
        }
        None => {
            let mid = text
                .char_indices()
                .nth(text.chars().count() / 2)
                .map_or(text.len(), |(i, _)| i);
            let (a, b) = text.split_at(mid);
            chunks.push(
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": a}, "finish_reason": null}]}),
            );
            chunks.push(json!({"choices": [{"index": 0, "delta": {"content": b}, "finish_reason": null}]}));
            chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
        }
    }
    chunks.push(json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}));
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    HttpResponse::Ok().content_type("text/event-stream").body(body)
}

async fn chat(
    _req: HttpRequest,
    body: web::Json<Value>,
    calls: web::Data<Arc<AtomicUsize>>,
    failing: web::Data<Arc<std::sync::atomic::AtomicBool>>,
    last: web::Data<Arc<std::sync::Mutex<Value>>>,
    all: web::Data<AllRequests>,
    stamps: web::Data<Stamps>,
) -> HttpResponse {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let text = last_input(&messages).0;
    stamps.push(&text, false);
    let answer = chat_answer(body, calls, failing, last, all).await;
    stamps.push(&text, true);
    answer
}

async fn chat_answer(
    body: web::Json<Value>,
    calls: web::Data<Arc<AtomicUsize>>,
    failing: web::Data<Arc<std::sync::atomic::AtomicBool>>,
    last: web::Data<Arc<std::sync::Mutex<Value>>>,
    all: web::Data<AllRequests>,
) -> HttpResponse {
    calls.fetch_add(1, Ordering::SeqCst);
    *last.lock().unwrap() = body.0.clone();
    all.0.lock().unwrap().push(body.0.clone());
    if failing.load(Ordering::SeqCst) {
        return HttpResponse::InternalServerError().json(json!({"error": {"message": "vendor down"}}));
    }
    let stream = body["stream"].as_bool().unwrap_or(false);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let (text, tool_after) = last_input(&messages);
    if text == "fail" {
        return HttpResponse::InternalServerError().json(json!({"error": {"message": "scripted failure"}}));
    }
    if text == "too-long" {
        return HttpResponse::BadRequest().json(json!({"error": {
            "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            "type": "invalid_request_error", "code": "context_length_exceeded"}}));
    }
    if let Some(rest) = text.strip_prefix("trickle ")
        && stream
    {
        let (ms, words) = rest.split_once(' ').unwrap_or((rest, ""));
        let gap = Duration::from_millis(ms.parse().unwrap_or(500));
        let words: Vec<String> = words.split_whitespace().map(|w| format!("{w} ")).collect();
        let chunks = futures_util::stream::unfold((0usize, words), move |(i, words)| async move {
            let event = match i.cmp(&words.len()) {
                std::cmp::Ordering::Less => {
                    if i > 0 {
                        actix_web::rt::time::sleep(gap).await;
                    }
                    json!({"choices": [{"index": 0, "delta": {"content": words[i]}, "finish_reason": null}]})
                        .to_string()
                }
                std::cmp::Ordering::Equal => {
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string()
                }
                std::cmp::Ordering::Greater if i == words.len() + 1 => "[DONE]".to_owned(),
                std::cmp::Ordering::Greater => return None,
            };
            Some((
                Ok::<_, std::convert::Infallible>(actix_web::web::Bytes::from(format!("data: {event}\n\n"))),
                (i + 1, words),
            ))
        });
        return HttpResponse::Ok().content_type("text/event-stream").streaming(chunks);
    }
    if let Some(rest) = text.strip_prefix("slow ") {
        let (ms, what) = rest.split_once(' ').unwrap_or((rest, ""));
        actix_web::rt::time::sleep(Duration::from_millis(ms.parse().unwrap_or(1000))).await;
        return answer(stream, &format!("slow done: {what}"), None);
    }
    // `call-tool <name> <json args>`: call that tool, then report its result.
    if let Some(rest) = text.strip_prefix("call-tool ") {
        if tool_after {
            let result = messages
                .iter()
                .rev()
                .find(|m| m["role"] == "tool")
                .and_then(|m| m["content"].as_str())
                .unwrap_or("");
            return answer(stream, &format!("tool said: {result}"), None);
        }
        let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
        return answer_tool(stream, name, args);
    }
    // `call-tools [{"tool", "args"}, ...]`: one tool per model answer, in order (the
    // turn's tool loop), then `tools said: R1 | R2 | ...`.
    if let Some(rest) = text.strip_prefix("call-tools ") {
        let steps: Vec<Value> = serde_json::from_str(rest).unwrap_or_default();
        let results: Vec<&str> = messages
            .iter()
            .rev()
            .take_while(|m| !(m["role"] == "user" && m["content"].as_str() == Some(text.as_str())))
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| m["content"].as_str())
            .collect();
        if let Some(step) = steps.get(results.len()) {
            let id = format!("call_{}", results.len());
            let tool = step["tool"].as_str().unwrap_or("");
            return answer_tool_id(stream, &id, tool, &step["args"].to_string());
        }
        let said: Vec<&str> = results.into_iter().rev().collect();
        return answer(stream, &format!("tools said: {}", said.join(" | ")), None);
    }
    if text == "call-help" {
        if tool_after {
            return answer(stream, "done after tool", None);
        }
        return answer(stream, "", Some("output_send__http_help"));
    }
    answer(stream, &format!("echo: {text}"), None)
}

/// The same behaviours in the Anthropic Messages wire format (`POST /v1/messages`,
/// `x-api-key` auth, SSE events `message_start` … `message_stop`).
async fn messages(req: HttpRequest, body: web::Json<Value>, calls: web::Data<Arc<AtomicUsize>>) -> HttpResponse {
    calls.fetch_add(1, Ordering::SeqCst);
    if req.headers().get("x-api-key").is_none() || req.headers().get("anthropic-version").is_none() {
        return HttpResponse::Unauthorized()
            .json(json!({"type": "error", "error": {"type": "authentication_error", "message": "missing x-api-key"}}));
    }
    let stream = body["stream"].as_bool().unwrap_or(false);
    let mut text = String::new();
    let mut tool_after = false;
    for m in body["messages"].as_array().cloned().unwrap_or_default().iter().rev() {
        if m["role"] != "user" {
            continue;
        }
        let blocks = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => vec![],
        };
        if blocks.iter().any(|b| b["type"] == "tool_result") {
            tool_after = true;
        }
        let texts: Vec<_> = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .filter(|t| !is_placeholder(t))
            .collect();
        if let Some(t) = texts.last() {
            text = (*t).to_owned();
            break;
        }
    }
    let (reply, tool) = if text == "call-help" && !tool_after {
        (String::new(), Some("output_send__http_help"))
    } else if text == "call-help" {
        ("done after tool".to_owned(), None)
    } else {
        (format!("echo: {text}"), None)
    };
    if !stream {
        let content = match tool {
            Some(name) => json!([{"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}]),
            None => json!([{"type": "text", "text": reply}]),
        };
        return HttpResponse::Ok().json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-fake", "content": content,
            "stop_reason": if tool.is_some() { "tool_use" } else { "end_turn" }, "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 4}
        }));
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-fake", "stop_reason": null, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
    )];
    events.push(("ping", json!({"type": "ping"})));
    match tool {
        Some(name) => {
            events.push(("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}})));
            events.push(("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}})));
        }
        None => {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            let mid = reply
                .char_indices()
                .nth(reply.chars().count() / 2)
                .map_or(reply.len(), |(i, _)| i);
            let (a, b) = reply.split_at(mid);
            for part in [a, b] {
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}}),
                ));
            }
        }
    }
    events.push(("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    events.push(("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": if tool.is_some() { "tool_use" } else { "end_turn" }, "stop_sequence": null}, "usage": {"output_tokens": 4}})));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let mut out = String::new();
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    HttpResponse::Ok().content_type("text/event-stream").body(out)
}

/// The `/v1/embeddings` request counter (its own type: the chat counter is also an
/// `Arc<AtomicUsize>` in the app data).
struct EmbeddingCalls(Arc<AtomicUsize>);

/// Dimension of the fake embeddings.
pub const EMBED_DIM: usize = 8;

/// OpenAI `POST /v1/embeddings`: a deterministic vector per text (its characters
/// hashed into `EMBED_DIM` buckets), so equal texts get equal vectors.
async fn embeddings(
    body: web::Json<Value>,
    failing: web::Data<Arc<std::sync::atomic::AtomicBool>>,
    served: web::Data<EmbeddingCalls>,
) -> HttpResponse {
    served.0.fetch_add(1, Ordering::SeqCst);
    if failing.load(Ordering::SeqCst) {
        return HttpResponse::InternalServerError().json(json!({"error": {"message": "embedding backend down"}}));
    }
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|v| v.as_str().unwrap_or("").to_owned()).collect(),
        _ => {
            return HttpResponse::BadRequest()
                .json(json!({"error": {"message": "input must be a string or an array"}}));
        }
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut v = [0.0f32; EMBED_DIM];
            for c in t.chars() {
                v[(c as usize) % EMBED_DIM] += 1.0;
            }
            v[0] += 0.5;
            json!({"object": "embedding", "index": i, "embedding": v.to_vec()})
        })
        .collect();
    HttpResponse::Ok().json(json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 0, "total_tokens": 0}}))
}

/// Starts the fake on its own thread; it lives until the test process ends.
/// The text of each message of a chat request the vendor received, in order (messages
/// whose content is not a string, such as image parts, are left out).
pub fn texts(req: &Value) -> Vec<String> {
    req["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter_map(|m| m["content"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub fn start() -> Vendor {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f = failing.clone();
    let last = Arc::new(std::sync::Mutex::new(Value::Null));
    let l = last.clone();
    let embed_calls = Arc::new(AtomicUsize::new(0));
    let em = embed_calls.clone();
    let all = Arc::new(std::sync::Mutex::new(Vec::new()));
    let every = web::Data::new(AllRequests(all.clone()));
    let stamps = Arc::new(std::sync::Mutex::new(Vec::new()));
    let st = web::Data::new(Stamps(stamps.clone()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let data = web::Data::new(c);
            let fail = web::Data::new(f);
            let last = web::Data::new(l);
            let em = web::Data::new(EmbeddingCalls(em));
            let server = HttpServer::new(move || {
                App::new()
                    .app_data(em.clone())
                    .app_data(data.clone())
                    .app_data(fail.clone())
                    .app_data(last.clone())
                    .app_data(every.clone())
                    .app_data(st.clone())
                    .route("/v1/chat/completions", web::post().to(chat))
                    .route("/v1/messages", web::post().to(messages))
                    .route("/v1/embeddings", web::post().to(embeddings))
            })
            .workers(1)
            .disable_signals()
            .bind("127.0.0.1:0")
            .unwrap();
            tx.send(server.addrs()[0]).unwrap();
            server.run().await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    Vendor {
        url: format!("http://{addr}/v1"),
        calls,
        failing,
        last,
        embeddings: embed_calls,
        all,
        stamps,
    }
}

impl Vendor {
    /// The base URL for the Anthropic adapter (which appends `/v1/messages`).
    pub fn anthropic_base(&self) -> String {
        self.url.trim_end_matches("/v1").to_owned()
    }
}

/// Settings that make `name` an OpenAI-adapter source pointing at `url`.
///
/// With a 128k `context_window`, as today's vendor models have: every tool is offered
/// and the tests see the whole tool list. The tests of small windows set 8192 (the
/// default for an unknown model) themselves: `tests/recall.rs`, the memory index in
/// `tests/agent.rs`.
pub fn source_settings(name: &str, url: &str, priority: i64) -> Value {
    let p = format!("core.llm.sources.{name}.");
    json!({
        format!("{p}base_url"): url,
        format!("{p}model"): "fake-model",
        format!("{p}adapter"): "openai",
        format!("{p}api_key"): "sk-test",
        format!("{p}priority"): priority,
        format!("{p}context_window"): 131072,
    })
}

/// Settings for an Anthropic-adapter source.
pub fn anthropic_settings(name: &str, base: &str) -> Value {
    let p = format!("core.llm.sources.{name}.");
    json!({
        format!("{p}base_url"): base,
        format!("{p}model"): "claude-fake",
        format!("{p}adapter"): "anthropic",
        format!("{p}api_key"): "sk-ant-test",
    })
}
