//! JSON errors: every failure of the API answers `{"error": "..."}` with a 4xx/5xx.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

/// The body of every error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong and what to do about it.
    pub error: String,
}

/// An API failure with its HTTP status.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }
    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(ErrorBody {
            error: self.message.clone(),
        })
    }
}

impl From<homeagent_actors::SendError> for ApiError {
    fn from(e: homeagent_actors::SendError) -> Self {
        Self::unavailable(e.to_string())
    }
}

/// The graph tier's typed error: 503 with its text (which says what to do). Every
/// graph read and edit the API makes is by the owner's request, so a store failure is
/// the tier being unable to answer now, not the request's fault.
impl From<homeagent_actors::memory::graph::GraphError> for ApiError {
    fn from(e: homeagent_actors::memory::graph::GraphError) -> Self {
        Self::unavailable(e.to_string())
    }
}

/// The context tier's typed error: 503 with its text (the window is unchanged and the
/// text says what to retry), as the routes answered it before it was typed.
impl From<homeagent_actors::memory::context::actor::ContextError> for ApiError {
    fn from(e: homeagent_actors::memory::context::actor::ContextError) -> Self {
        Self::unavailable(e.to_string())
    }
}

/// The media tier's typed error: 503 with its text, as before it was typed.
impl From<homeagent_actors::memory::media::actor::MediaTierError> for ApiError {
    fn from(e: homeagent_actors::memory::media::actor::MediaTierError) -> Self {
        Self::unavailable(e.to_string())
    }
}

/// An operation on an installed plugin that could not be done: 409 with its text
/// (which says what to do), as the plugin routes answered it before it was typed.
impl From<homeagent_actors::plugins::set::PluginOpError> for ApiError {
    fn from(e: homeagent_actors::plugins::set::PluginOpError) -> Self {
        Self::conflict(e.to_string())
    }
}

/// A settings-store error as the API answers it: the request's own mistake 400, a full
/// disk 507 (with what to do), anything else 500 (and logged).
pub fn config_error(e: homeagent_actors::config::ConfigError) -> ApiError {
    use actix_web::http::StatusCode;
    if e.is_request_error() {
        ApiError::bad_request(e.to_string())
    } else if e.is_disk_full() {
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            format!("{e} (the disk is full: free space, then send the change again)"),
        )
    } else {
        tracing::error!("the settings store failed: {e}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
}
