//! The JSON-RPC connection to one MCP server (threads, no async runtime), over
//! either transport:
//!
//! * stdio: a server process, a reader for its stdout, one for its stderr (the log
//!   tail), and a dedicated wait for its exit, which fails every call still waiting
//!   at once;
//! * Streamable HTTP ([`crate::http`]): each message POSTed on a thread of its own,
//!   the answer read as JSON or as an SSE stream (resumed with `Last-Event-ID` after
//!   the server's `retry:` delay when it ends before the answer), and a GET stream
//!   for what the server sends on its own. The session's end (DELETE, a 404 for the
//!   session, a stop) is this transport's "exit".
//!
//! The connection's events go out on a crossbeam channel of their own, which the
//! server's supervisor selects on together with its control channel. The exit is
//! signalled by disconnecting a channel nobody sends on: every thread waiting for it
//! wakes at once, with no condition variable to loop on.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Weak;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use homeagent_plugin_protocol::sdk::Call;
use serde_json::{Value, json};

use crate::config::{HttpConfig, ServerConfig};
use crate::http::{self, Answer, HttpError};
use crate::protocol::{self, Era, Incoming, RpcError};
use crate::sse;

/// Resumptions of one answer's SSE stream before giving up on it.
const MAX_RESUMES: u32 = 5;
/// The wait before resuming when the server sent no `retry:`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// How long [`Client::listen`] waits for the server to answer the first GET.
const LISTEN_WAIT: Duration = Duration::from_secs(2);
/// Time for a POST that carries no request (a notification or a response).
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a `tools/call` may take here (the kernel usually cancels sooner).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);

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
    /// The process is gone (the message says why, with its last stderr lines), or
    /// the HTTP session ended.
    Gone(String),
    /// The HTTP request failed (the status or the network error).
    Transport(String),
    Timeout(Duration),
    /// The kernel gave up on the tool call.
    Cancelled,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc(e) => write!(f, "MCP error {}: {}", e.code, e.message),
            CallError::Gone(m) | CallError::Transport(m) => f.write_str(m),
            CallError::Timeout(d) => write!(f, "no answer within {d:?}"),
            CallError::Cancelled => f.write_str("cancelled"),
        }
    }
}

enum Reply {
    Done(Result<Value, RpcError>),
    Gone(String),
    Failed(String),
    Cancelled,
}

type Pending = Arc<Mutex<HashMap<i64, Sender<Reply>>>>;

/// How messages reach the server.
enum Io {
    /// The server process's stdin (`None` once closed).
    Stdio(Mutex<Option<ChildStdin>>),
    Http(Box<http::Conn>),
}

/// The connection to one server.
pub struct Client {
    pub server: String,
    pub generation: u64,
    /// The server process (stdio only).
    pub pid: Option<u32>,
    io: Io,
    /// This client, for the threads an HTTP send starts.
    me: Weak<Client>,
    events: Sender<Event>,
    /// The HTTP session was closed by us (no reconnection of its streams).
    closing: AtomicBool,
    /// Dropped when the connection has ended (see `exited`).
    exit_tx: Mutex<Option<Sender<()>>>,
    pending: Pending,
    next: AtomicI64,
    era: Mutex<Option<Era>>,
    /// Why the process ended, once it has.
    exit: Mutex<Option<String>>,
    /// Disconnects when the connection has ended (its only sender, `exit_tx`, is
    /// dropped after `exit` is set): waiting for the exit is a `recv`.
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
        let client = Client::new(
            server,
            generation,
            Some(pid),
            Io::Stdio(Mutex::new(Some(stdin))),
            events,
        );
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

        let c = client.clone();
        std::thread::Builder::new()
            .name(format!("mcp-{server}-out"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if !line.trim().is_empty() {
                        c.on_line(&line);
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
                c.finish(&reason);
            })
            .map_err(|e| e.to_string())?;
        Ok(client)
    }

    fn new(server: &str, generation: u64, pid: Option<u32>, io: Io, events: Sender<Event>) -> Arc<Client> {
        let (exit_tx, exited) = crossbeam_channel::bounded::<()>(0);
        Arc::new_cyclic(|me| Client {
            server: server.to_owned(),
            generation,
            pid,
            io,
            me: me.clone(),
            events,
            closing: AtomicBool::new(false),
            exit_tx: Mutex::new(Some(exit_tx)),
            pending: Arc::default(),
            next: AtomicI64::new(1),
            era: Mutex::new(None),
            exit: Mutex::new(None),
            exited,
        })
    }

    /// A connection to a remote server (nothing is sent until the first call: the
    /// caller initializes it, see the bridge's `initialize`).
    pub fn connect_http(
        server: &str,
        cfg: &HttpConfig,
        generation: u64,
        events: Sender<Event>,
    ) -> Result<Arc<Client>, String> {
        let conn = http::Conn::new(cfg)?;
        Ok(Client::new(server, generation, None, Io::Http(Box::new(conn)), events))
    }

    /// Where the server is, for log lines.
    pub fn describe(&self) -> String {
        match (&self.io, self.pid) {
            (Io::Http(c), _) => c.url.to_string(),
            (_, Some(pid)) => format!("pid {pid}"),
            _ => "stdio".into(),
        }
    }

    /// Whether this is a remote (HTTP) server.
    pub fn is_remote(&self) -> bool {
        matches!(self.io, Io::Http(_))
    }

    /// The connection has ended: fail what waits, wake `wait_exit`, tell the supervisor.
    fn finish(&self, reason: &str) {
        if self.exited().is_some() {
            return;
        }
        self.on_exit(reason);
        self.exit_tx.lock().expect("exit lock").take(); // wakes every `wait_exit`
        let _ = self.events.send(Event::Exited(self.generation, reason.to_owned()));
    }

    fn on_line(&self, line: &str) {
        let events = &self.events;
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
                self.write(&protocol::response(&id, answer), None);
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
        if let Io::Stdio(stdin) = &self.io {
            stdin.lock().expect("stdin lock").take();
        }
        let waiting: Vec<_> = self.pending.lock().expect("pending lock").drain().collect();
        for (_, tx) in waiting {
            let _ = tx.send(Reply::Gone(reason.to_owned()));
        }
    }

    /// Why the process ended, if it has.
    pub fn exited(&self) -> Option<String> {
        self.exit.lock().expect("exit lock").clone()
    }

    /// Sends one message; `id` is the request's, when it is one (its answer is then
    /// awaited in `pending`). `false` when it could not be sent at all.
    fn write(&self, line: &str, id: Option<i64>) -> bool {
        match &self.io {
            Io::Stdio(stdin) => {
                let mut stdin = stdin.lock().expect("stdin lock");
                let Some(w) = stdin.as_mut() else { return false };
                let ok = w.write_all(line.as_bytes()).is_ok() && w.write_all(b"\n").is_ok() && w.flush().is_ok();
                if !ok {
                    stdin.take();
                }
                ok
            }
            Io::Http(_) => {
                if self.exited().is_some() {
                    return false;
                }
                // Notifications and responses go out in order, from the caller: a
                // request sent next (tools/list after notifications/initialized)
                // must not overtake them.
                if id.is_none() {
                    self.post(line, None);
                    return true;
                }
                let Some(me) = self.me.upgrade() else { return false };
                let line = line.to_owned();
                std::thread::Builder::new()
                    .name(format!("mcp-{}-post", self.server))
                    .spawn(move || me.post(&line, id))
                    .is_ok()
            }
        }
    }

    fn conn(&self) -> Option<&http::Conn> {
        match &self.io {
            Io::Http(c) => Some(c),
            Io::Stdio(_) => None,
        }
    }

    /// Fails one waiting request with a transport error.
    fn fail(&self, id: i64, why: String) {
        if let Some(tx) = self.pending.lock().expect("pending lock").remove(&id) {
            let _ = tx.send(Reply::Failed(why));
        }
    }

    fn waiting(&self, id: i64) -> bool {
        self.pending.lock().expect("pending lock").contains_key(&id)
    }

    /// One POST and its answer (on its own thread).
    fn post(&self, line: &str, id: Option<i64>) {
        let Some(conn) = self.conn() else { return };
        let timeout = if id.is_some() { CALL_TIMEOUT } else { POST_TIMEOUT };
        match conn.post(line, timeout) {
            Ok(Answer::Accepted) => {
                if let Some(id) = id {
                    self.fail(
                        id,
                        format!(
                            "MCP server `{}` accepted request {id} without answering it",
                            self.server
                        ),
                    );
                }
            }
            Ok(Answer::Json(text)) => self.on_json(&text),
            Ok(Answer::Stream(resp)) => self.read_answer(conn, resp, id),
            Err(HttpError::SessionGone) => self.finish(&format!(
                "MCP server `{}` ({}) ended the session",
                self.server, conn.url
            )),
            Err(e) => {
                let why = format!("MCP server `{}` ({}): {e}", self.server, conn.url);
                match id {
                    Some(id) => self.fail(id, why),
                    None => eprintln!("mcp: {why}"),
                }
            }
        }
    }

    /// A JSON body: one message or a batch of them.
    fn on_json(&self, text: &str) {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(batch)) => {
                for m in batch {
                    self.on_line(&m.to_string());
                }
            }
            Ok(_) => self.on_line(text),
            Err(e) => eprintln!("[mcp:{}] unreadable answer dropped: not JSON ({e})", self.server),
        }
    }

    /// Reads a POST's SSE answer until the request is answered; a stream that ends
    /// first is resumed with GET + `Last-Event-ID` after the server's `retry:`.
    fn read_answer(&self, conn: &http::Conn, first: reqwest::blocking::Response, id: Option<i64>) {
        let mut parser = sse::Parser::default();
        let mut resp = first;
        let mut resumes = 0;
        loop {
            let read = parser.read(BufReader::new(resp), |ev| {
                if !ev.data.trim().is_empty() {
                    self.on_line(&ev.data);
                }
                // Stop reading once our answer is in (the stream may stay open).
                id.is_none_or(|id| self.waiting(id))
            });
            let Some(id) = id.filter(|&id| self.waiting(id)) else {
                return;
            };
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            let Some(last) = parser.last_id.clone() else {
                let why = match read {
                    Err(e) => format!("the answer stream broke ({e}) and carried no event id to resume from"),
                    Ok(()) => {
                        "the server closed the answer stream without answering, and sent no event id to resume from"
                            .into()
                    }
                };
                self.fail(id, format!("MCP server `{}`: {why}", self.server));
                return;
            };
            resumes += 1;
            if resumes > MAX_RESUMES {
                self.fail(
                    id,
                    format!(
                        "MCP server `{}`: no answer after {MAX_RESUMES} resumed streams",
                        self.server
                    ),
                );
                return;
            }
            let wait = parser.retry.unwrap_or(DEFAULT_RETRY);
            eprintln!(
                "mcp: server `{}`: answer stream of request {id} ended; resuming after event `{last}` in {wait:?}",
                self.server
            );
            std::thread::sleep(wait);
            match conn.get_stream(Some(&last)) {
                Ok(Some(r)) => resp = r,
                Ok(None) => {
                    self.fail(
                        id,
                        format!(
                            "MCP server `{}` cannot resume the answer stream (no GET stream)",
                            self.server
                        ),
                    );
                    return;
                }
                Err(HttpError::SessionGone) => {
                    self.finish(&format!("MCP server `{}` ended the session", self.server));
                    return;
                }
                Err(e) => {
                    self.fail(
                        id,
                        format!("MCP server `{}`: resuming the answer stream: {e}", self.server),
                    );
                    return;
                }
            }
        }
    }

    /// Opens the GET stream of server-initiated messages (HTTP only; a server may
    /// offer none). Reconnects after the server's `retry:` with `Last-Event-ID`,
    /// until the session ends or five attempts in a row bring nothing.
    ///
    /// Returns once the server has answered the first GET (at most [`LISTEN_WAIT`]):
    /// a GET that a loaded machine opened only after our first request would be taken
    /// by the server as that request's resumed answer stream (seen in the conformance
    /// suite's `sse-retry` under load), so the stream is up before any call.
    pub fn listen(&self) {
        if self.conn().is_none() {
            return;
        }
        let Some(me) = self.me.upgrade() else { return };
        let (opened, first_answer) = std::sync::mpsc::sync_channel::<()>(1);
        let spawned = std::thread::Builder::new()
            .name(format!("mcp-{}-get", self.server))
            .spawn(move || {
                let Some(conn) = me.conn() else { return };
                let mut parser = sse::Parser::default();
                let mut idle = 0;
                let mut opened = Some(opened);
                while me.exited().is_none() && !me.closing.load(Ordering::SeqCst) {
                    let answer = conn.get_stream(parser.last_id.as_deref());
                    if let Some(tx) = opened.take() {
                        let _ = tx.try_send(());
                    }
                    let resp = match answer {
                        Ok(Some(r)) => r,
                        Ok(None) => return,
                        Err(HttpError::SessionGone) => {
                            me.finish(&format!("MCP server `{}` ended the session", me.server));
                            return;
                        }
                        Err(e) => {
                            eprintln!("mcp: server `{}`: GET stream: {e}", me.server);
                            idle += 1;
                            if idle >= 5 {
                                return;
                            }
                            std::thread::sleep(parser.retry.unwrap_or(DEFAULT_RETRY) * idle);
                            continue;
                        }
                    };
                    let mut got = false;
                    let _ = parser.read(BufReader::new(resp), |ev| {
                        got = true;
                        if !ev.data.trim().is_empty() {
                            me.on_line(&ev.data);
                        }
                        me.exited().is_none() && !me.closing.load(Ordering::SeqCst)
                    });
                    idle = if got { 0 } else { idle + 1 };
                    if idle >= 5 {
                        return;
                    }
                    std::thread::sleep(parser.retry.unwrap_or(DEFAULT_RETRY));
                }
            });
        // A server that never answers the GET holds only that thread, not the setup.
        if spawned.is_ok() {
            let _ = first_answer.recv_timeout(LISTEN_WAIT);
        }
    }

    pub fn set_era(&self, era: Era) {
        if let Some(c) = self.conn() {
            c.set_version(era.version());
        }
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
        self.write(&protocol::notification(method, params), None);
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
        if !self.write(&line, Some(id)) {
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
            Ok(Reply::Failed(why)) => return Err(CallError::Transport(why)),
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
        if let Some(pid) = self.pid {
            // SAFETY: signals our own child's process group (its pid, see `process_group(0)`).
            unsafe { libc::kill(-(pid as i32), sig) };
        }
    }

    /// The stdio shutdown: close its input, then SIGTERM, then SIGKILL, `grace` apart.
    /// An HTTP session is ended with DELETE.
    pub fn shutdown(&self, grace: Duration) {
        let stdin = match &self.io {
            Io::Stdio(stdin) => stdin,
            Io::Http(conn) => {
                self.closing.store(true, Ordering::SeqCst);
                conn.delete();
                self.finish(&format!("MCP server `{}`: session closed", self.server));
                return;
            }
        };
        stdin.lock().expect("stdin lock").take();
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

    /// Kills the process group at once (a stop that must not wait); an HTTP session
    /// is dropped here and ended at the server in the background.
    pub fn kill(&self) {
        if self.is_remote() {
            self.closing.store(true, Ordering::SeqCst);
            if let Some(me) = self.me.upgrade() {
                let _ = std::thread::Builder::new()
                    .name(format!("mcp-{}-delete", self.server))
                    .spawn(move || {
                        if let Some(c) = me.conn() {
                            c.delete();
                        }
                    });
            }
            self.finish(&format!("MCP server `{}`: session dropped", self.server));
            return;
        }
        self.signal(libc::SIGKILL);
    }
}
