//! Supervision trees on actix: what actix's own `Supervisor` lacks.
//!
//! * `policy`: restart policies, strategies, intensity and backoff settings;
//! * [`core`]: the decision logic as a plain, unit-tested state machine;
//! * `actor`: the [`Supervisor`] actor executing those decisions on real actors;
//! * this module: [`SupervisorRef`], the handle used to build and operate a tree.
//!
//! A tree is built top-down at run time: [`start_root`] starts the root supervisor,
//! then [`SupervisorRef::worker`] and [`SupervisorRef::supervisor`] add children,
//! each started before the call returns. Start order is declaration order; stop
//! order is the reverse.

mod actor;
pub mod core;
mod policy;

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use self::actor::{AddChild, RemoveChild, RestartChild, Running, StopChild};
pub use self::actor::{AddChildError, ChildSpec, StartError, Supervisor};
pub use self::policy::{BackoffPolicy, Delays, Growth, Intensity, RestartPolicy, Strategy, SupervisorConfig};
use crate::addr::{SendError, TAddr};
use crate::bus::EventBus;
pub use crate::control::{RestartError, RestartRefused, SupervisorControl};
use crate::host::{Exit, Host, KernelActor};
use crate::registry::{ActorStats, Registry, RegistryError};

impl<A: KernelActor> Running for TAddr<A> {
    fn shutdown(&self) -> bool {
        TAddr::shutdown(self)
    }
}

struct Control(TAddr<Supervisor>);

impl SupervisorControl for Control {
    fn stop_child(&self, child: String) -> BoxFuture<'static, Result<(), RestartError>> {
        let addr = self.0.clone();
        Box::pin(async move {
            let id = child.clone();
            addr.send(StopChild(child))
                .await
                .map_err(|e| RestartError::SupervisorDown {
                    id,
                    reason: e.to_string(),
                })?
        })
    }

    fn restart_child(&self, child: String) -> BoxFuture<'static, Result<u64, RestartError>> {
        let addr = self.0.clone();
        Box::pin(async move {
            let id = child.clone();
            addr.send(RestartChild(child))
                .await
                .map_err(|e| RestartError::SupervisorDown {
                    id,
                    reason: e.to_string(),
                })?
        })
    }
}

/// Why a child could not be added to the tree.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Add(#[from] AddChildError),
    #[error(transparent)]
    Send(#[from] SendError),
}

/// Handle to a running supervisor: adds children, restarts them, and is cheap to clone.
#[derive(Clone)]
pub struct SupervisorRef {
    addr: TAddr<Supervisor>,
    registry: Arc<Registry>,
    bus: EventBus,
}

/// Starts the root supervisor `name` (id `name`). The receiver resolves when the root
/// exits: after an orderly shutdown, or when it escalated (restart intensity exceeded).
pub fn start_root(
    registry: Arc<Registry>,
    bus: EventBus,
    name: &str,
    config: SupervisorConfig,
) -> Result<(SupervisorRef, oneshot::Receiver<Exit>), RegistryError> {
    crate::panic::install_hook();
    let stats = registry.register(None, name, Supervisor::KIND)?;
    let addr = TAddr::<Supervisor>::new(stats.clone());
    let (tx, rx) = oneshot::channel();
    let sup = Supervisor::new(stats.clone(), bus.clone(), config, Arc::default());
    addr.install(Host::new(sup, stats, Some(tx)).start());
    registry.set_control(name, Arc::new(Control(addr.clone())));
    Ok((SupervisorRef { addr, registry, bus }, rx))
}

impl SupervisorRef {
    /// The supervisor's id in the tree.
    pub fn id(&self) -> &str {
        self.addr.id()
    }

    /// The supervisor's own tracked address.
    pub fn addr(&self) -> &TAddr<Supervisor> {
        &self.addr
    }

    /// The registry this tree reports into.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The event bus the tree publishes lifecycle events on.
    pub fn bus(&self) -> &EventBus {
        &self.bus
    }

    /// Takes the child `id` (a full id, one of this supervisor's children) out of the
    /// tree for good: it is stopped, never restarted, and its subtree leaves the
    /// registry (and so the dashboard). Used when a plugin is uninstalled or its install
    /// is rolled back.
    pub async fn remove_child(&self, id: &str) -> Result<(), RestartError> {
        let r = self
            .addr
            .send(RemoveChild(id.to_owned()))
            .await
            .map_err(|e| RestartError::SupervisorDown {
                id: id.to_owned(),
                reason: e.to_string(),
            })?;
        if r.is_ok() {
            self.registry.unregister(id);
        }
        r
    }

    async fn add(&self, spec: ChildSpec) -> Result<(), SpawnError> {
        let id = spec.stats.id.clone();
        match self.addr.send(AddChild(spec)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e @ AddChildError::StartFailed { .. })) => Err(e.into()),
            Ok(Err(e)) => {
                self.registry.unregister(&id);
                Err(e.into())
            }
            Err(e) => {
                self.registry.unregister(&id);
                Err(e.into())
            }
        }
    }

    /// Adds a worker `name` built by `factory` (called again for every restart) on
    /// this supervisor's thread. Returns its restart-proof address once started.
    pub async fn worker<A, F>(&self, name: &str, restart: RestartPolicy, factory: F) -> Result<TAddr<A>, SpawnError>
    where
        A: KernelActor,
        F: Fn() -> Result<A, StartError> + Send + Sync + 'static,
    {
        self.worker_with(name, restart, factory, |factory, stats, tx| {
            Ok(Host::new(factory()?, stats, Some(tx)).start())
        })
        .await
    }

    /// Like [`worker`](Self::worker), but the actor runs on `arbiter`'s thread: for
    /// actors that block (SQLite, ONNX, Lua) and must not stall the others. The
    /// factory runs on that thread too, so the actor itself need not be `Send` (it may
    /// hold thread-bound handles such as an awc client).
    pub async fn worker_on<A, F>(
        &self,
        arbiter: ArbiterHandle,
        name: &str,
        restart: RestartPolicy,
        factory: F,
    ) -> Result<TAddr<A>, SpawnError>
    where
        A: KernelActor,
        F: Fn() -> Result<A, StartError> + Send + Sync + 'static,
    {
        self.worker_with(name, restart, factory, move |factory, stats, tx| {
            start_on(&arbiter, factory, stats, tx)
        })
        .await
    }

    /// Like [`worker_on`](Self::worker_on), on a thread of its own that each (re)start
    /// creates anew: for actors running untrusted code (Lua plugins) whose thread may be
    /// stuck in a call nothing can interrupt. A stuck instance is abandoned after the
    /// shutdown timeout and its successor does not queue behind it; the actor stops its
    /// own thread when it stops (`actix::Arbiter::current().stop()`).
    pub async fn worker_on_own_thread<A, F>(
        &self,
        name: &str,
        restart: RestartPolicy,
        factory: F,
    ) -> Result<TAddr<A>, SpawnError>
    where
        A: KernelActor,
        F: Fn() -> Result<A, StartError> + Send + Sync + 'static,
    {
        self.worker_with(name, restart, factory, move |factory, stats, tx| {
            let arbiter = actix::Arbiter::new();
            start_on(&arbiter.handle(), factory, stats, tx)
        })
        .await
    }

    async fn worker_with<A, F, L>(
        &self,
        name: &str,
        restart: RestartPolicy,
        factory: F,
        launch: L,
    ) -> Result<TAddr<A>, SpawnError>
    where
        A: KernelActor,
        F: Fn() -> Result<A, StartError> + Send + Sync + 'static,
        L: Fn(Arc<F>, Arc<ActorStats>, oneshot::Sender<Exit>) -> Result<Addr<Host<A>>, StartError>
            + Send
            + Sync
            + 'static,
    {
        let factory = Arc::new(factory);
        let stats = self.registry.register(Some(self.id()), name, A::KIND)?;
        let addr = TAddr::<A>::new(stats.clone());
        let slot = addr.clone();
        let starter = move |tx: oneshot::Sender<Exit>| -> Result<Box<dyn Running>, StartError> {
            slot.install(launch(factory.clone(), stats.clone(), tx)?);
            Ok(Box::new(slot.clone()))
        };
        let spec = ChildSpec {
            restart,
            stats: addr.stats().clone(),
            starter: Arc::new(starter),
        };
        self.add(spec).await?;
        Ok(addr)
    }

    /// Adds a child supervisor `name` with its own strategy and limits.
    pub async fn supervisor(
        &self,
        name: &str,
        restart: RestartPolicy,
        config: SupervisorConfig,
    ) -> Result<SupervisorRef, SpawnError> {
        let stats = self.registry.register(Some(self.id()), name, Supervisor::KIND)?;
        let addr = TAddr::<Supervisor>::new(stats.clone());
        let specs: Arc<Mutex<Vec<ChildSpec>>> = Arc::default();
        let slot = addr.clone();
        let bus = self.bus.clone();
        let starter = move |tx: oneshot::Sender<Exit>| -> Result<Box<dyn Running>, StartError> {
            let sup = Supervisor::new(stats.clone(), bus.clone(), config, specs.clone());
            slot.install(Host::new(sup, stats.clone(), Some(tx)).start());
            Ok(Box::new(slot.clone()))
        };
        self.registry.set_control(addr.id(), Arc::new(Control(addr.clone())));
        let spec = ChildSpec {
            restart,
            stats: addr.stats().clone(),
            starter: Arc::new(starter),
        };
        self.add(spec).await?;
        Ok(SupervisorRef {
            addr,
            registry: self.registry.clone(),
            bus: self.bus.clone(),
        })
    }
}

/// Builds and starts an actor on another arbiter's thread and waits for its address.
fn start_on<A, F>(
    arb: &ArbiterHandle,
    factory: Arc<F>,
    stats: Arc<ActorStats>,
    exit: oneshot::Sender<Exit>,
) -> Result<Addr<Host<A>>, StartError>
where
    A: KernelActor,
    F: Fn() -> Result<A, StartError> + Send + Sync + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let spawned = arb.spawn_fn(move || {
        let _ = tx.send(factory().map(|a| Host::new(a, stats, Some(exit)).start()));
    });
    if !spawned {
        return Err("the actor's arbiter thread is gone".into());
    }
    rx.recv().map_err(|_| "the actor's arbiter did not start it")?
}

/// Restarts the actor `id` through its supervisor (the operator path of the HTTP API).
pub async fn restart_actor(registry: &Registry, id: &str) -> Result<u64, RestartError> {
    if registry.get(id).is_none() {
        return Err(RestartError::Unknown(id.to_owned()));
    }
    let control = registry
        .parent_control(id)
        .ok_or_else(|| RestartError::NotRestartable(id.to_owned()))?;
    control.restart_child(id.to_owned()).await
}

/// Stops the actor `id` through its supervisor and leaves it stopped (until
/// [`restart_actor`]).
pub async fn stop_actor(registry: &Registry, id: &str) -> Result<(), RestartError> {
    if registry.get(id).is_none() {
        return Err(RestartError::Unknown(id.to_owned()));
    }
    let control = registry
        .parent_control(id)
        .ok_or_else(|| RestartError::NotRestartable(id.to_owned()))?;
    control.stop_child(id.to_owned()).await
}
