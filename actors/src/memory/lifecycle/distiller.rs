//! `kernel/memory/distiller`: every 10 minutes, reads the text log records written
//! since its last round (at most 7 days back), extracts the user's self-statements
//! with [`crate::memory::text::rules`] and commits them to the graph in batches of 50 records.
//!
//! Unlike the reference (which only distilled records *older* than the retention, a
//! week-long delay), new records are processed at the next round. Progress is a cursor
//! (the timestamp of the last record processed) in `DATA/memory/distiller.cursor`,
//! written after each committed batch; a crash between the two re-reads that batch,
//! which the graph de-duplicates (same relation key) at the cost of a mention count.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use parking_lot::Mutex;
use serde::Serialize;

use crate::addr::TAddr;
use crate::clock::now_ms;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::memory::graph::actor::{CommitDated, GraphActor};
use crate::memory::textlog::{TextEvent, TextLog};

/// How often a round runs.
pub const INTERVAL: Duration = Duration::from_secs(600);
/// Records older than this are not distilled.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// Records per graph commit.
const BATCH: usize = 50;

/// What one round did.
#[derive(Debug, Clone, Serialize)]
pub struct RulesRound {
    /// Unix milliseconds.
    pub at_ms: i64,
    /// New records read.
    pub records: usize,
    /// Facts extracted.
    pub triples: usize,
    /// Relations the graph did not know yet.
    pub relations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `timer`, `clock` (the virtual clock) or `operator`.
    pub trigger: &'static str,
}

/// The distiller's address with its last round.
pub type DistillerHandle = (TAddr<RuleDistiller>, Arc<Mutex<Option<RulesRound>>>);

/// The actor (on the blocking arbiter: it reads the text log).
pub struct RuleDistiller {
    text_dir: PathBuf,
    cursor_file: PathBuf,
    graph: TAddr<GraphActor>,
    period: crate::memory::lifecycle::heartbeat::Period,
    /// The last round, shared with the status API.
    last: Arc<Mutex<Option<RulesRound>>>,
    /// Held for a whole round: a timer round and an operator round never read the same
    /// records (mention counts would rise twice).
    serial: Arc<tokio::sync::Mutex<()>>,
    /// The text log's files as the last timer round saw them (name, length, mtime):
    /// unchanged means no new record, and the round reads nothing. Why: the rules run
    /// every 10 minutes for the daemon's whole life, and a virtual clock makes a year
    /// of them (52k rounds) in one advance; re-parsing the log each time was the
    /// lifecycle's largest cost.
    seen: Arc<Mutex<Option<u64>>>,
}

/// A digest of the text log's files (names, lengths, modification times).
fn log_signature(dir: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut files: Vec<(std::ffi::OsString, u64, Option<SystemTime>)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let m = e.metadata().ok()?;
                    Some((e.file_name(), m.len(), m.modified().ok()))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

/// The records newer than the cursor and inside the retention, oldest first.
fn pending(text_dir: &Path, cursor_file: &Path) -> Vec<TextEvent> {
    let since = read_cursor(cursor_file).max(now_ms() - RETENTION.as_millis() as i64);
    let since_time = SystemTime::UNIX_EPOCH + Duration::from_millis(since.max(0) as u64);
    let mut records: Vec<TextEvent> = TextLog::replay_since(text_dir, since_time)
        .into_iter()
        // Imported turns were distilled by their import (`DistillRecords`).
        .filter(|e| e.ts > since && !e.imported && !e.input.trim().is_empty())
        .collect();
    records.sort_by_key(|e| e.ts);
    records
}

fn read_cursor(path: &Path) -> i64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn write_cursor(path: &Path, ts: i64) -> std::io::Result<()> {
    let tmp = path.with_extension("cursor.tmp");
    std::fs::write(&tmp, ts.to_string())?;
    std::fs::rename(tmp, path)
}

impl RuleDistiller {
    pub fn new(
        text_dir: PathBuf,
        cursor_file: PathBuf,
        graph: TAddr<GraphActor>,
        every: Duration,
        last: Arc<Mutex<Option<RulesRound>>>,
    ) -> Self {
        Self {
            text_dir,
            cursor_file,
            graph,
            period: crate::memory::lifecycle::heartbeat::Period::new(Arc::new(Mutex::new(every))),
            last,
            serial: Arc::default(),
            seen: Arc::default(),
        }
    }

    fn round(&self, trigger: &'static str) -> impl std::future::Future<Output = RulesRound> + 'static {
        let (graph, cursor, last) = (self.graph.clone(), self.cursor_file.clone(), self.last.clone());
        let (text_dir, serial) = (self.text_dir.clone(), self.serial.clone());
        // An operator's round always reads; a scheduled one only when the log changed.
        let signature = log_signature(&self.text_dir);
        let unchanged = trigger != "operator" && *self.seen.lock() == Some(signature);
        let seen = self.seen.clone();
        async move {
            let _one_at_a_time = serial.lock().await;
            let records = if unchanged {
                Vec::new()
            } else {
                pending(&text_dir, &cursor)
            };
            let mut round = RulesRound {
                at_ms: now_ms(),
                records: records.len(),
                triples: 0,
                relations: 0,
                error: None,
                trigger,
            };
            distill_records(&graph, &records, Some(&cursor), &mut round).await;
            // Read through without an error: this state of the log needs no other round.
            if round.error.is_none() {
                *seen.lock() = Some(signature);
            }
            match &round.error {
                None => tracing::info!(
                    records = round.records,
                    triples = round.triples,
                    relations = round.relations,
                    trigger,
                    "rule distiller round"
                ),
                Some(e) => tracing::warn!(trigger, "rule distiller round failed: {e}"),
            }
            *last.lock() = Some(round.clone());
            round
        }
    }
}

/// Extracts the facts of `records` (oldest first) and commits them to the graph in
/// batches of [`BATCH`], counting into `round`; with a `cursor`, progress is saved after
/// each committed batch. Stops at the first error (left in `round.error`).
async fn distill_records(
    graph: &TAddr<GraphActor>,
    records: &[TextEvent],
    cursor: Option<&Path>,
    round: &mut RulesRound,
) {
    for batch in records.chunks(BATCH) {
        // Each turn's facts dated by the turn (an imported year is not all learnt
        // today: recall shows a fact under the day it was said).
        let groups: Vec<(i64, Vec<_>)> = batch
            .iter()
            .map(|e| {
                (
                    e.ts,
                    crate::memory::text::rules::extract_triples(&crate::memory::text::rules::said_by(
                        &e.source, &e.input,
                    )),
                )
            })
            .filter(|(_, t)| !t.is_empty())
            .collect();
        round.triples += groups.iter().map(|(_, t)| t.len()).sum::<usize>();
        if !groups.is_empty() {
            let session = batch[0].source.clone();
            match graph.send(CommitDated { groups, session }).await {
                Ok(Ok((_, r))) => round.relations += r,
                Ok(Err(e)) => round.error = Some(e.to_string()),
                Err(e) => round.error = Some(e.to_string()),
            }
            if round.error.is_some() {
                break;
            }
        }
        let ts = batch.last().map_or(0, |e| e.ts);
        if let Some(c) = cursor
            && let Err(e) = write_cursor(c, ts)
        {
            round.error = Some(format!(
                "cannot save the distiller's progress in {}: {e}; check disk space",
                c.display()
            ));
            break;
        }
    }
}

impl KernelActor for RuleDistiller {
    const KIND: &'static str = "heartbeat";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        let every = self.period.arm(ctx, || DistillTick);
        tracing::info!(every = ?every, "rule distiller armed");
    }
}

/// The timer fired.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DistillTick;

/// An operator asked for a round now; answers what it did.
#[derive(Message)]
#[rtype(result = "RulesRound")]
pub struct RunRules;

impl Handles<DistillTick> for RuleDistiller {
    type Reply = ();
    fn handle(&mut self, _: DistillTick, ctx: &mut HostContext<Self>) {
        let round = self.round("timer");
        ctx.spawn(actix::fut::wrap_future::<_, Host<Self>>(async move {
            round.await;
        }));
    }
}

impl crate::memory::lifecycle::heartbeat::Scheduled for RuleDistiller {
    type Round = RulesRound;
    fn period(&mut self) -> &mut crate::memory::lifecycle::heartbeat::Period {
        &mut self.period
    }
    fn run(&self, trigger: &'static str) -> std::pin::Pin<Box<dyn std::future::Future<Output = RulesRound>>> {
        Box::pin(self.round(trigger))
    }
    fn failed(r: &RulesRound) -> bool {
        r.error.is_some()
    }
}

impl Handles<RunRules> for RuleDistiller {
    type Reply = ResponseFuture<RulesRound>;
    fn handle(&mut self, _: RunRules, _: &mut HostContext<Self>) -> Self::Reply {
        Box::pin(self.round("operator"))
    }
}

/// Distils the given records now, outside the cursor: an import's turns, which may be
/// older than the retention or the cursor. Their text log lines are marked `imported`,
/// so the timer's rounds never distil them a second time. Runs under the same
/// one-round-at-a-time lock as the timer's rounds.
#[derive(Message)]
#[rtype(result = "RulesRound")]
pub struct DistillRecords(pub Vec<TextEvent>);

impl Handles<DistillRecords> for RuleDistiller {
    type Reply = ResponseFuture<RulesRound>;
    fn handle(&mut self, DistillRecords(records): DistillRecords, _: &mut HostContext<Self>) -> Self::Reply {
        let (graph, serial) = (self.graph.clone(), self.serial.clone());
        Box::pin(async move {
            let _one_at_a_time = serial.lock().await;
            let mut round = RulesRound {
                at_ms: now_ms(),
                records: records.len(),
                triples: 0,
                relations: 0,
                error: None,
                trigger: "import",
            };
            distill_records(&graph, &records, None, &mut round).await;
            match &round.error {
                None => tracing::info!(
                    records = round.records,
                    triples = round.triples,
                    relations = round.relations,
                    "imported turns distilled"
                ),
                Some(e) => tracing::warn!("distilling imported turns failed: {e}"),
            }
            round
        })
    }
}
