//! The OpenAI-compatible API: `POST /v1/chat/completions` and `GET /v1/models`, so
//! that any OpenAI client (the official SDKs, chat front-ends) can talk to the agent.
//!
//! The agent is one model, `homeagent`, with its own memory: a request is not a
//! stateless completion over the messages it carries. The **last `user` message** is
//! the agent's input (source `openai`, answered on the synchronous `http` channel);
//! everything else the client sends is not replayed into the turn, because the agent
//! already has the conversation in its context window and documents, and its own
//! system prompt. The mapping (see docs/DECISIONS.md):
//!
//! * `system`, `developer`, `assistant` and `tool` messages, and earlier `user`
//!   messages: ignored (counted in the log).
//! * `model`: any name is accepted; the answer says `homeagent`.
//! * `temperature`, `top_p`, `max_tokens`, `seed`, `response_format`, …: ignored — the
//!   LLM sources' own settings apply.
//! * `n` > 1: refused (400): every choice would be a separate turn of the agent,
//!   each remembered.
//! * `tools` / `functions` from the client: refused (400) when non-empty; the agent
//!   runs its own tools, and never returns `tool_calls` to the client (its tool calls
//!   are its own business, seen in `GET /api/v1/events`).
//! * `stream: true`: the vendor's tokens as they come, from the turn's `stream_delta`
//!   bus events; text the model writes before one of its own tool calls is streamed
//!   too, followed by a blank line before the next round's text. The final chunk has
//!   `finish_reason: "stop"`, then `data: [DONE]`.
//! * Errors come in OpenAI's shape `{"error": {"message", "type", "param", "code"}}`.
//!
//! The owner token is the API key (`Authorization: Bearer …`, the gate of
//! [`super::guard`]); Host, Origin and Content-Type rules are the same as `/api/v1`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use actix_web_lab::sse::{self, Sse};
use homeagent_actors::agent::input::{Input, Reply, ReplyTo, new_request_id};
use homeagent_actors::agent::intake::Inject;
use homeagent_actors::bus::KernelEvent;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::AppState;
use super::agent::{DEFAULT_TIMEOUT, ensure_llm, refused, wait_reply};
use super::error::ApiError;

/// The one model this API serves.
pub const MODEL: &str = "homeagent";
/// The source of inputs that come through this API.
const SOURCE: &str = "openai";

/// An error in OpenAI's JSON shape.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct OpenAiError {
    pub status: StatusCode,
    pub message: String,
    /// `param` of the error: which request field is wrong.
    pub param: Option<&'static str>,
    /// `code` of the error (`model_not_found`, `invalid_api_key`, …).
    pub code: Option<&'static str>,
}

impl OpenAiError {
    fn invalid(message: impl Into<String>, param: &'static str) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            param: Some(param),
            code: None,
        }
    }

    /// OpenAI's `type` for a status.
    fn kind(status: StatusCode) -> &'static str {
        match status.as_u16() {
            400 | 404 | 409 | 413 | 415 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            _ => "api_error",
        }
    }

    /// The body: `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(status: StatusCode, message: &str, param: Option<&str>, code: Option<&str>) -> Value {
        json!({"error": {"message": message, "type": Self::kind(status), "param": param, "code": code}})
    }
}

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        Self {
            status: e.status,
            message: e.message,
            param: None,
            code: None,
        }
    }
}

impl ResponseError for OpenAiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }
    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(Self::body(self.status, &self.message, self.param, self.code))
    }
}

/// One message of the request (only the fields the mapping reads; the rest is
/// accepted and ignored, as clients send many).
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Value,
}

/// `stream_options` of the request.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// The body of `POST /v1/chat/completions` (unknown fields are accepted and ignored).
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub n: Option<u64>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub functions: Option<Vec<Value>>,
}

/// The text of a message's `content`: a string, or the `text` parts of an array.
fn text_of(content: &Value) -> Result<String, OpenAiError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for p in parts {
                match (p["type"].as_str(), p["text"].as_str()) {
                    (Some("text"), Some(t)) => out.push(t),
                    (kind, _) => {
                        return Err(OpenAiError::invalid(
                            format!(
                                "content part of type `{}` is not supported; send the message as text",
                                kind.unwrap_or("?")
                            ),
                            "messages",
                        ));
                    }
                }
            }
            Ok(out.join("\n"))
        }
        Value::Null => Ok(String::new()),
        _ => Err(OpenAiError::invalid(
            "a message's content must be a string or an array of text parts",
            "messages",
        )),
    }
}

/// The agent's input of a request: the text of its last `user` message, after the
/// checks of the mapping (see the module doc).
pub fn input_of(req: &ChatRequest) -> Result<String, OpenAiError> {
    if req.n.is_some_and(|n| n > 1) {
        return Err(OpenAiError::invalid(
            "n > 1 is not supported: the agent gives one reply per message (every choice would be a separate, remembered turn)",
            "n",
        ));
    }
    if req.tools.as_ref().is_some_and(|t| !t.is_empty()) || req.functions.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(OpenAiError::invalid(
            "client-side tools are not supported: HomeAgent runs its own tools; send the request without `tools`",
            "tools",
        ));
    }
    let Some(last) = req.messages.iter().rev().find(|m| m.role == "user") else {
        return Err(OpenAiError::invalid(
            "no `user` message: the last user message is the agent's input",
            "messages",
        ));
    };
    let text = text_of(&last.content)?;
    if text.trim().is_empty() {
        return Err(OpenAiError::invalid("the last user message is empty", "messages"));
    }
    Ok(text)
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn usage_json(r: &Reply) -> Value {
    json!({
        "prompt_tokens": r.usage.prompt_tokens,
        "completion_tokens": r.usage.completion_tokens,
        "total_tokens": r.usage.total_tokens,
    })
}

/// The agent's failure as an OpenAI error: 502 when the vendors behind it failed, 429
/// `insufficient_quota` when the owner's budget refused the call (as OpenAI answers a
/// spent quota).
fn failed(error: &str, over_budget: bool) -> OpenAiError {
    OpenAiError {
        status: if over_budget {
            StatusCode::TOO_MANY_REQUESTS
        } else {
            StatusCode::BAD_GATEWAY
        },
        message: error.to_owned(),
        param: None,
        code: over_budget.then_some("insufficient_quota"),
    }
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    http: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<ChatRequest>,
) -> Result<HttpResponse, OpenAiError> {
    let req = body.into_inner();
    let text = input_of(&req)?;
    let ignored = req.messages.len() - 1;
    tracing::info!(
        model = req.model.as_deref().unwrap_or(""),
        stream = req.stream,
        ignored,
        "OpenAI-compatible request: the last user message is the input"
    );
    ensure_llm(&state).await?;
    let mut input = Input::text(SOURCE, &text);
    input.channel = "http".into();
    input.request_id = new_request_id();
    let id = format!("chatcmpl-{}", input.request_id);
    let (reply, rx) = ReplyTo::channel(&input.request_id);
    input.reply = reply;
    // Subscribed before the input is queued, so no delta of its task is missed.
    let bus = req.stream.then(|| state.bus.subscribe());
    let accepted = state
        .agent
        .event_loop
        .send(Inject(input))
        .await
        .map_err(ApiError::from)?
        .map_err(refused)?;
    let task_id = accepted.task_id;
    if let Some(bus) = bus {
        let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
        return Ok(stream(&http, id, task_id, bus, rx, include_usage));
    }
    let reply = wait_reply(rx, DEFAULT_TIMEOUT, task_id.unwrap_or_default()).await?;
    if let Some(reason) = reply.skipped {
        return Err(refused(reason).into());
    }
    if let Some(err) = &reply.error {
        return Err(failed(err, reply.over_budget));
    }
    Ok(HttpResponse::Ok().json(json!({
        "id": id,
        "object": "chat.completion",
        "created": now_s(),
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": reply.content, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": usage_json(&reply),
    })))
}

/// Builds `chat.completion.chunk`s of one response.
struct Chunks {
    id: String,
    created: u64,
}

impl Chunks {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> sse::Event {
        self.event(json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        }))
    }

    fn usage(&self, reply: &Reply) -> sse::Event {
        self.event(json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": MODEL,
            "choices": [],
            "usage": usage_json(reply),
        }))
    }

    fn event(&self, v: Value) -> sse::Event {
        sse::Data::new(v.to_string()).into()
    }
}

/// The SSE answer of a `stream: true` request: the task's deltas as chunks until its
/// reply, then the rest of the reply (what did not stream: a stop text, or everything
/// when the input waited on disk without a task id), the final chunk and `[DONE]`.
fn stream(
    http: &HttpRequest,
    id: String,
    task_id: Option<u64>,
    mut bus: broadcast::Receiver<std::sync::Arc<KernelEvent>>,
    rx: tokio::sync::oneshot::Receiver<Reply>,
    include_usage: bool,
) -> HttpResponse {
    let (tx, out) = tokio::sync::mpsc::channel::<sse::Event>(64);
    let chunks = Chunks { id, created: now_s() };
    actix_web::rt::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        let _ = tx
            .send(chunks.chunk(json!({"role": "assistant", "content": ""}), None))
            .await;
        let mut turn = crate::turn_stream::TurnStream::new(task_id.unwrap_or_default());
        let deadline = tokio::time::sleep(DEFAULT_TIMEOUT);
        tokio::pin!(deadline, rx);
        // What one bus event adds to the stream (its text; tool calls are not part of
        // a chat completion's content); `false` when the client went away.
        let on_event = async |ev: &KernelEvent, turn: &mut crate::turn_stream::TurnStream| -> bool {
            match turn.next(ev) {
                Some(crate::turn_stream::Piece::Text(t)) => {
                    tx.send(chunks.chunk(json!({"content": t}), None)).await.is_ok()
                }
                _ => true,
            }
        };
        // `biased`: deltas already on the bus go out before the reply is taken, and
        // those still queued when it comes are drained first, so a client streams the
        // text as it came instead of getting it as one remainder (tokio's select
        // picks among ready branches at random otherwise).
        let reply = loop {
            tokio::select! {
                biased;
                () = &mut deadline => break None,
                ev = bus.recv(), if task_id.is_some() => match ev {
                    Ok(ev) => if !on_event(&ev, &mut turn).await {
                        return; // the client went away; the task goes on
                    },
                    Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "OpenAI stream lagged behind the bus"),
                    Err(RecvError::Closed) => {}
                },
                r = &mut rx => {
                    while task_id.is_some() && let Ok(ev) = bus.try_recv() {
                        if !on_event(&ev, &mut turn).await {
                            return;
                        }
                    }
                    break r.ok();
                }
            }
        };
        let Some(reply) = reply else {
            let msg = format!(
                "no reply within {} s; the task goes on (watch GET /api/v1/events)",
                DEFAULT_TIMEOUT.as_secs()
            );
            let _ = tx
                .send(chunks.event(OpenAiError::body(StatusCode::GATEWAY_TIMEOUT, &msg, None, None)))
                .await;
            return;
        };
        if let Some(err) = reply
            .error
            .clone()
            .or_else(|| reply.skipped.clone().map(|s| refused(s).message))
        {
            let _ = tx
                .send(chunks.event(OpenAiError::body(StatusCode::BAD_GATEWAY, &err, None, None)))
                .await;
            return;
        }
        let rest = turn.rest(&reply.content);
        if !rest.is_empty() {
            let _ = tx.send(chunks.chunk(json!({"content": rest}), None)).await;
        }
        let _ = tx.send(chunks.chunk(json!({}), Some("stop"))).await;
        if include_usage {
            let _ = tx.send(chunks.usage(&reply)).await;
        }
        let _ = tx.send(sse::Data::new("[DONE]").into()).await;
    });
    use actix_web::Responder;
    Sse::from_infallible_receiver(out)
        .with_keep_alive(Duration::from_secs(15))
        .customize()
        .insert_header(("cache-control", "no-store"))
        .respond_to(http)
        .map_into_boxed_body()
}

/// `GET /v1/models`: the agent as the one model.
pub async fn models() -> HttpResponse {
    HttpResponse::Ok().json(json!({"object": "list", "data": [model_json()]}))
}

fn model_json() -> Value {
    json!({"id": MODEL, "object": "model", "created": 0, "owned_by": "homeagent"})
}

/// `GET /v1/models/{id}`.
pub async fn model(id: web::Path<String>) -> Result<HttpResponse, OpenAiError> {
    if id.as_str() == MODEL {
        return Ok(HttpResponse::Ok().json(model_json()));
    }
    Err(OpenAiError {
        status: StatusCode::NOT_FOUND,
        message: format!("the model `{id}` does not exist; this daemon serves `{MODEL}`"),
        param: Some("model"),
        code: Some("model_not_found"),
    })
}

/// Any other path under `/v1`.
pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, OpenAiError> {
    Err(OpenAiError {
        status: StatusCode::NOT_FOUND,
        message: format!(
            "{} {} is not part of this OpenAI-compatible API; it serves POST /v1/chat/completions and GET /v1/models",
            req.method(),
            req.path()
        ),
        param: None,
        code: None,
    })
}

/// The `/v1` scope with its own JSON error shape.
pub fn scope() -> actix_web::Scope {
    use actix_web::error::{InternalError, JsonPayloadError};
    let json = web::JsonConfig::default()
        .limit(super::MAX_OPENAI_BODY)
        .error_handler(|err, _req: &HttpRequest| {
            let (status, msg) = match &err {
                JsonPayloadError::OverflowKnownLength { .. } | JsonPayloadError::Overflow { .. } => (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "request body too large: the limit is {} bytes (only the last user message is used; send less history)",
                        super::MAX_OPENAI_BODY
                    ),
                ),
                JsonPayloadError::ContentType => (
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send the body as JSON with `Content-Type: application/json`".to_owned(),
                ),
                other => (
                    StatusCode::BAD_REQUEST,
                    format!("invalid JSON body: {other}; send a chat completion request: {{\"messages\": [{{\"role\": \"user\", \"content\": \"…\"}}]}}"),
                ),
            };
            let body = OpenAiError::body(status, &msg, None, None);
            InternalError::from_response(msg, HttpResponse::build(status).json(body)).into()
        });
    web::scope("/v1")
        .app_data(json)
        .route("/chat/completions", web::post().to(chat_completions))
        .route("/models", web::get().to(models))
        .route("/models/{id}", web::get().to(model))
        .default_service(web::to(not_found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> ChatRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_last_user_message_is_the_input_and_the_rest_is_ignored() {
        let r = req(json!({"model": "gpt-4o", "temperature": 0.2, "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "text", "text": "part"}]},
            {"role": "assistant", "content": null},
        ]}));
        assert_eq!(input_of(&r).unwrap(), "second\npart");
    }

    #[test]
    fn what_the_agent_cannot_honour_is_refused_with_the_field() {
        let cases = [
            (json!({"messages": [{"role": "user", "content": "hi"}], "n": 2}), "n"),
            (
                json!({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}),
                "tools",
            ),
            (json!({"messages": [{"role": "system", "content": "hi"}]}), "messages"),
            (json!({"messages": [{"role": "user", "content": "  "}]}), "messages"),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
                "messages",
            ),
            (json!({"messages": [{"role": "user", "content": 5}]}), "messages"),
        ];
        for (body, param) in cases {
            let e = input_of(&req(body.clone())).unwrap_err();
            assert_eq!((e.status, e.param), (StatusCode::BAD_REQUEST, Some(param)), "{body}");
            assert!(!e.message.is_empty());
        }
        let ok = req(json!({"messages": [{"role": "user", "content": "hi"}], "n": 1, "tools": []}));
        assert_eq!(input_of(&ok).unwrap(), "hi");
    }

    #[test]
    fn errors_have_openais_shape() {
        let b = OpenAiError::body(StatusCode::UNAUTHORIZED, "no", None, Some("invalid_api_key"));
        assert_eq!(
            b,
            json!({"error": {"message": "no", "type": "authentication_error", "param": null, "code": "invalid_api_key"}})
        );
        assert_eq!(OpenAiError::kind(StatusCode::BAD_GATEWAY), "api_error");
    }
}
