//! `homed eval locomo FILE --live`: what of a remembered conversation reaches the model.
//!
//! For each conversation: a real `homed` (this executable, on a temporary data dir and
//! a loopback port, as the tests start it) with one LLM source pointing at the built-in
//! [`ScriptedVendor`] (`context_window` = `--window`); the conversation is imported
//! through `POST /api/v1/memory/import` (as `homed memory import` sends it); every
//! category 1–4 question is asked through `POST /api/v1/messages` as a normal input,
//! and the request the vendor received for it is measured ([`crate::eval_metrics`]):
//! evidence-in-prompt recall, memory and whole-prompt tokens, turn latency.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::Serialize;

use crate::eval_daemon::{Figures, LiveDaemon, Measure, ask_all, configure, questions_of, round3, wait_for_vectors};
use crate::scripted_vendor::ScriptedVendor;

/// Options of a live run.
pub struct LiveOptions {
    /// The source's `context_window`.
    pub window: u64,
    pub json: bool,
    /// Only the first K conversations.
    pub limit: Option<usize>,
    /// `--lifecycle`: also live each conversation through time on a second daemon (see
    /// [`crate::eval_lifecycle`]), for this many simulated months after its last session.
    pub lifecycle_months: Option<u32>,
    /// `--misses FILE`: every question of the fresh import whose evidence did not all
    /// reach the prompt, one JSON object a line (what to look at when recall drops).
    pub misses: Option<std::path::PathBuf>,
    /// False with `--no-dense`: the daemons recall by BM25 alone (`core.memory.embedder
    /// = tfidf`), as on a machine without the ONNX model.
    pub dense: bool,
}

/// The report `--json` prints.
#[derive(Debug, Serialize)]
pub struct LiveReport {
    pub file: String,
    pub window: u64,
    pub conversations: usize,
    /// Category 1–4 questions with evidence found in their conversation.
    pub questions: usize,
    /// Chat requests the vendor received for them: one per question when all went well.
    pub requests: usize,
    /// Questions that got no reply or whose request never arrived (scored 0).
    pub failed: usize,
    /// Requests whose whole prompt exceeds the window.
    pub over_window: usize,
    pub overall: Figures,
    pub by_category: BTreeMap<String, Figures>,
    /// Turns imported, over all conversations, and the import time.
    pub imported_turns: usize,
    pub import_ms: u64,
    /// `--lifecycle`: the same questions after the conversations were lived through
    /// time, beside the fresh import's figures above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<crate::eval_lifecycle::LifecycleReport>,
    pub seconds: f64,
}

/// Runs the live evaluation and prints the report (stdout); progress goes to stderr.
pub async fn run(file: &Path, opts: LiveOptions) -> anyhow::Result<()> {
    let started = Instant::now();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut samples = crate::import::read_locomo(file)?;
    if let Some(k) = opts.limit {
        samples.truncate(k);
    }
    if samples.is_empty() {
        bail!("{} holds no conversations", file.display());
    }
    let vendor = ScriptedVendor::start().context("cannot start the scripted vendor on 127.0.0.1")?;
    let mut by_cat: BTreeMap<u32, Vec<Measure>> = BTreeMap::new();
    let mut all = Vec::new();
    let (mut requests, mut failed, mut over_window) = (0, 0, 0);
    let (mut imported_turns, mut import_ms) = (0, 0u64);
    let mut lifecycle = Vec::new();
    let n = samples.len();
    let mut misses = match &opts.misses {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => None,
    };
    for (ci, sample) in samples.iter().enumerate() {
        let tmp = tempfile::tempdir().context("cannot create a temporary data directory")?;
        let daemon = LiveDaemon::start(tmp.path())?;
        let (client, token) = configure(&daemon, &vendor, opts.window, opts.dense).await?;
        let body = crate::import::locomo_ndjson(sample)?;
        eprintln!(
            "conversation {}/{n} ({}): importing {} turns",
            ci + 1,
            sample.sample_id,
            body.iter().filter(|b| **b == b'\n').count()
        );
        let t = Instant::now();
        let report = crate::import::post(&client, &daemon.base, &token, body)
            .await
            .with_context(|| {
                format!(
                    "importing conversation {}; daemon log:\n{}",
                    sample.sample_id,
                    daemon.log_tail()
                )
            })?;
        import_ms += t.elapsed().as_millis() as u64;
        imported_turns += report.imported;
        // As a user would find it a while after importing: with the embedder done, so
        // the dense side of recall is measured, not a race with the background step.
        wait_for_vectors(&client, &daemon.base).await?;
        let questions = questions_of(sample)?;
        vendor.clear();
        let asked = ask_all(&client, &daemon.base, &vendor, &questions, opts.window).await;
        requests += asked.requests;
        failed += asked.failed;
        over_window += asked.over_window;
        if let Some(w) = misses.as_mut() {
            for m in &asked.misses {
                let line = serde_json::json!({ "sample": sample.sample_id, "miss": m });
                writeln!(w, "{line}")?;
            }
            w.flush()?;
        }
        for (cat, m) in asked.measures {
            by_cat.entry(cat).or_default().push(m);
            all.push(m);
        }
        drop(daemon);
        if let Some(months) = opts.lifecycle_months {
            let lived = crate::eval_lifecycle::live_through(sample, &vendor, opts.window, months, opts.dense).await?;
            lifecycle.push(lived);
        }
    }
    let report = LiveReport {
        file: file.display().to_string(),
        window: opts.window,
        conversations: n,
        questions: all.len(),
        requests,
        failed,
        over_window,
        overall: Figures::of(&all),
        by_category: by_cat.iter().map(|(c, m)| (c.to_string(), Figures::of(m))).collect(),
        imported_turns,
        import_ms,
        lifecycle: opts
            .lifecycle_months
            .map(|months| crate::eval_lifecycle::LifecycleReport::of(months, &all, &by_cat, lifecycle)),
        seconds: round3(started.elapsed().as_secs_f64()),
    };
    let mut out = std::io::stdout().lock();
    if opts.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        print_table(&mut out, &report)?;
    }
    Ok(())
}

fn print_table(out: &mut impl Write, r: &LiveReport) -> std::io::Result<()> {
    writeln!(
        out,
        "live LoCoMo evaluation of {}: {} conversations, {} turns imported in {} ms, window {} tokens",
        r.file, r.conversations, r.imported_turns, r.import_ms, r.window
    )?;
    writeln!(
        out,
        "{} questions, {} vendor requests, {} failed, {} over the window; {:.1} s",
        r.questions, r.requests, r.failed, r.over_window, r.seconds
    )?;
    writeln!(
        out,
        "{:<10}{:>6}{:>10}{:>8}{:>12}{:>12}{:>12}{:>12}{:>11}{:>11}",
        "category", "n", "recall", "whole", "mem p50", "mem p95", "prompt p50", "prompt p95", "ms p50", "ms p95"
    )?;
    let row = |out: &mut dyn Write, name: &str, f: &Figures| {
        writeln!(
            out,
            "{:<10}{:>6}{:>10.3}{:>8.3}{:>12.0}{:>12.0}{:>12.0}{:>12.0}{:>11.1}{:>11.1}",
            name,
            f.questions,
            f.evidence_recall,
            f.whole_recall,
            f.memory_tokens.p50,
            f.memory_tokens.p95,
            f.prompt_tokens.p50,
            f.prompt_tokens.p95,
            f.latency_ms.p50,
            f.latency_ms.p95
        )
    };
    for (c, f) in &r.by_category {
        row(out, c, f)?;
    }
    row(out, "overall", &r.overall)?;
    if let Some(l) = &r.lifecycle {
        crate::eval_lifecycle::print_table(out, l)?;
    }
    Ok(())
}
