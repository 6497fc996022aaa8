//! `homed eval locomo FILE --live --lifecycle [--months N]`: does memory survive time?
//!
//! Beside the fresh import of [`crate::eval_live`] (a daemon that got the whole
//! conversation at once and is asked at once), each conversation is lived through on a
//! second daemon running on a virtual clock (`homed --virtual-clock`): its sessions are
//! imported one by one at their real dates, and between them and for N months after
//! the last one the clock is advanced (`POST /api/v1/clock/advance`), so every
//! heartbeat — distill, rules, archive, merge, review — runs as often as its interval
//! says, at the simulated moment it would have. Then the same questions are asked at
//! that final time, measured the same way (the request the scripted vendor receives),
//! and the two are put side by side: recall fresh and after the lifecycle, their ratio,
//! the storage after one month and after N, and the model calls the heartbeats made.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::eval_daemon::{Figures, LiveDaemon, Measure, ask_all, configure, questions_of, round3, wait_for_vectors};
use crate::eval_metrics::{ChatRequest, PromptParts};
use crate::scripted_vendor::ScriptedVendor;

/// A simulated month.
const MONTH_MS: i64 = 30 * 86_400_000;
/// Turns further apart than this start a new session.
const SESSION_GAP_MS: i64 = 3_600_000;

/// What memory holds: row counts and the bytes of their texts, and the files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Storage {
    pub events: u64,
    pub documents: u64,
    /// Documents whose facts are in the graph (they stay documents).
    pub archived_documents: u64,
    pub passages: u64,
    pub vectors: u64,
    pub relations: u64,
    pub entities: u64,
    pub event_bytes: u64,
    pub document_bytes: u64,
    pub passage_bytes: u64,
    pub vector_bytes: u64,
    /// `memory.db` + `graph.db` with their WAL files.
    pub file_bytes: u64,
    /// `file_bytes` per imported turn.
    pub bytes_per_turn: f64,
}

impl Storage {
    /// Reads a running daemon's databases (read-only; WAL readers do not block it).
    fn read(data: &std::path::Path, turns: usize) -> anyhow::Result<Self> {
        use rusqlite::OpenFlags;
        let open = |p: std::path::PathBuf| {
            rusqlite::Connection::open_with_flags(&p, OpenFlags::SQLITE_OPEN_READ_ONLY)
                .with_context(|| format!("cannot open {}", p.display()))
        };
        let mem = open(data.join("memory/memory.db"))?;
        let one = |c: &rusqlite::Connection, sql: &str| -> anyhow::Result<u64> {
            Ok(c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))?.unwrap_or(0) as u64)
        };
        let mut s = Self {
            events: one(&mem, "SELECT COUNT(*) FROM context_events")?,
            documents: one(&mem, "SELECT COUNT(*) FROM documents")?,
            archived_documents: one(&mem, "SELECT COUNT(*) FROM documents WHERE archived_at_ms IS NOT NULL")?,
            passages: one(&mem, "SELECT COUNT(*) FROM passages")?,
            vectors: one(&mem, "SELECT COUNT(*) FROM vectors")?,
            event_bytes: one(
                &mem,
                "SELECT SUM(LENGTH(CAST(input AS BLOB)) + LENGTH(CAST(response AS BLOB))) FROM context_events",
            )?,
            document_bytes: one(
                &mem,
                "SELECT SUM(LENGTH(CAST(content AS BLOB)) + LENGTH(CAST(summary AS BLOB)) + LENGTH(CAST(events AS BLOB))) FROM documents",
            )?,
            passage_bytes: one(&mem, "SELECT SUM(LENGTH(CAST(text AS BLOB))) FROM passages")?,
            vector_bytes: one(&mem, "SELECT SUM(LENGTH(vec)) FROM vectors")?,
            ..Self::default()
        };
        let graph_db = data.join("memory/graph.db");
        if graph_db.exists() {
            let g = open(graph_db)?;
            s.relations = one(&g, "SELECT COUNT(*) FROM relations")?;
            s.entities = one(&g, "SELECT COUNT(*) FROM entities")?;
        }
        for f in ["memory.db", "memory.db-wal", "graph.db", "graph.db-wal"] {
            s.file_bytes += std::fs::metadata(data.join("memory").join(f)).map_or(0, |m| m.len());
        }
        s.per_turn(turns);
        Ok(s)
    }

    /// Sets `bytes_per_turn` for `turns` remembered turns.
    fn per_turn(&mut self, turns: usize) {
        self.bytes_per_turn = if turns == 0 {
            0.0
        } else {
            round3(self.file_bytes as f64 / turns as f64)
        };
    }

    fn add(&mut self, o: &Self) {
        self.events += o.events;
        self.documents += o.documents;
        self.archived_documents += o.archived_documents;
        self.passages += o.passages;
        self.vectors += o.vectors;
        self.relations += o.relations;
        self.entities += o.entities;
        self.event_bytes += o.event_bytes;
        self.document_bytes += o.document_bytes;
        self.passage_bytes += o.passage_bytes;
        self.vector_bytes += o.vector_bytes;
        self.file_bytes += o.file_bytes;
    }
}

/// One conversation lived through.
pub struct Lived {
    measures: Vec<(u32, Measure)>,
    requests: usize,
    failed: usize,
    over_window: usize,
    turns: usize,
    heartbeat_calls: usize,
    heartbeat_prompt_tokens: u64,
    rounds: BTreeMap<String, u64>,
    round_failures: u64,
    storage_1m: Storage,
    storage: Storage,
}

/// Fresh and lifecycle figures of one question category.
#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    pub fresh: f64,
    pub lifecycle: f64,
    /// lifecycle / fresh (1 when both are 0).
    pub ratio: f64,
}

impl Pair {
    fn of(fresh: f64, lifecycle: f64) -> Self {
        Self {
            fresh,
            lifecycle,
            ratio: if fresh > 0.0 {
                round3(lifecycle / fresh)
            } else if lifecycle > 0.0 {
                f64::INFINITY
            } else {
                1.0
            },
        }
    }
}

/// The `lifecycle` part of the report.
#[derive(Debug, Serialize)]
pub struct LifecycleReport {
    pub months: u32,
    pub questions: usize,
    pub requests: usize,
    pub failed: usize,
    pub over_window: usize,
    /// Evidence recall fresh vs after the lifecycle.
    pub recall: Pair,
    pub recall_by_category: BTreeMap<String, Pair>,
    /// The lifecycle daemon's figures (memory tokens etc.).
    pub overall: Figures,
    pub by_category: BTreeMap<String, Figures>,
    /// Chat requests the heartbeats caused (merge and review tasks), and their prompts' tokens.
    pub heartbeat_calls: usize,
    pub heartbeat_prompt_tokens: u64,
    /// Heartbeat rounds run, per heartbeat, and the rounds that failed.
    pub rounds: BTreeMap<String, u64>,
    pub round_failures: u64,
    pub storage_after_1_month: Storage,
    pub storage: Storage,
}

impl LifecycleReport {
    /// Puts the fresh figures (`fresh`, by category) beside the ones lived through
    /// `months` months.
    pub fn of(months: u32, fresh: &[Measure], fresh_by_cat: &BTreeMap<u32, Vec<Measure>>, lived: Vec<Lived>) -> Self {
        let mut all = Vec::new();
        let mut by_cat: BTreeMap<u32, Vec<Measure>> = BTreeMap::new();
        let (mut requests, mut failed, mut over_window, mut calls, mut tokens, mut round_failures) = (0, 0, 0, 0, 0, 0);
        let (mut turns, mut rounds) = (0, BTreeMap::<String, u64>::new());
        let (mut s1, mut sn) = (Storage::default(), Storage::default());
        for l in lived {
            turns += l.turns;
            for (c, m) in l.measures {
                by_cat.entry(c).or_default().push(m);
                all.push(m);
            }
            requests += l.requests;
            failed += l.failed;
            over_window += l.over_window;
            calls += l.heartbeat_calls;
            tokens += l.heartbeat_prompt_tokens;
            round_failures += l.round_failures;
            for (k, v) in l.rounds {
                *rounds.entry(k).or_default() += v;
            }
            s1.add(&l.storage_1m);
            sn.add(&l.storage);
        }
        s1.per_turn(turns);
        sn.per_turn(turns);
        let overall = Figures::of(&all);
        let fresh_overall = Figures::of(fresh);
        let by_cat_figs: BTreeMap<String, Figures> =
            by_cat.iter().map(|(c, m)| (c.to_string(), Figures::of(m))).collect();
        let recall_by_category = by_cat_figs
            .iter()
            .map(|(c, f)| {
                let fresh = c
                    .parse::<u32>()
                    .ok()
                    .and_then(|c| fresh_by_cat.get(&c))
                    .map_or(0.0, |m| Figures::of(m).evidence_recall);
                (c.clone(), Pair::of(fresh, f.evidence_recall))
            })
            .collect();
        Self {
            months,
            questions: all.len(),
            requests,
            failed,
            over_window,
            recall: Pair::of(fresh_overall.evidence_recall, overall.evidence_recall),
            recall_by_category,
            overall,
            by_category: by_cat_figs,
            heartbeat_calls: calls,
            heartbeat_prompt_tokens: tokens,
            rounds,
            round_failures,
            storage_after_1_month: s1,
            storage: sn,
        }
    }
}

/// The conversation's turns cut into sessions (a gap of more than an hour).
fn sessions(turns: Vec<crate::eval::Turn>) -> Vec<Vec<crate::eval::Turn>> {
    let mut out: Vec<Vec<crate::eval::Turn>> = Vec::new();
    for t in turns {
        match out.last_mut() {
            Some(s) if s.last().is_some_and(|l| t.ts_ms - l.ts_ms <= SESSION_GAP_MS) => s.push(t),
            _ => out.push(vec![t]),
        }
    }
    out
}

/// `POST /api/v1/clock/advance` to `to_ms`; answers the rounds run.
async fn advance(client: &awc::Client, d: &LiveDaemon, to_ms: i64) -> anyhow::Result<serde_json::Value> {
    let mut r = client
        .post(format!("{}/api/v1/clock/advance", d.base))
        .send_json(&serde_json::json!({ "to_ms": to_ms }))
        .await
        .map_err(|e| anyhow::anyhow!("advancing the virtual clock: {e}"))?;
    let v: serde_json::Value = r.json().limit(1 << 20).await.context("the clock's answer")?;
    if !r.status().is_success() {
        bail!(
            "the clock did not advance ({}): {}; daemon log:\n{}",
            r.status(),
            v["error"],
            d.log_tail()
        );
    }
    Ok(v)
}

async fn now_ms(client: &awc::Client, d: &LiveDaemon) -> anyhow::Result<i64> {
    let mut r = client
        .get(format!("{}/api/v1/clock", d.base))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("reading the clock: {e}"))?;
    let v: serde_json::Value = r.json().await.context("the clock")?;
    v["now_ms"].as_i64().context("the clock answered no now_ms")
}

/// Waits until the agent has nothing running, queued or stored (the tasks the merge
/// and review rounds handed it are done). Gives up after 30 minutes.
async fn wait_idle(client: &awc::Client, d: &LiveDaemon) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30 * 60);
    loop {
        let mut r = client
            .get(format!("{}/api/v1/tasks", d.base))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("reading the tasks: {e}"))?;
        let v: serde_json::Value = r.json().limit(16 << 20).await.context("the tasks")?;
        let empty = |k: &str| v[k].as_array().is_none_or(|a| a.is_empty());
        let interrupts = v["interrupts"]
            .as_array()
            .is_none_or(|qs| qs.iter().all(|q| q.as_array().is_none_or(|a| a.is_empty())));
        if v["running"].is_null()
            && v["immediate"].is_null()
            && empty("ready")
            && empty("stack")
            && interrupts
            && v["stored_waiting"].as_u64().unwrap_or(0) == 0
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the agent was still busy after 30 minutes: {v}");
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Lives one conversation through on a virtual clock and asks its questions at the end.
pub async fn live_through(
    sample: &crate::eval::Sample,
    vendor: &ScriptedVendor,
    window: u64,
    months: u32,
    dense: bool,
) -> anyhow::Result<Lived> {
    let turns = crate::eval::turns(sample)?;
    let n_turns = turns.len();
    let sessions = sessions(turns);
    let first = sessions[0][0].ts_ms;
    let tmp = tempfile::tempdir().context("cannot create a temporary data directory")?;
    // A minute before the first session, in Unix seconds.
    let start = ((first - 60_000) / 1000).to_string();
    let daemon = LiveDaemon::start_with(tmp.path(), &["--virtual-clock", &start])?;
    let (client, token) = configure(&daemon, vendor, window, dense).await?;
    let calls_before = vendor.count();
    let mut rounds: BTreeMap<String, u64> = BTreeMap::new();
    let mut round_failures = 0;
    let mut count = |v: &serde_json::Value| {
        if let Some(r) = v["rounds"].as_object() {
            for (k, n) in r {
                *rounds.entry(k.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
        }
        round_failures += v["failed"].as_u64().unwrap_or(0);
    };
    eprintln!(
        "conversation {} lived through: {} sessions, then {months} months",
        sample.sample_id,
        sessions.len()
    );
    for (i, s) in sessions.iter().enumerate() {
        let at = s[0].ts_ms;
        if at > now_ms(&client, &daemon).await? {
            count(&advance(&client, &daemon, at).await?);
        }
        let body = crate::import::turns_ndjson(sample, s)?;
        crate::import::post(&client, &daemon.base, &token, body)
            .await
            .with_context(|| format!("importing session {}; daemon log:\n{}", i + 1, daemon.log_tail()))?;
    }
    let last = sessions.last().and_then(|s| s.last()).map_or(first, |t| t.ts_ms);
    let mut storage_1m = Storage::default();
    for m in 1..=months.max(1) {
        let v = advance(&client, &daemon, last + i64::from(m) * MONTH_MS).await?;
        count(&v);
        if m == 1 {
            wait_idle(&client, &daemon).await?;
            storage_1m = Storage::read(&daemon.data, n_turns)?;
        }
        eprintln!("  month {m}/{months} lived");
    }
    wait_idle(&client, &daemon).await?;
    let spent = vendor.since(calls_before);
    let heartbeat_prompt_tokens = spent
        .iter()
        .filter_map(|v| serde_json::from_value::<ChatRequest>(v.clone()).ok())
        .map(|req| PromptParts::of(&req).prompt_tokens as u64)
        .sum();
    let storage = Storage::read(&daemon.data, n_turns)?;
    wait_for_vectors(&client, &daemon.base).await?;
    let questions = questions_of(sample)?;
    let asked = ask_all(&client, &daemon.base, vendor, &questions, window).await;
    Ok(Lived {
        measures: asked.measures,
        requests: asked.requests,
        failed: asked.failed,
        over_window: asked.over_window,
        turns: n_turns,
        heartbeat_calls: spent.len(),
        heartbeat_prompt_tokens,
        rounds,
        round_failures,
        storage_1m,
        storage,
    })
}

/// The lifecycle part of the table.
pub fn print_table(out: &mut impl std::io::Write, l: &LifecycleReport) -> std::io::Result<()> {
    writeln!(
        out,
        "\nlifecycle ({} months after the last session): {} questions, {} requests, {} failed, {} over the window",
        l.months, l.questions, l.requests, l.failed, l.over_window
    )?;
    writeln!(
        out,
        "{:<10}{:>10}{:>12}{:>8}{:>12}{:>12}",
        "category", "fresh", "lifecycle", "ratio", "mem p50", "mem p95"
    )?;
    for (c, p) in &l.recall_by_category {
        let f = &l.by_category[c];
        writeln!(
            out,
            "{:<10}{:>10.3}{:>12.3}{:>8.3}{:>12.0}{:>12.0}",
            c, p.fresh, p.lifecycle, p.ratio, f.memory_tokens.p50, f.memory_tokens.p95
        )?;
    }
    writeln!(
        out,
        "{:<10}{:>10.3}{:>12.3}{:>8.3}{:>12.0}{:>12.0}",
        "overall",
        l.recall.fresh,
        l.recall.lifecycle,
        l.recall.ratio,
        l.overall.memory_tokens.p50,
        l.overall.memory_tokens.p95
    )?;
    writeln!(
        out,
        "heartbeats: {} model calls, {} prompt tokens; rounds {:?}, {} failed",
        l.heartbeat_calls, l.heartbeat_prompt_tokens, l.rounds, l.round_failures
    )?;
    for (name, s) in [("after 1 month", &l.storage_after_1_month), ("at the end", &l.storage)] {
        writeln!(
            out,
            "storage {name}: {} events, {} documents ({} archived), {} passages, {} vectors, {} relations; {} bytes on disk, {:.0} per turn",
            s.events,
            s.documents,
            s.archived_documents,
            s.passages,
            s.vectors,
            s.relations,
            s.file_bytes,
            s.bytes_per_turn
        )?;
    }
    Ok(())
}
