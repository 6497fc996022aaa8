//! How operators reach a supervisor, and why they may be refused.
//!
//! A leaf module on purpose: the [`Registry`](crate::registry::Registry) keeps each
//! supervisor's [`SupervisorControl`] (so the HTTP API finds it by actor id), and the
//! supervisor implements it. With the trait here rather than in `supervisor`, the
//! registry does not depend on the supervisor that depends on the registry.

use futures_util::future::BoxFuture;

/// How operators (the HTTP API) reach a supervisor; kept in the registry.
pub trait SupervisorControl: Send + Sync {
    /// Restarts the child with full id `child`; resolves to its new restart count.
    fn restart_child(&self, child: String) -> BoxFuture<'static, Result<u64, RestartError>>;
    /// Stops the child with full id `child` and leaves it stopped.
    fn stop_child(&self, child: String) -> BoxFuture<'static, Result<(), RestartError>>;
}

/// Why an operator restart did not happen.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RestartError {
    #[error("no actor with id `{0}`; GET /api/v1/actors lists them")]
    Unknown(String),
    #[error("actor `{0}` has no supervisor that can restart it (the root is restarted by restarting the daemon)")]
    NotRestartable(String),
    #[error("cannot restart `{id}` now: {reason}")]
    Refused { id: String, reason: RestartRefused },
    #[error("the supervisor of `{id}` is not running: {reason}")]
    SupervisorDown { id: String, reason: String },
}

/// Why a supervisor's core refused an operator restart or stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestartRefused {
    #[error("the supervisor is shutting down or has failed; restart its parent instead")]
    NotRunning,
    #[error("another restart of this subtree is in progress; try again in a moment")]
    Busy,
    #[error("this actor was removed from the tree (its plugin was uninstalled); install it again to bring it back")]
    Removed,
}
