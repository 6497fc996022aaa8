//! What the kernel itself has to tell the owner — a budget limit reached — goes where
//! the owner is: the plugin channel (a chat bridge) the owner's last input came from,
//! with that input's routing fields, besides the WebUI, which shows every bus event.
//!
//! Why the last input's route: the kernel knows no address book of the owner's; the
//! bridge the owner last wrote from is where a reply reaches them, as the answer to
//! that input did.

use std::sync::Arc;

use serde_json::{Value, json};

use super::channels::Channels;
use crate::bus::{Event, EventBus};

/// A plugin channel and the routing fields (`meta`) of an input that came through it.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub channel: String,
    pub meta: Value,
}

/// The route of the owner's last input from a plugin channel (none yet: the owner has
/// only used the WebUI, the HTTP API or the terminal client, which the WebUI covers).
#[derive(Debug, Default)]
pub struct OwnerRoute(parking_lot::Mutex<Option<Route>>);

impl OwnerRoute {
    pub fn set(&self, route: Route) {
        *self.0.lock() = Some(route);
    }

    pub fn get(&self) -> Option<Route> {
        self.0.lock().clone()
    }
}

/// Sends each `budget_reached` (published once per limit and period) to the owner's
/// route, for the daemon's life.
pub fn forward_notices(bus: &EventBus, channels: Channels, route: Arc<OwnerRoute>) {
    let mut rx = bus.subscribe();
    actix::spawn(async move {
        loop {
            let ev = match rx.recv().await {
                Ok(ev) => ev,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            };
            let Event::BudgetReached { message, .. } = &ev.event else {
                continue;
            };
            let Some(r) = route.get() else { continue };
            let Some(deliver) = channels.deliver(&r.channel) else {
                continue;
            };
            let msg = json!({
                "channel": r.channel,
                "payload": message,
                "type": "text",
                "meta": r.meta,
                "source": "kernel",
            });
            if let Err(e) = deliver.call(msg).await {
                tracing::warn!(channel = %r.channel, "the budget notice could not be sent to the owner's chat: {e}; the WebUI shows it");
            }
        }
    });
}
