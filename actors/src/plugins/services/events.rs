//! The `events` family: subscriptions to kernel events (forwarded as `event`
//! notifications to subprocess plugins, as calls of the handler to Lua plugins) and
//! publishing a plugin's own `plugin_event`. Shared by both kinds of plugin.

use std::collections::BTreeSet;
use std::sync::Arc;

use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::{
    self as m, EVENT_TOPICS, EventsPublish, EventsSubscribe, is_kernel_event_topic,
};
use parking_lot::RwLock;
use serde_json::{Value, json};

use super::errors::bad;
use crate::bus::{EventBus, KernelEvent};

/// Whether the topics of an `events.subscribe` (`on`) or `events.unsubscribe` are
/// usable: a subscription names at least one, and each is a special topic or a
/// kernel event type.
pub fn check_topics(on: bool, p: &EventsSubscribe) -> Result<(), RpcError> {
    let method = if on { m::EVENTS_SUBSCRIBE } else { m::EVENTS_UNSUBSCRIBE };
    if on && p.topics.is_empty() {
        return Err(bad(
            method,
            "`topics` is empty; list topics such as [\"agent_output\"] or [\"settings.changed\"]",
        ));
    }
    if let Some(t) = p
        .topics
        .iter()
        .find(|t| !EVENT_TOPICS.contains(&t.as_str()) && !is_kernel_event_topic(t))
    {
        return Err(bad(
            method,
            format!(
                "unknown event topic `{t}`; topics: {}, or a kernel event type such as agent_output (`*` = all)",
                EVENT_TOPICS.join(", ")
            ),
        ));
    }
    Ok(())
}

/// `events.publish`: checks the event and puts it on the bus under the plugin's name
/// (the kernel stamps it, so no plugin speaks for another).
pub fn publish(bus: &EventBus, plugin: &str, p: EventsPublish) -> Result<Value, RpcError> {
    p.check().map_err(|e| bad(m::EVENTS_PUBLISH, e))?;
    bus.publish(crate::bus::Event::PluginEvent {
        plugin: plugin.to_owned(),
        topic: p.topic,
        data: p.data,
    });
    Ok(json!({"ok": true}))
}

/// A plugin's event subscription: the types it wants and the task forwarding them.
/// Dropping it (the plugin stopped) ends the forwarding.
#[derive(Default)]
pub struct EventSub {
    types: Arc<RwLock<BTreeSet<String>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for EventSub {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl EventSub {
    /// Adds `types` (`"*"` = all); starts forwarding to `sink` on the first call.
    pub fn subscribe(
        &mut self,
        bus: &EventBus,
        req: EventsSubscribe,
        sink: impl Fn(Arc<KernelEvent>) + Send + 'static,
    ) -> Result<Value, RpcError> {
        if req.topics.is_empty() {
            return Err(bad(
                m::EVENTS_SUBSCRIBE,
                "`topics` is empty; list event types (e.g. [\"agent_output\"]) or [\"*\"] for all",
            ));
        }
        self.types.write().extend(req.topics);
        if self.task.is_none() {
            let (mut rx, types) = (bus.subscribe(), self.types.clone());
            self.task = Some(tokio::task::spawn_local(async move {
                use tokio::sync::broadcast::error::RecvError;
                loop {
                    match rx.recv().await {
                        Ok(ev) => {
                            let wanted = {
                                let t = types.read();
                                t.contains("*") || t.contains(ev.kind())
                            };
                            if wanted {
                                sink(ev);
                            }
                        }
                        Err(RecvError::Lagged(n)) => tracing::debug!(missed = n, "plugin event subscriber lagged"),
                        Err(RecvError::Closed) => break,
                    }
                }
            }));
        }
        Ok(json!({ "topics": self.types.read().iter().collect::<Vec<_>>() }))
    }

    /// Removes `types` (all when empty).
    pub fn unsubscribe(&mut self, req: EventsSubscribe) -> Value {
        {
            let mut t = self.types.write();
            if req.topics.is_empty() {
                t.clear();
            } else {
                for x in &req.topics {
                    t.remove(x);
                }
            }
        }
        json!({ "topics": self.types.read().iter().collect::<Vec<_>>() })
    }
}
