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

/// A minimal OpenAI-format vendor for `bench turn`: answers every chat request with a
/// short streamed reply, as fast as it can, so what remains is the kernel's cost.
async fn bench_vendor(body: actix_web::web::Json<serde_json::Value>) -> actix_web::HttpResponse {
    let stream = body["stream"].as_bool().unwrap_or(false);
    if !stream {
        return actix_web::HttpResponse::Ok().json(serde_json::json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        }));
    }
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"po\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ng\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    actix_web::HttpResponse::Ok()
        .content_type("text/event-stream")
        .body(body)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Runs `homed bench turn`.
pub async fn turn(
    turns: u32,
    keep_data: Option<std::path::PathBuf>,
    remembered: usize,
    ask: String,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    anyhow::ensure!(turns > 0, "--turns must be at least 1");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = actix_web::HttpServer::new(|| {
        actix_web::App::new().route("/v1/chat/completions", actix_web::web::post().to(bench_vendor))
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")?;
    let vendor = format!("http://{}/v1", server.addrs()[0]);
    actix_web::rt::spawn(server.run());

    let data = keep_data
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("homed-bench-{}", std::process::id())));
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let mut daemon = std::process::Command::new(std::env::current_exe()?)
        .args([
            "--data",
            data.to_str().unwrap_or("."),
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .env("RUST_LOG", "warn")
        .spawn()
        .context("cannot start the daemon under test")?;
    let result = turn_inner(turns, &vendor, &base, &data, remembered, &ask, daemon.id()).await;
    let _ = daemon.kill();
    let _ = daemon.wait();
    if keep_data.is_none() {
        let _ = std::fs::remove_dir_all(&data);
    }
    result
}

async fn turn_inner(
    turns: u32,
    vendor: &str,
    base: &str,
    data: &std::path::Path,
    remembered: usize,
    ask: &str,
    pid: u32,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let client = awc::Client::builder().timeout(Duration::from_secs(30)).finish();
    let deadline = Instant::now() + Duration::from_secs(20);
    while client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .ok()
        != Some(200)
    {
        anyhow::ensure!(Instant::now() < deadline, "the daemon did not become ready");
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    // The API needs the owner token, which the daemon created in its data dir.
    let token = crate::auth::read_token(data)?;
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .add_default_header(("authorization", format!("Bearer {token}")))
        .finish();
    let settings = serde_json::json!({
        "core.llm.sources.bench.base_url": vendor, "core.llm.sources.bench.model": "bench",
        "core.llm.sources.bench.adapter": "openai", "core.llm.sources.bench.api_key": "sk-bench",
        // The kernel's own cost first; the query embedding is measured after, beside it.
        "core.memory.embedder": "tfidf",
    });
    let r = client
        .put(format!("{base}/api/v1/settings"))
        .send_json(&settings)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    anyhow::ensure!(r.status().is_success(), "configuring the source failed: {}", r.status());
    loop {
        let mut r = client
            .get(format!("{base}/api/v1/llm/sources"))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let v: serde_json::Value = r.json().await.context("sources")?;
        if v["sources"].as_array().is_some_and(|s| !s.is_empty()) {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the source was not picked up");
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    if remembered > 0 {
        let body = synthetic_history(remembered, homeagent_actors::clock::now_ms());
        let t = Instant::now();
        let long = awc::Client::builder().timeout(Duration::from_secs(3600)).finish();
        // In parts under the import limit, as a user would send a long history.
        let (mut imported, mut archived) = (0, 0);
        for part in import_parts(
            &body,
            homeagent_actors::memory::context::import::MAX_IMPORT_BYTES - 1024,
        ) {
            let r = crate::import::post(&long, base, &token, part.to_vec()).await?;
            imported += r.imported;
            archived += r.archived;
            if remembered > 100_000 {
                eprintln!("  remembered: {imported}/{remembered} turns imported");
            }
        }
        println!(
            "remembered: {imported} synthetic turns imported through POST /api/v1/memory/import in {:.1} s ({archived} moved into documents)",
            t.elapsed().as_secs_f64(),
        );
    }
    println!("turn benchmark: {turns} turns (+50 warm-up) through a real homed against a local fake vendor");
    println!("  without the query embedding (core.memory.embedder = tfidf: BM25 recall only)");
    if ask != "turn" {
        println!("  each input: \"{ask} <n>\"");
    }
    let (bare, full, cpu) = measure_turns(&client, vendor, base, turns, ask, pid, false).await?;
    println!("{:<34}{:>10}{:>10}", "(ms)", "p50", "p99");
    let row = |label: &str, v: &[f64]| {
        println!("{label:<34}{:>10.3}{:>10.3}", percentile(v, 0.5), percentile(v, 0.99));
    };
    row("bare round trip to the vendor", &bare);
    row("full turn via POST /api/v1/messages", &full);
    println!(
        "{:<34}{:>10.3}{:>10.3}",
        "kernel overhead (full - bare)",
        percentile(&full, 0.5) - percentile(&bare, 0.5),
        percentile(&full, 0.99) - percentile(&bare, 0.99)
    );
    print_cpu(cpu);
    with_query_embedding(&client, vendor, base, turns, &full, pid).await
}

/// The daemon's CPU time per turn (all its threads, user + system): unlike the wall
/// clock, it hardly moves with the machine's load, so it is the figure to compare runs by.
fn print_cpu(cpu: Option<f64>) {
    match cpu {
        Some(ms) => println!("{:<34}{:>10.3}   (all threads, /proc)", "daemon CPU per turn", ms),
        None => println!("daemon CPU per turn: not measured (no /proc here)"),
    }
}

/// User + system CPU time of process `pid` so far, in ms (Linux `/proc/<pid>/stat`).
fn process_cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (hz > 0.0).then(|| ticks * 1000.0 / hz)
}

/// The same turns once the dense side is on (`core.memory.embedder = auto`, every row
/// embedded): what the query embedding adds, with the embedder's own timing of it. Skipped,
/// with a line saying why, when no embedder is installed.
async fn with_query_embedding(
    client: &awc::Client,
    vendor: &str,
    base: &str,
    turns: u32,
    lexical: &[f64],
    pid: u32,
) -> anyhow::Result<()> {
    let r = client
        .put(format!("{base}/api/v1/settings"))
        .send_json(&serde_json::json!({"core.memory.embedder": "auto"}))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    anyhow::ensure!(
        r.status().is_success(),
        "switching the embedder on failed: {}",
        r.status()
    );
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        let e = &embedder_status(client, base).await?;
        let settled = e["configured"] == "auto" && e["active"] != "loading" && e["recompute"].is_null();
        if settled && (e["active"] == "tfidf" || e["embedded"].as_u64() >= e["rows"].as_u64().filter(|n| *n > 0)) {
            break e.clone();
        }
        if Instant::now() > deadline {
            println!("  with the query embedding: skipped, the embedder did not catch up within 10 min ({e})");
            return Ok(());
        }
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    };
    if status["active"] == "tfidf" {
        let why = status["fallback"].as_str().unwrap_or("no dense embedder configured");
        println!("  with the query embedding: skipped, no dense embedder is active ({why})");
        return Ok(());
    }
    let n = (turns / 4).max(100);
    println!(
        "  with the query embedding ({} embedder, {} rows embedded): {n} turns, each once the previous \
         turn's two rows have their vectors (as between the messages of a conversation; back to back, \
         the embedder's one thread would be measured queueing, not a turn)",
        status["active"], status["embedded"]
    );
    let (bare, full, cpu) = measure_turns(client, vendor, base, n, "dense turn", pid, true).await?;
    let q = &embedder_status(client, base).await?["query"];
    println!("{:<34}{:>10}{:>10}", "(ms)", "p50", "p99");
    println!(
        "{:<34}{:>10.3}{:>10.3}",
        "kernel overhead with it",
        percentile(&full, 0.5) - percentile(&bare, 0.5),
        percentile(&full, 0.99) - percentile(&bare, 0.99)
    );
    println!(
        "{:<34}{:>10.3}",
        "added to a turn (vs. without)",
        percentile(&full, 0.5) - percentile(lexical, 0.5)
    );
    println!(
        "{:<34}{:>10.3}{:>10} (p95 {:.3}, {} queries)",
        "query embedding itself",
        q["p50_ms"].as_f64().unwrap_or(f64::NAN),
        "",
        q["p95_ms"].as_f64().unwrap_or(f64::NAN),
        q["count"]
    );
    print_cpu(cpu);
    Ok(())
}

/// `turns` (+50 warm-up) pairs of a bare vendor round trip and a whole turn through the
/// daemon; the measured durations in ms, sorted, and the daemon's CPU ms per measured turn.
/// With `settle`, each pair waits (untimed) until every row has its vector.
async fn measure_turns(
    client: &awc::Client,
    vendor: &str,
    base: &str,
    turns: u32,
    label: &str,
    pid: u32,
    settle: bool,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Option<f64>)> {
    use anyhow::Context as _;
    let bare_body =
        serde_json::json!({"model": "bench", "stream": true, "messages": [{"role": "user", "content": "ping"}]});
    let (mut bare, mut full) = (Vec::new(), Vec::new());
    let mut cpu_at_start = None;
    let mut rows = None;
    for i in 0..turns + 50 {
        if i == 50 {
            cpu_at_start = process_cpu_ms(pid);
        }
        if settle {
            embedder_idle(client, base, &mut rows).await?;
        }
        let t = Instant::now();
        let mut r = client
            .post(format!("{vendor}/chat/completions"))
            .send_json(&bare_body)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        r.body().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let b = t.elapsed();
        let t = Instant::now();
        let mut r = client
            .post(format!("{base}/api/v1/messages"))
            .send_json(&serde_json::json!({"text": format!("{label} {i}")}))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let v: serde_json::Value = r.json().await.context("reply")?;
        let f = t.elapsed();
        anyhow::ensure!(v["reply"] == "pong", "unexpected reply: {v}");
        if i >= 50 {
            bare.push(b.as_secs_f64() * 1000.0);
            full.push(f.as_secs_f64() * 1000.0);
        }
        if (i + 1) % 250 == 0 {
            eprintln!("  {}/{} turns", i + 1, turns + 50);
        }
    }
    let cpu = cpu_at_start
        .zip(process_cpu_ms(pid))
        .map(|(a, b)| (b - a) / f64::from(turns));
    bare.sort_by(f64::total_cmp);
    full.sort_by(f64::total_cmp);
    Ok((bare, full, cpu))
}

/// The `embedder` object of `GET /api/v1/memory/status`.
async fn embedder_status(client: &awc::Client, base: &str) -> anyhow::Result<serde_json::Value> {
    use anyhow::Context as _;
    let mut r = client
        .get(format!("{base}/api/v1/memory/status"))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut v: serde_json::Value = r.json().limit(1 << 20).await.context("memory status")?;
    Ok(v["embedder"].take())
}

/// Waits (at most 3 s) until the rows number at least `*rows` + 2 (the last turn's input
/// and reply) and every row has its vector in the active space; `*rows` becomes the
/// count seen.
async fn embedder_idle(client: &awc::Client, base: &str, rows: &mut Option<u64>) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let e = embedder_status(client, base).await?;
        let now = e["rows"].as_u64();
        let grown = rows.is_none_or(|r| now >= Some(r + 2));
        if (grown && e["embedded"].as_u64() >= now) || Instant::now() > deadline {
            *rows = now;
            return Ok(());
        }
        actix_rt::time::sleep(Duration::from_millis(2)).await;
    }
}

/// `n` synthetic turns of two speakers, one a minute, ending an hour before `now_ms`,
/// as an import body: varied enough (a rotating vocabulary) that ranking has work to do.
/// `body` (NDJSON) cut at line ends into parts of at most `max` bytes.
fn import_parts(body: &[u8], max: usize) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        if rest.len() <= max {
            parts.push(rest);
            break;
        }
        let cut = rest[..max].iter().rposition(|b| *b == b'\n').map_or(max, |i| i + 1);
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    parts
}

fn synthetic_history(n: usize, now_ms: i64) -> Vec<u8> {
    const TOPICS: &[&str] = &[
        "the garden",
        "a trip to Lisbon",
        "my sister's greyhound",
        "the new job",
        "piano lessons",
        "the book club",
        "a broken bike",
        "the marathon",
        "grandma's recipe",
        "the camping weekend",
        "a concert",
        "the kitchen",
    ];
    const VERBS: &[&str] = &[
        "loved",
        "planned",
        "fixed",
        "talked about",
        "worried about",
        "finished",
        "started",
    ];
    let start_s = now_ms / 1000 - 3600 - 60 * n as i64;
    let mut out = Vec::with_capacity(n * 110);
    for i in 0..n {
        let speaker = if i % 2 == 0 { "Alex" } else { "Sam" };
        let text = format!(
            "Turn {i}: I {} {} on day {} and it was number {} of them",
            VERBS[i % VERBS.len()],
            TOPICS[(i / 3) % TOPICS.len()],
            i / 1440,
            i % 97
        );
        let line = serde_json::json!({"time": start_s + 60 * i as i64, "speaker": speaker, "text": text});
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// p50 and p95 of `samples` (milliseconds).
pub(crate) fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}

/// Times `f` over `queries` calls (after 20 warm-up calls); milliseconds p50/p95.
fn time_ms(queries: usize, f: impl FnMut(usize) -> anyhow::Result<()>) -> anyhow::Result<(f64, f64)> {
    time_ms_warm(20, queries, f)
}

/// [`time_ms`] with `warm` untimed calls first.
pub(crate) fn time_ms_warm(
    warm: usize,
    queries: usize,
    mut f: impl FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<(f64, f64)> {
    for i in 0..warm {
        f(i)?;
    }
    let mut samples = Vec::with_capacity(queries);
    for i in 0..queries {
        let t = std::time::Instant::now();
        f(i)?;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(percentiles(&mut samples))
}

/// Graph tier latency at each size: recall (keyword, depth 2) and `names_in` (the
/// sentence → entity seeds scan), against an indexed name lookup as the baseline.
pub fn graph(sizes: &[usize], queries: usize) -> anyhow::Result<()> {
    use homeagent_actors::memory::graph::{GraphStore, RecallSort, Triple};
    anyhow::ensure!(
        queries > 0 && sizes.iter().all(|&n| n >= 100),
        "--queries ≥ 1 and every size ≥ 100"
    );
    let dir = std::env::temp_dir().join(format!("homed-bench-graph-{}", std::process::id()));
    println!("graph tier latency, ms (p50 / p95), {queries} queries each; baseline = indexed name lookup");
    for &n in sizes {
        let _ = std::fs::remove_dir_all(&dir);
        let mut g = GraphStore::open(&dir.join("graph.db"))?;
        let name = |i: usize| format!("entity{i}号");
        let built = std::time::Instant::now();
        for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
            let triples: Vec<Triple> = chunk
                .iter()
                .flat_map(|&i| {
                    [(i + 1) % n, (i * 7 + 3) % n].map(|j| Triple {
                        subject: name(i),
                        relation: "相关".into(),
                        object: name(j),
                        ..Default::default()
                    })
                })
                .collect();
            g.commit(&triples, "bench", 0)?;
            eprint!("\r  building {n}: {} entities", chunk.last().map_or(0, |i| i + 1));
        }
        eprintln!(" ({:.1} s)", built.elapsed().as_secs_f64());
        let pick = |i: usize| (i * 7919) % n;
        let base = time_ms(queries, |i| {
            g.recall(&[], &[name(pick(i))], 0, None, RecallSort::Relevance)?;
            Ok(())
        })?;
        let recall = time_ms(queries, |i| {
            g.recall(&[name(pick(i))], &[], 2, None, RecallSort::Relevance)?;
            Ok(())
        })?;
        let names = time_ms(queries.min(100), |i| {
            g.names_in(&format!("我昨天和{}聊了很久", name(pick(i))))?;
            Ok(())
        })?;
        println!("  {n:>7} entities  lookup {:.3} / {:.3}", base.0, base.1);
        println!(
            "  {n:>7} entities  recall depth 2 {:.3} / {:.3} (x{:.1} lookup)",
            recall.0,
            recall.1,
            recall.0 / base.0
        );
        println!(
            "  {n:>7} entities  names_in scan {:.3} / {:.3} (x{:.1} lookup)",
            names.0,
            names.1,
            names.0 / base.0
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A deterministic pseudo-random stream (no dependency, same numbers every run).
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    /// A sentence of `n` words from a vocabulary of 5000 (Latin and CJK words alike).
    fn sentence(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| {
                // Zipf-like: low word numbers are much more frequent.
                let r = self.next() % 5000;
                let w = (r * r) / 5000;
                if w.is_multiple_of(3) {
                    format!("词{w}号")
                } else {
                    format!("word{w}")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
    pub(crate) fn unit_vector(&mut self, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|_| (self.next() % 2000) as f32 / 1000.0 - 1.0).collect();
        homeagent_actors::memory::embed::normalize(&mut v);
        v
    }
}

/// Memory tier latency at each size: the context prune (TF-IDF relevance over the
/// window) and the document lookup (hybrid BM25 + 384-dimension vectors, on disk),
/// against baselines measured in the same run: copying and time-sorting the window,
/// and fetching one document by id.
pub fn memory(sizes: &[usize], queries: usize) -> anyhow::Result<()> {
    use homeagent_actors::memory::context::{Event, prune};
    use homeagent_actors::memory::store::{MemoryStore, QueryVector, VectorRef};
    anyhow::ensure!(
        queries > 0 && sizes.iter().all(|&n| n >= 100),
        "--queries ≥ 1 and every size ≥ 100"
    );
    let dir = std::env::temp_dir().join(format!("homed-bench-memory-{}", std::process::id()));
    println!("memory tier latency, ms (p50 / p95), {queries} queries each");
    for &n in sizes {
        let mut rng = Lcg(n as u64);
        // Context prune over n events.
        let events: Vec<Event> = (0..n)
            .map(|i| Event {
                id: i as i64 + 1,
                ts_ms: i as i64 * 1000,
                source: if i % 2 == 0 { "http".into() } else { "agent".into() },
                input: rng.sentence(12),
                response: if i % 2 == 1 { rng.sentence(20) } else { String::new() },
                tools_used: Vec::new(),
                tool_results: Vec::new(),
                principal: String::new(),
            })
            .collect();
        let qs: Vec<String> = (0..queries + 3).map(|_| rng.sentence(4)).collect();
        let base = time_ms_warm(3, queries, |_| {
            let mut w = events.clone();
            w.sort_by_key(|e| (e.ts_ms, e.id));
            std::hint::black_box(w);
            Ok(())
        })?;
        let pruned = time_ms_warm(3, queries, |i| {
            std::hint::black_box(prune(events.clone(), &qs[i], 30, 10));
            Ok(())
        })?;
        println!("  {n:>7} events     copy+sort window {:.3} / {:.3}", base.0, base.1);
        println!(
            "  {n:>7} events     context prune to 30 {:.3} / {:.3} (x{:.1} copy+sort)",
            pruned.0,
            pruned.1,
            pruned.0 / base.0
        );
        drop(events);

        // Document lookup over n documents on disk.
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = MemoryStore::open(&dir.join("memory.db"))?;
        let built = std::time::Instant::now();
        let mut ids = Vec::with_capacity(n);
        let mut unvectored = 0;
        let space = "bench/384";
        for i in 0..n {
            let id = store.commit_document(&format!("summary {i}"), &format!("{} #{i}", rng.sentence(40)))?;
            ids.push(id);
            if (i + 1) % 5000 == 0 || i + 1 == n {
                let batch: Vec<(VectorRef, Vec<f32>)> = ids[unvectored..]
                    .iter()
                    .map(|id| (VectorRef::Document(id.clone()), rng.unit_vector(384)))
                    .collect();
                store.put_vectors(space, &batch)?;
                unvectored = ids.len();
                eprint!("\r  building {n}: {} documents", i + 1);
            }
        }
        eprintln!(" ({:.1} s)", built.elapsed().as_secs_f64());
        let (_, with_vec) = store.vector_counts(space, false)?;
        anyhow::ensure!(with_vec == n, "expected {n} vectors, stored {with_vec}");
        let by_id = time_ms_warm(3, queries, |i| {
            std::hint::black_box(store.documents_by_id(&ids[(i * 7919) % n])?);
            Ok(())
        })?;
        let bm25 = time_ms_warm(3, queries, |i| {
            std::hint::black_box(store.search_documents(&qs[i], 3, None)?);
            Ok(())
        })?;
        let qv: Vec<QueryVector> = (0..queries + 3)
            .map(|_| QueryVector {
                space: space.into(),
                vec: rng.unit_vector(384),
            })
            .collect();
        let hybrid = time_ms_warm(3, queries, |i| {
            std::hint::black_box(store.search_documents(&qs[i], 3, Some(&qv[i]))?);
            Ok(())
        })?;
        println!("  {n:>7} documents  fetch by id {:.3} / {:.3}", by_id.0, by_id.1);
        println!(
            "  {n:>7} documents  lookup BM25 {:.3} / {:.3} (x{:.0} fetch)",
            bm25.0,
            bm25.1,
            bm25.0 / by_id.0
        );
        println!(
            "  {n:>7} documents  lookup hybrid {:.3} / {:.3} (x{:.0} fetch)",
            hybrid.0,
            hybrid.1,
            hybrid.0 / by_id.0
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Tool-call round trips through the kernel's real tool path (the handler the tool
/// loop calls) on a kernel booted in this process: an in-process tool (the knowledge
/// base's `knowledge_list`, an actor round trip) as the baseline, the bundled
/// subprocess plugin (`timer_list` over stdin/stdout), and the bundled Lua plugin
/// (`units_convert` in its own Lua state). Then the bundled timer plugin is killed
/// with SIGKILL and the time until its tools answer again is measured.
pub async fn plugin(calls: usize, kills: u32) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use homeagent_actors::stages::GetTools;
    anyhow::ensure!(calls > 0, "--calls must be at least 1");
    anyhow::ensure!(
        kills <= 3,
        "--kills at most 3 (a 4th crash in 5 min quarantines the plugin)"
    );
    let (_lock, state, data) = crate::daemon::boot_temporary("plugin").await?;
    let stages = state.stages.get().cloned().context("no stage host")?;
    let wanted = ["knowledge_list", "timer_list", "units_convert"];
    let ready = |tools: &homeagent_actors::stages::ToolRegistry| wanted.iter().all(|n| tools.get(n).is_some());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut tools = stages.send(GetTools).await?;
    while !ready(&tools) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the bundled plugins did not register their tools in 20 s"
        );
        actix_rt::time::sleep(Duration::from_millis(20)).await;
        tools = stages.send(GetTools).await?;
    }
    let cases = [
        ("in-process  knowledge_list", "knowledge_list", serde_json::json!({})),
        ("subprocess  timer_list", "timer_list", serde_json::json!({})),
        (
            "lua         units_convert",
            "units_convert",
            serde_json::json!({"value": 3, "from": "km", "to": "m"}),
        ),
    ];
    println!("tool call round trip through the kernel's tool path, {calls} calls each (after 100 warm-up), µs");
    let mut base_p50 = 0.0;
    for (label, name, args) in cases {
        let handler = tools.get(name).context("tool vanished")?.handler.clone();
        for _ in 0..100 {
            handler
                .call(args.clone())
                .await
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        }
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            handler
                .call(args.clone())
                .await
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        samples.sort_by(f64::total_cmp);
        let p = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        if base_p50 == 0.0 {
            base_p50 = p(0.5);
        }
        println!(
            "  {label}  p50 {:>8.1}  p99 {:>8.1}  (p50 x{:.2} in-process)",
            p(0.5),
            p(0.99),
            p(0.5) / base_p50
        );
    }
    let plugins = state.plugins.get().map(|p| p.set.clone()).context("no plugin host")?;
    let timer = plugins.get("timer").context("the bundled timer plugin is missing")?;
    for k in 1..=kills {
        let pid = timer
            .status(&state.registry)
            .pid
            .context("the timer plugin has no pid")?;
        let t = Instant::now();
        // SAFETY: kill(2) on a pid we read from our own child's status.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let deadline = t + Duration::from_secs(20);
        loop {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the timer plugin's tools were not back within 20 s"
            );
            let tools = stages.send(GetTools).await?;
            let back = match tools.get("timer_list") {
                // A registration from before the kill answers with an error; only a
                // working tool counts.
                Some(tool) => {
                    tool.handler.call(serde_json::json!({})).await.is_ok()
                        && timer.status(&state.registry).pid.is_some_and(|p| p != pid)
                }
                None => false,
            };
            if back {
                break;
            }
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        println!(
            "  SIGKILL #{k} of the timer plugin → its tools answer again after {:.0} ms (restart backoff included)",
            t.elapsed().as_secs_f64() * 1000.0
        );
    }
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_history_is_cut_at_line_ends_under_the_limit() {
        let body = b"aaaa\nbbbb\ncc\nd\n";
        let parts = super::import_parts(body, 10);
        assert_eq!(parts, vec![&b"aaaa\nbbbb\n"[..], &b"cc\nd\n"[..]]);
        assert_eq!(parts.concat(), body.to_vec());
        assert_eq!(super::import_parts(b"", 10).len(), 0);
    }
}
