//! The bundled MCP bridge, built with the Rust SDK. It runs as `homed plugin mcp` (or
//! as the standalone `homeagent-mcp`) and makes the tools of MCP servers — stdio
//! processes and remote servers over Streamable HTTP — available to the model as
//! `mcp__<server>__<tool>`.
//!
//! The servers come from the setting `plugin.mcp.servers` (an `mcpServers` object);
//! the bridge subscribes to `settings.changed` and applies every change live.
//!
//! * [`names`]: exposed tool names (sanitising, length cap, collisions);
//! * [`config`]: the setting's shapes and the diff between two versions;
//! * [`protocol`]: JSON-RPC lines, version negotiation, paging, result text;
//! * [`client`]: one server's connection (a process, or an HTTP session);
//! * [`http`], [`sse`], [`oauth`]: the Streamable HTTP transport, its event streams
//!   and the authorization flow for servers that answer 401;
//! * [`bridge`]: per-server supervisors (respawn with backoff) and the manager;
//! * [`conformance`]: the bridge as a one-shot client the official MCP conformance
//!   suite drives (`homed plugin mcp-client URL`).

pub mod body;
pub mod bridge;
pub mod client;
pub mod config;
pub mod conformance;
pub mod http;
pub mod names;
pub mod oauth;
pub mod protocol;
pub mod sse;

use std::sync::mpsc;

use homeagent_plugin_protocol::methods::{SETTINGS_CHANGED, SettingValue};
use homeagent_plugin_protocol::sdk::Plugin;
use serde_json::Value;

/// The setting (under `plugin.mcp.`) that lists the servers.
pub const SERVERS_KEY: &str = "servers";

/// Serves the plugin protocol on stdin/stdout; the exit code for the process.
pub fn run() -> i32 {
    let (tx, rx) = mpsc::channel::<Value>();
    let on_change = tx.clone();
    let result = Plugin::new("mcp")
        .on_event(move |_, topic, data| {
            if topic != SETTINGS_CHANGED {
                return;
            }
            if let Ok(s) = serde_json::from_value::<SettingValue>(data)
                && s.key == SERVERS_KEY
            {
                let _ = on_change.send(s.value);
            }
        })
        .run(move |kernel| {
            // Subscribe first, then read: a change in between arrives twice, harmlessly.
            if let Err(e) = kernel.subscribe(&[SETTINGS_CHANGED]) {
                eprintln!("mcp: cannot subscribe to setting changes ({e}); changes need a plugin restart");
            }
            match kernel.setting(SERVERS_KEY) {
                Ok(v) => {
                    let _ = tx.send(v);
                }
                Err(e) => eprintln!("mcp: cannot read plugin.mcp.{SERVERS_KEY}: {e}"),
            }
            let k = kernel.clone();
            std::thread::Builder::new()
                .name("mcp-manager".into())
                .spawn(move || bridge::manage(k, rx))
                .expect("spawn a thread");
        });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mcp: {e}");
            1
        }
    }
}
