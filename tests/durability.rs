//! Durable intake, black box: a real daemon, a fake vendor on loopback, kill -9.

mod common;

use std::time::{Duration, Instant};

use common::api::{daemon_with_vendor, post};
use serde_json::{Value, json};

/// Sends `n` async inputs (`text(i)`) from `clients` threads; returns the HTTP statuses
/// (index = input) and the wall time.
fn send_async(
    d: &common::Daemon,
    n: usize,
    clients: usize,
    text: impl Fn(usize) -> String + Sync,
) -> (Vec<u16>, Duration) {
    let url = d.url("/api/v1/messages");
    let statuses = std::sync::Mutex::new(vec![0u16; n]);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..clients {
            s.spawn(|| {
                let client = reqwest::blocking::Client::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= n {
                        return;
                    }
                    let status = client
                        .post(&url)
                        .timeout(Duration::from_secs(30))
                        .json(&json!({"text": text(i), "sync": false}))
                        .send()
                        .map_or(0, |r| r.status().as_u16());
                    statuses.lock().unwrap()[i] = status;
                }
            });
        }
    });
    (statuses.into_inner().unwrap(), t0.elapsed())
}

/// Accept throughput of async inputs (a number for the notes, not a pass/fail bound):
/// `cargo test --test durability accept_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn accept_throughput() {
    for clients in [1, 8] {
        let (_dir, _data, d, _v) = daemon_with_vendor();
        let (statuses, took) = send_async(&d, 300, clients, |i| format!("slow 20 tp {i}"));
        let accepted = statuses.iter().filter(|s| **s == 202).count();
        println!(
            "clients={clients}: {accepted}/300 accepted (others: {:?}) in {:.3} s = {:.0} accepts/s",
            statuses
                .iter()
                .filter(|s| **s != 202)
                .collect::<std::collections::BTreeSet<_>>(),
            took.as_secs_f64(),
            300.0 / took.as_secs_f64()
        );
        let _ = post(&d, "/api/v1/stop", Value::Null);
    }
}
