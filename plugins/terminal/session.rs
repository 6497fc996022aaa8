//! The sessions the plugin keeps: each a program on a PTY with a bounded scrollback,
//! the model's read position in it, and three threads — a reader (PTY → scrollback),
//! a waiter (the exit status) and a publisher (new output → `terminal.output` events,
//! coalesced so a chatty program cannot flood the kernel's bus).
//!
//! Offsets are absolute byte counts since the session started, so a reader (the model,
//! the WebUI panel) that fell behind the scrollback learns how much it lost.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::pty;
use crate::text::complete_utf8;

/// Where events go: `(topic, data)` (the kernel's `events.publish`; tests collect them).
pub type Sink = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// Topic of output events: `{session, offset, data, dropped?}`.
pub const TOPIC_OUTPUT: &str = "terminal.output";
/// Topic of lifecycle events: `{session, state, ...}` with `state` `started`,
/// `exited` or `closed`.
pub const TOPIC_SESSION: &str = "terminal.session";

/// Least time between two output events of a session (what arrives meanwhile is
/// carried by one event).
const COALESCE: Duration = Duration::from_millis(10);
/// Most output bytes in one event; more in one interval is cut from the front (the
/// event says how much with `dropped`).
pub const MAX_EVENT_BYTES: usize = 16 * 1024;
/// How long a closed session's processes get after `SIGHUP` before `SIGKILL`.
const HUP_GRACE: Duration = Duration::from_millis(300);
/// How long `send` waits for the program to take its input.
const WRITE_WAIT: Duration = Duration::from_secs(5);

/// The limits in force (settings `plugin.terminal.*`, read at each `create`).
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_sessions: usize,
    pub scrollback: usize,
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_sessions: 8,
            scrollback: 256 * 1024,
            idle: Duration::from_secs(30 * 60),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exited with code {c}"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// The changing part of a session.
struct State {
    buf: VecDeque<u8>,
    /// Absolute offset of `buf[0]`.
    start: u64,
    /// Where the model's next plain read starts.
    read_at: u64,
    /// What the publisher has sent.
    published: u64,
    /// The PTY gave end of file (every holder of the slave side is gone).
    eof: bool,
    exit: Option<Exit>,
    closed: bool,
    last_active: Instant,
    /// When output last arrived.
    last_output: Instant,
}

impl State {
    fn end(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    fn push(&mut self, bytes: &[u8], cap: usize) {
        self.buf.extend(bytes);
        if self.buf.len() > cap {
            let drop = self.buf.len() - cap;
            self.buf.drain(..drop);
            self.start += drop as u64;
        }
        self.last_output = Instant::now();
        self.last_active = self.last_output;
    }

    /// Bytes from `from` (clamped to what is kept) up to at most `max` of them.
    fn slice(&self, from: u64, max: usize) -> (u64, Vec<u8>) {
        let from = from.max(self.start).min(self.end());
        let i = (from - self.start) as usize;
        let n = (self.buf.len() - i).min(max);
        (from, self.buf.range(i..i + n).copied().collect())
    }
}

/// One terminal session.
pub struct Session {
    pub id: u32,
    pub pid: u32,
    pub command: String,
    pub cwd: PathBuf,
    pub rows: u16,
    pub cols: u16,
    pub started_ms: u64,
    idle: Duration,
    input: mpsc::Sender<(Vec<u8>, mpsc::Sender<std::io::Result<()>>)>,
    state: Mutex<State>,
    changed: Condvar,
}

/// What a read found.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// Offset of `data`'s first byte.
    pub offset: u64,
    pub data: Vec<u8>,
    /// Bytes between the requested offset and `offset` that the scrollback no longer has.
    pub dropped: u64,
    /// New output after this chunk (not returned: over `max`).
    pub more: u64,
    pub exit: Option<Exit>,
}

impl Chunk {
    pub fn next(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

/// When a read may return.
#[derive(Debug, Clone)]
pub enum Until {
    /// Output arrived and then nothing for this long (or the program ended).
    Quiet(Duration),
    /// The new output (as plain text) contains this.
    Text(String),
}

impl Session {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("session lock")
    }

    pub fn exit(&self) -> Option<Exit> {
        self.lock().exit
    }

    /// `running`, `exited with code 0`, ...
    pub fn status(&self) -> String {
        self.lock().exit.map_or_else(|| "running".to_owned(), |e| e.to_string())
    }

    /// Writes `bytes` to the program's input; fails when it does not take them within
    /// a few seconds (it is not reading, e.g. stopped) or has ended.
    pub fn send(&self, bytes: Vec<u8>) -> Result<(), String> {
        self.lock().last_active = Instant::now();
        let (tx, rx) = mpsc::channel();
        self.input.send((bytes, tx)).map_err(|_| {
            "the session's input is closed (the program ended); read what is left, then close it".to_owned()
        })?;
        match rx.recv_timeout(WRITE_WAIT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!(
                "writing to the terminal failed: {e}; the program may have ended"
            )),
            Err(_) => Err(format!(
                "the program did not take its input within {} s (it is not reading: stopped, or busy); the input stays queued — read its output, or send C-c",
                WRITE_WAIT.as_secs()
            )),
        }
    }

    /// Waits until `until` holds (or `timeout`, or the program ended), then answers
    /// up to `max` bytes from `from` (`None`: the model's position, which then moves).
    pub fn read(&self, from: Option<u64>, max: usize, until: &Until, timeout: Duration) -> Chunk {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        st.last_active = Instant::now();
        let start_at = from.unwrap_or(st.read_at);
        loop {
            let new = st.end() > start_at;
            let done = st.exit.is_some() && st.eof;
            let ready = match until {
                Until::Quiet(q) => new && st.last_output.elapsed() >= *q,
                Until::Text(t) => {
                    new && {
                        let (_, bytes) = st.slice(start_at, usize::MAX);
                        crate::text::plain(&bytes).contains(t.as_str())
                    }
                }
            };
            let now = Instant::now();
            if ready || done || now >= deadline {
                break;
            }
            let wait = match until {
                Until::Quiet(q) if new => q.saturating_sub(st.last_output.elapsed()).max(Duration::from_millis(5)),
                _ => deadline - now,
            };
            st = self
                .changed
                .wait_timeout(st, wait.min(deadline - now))
                .expect("session lock")
                .0;
        }
        let (offset, data) = st.slice(start_at, max);
        let chunk = Chunk {
            offset,
            dropped: offset.saturating_sub(start_at),
            more: st.end() - offset - data.len() as u64,
            exit: st.exit,
            data,
        };
        if from.is_none() {
            st.read_at = chunk.next();
        }
        chunk
    }

    /// `{id, pid, command, cwd, rows, cols, started_ms, status, bytes, unread}`.
    pub fn info(&self) -> Value {
        let st = self.lock();
        json!({
            "id": self.id, "pid": self.pid, "command": self.command, "cwd": self.cwd,
            "rows": self.rows, "cols": self.cols, "started_ms": self.started_ms,
            "status": st.exit.map_or_else(|| "running".to_owned(), |e| e.to_string()),
            "running": st.exit.is_none(), "bytes": st.end(), "unread": st.end() - st.read_at.max(st.start),
        })
    }
}

/// The plugin's sessions.
pub struct Terminals {
    sessions: Mutex<BTreeMap<u32, Arc<Session>>>,
    next: AtomicU32,
    sink: Sink,
}

/// What to start.
pub struct Spec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, OsString)>,
    pub rows: u16,
    pub cols: u16,
    /// The sandbox's network switch; off: a private network namespace.
    pub network: bool,
}

impl Terminals {
    pub fn new(sink: Sink) -> Arc<Self> {
        let t = Arc::new(Self {
            sessions: Mutex::default(),
            next: AtomicU32::new(1),
            sink,
        });
        // The idle reaper holds only a weak handle: it ends with the store.
        let weak = Arc::downgrade(&t);
        std::thread::spawn(move || {
            while let Some(t) = weak.upgrade() {
                t.reap_idle();
                drop(t);
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        t
    }

    fn map(&self) -> MutexGuard<'_, BTreeMap<u32, Arc<Session>>> {
        self.sessions.lock().expect("sessions lock")
    }

    pub fn get(&self, id: u32) -> Result<Arc<Session>, String> {
        let map = self.map();
        map.get(&id).cloned().ok_or_else(|| {
            let open: Vec<String> = map.keys().map(u32::to_string).collect();
            format!(
                "no terminal session {id} (open: {}); start one with terminal_create",
                if open.is_empty() {
                    "none".to_owned()
                } else {
                    open.join(", ")
                }
            )
        })
    }

    pub fn list(&self) -> Vec<Arc<Session>> {
        self.map().values().cloned().collect()
    }

    /// Starts a session within `limits`.
    pub fn create(&self, spec: Spec, limits: &Limits) -> Result<Arc<Session>, String> {
        {
            let map = self.map();
            if map.len() >= limits.max_sessions {
                let ids: Vec<String> = map.keys().map(u32::to_string).collect();
                return Err(format!(
                    "{} terminal sessions are open (the limit, plugin.terminal.max_sessions); close one with terminal_close (open: {})",
                    map.len(),
                    ids.join(", ")
                ));
            }
        }
        let pty::Spawned { mut child, master } =
            pty::spawn(&spec.argv, &spec.cwd, &spec.env, spec.rows, spec.cols, spec.network)
                .map_err(|e| format!("cannot start `{}` on a terminal: {e} (is it installed?)", spec.argv[0]))?;
        let reader = master
            .try_clone()
            .map_err(|e| format!("cannot use the terminal: {e}"))?;
        let (input, input_rx) = mpsc::channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let session = Arc::new(Session {
            id,
            pid: child.id(),
            command: spec.argv.join(" "),
            cwd: spec.cwd,
            rows: spec.rows,
            cols: spec.cols,
            started_ms: now_ms(),
            idle: limits.idle,
            input,
            state: Mutex::new(State {
                buf: VecDeque::new(),
                start: 0,
                read_at: 0,
                published: 0,
                eof: false,
                exit: None,
                closed: false,
                last_active: now,
                last_output: now,
            }),
            changed: Condvar::new(),
        });
        self.map().insert(id, session.clone());
        (self.sink)(TOPIC_SESSION, json!({"state": "started", "session": session.info()}));
        tracing_line(&format!(
            "terminal {id} started: {} (pid {})",
            session.command, session.pid
        ));

        let cap = limits.scrollback;
        let s = session.clone();
        std::thread::spawn(move || read_loop(&s, reader, cap));
        let mut writer = master;
        std::thread::spawn(move || {
            for (bytes, ack) in input_rx {
                let _ = ack.send(writer.write_all(&bytes).and_then(|()| writer.flush()));
            }
        });
        let (s, sink) = (session.clone(), self.sink.clone());
        std::thread::spawn(move || {
            use std::os::unix::process::ExitStatusExt;
            let status = child.wait();
            let exit = match status {
                Ok(st) => st
                    .code()
                    .map_or_else(|| Exit::Signal(st.signal().unwrap_or(0)), Exit::Code),
                Err(_) => Exit::Code(-1),
            };
            let closed = {
                let mut st = s.lock();
                st.exit = Some(exit);
                st.closed
            };
            s.changed.notify_all();
            if !closed {
                sink(TOPIC_SESSION, json!({"state": "exited", "session": s.info()}));
            }
        });
        let (s, sink) = (session.clone(), self.sink.clone());
        std::thread::spawn(move || publish_loop(&s, &sink));
        Ok(session)
    }

    /// Ends session `id`: its processes are killed, it leaves the list.
    pub fn close(&self, id: u32, why: &str) -> Result<Arc<Session>, String> {
        let s = self.get(id)?;
        self.map().remove(&id);
        s.lock().closed = true;
        s.changed.notify_all();
        pty::kill_session(s.pid, HUP_GRACE);
        let mut info = s.info();
        info["reason"] = json!(why);
        (self.sink)(TOPIC_SESSION, json!({"state": "closed", "session": info}));
        tracing_line(&format!("terminal {id} closed: {why}"));
        Ok(s)
    }

    /// Closes every session (the plugin is stopping).
    pub fn close_all(&self, why: &str) {
        let ids: Vec<u32> = self.map().keys().copied().collect();
        for id in ids {
            let _ = self.close(id, why);
        }
    }

    fn reap_idle(&self) {
        let idle: Vec<(u32, Duration)> = self
            .list()
            .iter()
            .filter(|s| s.lock().last_active.elapsed() >= s.idle)
            .map(|s| (s.id, s.idle))
            .collect();
        for (id, d) in idle {
            let _ = self.close(
                id,
                &format!("idle for {} s (plugin.terminal.idle_timeout_secs)", d.as_secs()),
            );
        }
    }
}

fn tracing_line(msg: &str) {
    eprintln!("{msg}");
}

fn read_loop(s: &Session, mut master: File, cap: usize) {
    let mut buf = [0u8; 8192];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                s.lock().push(&buf[..n], cap);
                s.changed.notify_all();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EIO: every holder of the slave side is gone.
            Err(_) => break,
        }
    }
    s.lock().eof = true;
    s.changed.notify_all();
}

fn publish_loop(s: &Session, sink: &Sink) {
    // Leading edge: output after a quiet spell goes out at once (a typed key's echo
    // is not delayed); more within `COALESCE` of the last event waits for the next.
    let mut last_sent = Instant::now() - COALESCE;
    loop {
        let mut st = s.lock();
        while st.published >= st.end() && !st.eof && !st.closed {
            st = s.changed.wait(st).expect("session lock");
        }
        if st.closed || (st.eof && st.published >= st.end()) {
            return;
        }
        drop(st);
        std::thread::sleep(COALESCE.saturating_sub(last_sent.elapsed()));
        let mut st = s.lock();
        let end = st.end();
        let wanted = st.published;
        let (offset, mut data) = st.slice(wanted.max(end.saturating_sub(MAX_EVENT_BYTES as u64)), MAX_EVENT_BYTES);
        if !st.eof {
            data.truncate(complete_utf8(&data));
        }
        st.published = offset + data.len() as u64;
        drop(st);
        if data.is_empty() {
            // Only a cut character so far: wait for the rest without spinning.
            last_sent = Instant::now();
            continue;
        }
        let mut ev = json!({"session": s.id, "offset": offset, "data": String::from_utf8_lossy(&data)});
        if offset > wanted {
            ev["dropped"] = json!(offset - wanted);
        }
        sink(TOPIC_OUTPUT, ev);
        last_sent = Instant::now();
    }
}
