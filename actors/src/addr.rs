//! Tracked addresses: the only way kernel code sends to a kernel actor.
//!
//! A [`TAddr`] outlives the actor instances behind it: when a supervisor restarts an
//! actor it installs the new instance's `Addr` into the same slot, so holders of the
//! address never see a restart except as a short window in which sends fail with
//! [`SendError::Unavailable`]. Every send also bumps the actor's mailbox counters.

use std::sync::Arc;

use actix::prelude::*;
use parking_lot::RwLock;

use crate::host::{Envelope, Handles, Host, KernelActor, Shutdown};
use crate::registry::ActorStats;

/// Why a message could not be delivered or answered.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SendError {
    /// No instance is running (starting, in backoff, stopped or failed).
    #[error("actor `{id}` is not running (state {state}); retry after it restarts, see GET /api/v1/actors")]
    Unavailable { id: String, state: &'static str },
    /// The instance exited before answering (for example, its handler panicked).
    #[error("actor `{id}` exited before answering ({reason}); the supervisor restarts it per its policy")]
    Exited { id: String, reason: String },
}

/// The slot a supervisor fills with each new instance's address.
struct Slot<A: KernelActor> {
    addr: RwLock<Option<Addr<Host<A>>>>,
    stats: Arc<ActorStats>,
}

/// A restart-proof, counted address of a kernel actor.
pub struct TAddr<A: KernelActor> {
    slot: Arc<Slot<A>>,
}

impl<A: KernelActor> Clone for TAddr<A> {
    fn clone(&self) -> Self {
        Self {
            slot: self.slot.clone(),
        }
    }
}

impl<A: KernelActor> TAddr<A> {
    /// An address with no instance behind it yet.
    pub fn new(stats: Arc<ActorStats>) -> Self {
        Self {
            slot: Arc::new(Slot {
                addr: RwLock::new(None),
                stats,
            }),
        }
    }

    /// The actor's id in the tree.
    pub fn id(&self) -> &str {
        &self.slot.stats.id
    }

    /// The actor's counters.
    pub fn stats(&self) -> &Arc<ActorStats> {
        &self.slot.stats
    }

    /// Installs a freshly started instance (called by the supervisor).
    pub(crate) fn install(&self, addr: Addr<Host<A>>) {
        *self.slot.addr.write() = Some(addr);
    }

    /// Asks the current instance, if any, to stop.
    pub(crate) fn shutdown(&self) -> bool {
        match &*self.slot.addr.read() {
            Some(a) if a.connected() => {
                a.do_send(Shutdown);
                true
            }
            _ => false,
        }
    }

    fn unavailable(&self) -> SendError {
        SendError::Unavailable {
            id: self.slot.stats.id.clone(),
            state: self.slot.stats.state().as_str(),
        }
    }

    /// Fire-and-forget delivery into the (unbounded) mailbox.
    pub fn do_send<M>(&self, msg: M) -> Result<(), SendError>
    where
        A: Handles<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        let guard = self.slot.addr.read();
        match &*guard {
            Some(addr) if addr.connected() => {
                self.slot.stats.on_send();
                addr.do_send(Envelope(msg));
                Ok(())
            }
            _ => Err(self.unavailable()),
        }
    }

    /// Delivers now, and returns the wait for the reply: unlike [`Self::send`], the
    /// message is in the mailbox before the future is first polled, so the work starts
    /// while the caller prepares other messages (or hands the wait to another thread).
    pub fn request<M>(
        &self,
        msg: M,
    ) -> impl std::future::Future<Output = Result<M::Result, SendError>> + Send + use<A, M>
    where
        A: Handles<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        let request = {
            let guard = self.slot.addr.read();
            match &*guard {
                Some(addr) if addr.connected() => {
                    self.slot.stats.on_send();
                    Ok(addr.send(Envelope(msg)))
                }
                _ => Err(self.unavailable()),
            }
        };
        let stats = self.slot.stats.clone();
        async move {
            request?.await.map_err(|e| SendError::Exited {
                id: stats.id.clone(),
                reason: stats.last_exit().unwrap_or_else(|| e.to_string()),
            })
        }
    }

    /// Delivers and waits for the reply (delivered when first polled; see
    /// [`Self::request`] to deliver at once).
    pub async fn send<M>(&self, msg: M) -> Result<M::Result, SendError>
    where
        A: Handles<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        self.request(msg).await
    }

    /// A tracked address of the running actor itself (for handlers it hands out, such
    /// as tool callbacks). It counts into the same statistics.
    pub fn of_self(host: &Host<A>, ctx: &crate::host::HostContext<A>) -> Self {
        let me = Self::new(host.stats().clone());
        me.install(ctx.address());
        me
    }

    /// Starts `actor` as a tracked actor that no supervisor restarts (a task), at
    /// `parent/name` in the registry. Whoever holds the receiver learns how it ended
    /// and should `Registry::unregister` it then.
    pub fn spawn_unsupervised(
        registry: &crate::registry::Registry,
        parent: &str,
        name: &str,
        actor: A,
    ) -> Result<(Self, tokio::sync::oneshot::Receiver<crate::host::Exit>), crate::registry::RegistryError> {
        let stats = registry.register(Some(parent), name, A::KIND)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let addr = Self::new(stats.clone());
        addr.install(Host::new(actor, stats, Some(tx)).start());
        Ok((addr, rx))
    }

    /// Starts a new instance behind this address after the previous one crashed (a
    /// re-spawn by the actor's owner, counted as a restart).
    pub fn respawn(&self, actor: A) -> tokio::sync::oneshot::Receiver<crate::host::Exit> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.slot.stats.inc_restarts();
        self.install(Host::new(actor, self.slot.stats.clone(), Some(tx)).start());
        rx
    }

    /// The raw actix address of the current instance (benchmarks, tests).
    pub fn raw(&self) -> Option<Addr<Host<A>>> {
        self.slot.addr.read().clone()
    }
}
