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
