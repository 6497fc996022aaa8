//! The triage offload (spec §6.1): when the main agent has been busy with one task for
//! `core.agent.offload_busy_after` and at least `core.agent.offload_min_pending`
//! channel inputs wait behind it, they are handed — the original inputs, reply paths
//! and inbox hooks intact — to an offload-owned resident whose task is the triage
//! contract (answer the simple ones on their own channel, tell the rest "busy, please
//! wait"), so nobody waits ten minutes in silence.
//!
//! [`OffloadConfig`] and [`decide`] are the policy (plain, unit-tested); the actor
//! `kernel/agent/offload` only ticks, asks the main scheduler how busy it is, and
//! executes a hand-over: pick or create the resident ([`super::residents::Target`]),
//! take the backlog's front (all or nothing), forward each input, and tell the main
//! agent with a kernel notice.

use std::time::Duration;

use actix::prelude::*;

use super::door::Admitted;
use super::input::Input;
use super::residents::{Owner, Residents, Target};
use super::scheduler::{Busy, GetBusy, PutFront, SchedulerActor, SubmitFront, TakeFront};
use crate::addr::TAddr;
use crate::config::{ConfigActor, ReadSettings, Settings, keys};
use crate::host::{Host, HostContext, KernelActor};
use crate::i18n::Msg;

/// Spec defaults (zero values normalise to these).
pub const DEFAULT_BUSY_AFTER: Duration = Duration::from_secs(5 * 60);
pub const DEFAULT_MIN_PENDING: usize = 3;
pub const DEFAULT_MAX_RESIDENTS: usize = 2;
/// The shortest tick.
pub const MIN_TICK: Duration = Duration::from_secs(1);

/// The offload's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffloadConfig {
    pub enabled: bool,
    pub busy_after: Duration,
    pub min_pending: usize,
    pub max_residents: usize,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            busy_after: DEFAULT_BUSY_AFTER,
            min_pending: DEFAULT_MIN_PENDING,
            max_residents: DEFAULT_MAX_RESIDENTS,
        }
    }
}

impl OffloadConfig {
    /// From the settings; zeros become the defaults.
    pub fn read(s: &Settings) -> Self {
        let nz = |v: usize, d: usize| if v == 0 { d } else { v };
        let busy = s.get(keys::AGENT_OFFLOAD_BUSY_AFTER);
        Self {
            enabled: s.get(keys::AGENT_OFFLOAD_ENABLED),
            busy_after: if busy.is_zero() { DEFAULT_BUSY_AFTER } else { busy },
            min_pending: nz(s.get(keys::AGENT_OFFLOAD_MIN_PENDING) as usize, DEFAULT_MIN_PENDING),
            max_residents: nz(s.get(keys::AGENT_OFFLOAD_MAX_RESIDENTS) as usize, DEFAULT_MAX_RESIDENTS),
        }
    }

    /// How often the offload looks: a fifth of `busy_after`, at least a second.
    pub fn tick(&self) -> Duration {
        (self.busy_after / 5).max(MIN_TICK)
    }
}

/// What one tick decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to do.
    Wait,
    /// Hand over the first `count` waiting inputs.
    HandOver { count: usize },
}

/// The trigger: enabled, a task running for at least `busy_after`, and at least
/// `min_pending` channel inputs waiting (exactly that many move: the spec takes up to
/// `MinPending`, all or nothing).
pub fn decide(cfg: &OffloadConfig, busy: &Busy) -> Decision {
    let long = busy.running_for.is_some_and(|d| d >= cfg.busy_after);
    if cfg.enabled && long && busy.pending_inputs >= cfg.min_pending {
        Decision::HandOver { count: cfg.min_pending }
    } else {
        Decision::Wait
    }
}

/// `kernel/agent/offload`.
pub struct OffloadActor {
    config: TAddr<ConfigActor>,
    scheduler: TAddr<SchedulerActor>,
    residents: Residents,
}

impl OffloadActor {
    pub fn new(config: TAddr<ConfigActor>, scheduler: TAddr<SchedulerActor>, residents: Residents) -> Self {
        Self {
            config,
            scheduler,
            residents,
        }
    }

    /// One look; answers when to look again.
    async fn tick(config: TAddr<ConfigActor>, scheduler: TAddr<SchedulerActor>, residents: Residents) -> Duration {
        let Ok(Ok(settings)) = config.send(ReadSettings).await else {
            return OffloadConfig::default().tick();
        };
        let cfg = OffloadConfig::read(&settings);
        if !cfg.enabled {
            // Look again soon: being switched on applies within a second, not after a
            // fifth of the default five minutes.
            return MIN_TICK;
        }
        let Ok(busy) = scheduler.send(GetBusy).await else {
            return cfg.tick();
        };
        if let Decision::HandOver { count } = decide(&cfg, &busy) {
            hand_over(&scheduler, &residents, &cfg, count, &settings).await;
        }
        cfg.tick()
    }

    fn schedule(&self, after: Duration, ctx: &mut HostContext<Self>) {
        ctx.run_later(after, |host, ctx| {
            let me = host.inner();
            let fut = Self::tick(me.config.clone(), me.scheduler.clone(), me.residents.clone());
            ctx.spawn(
                actix::fut::wrap_future::<_, Host<Self>>(fut).map(|next, host, ctx| host.inner().schedule(next, ctx)),
            );
        });
    }
}

/// Executes one hand-over of `count` inputs (spec §6.1 steps 2–5).
async fn hand_over(
    scheduler: &TAddr<SchedulerActor>,
    residents: &Residents,
    cfg: &OffloadConfig,
    count: usize,
    settings: &Settings,
) {
    // A new offload resident is named by the kernel's time (`offload-<seconds>`).
    let now = u64::try_from(crate::clock::now_ms() / 1000).unwrap_or(0);
    let max_total = settings.get(keys::AGENT_MAX_RESIDENTS) as usize;
    let target = residents.with_book(|b| b.offload_target(now, cfg.max_residents, max_total));
    let id = match target {
        Target::Full => {
            tracing::debug!("offload: every triage assistant slot is taken; the backlog waits");
            return;
        }
        Target::Reuse(id) => id,
        Target::Create(id) => {
            let prompt = Msg::TriagePrompt.text();
            if let Err(e) = residents
                .create(&id, &prompt, Owner::Offload, crate::firewall::Principal::owner(), &[])
                .await
            {
                tracing::warn!("offload: no triage assistant ({e}); the backlog waits");
                return;
            }
            id
        }
    };
    let Ok(taken) = scheduler.send(TakeFront(count)).await else {
        return;
    };
    if taken.is_empty() {
        return;
    }
    if !residents.is_live(&id) {
        tracing::warn!(resident = %id, "offload: the triage assistant vanished; the backlog goes back");
        let _ = scheduler.send(PutFront(taken)).await;
        return;
    }
    let at = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let mut moved = 0;
    for t in taken {
        let mut input = t.input;
        input.payload.offloaded_from = Some(super::residents::PARENT_ID.to_owned());
        input.payload.offloaded_at = Some(at.clone());
        tracing::info!(resident = %id, request = %input.request_id, source = %input.source, "offload: input handed to the triage assistant");
        match residents.forward(&id, input).await {
            Ok(()) => moved += 1,
            Err(e) => tracing::warn!("offload: an input was not handed over and was answered with an error: {e}"),
        }
    }
    if moved > 0 {
        let mut notice = Input::text("kernel", &Msg::OffloadNotice { count: moved, id: &id }.text());
        notice.channel = "kernel".into();
        notice.kernel = true;
        let sent = Admitted::own(notice)
            .map_err(|r| r.to_string())
            .and_then(|n| scheduler.do_send(SubmitFront(n)).map_err(|e| e.to_string()));
        if let Err(e) = sent {
            tracing::warn!("offload notice not delivered: {e}");
        }
    }
}

impl KernelActor for OffloadActor {
    const KIND: &'static str = "offload";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        self.schedule(MIN_TICK, ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn busy(secs: Option<u64>, pending: usize) -> Busy {
        Busy {
            running_for: secs.map(Duration::from_secs),
            pending_inputs: pending,
        }
    }

    #[test]
    fn defaults_are_the_spec_s_and_zeros_normalise_to_them() {
        let c = OffloadConfig::read(&Settings::default());
        assert_eq!(c, OffloadConfig::default());
        assert_eq!(
            (c.busy_after, c.min_pending, c.max_residents),
            (Duration::from_secs(300), 3, 2)
        );
        assert!(!c.enabled);
        assert_eq!(c.tick(), Duration::from_secs(60));
        let s = Settings::default()
            .with(keys::AGENT_OFFLOAD_MIN_PENDING, json!(0))
            .with(keys::AGENT_OFFLOAD_MAX_RESIDENTS, json!(0))
            .with(keys::AGENT_OFFLOAD_BUSY_AFTER, json!("2s"));
        let c = OffloadConfig::read(&s);
        assert_eq!((c.min_pending, c.max_residents), (3, 2));
        assert_eq!(c.tick(), MIN_TICK, "a fifth of 2 s is under the one-second floor");
    }

    #[test]
    fn it_hands_over_only_when_busy_long_enough_with_enough_waiting() {
        let on = OffloadConfig {
            enabled: true,
            ..Default::default()
        };
        assert_eq!(decide(&on, &busy(Some(300), 3)), Decision::HandOver { count: 3 });
        assert_eq!(
            decide(&on, &busy(Some(900), 7)),
            Decision::HandOver { count: 3 },
            "up to MinPending"
        );
        assert_eq!(decide(&on, &busy(Some(299), 9)), Decision::Wait, "not busy long enough");
        assert_eq!(decide(&on, &busy(Some(600), 2)), Decision::Wait, "too few waiting");
        assert_eq!(decide(&on, &busy(None, 9)), Decision::Wait, "nothing runs");
        assert_eq!(
            decide(&OffloadConfig::default(), &busy(Some(600), 9)),
            Decision::Wait,
            "disabled"
        );
    }
}
