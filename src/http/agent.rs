//! The agent's endpoints: send a message (JSON or multipart), stop, inspect the tasks, start a new chat.

use std::time::Duration;

use actix_web::{HttpResponse, web};
use homeagent_actors::agent::input::{Input, Refusal, Reply, ReplyTo, new_request_id};
use homeagent_actors::agent::intake::{Inject, InjectInterrupt};
use homeagent_actors::agent::scheduler::GetTasks;
use homeagent_actors::llm::provider::GetLlmStatus;
use homeagent_actors::llm::source::no_source_message;
use homeagent_actors::scheduler::Level;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiError, ErrorBody};

/// Longest a synchronous caller waits by default.
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Body of `POST /api/v1/messages`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageRequest {
    /// The message.
    pub text: String,
    /// Who sends it (default `http`); `<plugin>/<device>` forms are accepted.
    #[serde(default)]
    pub source: Option<String>,
    /// Where the reply belongs (default `http`).
    #[serde(default)]
    pub channel: Option<String>,
    /// An interrupt (may preempt the running task) instead of queued input.
    #[serde(default)]
    pub interrupt: bool,
    /// Interrupt level `L1`..`L4` (default L1; sources that are not built in get at most L3).
    #[serde(default)]
    pub priority: Option<String>,
    /// Wait for the reply (default true).
    #[serde(default)]
    pub sync: Option<bool>,
    /// How long to wait for a synchronous reply (default 300000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Images: `[{"mime": "image/png", "data": "<base64>"}]`. Checked before anything
    /// is stored (type from the bytes, size at most
    /// `core.input_processing.image.max_bytes`); each becomes a media block.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub attachments: Vec<homeagent_actors::memory::media::check::Attachment>,
    /// Asked again on purpose (the WebUI's Regenerate): not taken for a re-delivery of
    /// the same text, however soon it follows.
    #[serde(default)]
    pub again: bool,
}

/// A synchronous reply.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MessageReply {
    pub task_id: u64,
    pub reply: String,
    pub tools_used: Vec<String>,
    #[schema(value_type = Object)]
    pub usage: Value,
    /// Tokens of recalled memory (and timeline) the answer's prompt carried.
    pub memory_tokens: usize,
}

pub(super) async fn ensure_llm(state: &AppState) -> Result<(), ApiError> {
    if state.llm_sources.configured() > 0 {
        return Ok(());
    }
    // None configured: the actor says why (each skipped source with its reason).
    let status = state.llm.send(GetLlmStatus).await?;
    if status.sources.is_empty() {
        return Err(ApiError::unavailable(no_source_message(&status.skipped)));
    }
    Ok(())
}

/// The status code of each refusal (the texts are the refusal's own).
pub(super) fn refused(reason: Refusal) -> ApiError {
    let text = reason.to_string();
    match reason {
        Refusal::EmptyInput => ApiError::bad_request(text),
        Refusal::TooLarge { .. } => ApiError::too_large(text),
        Refusal::Duplicate | Refusal::ResidualDropped => ApiError::conflict(text),
        Refusal::QueueFull | Refusal::AgentStopped | Refusal::NotStored(_) | Refusal::Unavailable(_) => {
            ApiError::unavailable(text)
        }
    }
}

#[utoipa::path(
    post, path = "/api/v1/messages", tag = "agent",
    request_body = MessageRequest,
    responses(
        (status = 200, description = "Synchronous reply", body = MessageReply),
        (status = 202, description = "Accepted (sync=false) and stored in DATA/inbox.db before this answer: `{\"task_id\", \"input_id\"}`; `task_id` is null while the input waits on disk for room in the ready queue (256)"),
        (status = 400, body = ErrorBody), (status = 409, description = "Duplicate input", body = ErrorBody),
        (status = 413, description = "`text` is over `core.input_processing.text.max_bytes` (default 256 KiB; the message names the limit): nothing was stored", body = ErrorBody),
        (status = 502, description = "The task failed (LLM errors...)", body = ErrorBody),
        (status = 503, description = "No LLM source configured (the message names the settings to set)", body = ErrorBody),
        (status = 504, description = "No reply within timeout_ms (the task goes on)", body = ErrorBody),
    )
)]
pub async fn post_message(
    state: web::Data<AppState>,
    body: web::Json<MessageRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut req = body.into_inner();
    text_at_edge(&req.text)?;
    let attachments = std::mem::take(&mut req.attachments);
    let images = super::media::check_attachments(&state, &attachments).await?;
    drop(attachments);
    send_message(&state, req, images).await
}

/// The edge's one early answer about a message's text, asked by each route before its
/// images are checked or stored, so a refused text leaves nothing behind (and is
/// answered in the API's own words). The door (`agent::door::admit`) then checks the
/// text as the channel's definition left it, for every way in.
fn text_at_edge(text: &str) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::bad_request(
            "`text` must not be empty: send the message's words in it",
        ));
    }
    Refusal::check_size(text).map_err(refused)
}

/// Runs a message whose images (if any) are checked already: the JSON and the
/// multipart routes end here. The images are stored only once everything else about
/// the message was accepted as far as it can be before the intake.
pub(super) async fn send_message(
    state: &AppState,
    req: MessageRequest,
    images: Vec<homeagent_actors::memory::media::check::Image>,
) -> Result<HttpResponse, ApiError> {
    let priority = req
        .priority
        .as_deref()
        .map(str::parse::<Level>)
        .transpose()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    ensure_llm(state).await?;
    let source = req
        .source
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "http".into());
    let media = super::media::store(state, &source, images).await?;
    let mut input = Input::text(&source, &req.text);
    input.payload.media = media;
    if req.again {
        input.payload.again = Some(input.request_id.clone());
    }
    input.channel = req
        .channel
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "http".into());
    input.request_id = new_request_id();
    let sync = req.sync.unwrap_or(true);
    let rx = if sync {
        let (reply, rx) = ReplyTo::channel(&input.request_id);
        input.reply = reply;
        Some(rx)
    } else {
        None
    };
    let (task_id, input_id) = if req.interrupt {
        let msg = InjectInterrupt {
            input,
            priority: priority.map(|l| Value::String(l.to_string())),
            stop: false,
            clear_queue: false,
        };
        let task = state
            .agent
            .intercept_loop
            .send(msg)
            .await?
            .map_err(refused)?
            .unwrap_or(0);
        (Some(task), None)
    } else {
        let a = state.agent.event_loop.send(Inject(input)).await?.map_err(refused)?;
        (a.task_id, a.input_id)
    };
    let Some(rx) = rx else {
        return Ok(HttpResponse::Accepted().json(json!({ "task_id": task_id, "input_id": input_id })));
    };
    let task_id = task_id.unwrap_or_default();
    let timeout = req.timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis);
    let reply = wait_reply(rx, timeout, task_id).await?;
    if let Some(reason) = reply.skipped {
        return Err(refused(reason));
    }
    if let Some(err) = reply.error {
        // A budget limit is the owner's choice, not a failed vendor: 429, as a vendor
        // whose quota is spent answers.
        let mut res = if reply.over_budget {
            HttpResponse::TooManyRequests()
        } else {
            HttpResponse::BadGateway()
        };
        return Ok(res.json(json!({"task_id": task_id, "error": err})));
    }
    Ok(HttpResponse::Ok().json(MessageReply {
        task_id,
        reply: reply.content,
        tools_used: reply.tools_used,
        usage: serde_json::to_value(reply.usage).unwrap_or_default(),
        memory_tokens: reply.memory_tokens,
    }))
}

/// Waits at most `timeout` for the reply of a synchronous input (task `task_id`, 0
/// while it waits on disk): 502 when the task ended without one, 504 past `timeout`
/// (the task goes on).
pub(super) async fn wait_reply(
    rx: tokio::sync::oneshot::Receiver<Reply>,
    timeout: Duration,
    task_id: u64,
) -> Result<Reply, ApiError> {
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(_)) => Err(ApiError::new(
            actix_web::http::StatusCode::BAD_GATEWAY,
            "the task ended without a reply",
        )),
        Err(_) => Err(ApiError::new(
            actix_web::http::StatusCode::GATEWAY_TIMEOUT,
            format!(
                "no reply within {} ms; task {task_id} goes on (watch GET /api/v1/events)",
                timeout.as_millis()
            ),
        )),
    }
}

/// Body of `POST /api/v1/stop`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Optional remark: handled as an L4 interrupt after the stop.
    #[serde(default)]
    pub text: Option<String>,
    /// Also cancel every input waiting to run (the queue and the inputs stored for
    /// it). Without it a stop ends only the running turn and the queue goes on.
    #[serde(default)]
    pub clear_queue: bool,
}

#[utoipa::path(
    post, path = "/api/v1/stop", tag = "agent",
    request_body(content = StopRequest, description = "Optional; an empty body stops the running turn only, without a remark; `clear_queue: true` cancels the waiting inputs too"),
    responses((status = 200, description = "`{\"stopped\": true, \"cleared_queue\": bool, \"remark_task_id\": n|null}`"))
)]
pub async fn post_stop(
    state: web::Data<AppState>,
    body: Option<web::Json<StopRequest>>,
) -> Result<HttpResponse, ApiError> {
    let StopRequest { text, clear_queue } = body.map(web::Json::into_inner).unwrap_or_default();
    let input = Input::text("http", &text.unwrap_or_default());
    let msg = InjectInterrupt {
        input,
        priority: Some(json!("L4")),
        stop: true,
        clear_queue,
    };
    let remark = state.agent.intercept_loop.send(msg).await?.map_err(refused)?;
    Ok(HttpResponse::Ok().json(json!({"stopped": true, "cleared_queue": clear_queue, "remark_task_id": remark})))
}

#[utoipa::path(get, path = "/api/v1/tasks", tag = "agent",
    responses((status = 200, description = "Running task, immediate slot, ready queue, the four interrupt queues (L1 first), the suspended stack (bottom first) with levels, effective levels, preempt counts and labels (source, channel, start of the text), the counters, and `stored_waiting`: inputs stored in inbox.db until the ready queue has room")))]
pub async fn get_tasks(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    /// The scheduler's snapshot and the stored inputs the intake still holds back.
    #[derive(serde::Serialize)]
    struct Tasks {
        #[serde(flatten)]
        snapshot: homeagent_actors::scheduler::Snapshot,
        /// Asynchronous inputs stored in `inbox.db`, waiting for room in the ready queue.
        stored_waiting: usize,
    }
    let (snapshot, stored) = futures_util::join!(
        state.agent.scheduler.send(GetTasks),
        state
            .agent
            .event_loop
            .send(homeagent_actors::agent::intake::GetStoredWaiting)
    );
    Ok(HttpResponse::Ok().json(Tasks {
        snapshot: snapshot?,
        stored_waiting: stored.unwrap_or(0),
    }))
}

#[utoipa::path(post, path = "/api/v1/chat/new", tag = "agent",
    responses((status = 200, description = "A new conversation: the context window became a document (memory keeps every word; recall finds it), the next prompt's timeline starts empty. `{\"archived\": n}`"),
        (status = 503, description = "the document tier could not store it; the window is unchanged")))]
pub async fn post_new_chat(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let n = state
        .agent
        .deps
        .context
        .send(homeagent_actors::memory::context::actor::ArchiveAll)
        .await??;
    Ok(HttpResponse::Ok().json(json!({ "archived": n })))
}

/// Largest body of `POST /api/v1/messages`: a few images at the largest cap, base64.
pub const MAX_MESSAGE_BODY: usize = 32 * 1024 * 1024;
/// Largest text field of a multipart message (the text, source, ...).
const MAX_FIELD: usize = 256 * 1024;
/// Most parts of a multipart message (its fields and images).
const MAX_PARTS: usize = 32;

/// `POST /api/v1/messages` as `multipart/form-data` (the WebUI's upload, paste and
/// drop): the fields of the JSON body as text parts, each image as a file part.
pub async fn post_message_multipart(
    state: web::Data<AppState>,
    mut form: actix_multipart::Multipart,
) -> Result<HttpResponse, ApiError> {
    let limits = super::media::limits(&state).await?;
    let mut fields = serde_json::Map::new();
    let mut images = Vec::new();
    let mut parts = 0;
    while let Some(field) = futures_util::StreamExt::next(&mut form).await {
        parts += 1;
        if parts > MAX_PARTS {
            return Err(ApiError::bad_request(format!(
                "more than {MAX_PARTS} parts in the form"
            )));
        }
        let mut field = field.map_err(|e| ApiError::bad_request(format!("malformed multipart body: {e}")))?;
        let name = field.name().unwrap_or("").to_owned();
        let is_file = field.content_disposition().and_then(|d| d.get_filename()).is_some()
            || matches!(name.as_str(), "attachment" | "attachments" | "image");
        let declared = field.content_type().map(|m| m.essence_str().to_owned());
        let index = images.len();
        let text_cap = homeagent_actors::config::live::max_text_bytes();
        let cap = match (is_file, name.as_str()) {
            (true, _) => limits.max_bytes,
            (false, "text") => text_cap,
            (false, _) => MAX_FIELD,
        };
        let mut data = Vec::new();
        while let Some(chunk) = futures_util::StreamExt::next(&mut field).await {
            let chunk = chunk.map_err(|e| ApiError::bad_request(format!("malformed multipart body: {e}")))?;
            if data.len() + chunk.len() > cap {
                return Err(if is_file {
                    super::media::refused(homeagent_actors::memory::media::check::MediaError::TooLarge {
                        index,
                        size: data.len() + chunk.len(),
                        limit: cap,
                    })
                } else if name == "text" {
                    ApiError::too_large(format!(
                        "the message is over the limit of {text_cap} bytes (core.input_processing.text.max_bytes); send it in parts, save it as a knowledge document, or raise the setting"
                    ))
                } else {
                    ApiError::bad_request(format!("field `{name}` is over {MAX_FIELD} bytes"))
                });
            }
            data.extend_from_slice(&chunk);
        }
        if is_file {
            if images.len() >= limits.max_count {
                return Err(super::media::refused(
                    homeagent_actors::memory::media::check::MediaError::TooMany {
                        count: images.len() + 1,
                        limit: limits.max_count,
                    },
                ));
            }
            images.push(
                homeagent_actors::memory::media::check::check(index, declared.as_deref(), data, &limits)
                    .map_err(super::media::refused)?,
            );
        } else {
            let text = String::from_utf8(data)
                .map_err(|_| ApiError::bad_request(format!("field `{name}` is not UTF-8 text")))?;
            let value = match name.as_str() {
                "sync" | "interrupt" => json!(matches!(text.trim(), "true" | "1" | "on")),
                "timeout_ms" => json!(
                    text.trim()
                        .parse::<u64>()
                        .map_err(|_| ApiError::bad_request("`timeout_ms` must be a number"))?
                ),
                _ => json!(text),
            };
            fields.insert(name, value);
        }
    }
    let req: MessageRequest = serde_json::from_value(serde_json::Value::Object(fields))
        .map_err(|e| ApiError::bad_request(format!("invalid message form: {e}")))?;
    text_at_edge(&req.text)?;
    send_message(&state, req, images).await
}

/// Whether a request is multipart (the route guard of [`post_message_multipart`]).
pub fn is_multipart(ctx: &actix_web::guard::GuardContext<'_>) -> bool {
    ctx.head()
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"))
}
