//! `GET /api/v1/events`: the live stream behind the dashboard.
//!
//! One task per client merges two sources into one SSE stream: an `actors` snapshot
//! every `interval_ms`, and every event published on the kernel bus (the SSE event
//! name is the event's type). The task ends when the client goes away.

use std::time::Duration;

use actix_web::{Responder, web};
use actix_web_lab::sse::{self, Sse};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use homeagent_actors::bus::{DaemonPhase, Event};

use super::AppState;
use super::error::ApiError;

/// Query of `GET /api/v1/events`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Milliseconds between `actors` snapshots (default 1000, minimum 100).
    pub interval_ms: Option<u64>,
}

#[utoipa::path(
    get, path = "/api/v1/events", tag = "events",
    params(EventsQuery),
    responses(
        (status = 200, description = "Server-Sent Events: `actors` snapshots and every kernel event", content_type = "text/event-stream"),
        (status = 400, description = "interval_ms below 100", body = super::error::ErrorBody),
    )
)]
pub async fn events(state: web::Data<AppState>, q: web::Query<EventsQuery>) -> Result<impl Responder, ApiError> {
    let interval_ms = q.interval_ms.unwrap_or(1000);
    if interval_ms < 100 {
        return Err(ApiError::bad_request(format!(
            "interval_ms must be at least 100 (got {interval_ms}); omit it for the default 1000"
        )));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<sse::Event>(64);
    let registry = state.registry.clone();
    let mut bus = state.bus.subscribe();
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut last = false;
        loop {
            let event = tokio::select! {
                _ = tick.tick() => {
                    sse::Data::new_json(json!({ "actors": registry.snapshot() })).map(|d| d.event("actors"))
                }
                ev = bus.recv() => match ev {
                    Ok(ev) => {
                        // The daemon is stopping: end the stream so the server's graceful
                        // shutdown does not wait for this never-ending response.
                        last = matches!(ev.event, Event::Daemon { phase: DaemonPhase::Stopping });
                        sse::Data::new_json(&*ev).map(|d| d.event(ev.kind()))
                    }
                    Err(RecvError::Lagged(n)) => {
                        sse::Data::new_json(json!({"type": "lagged", "missed": n})).map(|d| d.event("lagged"))
                    }
                    Err(RecvError::Closed) => break,
                },
            };
            let Ok(data) = event else { continue };
            if tx.send(data.into()).await.is_err() || last {
                break; // client disconnected, or daemon stopping
            }
        }
    });
    Ok(Sse::from_infallible_receiver(rx).with_keep_alive(Duration::from_secs(15)))
}
