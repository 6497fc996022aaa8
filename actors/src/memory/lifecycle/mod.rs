//! Memory through time: the heartbeats that move what was said from the window to
//! documents and the graph, their schedule on the kernel clock, the policy that says
//! what they may do ([`policy`], a plain core), and the owner's deletion.
//!
//! * [`policy`]: the lifecycle's decisions as a plain struct (cold documents, the
//!   day's model-task budget), unit-tested without actix;
//! * [`heartbeat`]: every heartbeat's schedule (`Period`, `ClockDue`) and the distill
//!   heartbeat;
//! * [`distiller`]: the rule distiller (self-statements in the text log → graph);
//! * [`graph_heartbeat`] + [`maintenance`]: archive, merge and review;
//! * [`forget`]: the owner's deletion of a document, complete across the tiers.
//!
//! Invariant: nothing here deletes what was said; only [`forget`] does, when asked.

pub mod distiller;
pub mod forget;
pub mod graph_heartbeat;
pub mod heartbeat;
pub mod maintenance;
pub mod policy;
pub mod snapshot;

/// Why a heartbeat's round stopped short (what it did before stays done; the next
/// round goes on from there). Its text is the round's `error` in the status API.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// A tier did not answer (restarting, or stopped).
    #[error(transparent)]
    Unavailable(#[from] crate::addr::SendError),
    #[error(transparent)]
    Graph(#[from] crate::memory::graph::GraphError),
    #[error(transparent)]
    Documents(#[from] crate::memory::documents::DocError),
    /// The agent did not take a task (its intake's refusal: the memory layer sees the
    /// agent only through [`graph_heartbeat::TaskSink`]).
    #[error(transparent)]
    NotTaken(graph_heartbeat::NotTaken),
    /// The archive heartbeat was started without the document tier.
    #[error("the archive heartbeat has no document tier")]
    NoDocuments,
}
