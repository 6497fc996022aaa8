//! A small SDK for plugins written in Rust: no async runtime, just threads.
//!
//! ```no_run
//! use homeagent_plugin_protocol::sdk::Plugin;
//! use homeagent_plugin_protocol::methods::ToolRegister;
//! Plugin::new("hello")
//!     .tool(
//!         ToolRegister { name: "hello_say".into(), description: "greet".into(), parameters: serde_json::json!({}), parallel_safe: true, no_memory: false },
//!         |_args| Ok("hello".to_string()),
//!     )
//!     .run(|_kernel| {})
//!     .unwrap();
//! ```

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use crate::frame::{Frame, Request, Response, RpcError, decode, encode};
use crate::methods::{
    self, EventsSubscribe, InjectText, SettingValue, SettingsGet, ToolCancel, ToolInvoke, ToolRegister, ToolResult,
    ToolUnregister,
};
use crate::{HandshakeParams, HandshakeReply, PROTOCOL_VERSION};

/// A tool's implementation: arguments and the call's handle in, text out.
pub type ToolFn = Arc<dyn Fn(Value, &Call) -> Result<String, String> + Send + Sync>;
type EventFn = Arc<dyn Fn(&Kernel, &str, Value) + Send + Sync>;
type Pending = Arc<Mutex<HashMap<u64, mpsc::Sender<Result<Value, RpcError>>>>>;
type Hook = Box<dyn FnOnce() + Send>;

/// One running `tool.invoke`: lets the tool notice that the kernel gave up on it
/// (`tool.cancel`: a timeout or a stopped turn).
#[derive(Clone)]
pub struct Call {
    id: u64,
    state: Arc<Mutex<(bool, Vec<Hook>)>>,
}

impl Call {
    /// A call handle with the given id (the SDK makes one per `tool.invoke`; plugins
    /// may make their own to drive their tool code, e.g. in tests).
    pub fn new(id: u64) -> Self {
        Self {
            id,
            state: Arc::default(),
        }
    }

    /// The id of the kernel's `tool.invoke` request.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the kernel has cancelled the call.
    pub fn is_cancelled(&self) -> bool {
        self.state.lock().expect("call lock").0
    }

    /// Runs `f` once when the call is cancelled (at once if it already is).
    pub fn on_cancel(&self, f: impl FnOnce() + Send + 'static) {
        let mut st = self.state.lock().expect("call lock");
        if st.0 {
            drop(st);
            f();
        } else {
            st.1.push(Box::new(f));
        }
    }

    /// Cancels the call: runs the hooks once (what `tool.cancel` from the kernel does).
    pub fn cancel(&self) {
        let hooks = {
            let mut st = self.state.lock().expect("call lock");
            st.0 = true;
            std::mem::take(&mut st.1)
        };
        for h in hooks {
            h();
        }
    }
}

/// The plugin's handle to the kernel: calls made from any thread.
#[derive(Clone)]
pub struct Kernel {
    out: Arc<Mutex<std::io::Stdout>>,
    pending: Pending,
    next: Arc<AtomicU64>,
    tools: Arc<Mutex<HashMap<String, ToolFn>>>,
}

impl Kernel {
    fn send(&self, frame: &Frame) -> std::io::Result<()> {
        let bytes = encode(frame).map_err(std::io::Error::other)?;
        let mut out = self.out.lock().expect("stdout lock");
        out.write_all(&bytes)?;
        out.flush()
    }

    /// Calls a kernel method and waits (at most 30 s) for the answer.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        self.send(&Frame::Request(Request {
            id,
            method: method.to_owned(),
            params,
        }))
        .map_err(|e| e.to_string())?;
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.message),
            Err(_) => Err(format!("no answer to {method} within 30 s")),
        }
    }

    /// Injects queued input (needs the `io` capability).
    pub fn inject_text(&self, text: &str) -> Result<Value, String> {
        let p = InjectText {
            text: text.to_owned(),
            source: None,
            priority: None,
        };
        self.call(methods::IO_INJECT_TEXT, serde_json::to_value(p).expect("serialisable"))
    }

    /// Injects an interrupt at `priority` (`L1`..`L3` for plugins).
    pub fn inject_interrupt(&self, text: &str, priority: &str) -> Result<Value, String> {
        let p = InjectText {
            text: text.to_owned(),
            source: None,
            priority: Some(priority.to_owned()),
        };
        self.call(
            methods::IO_INJECT_INTERRUPT,
            serde_json::to_value(p).expect("serialisable"),
        )
    }

    /// Registers a tool at run time; `f` runs on its own thread for each call.
    pub fn register_tool(
        &self,
        reg: ToolRegister,
        f: impl Fn(Value, &Call) -> Result<String, String> + Send + Sync + 'static,
    ) -> Result<(), String> {
        let name = reg.name.clone();
        self.tools.lock().expect("tools lock").insert(name.clone(), Arc::new(f));
        let res = self.call(
            methods::TOOL_REGISTER,
            serde_json::to_value(&reg).expect("serialisable"),
        );
        if res.is_err() {
            self.tools.lock().expect("tools lock").remove(&name);
        }
        res.map(|_| ())
    }

    /// Withdraws one of this plugin's tools.
    pub fn unregister_tool(&self, name: &str) -> Result<(), String> {
        self.tools.lock().expect("tools lock").remove(name);
        let p = ToolUnregister { name: name.to_owned() };
        self.call(methods::TOOL_UNREGISTER, serde_json::to_value(p).expect("serialisable"))
            .map(|_| ())
    }

    /// Reads one of this plugin's own settings (`plugin.<name>.<key>`); `Null` when unset.
    pub fn setting(&self, key: &str) -> Result<Value, String> {
        let p = SettingsGet { key: key.to_owned() };
        let v = self.call(methods::SETTINGS_GET, serde_json::to_value(p).expect("serialisable"))?;
        Ok(serde_json::from_value::<SettingValue>(v)
            .map(|s| s.value)
            .unwrap_or(Value::Null))
    }

    /// Subscribes to kernel event topics (needs the `events` capability); they arrive
    /// at the handler given to [`Plugin::on_event`].
    pub fn subscribe(&self, topics: &[&str]) -> Result<(), String> {
        let p = EventsSubscribe {
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
        };
        self.call(
            methods::EVENTS_SUBSCRIBE,
            serde_json::to_value(p).expect("serialisable"),
        )
        .map(|_| ())
    }

    /// Writes a log line (stderr is the plugin's log).
    pub fn log(&self, msg: &str) {
        eprintln!("{msg}");
    }
}

/// A plugin under construction.
pub struct Plugin {
    name: String,
    tools: Vec<(ToolRegister, ToolFn)>,
    on_event: Option<EventFn>,
}

impl Plugin {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            tools: Vec::new(),
            on_event: None,
        }
    }

    /// Adds a tool; `f` runs on its own thread for each call.
    pub fn tool(
        mut self,
        reg: ToolRegister,
        f: impl Fn(Value) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        self.tools.push((reg, Arc::new(move |args, _: &Call| f(args))));
        self
    }

    /// Handles the kernel's event notifications (topics subscribed with
    /// [`Kernel::subscribe`], e.g. `settings.changed`), one at a time in arrival order
    /// on a thread of their own.
    pub fn on_event(mut self, f: impl Fn(&Kernel, &str, Value) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(f));
        self
    }

    /// Serves the protocol on stdin/stdout until the kernel says `plugin.stop` or
    /// closes stdin. `ready` runs (on its own thread) once the tools are registered.
    pub fn run(self, ready: impl FnOnce(Kernel) + Send + 'static) -> std::io::Result<()> {
        let kernel = Kernel {
            out: Arc::new(Mutex::new(std::io::stdout())),
            pending: Arc::default(),
            next: Arc::new(AtomicU64::new(1)),
            tools: Arc::new(Mutex::new(
                self.tools.iter().map(|(r, f)| (r.name.clone(), f.clone())).collect(),
            )),
        };
        let calls: Arc<Mutex<HashMap<u64, Call>>> = Arc::default();
        // Events are handled in order on one thread, so the read loop never waits.
        let events = self.on_event.clone().map(|f| {
            let (tx, rx) = mpsc::channel::<(String, Value)>();
            let k = kernel.clone();
            std::thread::spawn(move || {
                for (topic, data) in rx {
                    f(&k, &topic, data);
                }
            });
            tx
        });
        let mut ready = Some(ready);
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let frame = match decode(line.as_bytes()) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("{}: bad frame from the kernel: {e}", self.name);
                    continue;
                }
            };
            match frame {
                Frame::Response(r) => {
                    if let Some(tx) = kernel.pending.lock().expect("pending lock").remove(&r.id) {
                        let _ = tx.send(response_result(r));
                    }
                }
                Frame::Request(req) => match req.method.as_str() {
                    methods::HANDSHAKE => {
                        let p: HandshakeParams = serde_json::from_value(req.params).map_err(std::io::Error::other)?;
                        let reply = HandshakeReply {
                            protocol: PROTOCOL_VERSION,
                            sdk_version: env!("CARGO_PKG_VERSION").into(),
                            plugin_name: p.plugin_name,
                            pid: std::process::id(),
                            features: vec![],
                        };
                        let result = serde_json::to_value(reply).expect("serialisable");
                        kernel.send(&Frame::Response(Response {
                            id: req.id,
                            result: Some(result),
                            error: None,
                        }))?;
                        // Register from another thread: the answers come through this loop.
                        let (k, regs, ready) = (
                            kernel.clone(),
                            self.tools.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(),
                            ready.take(),
                        );
                        std::thread::spawn(move || {
                            for r in regs {
                                if let Err(e) =
                                    k.call(methods::TOOL_REGISTER, serde_json::to_value(&r).expect("serialisable"))
                                {
                                    eprintln!("registering {} failed: {e}", r.name);
                                }
                            }
                            if let Some(ready) = ready {
                                ready(k);
                            }
                        });
                    }
                    methods::TOOL_INVOKE => {
                        let k = kernel.clone();
                        let call = Call::new(req.id);
                        calls.lock().expect("calls lock").insert(req.id, call.clone());
                        let calls = calls.clone();
                        std::thread::spawn(move || {
                            let outcome = serde_json::from_value::<ToolInvoke>(req.params)
                                .map_err(|e| format!("bad tool.invoke params: {e}"))
                                .and_then(|inv| {
                                    let f = k.tools.lock().expect("tools lock").get(&inv.name).cloned();
                                    match f {
                                        Some(f) => f(inv.args, &call),
                                        None => Err(format!("this plugin has no tool `{}`", inv.name)),
                                    }
                                });
                            calls.lock().expect("calls lock").remove(&req.id);
                            let resp = match outcome {
                                Ok(text) => Response {
                                    id: req.id,
                                    result: Some(json!(ToolResult { text })),
                                    error: None,
                                },
                                Err(message) => Response {
                                    id: req.id,
                                    result: None,
                                    error: Some(RpcError {
                                        code: RpcError::INVALID_PARAMS,
                                        message,
                                    }),
                                },
                            };
                            let _ = k.send(&Frame::Response(resp));
                        });
                    }
                    methods::TOOL_CANCEL => {
                        let call = serde_json::from_value::<ToolCancel>(req.params)
                            .ok()
                            .and_then(|c| calls.lock().expect("calls lock").get(&c.id).cloned());
                        if let Some(call) = call {
                            call.cancel();
                        }
                    }
                    methods::SETTINGS_CHANGED if req.id == 0 => {
                        if let Some(tx) = &events {
                            let _ = tx.send((req.method, req.params));
                        }
                    }
                    methods::PLUGIN_STOP => return Ok(()),
                    other if req.id != 0 => {
                        let err = RpcError {
                            code: RpcError::UNKNOWN_METHOD,
                            message: format!("unknown method `{other}`"),
                        };
                        kernel.send(&Frame::Response(Response {
                            id: req.id,
                            result: None,
                            error: Some(err),
                        }))?;
                    }
                    _ => {}
                },
            }
        }
        Ok(())
    }
}

fn response_result(r: Response) -> Result<Value, RpcError> {
    match (r.result, r.error) {
        (_, Some(e)) => Err(e),
        (Some(v), None) => Ok(v),
        (None, None) => Ok(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::Call;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn cancel_hooks_run_once_even_when_added_late() {
        let call = Call::new(3);
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        call.on_cancel(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        assert!(!call.is_cancelled());
        call.cancel();
        call.cancel();
        assert_eq!(hits.load(Ordering::SeqCst), 1, "hooks run once");
        let h = hits.clone();
        call.on_cancel(move || {
            h.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(hits.load(Ordering::SeqCst), 11, "a late hook runs at once");
        assert!(call.is_cancelled() && call.id() == 3);
    }
}
