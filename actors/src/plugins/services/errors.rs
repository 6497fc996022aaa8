//! The kernel services' answers to a call they cannot serve, as JSON-RPC errors: bad
//! params, or a part of the kernel that is not there. A module of their own so each
//! service (events, io, memory, settings) uses them without importing the dispatcher.

use homeagent_plugin_protocol::frame::RpcError;

pub(super) fn bad(method: &str, msg: impl std::fmt::Display) -> RpcError {
    RpcError {
        code: RpcError::INVALID_PARAMS,
        message: format!("invalid params for `{method}`: {msg}"),
    }
}

pub(super) fn unavailable(what: &str, e: impl std::fmt::Display) -> RpcError {
    RpcError {
        code: RpcError::GONE,
        message: format!("{what} is not available: {e}"),
    }
}

pub(super) fn need<T: Clone>(what: &str, h: &Option<T>) -> Result<T, RpcError> {
    h.clone()
        .ok_or_else(|| unavailable(what, "this kernel runs without it"))
}
