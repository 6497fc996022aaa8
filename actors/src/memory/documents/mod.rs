//! The document tier: documents of archived turns (each turn kept as a passage) and
//! written documents, in `memory.db`, with their search indexes.
//!
//! * the actor (re-exported here): `kernel/memory/documents`;
//! * [`tools`]: the `doc_*` tools, over the documents and the context tier;
//! * [`summary`]: a document's extractive summary line.

mod actor;
pub use actor::*;

pub mod summary;
pub mod tools;
