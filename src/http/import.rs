//! `POST /api/v1/memory/import`: a history, one NDJSON turn a line, becomes remembered
//! turns at their own times. The body is read (capped), validated as a whole
//! (`memory::context::import::decode`, off the HTTP worker), then executed by the kernel's
//! `Importer`; nothing here decides anything about memory.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::StreamExt;
use homeagent_actors::memory::context::import::{self, ImportError, MAX_IMPORT_BYTES};
use homeagent_actors::memory::context::importer::{ImportReport, ImportRunError};
use serde::Serialize;

use super::AppState;

/// The media types an NDJSON body may be sent as. Not `text/plain` or a form: those a
/// cross-site page can send without a CORS preflight.
const MEDIA_TYPES: &[&str] = &[
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/json",
];

/// An import's refusal: the message, and for a bad line its number and field.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ImportErrorBody {
    /// What went wrong and what to do about it.
    pub error: String,
    /// The 1-based line at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The field at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

fn refuse(status: StatusCode, error: String) -> HttpResponse {
    HttpResponse::build(status).json(ImportErrorBody {
        error,
        line: None,
        field: None,
    })
}

fn too_large() -> HttpResponse {
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the body is over the import limit of {} MiB; split the history into parts of at most that size and send them one after the other (lines imported before are skipped)",
            MAX_IMPORT_BYTES / (1024 * 1024)
        ),
    )
}

fn invalid(e: &ImportError) -> HttpResponse {
    let status = match e {
        ImportError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::BAD_REQUEST,
    };
    HttpResponse::build(status).json(ImportErrorBody {
        error: format!("{e}; nothing was imported: fix the line and send the whole body again"),
        line: e.line(),
        field: e.field().map(str::to_owned),
    })
}

#[utoipa::path(post, path = "/api/v1/memory/import", tag = "memory",
    request_body(content = String, content_type = "application/x-ndjson",
        description = "One turn a line: `{\"time\": \"<RFC 3339>\" | <unix seconds>, \"speaker\": \"…\", \"text\": \"…\"}`, optional `\"source\"` (where the history comes from) and `\"id\"` (the turn's id there). At most 32 MiB; each `text` at most `core.input_processing.text.max_bytes`; each `time` not before `core.memory.import.earliest` (default 1970-01-02) nor more than `core.memory.import.max_future` (default 5 min) ahead. Commit semantics: the body is validated whole first (a bad line imports nothing), then written in batches of 500 lines, each one transaction. A daemon killed mid-import keeps the batches it committed; sending the same body again completes it, since a turn already imported (same time, speaker and text) is skipped."),
    responses(
        (status = 200, description = "Imported: `imported` new turns, `skipped` lines imported before (same time, speaker and text), `archived` events the import's distill rounds moved into documents, `facts` committed to the graph", body = ImportReport),
        (status = 400, description = "A bad line: nothing was imported; `line` and `field` say where", body = ImportErrorBody),
        (status = 413, description = "Over 32 MiB, or a line's `text` over `core.input_processing.text.max_bytes` (`line` says which): nothing was imported", body = ImportErrorBody),
        (status = 415, description = "Not sent as NDJSON (`Content-Type: application/x-ndjson`)", body = ImportErrorBody),
        (status = 500, description = "The memory store failed mid-import: what earlier batches committed stays; send the body again", body = ImportErrorBody),
        (status = 503, description = "The memory actors are not running (restarting): what earlier batches committed stays; send the body again", body = ImportErrorBody),
    ))]
pub async fn import_history(state: web::Data<AppState>, req: HttpRequest, mut payload: web::Payload) -> HttpResponse {
    let ct = super::media_type(&req);
    if !MEDIA_TYPES.contains(&ct.as_str()) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("send the history with `Content-Type: application/x-ndjson` (got `{ct}`)"),
        );
    }
    let declared = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_IMPORT_BYTES) {
        return too_large();
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = payload.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {e}; send it again"),
                );
            }
        };
        if body.len() + chunk.len() > MAX_IMPORT_BYTES {
            return too_large();
        }
        body.extend_from_slice(&chunk);
    }
    // The bounds as committed now (a settings write that answered applies here).
    let settings = match state.config.send(homeagent_actors::config::ReadSettings).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return refuse(StatusCode::SERVICE_UNAVAILABLE, format!("{e}; retry")),
        Err(e) => return refuse(StatusCode::SERVICE_UNAVAILABLE, format!("{e}; retry")),
    };
    let bounds = import::Bounds::new(
        homeagent_actors::clock::now_ms(),
        &homeagent_actors::config::InputLimits::read(&settings),
    );
    // Parsing megabytes of JSON would stall this HTTP worker: the blocking pool does it.
    let lines = match web::block(move || import::decode_within(&body, &bounds)).await {
        Ok(Ok(lines)) => lines,
        Ok(Err(e)) => {
            tracing::info!("history import refused: {e}");
            return invalid(&e);
        }
        Err(e) => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot validate the body now ({e}); retry"),
            );
        }
    };
    match state.importer.run(lines).await {
        Ok(report) => HttpResponse::Ok().json(report),
        Err(e @ ImportRunError::Settings(_)) | Err(e @ ImportRunError::Unavailable { .. }) => {
            refuse(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
        Err(e @ ImportRunError::Store { .. }) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
