//! `kernel/stages`: the StageHost actor.
//!
//! Keeps the registered stage handlers (each in its own actor, `kernel/stages/<n>`)
//! and the tool registry. Running a stage sends a copy of the context to every
//! matching handler at once, waits for all of them (each within its timeout), and
//! applies their patches in registration order. A slow or crashing handler is
//! reported (in the context's errors, the log and a `stage_handler_error` event) and
//! skipped; it never blocks the turn.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::context::{Stage, StageContext};
use super::handler::{HandlerActor, RunHandler, Scope, StageHandler};
use super::tools::{ToolError, ToolHandler, ToolRegistry, ToolSpec};
use crate::addr::TAddr;
use crate::bus::{Event, EventBus};
use crate::host::{Exit, Host, HostContext, KernelActor, Shutdown};
use crate::registry::Registry;

/// How many handlers exist for each stage, over every stage host of the process. A
/// task skips the round trip to the stage host for a stage nobody hooks (the common
/// case): a zero here is exact, a non-zero only means "ask the host".
static HANDLERS: [std::sync::atomic::AtomicUsize; 7] = [const { std::sync::atomic::AtomicUsize::new(0) }; 7];

fn slot(stage: Stage) -> &'static std::sync::atomic::AtomicUsize {
    &HANDLERS[Stage::ALL
        .iter()
        .position(|s| *s == stage)
        .expect("every stage is listed")]
}

/// Whether any stage handler is registered for `stage`.
pub fn has_handlers(stage: Stage) -> bool {
    slot(stage).load(std::sync::atomic::Ordering::Relaxed) > 0
}

/// Default time one handler gets per stage run.
pub const HANDLER_TIMEOUT: Duration = Duration::from_secs(5);

struct Registration {
    id: u64,
    plugin: String,
    stage: Stage,
    scope: Scope,
    handler: Arc<dyn StageHandler>,
    addr: TAddr<HandlerActor>,
}

/// A stage handler registration as it outlives the host's instances.
#[derive(Clone)]
struct Kept {
    id: u64,
    plugin: String,
    stage: Stage,
    scope: Scope,
    handler: Arc<dyn StageHandler>,
}

/// What the stage host holds — every tool and stage handler registered — kept outside
/// the actor, so a restarted host (a crash, an operator's restart from the dashboard)
/// comes back with all of them instead of an agent without tools.
#[derive(Default)]
pub struct StageState {
    tools: ToolRegistry,
    regs: Vec<Kept>,
    next_id: u64,
}

/// The shared [`StageState`]: created by whoever supervises the host, handed to every
/// instance.
pub type StageCell = Arc<parking_lot::Mutex<StageState>>;

/// The StageHost actor.
pub struct StageHost {
    /// Where handler actors are registered (this actor's id).
    me: String,
    registry: Arc<Registry>,
    bus: EventBus,
    /// The live handler actors of this instance (rebuilt from `state` at start).
    regs: Vec<Registration>,
    state: StageCell,
    timeout: Duration,
}

impl StageHost {
    pub fn new(me: &str, registry: Arc<Registry>, bus: EventBus) -> Self {
        Self {
            me: me.to_owned(),
            registry,
            bus,
            regs: Vec::new(),
            state: StageCell::default(),
            timeout: HANDLER_TIMEOUT,
        }
    }

    /// Uses `state` (kept by the supervisor's factory across restarts).
    pub fn with_state(mut self, state: StageCell) -> Self {
        self.state = state;
        self
    }

    /// Changes the per-handler timeout (tests, settings).
    pub fn with_timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    fn spawn(
        &self,
        id: u64,
        handler: &Arc<dyn StageHandler>,
        ctx: &mut HostContext<Self>,
    ) -> Result<TAddr<HandlerActor>, crate::registry::RegistryError> {
        let name = format!("handler-{id}");
        let (addr, exit) =
            TAddr::spawn_unsupervised(&self.registry, &self.me, &name, HandlerActor::new(handler.clone()))?;
        self.watch(id, addr.clone(), exit, ctx);
        Ok(addr)
    }

    /// Restarts a crashed handler behind the same address (it keeps its registration).
    fn watch(
        &self,
        id: u64,
        addr: TAddr<HandlerActor>,
        exit: tokio::sync::oneshot::Receiver<Exit>,
        ctx: &mut HostContext<Self>,
    ) {
        ctx.spawn(
            actix::fut::wrap_future::<_, Host<Self>>(exit).map(move |res, host, ctx| {
                let me = host.inner();
                let exit = res.unwrap_or(Exit::Panic("exit report lost".into()));
                let Some(reg) = me.regs.iter().find(|r| r.id == id) else {
                    return;
                };
                if !exit.is_abnormal() {
                    return;
                }
                tracing::warn!(handler = %addr.id(), %exit, "stage handler crashed; starting it again");
                let rx = addr.respawn(HandlerActor::new(reg.handler.clone()));
                me.watch(id, addr, rx, ctx);
            }),
        );
    }

    fn matches(reg: &Registration, stage: Stage, ctx: &StageContext) -> bool {
        if reg.stage != stage {
            return false;
        }
        match (reg.scope, stage) {
            (Scope::OwnTools, Stage::BeforeToolcall) => ctx.tool_calls.first().is_some_and(|c| c.plugin == reg.plugin),
            (Scope::OwnTools, Stage::AfterToolcall) => ctx.tool_results.first().is_some_and(|r| r.plugin == reg.plugin),
            _ => true,
        }
    }
}

impl KernelActor for StageHost {
    const KIND: &'static str = "stage-host";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        // A restarted host: bring every kept handler back under a new actor.
        let kept: Vec<Kept> = self.state.lock().regs.clone();
        let tools = self.state.lock().tools.len();
        if !kept.is_empty() || tools > 0 {
            tracing::info!(handlers = kept.len(), tools, "stage host restored its registrations");
        }
        for Kept {
            id,
            plugin,
            stage,
            scope,
            handler,
        } in kept
        {
            match self.spawn(id, &handler, ctx) {
                Ok(addr) => {
                    slot(stage).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.regs.push(Registration {
                        id,
                        plugin,
                        stage,
                        scope,
                        handler,
                        addr,
                    });
                }
                Err(e) => tracing::error!(%plugin, "cannot restore a stage handler: {e}"),
            }
        }
    }

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        for r in self.regs.drain(..) {
            slot(r.stage).fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            if let Some(a) = r.addr.raw() {
                a.do_send(Shutdown);
            }
            self.registry.unregister(r.addr.id());
        }
    }
}

/// Registers a stage handler for `plugin`; answers its registration id.
#[derive(Message)]
#[rtype(result = "Result<u64, crate::registry::RegistryError>")]
pub struct RegisterStage {
    pub plugin: String,
    pub stage: Stage,
    pub scope: Scope,
    pub handler: Arc<dyn StageHandler>,
}

/// Registers a tool.
#[derive(Message)]
#[rtype(result = "Result<(), ToolError>")]
pub struct RegisterTool {
    pub spec: ToolSpec,
    pub handler: Arc<dyn ToolHandler>,
}

/// Removes a plugin's tools and stage handlers as a group (unload, crash).
#[derive(Message)]
#[rtype(result = "(usize, usize)")]
pub struct UnregisterPlugin(pub String);

/// Removes one tool of a plugin (`tool.unregister`).
#[derive(Message)]
#[rtype(result = "Result<(), ToolError>")]
pub struct UnregisterTool {
    pub plugin: String,
    pub name: String,
}

impl crate::host::Handles<UnregisterTool> for StageHost {
    type Reply = Result<(), ToolError>;
    fn handle(&mut self, msg: UnregisterTool, _: &mut HostContext<Self>) -> Self::Reply {
        self.state.lock().tools.unregister(&msg.plugin, &msg.name)?;
        tracing::info!(tool = %msg.name, plugin = %msg.plugin, "tool unregistered");
        Ok(())
    }
}

/// A snapshot of the tool registry (cheap: tools are shared handles).
#[derive(Message)]
#[rtype(result = "ToolRegistry")]
pub struct GetTools;

/// Runs one stage; answers the context after all patches.
#[derive(Message)]
#[rtype(result = "StageContext")]
pub struct RunStage(pub Stage, pub StageContext);

impl crate::host::Handles<RegisterStage> for StageHost {
    type Reply = Result<u64, crate::registry::RegistryError>;
    fn handle(&mut self, msg: RegisterStage, ctx: &mut HostContext<Self>) -> Self::Reply {
        let id = {
            let mut st = self.state.lock();
            st.next_id += 1;
            st.next_id
        };
        let addr = self.spawn(id, &msg.handler, ctx)?;
        self.state.lock().regs.push(Kept {
            id,
            plugin: msg.plugin.clone(),
            stage: msg.stage,
            scope: msg.scope,
            handler: msg.handler.clone(),
        });
        tracing::info!(plugin = %msg.plugin, stage = msg.stage.as_str(), ?msg.scope, "stage handler registered");
        slot(msg.stage).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.regs.push(Registration {
            id,
            plugin: msg.plugin,
            stage: msg.stage,
            scope: msg.scope,
            handler: msg.handler,
            addr,
        });
        Ok(id)
    }
}

impl crate::host::Handles<RegisterTool> for StageHost {
    type Reply = Result<(), ToolError>;
    fn handle(&mut self, msg: RegisterTool, _: &mut HostContext<Self>) -> Self::Reply {
        let name = msg.spec.name.clone();
        self.state.lock().tools.register(msg.spec, msg.handler)?;
        tracing::info!(tool = %name, "tool registered");
        Ok(())
    }
}

impl crate::host::Handles<UnregisterPlugin> for StageHost {
    type Reply = actix::MessageResult<crate::host::Envelope<UnregisterPlugin>>;
    fn handle(&mut self, UnregisterPlugin(plugin): UnregisterPlugin, _: &mut HostContext<Self>) -> Self::Reply {
        let tools = {
            let mut st = self.state.lock();
            st.regs.retain(|k| k.plugin != plugin);
            st.tools.unregister_plugin(&plugin)
        };
        let mut handlers = 0;
        let registry = self.registry.clone();
        self.regs.retain(|r| {
            if r.plugin != plugin {
                return true;
            }
            slot(r.stage).fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            if let Some(a) = r.addr.raw() {
                a.do_send(Shutdown);
            }
            registry.unregister(r.addr.id());
            handlers += 1;
            false
        });
        tracing::info!(%plugin, tools, handlers, "plugin detached from the stage host");
        actix::MessageResult((tools, handlers))
    }
}

impl crate::host::Handles<GetTools> for StageHost {
    type Reply = actix::MessageResult<crate::host::Envelope<GetTools>>;
    fn handle(&mut self, _: GetTools, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.state.lock().tools.clone())
    }
}

impl crate::host::Handles<RunStage> for StageHost {
    type Reply = ResponseFuture<StageContext>;
    fn handle(&mut self, RunStage(stage, mut sctx): RunStage, _: &mut HostContext<Self>) -> Self::Reply {
        sctx.phase = Some(stage);
        let targets: Vec<(String, TAddr<HandlerActor>)> = self
            .regs
            .iter()
            .filter(|r| Self::matches(r, stage, &sctx))
            .map(|r| (r.plugin.clone(), r.addr.clone()))
            .collect();
        if targets.is_empty() {
            return Box::pin(async move { sctx });
        }
        self.bus.publish(Event::Stage {
            phase: stage.as_str(),
            channel: sctx.extra.get("output_channel").cloned(),
            tool: sctx.tool_calls.first().map(|c| c.name.clone()),
        });
        let timeout = self.timeout;
        let bus = self.bus.clone();
        Box::pin(async move {
            let runs = targets.iter().map(|(_, addr)| {
                let msg = RunHandler(stage, sctx.clone());
                let addr = addr.clone();
                async move { tokio::time::timeout(timeout, addr.send(msg)).await }
            });
            let results = futures_util::future::join_all(runs).await;
            for ((plugin, addr), result) in targets.iter().zip(results) {
                let problem = match result {
                    Ok(Ok(Ok(patch))) => {
                        sctx.apply(stage, addr.id(), patch);
                        None
                    }
                    Ok(Ok(Err(e))) => Some(format!("{plugin}: {e}")),
                    Ok(Err(e)) => Some(format!("{plugin}: handler crashed: {e}")),
                    Err(_) => Some(format!("{plugin}: handler timed out after {timeout:?}; skipped")),
                };
                if let Some(p) = problem {
                    tracing::warn!(stage = stage.as_str(), handler = %addr.id(), "{p}");
                    bus.publish(Event::StageHandlerError {
                        stage: stage.as_str(),
                        handler: addr.id().to_owned(),
                        error: p.clone(),
                    });
                    sctx.errors.push(p);
                }
            }
            sctx
        })
    }
}

/// Registers each of `specs` with `stages`, every call answered by `call(tool, args)`:
/// the shape of the kernel's built-in tool families (the plugin manager, the settings
/// tools), one handler per family.
pub async fn register_family<F, Fut>(
    stages: &TAddr<StageHost>,
    specs: impl IntoIterator<Item = ToolSpec>,
    call: F,
) -> Result<(), RegisterError>
where
    F: Fn(String, serde_json::Value) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = super::tools::ToolResult> + Send + 'static,
{
    let tools = specs.into_iter().map(|spec| {
        let (call, tool) = (call.clone(), spec.name.clone());
        let handler: Arc<dyn ToolHandler> = Arc::new(
            move |args: serde_json::Value| -> futures_util::future::BoxFuture<'static, super::tools::ToolResult> {
                Box::pin(call(tool.clone(), args))
            },
        );
        (spec, handler)
    });
    register_all(stages, tools).await
}

/// Why a kernel tool family could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The stage host did not take the message (stopped or restarting).
    #[error(transparent)]
    Unavailable(#[from] crate::addr::SendError),
    /// The registry refused a tool (a duplicate or an invalid name).
    #[error(transparent)]
    Refused(#[from] ToolError),
}

/// Registers each tool with `stages`, in order; the first refusal stops it.
pub async fn register_all(
    stages: &TAddr<StageHost>,
    tools: impl IntoIterator<Item = (ToolSpec, Arc<dyn ToolHandler>)>,
) -> Result<(), RegisterError> {
    for (spec, handler) in tools {
        stages.send(RegisterTool { spec, handler }).await??;
    }
    Ok(())
}
