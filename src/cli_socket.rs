//! The built-in CLI channel: `waiter` talks to the agent over a Unix socket.
//!
//! One connection is one session. The client sends text lines; the daemon answers
//! each with one JSON line, `{"type":"response","content":…}` or
//! `{"type":"error","error":…}`. When `plugin.cli.api_key` is set, the first line must
//! be `/auth <key>`. Lines starting with a known `/command` are handled here; anything
//! else is a message to the agent (source and channel `cli`), answered when the agent
//! has answered. The socket is created with mode 0600: only the daemon's user may talk
//! to the agent this way.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use actix::AsyncContext;
use homeagent_actors::agent::AgentHandles;
use homeagent_actors::agent::input::{Input, Refusal, ReplyTo};
use homeagent_actors::agent::intake::Inject;
use homeagent_actors::config::{CliConfig, ConfigActor, ReadSettings, UpdateSettings};
use homeagent_actors::host::HostContext;
use homeagent_actors::llm::provider::GetLlmStatus;
use homeagent_actors::stages::GetTools;
use homeagent_actors::{KernelActor, Registry, TAddr};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// Longest line a client may send (the reference stopped at 64 KiB).
pub const MAX_LINE: usize = 1024 * 1024;

/// What the CLI needs of the kernel.
#[derive(Clone)]
pub struct CliDeps {
    pub agent: AgentHandles,
    pub config: TAddr<ConfigActor>,
    pub registry: Arc<Registry>,
    pub plugins: Arc<homeagent_actors::plugins::host::PluginSet>,
    pub started: Instant,
}

/// The CLI socket actor (`kernel/plugins/cli`).
pub struct CliSocket {
    path: PathBuf,
    deps: CliDeps,
}

impl CliSocket {
    pub fn new(path: PathBuf, deps: CliDeps) -> Self {
        Self { path, deps }
    }
}

impl KernelActor for CliSocket {
    const KIND: &'static str = "cli";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::remove_file(&self.path); // a stale socket of a killed daemon
        let listener = match UnixListener::bind(&self.path) {
            Ok(l) => l,
            Err(e) => {
                let msg = format!(
                    "cannot listen on {}: {e}; pick another path with --socket",
                    self.path.display()
                );
                return homeagent_actors::Host::<Self>::fail(ctx, msg);
            }
        };
        if let Err(e) = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600)) {
            tracing::warn!("cannot restrict {} to mode 0600: {e}", self.path.display());
        }
        tracing::info!(socket = %self.path.display(), "CLI socket listening");
        let deps = self.deps.clone();
        ctx.spawn(actix::fut::wrap_future(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        actix::spawn(session(stream, deps.clone()));
                    }
                    Err(e) => {
                        tracing::warn!("CLI socket accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        }));
    }

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn frame(ok: Result<String, String>) -> Vec<u8> {
    let v = match ok {
        Ok(content) => json!({"type": "response", "content": content}),
        Err(error) => json!({"type": "error", "error": error}),
    };
    let mut line = v.to_string().into_bytes();
    line.push(b'\n');
    line
}

async fn session(stream: UnixStream, deps: CliDeps) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let key = match deps.config.send(ReadSettings).await {
        Ok(Ok(all)) => CliConfig::read(&all).api_key.expose().to_owned(),
        _ => String::new(),
    };
    let mut authed = key.is_empty();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match AsyncReadExt::take(&mut lines, MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.len() > MAX_LINE {
            let _ = write
                .write_all(&frame(Err(format!("line longer than {MAX_LINE} bytes; split it"))))
                .await;
            return;
        }
        let line = String::from_utf8_lossy(&buf).trim().to_owned();
        if line.is_empty() {
            continue;
        }
        if !authed {
            if line.strip_prefix("/auth ").map(str::trim) == Some(key.as_str()) {
                authed = true;
                if write.write_all(&frame(Ok("authenticated".into()))).await.is_err() {
                    return;
                }
                continue;
            }
            let _ = write.write_all(&frame(Err("unauthorized".into()))).await;
            return;
        }
        let answer = handle(&line, &deps).await;
        if write.write_all(&frame(answer)).await.is_err() {
            return;
        }
    }
}

const HELP: &str = "命令 (commands):
  /help                      this help
  /status                    uptime, LLM sources, actors, plugins, tools
  /settings [prefix]         list settings (secrets masked)
  /settings set <key> <value> set a setting (the value is JSON if it parses, else a string)
  /plugin list               loaded plugins
Anything else is a message to the agent.";

async fn handle(line: &str, deps: &CliDeps) -> Result<String, String> {
    let mut words = line.split_whitespace();
    match words.next().unwrap_or("") {
        "/help" => Ok(HELP.into()),
        "/status" => {
            let llm = deps
                .agent
                .deps
                .llm
                .send(GetLlmStatus)
                .await
                .map_err(|e| e.to_string())?;
            let tools = deps
                .agent
                .deps
                .stages
                .send(GetTools)
                .await
                .map(|t| t.len())
                .unwrap_or(0);
            Ok(format!(
                "uptime: {}s\nLLM: {} source(s){}\nactors: {}\nplugins: {}\ntools: {}",
                deps.started.elapsed().as_secs(),
                llm.sources.len(),
                if llm.sources.is_empty() {
                    " (none configured: see /settings core.llm)"
                } else {
                    ""
                },
                deps.registry.len(),
                deps.plugins.len(),
                tools
            ))
        }
        "/settings" => match words.next() {
            Some("set") => {
                let (Some(key), rest) = (words.next(), words.collect::<Vec<_>>().join(" ")) else {
                    return Err("usage: /settings set <key> <value>".into());
                };
                if rest.is_empty() {
                    return Err("usage: /settings set <key> <value>".into());
                }
                let value = serde_json::from_str(&rest).unwrap_or(Value::String(rest.clone()));
                let update = UpdateSettings([(key.to_owned(), value)].into_iter().collect());
                deps.config
                    .send(update)
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                Ok(format!("已设置: {key} = {rest}"))
            }
            prefix => {
                let all = deps
                    .config
                    .send(homeagent_actors::config::GetSettings)
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                let rows: Vec<String> = all
                    .iter()
                    .filter(|(k, _)| prefix.is_none_or(|p| k.starts_with(p)))
                    .map(|(k, v)| format!("  {k} = {v}"))
                    .collect();
                if rows.is_empty() {
                    Ok("无匹配配置项 (no matching setting)".into())
                } else {
                    Ok(format!("配置 ({} 项):\n{}", rows.len(), rows.join("\n")))
                }
            }
        },
        "/plugin" if line.trim() == "/plugin list" => {
            if deps.plugins.is_empty() {
                Ok("无已加载插件 (no plugins)".into())
            } else {
                Ok(format!(
                    "已加载插件 ({}):\n{}",
                    deps.plugins.len(),
                    deps.plugins.names().join("\n")
                ))
            }
        }
        _ => {
            let mut input = Input::text("cli", line);
            input.channel = "cli".into();
            let (reply, rx) = ReplyTo::channel(&input.request_id);
            input.reply = reply;
            deps.agent
                .event_loop
                .send(Inject(input))
                .await
                .map_err(|e| format!("not run: {}", Refusal::from(e)))?
                .map_err(|reason: Refusal| format!("not run: {reason}"))?;
            let r = rx.await.map_err(|_| "agent is not available".to_string())?;
            if let Some(s) = r.skipped {
                return Err(format!("not run: {s}"));
            }
            match r.error {
                Some(e) => Err(e),
                None => Ok(r.content),
            }
        }
    }
}
