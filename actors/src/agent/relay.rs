//! `kernel/agent/settings-relay`: applies setting changes to the running agent.
//!
//! It listens to `setting_changed` on the bus; a change under `core.llm.sources.*` or
//! `core.llm.api_key`/`provider` reconfigures the LLM sources (no restart needed), and
//! a change of the agent's knobs updates the settings tasks read.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::prompt::PromptSettings;
use super::task::{AgentSettings, TaskDeps};
use crate::addr::TAddr;
use crate::config::{ConfigActor, GetRawSettings};
use crate::host::{Host, HostContext, KernelActor};
use crate::llm::provider::Configure;

/// Reads the agent's settings out of a settings map (missing keys keep defaults).
pub fn agent_settings(s: &BTreeMap<String, Value>) -> AgentSettings {
    let d = AgentSettings::default();
    let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    AgentSettings {
        prompt: PromptSettings {
            skills: String::new(),
            system_prompt: text("core.agent.system_prompt"),
            personal_prompt: text("core.agent.personal_prompt"),
        },
        max_tool_turns: s
            .get("core.agent.max_tool_turns")
            .and_then(Value::as_u64)
            .map_or(d.max_tool_turns, |v| v as u32),
        max_tokens: s
            .get("core.llm.max_tokens")
            .and_then(Value::as_u64)
            .map_or(d.max_tokens, |v| v as u32),
        temperature: s
            .get("core.llm.temperature")
            .and_then(Value::as_f64)
            .unwrap_or(d.temperature),
        tool_timeout: s
            .get("core.agent.tool_timeout")
            .and_then(Value::as_str)
            .and_then(|v| crate::config::parse_duration(v).ok())
            .filter(|d| !d.is_zero())
            .unwrap_or(d.tool_timeout),
        max_context_size: s
            .get("core.agent.max_context_size")
            .and_then(Value::as_u64)
            .map_or(d.max_context_size, |v| v as usize),
    }
}

/// The relay actor.
pub struct SettingsRelay {
    config: TAddr<ConfigActor>,
    deps: Arc<TaskDeps>,
}

impl SettingsRelay {
    pub fn new(config: TAddr<ConfigActor>, deps: Arc<TaskDeps>) -> Self {
        Self { config, deps }
    }

    /// Waits for the next bus event, handles it, and waits again.
    fn listen(
        &mut self,
        mut rx: tokio::sync::broadcast::Receiver<Arc<crate::bus::KernelEvent>>,
        ctx: &mut HostContext<Self>,
    ) {
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move {
                loop {
                    match rx.recv().await {
                        Ok(ev) => {
                            if let Some((key, _)) = ev.changed_setting() {
                                return (rx, Some(key.to_owned()));
                            }
                        }
                        // Missed events: reload everything to be safe.
                        Err(RecvError::Lagged(_)) => return (rx, Some("core.llm.".to_owned())),
                        Err(RecvError::Closed) => return (rx, None),
                    }
                }
            })
            .map(|(rx, key), host, ctx| {
                let Some(key) = key else { return };
                if key.starts_with("core.llm.") || key.starts_with("core.agent.") {
                    host.inner().reload(key.starts_with("core.llm."), ctx);
                } else if crate::memory::embed::is_embed_setting(&key) {
                    host.inner().reload_embedder(ctx);
                }
                host.inner().listen(rx, ctx);
            }),
        );
    }

    fn reload_embedder(&mut self, ctx: &mut HostContext<Self>) {
        let Some(embedder) = self.deps.embedder.as_ref().map(|e| e.addr.clone()) else {
            return;
        };
        let config = self.config.clone();
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(async move {
            match config.send(GetRawSettings).await {
                Ok(Ok(all)) => {
                    tracing::info!("embedder settings changed: reconfiguring");
                    let cfg = crate::memory::embed::embed_config(&all);
                    let _ = embedder.send(crate::memory::embed::actor::Reconfigure(cfg)).await;
                }
                Ok(Err(e)) => tracing::error!("cannot read settings to apply a change: {e}"),
                Err(e) => tracing::error!("cannot reach the settings actor to apply a change: {e}"),
            }
        }));
    }

    fn reload(&mut self, llm: bool, ctx: &mut HostContext<Self>) {
        let config = self.config.clone();
        let deps = self.deps.clone();
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(async move {
            match config.send(GetRawSettings).await {
                Ok(Ok(all)) => {
                    *deps.settings.write() = agent_settings(&all);
                    if llm {
                        tracing::info!("LLM settings changed: reloading sources");
                        let _ = deps.llm.send(Configure(all)).await;
                    }
                }
                Ok(Err(e)) => tracing::error!("cannot read settings to apply a change: {e}"),
                Err(e) => tracing::error!("cannot reach the settings actor to apply a change: {e}"),
            }
        }));
    }
}

impl KernelActor for SettingsRelay {
    const KIND: &'static str = "settings-relay";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        let rx = self.deps.bus.subscribe();
        self.listen(rx, ctx);
        // Apply the current settings once (covers changes made while it was down).
        self.reload(true, ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agent_settings_read_the_tool_timeout_and_keep_defaults_for_bad_values() {
        let mut s = BTreeMap::new();
        assert_eq!(agent_settings(&s).tool_timeout, std::time::Duration::from_secs(60));
        s.insert("core.agent.tool_timeout".to_owned(), json!("90s"));
        s.insert("core.agent.max_tool_turns".to_owned(), json!(3));
        let a = agent_settings(&s);
        assert_eq!(a.tool_timeout, std::time::Duration::from_secs(90));
        assert_eq!(a.max_tool_turns, 3);
        s.insert("core.agent.tool_timeout".to_owned(), json!("soon"));
        assert_eq!(agent_settings(&s).tool_timeout, std::time::Duration::from_secs(60));
    }
}
