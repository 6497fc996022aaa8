//! LLM providers: unified types, Lua vendor adapters, stream accumulation, and the
//! rules for choosing and pausing sources.
//!
//! * [`types`]: the OpenAI-shaped request/response/chunk every adapter maps to;
//! * [`stream`]: builds a response from stream chunks (tool-call fragments by index);
//! * [`health`]: fallback order, retry and pause rules, 401/403 handling.

pub mod adapter;
pub mod bundled;
pub mod health;
pub mod lua_json;
pub mod opaque;
pub mod presets;
pub mod provider;
pub mod source;
pub mod stream;
pub mod tools_cache;
pub mod types;
pub mod vision;
pub mod window;

pub use types::{CompletionRequest, CompletionResponse, Message, StreamChunk, ToolCall, ToolDef, Usage};
