//! The built-in CLI channel: `waiter` talks to the agent over a Unix socket.
//!
//! One connection is one session. The client sends text lines; the daemon answers
//! each with one JSON line, `{"type":"response","content":…}` or
//! `{"type":"error","error":…}`. A message to the agent is streamed first: zero or
//! more `{"type":"delta","content":…}` lines as the model writes (a new round after
//! tool calls starts with a `"\n\n"` delta) and `{"type":"tool","name":…,"status":…}`
//! when a tool call ends, then the final line, whose content is the whole answer. When `plugin.cli.api_key` is set, the first line must
//! be `/auth <key>`. Lines starting with a `/command` are handled here (an unknown one
//! is answered with the list of commands, never sent to the model); anything
//! else is a message to the agent (source and channel `cli`), answered when the agent
//! has answered. The socket is created with mode 0600: only the daemon's user may talk
//! to the agent this way, and never a confined process (a plugin's command running as
//! the same user): such a peer is refused before it can send a line.

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
use homeagent_actors::i18n::{CLI_COMMANDS, Msg};
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
    pub plugins: Arc<homeagent_actors::plugins::set::PluginSet>,
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
                    Ok((mut stream, _)) => {
                        // Landlock (before ABI 9) cannot close a path socket to the
                        // confined: the socket checks its peer instead.
                        if let Some(pid) = stream.peer_cred().ok().and_then(|c| c.pid())
                            && homeagent_confine::is_confined(pid as u32)
                        {
                            tracing::warn!(pid, "CLI socket: refused a confined process");
                            let _ = stream.write_all(&frame(Err(Msg::CliConfinedPeer.text()))).await;
                            continue;
                        }
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
                .write_all(&frame(Err(Msg::CliLineTooLong { max: MAX_LINE }.text())))
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
                if write.write_all(&frame(Ok(Msg::CliAuthenticated.text()))).await.is_err() {
                    return;
                }
                continue;
            }
            let _ = write.write_all(&frame(Err(Msg::CliUnauthorized.text()))).await;
            return;
        }
        let answer = if line.starts_with('/') {
            handle(&line, &deps).await
        } else {
            match converse(&line, &deps, &mut write).await {
                Some(answer) => answer,
                None => return, // the client went away; the task goes on
            }
        };
        if write.write_all(&frame(answer)).await.is_err() {
            return;
        }
    }
}

/// How many tools the model is offered on its next call: the list the task builds its
/// request from (`agent::task::tool_list`: the registered tools less the hidden ones,
/// plus the output channels' `output_send__*` tools), less those the agent is refused.
async fn model_tool_count(deps: &CliDeps) -> usize {
    let agent = &deps.agent.deps;
    let Ok(registry) = agent.stages.send(GetTools).await else {
        return 0;
    };
    let (list, _) = homeagent_actors::agent::task::tool_list(agent, &registry);
    list.iter()
        .filter(|d| !agent.refused_tools.contains(&d.function.name.as_str()))
        .count()
}

/// Whether `line` names a command of the CLI (its first word is one of
/// [`CLI_COMMANDS`]); any other line starting with `/` is answered here with the
/// list of commands and never sent to the model.
fn is_unknown_command(line: &str) -> Option<&str> {
    let first = line.split_whitespace().next().unwrap_or("");
    (first.starts_with('/') && !CLI_COMMANDS.contains(&first)).then_some(first)
}

async fn handle(line: &str, deps: &CliDeps) -> Result<String, String> {
    let mut words = line.split_whitespace();
    match words.next().unwrap_or("") {
        "/help" => Ok(Msg::CliHelp.text()),
        "/status" => {
            let llm = deps
                .agent
                .deps
                .llm
                .send(GetLlmStatus)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Msg::CliStatus {
                uptime_s: deps.started.elapsed().as_secs(),
                sources: llm.sources.len(),
                actors: deps.registry.len(),
                plugins: deps.plugins.len(),
                tools: model_tool_count(deps).await,
            }
            .text())
        }
        "/settings" => match words.next() {
            Some("set") => {
                let (Some(key), rest) = (words.next(), words.collect::<Vec<_>>().join(" ")) else {
                    return Err(Msg::CliSettingUsage.text());
                };
                if rest.is_empty() {
                    return Err(Msg::CliSettingUsage.text());
                }
                let value = serde_json::from_str(&rest).unwrap_or(Value::String(rest.clone()));
                let update = UpdateSettings(
                    [(key.to_owned(), value)].into_iter().collect(),
                    homeagent_actors::config::Author::Cli,
                );
                deps.config
                    .send(update)
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                Ok(Msg::CliSettingSet { key, value: &rest }.text())
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
                    Ok(Msg::CliNoSetting.text())
                } else {
                    Ok(Msg::CliSettings {
                        count: rows.len(),
                        rows: &rows.join("\n"),
                    }
                    .text())
                }
            }
        },
        "/approvals" => {
            let open = deps.agent.deps.firewall.approvals.list();
            if open.is_empty() {
                return Ok(Msg::CliNoApprovals.text());
            }
            Ok(open
                .iter()
                .map(|q| format!("#{} {} {} — {}", q.id, q.tool, q.summary, q.why))
                .collect::<Vec<_>>()
                .join("\n"))
        }
        verb @ ("/approve" | "/deny") => {
            let Some(id) = words.next().and_then(|w| w.trim_start_matches('#').parse::<u64>().ok()) else {
                return Err(Msg::CliApprovalUsage.text());
            };
            let allowed = verb == "/approve";
            let q = deps
                .agent
                .deps
                .firewall
                .approvals
                .answer(id, allowed)
                .map_err(|e| e.to_string())?;
            Ok(Msg::CliApprovalAnswered {
                id,
                tool: &q.tool,
                allowed,
            }
            .text())
        }
        "/plugin" if line.trim() == "/plugin list" => {
            if deps.plugins.is_empty() {
                Ok(Msg::CliNoPlugins.text())
            } else {
                Ok(Msg::CliPlugins {
                    count: deps.plugins.len(),
                    names: &deps.plugins.names().join("\n"),
                }
                .text())
            }
        }
        _ if is_unknown_command(line).is_some() => {
            let command = is_unknown_command(line).unwrap_or_default();
            tracing::info!(command, "unknown CLI command answered locally");
            Err(Msg::CliUnknownCommand { command }.text())
        }
        _ => Err(Msg::CliUnknownCommand { command: line }.text()),
    }
}

/// One JSON line of the stream before the answer.
fn event_frame(v: Value) -> Vec<u8> {
    let mut line = v.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// The line a streamed piece of the answer is sent as.
fn piece_frame(piece: crate::turn_stream::Piece) -> Vec<u8> {
    use crate::turn_stream::Piece;
    event_frame(match piece {
        Piece::Text(content) => json!({"type": "delta", "content": content}),
        Piece::Tool { name, status } => json!({"type": "tool", "name": name, "status": status}),
    })
}

/// A message to the agent (source and channel `cli`): its deltas and tool calls
/// streamed to the client as they happen, then the answer. `None` when the client
/// went away.
async fn converse(
    line: &str,
    deps: &CliDeps,
    write: &mut tokio::net::unix::OwnedWriteHalf,
) -> Option<Result<String, String>> {
    let mut input = Input::text("cli", line);
    input.channel = "cli".into();
    let (reply, rx) = ReplyTo::channel(&input.request_id);
    input.reply = reply;
    // Subscribed before the input is queued, so no delta of its task is missed.
    let mut bus = deps.agent.deps.bus.subscribe();
    let accepted = match deps.agent.event_loop.send(Inject(input)).await {
        Ok(Ok(a)) => a,
        Ok(Err(reason)) => {
            return Some(Err(Msg::CliNotRun {
                reason: &reason.to_string(),
            }
            .text()));
        }
        Err(e) => {
            return Some(Err(Msg::CliNotRun {
                reason: &Refusal::from(e).to_string(),
            }
            .text()));
        }
    };
    let task = accepted.task_id;
    let mut turn = crate::turn_stream::TurnStream::new(task.unwrap_or_default());
    tokio::pin!(rx);
    let reply = loop {
        use tokio::sync::broadcast::error::RecvError;
        tokio::select! {
            biased;
            ev = bus.recv(), if task.is_some() => match ev {
                Ok(ev) => {
                    if let Some(p) = turn.next(&ev)
                        && write.write_all(&piece_frame(p)).await.is_err()
                    {
                        return None;
                    }
                }
                Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "CLI stream lagged behind the bus"),
                Err(RecvError::Closed) => {}
            },
            r = &mut rx => {
                // Deltas still queued go out before the answer.
                while task.is_some()
                    && let Ok(ev) = bus.try_recv()
                {
                    if let Some(p) = turn.next(&ev)
                        && write.write_all(&piece_frame(p)).await.is_err()
                    {
                        return None;
                    }
                }
                break r;
            }
        }
    };
    let Ok(r) = reply else {
        return Some(Err(Msg::CliAgentUnavailable.text()));
    };
    if let Some(s) = r.skipped {
        return Some(Err(Msg::CliNotRun { reason: &s.to_string() }.text()));
    }
    Some(match r.error {
        Some(e) => Err(e),
        None => Ok(r.content),
    })
}
