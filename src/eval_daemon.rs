//! The live evaluations' daemon and questions (`homed eval locomo --live`, fresh and
//! `--lifecycle`): a real `homed` on a temporary data dir with the scripted source,
//! the conversation's questions asked through `POST /api/v1/messages`, and what the
//! vendor's request for each carried ([`crate::eval_metrics`]). Its own module so the
//! two modes share it without importing each other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::eval_metrics::{ChatRequest, PromptParts, Spread, evidence_recall, evidence_whole};
use crate::scripted_vendor::ScriptedVendor;

/// Measures of one question.
#[derive(Debug, Clone, Copy)]
pub struct Measure {
    recall: f64,
    whole: f64,
    memory_tokens: f64,
    prompt_tokens: f64,
    latency_ms: f64,
}

/// The figures of a group of questions.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub questions: usize,
    pub evidence_recall: f64,
    /// The share of evidence in the prompt whole ([`evidence_whole`]).
    pub whole_recall: f64,
    pub memory_tokens: Spread,
    pub prompt_tokens: Spread,
    pub latency_ms: Spread,
}

impl Figures {
    pub(crate) fn of(m: &[Measure]) -> Self {
        let col = |f: fn(&Measure) -> f64| m.iter().map(f).collect::<Vec<f64>>();
        let mean = |v: Vec<f64>| {
            if m.is_empty() {
                0.0
            } else {
                round3(v.iter().sum::<f64>() / m.len() as f64)
            }
        };
        Self {
            questions: m.len(),
            evidence_recall: mean(col(|x| x.recall)),
            whole_recall: mean(col(|x| x.whole)),
            memory_tokens: Spread::of(&col(|x| x.memory_tokens)),
            prompt_tokens: Spread::of(&col(|x| x.prompt_tokens)),
            latency_ms: round_spread(Spread::of(&col(|x| x.latency_ms))),
        }
    }
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn round_spread(s: Spread) -> Spread {
    Spread {
        p50: round3(s.p50),
        p95: round3(s.p95),
    }
}

/// A daemon under evaluation: its process and where it lives.
pub(crate) struct LiveDaemon {
    child: Child,
    pub(crate) base: String,
    pub(crate) data: PathBuf,
    log: PathBuf,
}

impl LiveDaemon {
    pub(crate) fn start(dir: &Path) -> anyhow::Result<Self> {
        Self::start_with(dir, &[])
    }

    /// A daemon with extra arguments (`--virtual-clock TIME`).
    pub(crate) fn start_with(dir: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let data = dir.join("data");
        let log = dir.join("homed.log");
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(std::env::current_exe()?)
            .args([
                "--data",
                data.to_str().context("the temporary directory's path is not UTF-8")?,
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("cannot start the daemon under evaluation")?;
        Ok(Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            data,
            log,
        })
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for LiveDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An authorised client of a healthy daemon with the scripted source loaded.
pub(crate) async fn configure(
    d: &LiveDaemon,
    vendor: &ScriptedVendor,
    window: u64,
    dense: bool,
) -> anyhow::Result<(awc::Client, String)> {
    let probe = awc::Client::builder().timeout(Duration::from_secs(5)).finish();
    let deadline = Instant::now() + Duration::from_secs(60);
    while probe
        .get(format!("{}/readyz", d.base))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .ok()
        != Some(200)
    {
        if Instant::now() > deadline {
            bail!(
                "the daemon did not become ready within 60 s; its log:\n{}",
                d.log_tail()
            );
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    let token = crate::auth::read_token(&d.data)?;
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(600))
        .add_default_header(("authorization", format!("Bearer {token}")))
        .finish();
    let p = "core.llm.sources.live.";
    let settings = serde_json::json!({
        format!("{p}base_url"): vendor.base_url, format!("{p}model"): "scripted",
        format!("{p}adapter"): "openai", format!("{p}api_key"): "sk-live-eval",
        format!("{p}context_window"): window,
        // The eval measures memory: a simulated year of daily backups of the eval's
        // throw-away data dir would cost minutes and measure nothing.
        "core.backup.keep": 0,
    });
    let mut settings = settings;
    if !dense {
        // `--no-dense`: recall by BM25 alone, as on a machine without the ONNX model.
        settings["core.memory.embedder"] = "tfidf".into();
    }
    let r = client
        .put(format!("{}/api/v1/settings", d.base))
        .send_json(&settings)
        .await
        .map_err(|e| anyhow::anyhow!("configuring the scripted source: {e}"))?;
    anyhow::ensure!(
        r.status().is_success(),
        "configuring the scripted source failed: {}",
        r.status()
    );
    loop {
        let mut r = client
            .get(format!("{}/api/v1/llm/sources", d.base))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let v: serde_json::Value = r.json().await.context("the sources' answer")?;
        if v["sources"].as_array().is_some_and(|s| !s.is_empty()) {
            break;
        }
        if Instant::now() > deadline {
            bail!("the daemon did not load the scripted source: {v}");
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((client, token))
}

/// `question j/m` on stderr: rewritten in place on a terminal, else every 25th and the last.
fn progress(j: usize, m: usize) {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprint!("\r  question {j}/{m}");
        if j == m {
            eprintln!();
        }
    } else if j.is_multiple_of(25) || j == m {
        eprintln!("  question {j}/{m}");
    }
}

/// Waits until the embedder has a vector for every row (or says it has no dense
/// space), showing progress on stderr. Gives up after 30 minutes.
pub(crate) async fn wait_for_vectors(client: &awc::Client, base: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30 * 60);
    let mut last_shown = Instant::now();
    loop {
        let mut r = client
            .get(format!("{base}/api/v1/memory/status"))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot read the memory status: {e}"))?;
        let v: serde_json::Value = r.json().await.context("the memory status")?;
        let e = &v["embedder"];
        let (active, rows, done) = (
            e["active"].as_str().unwrap_or("none").to_owned(),
            e["rows"].as_u64().unwrap_or(0),
            e["embedded"].as_u64().unwrap_or(0),
        );
        if active == "tfidf" || active == "none" {
            eprintln!("  no dense embedder active ({active}): recall ranks by BM25 alone");
            return Ok(());
        }
        if rows > 0 && done >= rows && e["recompute"].is_null() {
            eprintln!("  embedder {active}: {done}/{rows} rows embedded");
            return Ok(());
        }
        if last_shown.elapsed() >= Duration::from_secs(10) {
            eprintln!("  waiting for the embedder ({active}): {done}/{rows} rows");
            last_shown = Instant::now();
        }
        if Instant::now() > deadline {
            bail!(
                "the embedder did not finish within 30 minutes ({done}/{rows} rows); check its status at /api/v1/memory/status"
            );
        }
        actix_rt::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Asks one question as a normal synchronous input.
/// A request that could not even connect never reached the daemon, so it is retried
/// (awc's pool now and then reports a connection it dropped as "disconnected").
async fn ask(client: &awc::Client, base: &str, question: &str) -> anyhow::Result<()> {
    let body = serde_json::json!({ "text": question });
    let mut attempt = 0;
    let mut r = loop {
        match client.post(format!("{base}/api/v1/messages")).send_json(&body).await {
            Ok(r) => break r,
            Err(awc::error::SendRequestError::Connect(e)) if attempt < 3 => {
                attempt += 1;
                tracing::debug!("connecting to the daemon failed ({e}); retrying");
                actix_rt::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => bail!("cannot reach the daemon: {e}"),
        }
    };
    let v: serde_json::Value = r.json().limit(16 * 1024 * 1024).await.context("the reply")?;
    if !r.status().is_success() {
        bail!("{}: {}", r.status(), v["error"].as_str().unwrap_or("no reason given"));
    }
    Ok(())
}

/// A conversation's category 1–4 questions with the texts of their evidence turns
/// (questions whose evidence is not in the conversation are left out).
pub(crate) fn questions_of(sample: &crate::eval::Sample) -> anyhow::Result<Vec<(crate::eval::Qa, Vec<String>)>> {
    let texts: HashMap<String, String> = crate::eval::turns(sample)?
        .into_iter()
        .map(|t| (t.dia_id, t.text))
        .collect();
    Ok(sample
        .qa
        .iter()
        .filter(|q| (1..=4).contains(&q.category) && !q.question.trim().is_empty())
        .map(|q| {
            let evidence: Vec<String> = q.evidence.iter().filter_map(|id| texts.get(id).cloned()).collect();
            (q.clone(), evidence)
        })
        .filter(|(_, ev)| !ev.is_empty())
        .collect())
}

/// What asking a conversation's questions measured.
pub(crate) struct Asked {
    /// (category, measure) per question, in order.
    pub measures: Vec<(u32, Measure)>,
    pub requests: usize,
    pub failed: usize,
    pub over_window: usize,
    /// Questions whose evidence was not all in the prompt (`--misses`).
    pub misses: Vec<Miss>,
}

/// A question whose evidence did not all reach the prompt: what was asked, what was
/// missing and what memory the prompt carried instead (for `--misses FILE`).
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    pub category: u32,
    pub question: String,
    pub recall: f64,
    /// The evidence turns not found in the prompt.
    pub missing: Vec<String>,
    /// The prompt's memory messages, as sent.
    pub memory: Vec<String>,
}

/// Asks every question through `POST /api/v1/messages` and measures the request the
/// vendor received for it.
pub(crate) async fn ask_all(
    client: &awc::Client,
    base: &str,
    vendor: &ScriptedVendor,
    questions: &[(crate::eval::Qa, Vec<String>)],
    window: u64,
) -> Asked {
    let m = questions.len();
    let mut out = Asked {
        measures: Vec::with_capacity(m),
        requests: 0,
        failed: 0,
        over_window: 0,
        misses: Vec::new(),
    };
    for (qi, (qa, evidence)) in questions.iter().enumerate() {
        progress(qi + 1, m);
        let before = vendor.count();
        let t = Instant::now();
        let answered = ask(client, base, &qa.question).await;
        let latency_ms = t.elapsed().as_secs_f64() * 1000.0;
        let got = vendor.since(before);
        out.requests += got.len();
        let first = got
            .first()
            .and_then(|v| serde_json::from_value::<ChatRequest>(v.clone()).ok());
        let evidence: Vec<&str> = evidence.iter().map(String::as_str).collect();
        let measure = match (answered, first) {
            (Ok(()), Some(req)) => {
                let parts = PromptParts::of(&req);
                if parts.prompt_tokens as u64 > window {
                    out.over_window += 1;
                }
                let norm = parts.memory_norm();
                let recall = evidence_recall(&norm, &evidence);
                let whole = evidence_whole(&norm, &evidence);
                if recall < 1.0 {
                    out.misses.push(Miss {
                        category: qa.category,
                        question: qa.question.clone(),
                        recall,
                        missing: evidence
                            .iter()
                            .filter(|e| !crate::eval_metrics::evidence_present(&norm, e))
                            .map(|e| (*e).to_owned())
                            .collect(),
                        memory: parts.memory.clone(),
                    });
                }
                Measure {
                    recall,
                    whole,
                    memory_tokens: parts.memory_tokens as f64,
                    prompt_tokens: parts.prompt_tokens as f64,
                    latency_ms,
                }
            }
            (result, _) => {
                out.failed += 1;
                if let Err(e) = result {
                    eprintln!("  question {}/{m} failed: {e:#}", qi + 1);
                }
                Measure {
                    recall: 0.0,
                    whole: 0.0,
                    memory_tokens: 0.0,
                    prompt_tokens: 0.0,
                    latency_ms,
                }
            }
        };
        out.measures.push((qa.category, measure));
    }
    out
}
