//! The names both kinds of sub-agent share with the rest of the agent: their tools'
//! names and the prefix of a resident's agent id. A leaf module of its own, so the
//! task, the helpers (`children`) and the residents can all read them without
//! importing each other.

/// A helper's tools: start one, and take its result.
pub const SPAWN_TOOL: &str = "spawn_child";
pub const RESULT_TOOL: &str = "child_result";

/// The residents' control tool.
pub const RESIDENT_TOOL: &str = "resident_agents";
/// A resident's tool to tell its parent something mid-task (spec §6.2 `notify_parent`).
pub const NOTIFY_TOOL: &str = "notify_parent";
/// A resident's tool to write this round's record in its parent's input-channel table
/// itself (spec §6.2 `inputch_note`; otherwise the record is the automatic text).
pub const NOTE_TOOL: &str = "inputch_note";

/// What every resident's agent id starts with.
pub const AGENT_PREFIX: &str = "resident/";
