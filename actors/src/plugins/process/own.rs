//! The plugin's requests about itself: withdrawing one of its tools (`tool.unregister`)
//! and being told when its settings change (`events.subscribe` to `settings.changed`);
//! reading and writing them (`settings.*`) is in `plugins/services/settings.rs`, shared
//! with Lua plugins. Kept apart from the rest of the
//! protocol so that plugins whose tools change at run time (the MCP bridge) have
//! one place to look. Kernel event types subscribed with the same method are
//! forwarded by `services::EventSub` as `event` notifications.

use std::sync::Arc;

use actix::prelude::*;
use homeagent_plugin_protocol::frame::{Request, RpcError};
use homeagent_plugin_protocol::methods::{
    self, EVENT_TOPICS, EventsPublish, EventsSubscribe, SettingValue, ToolUnregister, is_kernel_event_topic,
};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::PluginProcess;
use crate::config::GetSetting;
use crate::host::{Host, HostContext};
use crate::plugins::conn::Conn;
use crate::stages::UnregisterTool;

/// `events.subscribe` with no topic is a mistake (`events.unsubscribe` with none ends all).
fn on_empty_subscribe(method: &str, p: &EventsSubscribe) -> bool {
    method == methods::EVENTS_SUBSCRIBE && p.topics.is_empty()
}

/// Per-process state of these methods (a restarted plugin subscribes again).
#[derive(Default)]
pub struct OwnState {
    /// The forwarder of `settings.changed`, while subscribed.
    settings_sub: Option<SpawnHandle>,
}

fn invalid(message: String) -> RpcError {
    RpcError {
        code: RpcError::INVALID_PARAMS,
        message,
    }
}

impl PluginProcess {
    /// Handles `req` if it is one of these methods; gives it back otherwise.
    pub(super) fn on_own_request(&mut self, req: Request, ctx: &mut HostContext<Self>) -> Option<Request> {
        let conn = self.conn.clone()?;
        let id = req.id;
        let bad = |e: serde_json::Error| invalid(format!("invalid params for `{}`: {e}", req.method));
        match req.method.as_str() {
            methods::TOOL_UNREGISTER => {
                let p: ToolUnregister = match serde_json::from_value(req.params.clone()) {
                    Ok(p) => p,
                    Err(e) => {
                        conn.respond(id, Err(bad(e)));
                        return None;
                    }
                };
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
                        Ok(Err(e)) => conn.respond(id, Err(invalid(e))),
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
            methods::EVENTS_SUBSCRIBE | methods::EVENTS_UNSUBSCRIBE => {
                // `events.unsubscribe` without params ends every subscription.
                let params = if req.params.is_null() {
                    json!({})
                } else {
                    req.params.clone()
                };
                let p: EventsSubscribe = match serde_json::from_value(params) {
                    Ok(p) => p,
                    Err(e) => {
                        conn.respond(id, Err(bad(e)));
                        return None;
                    }
                };
                if on_empty_subscribe(&req.method, &p) {
                    let msg = "`topics` is empty; list topics such as [\"agent_output\"] or [\"settings.changed\"]";
                    conn.respond(id, Err(invalid(msg.into())));
                    return None;
                }
                if let Some(t) = p
                    .topics
                    .iter()
                    .find(|t| !EVENT_TOPICS.contains(&t.as_str()) && !is_kernel_event_topic(t))
                {
                    let msg = format!(
                        "unknown event topic `{t}`; topics: {}, or a kernel event type such as agent_output (`*` = all)",
                        EVENT_TOPICS.join(", ")
                    );
                    conn.respond(id, Err(invalid(msg)));
                    return None;
                }
                let on = req.method == methods::EVENTS_SUBSCRIBE;
                // Kernel event types: forwarded as `event` notifications (plugins/services.rs).
                let kernel: Vec<String> = p.topics.iter().filter(|t| is_kernel_event_topic(t)).cloned().collect();
                let whole = p.topics.is_empty() && !on;
                if on && !kernel.is_empty() {
                    let c = conn.clone();
                    let bus = self.deps.bus.clone();
                    let sub = EventsSubscribe { topics: kernel };
                    if let Err(e) = self.events.subscribe(&bus, sub, move |ev| {
                        c.notify(methods::EVENT, serde_json::to_value(&*ev).unwrap_or_default())
                    }) {
                        conn.respond(id, Err(e));
                        return None;
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
            methods::EVENTS_PUBLISH => {
                let p = serde_json::from_value::<EventsPublish>(req.params.clone())
                    .map_err(bad)
                    .and_then(|p| p.check().map(|()| p).map_err(invalid));
                match p {
                    Ok(p) => {
                        self.deps.bus.publish(crate::bus::Event::PluginEvent {
                            plugin: self.name().to_owned(),
                            topic: p.topic,
                            data: p.data,
                        });
                        conn.respond(id, Ok(json!({"ok": true})));
                    }
                    Err(e) => conn.respond(id, Err(e)),
                }
            }
            _ => return Some(req),
        }
        None
    }

    /// Forwards changes of `plugin.<name>.*` to the plugin as `settings.changed`
    /// notifications, with the raw (unmasked) value read back from the settings actor.
    fn forward_settings(&self, conn: Arc<Conn>, ctx: &mut HostContext<Self>) -> SpawnHandle {
        let (mut rx, config, plugin) = (
            self.deps.bus.subscribe(),
            self.deps.config.clone(),
            self.name().to_owned(),
        );
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
                let note = SettingValue {
                    key: short.to_owned(),
                    value,
                };
                conn.notify(
                    methods::SETTINGS_CHANGED,
                    serde_json::to_value(note).expect("serialisable"),
                );
            }
        }))
    }
}
