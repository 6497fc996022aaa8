//! `homed selftest [--data DIR] [--listen ADDR]`: the self-check from outside.
//!
//! Decision (docs/DECISIONS.md): the CLI checks what it can on its own and asks the
//! running daemon for the rest. The databases get `PRAGMA quick_check` on read-only
//! connections; the LLM sources are probed by a virtual kernel — an LLM actor of this
//! process configured from the stored settings, one minimal call per source alone —
//! so a daemon that is down or wedged does not hide a working or broken vendor. The
//! plugins and the embedder only exist inside the daemon: their status comes from its
//! API (`GET /api/v1/plugins`, `GET /api/v1/memory/status`, with the owner token from
//! DATA/api-token); a daemon that does not answer is itself a failed part.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use homeagent_actors::agent::selftest::{self, Part, Report, Status};
use homeagent_actors::bus::EventBus;
use homeagent_actors::config::ConfigStore;
use homeagent_actors::llm::provider::{Configure, LlmActor};
use homeagent_actors::registry::Registry;
use homeagent_actors::supervisor::{RestartPolicy, SupervisorConfig, start_root};
use serde_json::Value;

/// GET `path` from the daemon with the owner token.
async fn get(listen: SocketAddr, token: &str, path: &str) -> Result<Value, String> {
    let client = awc::Client::builder().timeout(Duration::from_secs(30)).finish();
    let mut resp = client
        .get(format!("http://{listen}{path}"))
        .insert_header(("authorization", format!("Bearer {token}")))
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot reach the daemon at {listen}: {e}; is homed running on this data dir (or pass its --listen)?"
            )
        })?;
    if !resp.status().is_success() {
        return Err(format!("{path} answered {}", resp.status()));
    }
    resp.json::<Value>()
        .limit(8 * 1024 * 1024)
        .await
        .map_err(|e| format!("unreadable answer from {path}: {e}"))
}

/// The LLM sources, probed by this process's own LLM actor on the stored settings.
async fn sources(data: &Path) -> anyhow::Result<Vec<Part>> {
    let store = ConfigStore::open(&data.join("config.db"), data)
        .context("cannot open the settings database (DATA/config.db); pass the daemon's --data")?;
    let settings = store.all().context("cannot read the settings database")?;
    drop(store);
    let registry = Arc::new(Registry::default());
    let (root, _exit) = start_root(registry, EventBus::default(), "selftest", SupervisorConfig::default())
        .map_err(|e| anyhow::anyhow!("cannot start the virtual kernel: {e}"))?;
    let dir = data.to_owned();
    let arbiter = actix::Arbiter::new();
    let llm = root
        .worker_on(arbiter.handle(), "llm", RestartPolicy::Permanent, move || {
            Ok(LlmActor::new(dir.clone()))
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot start the LLM actor: {e}"))?;
    llm.send(Configure(settings))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let parts = selftest::check_sources(&llm).await;
    arbiter.stop();
    Ok(parts)
}

/// Runs every check; the report says what is broken.
pub async fn run(listen: SocketAddr, data: &Path) -> anyhow::Result<Report> {
    let mut parts = sources(data).await?;
    let token = crate::auth::read_token(data).context("pass the daemon's --data directory")?;
    match get(listen, &token, "/api/v1/memory/status").await {
        Ok(m) => parts.push(selftest::embedder_part(&m["embedder"], None)),
        Err(e) => parts.push(Part::new("daemon", listen.to_string(), Status::Fail, e)),
    }
    parts.extend(selftest::check_databases(data));
    if let Ok(p) = get(listen, &token, "/api/v1/plugins").await {
        for plugin in p["plugins"].as_array().into_iter().flatten() {
            parts.push(selftest::plugin_part(plugin));
        }
    }
    Ok(Report { parts })
}
