//! One wiring for an agent's loops: its scheduler and its intake, started under the
//! agent's supervisor. The main agent and every resident start through [`start`]; what
//! differs between them is their [`Profile`] — the main agent's intake stores what it
//! acknowledges, checks the firewall, routes channels to residents and takes interrupts
//! from outside; a resident's takes only what its parent queues (its interrupts come
//! from the parent, straight to its scheduler). A helper (`spawn_child`) is one task,
//! not an agent with loops: it shares the derived dependencies ([`TaskDeps::derived`])
//! and nothing of this.

use std::sync::{Arc, OnceLock};

use super::channels::Channels;
use super::inbox::InboxActor;
use super::intake::{EventLoop, InterceptLoop};
use super::routes::ChannelRoutes;
use super::scheduler::SchedulerActor;
use super::task::TaskDeps;
use crate::addr::TAddr;
use crate::supervisor::{RestartPolicy, SpawnError, SupervisorRef};

/// How an agent takes input.
#[derive(Clone, Default)]
pub struct Profile {
    /// Acknowledged input is committed here before it is acknowledged.
    pub inbox: Option<TAddr<InboxActor>>,
    /// Inputs are masked and checked at the door with it.
    pub firewall: Option<Arc<crate::firewall::Firewall>>,
    /// Input channels assigned to residents are handed to them.
    pub routes: Option<ChannelRoutes>,
    /// The output channels whose input definitions the door applies.
    pub channels: Option<Channels>,
    /// Interrupts come from outside through an InterceptLoop.
    pub intercept: bool,
}

impl Profile {
    /// The main agent: everything.
    pub fn main(
        inbox: TAddr<InboxActor>,
        firewall: Arc<crate::firewall::Firewall>,
        routes: ChannelRoutes,
        channels: Channels,
    ) -> Self {
        Self {
            inbox: Some(inbox),
            firewall: Some(firewall),
            routes: Some(routes),
            channels: Some(channels),
            intercept: true,
        }
    }

    /// A resident: its parent is its only source, already through the door.
    pub fn resident() -> Self {
        Self::default()
    }
}

/// An agent's loops.
#[derive(Clone)]
pub struct Loops {
    pub scheduler: TAddr<SchedulerActor>,
    pub event_loop: TAddr<EventLoop>,
    /// Only an agent whose profile takes interrupts from outside.
    pub intercept_loop: Option<TAddr<InterceptLoop>>,
}

/// Starts an agent's scheduler (which starts its tasks on `deps`), its event loop and,
/// if its profile says so, its intercept loop, as permanent workers of `sup`, in that
/// order (each needs the one before).
pub async fn start(sup: &SupervisorRef, deps: Arc<TaskDeps>, profile: Profile) -> Result<Loops, SpawnError> {
    // The scheduler hands its own address to its tasks; it learns it once spawned.
    let me: Arc<OnceLock<TAddr<SchedulerActor>>> = Arc::default();
    let (d, m) = (deps, me.clone());
    let scheduler = sup
        .worker("scheduler", RestartPolicy::Permanent, move || {
            Ok(SchedulerActor::new(d.clone(), m.clone()))
        })
        .await?;
    let _ = me.set(scheduler.clone());
    let (sc, p) = (scheduler.clone(), profile.clone());
    let event_loop = sup
        .worker("event-loop", RestartPolicy::Permanent, move || {
            let mut el = EventLoop::new(sc.clone());
            if let Some(inbox) = &p.inbox {
                el = el.with_inbox(inbox.clone());
            }
            if let Some(firewall) = &p.firewall {
                el = el.with_firewall(firewall.clone());
            }
            if let Some(routes) = &p.routes {
                el = el.with_routes(routes.clone());
            }
            if let Some(channels) = &p.channels {
                el = el.with_channels(channels.clone());
            }
            Ok(el)
        })
        .await?;
    let intercept_loop = if profile.intercept {
        let (sc, el, p) = (scheduler.clone(), event_loop.clone(), profile);
        Some(
            sup.worker("intercept-loop", RestartPolicy::Permanent, move || {
                let mut il = InterceptLoop::new(sc.clone()).with_event_loop(el.clone());
                if let Some(inbox) = &p.inbox {
                    il = il.with_inbox(inbox.clone());
                }
                if let Some(firewall) = &p.firewall {
                    il = il.with_firewall(firewall.clone());
                }
                Ok(il)
            })
            .await?,
        )
    } else {
        None
    };
    Ok(Loops {
        scheduler,
        event_loop,
        intercept_loop,
    })
}
