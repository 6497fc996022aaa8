//! `homed bench mailbox`: what tracking costs, measured against raw actix in one run.
//!
//! Both variants run the same trivial handler on the same thread; the only
//! difference is the path a message takes: `Addr::do_send` into a plain actix actor,
//! or [`TAddr::do_send`] into a supervised [`KernelActor`] (slot read lock, counters,
//! enqueue stamp, envelope, `catch_unwind`, busy timing).

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use homeagent_actors::supervisor::start_root;
use homeagent_actors::{EventBus, Handles, HostContext, KernelActor, Registry, RestartPolicy, SupervisorConfig, TAddr};

#[derive(Message)]
#[rtype(result = "()")]
struct Count;

#[derive(Message)]
#[rtype(result = "u64")]
struct Flush;

/// Baseline: a plain actix actor.
#[derive(Default)]
struct RawCounter(u64);

impl Actor for RawCounter {
    type Context = Context<Self>;
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(0);
    }
}

impl Handler<Count> for RawCounter {
    type Result = ();
    fn handle(&mut self, _: Count, _: &mut Context<Self>) {
        self.0 += 1;
    }
}

impl Handler<Flush> for RawCounter {
    type Result = u64;
    fn handle(&mut self, _: Flush, _: &mut Context<Self>) -> u64 {
        self.0
    }
}

/// The same logic as a supervised, tracked kernel actor.
#[derive(Default)]
struct Counter(u64);

impl KernelActor for Counter {
    const KIND: &'static str = "bench";
}

impl Handles<Count> for Counter {
    type Reply = ();
    fn handle(&mut self, _: Count, _: &mut HostContext<Self>) {
        self.0 += 1;
    }
}

impl Handles<Flush> for Counter {
    type Reply = u64;
    fn handle(&mut self, _: Flush, _: &mut HostContext<Self>) -> u64 {
        self.0
    }
}

/// One measured variant: fire-and-forget throughput and request/reply throughput.
#[derive(Default)]
struct Samples {
    fire: Vec<f64>,
    round_trip: Vec<f64>,
}

fn per_sec(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// Runs the benchmark and prints messages/s for both variants and their ratio.
pub async fn mailbox(messages: u64, rounds: u32) -> anyhow::Result<()> {
    anyhow::ensure!(messages > 0 && rounds > 0, "--messages and --rounds must be at least 1");
    let registry = Arc::new(Registry::default());
    let (root, _exit) = start_root(
        registry.clone(),
        EventBus::default(),
        "bench",
        SupervisorConfig::default(),
    )?;
    let tracked: TAddr<Counter> = root
        .worker("counter", RestartPolicy::Permanent, || Ok(Counter::default()))
        .await?;
    let raw = RawCounter::default().start();
    let round_trips = (messages / 10).max(1);

    println!(
        "mailbox benchmark: {messages} fire-and-forget + {round_trips} request/reply messages, {rounds} rounds each"
    );
    let (mut r, mut t) = (Samples::default(), Samples::default());
    // Interleave the variants so drift (CPU frequency, other load) hits both alike.
    for round in 0..rounds {
        let start = Instant::now();
        for _ in 0..messages {
            raw.do_send(Count);
        }
        raw.send(Flush).await?;
        r.fire.push(per_sec(messages, start.elapsed()));

        let start = Instant::now();
        for _ in 0..messages {
            tracked.do_send(Count)?;
        }
        tracked.send(Flush).await?;
        t.fire.push(per_sec(messages, start.elapsed()));

        let start = Instant::now();
        for _ in 0..round_trips {
            raw.send(Flush).await?;
        }
        r.round_trip.push(per_sec(round_trips, start.elapsed()));

        let start = Instant::now();
        for _ in 0..round_trips {
            tracked.send(Flush).await?;
        }
        t.round_trip.push(per_sec(round_trips, start.elapsed()));
        eprintln!("  round {}/{rounds} done", round + 1);
    }
    let stats = registry.get("bench/counter").expect("registered");
    anyhow::ensure!(
        stats.handled() == u64::from(rounds) * (messages + 1 + round_trips),
        "tracked counter handled {} messages, expected {}",
        stats.handled(),
        u64::from(rounds) * (messages + 1 + round_trips)
    );
    println!(
        "{:<22}{:>22}{:>22}",
        "variant (msg/s)", "do_send median/best", "send().await median/best"
    );
    let row = |name: &str, s: &Samples| {
        println!(
            "{name:<22}{:>22}{:>22}",
            format!("{:.0}/{:.0}", median(&s.fire), best(&s.fire)),
            format!("{:.0}/{:.0}", median(&s.round_trip), best(&s.round_trip))
        )
    };
    row("raw actix Addr", &r);
    row("tracked TAddr", &t);
    println!(
        "{:<22}{:>22.3}{:>22.3}",
        "ratio tracked/raw",
        median(&t.fire) / median(&r.fire),
        median(&t.round_trip) / median(&r.round_trip)
    );
    Ok(())
}
