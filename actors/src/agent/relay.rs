//! `kernel/agent/settings-relay`: applies setting changes to the running agent.
//!
//! It listens to `setting_changed` on the bus; a change under `core.llm.sources.*` or
//! `core.llm.api_key`/`provider` reconfigures the LLM sources (no restart needed), and
//! a change of the agent's knobs updates the settings tasks read.

use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::broadcast::error::RecvError;

use super::prompt::PromptSettings;
use super::task::{AgentSettings, TaskDeps};
use crate::addr::TAddr;
use crate::config::{AgentConfig, ConfigActor, LLM_PREFIX, LlmConfig, MemoryConfig, ReadSettings, Settings};
use crate::host::{Host, HostContext, KernelActor};
use crate::llm::provider::Configure;

/// The agent's settings out of a snapshot: [`AgentConfig`] and the two LLM knobs of
/// [`LlmConfig`] a task sends with every request (defaults: the key table's).
pub fn agent_settings(s: &Settings) -> AgentSettings {
    let (a, l) = (AgentConfig::read(s), LlmConfig::read(s));
    AgentSettings {
        prompt: PromptSettings {
            skills: String::new(),
            system_prompt: a.system_prompt,
            personal_prompt: a.personal_prompt,
            ..PromptSettings::default()
        },
        max_tool_turns: a.max_tool_turns,
        max_tokens: l.max_tokens,
        temperature: l.temperature,
        tool_timeout: a.tool_timeout,
        outage_wait: a.outage_wait,
        max_turn_time: a.max_turn_time,
        max_context_size: a.max_context_size,
        tool_tokens: a.tool_tokens,
        window: window(s, &l),
    }
}

/// The context window of the source requests go to first (`llm::window`: configured,
/// known model, or the logged default).
fn window(s: &Settings, l: &LlmConfig) -> usize {
    let (sources, _) = crate::llm::source::sources_from_settings(s.raw(), l.api_key.expose());
    crate::llm::window::window_of(crate::llm::window::primary(&sources)).tokens
}

/// What a changed key asks the relay to reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reload {
    /// The agent's knobs and the LLM sources (any `core.llm.*` key, sources included).
    Llm,
    /// The agent's knobs only.
    Agent,
    /// The embedder.
    Embedder,
    /// The firewall (`core.security.*`).
    Security,
}

impl Reload {
    fn for_key(key: &str) -> Option<Self> {
        // The describer of images for sources without vision is the LLM actor's.
        if key.starts_with(LLM_PREFIX) || key == crate::config::keys::IMAGE_FALLBACK_PROVIDER.name() {
            Some(Self::Llm)
        } else if AgentConfig::concerns(key) {
            Some(Self::Agent)
        } else if MemoryConfig::concerns(key) {
            Some(Self::Embedder)
        } else if key.starts_with("core.security.") || key == crate::config::keys::CLI_API_KEY.name() {
            Some(Self::Security)
        } else {
            None
        }
    }
}

/// `first` and every reload the changes already queued behind it ask for, each once.
/// One `PUT /api/v1/settings` publishes one event per key: six keys of a new source
/// reloaded the sources up to six times (each rebuilding every adapter and HTTP client)
/// before this. Each reload reads the whole current snapshot, so doing it once after
/// the queued events is the same end state. A `Llm` reload also applies the agent's
/// knobs and the firewall, so it absorbs `Agent` and `Security` (which are one reload).
fn coalesce(first: Reload, rx: &mut tokio::sync::broadcast::Receiver<Arc<crate::bus::KernelEvent>>) -> Vec<Reload> {
    use tokio::sync::broadcast::error::TryRecvError;
    let mut want = vec![first];
    loop {
        match rx.try_recv() {
            Ok(ev) => want.extend(ev.changed_setting().and_then(|(key, _)| Reload::for_key(key))),
            Err(TryRecvError::Lagged(_)) => want.extend([Reload::Llm, Reload::Embedder]),
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    let llm = want.contains(&Reload::Llm);
    let mut out: Vec<Reload> = Vec::new();
    for w in want {
        // The agent's knobs and the firewall are one reload (settings + firewall).
        let w = if w == Reload::Security { Reload::Agent } else { w };
        let absorbed = llm && w == Reload::Agent;
        if !absorbed && !out.contains(&w) {
            out.push(w);
        }
    }
    out
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
                            if let Some(what) = ev.changed_setting().and_then(|(key, _)| Reload::for_key(key)) {
                                let what = coalesce(what, &mut rx);
                                return (rx, Some(what));
                            }
                        }
                        // Missed events: reload everything to be safe.
                        Err(RecvError::Lagged(_)) => return (rx, Some(vec![Reload::Llm, Reload::Embedder])),
                        Err(RecvError::Closed) => return (rx, None),
                    }
                }
            })
            .map(|(rx, what), host, ctx| {
                let Some(what) = what else { return };
                for w in what {
                    match w {
                        Reload::Llm => host.inner().reload(true, ctx),
                        Reload::Agent | Reload::Security => host.inner().reload(false, ctx),
                        Reload::Embedder => host.inner().reload_embedder(ctx),
                    }
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
            tracing::info!("embedder settings changed: reconfiguring");
            crate::memory::embed::actor::reload_from_settings(&config, &embedder).await;
        }));
    }

    fn reload(&mut self, llm: bool, ctx: &mut HostContext<Self>) {
        let config = self.config.clone();
        let deps = self.deps.clone();
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(async move {
            match config.send(ReadSettings).await {
                Ok(Ok(all)) => {
                    *deps.settings.write() = agent_settings(&all);
                    // Secrets live in LLM keys too: the gate is rebuilt on every reload.
                    deps.firewall
                        .configure(crate::firewall::FirewallConfig::from_settings(&all));
                    if llm {
                        tracing::info!("LLM settings changed: reloading sources");
                        let _ = deps.llm.send(Configure(all.into_raw())).await;
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
        let rx = self.deps.bus.subscribe_settings();
        self.listen(rx, ctx);
        // Apply the current settings once (covers changes made while it was down).
        self.reload(true, ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::keys;
    use serde_json::json;

    #[test]
    fn agent_settings_read_the_tool_timeout_and_keep_defaults_for_bad_values() {
        let s = Settings::default();
        assert_eq!(agent_settings(&s).tool_timeout, std::time::Duration::from_secs(60));
        let s = s
            .with(keys::AGENT_TOOL_TIMEOUT, json!("90s"))
            .with(keys::AGENT_MAX_TOOL_TURNS, json!(3))
            .with(keys::LLM_MAX_TOKENS, json!(512));
        let a = agent_settings(&s);
        assert_eq!(a.tool_timeout, std::time::Duration::from_secs(90));
        assert_eq!((a.max_tool_turns, a.max_tokens), (3, 512));
        let s = s.with(keys::AGENT_TOOL_TIMEOUT, json!("soon"));
        assert_eq!(agent_settings(&s).tool_timeout, std::time::Duration::from_secs(60));
    }

    fn changed(key: &str) -> Arc<crate::bus::KernelEvent> {
        let bus = crate::bus::EventBus::new(8);
        let mut rx = bus.subscribe_settings();
        bus.publish(crate::bus::Event::SettingChanged {
            key: key.to_owned(),
            value: json!(1),
            reset: false,
        });
        rx.try_recv().unwrap()
    }

    #[test]
    fn queued_changes_reload_each_part_once() {
        let (tx, mut rx) = tokio::sync::broadcast::channel(64);
        for key in [
            "core.llm.sources.a.base_url",
            "core.llm.sources.a.model",
            "core.llm.sources.a.api_key",
            keys::AGENT_SYSTEM_PROMPT.name(),
            keys::MEMORY_EMBED_URL.name(),
            keys::MEMORY_EMBED_URL.name(),
            keys::DAEMON_LOG_LEVEL.name(),
        ] {
            tx.send(changed(key)).unwrap();
        }
        // The first event was the one that woke the relay.
        let first = rx.try_recv().unwrap();
        let first = Reload::for_key(first.changed_setting().unwrap().0).unwrap();
        assert_eq!(coalesce(first, &mut rx), vec![Reload::Llm, Reload::Embedder]);
        assert!(rx.try_recv().is_err(), "the queue is drained");
        // Without an LLM key, the agent's knobs and the firewall are one reload.
        tx.send(changed(keys::SECURITY_SECRETS.name())).unwrap();
        tx.send(changed(keys::AGENT_SYSTEM_PROMPT.name())).unwrap();
        assert_eq!(coalesce(Reload::Agent, &mut rx), vec![Reload::Agent]);
        assert_eq!(coalesce(Reload::Embedder, &mut rx), vec![Reload::Embedder]);
    }

    #[test]
    fn a_changed_key_reloads_only_what_reads_it() {
        assert_eq!(Reload::for_key("core.llm.sources.x.base_url"), Some(Reload::Llm));
        assert_eq!(Reload::for_key(keys::LLM_TEMPERATURE.name()), Some(Reload::Llm));
        assert_eq!(Reload::for_key(keys::AGENT_SYSTEM_PROMPT.name()), Some(Reload::Agent));
        assert_eq!(Reload::for_key(keys::MEMORY_EMBED_URL.name()), Some(Reload::Embedder));
        assert_eq!(Reload::for_key(keys::SECURITY_SECRETS.name()), Some(Reload::Security));
        assert_eq!(Reload::for_key(keys::SECURITY_TOOL_DENY.name()), Some(Reload::Security));
        // The heartbeat periods are the kernel's to apply; the daemon's log level too.
        assert_eq!(Reload::for_key(keys::AGENT_DISTILL_INTERVAL.name()), None);
        assert_eq!(Reload::for_key(keys::DAEMON_LOG_LEVEL.name()), None);
    }
}
