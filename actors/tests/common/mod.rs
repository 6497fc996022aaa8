//! Shared set-up of the `kernel/llm` actor tests: a supervised LLM actor on its own
//! arbiter, OpenAI-format source settings and a one-message request.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use homeagent_actors::llm::provider::LlmActor;
use homeagent_actors::llm::{CompletionRequest, Message};
use homeagent_actors::supervisor::start_root;
use homeagent_actors::{EventBus, Registry, RestartPolicy, SupervisorConfig, TAddr};
use serde_json::{Value, json};

/// Adds an OpenAI-format source `name` at `url`.
pub fn source(settings: &mut BTreeMap<String, Value>, name: &str, url: &str, key: &str, priority: i64) {
    let p = format!("core.llm.sources.{name}.");
    settings.insert(format!("{p}base_url"), json!(url));
    settings.insert(format!("{p}model"), json!("gpt-test"));
    settings.insert(format!("{p}adapter"), json!("openai"));
    settings.insert(format!("{p}api_key"), json!(key));
    settings.insert(format!("{p}priority"), json!(priority));
}

/// A non-streaming request with one user message.
pub fn request(text: &str) -> CompletionRequest {
    CompletionRequest {
        model: String::new(),
        messages: vec![Message::text("user", text)],
        temperature: 0.7,
        max_tokens: 256,
        stream: false,
        tools: Default::default(),
        tool_choice: None,
        disable_thinking: false,
        extra_body: Default::default(),
    }
}

/// `kernel/llm` under a root supervisor, on its own arbiter (as in the daemon).
pub async fn llm() -> TAddr<LlmActor> {
    let registry = Arc::new(Registry::default());
    let (root, exit) = start_root(registry, EventBus::default(), "kernel", SupervisorConfig::default()).unwrap();
    std::mem::forget(exit);
    let dir = std::env::temp_dir();
    let arb = actix::Arbiter::new();
    let addr = root
        .worker_on(arb.handle(), "llm", RestartPolicy::Permanent, move || {
            Ok(LlmActor::new(dir.clone()))
        })
        .await
        .unwrap();
    std::mem::forget(arb);
    addr
}
