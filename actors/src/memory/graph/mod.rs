//! The graph tier (`DATA/memory/graph.db`): entities, relations with their source
//! sentences, people's traits and ties.
//!
//! * the store (re-exported here): commit, recall, purge, merge, forget, introspect;
//! * [`actor`]: `kernel/memory/graph`, the `memory_*` and `person_*` tools, the recall
//!   of facts;
//! * [`mentions`]: which entities a text mentions, by the words of their names;
//! * [`social`]: traits and ties on the graph.

pub(crate) mod store;
pub use store::*;

pub mod actor;
pub mod mentions;
pub mod social;
