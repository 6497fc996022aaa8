//! The document tier: documents of archived turns (each turn kept as a passage) and
//! written documents, in `memory.db`, with their search indexes.
//!
//! * the actor (re-exported here): `kernel/memory/documents` and the `doc_*` tools;
//! * [`summary`]: a document's extractive summary line.

mod actor;
pub use actor::*;

pub mod summary;
