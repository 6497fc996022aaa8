//! The plugin's requests about itself: withdrawing one of its tools (`tool.unregister`)
//! and being told when its settings change (`events.subscribe` to `settings.changed`);
//! reading and writing them (`settings.*`) is in `plugins/services/settings.rs`, shared
//! with Lua plugins. Kept apart from the rest of the
//! protocol so that plugins whose tools change at run time (the MCP bridge) have
//! one place to look. Kernel event types subscribed with the same method are
//! forwarded by `services::EventSub` as `event` notifications.

use std::sync::Arc;

use actix::prelude::*;
use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::{self, EventsSubscribe, SettingValue, is_kernel_event_topic};
use homeagent_plugin_protocol::{KernelRequest, PluginRequest};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::{PluginProcess, invalid};
use crate::config::GetSetting;
use crate::host::{Host, HostContext};
use crate::plugins::conn::Conn;
use crate::plugins::services;
use crate::stages::UnregisterTool;

/// Per-process state of these methods (a restarted plugin subscribes again).
#[derive(Default)]
pub struct OwnState {
    /// The forwarder of `settings.changed`, while subscribed.
    settings_sub: Option<SpawnHandle>,
}

impl PluginProcess {
    /// Handles `call` if it is one of these methods; gives it back otherwise.
    pub(super) fn on_own_request(
        &mut self,
        id: u64,
        call: PluginRequest,
        ctx: &mut HostContext<Self>,
    ) -> Option<PluginRequest> {
        let conn = self.conn.clone()?;
        match call {
            PluginRequest::ToolUnregister(p) => {
                let (stages, info) = (self.deps.stages.clone(), self.info.clone());
                let msg = UnregisterTool {
                    plugin: self.name().to_owned(),
                    name: p.name.clone(),
                };
                let fut = async move { stages.send(msg).await };
                ctx.spawn(
                    actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, _, _| match res {
                        Ok(Ok(())) => {
                            info.tools.lock().retain(|t| *t != p.name);
                            conn.respond(id, Ok(json!({"ok": true})));
                        }
                        Ok(Err(e)) => conn.respond(id, Err(invalid(e.to_string()))),
                        Err(e) => conn.respond(
                            id,
                            Err(RpcError {
                                code: RpcError::GONE,
                                message: e.to_string(),
                            }),
                        ),
                    }),
                );
            }
            PluginRequest::EventsSubscribe(p) => self.on_subscription(id, true, p, conn, ctx),
            PluginRequest::EventsUnsubscribe(p) => self.on_subscription(id, false, p, conn, ctx),
            PluginRequest::EventsPublish(p) => match services::events::publish(&self.deps.bus, self.name(), p) {
                Ok(v) => conn.respond(id, Ok(v)),
                Err(e) => conn.respond(id, Err(e)),
            },
            other => return Some(other),
        }
        None
    }

    /// `events.subscribe` (`on`) / `events.unsubscribe`: kernel event types are
    /// forwarded by `services::EventSub` as `event` notifications, `settings.changed`
    /// by [`Self::forward_settings`].
    fn on_subscription(&mut self, id: u64, on: bool, p: EventsSubscribe, conn: Arc<Conn>, ctx: &mut HostContext<Self>) {
        if let Err(e) = services::events::check_topics(on, &p) {
            return conn.respond(id, Err(e));
        }
        let kernel: Vec<String> = p.topics.iter().filter(|t| is_kernel_event_topic(t)).cloned().collect();
        let whole = p.topics.is_empty() && !on;
        if on && !kernel.is_empty() {
            let c = conn.clone();
            let bus = self.deps.bus.clone();
            let sub = EventsSubscribe { topics: kernel };
            if let Err(e) = self.events.subscribe(&bus, sub, move |ev| {
                c.notify_typed(KernelRequest::Event(serde_json::to_value(&*ev).unwrap_or_default()))
            }) {
                return conn.respond(id, Err(e));
            }
        } else if !on && (whole || !kernel.is_empty()) {
            self.events.unsubscribe(EventsSubscribe { topics: kernel });
        }
        if whole && let Some(h) = self.own.settings_sub.take() {
            ctx.cancel_future(h);
        }
        if p.topics.iter().any(|t| t == methods::SETTINGS_CHANGED) {
            if let Some(h) = self.own.settings_sub.take() {
                ctx.cancel_future(h);
            }
            if on {
                self.own.settings_sub = Some(self.forward_settings(conn.clone(), ctx));
            }
        }
        tracing::info!(plugin = %self.name(), topics = ?p.topics, subscribe = on, "event subscription");
        conn.respond(id, Ok(json!({"topics": p.topics})));
    }

    /// Forwards changes of `plugin.<name>.*` to the plugin as `settings.changed`
    /// notifications, with the raw (unmasked) value read back from the settings actor.
    fn forward_settings(&self, conn: Arc<Conn>, ctx: &mut HostContext<Self>) -> SpawnHandle {
        let (mut rx, config, plugin) = (
            self.deps.bus.subscribe_settings(),
            self.deps.config.clone(),
            self.name().to_owned(),
        );
        let (confiner, registry) = (self.deps.confiner.clone(), self.deps.registry.clone());
        let supervisor = self.info.supervisor_id.clone();
        let prefix = format!("{}{plugin}.", crate::config::PLUGIN_PREFIX);
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(async move {
            loop {
                let ev = match rx.recv().await {
                    Ok(ev) => ev,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(%plugin, missed = n, "event bus overflowed; setting changes may be missed");
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                let Some((key, _)) = ev.changed_setting() else {
                    continue;
                };
                let Some(short) = key.strip_prefix(&prefix) else {
                    continue;
                };
                let value = match config.send(GetSetting(key.to_owned())).await {
                    Ok(Ok(v)) => v.unwrap_or(Value::Null),
                    other => {
                        tracing::warn!(%plugin, %key, "cannot read a changed setting: {other:?}");
                        continue;
                    }
                };
                if confiner.owner_setting_changed(&plugin, key, &value) {
                    // A new process with the new grants reads the setting at start.
                    tracing::info!(%plugin, %key, "the change grants other paths: restarting the plugin");
                    if let Err(e) = crate::supervisor::restart_actor(&registry, &supervisor).await {
                        tracing::warn!(%plugin, "cannot restart for new grants: {e}");
                    }
                    return;
                }
                let note = SettingValue {
                    key: short.to_owned(),
                    value,
                };
                conn.notify_typed(KernelRequest::SettingsChanged(note));
            }
        }))
    }
}
