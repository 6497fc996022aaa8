//! `homed eval locomo FILE`: memory retrieval quality on LoCoMo-format conversations.
//!
//! Each conversation is ingested through the real memory pipeline into a throw-away
//! data directory — every turn appended to `memory.db` as a context event (at its
//! session's time), then embedded by the same background step the embedder actor runs
//! (`missing_vectors` → embed → `put_vectors`, here over events too: they are what is
//! searched) when an ONNX model is installed. No LLM
//! is involved. Each question is then answered by every retriever over the stored
//! events — `hybrid` through the very call per-turn recall makes
//! (`MemoryStore::search_units`: the recall index's BM25 fused with dense cosine), the
//! others as plain functions of `memory::index::retrieve` — and we report turn-level evidence recall@k (the share of a question's
//! evidence turns found in the top k, averaged over questions of categories 1–4),
//! per category and overall, per-query latency, and the size of the memory block the
//! top 10 would make.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use homeagent_actors::llm::tokens;
use homeagent_actors::memory::context::Event;
use homeagent_actors::memory::embed::backend::Embedder;
use homeagent_actors::memory::embed::{self, EmbedConfig};
use homeagent_actors::memory::index::docindex::Unit;
use homeagent_actors::memory::index::retrieve::{self, Bm25, Retriever};
use homeagent_actors::memory::index::tfidf::Tfidf;
use homeagent_actors::memory::recall;
use homeagent_actors::memory::store::{MemoryStore, QueryVector};
use serde::Deserialize;
use serde_json::{Value, json};

/// One question of the benchmark.
#[derive(Debug, Clone, Deserialize)]
pub struct Qa {
    #[serde(default)]
    pub question: String,
    /// Turn ids; see [`evidence_ids`] for the forms accepted.
    #[serde(default, deserialize_with = "evidence_ids")]
    pub evidence: Vec<String>,
    /// 1–4 are scored (5, adversarial, has no answer in the conversation).
    #[serde(default, deserialize_with = "category")]
    pub category: u32,
}

/// Evidence as the benchmark writes it, and as some copies of it do: a list of turn ids
/// (`"D1:3"`), where an entry may hold several (`"D8:6; D9:17"`). Duplicates go.
fn evidence_ids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = Value::deserialize(d)?;
    let items: Vec<String> = match v {
        Value::Array(a) => a.into_iter().filter_map(|x| x.as_str().map(str::to_owned)).collect(),
        Value::String(s) => vec![s],
        _ => Vec::new(),
    };
    let mut out: Vec<String> = Vec::new();
    for item in items {
        for id in item.split([';', ',', ' ']).map(str::trim).filter(|s| !s.is_empty()) {
            if !out.iter().any(|o| o == id) {
                out.push(id.to_owned());
            }
        }
    }
    Ok(out)
}

/// A category as a number or a numeric string.
fn category<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_u64().unwrap_or(0) as u32,
        Value::String(s) => s.trim().parse().unwrap_or(0),
        _ => 0,
    })
}

/// One conversation with its questions.
#[derive(Debug, Deserialize)]
pub struct Sample {
    #[serde(default)]
    pub sample_id: String,
    pub conversation: serde_json::Map<String, Value>,
    #[serde(default)]
    pub qa: Vec<Qa>,
}

/// A turn, flattened out of its session.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub dia_id: String,
    pub speaker: String,
    pub text: String,
    pub ts_ms: i64,
}

/// The k of the block-size figure.
const BLOCK_K: usize = 10;

/// LoCoMo's session time, e.g. `1:56 pm on 8 May, 2023`, as Unix milliseconds (UTC).
pub fn parse_session_time(s: &str) -> Option<i64> {
    let s = s.trim().to_lowercase();
    let (time, date) = s.split_once(" on ")?;
    let (clock, ampm) = time.trim().split_once(' ')?;
    let (h, m) = clock.split_once(':')?;
    let (mut h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    match ampm.trim() {
        "pm" if h != 12 => h += 12,
        "am" if h == 12 => h = 0,
        "am" | "pm" => {}
        _ => return None,
    }
    let parts: Vec<&str> = date.split([' ', ',']).filter(|p| !p.is_empty()).collect();
    let [day, month, year] = parts[..] else { return None };
    // The memory's own date helpers (the same calendar the summaries use).
    use homeagent_actors::memory::text::dates::{days_from_civil, month_of};
    let month = month_of(month)?;
    let days = days_from_civil(year.parse().ok()?, month, day.parse().ok()?);
    Some(((days * 24 + h) * 60 + m) * 60_000)
}

/// The turns of a conversation in order (`session_1`, `session_2`, ...); a turn's time
/// is its session's plus one second per turn, so the order survives storage. Images
/// are represented by their caption, as a user's memory would hold them.
pub fn turns(sample: &Sample) -> anyhow::Result<Vec<Turn>> {
    let c = &sample.conversation;
    let mut out = Vec::new();
    let mut n = 1;
    while let Some(Value::Array(list)) = c.get(&format!("session_{n}")) {
        let when = c
            .get(&format!("session_{n}_date_time"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let base = parse_session_time(when).with_context(|| {
            format!(
                "{}: session_{n}_date_time {when:?} is not like \"1:56 pm on 8 May, 2023\"",
                sample.sample_id
            )
        })?;
        for (i, t) in list.iter().enumerate() {
            let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let mut text = field("text");
            let caption = field("blip_caption");
            if !caption.is_empty() {
                text.push_str(&format!(" [shares a photo: {caption}]"));
            }
            out.push(Turn {
                dia_id: field("dia_id"),
                speaker: field("speaker"),
                text,
                ts_ms: base + i as i64 * 1000,
            });
        }
        n += 1;
    }
    if out.is_empty() {
        bail!("{}: no session_1 in the conversation", sample.sample_id);
    }
    Ok(out)
}

/// What one retriever scored.
#[derive(Debug, Default)]
pub struct Score {
    /// k → per-question recall.
    pub recall: BTreeMap<usize, Vec<f64>>,
    /// category → k → per-question recall.
    pub by_category: BTreeMap<u32, BTreeMap<usize, Vec<f64>>>,
    pub latency_ms: Vec<f64>,
    pub block_tokens: Vec<usize>,
}

/// The share of `evidence` found among the first `k` of `ranked`.
pub fn recall_at(ranked: &[String], evidence: &[String], k: usize) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    let top = &ranked[..k.min(ranked.len())];
    evidence.iter().filter(|e| top.contains(e)).count() as f64 / evidence.len() as f64
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// Options of a run.
pub struct Options {
    pub ks: Vec<usize>,
    pub retrievers: Vec<Retriever>,
    pub json: bool,
    /// Embed with the remote embedder at this base URL (an OpenAI-style
    /// `/v1/embeddings` server, e.g. a local multilingual model) instead of ONNX.
    pub embed_url: Option<String>,
    /// The `model` field sent to that server (empty: none).
    pub embed_model: String,
}

/// The dense embedder of a run: ONNX in-process, or a remote server driven from an
/// actix runtime of our own (its client needs one; the evaluation is synchronous).
enum Dense {
    Onnx(Box<embed::onnx::OnnxEmbedder>),
    Remote(embed::remote::RemoteEmbedder, actix_rt::Runtime),
}

impl Dense {
    fn fingerprint(&self) -> String {
        match self {
            Self::Onnx(e) => e.space().fingerprint(),
            Self::Remote(e, _) => e.space().fingerprint(),
        }
    }

    fn embed(&mut self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        Ok(match self {
            Self::Onnx(e) => e.embed(texts)?,
            Self::Remote(e, rt) => rt.block_on(e.embed(texts))?,
        })
    }
}

/// Runs the evaluation and prints the report (stdout); progress goes to stderr.
pub fn locomo(file: &Path, opts: Options) -> anyhow::Result<()> {
    let raw = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let samples: Vec<Sample> = serde_json::from_slice(&raw).with_context(|| {
        format!(
            "{} is not LoCoMo JSON (an array of {{sample_id, conversation, qa}})",
            file.display()
        )
    })?;
    let mut ks = opts.ks.clone();
    ks.sort_unstable();
    ks.dedup();
    if ks.is_empty() || ks.contains(&0) {
        bail!("--k needs positive numbers, e.g. --k 5,10,20");
    }
    // The embedder as the daemon would pick it (auto: ONNX when installed), or the
    // remote one asked for.
    let mut cfg = EmbedConfig {
        onnx_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ..Default::default()
    };
    if let Some(url) = &opts.embed_url {
        cfg.kind = embed::EmbedderKind::Remote;
        cfg.remote_url = url.clone();
        cfg.remote_model = opts.embed_model.clone();
    }
    let tmp = tempfile::tempdir().context("cannot create a temporary data directory")?;
    let wants_dense = opts
        .retrievers
        .iter()
        .any(|r| matches!(r, Retriever::Embed | Retriever::Hybrid));
    let mut embedder = None;
    if wants_dense {
        let r = embed::backend::resolve(&cfg, tmp.path());
        match (r.embedder, r.fallback) {
            (Some(Embedder::Onnx(e)), _) => {
                eprintln!("eval: embedder {}", e.space().fingerprint());
                embedder = Some(Dense::Onnx(e));
            }
            (Some(Embedder::Remote(e)), _) => {
                let rt = actix_rt::Runtime::new().context("cannot start a runtime for the remote embedder")?;
                let mut d = Dense::Remote(e, rt);
                // One call first: the remote space's dimension is learnt from an answer.
                d.embed(&["probe"])
                    .context("the remote embedder did not answer; is the server running?")?;
                eprintln!("eval: embedder {}", d.fingerprint());
                embedder = Some(d);
            }
            (_, why) => {
                if opts.retrievers.contains(&Retriever::Embed) {
                    bail!(
                        "the embed retriever needs an embedder: {}",
                        why.unwrap_or_else(|| "none configured".into())
                    );
                }
                eprintln!(
                    "eval: no embedder ({}); hybrid runs as BM25 alone",
                    why.unwrap_or_default()
                );
            }
        }
    }
    let mut scores: BTreeMap<Retriever, Score> = opts.retrievers.iter().map(|r| (*r, Score::default())).collect();
    let mut questions = 0usize;
    for (si, sample) in samples.iter().enumerate() {
        let turns = turns(sample)?;
        let dir = tmp.path().join(format!("conv-{si}"));
        let mut store = MemoryStore::open(&dir.join("memory/memory.db"))
            .with_context(|| format!("cannot open a memory store in {}", dir.display()))?;
        let mut dia_of: HashMap<i64, String> = HashMap::new();
        let t0 = Instant::now();
        for (i, t) in turns.iter().enumerate() {
            let e = store.append(Event {
                id: 0,
                ts_ms: t.ts_ms,
                // A conversation between people is remembered with who said what: the
                // speaker is the event's source, as an imported turn's is.
                source: t.speaker.clone(),
                input: t.text.clone(),
                response: String::new(),
                tools_used: Vec::new(),
                tool_results: Vec::new(),
                principal: String::new(),
            })?;
            dia_of.insert(e.id, t.dia_id.clone());
            if (i + 1) % 100 == 0 || i + 1 == turns.len() {
                eprint!("\reval: {} ingesting {}/{} turns", sample.sample_id, i + 1, turns.len());
            }
        }
        eprintln!(" ({:.1}s)", t0.elapsed().as_secs_f64());
        let mut space = String::new();
        if let Some(e) = embedder.as_mut() {
            space = e.fingerprint();
            let (total, _) = store.vector_counts(&space, true)?;
            let mut done = 0;
            let t0 = Instant::now();
            loop {
                let batch = store.missing_vectors(&space, 64, true)?;
                if batch.is_empty() {
                    break;
                }
                let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
                let vs = e.embed(&texts)?;
                done += batch.len();
                store.put_vectors(&space, &batch.into_iter().map(|(r, _)| r).zip(vs).collect::<Vec<_>>())?;
                eprint!("\reval: {} embedding {done}/{total}", sample.sample_id);
            }
            eprintln!(" ({:.1}s)", t0.elapsed().as_secs_f64());
        }
        // Read back what the store holds: the retrievers see memory, not the file.
        let events = store.events()?;
        let vectors = if space.is_empty() {
            HashMap::new()
        } else {
            store.event_vectors(&space)?
        };
        let ids: Vec<String> = events
            .iter()
            .map(|e| dia_of.get(&e.id).cloned().unwrap_or_default())
            .collect();
        let texts: Vec<String> = events
            .iter()
            .map(|e| homeagent_actors::memory::index::docindex::unit_text(e.ts_ms, e.speaker(), e.said()))
            .collect();
        let position: HashMap<i64, usize> = events.iter().enumerate().map(|(i, e)| (e.id, i)).collect();
        let text_refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vec_refs: Vec<Option<&[f32]>> = events.iter().map(|e| vectors.get(&e.id).map(Vec::as_slice)).collect();
        let bm25 = Bm25::build(text_refs.iter().copied());
        let tfidf = Tfidf::train(text_refs.iter().copied());
        let tfidf_vecs: Vec<_> = text_refs.iter().map(|t| tfidf.vectorize(t)).collect();
        for qa in &sample.qa {
            if !(1..=4).contains(&qa.category) || qa.evidence.is_empty() {
                continue;
            }
            questions += 1;
            for (r, score) in scores.iter_mut() {
                let t0 = Instant::now();
                let order: Vec<usize> = match r {
                    Retriever::Tfidf => retrieve::sparse_rank(&tfidf.vectorize(&qa.question), &tfidf_vecs),
                    Retriever::Bm25 => bm25.rank(&qa.question),
                    Retriever::Embed | Retriever::Hybrid => {
                        let qv = match embedder.as_mut() {
                            Some(e) => e.embed(&[recall::meaning_query(&qa.question).as_str()])?.pop(),
                            None => None,
                        };
                        if *r == Retriever::Embed {
                            qv.map(|q| retrieve::dense_rank(&q, &vec_refs)).unwrap_or_default()
                        } else {
                            // The turn's own ranking call, over the same store.
                            let qv = qv.map(|vec| QueryVector {
                                space: space.clone(),
                                vec,
                            });
                            store
                                .search_units(&qa.question, qv.as_ref(), recall::DENSE_MIN, events.len())?
                                .into_iter()
                                .filter_map(|u| match u {
                                    Unit::Event(id) => position.get(&id).copied(),
                                    Unit::Passage(_) => None,
                                })
                                .collect()
                        }
                    }
                };
                score.latency_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
                let ranked: Vec<String> = order.iter().map(|&i| ids[i].clone()).collect();
                for &k in &ks {
                    let rc = recall_at(&ranked, &qa.evidence, k);
                    score.recall.entry(k).or_default().push(rc);
                    score
                        .by_category
                        .entry(qa.category)
                        .or_default()
                        .entry(k)
                        .or_default()
                        .push(rc);
                }
                let block: String = order.iter().take(BLOCK_K).map(|&i| format!("{}\n", texts[i])).collect();
                score.block_tokens.push(tokens::count(&block));
            }
        }
    }
    let report = json!({
        "retrievers": scores.iter().map(|(r, s)| (r.name().to_owned(), json!({
            "recall": s.recall.iter().map(|(k, v)| (k.to_string(), json!(round3(mean(v))))).collect::<serde_json::Map<_, _>>(),
            "by_category": s.by_category.iter().map(|(c, m)| (c.to_string(), json!(
                m.iter().map(|(k, v)| (k.to_string(), json!(round3(mean(v))))).collect::<serde_json::Map<_, _>>()
            ))).collect::<serde_json::Map<_, _>>(),
            "latency_ms": {"p50": round3(percentile(&s.latency_ms, 0.5)), "p95": round3(percentile(&s.latency_ms, 0.95))},
            "block_tokens": (s.block_tokens.iter().sum::<usize>() as f64 / s.block_tokens.len().max(1) as f64).round() as u64,
        }))).collect::<serde_json::Map<_, _>>(),
        "questions": questions,
    });
    let mut out = std::io::stdout().lock();
    if opts.json {
        writeln!(out, "{report}")?;
    } else {
        print_table(&mut out, &report, &ks)?;
    }
    Ok(())
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn print_table(out: &mut impl Write, report: &Value, ks: &[usize]) -> std::io::Result<()> {
    writeln!(
        out,
        "LoCoMo turn-level evidence recall, categories 1-4 ({} questions; 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)",
        report["questions"]
    )?;
    let mut head = format!("{:<8}", "");
    for k in ks {
        head.push_str(&format!(" {:>6}", format!("R@{k}")));
    }
    head.push_str(&format!(
        "   {:>22}   {:>7} {:>7}   {:>11}",
        format!("R@{} by category 1/2/3/4", BLOCK_K.min(*ks.last().unwrap_or(&BLOCK_K))),
        "p50 ms",
        "p95 ms",
        "block tok"
    ));
    writeln!(out, "{head}")?;
    let kc = if ks.contains(&BLOCK_K) {
        BLOCK_K
    } else {
        ks[ks.len() - 1]
    };
    for (name, r) in report["retrievers"].as_object().into_iter().flatten() {
        let mut line = format!("{name:<8}");
        for k in ks {
            line.push_str(&format!(" {:>6.3}", r["recall"][k.to_string()].as_f64().unwrap_or(0.0)));
        }
        let cats: Vec<String> = (1..=4)
            .map(|c| {
                r["by_category"][c.to_string()][kc.to_string()]
                    .as_f64()
                    .map_or("-".into(), |v| format!("{v:.2}"))
            })
            .collect();
        line.push_str(&format!(
            "   {:>22}   {:>7.2} {:>7.2}   {:>11}",
            cats.join("/"),
            r["latency_ms"]["p50"].as_f64().unwrap_or(0.0),
            r["latency_ms"]["p95"].as_f64().unwrap_or(0.0),
            r["block_tokens"]
        ));
        writeln!(out, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_times_parse_and_print_back() {
        let t = parse_session_time("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(homeagent_actors::memory::index::docindex::show_date(t), "8 May 2023");
        assert_eq!(t % 86_400_000, (13 * 60 + 56) * 60_000);
        assert_eq!(
            parse_session_time("12:05 am on 1 January, 2024").unwrap() % 86_400_000,
            5 * 60_000
        );
        assert_eq!(
            homeagent_actors::memory::index::docindex::show_date(
                parse_session_time("9:00 am on 29 February, 2024").unwrap()
            ),
            "29 February 2024"
        );
        assert!(parse_session_time("yesterday").is_none());
        assert!(parse_session_time("1:56 pm on 8 Smarch, 2023").is_none());
    }

    #[test]
    fn evidence_and_categories_are_read_leniently() {
        let q: Qa = serde_json::from_value(json!({
            "question": "q", "evidence": ["D8:6; D9:17", "D1:3", "D1:3"], "category": "2"
        }))
        .unwrap();
        assert_eq!(q.evidence, ["D8:6", "D9:17", "D1:3"]);
        assert_eq!(q.category, 2);
        let q: Qa = serde_json::from_value(json!({"question": "q", "evidence": "D2:1", "category": 5})).unwrap();
        assert_eq!((q.evidence, q.category), (vec!["D2:1".to_string()], 5));
    }

    #[test]
    fn recall_counts_the_share_of_evidence_in_the_top_k() {
        let ranked: Vec<String> = ["D1:1", "D1:2", "D1:3"].map(String::from).to_vec();
        let ev: Vec<String> = ["D1:2", "D9:9"].map(String::from).to_vec();
        assert_eq!(recall_at(&ranked, &ev, 1), 0.0);
        assert_eq!(recall_at(&ranked, &ev, 2), 0.5);
        assert_eq!(recall_at(&ranked, &ev, 50), 0.5);
        assert_eq!(recall_at(&ranked, &[], 5), 0.0);
    }
}
