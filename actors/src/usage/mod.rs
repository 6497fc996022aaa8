//! What the model calls cost: every call that answered is one row of the usage ledger
//! (`DATA/usage.db`) with its tokens, what it was for and, from the owner's price
//! table, what it cost.
//!
//! * [`budget`]: token limits (day, month, background, each guest) enforced before a call (reserve, settle,
//!   release), plain data the LLM actor owns;
//! * [`ledger`]: the plain data — [`Kind`], [`Purpose`], [`Call`], [`Prices`] and the
//!   cost rule — unit-tested without SQLite or actix;
//! * [`store`]: the SQLite table and its summaries (by day, source, model, kind,
//!   principal);
//! * [`actor`]: `kernel/llm/usage`, the shell on the blocking arbiter the LLM actor
//!   reports to and the HTTP API reads from.
//!
//! Why the LLM actor records, not the turn: every call to a vendor goes through it —
//! turns, heartbeats' tasks, sub-agents, image descriptions, the self-check — so one
//! place sees them all, with the source and model that actually answered.

pub mod actor;
pub mod budget;
pub mod ledger;
pub mod store;

pub use actor::{GetSpent, GetUsage, RecordCall, UsageActor};
pub use ledger::{Call, Kind, Prices, Purpose};
pub use store::{GroupBy, UsageRow, UsageStore};
