//! One running MCP server process and the JSON-RPC connection to it (threads, no
//! async runtime): a reader for its stdout, one for its stderr (the log tail), and a
//! dedicated wait for its exit, which fails every call still waiting at once.
//!
//! The connection's events go out on a crossbeam channel of their own, which the
//! server's supervisor selects on together with its control channel. The exit is
//! signalled by disconnecting a channel nobody sends on: every thread waiting for it
//! wakes at once, with no condition variable to loop on.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use homeagent_plugin_protocol::sdk::Call;
use serde_json::{Value, json};

use crate::config::ServerConfig;
use crate::protocol::{self, Era, Incoming, RpcError};

/// Lines of a server's stderr kept for error messages.
const STDERR_TAIL: usize = 20;

/// What the connection tells the server's supervisor.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `notifications/tools/list_changed` from the process of this generation.
    ListChanged(u64),
    /// The process of this generation exited.
    Exited(u64, String),
}

/// Why a call got no result.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The server answered with an error.
    Rpc(RpcError),
    /// The process is gone (the message says why, with its last stderr lines).
    Gone(String),
    Timeout(Duration),
    /// The kernel gave up on the tool call.
    Cancelled,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc(e) => write!(f, "MCP error {}: {}", e.code, e.message),
            CallError::Gone(m) => f.write_str(m),
            CallError::Timeout(d) => write!(f, "no answer within {d:?}"),
            CallError::Cancelled => f.write_str("cancelled"),
        }
    }
}

enum Reply {
    Done(Result<Value, RpcError>),
    Gone(String),
    Cancelled,
}

type Pending = Arc<Mutex<HashMap<i64, Sender<Reply>>>>;

/// The connection to one server process.
pub struct Client {
    pub server: String,
    pub generation: u64,
    pub pid: u32,
    stdin: Mutex<Option<ChildStdin>>,
    pending: Pending,
    next: AtomicI64,
    era: Mutex<Option<Era>>,
    /// Why the process ended, once it has.
    exit: Mutex<Option<String>>,
    /// Disconnects when the process has ended (its only sender is dropped by the wait
    /// thread, after `exit` is set): waiting for the exit is a `recv`.
    exited: Receiver<()>,
}

fn push_tail(tail: &Mutex<VecDeque<String>>, line: String) {
    let mut t = tail.lock().expect("tail lock");
    if t.len() >= STDERR_TAIL {
        t.pop_front();
    }
    t.push_back(line);
}

impl Client {
    /// Starts the server. Its events go to `events`, tagged with `generation`.
    pub fn spawn(
        server: &str,
        cfg: &ServerConfig,
        generation: u64,
        events: Sender<Event>,
    ) -> Result<Arc<Client>, String> {
        let mut cmd = Command::new(&cfg.command);
        cmd.args(&cfg.args)
            .envs(&cfg.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a stop also reaches what it started.
            .process_group(0);
        if let Some(dir) = &cfg.cwd {
            cmd.current_dir(dir);
        }
        // SAFETY: prctl is async-signal-safe; the server dies with the thread that
        // started it (the server's supervisor thread, which lives as long as the bridge).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "cannot start MCP server `{server}` (`{}`): {e}; check `command` in plugin.mcp.servers and that it is installed and on PATH",
                cfg.command
            )
        })?;
        let pid = child.id();
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let (exit_tx, exited) = crossbeam_channel::bounded::<()>(0);
        let client = Arc::new(Client {
            server: server.to_owned(),
            generation,
            pid,
            stdin: Mutex::new(Some(stdin)),
            pending: Arc::default(),
            next: AtomicI64::new(1),
            era: Mutex::new(None),
            exit: Mutex::new(None),
            exited,
        });
        let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();

        let (t, name) = (tail.clone(), server.to_owned());
        std::thread::Builder::new()
            .name(format!("mcp-{server}-stderr"))
            .spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    eprintln!("[mcp:{name}] {line}");
                    push_tail(&t, line);
                }
            })
            .map_err(|e| e.to_string())?;

        let (c, ev) = (client.clone(), events.clone());
        std::thread::Builder::new()
            .name(format!("mcp-{server}-out"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if !line.trim().is_empty() {
                        c.on_line(&line, &ev);
                    }
                }
            })
            .map_err(|e| e.to_string())?;

        let (c, name) = (client.clone(), server.to_owned());
        std::thread::Builder::new()
            .name(format!("mcp-{server}-wait"))
            .spawn(move || {
                let status = child
                    .wait()
                    .map_or_else(|e| format!("unknown ({e})"), |s| s.to_string());
                let last: Vec<String> = tail.lock().expect("tail lock").iter().cloned().collect();
                let mut reason = format!("MCP server `{name}` (pid {pid}) exited ({status})");
                if !last.is_empty() {
                    let n = last.len().saturating_sub(3);
                    reason.push_str(&format!("; last stderr: {}", last[n..].join(" | ")));
                }
                c.on_exit(&reason);
                drop(exit_tx); // wakes every `wait_exit`
                let _ = events.send(Event::Exited(c.generation, reason));
            })
            .map_err(|e| e.to_string())?;
        Ok(client)
    }

    fn on_line(&self, line: &str, events: &Sender<Event>) {
        match protocol::classify(line) {
            Incoming::Response { id, result } => {
                if let Some(tx) = self.pending.lock().expect("pending lock").remove(&id) {
                    let _ = tx.send(Reply::Done(result));
                }
            }
            Incoming::Request { id, method, .. } => {
                // We declare no client capabilities; only ping must be answered.
                let answer = if method == "ping" {
                    Ok(json!({}))
                } else {
                    Err((-32601, format!("the HomeAgent MCP bridge does not offer `{method}`")))
                };
                self.write(&protocol::response(&id, answer));
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "notifications/tools/list_changed" => {
                    let _ = events.send(Event::ListChanged(self.generation));
                }
                "notifications/message" => {
                    let level = params.get("level").and_then(Value::as_str).unwrap_or("info");
                    eprintln!(
                        "[mcp:{}] {level}: {}",
                        self.server,
                        params.get("data").unwrap_or(&Value::Null)
                    );
                }
                _ => {}
            },
            Incoming::Junk(why) => eprintln!("[mcp:{}] unreadable line dropped: {why}", self.server),
        }
    }

    fn on_exit(&self, reason: &str) {
        *self.exit.lock().expect("exit lock") = Some(reason.to_owned());
        self.stdin.lock().expect("stdin lock").take();
        let waiting: Vec<_> = self.pending.lock().expect("pending lock").drain().collect();
        for (_, tx) in waiting {
            let _ = tx.send(Reply::Gone(reason.to_owned()));
        }
    }

    /// Why the process ended, if it has.
    pub fn exited(&self) -> Option<String> {
        self.exit.lock().expect("exit lock").clone()
    }

    fn write(&self, line: &str) -> bool {
        let mut stdin = self.stdin.lock().expect("stdin lock");
        let Some(w) = stdin.as_mut() else { return false };
        let ok = w.write_all(line.as_bytes()).is_ok() && w.write_all(b"\n").is_ok() && w.flush().is_ok();
        if !ok {
            stdin.take();
        }
        ok
    }

    pub fn set_era(&self, era: Era) {
        *self.era.lock().expect("era lock") = Some(era);
    }

    pub fn era(&self) -> Option<Era> {
        self.era.lock().expect("era lock").clone()
    }

    /// Sends a notification (stateless era: with `_meta`).
    pub fn notify(&self, method: &str, params: Value) {
        let params = match self.era() {
            Some(Era::Modern(v)) => protocol::with_meta(params, &v),
            _ => params,
        };
        self.write(&protocol::notification(method, params));
    }

    /// Calls `method` and waits for the answer, at most `timeout`; `call` (a kernel tool
    /// call) may cancel the wait. A call given up on is cancelled at the server with
    /// `notifications/cancelled`.
    pub fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        call: Option<&Call>,
    ) -> Result<Value, CallError> {
        if let Some(reason) = self.exited() {
            return Err(CallError::Gone(reason));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.pending.lock().expect("pending lock").insert(id, tx);
        if let Some(call) = call {
            let pending = self.pending.clone();
            call.on_cancel(move || {
                if let Some(tx) = pending.lock().expect("pending lock").remove(&id) {
                    let _ = tx.send(Reply::Cancelled);
                }
            });
        }
        let line = protocol::request(id, method, params, self.era().as_ref());
        if !self.write(&line) {
            self.pending.lock().expect("pending lock").remove(&id);
            let reason = self
                .exited()
                .unwrap_or_else(|| format!("MCP server `{}` closed its input", self.server));
            return Err(CallError::Gone(reason));
        }
        let outcome = match rx.recv_timeout(timeout) {
            Ok(Reply::Done(Ok(v))) => return Ok(v),
            Ok(Reply::Done(Err(e))) => return Err(CallError::Rpc(e)),
            Ok(Reply::Gone(reason)) => return Err(CallError::Gone(reason)),
            Ok(Reply::Cancelled) => CallError::Cancelled,
            Err(_) => {
                self.pending.lock().expect("pending lock").remove(&id);
                CallError::Timeout(timeout)
            }
        };
        let reason = match &outcome {
            CallError::Cancelled => "the HomeAgent kernel abandoned the tool call".to_owned(),
            other => format!("client gave up: {other}"),
        };
        eprintln!(
            "mcp: cancelled request {id} ({method}) at server `{}`: {reason}",
            self.server
        );
        self.notify("notifications/cancelled", json!({"requestId": id, "reason": reason}));
        Err(outcome)
    }

    /// Waits up to `d` for the process to end; whether it has.
    pub fn wait_exit(&self, d: Duration) -> bool {
        match self.exited.recv_timeout(d) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signals our own child's process group (its pid, see `process_group(0)`).
        unsafe { libc::kill(-(self.pid as i32), sig) };
    }

    /// The stdio shutdown: close its input, then SIGTERM, then SIGKILL, `grace` apart.
    pub fn shutdown(&self, grace: Duration) {
        self.stdin.lock().expect("stdin lock").take();
        if self.wait_exit(grace) {
            self.signal(libc::SIGKILL); // anything left in its group
            return;
        }
        self.signal(libc::SIGTERM);
        if !self.wait_exit(grace) {
            self.signal(libc::SIGKILL);
            self.wait_exit(grace);
        }
    }

    /// Kills the process group at once (a stop that must not wait).
    pub fn kill(&self) {
        self.signal(libc::SIGKILL);
    }
}
