//! `homed bench confine`: what the kernel's confinement costs, beside the unconfined
//! baseline measured in the same run: building a plugin's rules (once per plugin
//! start), the shared closed-port layer (once per daemon), and starting a short
//! program unconfined, confined, and confined with the command limits and a private
//! network (what every `cmd_run` pays).

use std::os::unix::process::CommandExt as _;
use std::time::{Duration, Instant};

use homeagent_confine::{ClosedPort, Confinement, Limits, Support};

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// What runs between fork and exec (system calls only).
type Apply = std::sync::Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

fn spawn_true(apply: Option<Apply>) -> anyhow::Result<Duration> {
    let mut cmd = std::process::Command::new("/bin/true");
    if let Some(f) = apply {
        // SAFETY: the closures below only make system calls.
        unsafe {
            cmd.pre_exec(move || f());
        }
    }
    let t = Instant::now();
    let status = cmd.status()?;
    anyhow::ensure!(status.success(), "/bin/true failed under the confinement");
    Ok(t.elapsed())
}

pub fn confine(runs: usize) -> anyhow::Result<()> {
    anyhow::ensure!(runs >= 5, "--runs must be at least 5");
    let support = Support::probe();
    anyhow::ensure!(
        support.filesystem(),
        "this kernel has no Landlock (ABI {}): nothing to measure",
        support.abi
    );
    let dir = tempfile::tempdir()?;
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work)?;
    let grants = Confinement {
        read: homeagent_confine::system_read_roots(),
        write: vec![work.clone()],
        devices: homeagent_confine::system_devices(),
        forbidden: vec![dir.path().join("data")],
        ..Confinement::default()
    };
    let t = Instant::now();
    let port = ClosedPort::new(1, support)?;
    let port_cost = t.elapsed();
    let mut prepare = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let _ = grants.prepare(support)?;
        prepare.push(t.elapsed());
    }
    let confined: std::sync::Arc<homeagent_confine::Prepared> = std::sync::Arc::new(
        Confinement {
            closed_port: Some(port),
            ..grants.clone()
        }
        .prepare(support)?,
    );
    let limits = Limits::for_command(Duration::from_secs(30));
    let plain: Vec<Duration> = (0..runs).map(|_| spawn_true(None)).collect::<anyhow::Result<_>>()?;
    // A plugin's start: the whole confinement applied once, closed port included.
    let c = confined.clone();
    let apply: Apply = std::sync::Arc::new(move || c.apply());
    let started: Vec<Duration> = (0..runs.min(50))
        .map(|_| spawn_true(Some(apply.clone())))
        .collect::<anyhow::Result<_>>()?;
    // A command inside a confined plugin inherits the domain; `cmd_run` adds the
    // limits, and the network switch off a private namespace.
    let c = limits;
    let limited: Apply = std::sync::Arc::new(move || c.apply());
    let with_limits: Vec<Duration> = (0..runs)
        .map(|_| spawn_true(Some(limited.clone())))
        .collect::<anyhow::Result<_>>()?;
    let offline: Apply = std::sync::Arc::new(move || {
        limits.apply()?;
        homeagent_confine::isolate_network()
    });
    let no_network: Vec<Duration> = (0..runs)
        .map(|_| spawn_true(Some(offline.clone())))
        .collect::<anyhow::Result<_>>()?;
    let loop_of = |n: usize, apply: Option<Apply>| -> anyhow::Result<Duration> {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done"));
        if let Some(f) = apply {
            // SAFETY: system calls only.
            unsafe {
                cmd.pre_exec(move || f());
            }
        }
        let t = Instant::now();
        anyhow::ensure!(cmd.status()?.success(), "the loop failed");
        Ok(t.elapsed() / n as u32)
    };
    let free_loop = loop_of(runs, None)?;
    let jailed_loop = loop_of(runs, Some(apply.clone()))?;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    let plain = p50(plain);
    println!("Landlock ABI {} ({runs} runs each, p50)", support.abi);
    println!("closed-port layer (once per daemon)          {port_cost:>10.2?}");
    println!("a plugin's rules (once per plugin start)     {:>10.2?}", p50(prepare));
    println!("start /bin/true unconfined (baseline)        {plain:>10.2?}");
    let started = p50(started);
    println!(
        "  as a plugin starts (whole confinement)     {started:>10.2?}  ×{:.2}",
        ratio(started, plain)
    );
    let (with_limits, no_network) = (p50(with_limits), p50(no_network));
    println!(
        "  with cmd_run's limits                      {with_limits:>10.2?}  ×{:.2}",
        ratio(with_limits, plain)
    );
    println!(
        "  with limits and no network                 {no_network:>10.2?}  ×{:.2}",
        ratio(no_network, plain)
    );
    println!("a command started inside a shell, mean of {runs}:");
    println!("  unconfined shell (baseline)                {free_loop:>10.2?}");
    println!(
        "  confined shell (what a plugin's commands pay) {jailed_loop:>7.2?}  ×{:.2}",
        ratio(jailed_loop, free_loop)
    );
    Ok(())
}
