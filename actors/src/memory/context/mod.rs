//! The context tier: the window of recent events the prompt is built from, written
//! through to `memory.db`.
//!
//! * `events` (re-exported here): events, the vector text, relevance prune, top-K and
//!   budget rules;
//! * [`actor`]: `kernel/memory/context`, the window's actor;
//! * [`import`] + [`importer`]: a history imported into the window (validation and plan;
//!   its execution).

mod events;
pub use events::*;

pub mod actor;
pub mod import;
pub mod importer;
