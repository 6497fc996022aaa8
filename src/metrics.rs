//! `GET /metrics`: the daemon in Prometheus' (OpenMetrics) text format, behind the
//! owner's token like every route.
//!
//! Two kinds of numbers. **Counted as they happen**, from the kernel bus (the daemon
//! observes, the kernel is not instrumented): turns by outcome and their latency from
//! queued to ended, tool calls by status, approvals. **Read at scrape time**: each
//! actor's mailbox depth and restarts (the registry), the scheduler's queues, the LLM
//! sources' failures and the day's budget, and the usage ledger's tokens and cost by
//! kind (all time, so they only grow, as counters must).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use homeagent_actors::bus::{Event, EventBus, TaskState, ToolStatus};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Status {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Actor {
    actor: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Queue {
    queue: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// Turn latencies, seconds (a reply within a second to a long tool chain).
const TURN_BUCKETS: [f64; 12] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// Recall takes a millisecond on a small memory and tens at 100k turns; the embedder
/// can add a few more.
const RECALL_BUCKETS: [f64; 10] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0];

fn turn_histogram() -> Histogram {
    Histogram::new(TURN_BUCKETS)
}

/// What [`render`] reads from the running kernel: handles the HTTP state holds, named
/// here so this module does not depend on the HTTP layer that serves it.
#[derive(Clone, Copy)]
pub struct Kernel<'a> {
    pub registry: &'a homeagent_actors::registry::Registry,
    pub agent: &'a homeagent_actors::agent::AgentHandles,
    pub llm: &'a homeagent_actors::TAddr<homeagent_actors::llm::provider::LlmActor>,
    pub usage: &'a homeagent_actors::TAddr<homeagent_actors::usage::UsageActor>,
}

/// What the bus observer counts (shared with the scrape, which registers them anew).
#[derive(Clone)]
pub struct Counted {
    turns: Family<Outcome, Counter>,
    turn_seconds: Family<Outcome, Histogram>,
    tools: Family<Status, Counter>,
    approvals: Counter,
    waits: Counter,
    recall_seconds: Histogram,
}

impl Default for Counted {
    fn default() -> Self {
        Self {
            turns: Family::default(),
            turn_seconds: Family::new_with_constructor(turn_histogram),
            tools: Family::default(),
            approvals: Counter::default(),
            waits: Counter::default(),
            recall_seconds: Histogram::new(RECALL_BUCKETS),
        }
    }
}

impl Counted {
    /// Follows the bus for the daemon's life.
    pub fn observe(&self, bus: &EventBus) {
        let mut rx = bus.subscribe();
        let me = self.clone();
        actix_rt::spawn(async move {
            let mut queued: HashMap<u64, Instant> = HashMap::new();
            loop {
                let ev = match rx.recv().await {
                    Ok(e) => e,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                match &ev.event {
                    Event::Task { task_id, state, .. } => match state {
                        TaskState::Queued => {
                            queued.insert(*task_id, Instant::now());
                        }
                        TaskState::Done | TaskState::Cancelled | TaskState::Failed => {
                            let outcome = Outcome {
                                outcome: state.as_str(),
                            };
                            me.turns.get_or_create(&outcome).inc();
                            if let Some(t) = queued.remove(task_id) {
                                me.turn_seconds
                                    .get_or_create(&outcome)
                                    .observe(t.elapsed().as_secs_f64());
                            }
                        }
                        _ => {}
                    },
                    Event::ToolCall { status, .. } => {
                        let status = match status {
                            ToolStatus::Ok => "ok",
                            ToolStatus::Error => "error",
                            ToolStatus::Denied => "denied",
                        };
                        me.tools.get_or_create(&Status { status }).inc();
                    }
                    Event::ApprovalRequested { .. } => {
                        me.approvals.inc();
                    }
                    Event::TaskWaiting { .. } => {
                        me.waits.inc();
                    }
                    Event::Recalled { ms, .. } => {
                        me.recall_seconds.observe(ms / 1e3);
                    }
                    _ => {}
                }
                // A task that never ends (a daemon bug) must not grow the map forever.
                if queued.len() > 10_000 {
                    queued.clear();
                }
            }
        });
    }
}

/// Renders the metrics: the counted ones and a fresh read of everything else.
pub async fn render(kernel: Kernel<'_>, counted: &Counted) -> String {
    let Kernel {
        registry,
        agent,
        llm,
        usage,
    } = kernel;
    let mut reg = Registry::with_prefix("homed");
    reg.register(
        "turns",
        "Turns ended, by outcome (done, failed, cancelled)",
        counted.turns.clone(),
    );
    reg.register(
        "turn_duration_seconds",
        "Seconds from an input being queued to its turn ending, by outcome",
        counted.turn_seconds.clone(),
    );
    reg.register(
        "tool_calls",
        "Tool calls ended, by status (ok, error, denied)",
        counted.tools.clone(),
    );
    reg.register(
        "approvals_asked",
        "Risky calls that asked the owner",
        counted.approvals.clone(),
    );
    reg.register(
        "recall_duration_seconds",
        "Seconds a turn's recall took, every memory tier together",
        counted.recall_seconds.clone(),
    );
    reg.register(
        "outage_waits",
        "Times a turn waited for an LLM source or the memory store (task_waiting events)",
        counted.waits.clone(),
    );

    // Actors: mailbox depth and restarts.
    let depth: Family<Actor, Gauge> = Family::default();
    let restarts: Family<Actor, Gauge> = Family::default();
    for a in registry.snapshot() {
        let label = Actor { actor: a.id.clone() };
        depth.get_or_create(&label).set(a.queued as i64);
        restarts.get_or_create(&label).set(a.restarts as i64);
    }
    reg.register("actor_mailbox_depth", "Messages waiting in each actor's mailbox", depth);
    reg.register(
        "actor_restarts",
        "Restarts of each actor since the daemon started",
        restarts,
    );

    // The scheduler's queues.
    if let Ok(snap) = agent.scheduler.send(homeagent_actors::agent::scheduler::GetTasks).await {
        let queues: Family<Queue, Gauge> = Family::default();
        queues
            .get_or_create(&Queue { queue: "ready" })
            .set(snap.ready.len() as i64);
        queues
            .get_or_create(&Queue { queue: "interrupts" })
            .set(snap.interrupts.iter().map(Vec::len).sum::<usize>() as i64);
        queues
            .get_or_create(&Queue { queue: "suspended" })
            .set(snap.stack.len() as i64);
        queues
            .get_or_create(&Queue { queue: "running" })
            .set(i64::from(snap.running.is_some()));
        reg.register("queue_length", "Tasks in each of the scheduler's queues", queues);
    }

    // LLM sources and the day's budget.
    if let Ok(llm) = llm.send(homeagent_actors::llm::provider::GetLlmStatus).await {
        let failures: Family<SourceLabel, Gauge> = Family::default();
        let available: Family<SourceLabel, Gauge> = Family::default();
        for s in &llm.sources {
            let label = SourceLabel {
                source: s.config.name.clone(),
            };
            failures.get_or_create(&label).set(i64::from(s.failures));
            available.get_or_create(&label).set(i64::from(s.available));
        }
        reg.register(
            "llm_source_failures",
            "Consecutive failed rounds of each LLM source",
            failures,
        );
        reg.register("llm_source_available", "1 when the source may be asked now", available);
        reg.register(
            "budget_spent_tokens_today",
            "Tokens the answered calls used today (UTC)",
            ConstGauge::new(llm.budget.spent_today as i64),
        );
        reg.register(
            "budget_daily_tokens",
            "core.llm.budget.daily_tokens (0: no limit)",
            ConstGauge::new(llm.budget.daily_tokens as i64),
        );
    }

    // The ledger, all time, by kind.
    let asked = usage
        .send(homeagent_actors::usage::GetUsage {
            from_ms: i64::MIN / 2,
            to_ms: i64::MAX / 2,
            by: homeagent_actors::usage::GroupBy::Kind,
            kind: None,
        })
        .await;
    if let Ok(Ok((rows, _))) = asked {
        // Fresh counters each scrape, incremented once by the ledger's all-time
        // sums: monotonic, as the ledger only grows.
        let calls: Family<KindLabel, Counter> = Family::default();
        let input: Family<KindLabel, Counter> = Family::default();
        let output: Family<KindLabel, Counter> = Family::default();
        let cost: Family<KindLabel, Counter<f64, AtomicU64>> = Family::default();
        for r in rows {
            let k = KindLabel { kind: r.key.clone() };
            calls.get_or_create(&k).inc_by(r.calls);
            input.get_or_create(&k).inc_by(r.input);
            output.get_or_create(&k).inc_by(r.output);
            cost.get_or_create(&k).inc_by(r.cost_usd);
        }
        reg.register("llm_calls", "Model calls that answered, by kind", calls);
        reg.register("llm_input_tokens", "Input tokens of the answered calls, by kind", input);
        reg.register(
            "llm_output_tokens",
            "Output tokens of the answered calls, by kind",
            output,
        );
        reg.register(
            "llm_cost_usd",
            "Dollars of the answered calls with a price, by kind",
            cost,
        );
    }
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &reg) {
        tracing::warn!("encoding /metrics failed: {e}");
    }
    out
}
