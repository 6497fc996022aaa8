//! The kernel event bus: a broadcast of everything observable that happens.
//!
//! Not an actor on purpose: publishing must never block, queue behind a mailbox or
//! fail because nobody listens. Slow subscribers lose the oldest events (and learn
//! how many they lost) instead of slowing the kernel down.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::broadcast;

/// Event types the kernel itself publishes. Plugins may publish others.
pub mod kinds {
    /// A supervised actor instance started (`id`, `generation`).
    pub const ACTOR_STARTED: &str = "actor_started";
    /// An actor instance exited (`id`, `reason`, `abnormal`).
    pub const ACTOR_EXIT: &str = "actor_exit";
    /// An actor is being restarted (`id`, `restarts`, `by`: `supervisor` | `operator`).
    pub const ACTOR_RESTART: &str = "actor_restart";
    /// A supervisor gave up (restart intensity exceeded) and escalated (`id`, `reason`).
    pub const SUPERVISOR_ESCALATED: &str = "supervisor_escalated";
    /// A setting changed (`key`, `value`; `null` when deleted).
    pub const SETTING_CHANGED: &str = "setting_changed";
    /// Daemon lifecycle (`phase`: `ready` | `stopping`).
    pub const DAEMON: &str = "daemon";
}

/// One event: its type, when it happened, and a JSON object of details.
#[derive(Debug, Clone, Serialize)]
pub struct KernelEvent {
    #[serde(rename = "type")]
    pub kind: Cow<'static, str>,
    /// Unix time in milliseconds.
    pub ts_ms: u64,
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// Cheap-to-clone handle to the bus.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<KernelEvent>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(1024)
    }
}

impl EventBus {
    /// A bus that keeps up to `capacity` events for the slowest subscriber.
    pub fn new(capacity: usize) -> Self {
        Self {
            tx: broadcast::channel(capacity).0,
        }
    }

    /// Publishes an event; `data` should be a JSON object (anything else is wrapped
    /// as `{"value": data}`).
    pub fn publish(&self, kind: impl Into<Cow<'static, str>>, data: serde_json::Value) {
        let data = match data {
            serde_json::Value::Object(m) => m,
            serde_json::Value::Null => serde_json::Map::new(),
            other => serde_json::Map::from_iter([("value".to_owned(), other)]),
        };
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let event = KernelEvent {
            kind: kind.into(),
            ts_ms,
            data,
        };
        tracing::trace!(kind = %event.kind, "event");
        let _ = self.tx.send(Arc::new(event)); // Err only means "no subscriber"
    }

    /// A new subscription, starting with the next event.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<KernelEvent>> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_reach_every_subscriber_as_flat_json() {
        let bus = EventBus::new(8);
        let mut a = bus.subscribe();
        let mut b = bus.subscribe();
        bus.publish(
            kinds::ACTOR_EXIT,
            serde_json::json!({"id": "kernel/x", "reason": "panic: boom"}),
        );
        let ev = a.try_recv().unwrap();
        assert_eq!(b.try_recv().unwrap().kind, "actor_exit");
        let json = serde_json::to_value(&*ev).unwrap();
        assert_eq!(json["type"], "actor_exit");
        assert_eq!(json["id"], "kernel/x");
        assert!(json["ts_ms"].as_u64().unwrap() > 0);
    }

    #[test]
    fn slow_subscriber_lags_instead_of_blocking() {
        let bus = EventBus::new(2);
        let mut rx = bus.subscribe();
        for i in 0..5 {
            bus.publish("tick", serde_json::json!(i));
        }
        assert!(matches!(rx.try_recv(), Err(broadcast::error::TryRecvError::Lagged(3))));
        assert_eq!(rx.try_recv().unwrap().data["value"], 3);
    }
}
