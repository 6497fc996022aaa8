//! `homed bench media`: what images cost the media memory, measured in one run.
//!
//! * **Ingest**, per image: base64 decode → the checks (magic bytes, header
//!   dimensions, size cap) → the block's write to `memory.db` on disk (one committed
//!   transaction), for images of a given size; beside it, the same bytes written to a
//!   plain file (the baseline: what storing bytes costs at all). Memory per image: the
//!   process's RSS and the database file's growth over the whole batch.
//! * **Recall latency** at each size (default 1k and 10k blocks with 512-dimension
//!   vectors): the ranking of the in-memory index (the vectors of the active space,
//!   never the bytes) plus the metadata of the top 5, beside a single block's metadata
//!   fetch by id (the baseline), and the cold index load.
//! * **Text → image recall@5** needs a real multimodal model; none is available on
//!   this machine (no registry ships CLIP weights in a package; see docs/DECISIONS.md
//!   "Media vectors"), so it is reported as not measured rather than faked.

use std::time::Instant;

use homeagent_actors::memory::media::actor::rank;
use homeagent_actors::memory::media::check::{self, Limits};
use homeagent_actors::memory::media::store::MediaStore;

use crate::bench::{Lcg, time_ms_warm};

/// A PNG of about `size` bytes, distinct for each `seed`: a real signature and IHDR
/// (what the checks read), then filler (the checks never decode pixels).
fn png(seed: u64, size: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    v.extend_from_slice(&640u32.to_be_bytes());
    v.extend_from_slice(&480u32.to_be_bytes());
    v.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    let mut rng = Lcg(seed.wrapping_add(1));
    while v.len() < size {
        v.extend_from_slice(&rng.next().to_le_bytes());
    }
    v.truncate(size.max(40));
    v
}

fn db_bytes(dir: &std::path::Path) -> u64 {
    ["memory.db", "memory.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

pub fn media(sizes: &[usize], queries: usize, images: usize, image_kib: usize) -> anyhow::Result<()> {
    use base64::Engine as _;
    anyhow::ensure!(
        queries > 0 && images > 0 && image_kib > 0 && sizes.iter().all(|&n| n >= 10),
        "--queries, --images and --image-kib ≥ 1, every size ≥ 10"
    );
    let dir = std::env::temp_dir().join(format!("homed-bench-media-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let limits = Limits {
        max_bytes: 20 << 20,
        max_count: 16,
    };

    // Ingest.
    let encoded: Vec<String> = (0..images as u64)
        .map(|i| base64::engine::general_purpose::STANDARD.encode(png(i, image_kib * 1024)))
        .collect();
    let mut store = MediaStore::open(&dir.join("memory.db"))?;
    let (rss0, db0) = (crate::bench_residents::rss_kib(), db_bytes(&dir));
    let mut ingest = Vec::with_capacity(images);
    for (i, b64) in encoded.iter().enumerate() {
        let t = Instant::now();
        let data = check::decode_base64(0, b64, limits.max_bytes)?;
        let img = check::check(0, Some("image/png"), data, &limits)?;
        store.put(&img, "bench", i as i64)?;
        ingest.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (rss1, db1) = (crate::bench_residents::rss_kib(), db_bytes(&dir));
    let mut plain = Vec::with_capacity(images);
    for (i, b64) in encoded.iter().enumerate() {
        let t = Instant::now();
        let data = base64::engine::general_purpose::STANDARD.decode(b64)?;
        let path = dir.join(format!("plain-{i}.bin"));
        {
            use std::io::Write as _;
            let mut f = std::fs::File::create(&path)?;
            f.write_all(&data)?;
            f.sync_data()?;
        }
        plain.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (i50, i95) = crate::bench::percentiles(&mut ingest);
    let (p50, p95) = crate::bench::percentiles(&mut plain);
    println!("media ingest, {images} images of {image_kib} KiB, ms (p50 / p95)");
    println!(
        "  decode + check + block write {i50:.3} / {i95:.3} (x{:.1} decode + fsync'd file write {p50:.3} / {p95:.3})",
        i50 / p50
    );
    println!(
        "  memory per image: RSS {:+.1} KiB, memory.db {:.1} KiB (the bytes live in the block, not in memory)",
        (rss1 as f64 - rss0 as f64) / images as f64,
        (db1.saturating_sub(db0)) as f64 / 1024.0 / images as f64
    );
    drop(store);

    // Recall latency.
    println!("media recall latency, ms (p50 / p95), {queries} queries each, top 5 of 512-dim vectors");
    for &n in sizes {
        let _ = std::fs::remove_file(dir.join("memory.db"));
        let _ = std::fs::remove_file(dir.join("memory.db-wal"));
        let mut store = MediaStore::open(&dir.join("memory.db"))?;
        let mut rng = Lcg(n as u64);
        let built = Instant::now();
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let data = png(i as u64 + 1_000_000, 64);
            let img = check::check(0, None, data, &limits)?;
            let (id, _) = store.put(&img, "bench", i as i64)?;
            store.put_vector(&id, "bench/512", &rng.unit_vector(512))?;
            ids.push(id);
            if (i + 1) % 1000 == 0 {
                eprint!("\r  building {n}: {} blocks", i + 1);
            }
        }
        eprintln!(" ({:.1} s)", built.elapsed().as_secs_f64());
        let t = Instant::now();
        let index = store.vectors("bench/512")?;
        let load_ms = t.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(index.len() == n, "expected {n} vectors, loaded {}", index.len());
        let qs: Vec<Vec<f32>> = (0..queries + 3).map(|_| rng.unit_vector(512)).collect();
        let by_id = time_ms_warm(3, queries, |i| {
            std::hint::black_box(store.meta(&ids[(i * 7919) % n])?);
            Ok(())
        })?;
        let recall = time_ms_warm(3, queries, |i| {
            let hits = rank(&index, &qs[i], 5, -1.0);
            for (id, _) in &hits {
                std::hint::black_box(store.meta(id)?);
            }
            Ok(())
        })?;
        println!("  {n:>6} blocks  metadata by id {:.3} / {:.3}", by_id.0, by_id.1);
        println!(
            "  {n:>6} blocks  rank + top-5 metadata {:.3} / {:.3} (x{:.0} by id); cold index load {load_ms:.1}",
            recall.0,
            recall.1,
            recall.0 / by_id.0
        );
    }
    println!(
        "text→image recall@5: not measured — no multimodal model is available on this machine \
         (the space is a remote embedder; run it against one to measure)"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
