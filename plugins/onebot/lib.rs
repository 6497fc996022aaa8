//! The bundled QQ bridge: OneBot v11 over a forward WebSocket, the protocol NapCat and
//! Lagrange serve (the reference's QQ path). It runs as `homed plugin onebot`.
//!
//! * **In**: private messages, and group messages that @-mention the bot
//!   (`plugin.onebot.group_trigger`: `mention`, `all`, `off`), are injected as input
//!   under the source `onebot/private:<qq>` / `onebot/group:<group>` and a security
//!   profile its manifest declares: `owner` for private messages from
//!   `plugin.onebot.owner_id`, `guest` for everyone else and for every group (others
//!   read the answer there), so the firewall refuses a guest the owner-only tools.
//! * **Out**: the agent's answer to such an input (`agent_output` with that source)
//!   goes back where the message came from (`send_private_msg` / `send_group_msg`,
//!   matched by `echo`); the output channel `qq` (`output_send__qq`, meta `{"user_id"}`
//!   or `{"group_id"}`, default the owner) sends proactive messages.
//! * **Connection**: `plugin.onebot.url` (`ws://host:port/`) with
//!   `plugin.onebot.access_token` as `Authorization: Bearer`; reconnects with backoff
//!   (1 s doubling to 60 s, reset after a connection that worked) and at once when
//!   those settings change.
//!
//! Not yet: images and files (they wait for the kernel's media blocks; an image
//! segment is dropped from the text, and the channel carries text only).

pub mod wire;

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use homeagent_plugin_protocol::sdk::{Kernel, Plugin};
use homeagent_plugin_protocol::{PluginRequest, methods};
use serde_json::{Value, json};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

use wire::{Backoff, GroupTrigger, Incoming, Target};

/// How long an action waits for its answer.
const ACTION_TIMEOUT: Duration = Duration::from_secs(10);
/// The socket's read timeout: how often the loop looks at its outbox.
const POLL: Duration = Duration::from_millis(20);
/// Longest text sent in one message (QQ refuses much longer ones).
pub const MAX_TEXT: usize = 4000;

static KERNEL: OnceLock<Kernel> = OnceLock::new();

fn setting(key: &str) -> Value {
    KERNEL.get().and_then(|k| k.setting(key).ok()).unwrap_or(Value::Null)
}

/// The bridge's state shared by its threads.
#[derive(Default)]
pub struct Bridge {
    /// Frames for the current connection (none while disconnected).
    outbox: Mutex<Option<mpsc::Sender<String>>>,
    /// Actions waiting for their answer, by `echo`.
    pending: Mutex<HashMap<String, mpsc::Sender<(bool, Value)>>>,
    next: AtomicU64,
    /// Bumped when the connection settings change: the current connection ends.
    generation: AtomicU64,
    /// Injected tasks and where their answer goes (for failed turns, which carry no source).
    tasks: Mutex<HashMap<u64, Target>>,
}

impl Bridge {
    /// Sends `text` to `target` and waits for the implementation's answer.
    pub fn send(&self, target: Target, text: &str) -> Result<Value, String> {
        let text = homeagent_plugin_protocol::toolkit::prefix(text, MAX_TEXT);
        let echo = format!("ha-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::channel();
        self.pending.lock().expect("pending").insert(echo.clone(), tx);
        let frame = target.send_action(text, &echo).to_string();
        let queued = self.outbox.lock().expect("outbox").as_ref().map(|o| o.send(frame));
        if !matches!(queued, Some(Ok(()))) {
            self.pending.lock().expect("pending").remove(&echo);
            return Err(
                "QQ is not connected (plugin.onebot.url unset, or the OneBot server is unreachable; the bridge retries)"
                    .into(),
            );
        }
        let answer = rx.recv_timeout(ACTION_TIMEOUT);
        self.pending.lock().expect("pending").remove(&echo);
        match answer {
            Ok((true, data)) => Ok(data),
            Ok((false, detail)) => Err(format!("the OneBot server refused the message: {detail}")),
            Err(_) => Err(format!(
                "no answer from the OneBot server within {} s",
                ACTION_TIMEOUT.as_secs()
            )),
        }
    }

    fn answered(&self, echo: &str, ok: bool, detail: Value) {
        if let Some(tx) = self.pending.lock().expect("pending").remove(echo) {
            let _ = tx.send((ok, detail));
        }
    }

    /// A message arrived: inject it (on its own thread: the kernel call waits).
    fn on_message(self: &Arc<Self>, m: wire::Message) {
        let owner = wire::id_of(&setting("owner_id"));
        let trigger = GroupTrigger::from_setting(&setting("group_trigger"));
        let Some(d) = wire::decide(&m, owner, trigger) else {
            return;
        };
        let Some(k) = KERNEL.get() else { return };
        let inject = methods::InjectText {
            text: d.text.clone(),
            source: Some(m.target.source()),
            profile: Some(d.profile.to_owned()),
            ..Default::default()
        };
        match k.request(PluginRequest::InjectText(inject)) {
            Ok(v) => {
                eprintln!(
                    "onebot: {} message from {} injected as {}",
                    m.target.source(),
                    m.user_id,
                    d.profile
                );
                if let Some(task) = v["task_id"].as_u64() {
                    let mut tasks = self.tasks.lock().expect("tasks");
                    if tasks.len() > 1024 {
                        tasks.clear(); // answers long gone; keep the map bounded
                    }
                    tasks.insert(task, m.target);
                }
            }
            Err(e) => eprintln!("onebot: cannot inject a message from {}: {e}", m.user_id),
        }
    }

    /// A kernel event: the answer to one of our inputs goes back to its chat.
    fn on_kernel_event(self: &Arc<Self>, ev: &Value) {
        if ev["type"] != "agent_output" {
            return;
        }
        let target = ev["source"].as_str().and_then(Target::from_source).or_else(|| {
            ev["task_id"]
                .as_u64()
                .and_then(|t| self.tasks.lock().expect("tasks").remove(&t))
        });
        let (Some(target), Some(text)) = (target, ev["text"].as_str()) else {
            return;
        };
        if text.trim().is_empty() {
            return;
        }
        let (b, text) = (self.clone(), text.to_owned());
        std::thread::spawn(move || {
            if let Err(e) = b.send(target, &text) {
                eprintln!("onebot: the answer to {} was not delivered: {e}", target.source());
            }
        });
    }

    /// `output_send__qq`.
    fn output(&self, msg: &Value) -> Result<String, String> {
        let text = msg["payload"].as_str().unwrap_or("");
        let target = match Target::from_meta(&msg["meta"])? {
            Some(t) => t,
            None => Target::Private(wire::id_of(&setting("owner_id")).ok_or(
                "no recipient: give meta {\"user_id\": QQ} or {\"group_id\": GROUP}, or set plugin.onebot.owner_id",
            )?),
        };
        let data = self.send(target, text)?;
        Ok(format!(
            "sent to QQ {} (message id {})",
            target.source().trim_start_matches("onebot/"),
            data["message_id"]
        ))
    }

    /// Connects, serves, and reconnects with backoff, forever.
    fn connect_loop(self: Arc<Self>) {
        let mut backoff = Backoff::new();
        loop {
            let generation = self.generation.load(Ordering::SeqCst);
            let url = setting("url");
            let Some(url) = url.as_str().filter(|u| !u.is_empty()) else {
                self.wait_for_change(generation, Duration::from_secs(30));
                continue;
            };
            let token = setting("access_token");
            let started = Instant::now();
            match self.serve(url, token.as_str(), generation) {
                Ok(()) => {
                    backoff.reset();
                    continue; // the settings changed: reconnect at once
                }
                Err(e) => {
                    if started.elapsed() > Duration::from_secs(30) {
                        backoff.reset(); // it worked for a while
                    }
                    let wait = backoff.fail();
                    eprintln!("onebot: {e}; reconnecting in {} s", wait.as_secs());
                    self.wait_for_change(generation, wait);
                }
            }
        }
    }

    fn wait_for_change(&self, generation: u64, max: Duration) {
        let deadline = Instant::now() + max;
        while Instant::now() < deadline && self.generation.load(Ordering::SeqCst) == generation {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One connection; `Ok` when it ended because the settings changed.
    fn serve(self: &Arc<Self>, url: &str, token: Option<&str>, generation: u64) -> Result<(), String> {
        let mut ws = open(url, token)?;
        eprintln!("onebot: connected to {url}");
        let (tx, rx) = mpsc::channel::<String>();
        *self.outbox.lock().expect("outbox") = Some(tx);
        let result = (|| loop {
            if self.generation.load(Ordering::SeqCst) != generation {
                let _ = ws.close(None);
                return Ok(());
            }
            while let Ok(frame) = rx.try_recv() {
                ws.send(Message::text(frame))
                    .map_err(|e| format!("sending to the OneBot server failed: {e}"))?;
            }
            match ws.read() {
                Ok(Message::Text(t)) => self.on_frame(t.as_str()),
                Ok(Message::Close(_)) => return Err("the OneBot server closed the connection".to_owned()),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(format!("the connection to the OneBot server broke: {e}")),
            }
        })();
        *self.outbox.lock().expect("outbox") = None;
        result
    }

    fn on_frame(self: &Arc<Self>, text: &str) {
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            eprintln!("onebot: a frame that is not JSON was ignored");
            return;
        };
        match wire::parse(&v) {
            Incoming::Answer { echo, ok, detail } => self.answered(&echo, ok, detail),
            Incoming::Message(m) => {
                let b = self.clone();
                std::thread::spawn(move || b.on_message(m));
            }
            Incoming::Other => {}
        }
    }
}

/// The WebSocket handshake over a plain TCP connection with a short read timeout.
fn open(url: &str, token: Option<&str>) -> Result<WebSocket<TcpStream>, String> {
    let mut req = url
        .into_client_request()
        .map_err(|e| format!("plugin.onebot.url `{url}` is not a ws:// URL: {e}"))?;
    if let Some(t) = token.filter(|t| !t.is_empty()) {
        let v = format!("Bearer {t}")
            .parse()
            .map_err(|_| "plugin.onebot.access_token has characters a header cannot carry".to_owned())?;
        req.headers_mut().insert("Authorization", v);
    }
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("ws") {
        return Err(format!(
            "plugin.onebot.url `{url}`: only ws:// is supported (run the OneBot server on this machine or the LAN)"
        ));
    }
    let host = uri.host().unwrap_or("127.0.0.1");
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host, port)).map_err(|e| format!("cannot reach {host}:{port}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let (ws, _) = tungstenite::client::client(req, stream).map_err(|e| match e {
        tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r)) => format!(
            "the OneBot server refused the connection: HTTP {} (check plugin.onebot.access_token)",
            r.status()
        ),
        other => format!("the WebSocket handshake with {url} failed: {other}"),
    })?;
    ws.get_ref().set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
    Ok(ws)
}

/// The plugin over `bridge`.
pub fn plugin(bridge: Arc<Bridge>) -> Plugin {
    let (b1, b2) = (bridge.clone(), bridge);
    Plugin::new("onebot")
        .output(
            "qq",
            "QQ through OneBot v11: meta {\"user_id\": QQ} for a person, {\"group_id\": GROUP} for a group; default the owner",
            &["text"],
            move |msg| b1.output(&msg),
        )
        .subscribe(&["agent_output", methods::SETTINGS_CHANGED])
        .on_event(move |_, method, ev| match method {
            methods::SETTINGS_CHANGED => {
                if matches!(ev["key"].as_str(), Some("url" | "access_token")) {
                    b2.generation.fetch_add(1, Ordering::SeqCst);
                }
            }
            _ => b2.on_kernel_event(&ev),
        })
}

/// Runs the plugin on stdin/stdout until the kernel stops it; the process exit code.
pub fn run() -> i32 {
    let bridge = Arc::new(Bridge::default());
    let b = bridge.clone();
    let result = plugin(bridge).run(move |k| {
        // Declared, so the settings page shows them (the token masked).
        for (key, default, description, secret) in [
            (
                "url",
                json!(""),
                "OneBot v11 forward WebSocket, e.g. ws://127.0.0.1:3001/ (NapCat, Lagrange)",
                false,
            ),
            ("access_token", json!(""), "sent as Authorization: Bearer", true),
            (
                "owner_id",
                json!(""),
                "the owner's QQ number: their private messages run as the owner",
                false,
            ),
            (
                "group_trigger",
                json!("mention"),
                "group messages answered: mention (the default), all or off",
                false,
            ),
        ] {
            let def = methods::SettingDef {
                key: key.to_owned(),
                default,
                description: description.to_owned(),
                secret,
            };
            if let Err(e) = k.request(PluginRequest::SettingsRegisterDef(def)) {
                eprintln!("onebot: cannot declare plugin.onebot.{key}: {e}");
            }
        }
        // How memory treats what the bridge injects: the header goes, the words stay.
        let channel = methods::InputRegister {
            name: "onebot".into(),
            cleaner: Some(methods::CleanerRules {
                rules: wire::cleaner_rules()
                    .into_iter()
                    .map(|(pattern, replace)| methods::CleanRule {
                        pattern: pattern.into(),
                        replace: replace.into(),
                    })
                    .collect(),
            }),
            ..Default::default()
        };
        if let Err(e) = k.request(PluginRequest::InputRegister(channel)) {
            eprintln!("onebot: cannot declare its input channel: {e}");
        }
        let _ = KERNEL.set(k);
        eprintln!("onebot plugin ready");
        std::thread::spawn(move || b.connect_loop());
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("onebot plugin: {e}");
            1
        }
    }
}
