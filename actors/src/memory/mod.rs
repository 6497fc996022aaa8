//! Memory tiers. Today: the context tier (working memory) with its SQLite store, the
//! archive of pruned events into documents, and TF-IDF similarity.
//!
//! * [`tfidf`]: character 1-2 gram TF-IDF vectors and cosine;
//! * [`context`]: events, relevance pruning, budgets and the timeline block;
//! * [`graph`]: the graph tier (entities, relations, sentences) in `DATA/memory/graph.db`;
//! * [`graph_actor`]: `kernel/memory/graph` and the `memory_*` tools;
//! * [`keywords`]: jieba keyword extraction for recall queries;
//! * [`rules`] + [`distiller`]: the rule distiller (self-statements in the text log → graph);
//! * [`maintenance`] + [`graph_heartbeat`]: the merge and review heartbeats (tasks for the model);
//! * [`social`]: people's traits and ties on the graph (`person_*` tools);
//! * [`store`]: `DATA/memory/memory.db` (write-through);
//! * [`actor`]: the `kernel/memory/context` actor.

pub mod actor;
pub mod context;
pub mod distiller;
pub mod graph;
pub mod graph_actor;
pub mod graph_heartbeat;
pub mod heartbeat;
pub mod keywords;
pub mod knowledge;
pub mod maintenance;
pub mod rules;
pub mod social;
pub mod store;
pub mod textlog;
pub mod tfidf;

pub use context::Event;
