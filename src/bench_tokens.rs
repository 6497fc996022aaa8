//! `homed bench tokens`: the token counter (`llm::bpe` over the embedded o200k
//! ranks) against `tiktoken_rs::CoreBPE` built from the same ranks, in one run: the
//! time and resident memory to build each, the counting speed on prose, code and
//! Chinese, and whether every count agrees.

use std::time::{Duration, Instant};

use homeagent_actors::llm::tokens;

use crate::bench_residents::rss_kib;

/// Texts of each kind the daemon counts: English prose (the docs), code, Chinese. Read
/// from the source tree at run time (a developer's tool), so the shipped binary does
/// not carry them.
fn corpus() -> anyhow::Result<Vec<(&'static str, String)>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |paths: &[&str]| -> anyhow::Result<String> {
        let mut text = String::new();
        for p in paths {
            let path = root.join(p);
            text += &std::fs::read_to_string(&path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read {} ({e}); run the bench from a checkout of the source tree",
                    path.display()
                )
            })?;
        }
        Ok(text)
    };
    Ok(vec![
        ("prose (docs)", read(&["docs/ARCHITECTURE.md", "docs/DECISIONS.md"])?),
        ("code (src)", read(&["src/kernel.rs", "src/daemon.rs", "src/bench.rs"])?),
        ("Chinese (json)", read(&["tests/fixtures/locomo-zh.json"])?.repeat(4)),
    ])
}

/// How long `f` takes, once.
fn elapsed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

pub fn tokens(rounds: u32) -> anyhow::Result<()> {
    anyhow::ensure!(rounds > 0, "--rounds must be at least 1");
    let rss0 = rss_kib();
    let t = Instant::now();
    tokens::warm_up();
    let ours_build = t.elapsed();
    let rss1 = rss_kib();
    let t = Instant::now();
    let reference = tokens::reference().map_err(anyhow::Error::msg)?;
    let ref_build = t.elapsed();
    let rss2 = rss_kib();
    println!("token counter: llm::bpe vs tiktoken_rs::CoreBPE on the same o200k ranks");
    println!(
        "  build: {:.1} ms, +{:.1} MB RSS ({:.1} MB of tables)   baseline: {:.1} ms, +{:.1} MB RSS",
        ours_build.as_secs_f64() * 1e3,
        rss1.saturating_sub(rss0) as f64 / 1024.0,
        tokens::table_bytes() as f64 / 1048576.0,
        ref_build.as_secs_f64() * 1e3,
        rss2.saturating_sub(rss1) as f64 / 1024.0,
    );
    let mut mismatches = 0;
    for (name, text) in corpus()? {
        let (n, m) = (tokens::count(&text), reference.count_ordinary(&text));
        if n != m {
            mismatches += 1;
            println!("  MISMATCH on {name}: {n} vs {m}");
        }
        // Interleaved, best of `rounds` each, so both see the same machine.
        let (mut ours, mut base) = (Duration::MAX, Duration::MAX);
        for r in 0..rounds {
            eprint!("\r  {name}: round {}/{rounds}", r + 1);
            ours = ours.min(elapsed(|| {
                std::hint::black_box(tokens::count(std::hint::black_box(&text)));
            }));
            base = base.min(elapsed(|| {
                std::hint::black_box(reference.count_ordinary(std::hint::black_box(&text)));
            }));
        }
        eprint!("\r");
        let mb = text.len() as f64 / 1048576.0;
        println!(
            "  {name:<15} {:>7.1} KB, {n:>6} tokens: {:>6.1} MB/s   baseline {:>6.1} MB/s   ratio {:.2}x",
            text.len() as f64 / 1024.0,
            mb / ours.as_secs_f64(),
            mb / base.as_secs_f64(),
            base.as_secs_f64() / ours.as_secs_f64(),
        );
    }
    anyhow::ensure!(
        mismatches == 0,
        "{mismatches} texts counted differently; this is a bug in llm::bpe"
    );
    Ok(())
}
