//! The bridge: one supervisor thread per configured server (spawn, negotiate, list,
//! register, respawn with backoff), and the manager that applies configuration
//! changes (start added servers, restart changed ones, stop removed ones).
//!
//! A server's supervisor thread waits on two crossbeam channels at once: its control
//! channel (stop) and the events of the current process (tools changed, exited). Each
//! process gets a fresh event channel, so events of an earlier process are never seen
//! and no thread is needed to forward them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use crossbeam_channel::{Receiver, Sender, select};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use homeagent_plugin_protocol::methods::ToolRegister;
use homeagent_plugin_protocol::sdk::{Call, Kernel};
use serde_json::{Value, json};

use crate::client::{CallError, Client, Event};
use crate::config::{self, Server};
use crate::names::map_tools;
use crate::protocol::{self, Era, McpTool, Next, Probe};

/// Time a server has to answer `server/discover` before we take it for a server that
/// predates it (and restart it for `initialize`).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for `initialize` and each `tools/list` page.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// A server up this long has its backoff reset.
pub const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// Respawn delays: 1 s, 2 s, 4 s … capped at 30 s; never gives up (a server fixed by
/// installing something comes back on its own).
#[derive(Debug, Default)]
pub struct Backoff {
    attempt: u32,
}

impl Backoff {
    pub fn next_delay(&mut self) -> Duration {
        let d = Duration::from_secs(1u64 << self.attempt.min(5)).min(Duration::from_secs(30));
        self.attempt += 1;
        d
    }
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Control messages for one server's supervisor thread.
enum Ctl {
    Stop,
}

/// What tool handlers reach the server through: the live connection, once ready.
#[derive(Default)]
struct Link {
    client: Mutex<Option<Arc<Client>>>,
}

impl Link {
    fn get(&self) -> Option<Arc<Client>> {
        self.client.lock().expect("link lock").clone()
    }
    fn set(&self, c: Option<Arc<Client>>) {
        *self.client.lock().expect("link lock") = c;
    }
}

/// A registered tool: its exposed name → what it was registered from.
#[derive(Clone, PartialEq)]
struct Registered {
    original: String,
    description: String,
    schema: Value,
    read_only: bool,
}

/// One server's supervisor (runs on its own thread).
struct Supervisor {
    name: String,
    cfg: Server,
    kernel: Kernel,
    ctl: Receiver<Ctl>,
    /// Events of the current process (`never()` before the first spawn).
    events: Receiver<Event>,
    stop: Arc<AtomicBool>,
    /// The process being set up or running (for a stop that must not wait).
    current: Arc<Mutex<Option<Arc<Client>>>>,
    link: Arc<Link>,
    tools: BTreeMap<String, Registered>,
    generation: u64,
    /// When the configuration was applied (for the "ready in" log line).
    since: Instant,
}

impl Supervisor {
    fn run(mut self) {
        let mut backoff = Backoff::default();
        loop {
            let started = Instant::now();
            match self.connect() {
                Ok(client) => {
                    self.link.set(Some(client.clone()));
                    match self.sync_tools(&client) {
                        Ok(n) => eprintln!(
                            "mcp: server `{}` ready (MCP {}, {}): {n} tools, {} ms after the configuration",
                            self.name,
                            client.era().map(|e| e.version().to_owned()).unwrap_or_default(),
                            client.describe(),
                            self.since.elapsed().as_millis()
                        ),
                        Err(e) => eprintln!("mcp: server `{}`: listing its tools failed: {e}", self.name),
                    }
                    if self.serve(&client) {
                        return;
                    }
                }
                Err(e) => eprintln!("mcp: server `{}` did not start: {e}", self.name),
            }
            self.detach();
            if let Some(c) = self.current.lock().expect("current lock").take() {
                c.kill();
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            if started.elapsed() >= HEALTHY_AFTER {
                backoff.reset();
            }
            let delay = backoff.next_delay();
            eprintln!("mcp: respawning server `{}` in {delay:?}", self.name);
            // A stop (or the manager gone) during the wait ends it at once.
            let ctl = self.ctl.clone();
            select! {
                recv(ctl) -> msg => match msg {
                    Ok(Ctl::Stop) | Err(_) => return,
                },
                default(delay) => {}
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    fn spawn(&mut self) -> Result<Arc<Client>, String> {
        self.generation += 1;
        let (tx, rx) = crossbeam_channel::unbounded();
        let client = match &self.cfg {
            Server::Stdio(c) => Client::spawn(&self.name, c, self.generation, tx)?,
            Server::Http(c) => Client::connect_http(&self.name, c, self.generation, tx)?,
        };
        // Only this process's events from now on: the old channel is dropped.
        self.events = rx;
        *self.current.lock().expect("current lock") = Some(client.clone());
        if self.stop.load(Ordering::SeqCst) {
            client.kill();
            return Err("stopping".into());
        }
        Ok(client)
    }

    /// Spawns the server and settles the protocol revision (see [`negotiate`]); a
    /// remote server is initialized (see [`connect_remote`]).
    fn connect(&mut self) -> Result<Arc<Client>, String> {
        let client = self.spawn()?;
        if client.is_remote() {
            connect_remote(&client)?;
            return Ok(client);
        }
        match negotiate(&client)? {
            Negotiated::Done => Ok(client),
            Negotiated::Restart => {
                eprintln!(
                    "mcp: server `{}` did not answer server/discover; restarting it for initialize",
                    self.name
                );
                client.kill();
                client.wait_exit(Duration::from_secs(2));
                let client = self.spawn()?;
                initialize(&client)?;
                Ok(client)
            }
        }
    }

    /// Lists the server's tools and brings the kernel's registrations in line.
    fn sync_tools(&mut self, client: &Arc<Client>) -> Result<usize, String> {
        let tools = list_tools(client)?;
        let names = map_tools(&self.name, tools.iter().map(|t| t.name.as_str()));
        let by_name: BTreeMap<&str, &McpTool> = tools.iter().map(|t| (t.name.as_str(), t)).collect();
        let wanted: BTreeMap<String, Registered> = names
            .into_iter()
            .map(|(exposed, original)| {
                let t = by_name[original.as_str()];
                let r = Registered {
                    original,
                    description: t.description.clone(),
                    schema: t.input_schema.clone(),
                    read_only: t.read_only,
                };
                (exposed, r)
            })
            .collect();
        let stale: Vec<String> = self
            .tools
            .iter()
            .filter(|(k, v)| wanted.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .collect();
        for name in stale {
            if let Err(e) = self.kernel.unregister_tool(&name) {
                eprintln!("mcp: cannot withdraw `{name}`: {e}");
            }
            self.tools.remove(&name);
        }
        for (exposed, r) in wanted {
            if self.tools.contains_key(&exposed) {
                continue;
            }
            let description = if r.description.is_empty() {
                format!("Tool `{}` of the MCP server `{}`.", r.original, self.name)
            } else {
                r.description.clone()
            };
            let reg = ToolRegister {
                name: exposed.clone(),
                description,
                parameters: r.schema.clone(),
                parallel_safe: r.read_only,
                // A remote server's tools go over the network: the firewall's switch applies.
                network: client.is_remote(),
                ..ToolRegister::default()
            };
            let (link, server, original) = (self.link.clone(), self.name.clone(), r.original.clone());
            let res = self.kernel.register_tool(reg, move |args, call: &Call| {
                invoke(&link, &server, &original, args, call)
            });
            match res {
                Ok(()) => {
                    self.tools.insert(exposed, r);
                }
                Err(e) => eprintln!("mcp: cannot register `{exposed}`: {e}"),
            }
        }
        Ok(self.tools.len())
    }

    /// Serves until the process dies (`false`: respawn) or a stop (`true`).
    fn serve(&mut self, client: &Arc<Client>) -> bool {
        let (ctl, events) = (self.ctl.clone(), self.events.clone());
        loop {
            select! {
                recv(ctl) -> msg => match msg {
                    Ok(Ctl::Stop) | Err(_) => {
                        self.link.set(None);
                        client.shutdown(Duration::from_secs(2));
                        self.detach();
                        return true;
                    }
                },
                recv(events) -> ev => match ev {
                    Ok(Event::ListChanged(g)) if g == client.generation => {
                        eprintln!("mcp: server `{}` changed its tools; re-syncing", self.name);
                        if let Err(e) = self.sync_tools(client) {
                            eprintln!("mcp: server `{}`: re-sync failed: {e}", self.name);
                        }
                    }
                    Ok(Event::Exited(g, reason)) if g == client.generation => {
                        eprintln!("mcp: {reason}");
                        self.link.set(None);
                        return false;
                    }
                    Ok(_) => {} // tagged with another generation: cannot happen, harmless
                    // Every thread of the process's connection is gone without an exit
                    // event (they always send one first): treat it as an exit.
                    Err(_) => {
                        eprintln!("mcp: server `{}`: connection lost", self.name);
                        self.link.set(None);
                        return false;
                    }
                },
            }
        }
    }

    /// Withdraws every tool of this server.
    fn detach(&mut self) {
        self.link.set(None);
        for name in std::mem::take(&mut self.tools).into_keys() {
            if let Err(e) = self.kernel.unregister_tool(&name) {
                eprintln!("mcp: cannot withdraw `{name}`: {e}");
            }
        }
    }
}

/// The outcome of [`negotiate`].
#[derive(Debug, PartialEq, Eq)]
pub enum Negotiated {
    /// The connection is ready (its era is set).
    Done,
    /// The server ignored the probe: start a fresh process and [`initialize`] it.
    Restart,
}

/// Settles the protocol revision of a freshly spawned server: probes with
/// `server/discover` (stateless era) and falls back to `initialize` (see
/// [`protocol::decide`]).
pub fn negotiate(client: &Client) -> Result<Negotiated, String> {
    let params = protocol::with_meta(json!({}), protocol::MODERN);
    let probe = match client.call("server/discover", params, PROBE_TIMEOUT, None) {
        Ok(v) => Probe::Answer(v),
        Err(CallError::Rpc(e)) => Probe::Error(e),
        Err(CallError::Timeout(_)) => Probe::Silent,
        Err(e) => return Err(e.to_string()),
    };
    match protocol::decide(&probe) {
        Next::Modern(v) => {
            client.set_era(Era::Modern(v));
            Ok(Negotiated::Done)
        }
        Next::Fail(m) => Err(m),
        Next::Legacy { restart: true } => Ok(Negotiated::Restart),
        Next::Legacy { restart: false } => initialize(client).map(|()| Negotiated::Done),
    }
}

/// Sets up a remote server: `initialize` (the Streamable HTTP servers of today are
/// all of the 2025 revisions; the stateless probe is a stdio rule), then the GET
/// stream for what the server sends on its own.
pub fn connect_remote(client: &Client) -> Result<(), String> {
    initialize(client)?;
    client.listen();
    Ok(())
}

/// The `initialize` handshake of servers before 2026-07-28.
pub fn initialize(client: &Client) -> Result<(), String> {
    let r = client
        .call("initialize", protocol::initialize_params(), SETUP_TIMEOUT, None)
        .map_err(|e| format!("initialize failed: {e}"))?;
    let era = protocol::check_initialize(&r)?;
    client.set_era(era);
    client.notify("notifications/initialized", Value::Null);
    Ok(())
}

/// All tools of a connected server (every page).
pub fn list_tools(client: &Client) -> Result<Vec<McpTool>, String> {
    protocol::list_all(|cursor| {
        client
            .call("tools/list", protocol::list_params(cursor), SETUP_TIMEOUT, None)
            .map_err(|e| format!("tools/list failed: {e}"))
    })
}

/// A kernel tool call → `tools/call` on the server.
fn invoke(link: &Link, server: &str, tool: &str, args: Value, call: &Call) -> Result<String, String> {
    let client = link
        .get()
        .ok_or_else(|| format!("MCP server `{server}` is restarting; try again in a few seconds"))?;
    // The kernel refuses a network tool while the switch is off; check again here (a
    // plugin never trusts that it is only called through the kernel).
    if client.is_remote()
        && let Some(sb) = call.sandbox()
    {
        sb.check_network().map_err(|e| e.to_string())?;
    }
    call_tool(&client, tool, args, Some(call))
}

/// `tools/call` of `tool` on a connected server, its result as text.
pub fn call_tool(client: &Client, tool: &str, args: Value, call: Option<&Call>) -> Result<String, String> {
    let server = &client.server;
    let args = if args.is_null() { json!({}) } else { args };
    let params = json!({"name": tool, "arguments": args});
    match client.call("tools/call", params, crate::client::CALL_TIMEOUT, call) {
        Ok(v) => protocol::render_result(&v),
        Err(CallError::Gone(reason)) => Err(format!("{reason}; it is being restarted, try again shortly")),
        Err(e) => Err(format!("MCP server `{server}`, tool `{tool}`: {e}")),
    }
}

/// A running server supervisor, as the manager sees it.
struct Running {
    cfg: Server,
    ctl: Sender<Ctl>,
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Option<Arc<Client>>>>,
    thread: JoinHandle<()>,
}

impl Running {
    fn start(name: &str, cfg: Server, kernel: &Kernel) -> Running {
        let (tx, rx) = crossbeam_channel::unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let current: Arc<Mutex<Option<Arc<Client>>>> = Arc::default();
        let sup = Supervisor {
            name: name.to_owned(),
            cfg: cfg.clone(),
            kernel: kernel.clone(),
            ctl: rx,
            events: crossbeam_channel::never(),
            stop: stop.clone(),
            current: current.clone(),
            link: Arc::default(),
            tools: BTreeMap::new(),
            generation: 0,
            since: Instant::now(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("mcp-{name}"))
            .spawn(move || sup.run())
            .expect("spawn a thread");
        Running {
            cfg,
            ctl: tx,
            stop,
            current,
            thread,
        }
    }

    /// Asks the supervisor to stop; a server still starting is killed at once.
    fn signal_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.ctl.send(Ctl::Stop);
        let starting = self.current.lock().expect("current lock").clone();
        if let Some(c) = starting
            && c.era().is_none()
        {
            c.kill();
        }
    }
}

/// Applies each configuration it receives (the setting's raw value) until the channel
/// closes.
pub fn manage(kernel: Kernel, configs: mpsc::Receiver<Value>) {
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    for value in configs {
        let parsed = config::parse(&value);
        for p in &parsed.problems {
            eprintln!("mcp: {p}");
        }
        let current: BTreeMap<String, Server> = running.iter().map(|(k, r)| (k.clone(), r.cfg.clone())).collect();
        let d = config::diff(&current, &parsed.servers);
        if d.is_empty() {
            continue;
        }
        eprintln!(
            "mcp: configuration: start {:?}, restart {:?}, stop {:?}",
            d.start, d.restart, d.stop
        );
        let leaving: Vec<Running> = d
            .stop
            .iter()
            .chain(&d.restart)
            .filter_map(|n| running.remove(n))
            .collect();
        for r in &leaving {
            r.signal_stop();
        }
        for r in leaving {
            let _ = r.thread.join();
        }
        for name in d.start.iter().chain(&d.restart) {
            let cfg = parsed.servers[name].clone();
            running.insert(name.clone(), Running::start(name, cfg, &kernel));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap_and_resets() {
        let mut b = Backoff::default();
        let d: Vec<u64> = (0..8).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 16, 30, 30, 30]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }
}
