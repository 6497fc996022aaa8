//! The StageHost: seven stages of a turn where plugins hook in, and the tool registry.
//!
//! * [`context`]: the stage context, the patches handlers return and the write rules;
//! * [`handler`]: the handler trait and the actor each handler runs in;
//! * [`tools`]: tool declarations, handlers and the registry;
//! * [`host`]: the `kernel/stages` actor that runs stages and owns the registry.

pub mod context;
pub mod handler;
pub mod host;
pub mod tools;

pub use context::{ContextMsg, Patch, Stage, StageContext, StageToolCall, StageToolResult};
pub use handler::{Scope, StageHandler};
pub use host::{
    GetTools, RegisterStage, RegisterTool, RunStage, StageCell, StageHost, StageState, UnregisterPlugin,
    UnregisterTool, has_handlers,
};
pub use tools::{
    Caller, ORIGIN_ARG, ToolFailure, ToolHandler, ToolRegistry, ToolResult, ToolSpec, origin_agent, typed,
};
