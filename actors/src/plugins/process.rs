//! One subprocess plugin as an actor: spawn, handshake, serve its requests, notice
//! its death. Its supervisor (`kernel/plugins/<name>`) restarts it with backoff and
//! quarantines it past the restart intensity.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::future::BoxFuture;
use homeagent_plugin_protocol::clock::{ClockInfo, ClockMode};
use homeagent_plugin_protocol::frame::{Frame, Request, RpcError, decode};
use homeagent_plugin_protocol::methods::{ToolInvoke, ToolResult};
use homeagent_plugin_protocol::request::{ApiInvoke, ErrorNote, NoParams, OutputInvoke, StageInvoke};
use homeagent_plugin_protocol::{
    HandshakeParams, HandshakeReply, KernelRequest, MAX_FRAME_BYTES, Manifest, PROTOCOL_VERSION, PluginRequest,
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::conn::{Conn, STDERR_TAIL};
use super::services;
use crate::addr::TAddr;
use crate::agent::intake::{EventLoop, InterceptLoop};
use crate::host::{Host, HostContext, KernelActor};
use crate::stages::{
    Patch, RegisterStage, RegisterTool, Stage, StageContext, StageHandler, StageHost, ToolFailure, ToolHandler,
    UnregisterPlugin,
};

mod own;

/// Time a plugin has to answer the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest an HTTP call of a subprocess plugin's named API (`api.invoke`) waits: more
/// than a sync injection (300 s), which an API handler may make.
pub const API_TIMEOUT: Duration = Duration::from_secs(330);

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError {
        code: RpcError::INVALID_PARAMS,
        message: message.into(),
    }
}

/// What a plugin process needs from the kernel.
#[derive(Clone)]
pub struct PluginDeps {
    pub stages: TAddr<StageHost>,
    pub event_loop: TAddr<EventLoop>,
    pub intercept_loop: TAddr<InterceptLoop>,
    /// Own settings (`settings.get`) and their change events (`events.subscribe`).
    pub config: TAddr<crate::config::ConfigActor>,
    pub bus: crate::bus::EventBus,
    /// Memory, documents, knowledge, text memory, social, channels and events.
    pub services: super::services::KernelServices,
    /// What the process may touch, enforced by the kernel ([`super::confine`]).
    pub confiner: Arc<super::confine::Confiner>,
    /// To restart itself through its supervisor (new grants).
    pub registry: Arc<crate::registry::Registry>,
}

impl PluginDeps {
    /// What checking and submitting an injection reads ([`super::services::io`]).
    pub fn injector(&self) -> super::services::io::Injector<'_> {
        super::services::io::Injector {
            event_loop: &self.event_loop,
            intercept_loop: &self.intercept_loop,
            media: self.services.media.as_ref(),
        }
    }
}

/// Live facts about a plugin for the API (survive restarts of its actor).
#[derive(Debug, Default)]
pub struct PluginInfo {
    pub pid: Mutex<Option<u32>>,
    pub tools: Mutex<Vec<String>>,
    pub stderr: Arc<Mutex<VecDeque<String>>>,
    /// Named APIs the plugin offers over HTTP (`sdk.register_api`).
    pub apis: Mutex<PluginApis>,
    /// How the first start ended (an install waits for it and rolls back on failure).
    pub readiness: Readiness,
    /// Which instance runs now and whether it finished starting.
    pub instances: Instances,
    /// What its running process was granted ([`super::confine`]); the watcher restarts
    /// it when the settings grant something else.
    pub grants: Mutex<Option<super::confine::Grants>>,
    /// `kernel/plugins/<name>`: the supervisor that restarts it.
    pub supervisor_id: String,
    /// A Lua plugin inside a call since then (the watcher restarts one past
    /// [`super::lua::CALL_DEADLINE`]).
    pub busy_since: Mutex<Option<std::time::Instant>>,
    /// A Lua plugin's instruction counter, to abort a call its abandoned thread is
    /// still running (`llm::adapter::abort`).
    pub lua_budget: Mutex<Option<Arc<std::sync::atomic::AtomicU64>>>,
    /// Set while its process runs and follows the kernel's clock (it declared the
    /// `clock` feature): how a virtual clock tells it the time ([`super::clock`]).
    pub clock: Mutex<Option<super::clock::Follower>>,
}

/// The outcome of a plugin's first start: ready (handshake answered, Lua `start()`
/// returned) or why not. Set once; later restarts do not change it.
#[derive(Debug, Default)]
pub struct Readiness {
    state: Mutex<Option<Result<(), String>>>,
    notify: tokio::sync::Notify,
}

impl Readiness {
    /// Records the outcome, if none was recorded yet.
    pub fn set(&self, outcome: Result<(), String>) {
        let mut s = self.state.lock();
        if s.is_none() {
            *s = Some(outcome);
            drop(s);
            self.notify.notify_waiters();
        }
    }

    /// The outcome, waiting up to `timeout` for it (`None`: still not known).
    pub async fn wait(&self, timeout: std::time::Duration) -> Option<Result<(), String>> {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(r) = self.state.lock().clone() {
            return Some(r);
        }
        let _ = tokio::time::timeout(timeout, notified).await;
        self.state.lock().clone()
    }
}

/// Which instance of a plugin is the newest and whether it finished starting (its
/// handshake answered; a Lua plugin's `start()` returned and its registrations are in).
/// The listing says `running` only then — a plugin whose tools are not registered yet is
/// still starting — and a Lua instance abandoned while stuck, which ends long after its
/// successor started, leaves the successor's registrations alone.
#[derive(Debug, Default)]
pub struct Instances {
    started: std::sync::atomic::AtomicU64,
    ready: std::sync::atomic::AtomicU64,
    /// The newest instance that ended (its actor stopped: it failed to start, crashed
    /// or was stopped).
    ended: std::sync::atomic::AtomicU64,
    /// A restart was asked for and its instance has not begun: the old one, still
    /// running (or stuck) until it stops, no longer counts as ready.
    replacing: std::sync::atomic::AtomicBool,
    /// Woken at every begin, ready and end ([`Self::ready_after`] waits on it).
    changed: tokio::sync::Notify,
}

impl Instances {
    /// A new instance starts: its number (from 1).
    pub fn begin(&self) -> u64 {
        let n = self.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        self.replacing.store(false, std::sync::atomic::Ordering::SeqCst);
        self.changed.notify_waiters();
        n
    }

    /// A restart is asked for (`false`: the request failed, the old instance stays).
    pub fn replacing(&self, on: bool) {
        self.replacing.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Instance `n` finished starting (ignored once a newer one began).
    pub fn ready(&self, n: u64) {
        if self.is_current(n) {
            self.ready.store(n, std::sync::atomic::Ordering::SeqCst);
            self.changed.notify_waiters();
        }
    }

    /// Instance `n`'s actor stopped.
    pub fn ended(&self, n: u64) {
        self.ended.fetch_max(n, std::sync::atomic::Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// The newest instance's number (0: none started yet).
    pub fn newest(&self) -> u64 {
        self.started.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits up to `timeout` for an instance newer than `before` to finish starting, or
    /// to end without (a plugin that fails at start); answers whether one is ready (a
    /// restart's answer then describes the new instance, not the one it replaced).
    pub async fn ready_after(&self, before: u64, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let newest = self.newest();
            if newest > before && self.is_ready() {
                return true;
            }
            if newest > before && self.ended.load(std::sync::atomic::Ordering::SeqCst) == newest {
                return false;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return false;
            }
        }
    }

    /// Whether `n` is the newest instance.
    pub fn is_current(&self, n: u64) -> bool {
        self.started.load(std::sync::atomic::Ordering::SeqCst) == n
    }

    /// Whether the newest instance finished starting (and no restart is replacing it).
    pub fn is_ready(&self) -> bool {
        let n = self.started.load(std::sync::atomic::Ordering::SeqCst);
        n > 0
            && self.ready.load(std::sync::atomic::Ordering::SeqCst) == n
            && !self.replacing.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Calls one of a plugin's named APIs with a JSON body.
pub type ApiCall = Arc<dyn Fn(String, Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// The named APIs of a plugin, and how to reach the running instance.
#[derive(Default)]
pub struct PluginApis {
    /// The names, as registered.
    pub names: Vec<String>,
    /// Set while the plugin runs.
    pub call: Option<ApiCall>,
}

impl std::fmt::Debug for PluginApis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginApis")
            .field("names", &self.names)
            .field("running", &self.call.is_some())
            .finish()
    }
}

/// Why a named API call did not get an answer from the plugin.
#[derive(Debug, thiserror::Error)]
pub enum ApiCallError {
    #[error("plugin `{plugin}` offers no API `{name}`; its APIs: {known}")]
    Unknown {
        plugin: String,
        name: String,
        known: String,
    },
    #[error("plugin `{0}` is not running; see GET /api/v1/plugins, or POST /api/v1/plugins/{0}/restart")]
    NotRunning(String),
    #[error("plugin `{plugin}` API `{name}` failed: {error}")]
    Failed {
        plugin: String,
        name: String,
        error: String,
    },
}

impl PluginInfo {
    /// Lists `api` among `plugin`'s named APIs (once); answers its route.
    pub fn add_api(&self, plugin: &str, api: &str) -> String {
        let mut a = self.apis.lock();
        if !a.names.iter().any(|n| n == api) {
            a.names.push(api.to_owned());
        }
        tracing::info!(%plugin, %api, "named API registered");
        format!("/api/v1/plugins/{plugin}/api/{api}")
    }

    /// Calls the plugin's API `name` with `body`.
    pub async fn call_api(&self, plugin: &str, name: &str, body: Value) -> Result<Value, ApiCallError> {
        let call = {
            let apis = self.apis.lock();
            if !apis.names.iter().any(|n| n == name) {
                let known = if apis.names.is_empty() {
                    "none".to_owned()
                } else {
                    apis.names.join(", ")
                };
                return Err(ApiCallError::Unknown {
                    plugin: plugin.to_owned(),
                    name: name.to_owned(),
                    known,
                });
            }
            apis.call
                .clone()
                .ok_or_else(|| ApiCallError::NotRunning(plugin.to_owned()))?
        };
        call(name.to_owned(), body).await.map_err(|error| ApiCallError::Failed {
            plugin: plugin.to_owned(),
            name: name.to_owned(),
            error,
        })
    }
}

/// The plugin actor.
pub struct PluginProcess {
    manifest: Manifest,
    dir: PathBuf,
    entry: PathBuf,
    data_dir: PathBuf,
    deps: PluginDeps,
    info: Arc<PluginInfo>,
    conn: Option<Arc<Conn>>,
    pid: Option<u32>,
    stopping: bool,
    own: own::OwnState,
    /// The plugin's event subscription (ends with this instance).
    events: super::services::EventSub,
    /// This instance's number ([`Instances`]).
    instance: u64,
}

impl PluginProcess {
    pub fn new(
        manifest: Manifest,
        dir: PathBuf,
        entry: PathBuf,
        data_dir: PathBuf,
        deps: PluginDeps,
        info: Arc<PluginInfo>,
    ) -> Self {
        Self {
            manifest,
            dir,
            entry,
            data_dir,
            deps,
            info,
            conn: None,
            pid: None,
            stopping: false,
            own: own::OwnState::default(),
            events: Default::default(),
            instance: 0,
        }
    }

    fn name(&self) -> &str {
        &self.manifest.name
    }

    fn spawn(&mut self, ctx: &mut HostContext<Self>) -> Result<(), String> {
        let _ = std::fs::create_dir_all(&self.data_dir);
        // Built here, in the daemon; applied in the child before the exec.
        let confiner = &self.deps.confiner;
        let grants = confiner.grants(self.name(), &self.dir);
        let confinement = confiner
            .prepare(self.name(), &self.dir, &grants)
            .map_err(|e| e.to_string())?;
        *self.info.grants.lock() = Some(grants);
        let mut cmd = tokio::process::Command::new(&self.entry);
        cmd.current_dir(&self.dir)
            .env_clear()
            .envs(super::confine::Confiner::environment(&self.data_dir))
            .env("HOMEAGENT_PLUGIN", self.name())
            .env("HOMEAGENT_PLUGIN_DATA", &self.data_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // SAFETY: prctl and the confinement's `apply` only make system calls (no
        // allocation, no locks). The parent-death signal ends the plugin with the daemon
        // even on `kill -9`.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                match &confinement {
                    Some(c) => c.apply(),
                    None => Ok(()),
                }
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "cannot start {}: {e}; check that it exists and is executable",
                self.entry.display()
            )
        })?;
        self.pid = child.id();
        *self.info.pid.lock() = self.pid;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");

        // Writer: frames queued by anyone go out in order.
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        actix::spawn(async move {
            let mut stdin = stdin;
            while let Some(bytes) = rx.recv().await {
                if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
            // The queue closed (stop) or the pipe broke: closing stdin tells the plugin.
        });
        self.info.stderr.lock().clear();
        let conn = Arc::new(Conn::new(self.name(), tx, self.info.stderr.clone()));
        self.conn = Some(conn.clone());

        // stderr: the plugin's log, kept as a tail and forwarded to ours.
        let name = self.name().to_owned();
        let tail = self.info.stderr.clone();
        actix::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(plugin = %name, "{line}");
                let mut t = tail.lock();
                if t.len() >= STDERR_TAIL {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });

        // stdout: responses complete calls; requests go to the actor in order.
        let (req_tx, req_rx) = mpsc::unbounded_channel::<Request>();
        let name = self.name().to_owned();
        let reader_conn = conn.clone();
        actix::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match read_frame(&mut reader, &mut buf).await {
                    Ok(None) => break,
                    Ok(Some(())) => {}
                    Err(e) => {
                        tracing::warn!(plugin = %name, "{e}");
                        reader_conn.respond_error_to_garbage(&e);
                        continue;
                    }
                }
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match decode(&buf) {
                    Ok(Frame::Response(r)) => reader_conn.complete(r),
                    Ok(Frame::Request(r)) => {
                        let _ = req_tx.send(r);
                    }
                    Err(e) => {
                        tracing::warn!(plugin = %name, "bad frame from the plugin: {e}");
                        // No id to answer: tell the plugin with an `error` notification.
                        reader_conn.respond_error_to_garbage(&e.to_string());
                    }
                }
            }
        });
        self.serve(req_rx, ctx);

        // A dedicated wait: the exit is seen even if a grandchild keeps stdout open.
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move { child.wait().await }).map(|status, host, ctx| {
                let status = status.map_or_else(|e| format!("unknown ({e})"), |s| s.to_string());
                host.inner().on_exit(status, ctx);
            }),
        );

        // Handshake, bounded.
        let mode = if crate::clock::is_virtual() {
            ClockMode::Virtual
        } else {
            ClockMode::Wall
        };
        let hello = KernelRequest::Handshake(HandshakeParams {
            protocol: PROTOCOL_VERSION,
            core_version: super::CORE_VERSION.into(),
            plugin_name: self.name().to_owned(),
            clock: Some(ClockInfo {
                mode,
                now_ms: crate::clock::now_ms(),
            }),
        });
        let hs_conn = conn.clone();
        let fut = async move { tokio::time::timeout(HANDSHAKE_TIMEOUT, hs_conn.request(hello)).await };
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, host, ctx| {
                let me = host.inner();
                let outcome = match res {
                    Err(_) => Err(format!("no handshake answer within {HANDSHAKE_TIMEOUT:?}")),
                    Ok(Err(e)) => Err(e),
                    Ok(Ok(v)) => serde_json::from_value::<HandshakeReply>(v)
                        .map_err(|e| format!("bad handshake answer: {e}"))
                        .and_then(|r| r.check(me.name()).map(|()| r)),
                };
                match outcome {
                    Ok(reply) => {
                        tracing::info!(plugin = %me.name(), pid = ?me.pid, features = ?reply.features, "plugin ready");
                        if reply.has(homeagent_plugin_protocol::clock::FEATURE) {
                            me.follow_clock(conn);
                        }
                        me.info.readiness.set(Ok(()));
                        me.info.instances.ready(me.instance);
                    }
                    Err(e) => {
                        let msg = format!("plugin `{}` handshake failed: {e}", me.name());
                        me.info.readiness.set(Err(msg.clone()));
                        me.kill(libc::SIGKILL);
                        Host::<Self>::fail(ctx, msg);
                    }
                }
            }),
        );
        Ok(())
    }

    /// The plugin follows the kernel's clock: a virtual clock tells it the time from now
    /// on. Told once at once too: an advance that ran while the handshake was on its
    /// way found the plugin not yet following (on the wall clock nothing is sent).
    fn follow_clock(&self, conn: Arc<Conn>) {
        let follower = super::clock::Follower::new(conn);
        *self.info.clock.lock() = Some(follower.clone());
        if crate::clock::is_virtual() {
            let name = self.name().to_owned();
            actix::spawn(async move {
                if let Err(e) = follower.tell(&name, crate::clock::now_ms()).await {
                    tracing::debug!("after the handshake: {e}");
                }
            });
        }
    }

    /// Handles the plugin's requests one at a time, in arrival order.
    fn serve(&mut self, mut rx: mpsc::UnboundedReceiver<Request>, ctx: &mut HostContext<Self>) {
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(async move {
                let r = rx.recv().await;
                (rx, r)
            })
            .map(|(rx, req), host, ctx| {
                let Some(req) = req else { return };
                host.inner().on_request(req, ctx);
                host.inner().serve(rx, ctx);
            }),
        );
    }

    /// One request of the plugin: the frame is decoded once into a [`PluginRequest`]
    /// (an unknown method or bad params is answered here, typed), the decoded call's
    /// capability is checked against the manifest, and the call is handed to the family
    /// that serves it: this plugin's own state (`own.rs`), the data and settings
    /// services, the `io` service, or the registrations below.
    fn on_request(&mut self, req: Request, ctx: &mut HostContext<Self>) {
        let Some(conn) = self.conn.clone() else { return };
        let id = req.id;
        let call = match PluginRequest::from_request(req) {
            Ok(c) => c,
            Err(e) => {
                tracing::info!(plugin = %self.name(), "bad request: {e}");
                return conn.respond(id, Err(e.into()));
            }
        };
        if let Err(denial) = self.manifest.permits(&call) {
            tracing::warn!(plugin = %self.name(), method = call.method(), "call denied");
            return conn.respond(id, Err(denial.into()));
        }
        let Some(call) = self.on_own_request(id, call, ctx) else {
            return;
        };
        let call = match self.deps.services.call(&self.manifest, call) {
            Ok(fut) => return drop(actix::spawn(async move { conn.respond(id, fut.await) })),
            Err(call) => call,
        };
        let call = match services::io::prepare(&self.deps.injector(), &self.manifest, call, conn.tools_in_flight()) {
            Ok(Ok(prepared)) => {
                let fut = prepared.submit(&self.deps.injector());
                return drop(actix::spawn(async move {
                    conn.respond(id, fut.await.map_err(RpcError::from))
                }));
            }
            Ok(Err(refused)) => return conn.respond(id, Err(refused.into())),
            Err(call) => call,
        };
        self.on_registration(id, call, conn, ctx);
    }

    /// Tools, stage handlers, output channels and named APIs: registrations that call
    /// back into this plugin over its connection.
    fn on_registration(&mut self, id: u64, call: PluginRequest, conn: Arc<Conn>, ctx: &mut HostContext<Self>) {
        let name = self.name().to_owned();
        let result = match call {
            PluginRequest::ToolRegister(t) => {
                let spec = match services::tool_spec(&name, &t) {
                    Ok(spec) => spec,
                    Err(e) => return conn.respond(id, Err(invalid(format!("tool `{}`: {e}", t.name)))),
                };
                let handler: Arc<dyn ToolHandler> = Arc::new(PluginTool {
                    conn: conn.clone(),
                    tool: t.name.clone(),
                });
                let stages = self.deps.stages.clone();
                let info = self.info.clone();
                let fut = async move { stages.send(RegisterTool { spec, handler }).await };
                ctx.spawn(
                    actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, _, _| match res {
                        Ok(Ok(())) => {
                            info.tools.lock().push(t.name);
                            conn.respond(id, Ok(json!({"ok": true})));
                        }
                        Ok(Err(e)) => conn.respond(id, Err(invalid(e.to_string()))),
                        Err(e) => conn.respond(
                            id,
                            Err(RpcError {
                                code: RpcError::GONE,
                                message: e.to_string(),
                            }),
                        ),
                    }),
                );
                return;
            }
            PluginRequest::StageRegister(reg) => {
                let (stage, scope) = match services::parse_stage(&reg) {
                    Ok(x) => x,
                    Err(e) => return conn.respond(id, Err(e)),
                };
                let c = conn.clone();
                let handler: Arc<dyn StageHandler> = Arc::new(
                    move |stage: Stage, sctx: StageContext| -> BoxFuture<'static, Result<Patch, String>> {
                        let c = c.clone();
                        Box::pin(async move {
                            let call = KernelRequest::StageInvoke(StageInvoke {
                                stage: stage.as_str().to_owned(),
                                ctx: serde_json::to_value(&sctx).unwrap_or_default(),
                            });
                            let v = c.request(call).await?;
                            if v.is_null() {
                                return Ok(Patch::default());
                            }
                            serde_json::from_value(v)
                                .map_err(|e| format!("bad stage.invoke answer (a patch object): {e}"))
                        })
                    },
                );
                let stages = self.deps.stages.clone();
                let fut = async move {
                    stages
                        .send(RegisterStage {
                            plugin: name,
                            stage,
                            scope,
                            handler,
                        })
                        .await
                };
                ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, _, _| {
                    // The stage host's own refusal is the plugin's to hear, not an `ok`.
                    let answer = match res {
                        Ok(Ok(_)) => Ok(json!({"ok": true})),
                        Ok(Err(e)) => Err(invalid(e.to_string())),
                        Err(e) => Err(RpcError {
                            code: RpcError::GONE,
                            message: e.to_string(),
                        }),
                    };
                    conn.respond(id, answer)
                }));
                return;
            }
            PluginRequest::OutputRegister(reg) => {
                let c = conn.clone();
                let deliver: services::Deliver =
                    Arc::new(move |msg: Value| -> BoxFuture<'static, crate::stages::ToolResult> {
                        let c = c.clone();
                        Box::pin(async move {
                            let msg = serde_json::from_value::<OutputInvoke>(msg)
                                .map_err(|e| ToolFailure::Text(format!("a channel message without `channel`: {e}")))?;
                            let v = c
                                .request(KernelRequest::OutputInvoke(msg))
                                .await
                                .map_err(ToolFailure::Text)?;
                            Ok(v.get("text").and_then(Value::as_str).unwrap_or("").to_owned())
                        })
                    });
                self.deps.services.register_output(&name, &reg, deliver)
            }
            PluginRequest::InputRegister(reg) => services::register_input(&self.deps.services.channels, &name, &reg),
            PluginRequest::OutputUnregister(u) => {
                Ok(json!({"removed": self.deps.services.channels.unregister(&name, &u.name)}))
            }
            PluginRequest::ApiRegister(reg) => match reg.check() {
                Err(e) => Err(invalid(e)),
                Ok(()) => {
                    let c = conn.clone();
                    let call: ApiCall = Arc::new(
                        move |api: String, body: Value| -> BoxFuture<'static, Result<Value, String>> {
                            let c = c.clone();
                            Box::pin(async move {
                                let call = c.request(KernelRequest::ApiInvoke(ApiInvoke { name: api, body }));
                                tokio::time::timeout(API_TIMEOUT, call)
                                    .await
                                    .map_err(|_| format!("no answer within {} s", API_TIMEOUT.as_secs()))?
                            })
                        },
                    );
                    self.info.apis.lock().call = Some(call);
                    let route = self.info.add_api(&name, &reg.name);
                    Ok(json!({"ok": true, "route": route}))
                }
            },
            other => Err(RpcError {
                code: RpcError::UNKNOWN_METHOD,
                message: format!(
                    "`{}` is not offered to subprocess plugins; see docs/PROTOCOL.md",
                    other.method()
                ),
            }),
        };
        conn.respond(id, result);
    }

    fn on_exit(&mut self, status: String, ctx: &mut HostContext<Self>) {
        let tail = self.conn.as_ref().map(|c| c.stderr_tail(5)).unwrap_or_default();
        let reason = if tail.is_empty() {
            format!("plugin `{}` exited ({status})", self.name())
        } else {
            format!("plugin `{}` exited ({status}); last stderr: {tail}", self.name())
        };
        if let Some(conn) = self.conn.take() {
            conn.fail_all(&reason);
        }
        *self.info.pid.lock() = None;
        self.detach();
        if self.stopping {
            tracing::info!(plugin = %self.name(), %status, "plugin stopped");
            ctx.stop();
        } else {
            tracing::warn!("{reason}");
            Host::<Self>::fail(ctx, reason);
        }
    }

    /// Removes the plugin's tools and stage handlers from the kernel.
    fn detach(&mut self) {
        self.events = Default::default();
        *self.info.clock.lock() = None;
        *self.info.apis.lock() = Default::default();
        self.deps.services.channels.unregister_plugin(self.name());
        self.info.tools.lock().clear();
        let _ = self.deps.stages.do_send(UnregisterPlugin(self.name().to_owned()));
    }

    fn kill(&self, signal: i32) {
        if let Some(pid) = self.pid {
            // SAFETY: sending a signal to our own child's pid.
            unsafe { libc::kill(pid as i32, signal) };
        }
    }
}

/// Reads one newline-terminated frame into `buf`, refusing frames over the cap (the
/// rest of an oversized line is skipped). `Ok(None)` at end of stream.
async fn read_frame<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> Result<Option<()>, String> {
    let mut oversized = false;
    loop {
        let available = r
            .fill_buf()
            .await
            .map_err(|e| format!("reading the plugin's stdout failed: {e}"))?;
        if available.is_empty() {
            return if buf.is_empty() && !oversized {
                Ok(None)
            } else {
                Ok(Some(()))
            };
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !oversized {
            if buf.len() + chunk.len() > MAX_FRAME_BYTES {
                oversized = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let consumed = done.unwrap_or(available.len());
        r.consume(consumed);
        if done.is_some() {
            return if oversized {
                Err(format!(
                    "the plugin sent a frame over {MAX_FRAME_BYTES} bytes; it was dropped"
                ))
            } else {
                Ok(Some(()))
            };
        }
    }
}

impl Conn {
    /// A frame that could not be read or decoded: tell the plugin with an `error`
    /// notification (`{"message"}`), since there is no id to answer.
    fn respond_error_to_garbage(&self, e: &str) {
        self.notify_typed(KernelRequest::Error(ErrorNote { message: e.to_owned() }));
    }
}

/// A tool implemented by a plugin: the call goes over its connection.
struct PluginTool {
    conn: Arc<Conn>,
    tool: String,
}

impl ToolHandler for PluginTool {
    /// The plugin's answer is text on the wire, so its failure is
    /// [`ToolFailure::Text`].
    fn call(&self, args: Value) -> BoxFuture<'static, crate::stages::ToolResult> {
        let conn = self.conn.clone();
        let call = KernelRequest::ToolInvoke(ToolInvoke {
            name: self.tool.clone(),
            args,
        });
        Box::pin(async move {
            let v = conn.request(call).await.map_err(ToolFailure::Text)?;
            serde_json::from_value::<ToolResult>(v)
                .map(|r| r.text)
                .map_err(|e| ToolFailure::Text(format!("the plugin answered tool.invoke without `text`: {e}")))
        })
    }
}

impl KernelActor for PluginProcess {
    const KIND: &'static str = "plugin";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        self.instance = self.info.instances.begin();
        if let Err(e) = self.spawn(ctx) {
            Host::<Self>::fail(ctx, e);
        }
    }

    /// Graceful stop: `plugin.stop`, close stdin, SIGTERM after 2 s, SIGKILL after 5 s
    /// more. The exit (seen by the wait) ends the actor.
    fn shutdown(&mut self, ctx: &mut HostContext<Self>) {
        self.stopping = true;
        match self.conn.take() {
            Some(conn) => {
                // Its named APIs and the clock's hold on it go now: calls would only
                // meet a closing connection.
                *self.info.apis.lock() = Default::default();
                *self.info.clock.lock() = None;
                conn.notify_typed(KernelRequest::PluginStop(None::<NoParams>));
                // Fails waiting calls and closes the writer queue, hence stdin.
                conn.fail_all(&format!("plugin `{}` is stopping", self.name()));
                ctx.run_later(Duration::from_secs(2), |host, _| host.inner().kill(libc::SIGTERM));
                ctx.run_later(Duration::from_secs(7), |host, _| host.inner().kill(libc::SIGKILL));
            }
            None => ctx.stop(),
        }
    }

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        self.detach();
        self.kill(libc::SIGKILL);
        self.info.instances.ended(self.instance);
    }
}

#[cfg(test)]
mod tests {
    use super::Instances;

    #[test]
    fn only_the_newest_instance_is_ready_or_current() {
        let i = Instances::default();
        assert!(!i.is_ready(), "nothing started yet");
        let first = i.begin();
        assert!(!i.is_ready(), "started, its registrations not in yet");
        i.ready(first);
        assert!(i.is_ready());
        // Abandoned while stuck: its successor starts before it ended.
        let second = i.begin();
        assert!(!i.is_ready(), "the successor is starting");
        assert!(!i.is_current(first) && i.is_current(second));
        i.ready(first);
        assert!(!i.is_ready(), "the old instance cannot make the new one ready");
        i.ready(second);
        assert!(i.is_ready());
        // A restart asked for: the running instance stops counting until the next one
        // is ready (a stuck one may take seconds to be abandoned).
        i.replacing(true);
        assert!(!i.is_ready());
        let third = i.begin();
        assert!(!i.is_ready());
        i.ready(third);
        assert!(i.is_ready());
        i.replacing(true);
        i.replacing(false);
        assert!(i.is_ready(), "a failed restart request leaves the instance as it was");
    }

    #[actix::test]
    async fn a_restart_waits_for_the_new_instance_not_the_old_one() {
        let i = std::sync::Arc::new(Instances::default());
        let first = i.begin();
        i.ready(first);
        let before = i.newest();
        let short = std::time::Duration::from_millis(30);
        assert!(!i.ready_after(before, short).await, "the old instance does not count");
        // A restart's wait for an instance newer than the current one, in the background.
        let wait = |i: &std::sync::Arc<Instances>| {
            let (i, before) = (i.clone(), i.newest());
            tokio::spawn(async move { i.ready_after(before, std::time::Duration::from_secs(30)).await })
        };
        let waiter = wait(&i);
        let second = i.begin();
        tokio::task::yield_now().await;
        i.ready(second);
        assert!(waiter.await.unwrap(), "woken when the new instance is ready");
        // A new instance that fails at start ends the wait at once, unready.
        let waiter = wait(&i);
        let third = i.begin();
        tokio::task::yield_now().await;
        i.ended(third);
        assert!(!waiter.await.unwrap());
    }
}
