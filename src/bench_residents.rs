//! `homed bench residents`: what resident sub-agents cost, on a kernel booted in this
//! process against the scripted vendor on loopback (it answers every request at once,
//! so what is measured is the kernel, not a model):
//!
//! * creating a resident (its subtree: context store on disk, scheduler, intake) —
//!   time per resident and the process's RSS growth;
//! * the same residents idle — RSS, and the CPU the process burns over a quiet window,
//!   beside the same window measured before they existed;
//! * a parent → resident → parent round trip (`send`, the resident's turn, its report
//!   as an L3 interrupt, the parent's turn on it) beside a plain turn, both in this run.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use homeagent_actors::agent::input::{Input, ReplyTo};
use homeagent_actors::agent::intake::Inject;
use homeagent_actors::agent::residents::Owner;
use homeagent_actors::bus::Event;
use homeagent_actors::config::UpdateSettings;
use homeagent_actors::firewall::Principal;

/// The process's resident set size in KiB (`/proc/self/status`).
pub(crate) fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) the process used so far (`/proc/self/stat`, clock ticks
/// of 10 ms on Linux).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the state.
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn pct(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Runs the benchmark with `residents` idle residents and `trips` measured round trips.
pub async fn residents(residents: usize, trips: usize, idle: Duration) -> anyhow::Result<()> {
    anyhow::ensure!(residents > 0 && trips > 0, "--residents and --trips must be at least 1");
    let (_lock, state, data) = crate::daemon::boot_temporary("residents").await?;
    let vendor = crate::scripted_vendor::ScriptedVendor::start()?;
    let config = state.config.get().cloned().context("no settings actor")?;
    let p = "core.llm.sources.bench.";
    let settings: std::collections::BTreeMap<String, serde_json::Value> = [
        (format!("{p}base_url"), serde_json::json!(vendor.base_url)),
        (format!("{p}model"), serde_json::json!("scripted")),
        (format!("{p}adapter"), serde_json::json!("openai")),
        (format!("{p}api_key"), serde_json::json!("sk-bench")),
        (
            "core.agent.max_residents".into(),
            serde_json::json!((residents + 1).min(64)),
        ),
    ]
    .into_iter()
    .collect();
    config
        .send(UpdateSettings(settings, homeagent_actors::config::Author::Kernel))
        .await??;
    let agent = state.agent.get().cloned().context("no agent")?.agent;

    // A plain turn, as the HTTP API submits one.
    let plain = |n: usize| {
        let el = agent.event_loop.clone();
        async move {
            let mut input = Input::text("http", &format!("plain turn {n}"));
            let (reply, rx) = ReplyTo::channel(&input.request_id);
            input.reply = reply;
            let t = Instant::now();
            el.send(Inject(input)).await?.map_err(|e| anyhow::anyhow!("{e}"))?;
            let r = rx.await?;
            anyhow::ensure!(r.error.is_none(), "the turn failed: {:?}", r.error);
            Ok::<Duration, anyhow::Error>(t.elapsed())
        }
    };
    // Warm up (and wait for the source to be picked up).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    while plain(n).await.is_err() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the scripted vendor was not picked up in 30 s"
        );
        n += 1;
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..20 {
        plain(1000 + i).await?;
    }

    // Idle CPU before any resident exists (after the boot's background work settled).
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    let (c0, t0) = (cpu_time(), Instant::now());
    actix_rt::time::sleep(idle).await;
    let cpu_before = cpu_time().saturating_sub(c0).as_secs_f64() / t0.elapsed().as_secs_f64();

    // Creation.
    let rss0 = rss_kib();
    let mut create = Vec::with_capacity(residents);
    for i in 0..residents {
        let t = Instant::now();
        agent
            .residents
            .create(
                &format!("idle-{i}"),
                "stand by",
                Owner::Offload,
                Principal::owner(),
                &[],
            )
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        create.push(t.elapsed());
    }
    let rss1 = rss_kib();
    let (c1, t1) = (cpu_time(), Instant::now());
    actix_rt::time::sleep(idle).await;
    let cpu_idle = cpu_time().saturating_sub(c1).as_secs_f64() / t1.elapsed().as_secs_f64();
    let rss2 = rss_kib();

    // Round trips: a parent-made resident (its rounds are reported back). A waiter
    // listens from the moment it is made, so it is made before what it waits for.
    let events = state.bus.subscribe();
    let report_turn = || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut events = events.resubscribe();
        async move {
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let e = tokio::time::timeout(left, events.recv()).await??;
                if let Event::AgentOutput { channel, .. } = &e.event
                    && channel == "child/echo"
                {
                    return Ok::<(), anyhow::Error>(());
                }
            }
        }
    };
    // The creation's own first round is reported too: let it pass.
    let first = report_turn();
    agent
        .residents
        .create(
            "echo",
            "answer what you are sent",
            Owner::Parent,
            Principal::owner(),
            &[],
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    first.await?;
    let (mut plain_t, mut trip_t) = (Vec::with_capacity(trips), Vec::with_capacity(trips));
    for i in 0..trips {
        plain_t.push(plain(10_000 + i).await?);
        let wait = report_turn();
        let t = Instant::now();
        agent
            .residents
            .send("echo", &format!("round trip {i}"), Principal::owner())
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        wait.await?;
        trip_t.push(t.elapsed());
    }

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let per = create.iter().sum::<Duration>() / residents as u32;
    println!("residents benchmark ({residents} residents, {trips} round trips, idle window {idle:?})");
    println!(
        "  create: mean {:.2} ms, p50 {:.2} ms, max {:.2} ms per resident; RSS +{} KiB for {residents} (+{} KiB each)",
        ms(per),
        ms(pct(&mut create.clone(), 0.5)),
        ms(*create.iter().max().unwrap_or(&Duration::ZERO)),
        rss1.saturating_sub(rss0),
        rss1.saturating_sub(rss0) / residents as u64
    );
    println!(
        "  idle:   RSS {} KiB with {residents} residents ({} KiB before them); CPU {:.2}% of a core with them, {:.2}% before",
        rss2,
        rss0,
        cpu_idle * 100.0,
        cpu_before * 100.0
    );
    println!(
        "  plain turn:            p50 {:.2} ms, p90 {:.2} ms",
        ms(pct(&mut plain_t.clone(), 0.5)),
        ms(pct(&mut plain_t.clone(), 0.9))
    );
    println!(
        "  parent→resident→parent: p50 {:.2} ms, p90 {:.2} ms ({:.2}× a plain turn; two turns and two hops)",
        ms(pct(&mut trip_t.clone(), 0.5)),
        ms(pct(&mut trip_t.clone(), 0.9)),
        pct(&mut trip_t, 0.5).as_secs_f64() / pct(&mut plain_t, 0.5).as_secs_f64()
    );
    println!("  vendor requests: {}", vendor.count());
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}
