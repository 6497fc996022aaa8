//! LLM providers: unified types, Lua vendor adapters, stream accumulation, and the
//! rules for choosing and pausing sources.
//!
//! * [`types`]: the OpenAI-shaped request/response/chunk every adapter maps to;
//! * [`stream`]: builds a response from stream chunks (tool-call fragments by index);
//! * [`health`]: fallback order, retry and pause rules, 401/403 handling;
//! * [`tokens`], [`bpe`]: how many tokens a text is (o200k), for every budget the
//!   kernel keeps (the prompt, the context window, recall, the usage estimate).

pub mod adapter;
pub mod bpe;
pub mod bundled;
pub mod health;
pub mod lua_json;
pub mod opaque;
pub mod presets;
pub mod provider;
pub mod source;
pub mod stream;
pub mod tokens;
pub mod tools_cache;
pub mod types;
pub mod vision;
pub mod window;

pub use types::{CompletionRequest, CompletionResponse, Message, StreamChunk, ToolCall, ToolDef, Usage};
