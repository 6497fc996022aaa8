//! The HTTP surface: JSON API under `/api/v1`, its OpenAPI document, the SSE stream,
//! and the embedded dashboard at `/`.
//!
//! Handlers are thin: they read the registry (lock-free counters) or send one typed
//! message to a kernel actor. Malformed input of any kind answers 4xx with a JSON
//! `{"error": ...}` body; nothing a client sends can panic a handler.

mod agent;
mod api;
mod approvals;
mod assets;
mod backups;
mod clock;
mod error;
pub mod guard;
mod history;
mod import;
mod inbox;
mod llm;
mod logs;
mod media;
mod memory;
pub mod openai;
mod persona;
mod plugins;
pub mod ready;
pub mod recovery;
mod residents;
mod security;
mod settings;
pub mod slow;
mod sse;
mod terminals;
mod usage;

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, error::InternalError, web};
use homeagent_actors::config::ConfigActor;
use homeagent_actors::llm::provider::LlmActor;
use homeagent_actors::{EventBus, Registry, TAddr};
use utoipa::OpenApi;

pub use error::{ApiError, ErrorBody};

/// Largest accepted JSON body. Settings updates are small; anything bigger is a mistake.
pub const MAX_JSON_BODY: usize = 64 * 1024;
/// Largest accepted body of the OpenAI-compatible API: clients send the whole
/// conversation each time (only its last user message is used).
pub const MAX_OPENAI_BODY: usize = 4 * 1024 * 1024;

/// What every handler can reach.
pub struct AppState {
    pub registry: Arc<Registry>,
    pub bus: EventBus,
    pub config: TAddr<ConfigActor>,
    pub llm: TAddr<LlmActor>,
    /// How many sources `llm` has configured (read without a round trip).
    pub llm_sources: homeagent_actors::llm::provider::SourceGauge,
    /// The usage ledger (`GET /api/v1/usage`).
    pub usage: TAddr<homeagent_actors::usage::UsageActor>,
    /// What `GET /metrics` counts from the bus.
    pub metrics: crate::metrics::Counted,
    pub agent: homeagent_actors::agent::AgentHandles,
    pub plugins: Arc<homeagent_actors::plugins::set::PluginSet>,
    /// The heartbeats a virtual clock drives (`POST /api/v1/clock/advance`), in order,
    /// after the subprocess plugins that follow it.
    pub beats: homeagent_actors::clock::Beats,
    /// The distill heartbeat and its last round.
    pub distill: homeagent_actors::memory::lifecycle::heartbeat::DistillHandle,
    /// The graph tier.
    pub graph: TAddr<homeagent_actors::memory::graph::actor::GraphActor>,
    /// The rule distiller and its last round.
    pub rules: homeagent_actors::memory::lifecycle::distiller::DistillerHandle,
    /// The lifecycle policy of the maintenance heartbeats (its budget is shown).
    pub maintenance_policy: homeagent_actors::memory::lifecycle::policy::PolicyCell,
    /// The merge and review heartbeats.
    pub maintenance: Vec<homeagent_actors::memory::lifecycle::graph_heartbeat::MaintenanceHandle>,
    /// The media memory (images): attachments are stored there, the browser reads it.
    pub media: homeagent_actors::memory::media::actor::MediaHandle,
    /// What the embedder is doing (active space, fallback reason, recompute progress).
    pub embed_status: homeagent_actors::memory::embed::actor::StatusHandle,
    /// A set-up of the local embedder from the page (`POST /api/v1/memory/embedder/install`).
    pub embed_install: homeagent_actors::memory::embed::install::ProgressCell,
    /// Where `POST /api/v1/memory/import` writes (the context, text log and distiller).
    pub importer: homeagent_actors::memory::context::importer::Importer,
    /// Scheduled backups and "Back up now".
    pub backups: crate::backup::actor::BackupHandle,
    /// The data directory (`--data`).
    pub data_dir: std::path::PathBuf,
    /// The text log's directory (`DATA/memory/text`), read by the chat history.
    pub text_dir: std::path::PathBuf,
    /// The recent log lines (none when logging was set up by someone else, e.g. a test).
    pub logs: Option<Arc<crate::logring::LogRing>>,
}

#[derive(OpenApi)]
#[openapi(
    info(title = "HomeAgent daemon API", description = "Control and observe a running homed: the actor tree, settings and live events."),
    paths(
        api::healthz, ready::readyz, api::actors, api::restart, api::get_settings, api::put_settings, sse::events,
        agent::post_message, agent::post_stop, agent::get_tasks, llm::get_sources, llm::get_presets, security::get_security,
        memory::get_context, memory::get_documents, plugins::get_plugins, plugins::plugin_action, plugins::plugin_api, plugins::install_plugin, memory::run_heartbeat, clock::get_clock, clock::advance, approvals::list, approvals::audit, approvals::answer, inbox::list, inbox::retry, inbox::discard, usage::usage, memory::memory_status, memory::get_graph, import::import_history, history::history, history::list_conversations, agent::post_new_chat, logs::logs,
        api::restart_daemon, recovery::status, recovery::restore, recovery::retry, backups::list_backups, backups::take, backups::download, backups::restore, persona::get, persona::put, settings::definitions, settings::history, settings::revert_one, settings::revert_since, settings::test_source, plugins::plugin_tools, plugins::uninstall,
        memory::delete_document, memory::edit_relation, memory::delete_relation, memory::get_knowledge, memory::add_knowledge, memory::delete_knowledge,
        residents::list, residents::restart, residents::destroy,
        media::list, media::get, media::data, media::delete,
        terminals::list, terminals::output, terminals::input
    ),
    tags(
        (name = "daemon", description = "Liveness and readiness"),
        (name = "actors", description = "The supervision tree and its mailboxes"),
        (name = "settings", description = "The settings registry"),
        (name = "events", description = "Live event stream"),
        (name = "agent", description = "Messages, stop, tasks and LLM sources"),
        (name = "memory", description = "The memory tiers"),
        (name = "plugins", description = "Plugins and their supervisors"),
        (name = "logs", description = "The daemon's recent log"),
        (name = "terminals", description = "The terminal plugin's sessions, for the WebUI panel"),
    )
)]
struct ApiDoc;

/// The OpenAPI document as served at `/api/v1/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(openapi())
}

/// A request's media type: its `Content-Type` without parameters, lower-cased (empty
/// when there is none). The routes that take a body of their own kind (a package, a
/// history) accept only their own types, so a browser form cannot send them without a
/// CORS preflight.
fn media_type(req: &HttpRequest) -> String {
    req.headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

fn json_error(err: impl std::fmt::Display, status: actix_web::http::StatusCode) -> actix_web::Error {
    let body = ErrorBody { error: err.to_string() };
    InternalError::from_response(err.to_string(), HttpResponse::build(status).json(body)).into()
}

/// The JSON extractor's settings: `limit` bytes, errors as JSON with their status.
fn json_config(limit: usize) -> web::JsonConfig {
    use actix_web::error::JsonPayloadError;
    use actix_web::http::StatusCode;
    web::JsonConfig::default()
        .limit(limit)
        .error_handler(move |err, req: &HttpRequest| {
            let status = match &err {
                JsonPayloadError::OverflowKnownLength { .. } | JsonPayloadError::Overflow { .. } => {
                    StatusCode::PAYLOAD_TOO_LARGE
                }
                JsonPayloadError::Payload(p) if slow::is_stalled(p) => StatusCode::REQUEST_TIMEOUT,
                JsonPayloadError::ContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                _ => StatusCode::BAD_REQUEST,
            };
            let msg = match &err {
                JsonPayloadError::ContentType => {
                    "send the body as JSON with `Content-Type: application/json`".to_owned()
                }
                JsonPayloadError::OverflowKnownLength { .. } | JsonPayloadError::Overflow { .. } => {
                    format!("request body too large: the limit is {limit} bytes; send a smaller body")
                }
                other => format!("invalid JSON body: {other}; {}", as_described(req)),
            };
            json_error(msg, status)
        })
}

/// What to do about a request the extractors could not read: write it as the API's
/// description says (the route is named, so the reader knows where to look).
fn as_described(req: &HttpRequest) -> String {
    format!(
        "send it as GET /api/v1/openapi.json describes {} {}",
        req.method(),
        req.match_pattern().unwrap_or_else(|| req.path().to_owned())
    )
}

/// Registers every route on an actix-web app.
pub fn configure(cfg: &mut web::ServiceConfig) {
    use actix_web::http::StatusCode;
    let json = json_config(MAX_JSON_BODY);
    let query = web::QueryConfig::default().error_handler(|err, req| {
        json_error(
            format!("invalid query string: {err}; {}", as_described(req)),
            StatusCode::BAD_REQUEST,
        )
    });
    let path = web::PathConfig::default().error_handler(|err, req| {
        json_error(
            format!("invalid path: {err}; {}", as_described(req)),
            StatusCode::BAD_REQUEST,
        )
    });
    cfg.app_data(json)
        .app_data(query)
        .app_data(path)
        .route("/healthz", web::get().to(api::healthz))
        .route("/readyz", web::get().to(ready::readyz))
        .route("/metrics", web::get().to(api::metrics))
        .route("/login", web::get().to(guard::login))
        .route("/login", web::post().to(guard::login))
        .service(
            web::scope("/api/v1")
                .route("/openapi.json", web::get().to(openapi_json))
                .route("/actors", web::get().to(api::actors))
                .route("/actors/{id:.+}/restart", web::post().to(api::restart))
                .route("/settings", web::get().to(api::get_settings))
                .route("/settings", web::put().to(api::put_settings))
                .route("/settings/definitions", web::get().to(settings::definitions))
                .route("/settings/history", web::get().to(settings::history))
                .route("/daemon/restart", web::post().to(api::restart_daemon))
                .route("/recovery", web::get().to(recovery::status))
                .route("/recovery/retry", web::post().to(recovery::retry))
                .route("/recovery/backups/{name}/restore", web::post().to(recovery::restore))
                .route("/backups", web::get().to(backups::list_backups))
                .route("/backups", web::post().to(backups::take))
                .route("/backups/{name}", web::get().to(backups::download))
                .route("/backups/{name}/restore", web::post().to(backups::restore))
                .route("/settings/history/{id}/revert", web::post().to(settings::revert_one))
                .route("/settings/history/revert", web::post().to(settings::revert_since))
                .route("/events", web::get().to(sse::events))
                .service(
                    web::resource("/messages")
                        .app_data(json_config(agent::MAX_MESSAGE_BODY))
                        .route(
                            web::post()
                                .guard(actix_web::guard::fn_guard(agent::is_multipart))
                                .to(agent::post_message_multipart),
                        )
                        .route(web::post().to(agent::post_message)),
                )
                .route("/chat/history", web::get().to(history::history))
                .route("/chat/conversations", web::get().to(history::list_conversations))
                .route("/chat/new", web::post().to(agent::post_new_chat))
                .route("/persona", web::get().to(persona::get))
                .route("/persona", web::put().to(persona::put))
                .route("/logs", web::get().to(logs::logs))
                .route("/stop", web::post().to(agent::post_stop))
                .route("/tasks", web::get().to(agent::get_tasks))
                .route("/terminals", web::get().to(terminals::list))
                .route("/terminals/{id}/output", web::get().to(terminals::output))
                .route("/terminals/{id}/input", web::post().to(terminals::input))
                .route("/residents", web::get().to(residents::list))
                .route("/residents/{id}/restart", web::post().to(residents::restart))
                .route("/residents/{id}", web::delete().to(residents::destroy))
                .route("/llm/sources", web::get().to(llm::get_sources))
                .route("/llm/presets", web::get().to(llm::get_presets))
                .route("/llm/sources/{name}/test", web::post().to(settings::test_source))
                .route("/security", web::get().to(security::get_security))
                .route("/memory/context", web::get().to(memory::get_context))
                .route("/memory/documents", web::get().to(memory::get_documents))
                .route("/memory/documents/{id}", web::delete().to(memory::delete_document))
                .route("/memory/graph", web::get().to(memory::get_graph))
                .route("/memory/graph/relations", web::put().to(memory::edit_relation))
                .route(
                    "/memory/graph/relations/{id}",
                    web::delete().to(memory::delete_relation),
                )
                .route("/memory/knowledge", web::get().to(memory::get_knowledge))
                .route("/memory/knowledge", web::post().to(memory::add_knowledge))
                .route(
                    "/memory/knowledge/{name:.+}",
                    web::delete().to(memory::delete_knowledge),
                )
                .route("/memory/import", web::post().to(import::import_history))
                .route("/memory/media", web::get().to(media::list))
                .route("/memory/media/{id}", web::get().to(media::get))
                .route("/memory/media/{id}", web::delete().to(media::delete))
                .route("/memory/media/{id}/data", web::get().to(media::data))
                .route("/plugins", web::get().to(plugins::get_plugins))
                .route("/heartbeats/{name}/run", web::post().to(memory::run_heartbeat))
                .route("/approvals", web::get().to(approvals::list))
                .route("/approvals/audit", web::get().to(approvals::audit))
                .route("/inbox/dead", web::get().to(inbox::list))
                .route("/usage", web::get().to(usage::usage))
                .route("/inbox/dead/{id}/retry", web::post().to(inbox::retry))
                .route("/inbox/dead/{id}", web::delete().to(inbox::discard))
                .route("/approvals/{id}", web::post().to(approvals::answer))
                .route("/clock", web::get().to(clock::get_clock))
                .route("/clock/advance", web::post().to(clock::advance))
                .route("/memory/status", web::get().to(memory::memory_status))
                .route("/memory/embedder/install", web::post().to(memory::install_embedder))
                .route("/plugins/install", web::post().to(plugins::install_plugin))
                .route("/plugins/{name}/api/{api}", web::post().to(plugins::plugin_api))
                .route("/plugins/{name}/tools", web::get().to(plugins::plugin_tools))
                .route("/plugins/{name}", web::delete().to(plugins::uninstall))
                .route("/plugins/{name}/{action}", web::post().to(plugins::plugin_action))
                .default_service(web::to(api::not_found)),
        )
        .service(openai::scope())
        .default_service(web::to(assets::serve));
}

#[cfg(test)]
mod tests {
    /// Every parameter the document calls a path parameter is in its path's template,
    /// and every template variable is one: a query struct without
    /// `#[into_params(parameter_in = Query)]` is listed as a path parameter (issue 30).
    #[test]
    fn openapi_path_and_query_parameters_are_where_they_are() {
        let doc = serde_json::to_value(super::openapi()).unwrap();
        let mut checked = 0;
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let params = op["parameters"].as_array().cloned().unwrap_or_default();
                for p in &params {
                    let (name, place) = (p["name"].as_str().unwrap(), p["in"].as_str().unwrap());
                    let templated = path.contains(&format!("{{{name}}}"));
                    assert_eq!(
                        place == "path",
                        templated,
                        "{method} {path}: parameter `{name}` is `in: {place}`"
                    );
                    checked += 1;
                }
                for var in path
                    .split('{')
                    .skip(1)
                    .filter_map(|s| s.split_once('}'))
                    .map(|(v, _)| v)
                {
                    assert!(
                        params.iter().any(|p| p["name"] == var && p["in"] == "path"),
                        "{method} {path}: `{{{var}}}` is not documented"
                    );
                }
            }
        }
        assert!(checked > 10, "only {checked} parameters found");
    }
}
