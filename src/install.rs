//! `homed plugin install FILE`: sends an `.hmap` package to the running daemon's
//! `POST /api/v1/plugins/install` and reports its answer.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};

/// Installs `file` into the daemon listening on `listen` (whose data directory, with
/// the owner token, is `data`); answers a one-line summary.
pub async fn install_package(listen: SocketAddr, data: &Path, file: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let token = crate::auth::read_token(data).context("pass the daemon's --data directory")?;
    let url = format!("http://{listen}/api/v1/plugins/install");
    let client = awc::Client::builder().timeout(Duration::from_secs(300)).finish();
    let mut resp = client
        .post(&url)
        .insert_header(("content-type", "application/zip"))
        .insert_header(("authorization", format!("Bearer {token}")))
        .send_body(bytes)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot reach the daemon at {listen}: {e}; is homed running on this data dir (or pass its --listen)?"
            )
        })?;
    let body: serde_json::Value = resp
        .json()
        .limit(1024 * 1024)
        .await
        .map_err(|e| anyhow::anyhow!("unreadable answer from the daemon: {e}"))?;
    if !resp.status().is_success() {
        bail!(
            "{} refused: {}",
            file.display(),
            body["error"].as_str().unwrap_or("unknown error")
        );
    }
    Ok(format!(
        "installed {} {} ({}), state {}, sha256 {}",
        body["name"].as_str().unwrap_or("?"),
        body["version"].as_str().unwrap_or("?"),
        body["kind"].as_str().unwrap_or("?"),
        body["plugin"]["state"].as_str().unwrap_or("?"),
        body["checksum"].as_str().unwrap_or("?"),
    ))
}
