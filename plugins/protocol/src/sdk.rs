//! A small SDK for plugins written in Rust: no async runtime, just threads.
//!
//! A call to the kernel ([`Kernel::call`], from any thread) waits on a crossbeam
//! `select` over three things: its answer, the connection closing (a channel that
//! disconnects when [`Plugin::run`] returns), and its timeout. So a call made while the
//! kernel stops or restarts the plugin fails at once instead of after 30 s.
//!
//! ```no_run
//! use homeagent_plugin_protocol::sdk::Plugin;
//! use homeagent_plugin_protocol::methods::ToolRegister;
//! Plugin::new("hello")
//!     .tool(
//!         ToolRegister { name: "hello_say".into(), description: "greet".into(), parameters: serde_json::json!({}), parallel_safe: true, ..Default::default() },
//!         |_args| Ok("hello".to_string()),
//!     )
//!     .run(|_kernel| {})
//!     .unwrap();
//! ```

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, select};

use serde_json::{Value, json};

use crate::frame::{Frame, Request, Response, RpcError, decode, encode};
use crate::methods::{
    self, EventsSubscribe, InjectText, OutputRegister, SettingValue, SettingsGet, StageRegister, TextAppend,
    ToolRegister, ToolResult, ToolUnregister,
};
use crate::request::{
    ApiRegister, DocInsert, DocRemove, KernelRequest, KnowledgeAdd, MemoryCommit, MemoryRecall, NoParams, Person,
    PersonNetwork, PersonTrait, PluginRequest, Relate, Search, SetTrait, Terms,
};
use crate::sandbox::{SANDBOX_ARG, SandboxInfo};
use crate::{HandshakeReply, PROTOCOL_VERSION};

/// The kernel's clock in the plugin (see [`crate::clock`] and [`Plugin::clock`]).
pub use crate::clock::{Alarm, Clock, Wake};

/// A tool's implementation: arguments and the call's handle in, text out.
pub type ToolFn = Arc<dyn Fn(Value, &Call) -> Result<String, String> + Send + Sync>;
type EventFn = Arc<dyn Fn(&Kernel, &str, Value) + Send + Sync>;
type StageFn = Arc<dyn Fn(&str, Value) -> Value + Send + Sync>;
type OutputFn = Arc<dyn Fn(Value) -> Result<String, String> + Send + Sync>;
/// A named API's implementation (`api.register`): the HTTP body in, the result out.
pub type ApiFn = Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;
type Out = Arc<Mutex<Box<dyn Write + Send>>>;
type Job = Box<dyn FnOnce() + Send>;

/// How long an idle worker of [`Workers`] waits for a job before it exits.
const WORKER_IDLE: Duration = Duration::from_secs(30);

/// The threads tool calls and channel deliveries run on. A call never waits behind
/// another (a slow tool must not hold up the rest): each job is handed to an idle
/// worker reserved for it, or to a new thread when none is idle. Reusing threads
/// instead of spawning one per call is what the round trip's measurement asked for:
/// the spawn was the largest share of a call (see
/// `plugins/protocol/examples/rtt_breakdown.rs` and docs/DECISIONS.md).
#[derive(Clone)]
pub struct Workers {
    tx: Sender<Job>,
    rx: Receiver<Job>,
    /// Idle workers not yet reserved by a submitted job.
    idle: Arc<AtomicUsize>,
}

impl Default for Workers {
    fn default() -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        Workers {
            tx,
            rx,
            idle: Arc::default(),
        }
    }
}

impl Workers {
    /// Runs `job` on a worker thread at once.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let reserved = self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !reserved {
            let (rx, idle) = (self.rx.clone(), self.idle.clone());
            // A new worker starts busy with the job sent next; it counts itself idle
            // only when it comes back for more.
            let spawned = std::thread::Builder::new()
                .name("sdk-worker".into())
                .spawn(move || Self::work(rx, idle, true));
            if spawned.is_err() {
                // No thread to be had: run it here rather than lose the call.
                return job();
            }
        }
        let _ = self.tx.send(Box::new(job));
    }

    fn work(rx: Receiver<Job>, idle: Arc<AtomicUsize>, mut reserved: bool) {
        loop {
            if !reserved {
                idle.fetch_add(1, Ordering::AcqRel);
            }
            match rx.recv_timeout(WORKER_IDLE) {
                Ok(job) => {
                    // The submitter reserved an idle worker (or started this one).
                    reserved = false;
                    job();
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    // Leave only if no job has reserved us meanwhile.
                    if idle
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        return;
                    }
                    reserved = true; // a job is on its way: take it
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}
type Pending = Arc<Mutex<HashMap<u64, Sender<Result<Value, RpcError>>>>>;

/// How long [`Kernel::call`] waits for an answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`Kernel::inject_sync`] waits: the kernel's own limit (300 s) and a margin.
pub const INJECT_SYNC_TIMEOUT: Duration = Duration::from_secs(310);
type Hook = Box<dyn FnOnce() + Send>;

/// One running `tool.invoke`: lets the tool notice that the kernel gave up on it
/// (`tool.cancel`: a timeout or a stopped turn).
#[derive(Clone)]
pub struct Call {
    id: u64,
    state: Arc<Mutex<(bool, Vec<Hook>)>>,
    sandbox: Option<Arc<SandboxInfo>>,
}

impl Call {
    /// A call handle with the given id (the SDK makes one per `tool.invoke`; plugins
    /// may make their own to drive their tool code, e.g. in tests).
    pub fn new(id: u64) -> Self {
        Self {
            id,
            state: Arc::default(),
            sandbox: None,
        }
    }

    /// This call with the sandbox the kernel sent (tests build calls this way too).
    pub fn with_sandbox(mut self, sandbox: SandboxInfo) -> Self {
        self.sandbox = Some(Arc::new(sandbox));
        self
    }

    /// The sandbox the kernel sent with the call: present for tools that declared
    /// [`ToolRegister::paths`] or [`ToolRegister::network`]. A sandboxed tool called
    /// without one must refuse (fail closed): see [`Call::require_sandbox`].
    pub fn sandbox(&self) -> Option<&SandboxInfo> {
        self.sandbox.as_deref()
    }

    /// The sandbox, or the error a tool answers without one.
    pub fn require_sandbox(&self) -> Result<&SandboxInfo, String> {
        self.sandbox().ok_or_else(|| {
            "the kernel sent no sandbox with this call; this tool runs only under the firewall of a homed that declares paths (update homed)".to_owned()
        })
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
    out: Out,
    pending: Pending,
    /// Disconnects when the connection ends (the serving loop returned).
    closed: Receiver<()>,
    next: Arc<AtomicU64>,
    tools: Arc<Mutex<HashMap<String, ToolFn>>>,
    apis: Arc<Mutex<HashMap<String, ApiFn>>>,
}

impl Kernel {
    fn send(&self, frame: &Frame) -> std::io::Result<()> {
        let bytes = encode(frame).map_err(std::io::Error::other)?;
        let mut out = self.out.lock().expect("stdout lock");
        out.write_all(&bytes)?;
        out.flush()
    }

    /// Calls a kernel method and waits (at most [`CALL_TIMEOUT`]) for the answer; fails
    /// at once when the connection ends first. Prefer [`Kernel::request`], which takes
    /// the typed call; this one is for methods newer than the SDK.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        self.call_within(method, params, CALL_TIMEOUT)
    }

    /// Makes a typed call (see [`PluginRequest`]) and waits for its answer.
    pub fn request(&self, req: PluginRequest) -> Result<Value, String> {
        let (method, params) = req.into_message();
        self.call(method, params)
    }

    fn call_within(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.pending.lock().expect("pending lock").insert(id, tx);
        if let Err(e) = self.send(&Frame::Request(Request {
            id,
            method: method.to_owned(),
            params,
        })) {
            self.pending.lock().expect("pending lock").remove(&id);
            return Err(format!("cannot send {method} to the kernel: {e}"));
        }
        let gave_up = |why: String| {
            self.pending.lock().expect("pending lock").remove(&id);
            Err(why)
        };
        select! {
            recv(rx) -> answer => match answer {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(e.message),
                Err(_) => Err(format!("the kernel closed the connection before answering {method}")),
            },
            recv(self.closed) -> _ => gave_up(format!(
                "the kernel closed the connection before answering {method} (the plugin is being stopped)"
            )),
            default(timeout) => gave_up(format!("no answer to {method} within {} s", timeout.as_secs())),
        }
    }

    fn request_field<T: serde::de::DeserializeOwned>(&self, req: PluginRequest, field: &str) -> Result<T, String> {
        let method = req.method();
        let v = self.request(req)?;
        serde_json::from_value(v.get(field).cloned().unwrap_or(Value::Null))
            .map_err(|e| format!("unexpected answer to {method}: {e}"))
    }

    fn text(text: &str, priority: Option<&str>, profile: Option<&str>) -> InjectText {
        InjectText {
            text: text.to_owned(),
            source: None,
            priority: priority.map(str::to_owned),
            profile: profile.map(str::to_owned),
            ..InjectText::default()
        }
    }

    /// Injects queued input (needs the `io` capability).
    pub fn inject_text(&self, text: &str) -> Result<Value, String> {
        self.request(PluginRequest::InjectText(Self::text(text, None, None)))
    }

    /// Injects queued input and waits for the agent's reply (`io.injectInputSync`, at
    /// most [`INJECT_SYNC_TIMEOUT`]): answers `{"task_id", "reply"}`. Not from inside
    /// one of this plugin's tool calls: the kernel refuses that at once, since the input
    /// could only run after the turn that waits on the tool.
    pub fn inject_sync(&self, text: &str, profile: Option<&str>) -> Result<Value, String> {
        let (method, params) = PluginRequest::InjectInputSync(Self::text(text, None, profile)).into_message();
        self.call_within(method, params, INJECT_SYNC_TIMEOUT)
    }

    /// Injects an interrupt at `priority` (`L1`..`L3` for plugins).
    pub fn inject_interrupt(&self, text: &str, priority: &str) -> Result<Value, String> {
        self.inject_interrupt_as(text, priority, None)
    }

    /// [`Self::inject_interrupt`] under one of the security profiles the manifest
    /// declares (`None`: the plugin declares none).
    pub fn inject_interrupt_as(&self, text: &str, priority: &str, profile: Option<&str>) -> Result<Value, String> {
        self.request(PluginRequest::InjectInterrupt(Self::text(
            text,
            Some(priority),
            profile,
        )))
    }

    /// Registers a tool at run time; each call of `f` runs on a worker thread of its
    /// own (see [`Workers`]).
    pub fn register_tool(
        &self,
        reg: ToolRegister,
        f: impl Fn(Value, &Call) -> Result<String, String> + Send + Sync + 'static,
    ) -> Result<(), String> {
        let name = reg.name.clone();
        self.tools.lock().expect("tools lock").insert(name.clone(), Arc::new(f));
        let res = self.request(PluginRequest::ToolRegister(reg));
        if res.is_err() {
            self.tools.lock().expect("tools lock").remove(&name);
        }
        res.map(|_| ())
    }

    /// Offers a named API at `POST /api/v1/plugins/<plugin>/api/<name>` (under the
    /// daemon's API auth); `f` gets the JSON body (`Null` when empty) on a worker
    /// thread and answers the result. Answers the route.
    pub fn register_api(
        &self,
        name: &str,
        f: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Result<String, String> {
        self.apis
            .lock()
            .expect("apis lock")
            .insert(name.to_owned(), Arc::new(f));
        let reg = ApiRegister {
            name: name.to_owned(),
            description: String::new(),
        };
        let res = self.request_field(PluginRequest::ApiRegister(reg), "route");
        if res.is_err() {
            self.apis.lock().expect("apis lock").remove(name);
        }
        res
    }

    /// Withdraws one of this plugin's tools.
    pub fn unregister_tool(&self, name: &str) -> Result<(), String> {
        self.tools.lock().expect("tools lock").remove(name);
        let p = ToolUnregister { name: name.to_owned() };
        self.request(PluginRequest::ToolUnregister(p)).map(|_| ())
    }

    /// Reads one of this plugin's own settings (`plugin.<name>.<key>`); `Null` when unset.
    pub fn setting(&self, key: &str) -> Result<Value, String> {
        let v = self.request(PluginRequest::SettingsGet(SettingsGet { key: key.to_owned() }))?;
        Ok(serde_json::from_value::<SettingValue>(v)
            .map(|s| s.value)
            .unwrap_or(Value::Null))
    }

    /// The kernel's message language (`core.agent.language`: `en` or `zh`), asked
    /// anew on each call so that a change applies at once.
    pub fn language(&self) -> Result<String, String> {
        let v = self.request(PluginRequest::SettingsLanguage(NoParams {}))?;
        Ok(v["language"].as_str().unwrap_or("en").to_owned())
    }

    /// Subscribes to kernel event topics (needs the `events` capability); they arrive
    /// at the handler given to [`Plugin::on_event`].
    pub fn subscribe(&self, topics: &[&str]) -> Result<(), String> {
        let p = EventsSubscribe {
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
        };
        self.request(PluginRequest::EventsSubscribe(p)).map(|_| ())
    }

    /// Writes a log line (stderr is the plugin's log).
    pub fn log(&self, msg: &str) {
        eprintln!("{msg}");
    }

    // ---- graph memory (capability `memory`) ----

    /// Entities and relations around the query terms: `{"entities", "relations"}`.
    pub fn memory_recall(&self, query: &[&str], depth: usize) -> Result<Value, String> {
        let q = MemoryRecall {
            query: Terms::Many(query.iter().map(|t| (*t).to_owned()).collect()),
            depth: Some(depth),
        };
        self.request(PluginRequest::MemoryRecall(q))
    }

    /// Commits facts; answers `(entities created, relations created)`.
    pub fn memory_commit(&self, triples: &[Triple]) -> Result<(u64, u64), String> {
        let c = MemoryCommit {
            triples: triples.to_vec(),
        };
        let v = self.request(PluginRequest::MemoryCommit(c))?;
        Ok((
            v["entities"].as_u64().unwrap_or(0),
            v["relations"].as_u64().unwrap_or(0),
        ))
    }

    /// The graph's counts and hot spots.
    pub fn memory_introspect(&self) -> Result<Value, String> {
        self.request(PluginRequest::MemoryIntrospect(NoParams {}))
    }

    // ---- document memory (capability `doc_memory`) ----

    fn search(query: &str, top_k: usize) -> Search {
        Search {
            query: query.to_owned(),
            top_k: Some(top_k),
        }
    }

    /// The `top_k` documents most similar to `query` (read-only).
    pub fn doc_query(&self, query: &str, top_k: usize) -> Result<Vec<Value>, String> {
        self.request_field(PluginRequest::DocQuery(Self::search(query, top_k)), "documents")
    }

    /// Stores a document; answers its id.
    pub fn doc_insert(&self, content: &str, summary: &str) -> Result<String, String> {
        let d = DocInsert {
            content: content.to_owned(),
            summary: summary.to_owned(),
        };
        self.request_field(PluginRequest::DocInsert(d), "id")
    }

    /// Deletes a document; answers whether it existed.
    pub fn doc_remove(&self, id: &str) -> Result<bool, String> {
        self.request_field(PluginRequest::DocRemove(DocRemove { id: id.to_owned() }), "removed")
    }

    /// `{"events", "documents"}`.
    pub fn doc_stats(&self) -> Result<Value, String> {
        self.request(PluginRequest::DocStats(NoParams {}))
    }

    // ---- knowledge base (capability `knowledge`) ----

    /// `[{name, category, content, score}]`, best first.
    pub fn knowledge_search(&self, query: &str, top_k: usize) -> Result<Vec<Value>, String> {
        self.request_field(PluginRequest::KnowledgeSearch(Self::search(query, top_k)), "results")
    }

    /// Creates or replaces an item; answers its (sanitised) name.
    pub fn knowledge_add(&self, name: &str, content: &str) -> Result<String, String> {
        let k = KnowledgeAdd {
            name: name.to_owned(),
            content: content.to_owned(),
        };
        self.request_field(PluginRequest::KnowledgeAdd(k), "name")
    }

    /// `[{name, category, bytes}]`.
    pub fn knowledge_list(&self) -> Result<Vec<Value>, String> {
        self.request_field(PluginRequest::KnowledgeList(NoParams {}), "items")
    }

    // ---- text memory (capability `text_memory`) ----

    /// Appends a line to the raw text log (`role` `user` or `assistant`).
    pub fn text_append(&self, role: &str, content: &str, channel: Option<&str>) -> Result<(), String> {
        let p = TextAppend {
            role: role.to_owned(),
            content: content.to_owned(),
            timestamp: None,
            channel: channel.map(str::to_owned),
        };
        self.request(PluginRequest::TextAppend(p)).map(|_| ())
    }

    // ---- social (capability `social`) ----

    /// `{name, found, traits, relations}`.
    pub fn social_person(&self, name: &str) -> Result<Value, String> {
        self.request(PluginRequest::SocialGetPerson(Person { name: name.to_owned() }))
    }

    /// A trait's value, `None` when not recorded.
    pub fn social_trait(&self, name: &str, trait_: &str) -> Result<Option<String>, String> {
        let t = PersonTrait {
            name: name.to_owned(),
            trait_: trait_.to_owned(),
        };
        let v = self.request(PluginRequest::SocialGetTrait(t))?;
        Ok(v["found"]
            .as_bool()
            .unwrap_or(false)
            .then(|| v["value"].as_str().unwrap_or("").to_owned()))
    }

    /// `{name, people: [person]}` within `depth` ties.
    pub fn social_network(&self, name: &str, depth: usize) -> Result<Value, String> {
        let n = PersonNetwork {
            name: name.to_owned(),
            depth: Some(depth),
        };
        self.request(PluginRequest::SocialGetNetwork(n))
    }

    /// Everyone recorded as a person.
    pub fn social_persons(&self) -> Result<Vec<String>, String> {
        self.request_field(PluginRequest::SocialListPersons(NoParams {}), "persons")
    }

    /// Records a person's trait (replacing an earlier value).
    pub fn social_set_trait(&self, name: &str, trait_: &str, value: &str) -> Result<(), String> {
        let t = SetTrait {
            name: name.to_owned(),
            trait_: trait_.to_owned(),
            value: value.to_owned(),
        };
        self.request(PluginRequest::SocialSetTrait(t)).map(|_| ())
    }

    /// Records a tie between two people (`a —relation→ b`).
    pub fn social_relate(&self, a: &str, relation: &str, b: &str) -> Result<(), String> {
        let r = Relate {
            a: a.to_owned(),
            relation: relation.to_owned(),
            b: b.to_owned(),
        };
        self.request(PluginRequest::SocialRelate(r)).map(|_| ())
    }
}

/// A fact for [`Kernel::memory_commit`] (the protocol's own type).
pub use crate::methods::Triple;

/// A plugin under construction.
pub struct Plugin {
    name: String,
    tools: Vec<(ToolRegister, ToolFn)>,
    stages: Vec<(StageRegister, StageFn)>,
    outputs: Vec<(OutputRegister, OutputFn)>,
    topics: Vec<String>,
    on_event: Option<EventFn>,
    apis: Vec<(ApiRegister, ApiFn)>,
    clock: Option<Clock>,
}

impl Plugin {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            tools: Vec::new(),
            stages: Vec::new(),
            outputs: Vec::new(),
            topics: Vec::new(),
            on_event: None,
            apis: Vec::new(),
            clock: None,
        }
    }

    /// Follows the kernel's clock with `clock` (keep clones of it for the tools and
    /// threads that read the time or wait on an [`Alarm`]): the handshake declares the
    /// `clock` feature and sets it to the kernel's time, and each `clock.set` of a
    /// virtual clock moves it and is answered once its alarms due by then have run
    /// (see [`crate::clock`]). Without it the plugin keeps the wall clock and gets no
    /// `clock.set`.
    pub fn clock(mut self, clock: &Clock) -> Self {
        self.clock = Some(clock.clone());
        self
    }

    /// Offers a named API, `POST /api/v1/plugins/<plugin>/api/<name>` (the daemon's
    /// API auth applies): `f` gets the JSON body (`Null` when empty) on a worker thread
    /// and answers the result (`{"result": ...}` to the caller) or an error (502).
    /// `name` is `[A-Za-z0-9_-]{1,64}`.
    pub fn api(mut self, name: &str, f: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static) -> Self {
        let reg = ApiRegister {
            name: name.to_owned(),
            description: String::new(),
        };
        self.apis.push((reg, Arc::new(f)));
        self
    }

    /// Handles a pipeline stage (`on_input`, ..., `after_output`); `scope` is
    /// `"global"` or `"own_tools"`. `f(stage, ctx)` answers a patch: an object with
    /// only the context fields to change (`json!({})` = none).
    pub fn stage(mut self, stage: &str, scope: &str, f: impl Fn(&str, Value) -> Value + Send + Sync + 'static) -> Self {
        let reg = StageRegister {
            stage: stage.to_owned(),
            scope: Some(scope.to_owned()),
        };
        self.stages.push((reg, Arc::new(f)));
        self
    }

    /// Offers an output channel: the model gets `output_send__<name>`; `f` receives
    /// `{channel, payload, type, meta, task_id, source}` and answers the text the
    /// model sees (empty = "ok"). `caps`: `text`, `file`, `image`, `audio`, `structured`.
    pub fn output(
        mut self,
        name: &str,
        description: &str,
        caps: &[&str],
        f: impl Fn(Value) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        let reg = OutputRegister {
            name: name.to_owned(),
            description: description.to_owned(),
            caps: Some(json!(caps)),
        };
        self.outputs.push((reg, Arc::new(f)));
        self
    }

    /// Subscribes to event topics once registered (needs the `events` capability):
    /// kernel event types such as `agent_output` (`*` = all) arrive at
    /// [`on_event`](Self::on_event) as `"event"`, `settings.changed` as itself.
    pub fn subscribe(mut self, topics: &[&str]) -> Self {
        self.topics.extend(topics.iter().map(|t| (*t).to_owned()));
        self
    }

    /// Adds a tool; each call of `f` runs on a worker thread of its own (see [`Workers`]).
    pub fn tool(
        mut self,
        reg: ToolRegister,
        f: impl Fn(Value) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        self.tools.push((reg, Arc::new(move |args, _: &Call| f(args))));
        self
    }

    /// Adds a tool whose code needs the call: its sandbox ([`Call::sandbox`]) or
    /// cancellation ([`Call::on_cancel`]).
    pub fn tool_with_call(
        mut self,
        reg: ToolRegister,
        f: impl Fn(Value, &Call) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        self.tools.push((reg, Arc::new(f)));
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
        self.run_on(std::io::stdin().lock(), std::io::stdout(), ready)
    }

    /// [`run`](Self::run) over any transport (tests use pipes).
    pub fn run_on(
        self,
        input: impl BufRead,
        output: impl Write + Send + 'static,
        ready: impl FnOnce(Kernel) + Send + 'static,
    ) -> std::io::Result<()> {
        // Dropped when this function returns, however it returns: every call still
        // waiting then fails at once (see `Kernel::call`).
        let (_open, closed) = crossbeam_channel::bounded::<()>(0);
        let kernel = Kernel {
            out: Arc::new(Mutex::new(Box::new(output))),
            pending: Arc::default(),
            closed,
            next: Arc::new(AtomicU64::new(1)),
            tools: Arc::new(Mutex::new(
                self.tools.iter().map(|(r, f)| (r.name.clone(), f.clone())).collect(),
            )),
            apis: Arc::new(Mutex::new(
                self.apis.iter().map(|(r, f)| (r.name.clone(), f.clone())).collect(),
            )),
        };
        let calls: Arc<Mutex<HashMap<u64, Call>>> = Arc::default();
        let workers = Workers::default();
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
        let outputs: HashMap<String, OutputFn> =
            self.outputs.iter().map(|(r, f)| (r.name.clone(), f.clone())).collect();
        let stages: HashMap<String, StageFn> = self.stages.iter().map(|(r, f)| (r.stage.clone(), f.clone())).collect();
        let mut ready = Some(ready);
        for line in input.lines() {
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
                Frame::Request(req) => {
                    let id = req.id;
                    let call = match KernelRequest::from_request(req) {
                        Ok(c) => c,
                        Err(e) => {
                            eprintln!("{}: {e}", self.name);
                            if id != 0 {
                                kernel.send(&Frame::Response(Response::err(id, e.code(), e.to_string())))?;
                            }
                            continue;
                        }
                    };
                    match call {
                        KernelRequest::Handshake(p) => {
                            let mut features = Vec::new();
                            if let Some(clock) = &self.clock {
                                if let Some(info) = p.clock {
                                    clock.adopt(info);
                                }
                                features.push(crate::clock::FEATURE.to_owned());
                            }
                            let reply = HandshakeReply {
                                protocol: PROTOCOL_VERSION,
                                sdk_version: env!("CARGO_PKG_VERSION").into(),
                                plugin_name: p.plugin_name,
                                pid: std::process::id(),
                                features,
                            };
                            let result = serde_json::to_value(reply).expect("serialisable");
                            kernel.send(&Frame::Response(Response::ok(id, result)))?;
                            // Register from another thread: the answers come through this loop.
                            let mut regs: Vec<PluginRequest> = Vec::new();
                            regs.extend(self.tools.iter().map(|(r, _)| PluginRequest::ToolRegister(r.clone())));
                            regs.extend(self.stages.iter().map(|(r, _)| PluginRequest::StageRegister(r.clone())));
                            regs.extend(
                                self.outputs
                                    .iter()
                                    .map(|(r, _)| PluginRequest::OutputRegister(r.clone())),
                            );
                            regs.extend(self.apis.iter().map(|(r, _)| PluginRequest::ApiRegister(r.clone())));
                            if !self.topics.is_empty() {
                                regs.push(PluginRequest::EventsSubscribe(EventsSubscribe {
                                    topics: self.topics.clone(),
                                }));
                            }
                            let (k, ready) = (kernel.clone(), ready.take());
                            std::thread::spawn(move || {
                                for req in regs {
                                    let what = format!("{req:?}");
                                    if let Err(e) = k.request(req) {
                                        eprintln!("{what} failed: {e}");
                                    }
                                }
                                if let Some(ready) = ready {
                                    ready(k);
                                }
                            });
                        }
                        KernelRequest::ToolInvoke(mut inv) => {
                            let k = kernel.clone();
                            // The kernel's sandbox rides in the arguments; the tool sees it
                            // on the call, never as an argument.
                            let sandbox = inv
                                .args
                                .as_object_mut()
                                .and_then(|a| a.remove(SANDBOX_ARG))
                                .and_then(|v| serde_json::from_value::<SandboxInfo>(v).ok());
                            let mut call = Call::new(id);
                            if let Some(sb) = sandbox {
                                call = call.with_sandbox(sb);
                            }
                            calls.lock().expect("calls lock").insert(id, call.clone());
                            let calls = calls.clone();
                            workers.run(move || {
                                let f = k.tools.lock().expect("tools lock").get(&inv.name).cloned();
                                let outcome = match f {
                                    Some(f) => f(inv.args, &call),
                                    None => Err(format!("this plugin has no tool `{}`", inv.name)),
                                };
                                calls.lock().expect("calls lock").remove(&id);
                                let resp = Response::outcome(id, outcome.map(|text| json!(ToolResult { text })));
                                let _ = k.send(&Frame::Response(resp));
                            });
                        }
                        KernelRequest::ToolCancel(c) => {
                            let call = calls.lock().expect("calls lock").get(&c.id).cloned();
                            if let Some(call) = call {
                                call.cancel();
                            }
                        }
                        KernelRequest::StageInvoke(si) => {
                            let patch = stages.get(&si.stage).map_or(json!({}), |f| f(&si.stage, si.ctx));
                            kernel.send(&Frame::Response(Response::ok(id, patch)))?;
                        }
                        KernelRequest::OutputInvoke(msg) => {
                            let k = kernel.clone();
                            let f = outputs.get(&msg.channel).cloned();
                            workers.run(move || {
                                let outcome = match f {
                                    Some(f) => f(msg.into_value()),
                                    None => Err("this plugin has no such channel".to_owned()),
                                };
                                let resp = Response::outcome(id, outcome.map(|text| json!({ "text": text })));
                                let _ = k.send(&Frame::Response(resp));
                            });
                        }
                        KernelRequest::ApiInvoke(a) => {
                            let k = kernel.clone();
                            let f = kernel.apis.lock().expect("apis lock").get(&a.name).cloned();
                            workers.run(move || {
                                let outcome = match f {
                                    Some(f) => f(a.body),
                                    None => Err(format!("this plugin has no API `{}`", a.name)),
                                };
                                let _ = k.send(&Frame::Response(Response::outcome(id, outcome)));
                            });
                        }
                        KernelRequest::SettingsChanged(v) if id == 0 => {
                            if let Some(tx) = &events {
                                let _ = tx.send((methods::SETTINGS_CHANGED.to_owned(), json!(v)));
                            }
                        }
                        KernelRequest::Event(e) if id == 0 => {
                            if let Some(tx) = &events {
                                let _ = tx.send((methods::EVENT.to_owned(), e));
                            }
                        }
                        KernelRequest::Error(note) => {
                            eprintln!(
                                "{}: the kernel could not read a frame of ours: {}",
                                self.name, note.message
                            );
                        }
                        KernelRequest::PluginStop(_) => return Ok(()),
                        // Settled on a worker: the alarms' work (a reminder's inject)
                        // needs this loop to read the kernel's answers.
                        KernelRequest::ClockSet(set) => match (self.clock.clone(), id) {
                            // A notification only moves the clock: there is no one to answer.
                            (Some(clock), 0) => drop(clock.settle(set.now_ms, Duration::ZERO)),
                            (Some(clock), _) => {
                                let k = kernel.clone();
                                workers.run(move || {
                                    let ack = clock.settle(set.now_ms, crate::clock::SETTLE_LIMIT);
                                    if ack.unsettled {
                                        eprintln!(
                                            "still running what came due at {} after {} s; answering clock.set anyway",
                                            set.now_ms,
                                            crate::clock::SETTLE_LIMIT.as_secs()
                                        );
                                    }
                                    let ack = serde_json::to_value(ack).expect("serialisable");
                                    let _ = k.send(&Frame::Response(Response::ok(id, ack)));
                                });
                            }
                            (None, 0) => {}
                            (None, _) => {
                                let msg = "this plugin does not follow the kernel's clock (no `clock` feature in its handshake); build it with `Plugin::clock`";
                                kernel.send(&Frame::Response(Response::err(id, RpcError::UNKNOWN_METHOD, msg)))?;
                            }
                        },
                        other if id != 0 => {
                            let msg = format!("`{}` must be a notification (id 0)", other.method());
                            kernel.send(&Frame::Response(Response::err(id, RpcError::INVALID_PARAMS, msg)))?;
                        }
                        _ => {}
                    }
                }
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
mod worker_tests {
    use super::Workers;
    use std::time::{Duration, Instant};

    #[test]
    fn jobs_never_wait_behind_a_slow_one_and_threads_are_reused() {
        let w = Workers::default();
        let (tx, rx) = crossbeam_channel::unbounded();
        // A slow job holds its worker; a quick one submitted after it still runs.
        let (release, hold) = crossbeam_channel::bounded::<()>(0);
        w.run(move || {
            let _ = hold.recv();
        });
        let t = tx.clone();
        w.run(move || t.send(std::thread::current().id()).unwrap());
        let first = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("not blocked by the slow job");
        // Sequential quick jobs reuse that worker once it is idle again.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut reused = false;
        while !reused && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            let t = tx.clone();
            w.run(move || t.send(std::thread::current().id()).unwrap());
            reused = rx.recv_timeout(Duration::from_secs(10)).unwrap() == first;
        }
        assert!(reused, "an idle worker should take the next job");
        release.send(()).unwrap();
        // Many at once: all run, none lost.
        for i in 0..50 {
            let t = tx.clone();
            w.run(move || {
                std::thread::sleep(Duration::from_millis(2));
                t.send(std::thread::current().id()).unwrap();
                let _ = i;
            });
        }
        for _ in 0..50 {
            rx.recv_timeout(Duration::from_secs(10)).expect("every job runs");
        }
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

    use super::*;
    use std::io::BufReader;

    /// A call waiting for its answer when the kernel closes the connection fails at
    /// once, saying so (it used to wait out the 30 s timeout).
    #[test]
    fn a_pending_call_fails_when_the_kernel_closes_the_connection() {
        let (k2p_r, mut k2p_w) = std::io::pipe().unwrap();
        let (p2k_r, p2k_w) = std::io::pipe().unwrap();
        let (done_tx, done_rx) = mpsc::channel::<Result<Value, String>>();
        let plugin = std::thread::spawn(move || {
            Plugin::new("t").run_on(BufReader::new(k2p_r), p2k_w, move |k| {
                let _ = done_tx.send(k.call("knowledge.list", json!({})));
            })
        });
        let mut lines = BufReader::new(p2k_r).lines();
        k2p_w
            .write_all(
                b"{\"id\": 1, \"method\": \"handshake\", \"params\": {\"protocol\": 1, \"core_version\": \"t\", \"plugin_name\": \"t\"}}\n",
            )
            .unwrap();
        // The handshake answer, then the ready callback's call, which is never answered.
        let mut asked = false;
        while !asked {
            let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            asked = v["method"] == "knowledge.list";
        }
        drop(k2p_w);
        plugin.join().unwrap().unwrap();
        let err = done_rx.recv().unwrap().unwrap_err();
        assert!(
            err.contains("closed the connection") && err.contains("knowledge.list"),
            "{err}"
        );
    }

    /// Plays the kernel against a plugin built with the SDK, over real pipes.
    #[test]
    fn the_sdk_registers_everything_serves_stage_output_and_events_and_calls_typed_helpers() {
        let (k2p_r, mut k2p_w) = std::io::pipe().unwrap();
        let (p2k_r, p2k_w) = std::io::pipe().unwrap();
        let (events_tx, events_rx) = mpsc::channel::<Value>();
        let (ready_tx, ready_rx) = mpsc::channel::<String>();
        let events_tx = Mutex::new(events_tx);
        let plugin = std::thread::spawn(move || {
            Plugin::new("t")
                .stage("before_output", "global", |stage, ctx| {
                    json!({"final_text": format!("{} ({stage})", ctx["final_text"].as_str().unwrap_or(""))})
                })
                .output("box", "a test box", &["text", "image"], |m| {
                    Ok(format!("boxed {}", m["payload"].as_str().unwrap_or("")))
                })
                .subscribe(&["agent_output"])
                .on_event(move |_, method, e| {
                    if method == "event" {
                        let _ = events_tx.lock().unwrap().send(e);
                    }
                })
                .run_on(BufReader::new(k2p_r), p2k_w, move |k| {
                    let commit = k.memory_commit(&[Triple::new("Ann", "likes", "tea")]).unwrap();
                    let t = k.social_trait("Ann", "hobby").unwrap();
                    let denied = k.doc_insert("x", "").unwrap_err();
                    let _ = ready_tx.send(format!("{commit:?} {t:?} {denied}"));
                })
        });
        let mut lines = BufReader::new(p2k_r).lines();
        let mut send = |v: Value| {
            k2p_w.write_all(format!("{v}\n").as_bytes()).unwrap();
            k2p_w.flush().unwrap();
        };
        send(
            json!({"id": 1, "method": "handshake", "params": {"protocol": 1, "core_version": "t", "plugin_name": "t"}}),
        );
        let mut seen = Vec::new();
        let mut answered = 0;
        let mut ready_calls = 0;
        let mut stage_answer = None;
        let mut output_answer = None;
        while stage_answer.is_none() || output_answer.is_none() {
            let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            if v.get("method").is_none() {
                match v["id"].as_u64() {
                    Some(1) => assert_eq!(v["result"]["plugin_name"], "t"),
                    Some(90) => stage_answer = Some(v),
                    Some(91) => output_answer = Some(v),
                    _ => panic!("unexpected {v}"),
                }
                continue;
            }
            let method = v["method"].as_str().unwrap().to_owned();
            if ["memory.commit", "social.getTrait", "doc.insert"].contains(&method.as_str()) {
                ready_calls += 1;
            }
            let result = match method.as_str() {
                "memory.commit" => {
                    assert_eq!(
                        v["params"]["triples"][0],
                        json!({"subject": "Ann", "relation": "likes", "object": "tea"})
                    );
                    json!({"entities": 2, "relations": 1})
                }
                "social.getTrait" => json!({"found": true, "value": "chess"}),
                "doc.insert" => {
                    send(json!({"id": v["id"], "error": {"code": -32001, "message": "needs doc_memory"}}));
                    continue;
                }
                "output.register" => {
                    assert_eq!(v["params"]["caps"], json!(["text", "image"]));
                    json!({"ok": true})
                }
                "events.subscribe" => {
                    assert_eq!(v["params"]["topics"], json!(["agent_output"]));
                    json!({"ok": true})
                }
                _ => json!({"ok": true}),
            };
            seen.push(method);
            send(json!({"id": v["id"], "result": result}));
            answered += 1;
            if answered == 3 {
                // Registrations are in: drive the plugin.
                send(
                    json!({"id": 90, "method": "stage.invoke", "params": {"stage": "before_output", "ctx": {"final_text": "hi"}}}),
                );
                send(json!({"id": 91, "method": "output.invoke", "params": {"channel": "box", "payload": "p"}}));
                send(json!({"id": 0, "method": "event", "params": {"type": "agent_output", "text": "x"}}));
            }
        }
        assert_eq!(seen[..3], ["stage.register", "output.register", "events.subscribe"]);
        assert_eq!(
            stage_answer.unwrap()["result"],
            json!({"final_text": "hi (before_output)"})
        );
        assert_eq!(output_answer.unwrap()["result"], json!({"text": "boxed p"}));
        assert_eq!(events_rx.recv_timeout(Duration::from_secs(10)).unwrap()["text"], "x");
        // The ready callback's calls are answered as they come.
        while ready_calls < 3 {
            let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            ready_calls += 1;
            let result = match v["method"].as_str() {
                Some("memory.commit") => json!({"entities": 2, "relations": 1}),
                Some("social.getTrait") => json!({"found": true, "value": "chess"}),
                Some("doc.insert") => {
                    send(json!({"id": v["id"], "error": {"code": -32001, "message": "needs doc_memory"}}));
                    continue;
                }
                other => panic!("unexpected {other:?}"),
            };
            send(json!({"id": v["id"], "result": result}));
        }
        let ready = ready_rx.recv_timeout(Duration::from_secs(10)).ok();
        assert_eq!(ready.unwrap(), r#"(2, 1) Some("chess") needs doc_memory"#);
        send(json!({"id": 0, "method": "plugin.stop", "params": null}));
        plugin.join().unwrap().unwrap();
    }

    /// A plugin that follows the clock: the handshake declares the feature and sets the
    /// kernel's virtual time; a `clock.set` that reaches an alarm's time is answered
    /// only after the work it woke — here a kernel call, answered through the same
    /// read loop — is done, with when the plugin is due next.
    #[test]
    fn clock_set_is_answered_after_what_came_due_has_run() {
        const T0: i64 = 1_000_000_000_000;
        const HOUR: i64 = 3_600_000;
        let (k2p_r, mut k2p_w) = std::io::pipe().unwrap();
        let (p2k_r, p2k_w) = std::io::pipe().unwrap();
        let clock = Clock::default();
        let (c, alarm) = (clock.clone(), clock.alarm());
        let plugin = std::thread::spawn(move || {
            Plugin::new("t")
                .clock(&c)
                .run_on(BufReader::new(k2p_r), p2k_w, move |k| {
                    std::thread::spawn(move || {
                        let mut at = Some(T0 + HOUR);
                        while alarm.wait_until(at) == Wake::Due {
                            let _ = k.inject_interrupt("reminder", "L3");
                            at = at.map(|t| t + HOUR);
                        }
                    });
                })
        });
        let mut lines = BufReader::new(p2k_r).lines();
        let mut send = |v: Value| {
            k2p_w.write_all(format!("{v}\n").as_bytes()).unwrap();
            k2p_w.flush().unwrap();
        };
        let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
        send(
            json!({"id": 1, "method": "handshake", "params": {"protocol": 1, "core_version": "t", "plugin_name": "t",
            "clock": {"mode": "virtual", "now_ms": T0}}}),
        );
        let hello = next();
        assert_eq!(hello["result"]["features"], json!(["clock"]), "{hello}");
        assert!(clock.is_virtual() && clock.reached_ms() == T0);
        // The start of an advance: nothing due, the next time named.
        send(json!({"id": 2, "method": "clock.set", "params": {"now_ms": T0}}));
        assert_eq!(next(), json!({"id": 2, "result": {"next_ms": T0 + HOUR, "due": 0}}));
        // The alarm's moment: its kernel call comes first, the answer after it.
        send(json!({"id": 3, "method": "clock.set", "params": {"now_ms": T0 + HOUR}}));
        let inject = next();
        assert_eq!(inject["method"], "io.injectInterrupt", "{inject}");
        send(json!({"id": inject["id"], "result": {"task_id": 9}}));
        assert_eq!(next(), json!({"id": 3, "result": {"next_ms": T0 + 2 * HOUR, "due": 1}}));
        send(json!({"id": 0, "method": "plugin.stop"}));
        plugin.join().unwrap().unwrap();

        // A plugin that does not follow the clock declares nothing and refuses clock.set.
        let (k2p_r, mut k2p_w) = std::io::pipe().unwrap();
        let (p2k_r, p2k_w) = std::io::pipe().unwrap();
        let plugin = std::thread::spawn(move || Plugin::new("u").run_on(BufReader::new(k2p_r), p2k_w, |_| {}));
        let mut lines = BufReader::new(p2k_r).lines();
        for v in [
            json!({"id": 1, "method": "handshake", "params": {"protocol": 1, "core_version": "t", "plugin_name": "u",
                "clock": {"mode": "virtual", "now_ms": T0}}}),
            json!({"id": 2, "method": "clock.set", "params": {"now_ms": T0}}),
        ] {
            k2p_w.write_all(format!("{v}\n").as_bytes()).unwrap();
        }
        let hello: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(hello["result"]["features"], json!([]));
        let refused: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(refused["error"]["code"], RpcError::UNKNOWN_METHOD, "{refused}");
        drop(k2p_w);
        plugin.join().unwrap().unwrap();
    }

    /// `Plugin::api` registers with `api.register` after the handshake and answers
    /// `api.invoke` with the handler's result or error; a method the SDK does not know
    /// is answered `-32601`, a call meant as a notification `-32602`; `inject_sync`
    /// sends `io.injectInputSync` and returns the reply.
    #[test]
    fn the_sdk_offers_named_apis_and_answers_unknown_kernel_calls_with_typed_errors() {
        let (k2p_r, mut k2p_w) = std::io::pipe().unwrap();
        let (p2k_r, p2k_w) = std::io::pipe().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Value, String>>();
        let plugin = std::thread::spawn(move || {
            Plugin::new("t")
                .api("hello", |body| {
                    if body.is_null() {
                        Err("send a body".to_owned())
                    } else {
                        Ok(json!({ "got": body }))
                    }
                })
                .run_on(BufReader::new(k2p_r), p2k_w, move |k| {
                    let _ = ready_tx.send(k.inject_sync("are you there?", None));
                })
        });
        let mut lines = BufReader::new(p2k_r).lines();
        let mut send = |v: Value| {
            k2p_w.write_all(format!("{v}\n").as_bytes()).unwrap();
            k2p_w.flush().unwrap();
        };
        let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
        send(
            json!({"id": 1, "method": "handshake", "params": {"protocol": 1, "core_version": "t", "plugin_name": "t"}}),
        );
        assert_eq!(next()["result"]["plugin_name"], "t");
        let reg = next();
        assert_eq!(
            (reg["method"].as_str(), &reg["params"]),
            (Some("api.register"), &json!({"name": "hello"}))
        );
        send(json!({"id": reg["id"], "result": {"ok": true, "route": "/api/v1/plugins/t/api/hello"}}));
        let sync = next();
        assert_eq!(sync["method"], "io.injectInputSync");
        assert_eq!(
            sync["params"],
            json!({"text": "are you there?", "source": null, "priority": null})
        );
        send(json!({"id": sync["id"], "result": {"task_id": 4, "reply": "yes"}}));
        assert_eq!(
            ready_rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap(),
            json!({"task_id": 4, "reply": "yes"})
        );

        let mut answers = std::collections::BTreeMap::new();
        send(json!({"id": 50, "method": "api.invoke", "params": {"name": "hello", "body": {"q": 1}}}));
        send(json!({"id": 51, "method": "api.invoke", "params": {"name": "hello"}}));
        send(json!({"id": 52, "method": "api.invoke", "params": {"name": "nope", "body": 1}}));
        send(json!({"id": 53, "method": "kernel.newThing", "params": {}}));
        send(json!({"id": 54, "method": "tool.invoke", "params": {"args": {}}}));
        send(json!({"id": 55, "method": "event", "params": {"type": "x"}}));
        while answers.len() < 6 {
            let v = next();
            answers.insert(v["id"].as_u64().unwrap(), v);
        }
        assert_eq!(answers[&50]["result"], json!({"got": {"q": 1}}));
        assert_eq!(answers[&51]["error"]["message"], "send a body");
        assert!(
            answers[&52]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no API `nope`")
        );
        assert_eq!(answers[&53]["error"]["code"], RpcError::UNKNOWN_METHOD);
        assert!(
            answers[&53]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("unknown method `kernel.newThing`")
        );
        assert_eq!(answers[&54]["error"]["code"], RpcError::INVALID_PARAMS);
        assert!(
            answers[&54]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("missing field `name`")
        );
        assert_eq!(answers[&55]["error"]["code"], RpcError::INVALID_PARAMS);
        send(json!({"id": 0, "method": "plugin.stop"}));
        plugin.join().unwrap().unwrap();
    }
}
