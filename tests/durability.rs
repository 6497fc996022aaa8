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
                let client = d.client();
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

/// Every turn the text log recorded (`DATA/memory/text/*.jsonl`): the inputs that ran.
fn text_log_inputs(data: &std::path::Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(data.join("memory/text")) else {
        return Vec::new();
    };
    let mut files: Vec<_> = dir.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|v| v["input"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Rows left in the inbox (inputs acknowledged and not finished).
fn inbox_rows(data: &std::path::Path) -> i64 {
    let db = rusqlite::Connection::open(data.join("inbox.db")).unwrap();
    db.query_row("SELECT count(*) FROM inbox", [], |r| r.get(0)).unwrap()
}

/// Waits (20 s at most) until every stored input has left the inbox.
fn wait_inbox_empty(data: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while inbox_rows(data) > 0 {
        assert!(
            Instant::now() < deadline,
            "{} inputs left in the inbox",
            inbox_rows(data)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (120 s at most) until `ok` holds for the inputs the text log recorded.
fn wait_log(d: &common::Daemon, data: &std::path::Path, what: &str, ok: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ran = text_log_inputs(data);
        if ok(&ran) {
            return ran;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {} turns logged; log:\n{}",
            ran.len(),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn acknowledged_async_inputs_survive_kill_9_and_each_runs_once() {
    const N: usize = 300;
    let (_dir, data, d, _v) = daemon_with_vendor();
    let text = |i: usize| format!("slow 20 durable {i}");
    // (Tasks the daemon ran before, e.g. at start, are not ours.)
    let executed_before = common::api::get(&d, "/api/v1/tasks")["stats"]["executed"]
        .as_u64()
        .unwrap_or(0);
    // More than the ready queue holds (256): the rest waits on disk, still acknowledged.
    let (statuses, took) = send_async(&d, N, 8, text);
    let refused: Vec<_> = statuses.iter().enumerate().filter(|(_, s)| **s != 202).collect();
    assert!(refused.is_empty(), "every async input is acknowledged: {refused:?}");
    // The backlog the WebUI shows counts every acknowledged input not yet run, those
    // still stored in inbox.db (the queue holds 256) included. The two counts are read
    // one after the other, so an input fed from the store in between is missed once.
    let tasks = common::api::get(&d, "/api/v1/tasks");
    let ready = tasks["ready"].as_array().map_or(0, Vec::len) as u64;
    let (stored, executed) = (
        tasks["stored_waiting"].as_u64().expect("stored_waiting"),
        tasks["stats"]["executed"].as_u64().unwrap_or(0) - executed_before,
    );
    let running = u64::from(!tasks["running"].is_null());
    let accounted = executed + running + ready + stored;
    assert!(
        accounted <= N as u64 && accounted + 8 >= N as u64,
        "executed {executed} + running {running} + ready {ready} + stored {stored} = {accounted}, not {N}"
    );
    // Mid-way: some have run, most wait.
    let before = wait_log(&d, &data, "the first turns", |r| r.len() >= 20);
    d.kill9();
    let at_kill = text_log_inputs(&data).len();

    let d = common::Daemon::start(&data);
    let ran = wait_log(&d, &data, "every acknowledged input", |r| {
        (0..N).all(|i| r.contains(&text(i)))
    });
    let mut counts = std::collections::BTreeMap::new();
    for input in &ran {
        *counts.entry(input.as_str()).or_insert(0usize) += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        counts.keys().all(|k| k.starts_with("slow 20 durable ")),
        "nothing else ran: {counts:?}"
    );
    assert_eq!(counts.len(), N, "each acknowledged input ran");
    // At least once for the one that was mid-turn at the kill; exactly once for the rest.
    assert!(
        twice.len() <= 1 && twice.iter().all(|(_, n)| **n == 2),
        "ran more than once: {twice:?}"
    );
    println!(
        "kill -9 run: {N} accepted in {:.2} s ({:.0}/s), {} had run at the kill ({} when polled), {} ran after the restart, {} distinct ran in all, twice: {twice:?}",
        took.as_secs_f64(),
        N as f64 / took.as_secs_f64(),
        at_kill,
        before.len(),
        ran.len() - at_kill,
        counts.len()
    );
    // The finished inputs leave the inbox.
    let deadline = Instant::now() + Duration::from_secs(10);
    while inbox_rows(&data) > 0 {
        assert!(
            Instant::now() < deadline,
            "{} rows left in the inbox",
            inbox_rows(&data)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_resend_after_a_failure_runs_and_a_resend_while_the_first_runs_is_refused() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    v.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "please answer"}));
    assert_eq!(status, 502, "{body}");
    v.failing.store(false, std::sync::atomic::Ordering::SeqCst);
    // The failed source is paused for 30 s; a second one (fresh health) serves the retry.
    common::api::put_settings(&d, common::vendor::source_settings("fresh", &v.url, 1));
    common::api::wait_sources(&d, 2);
    let calls = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    // Well inside the 10 s window of the first: a retry, not a re-delivery.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "please answer"}));
    assert_eq!(status, 200, "a retry after a failure goes through: {body}");
    assert_eq!(body["reply"], "echo: please answer");
    assert!(
        v.calls.load(std::sync::atomic::Ordering::SeqCst) > calls,
        "it reached the vendor"
    );
    // After a success, the same text again is a re-delivery.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "please answer"}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["error"],
        "the same text from the same source arrived less than 10 s ago; it was dropped"
    );

    // While the first is running, an identical one is refused (async and sync alike).
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "slow 3000 long one", "sync": false}),
    );
    assert_eq!(status, 202, "{body}");
    assert!(body["input_id"].as_i64().is_some(), "stored: {body}");
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "slow 3000 long one", "sync": false}),
    );
    assert_eq!(status, 409, "{body}");
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "slow 3000 long one"}));
    assert_eq!(status, 409);
    // Another source is another conversation.
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "slow 3000 long one", "source": "qq", "sync": false}),
    );
    assert_eq!(status, 202, "{body}");
}

#[test]
fn stop_with_clear_queue_cancels_the_inputs_waiting_on_disk_too() {
    let (_dir, data, d, v) = daemon_with_vendor();
    let (statuses, _) = send_async(&d, 300, 8, |i| format!("slow 20 stop {i}"));
    assert!(statuses.iter().all(|s| *s == 202), "{statuses:?}");
    let at_stop = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/stop", json!({"clear_queue": true}));
    assert_eq!(status, 200, "{body}");
    // The ready queue's inputs end `cancelled`, the backlog's are dropped: none is left.
    let deadline = Instant::now() + Duration::from_secs(60);
    while inbox_rows(&data) > 0 {
        assert!(
            Instant::now() < deadline,
            "{} inputs still stored after stop; log:\n{}",
            inbox_rows(&data),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let calls = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    // The one running at the stop (and one on its way from the backlog) may still call.
    assert!(
        calls <= at_stop + 2,
        "nothing that waited reached the vendor: {at_stop} calls at the stop, {calls} after"
    );
}

#[test]
fn an_acknowledged_interrupt_survives_kill_9_with_its_level() {
    let (_dir, data, d, _v) = daemon_with_vendor();
    let irq = |text: &str, priority: &str| {
        let (status, body) = post(
            &d,
            "/api/v1/messages",
            json!({"text": text, "interrupt": true, "priority": priority, "sync": false}),
        );
        assert_eq!(status, 202, "{body}");
    };
    irq("slow 4000 urgent one", "L3");
    // Lower than the running one: it waits in its interrupt queue.
    std::thread::sleep(Duration::from_millis(300));
    irq("slow 10 later one", "L1");
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "slow 10 queued one", "sync": false}),
    );
    assert_eq!(status, 202, "{body}");
    let tasks = common::api::get(&d, "/api/v1/tasks");
    assert!(tasks["running"].is_object(), "the L3 one runs: {tasks}");
    d.kill9();
    assert_eq!(inbox_rows(&data), 3, "all three acknowledged inputs are stored");

    let d = common::Daemon::start(&data);
    let ran = wait_log(&d, &data, "the three inputs", |r| r.len() >= 3);
    // Interrupts first (L3, then L1), the queued input last, as before the kill.
    assert_eq!(ran, ["slow 4000 urgent one", "slow 10 later one", "slow 10 queued one"]);
}

#[test]
fn a_bad_priority_is_refused_at_the_edge() {
    let (_dir, _data, d, _v) = daemon_with_vendor();
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "hi", "interrupt": true, "priority": "L7"}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "`priority` must be one of L1, L2, L3, L4 (got `L7`)");
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "hi", "interrupt": true, "priority": "l2"}),
    );
    assert_eq!(status, 200, "{body}");
}

/// The measurement of issue 11 redone: kill -9 *while* 1,001 async inputs are being
/// sent, restart, and count. Every input that got its 202 must run; one whose 202 was
/// lost in the kill may or may not (it may have been stored). A number for the notes:
/// `cargo test --test durability kill_9_during_a_burst -- --ignored --nocapture`.
#[test]
#[ignore]
fn kill_9_during_a_burst_of_1001() {
    const N: usize = 1001;
    let (_dir, data, d, _v) = daemon_with_vendor();
    let text = |i: usize| format!("slow 5 burst {i}");
    let pid = d.child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        common::unsafe_kill(pid, "KILL");
    });
    let (statuses, took) = send_async(&d, N, 8, text);
    killer.join().unwrap();
    d.kill9();
    let acked: Vec<usize> = (0..N).filter(|i| statuses[*i] == 202).collect();
    let at_kill = text_log_inputs(&data).len();
    let d = common::Daemon::start(&data);
    let ran = wait_log(&d, &data, "every acknowledged input", |r| {
        acked.iter().all(|i| r.contains(&text(*i)))
    });
    // Let the stored-but-unacknowledged ones finish too.
    std::thread::sleep(Duration::from_secs(2));
    let ran_all = text_log_inputs(&data);
    let distinct: std::collections::BTreeSet<_> = ran_all.iter().collect();
    let lost = acked.iter().filter(|i| !ran.contains(&text(**i))).count();
    println!(
        "kill -9 during a burst: {} of {N} acknowledged (202) in {:.2} s before the kill, {at_kill} had run at the kill; before and after the restart {} distinct inputs ran ({} turns), acknowledged but never ran: {lost}, ran twice: {}",
        acked.len(),
        took.as_secs_f64(),
        distinct.len(),
        ran_all.len(),
        ran_all.len() - distinct.len()
    );
    assert_eq!(lost, 0);
}

/// The only vendor fails for a few seconds while 60 acknowledged inputs wait: every one
/// is answered once it is back, none twice, and the inbox is empty after. (Before
/// issue 30, 49 of 60 were deleted unanswered.)
#[test]
fn acknowledged_inputs_outlive_a_vendor_outage_and_each_runs_once() {
    let (_dir, data, d, v) = daemon_with_vendor();
    v.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let (statuses, _) = send_async(&d, 60, 4, |i| format!("outage-{i}"));
    assert!(statuses.iter().all(|s| *s == 202), "{statuses:?}");
    std::thread::sleep(Duration::from_secs(3));
    v.failing.store(false, std::sync::atomic::Ordering::SeqCst);
    let want: Vec<String> = (0..60).map(|i| format!("outage-{i}")).collect();
    let ran = wait_log(&d, &data, "all 60 answered after the outage", |ran| {
        want.iter().all(|w| ran.contains(w))
    });
    for w in &want {
        assert_eq!(ran.iter().filter(|r| *r == w).count(), 1, "{w} ran more than once");
    }
    wait_inbox_empty(&data);
    assert!(
        common::api::get(&d, "/api/v1/inbox/dead")["dead"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// The same outage across a `kill -9`: the daemon dies while 60 acknowledged inputs
/// wait for the vendor, starts again while it is still down (the boot-time outage),
/// and once the vendor is back every input is answered, none twice. (Before issue 30,
/// all 77 replayed inputs of such a boot failed in 52 ms and were deleted.)
#[test]
fn an_outage_across_a_restart_loses_nothing() {
    let (_dir, data, d, v) = daemon_with_vendor();
    v.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let (statuses, _) = send_async(&d, 60, 4, |i| format!("restart-outage-{i}"));
    assert!(statuses.iter().all(|s| *s == 202), "{statuses:?}");
    // The first turn has met the outage (the vendor saw it) before the kill.
    let deadline = Instant::now() + Duration::from_secs(20);
    while v.calls.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no turn reached the vendor");
        std::thread::sleep(Duration::from_millis(50));
    }
    d.kill9();
    let d = common::Daemon::start(&data);
    // Booted into the outage: the replayed inputs wait instead of failing.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        common::api::get(&d, "/api/v1/inbox/dead")["dead"]
            .as_array()
            .unwrap()
            .is_empty(),
        "an input was given up during the outage"
    );
    assert_eq!(inbox_rows(&data), 60, "every input still stored");
    v.failing.store(false, std::sync::atomic::Ordering::SeqCst);
    let want: Vec<String> = (0..60).map(|i| format!("restart-outage-{i}")).collect();
    let ran = wait_log(&d, &data, "all 60 answered after the restart", |ran| {
        want.iter().all(|w| ran.contains(w))
    });
    for w in &want {
        assert_eq!(ran.iter().filter(|r| *r == w).count(), 1, "{w} answered more than once");
    }
    wait_inbox_empty(&data);
}

/// An outage longer than `core.agent.outage_wait` puts the input on the dead-letter
/// list with why; the owner's retry runs it once the vendor is back, a discard drops
/// it, and neither works twice.
#[test]
fn an_input_that_outlasts_its_wait_is_kept_for_the_owner_to_retry() {
    let (_dir, data, d, v) = daemon_with_vendor();
    common::api::put_settings(&d, json!({"core.agent.outage_wait": "2s"}));
    v.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    for text in ["kept for later", "given up on"] {
        let (status, body) = post(&d, "/api/v1/messages", json!({"text": text, "sync": false}));
        assert_eq!(status, 202, "{body}");
    }
    common::api::wait_for(&d, "/api/v1/inbox/dead", "both inputs on the dead-letter list", |b| {
        b["dead"].as_array().is_some_and(|a| a.len() == 2)
    });
    let dead = common::api::get(&d, "/api/v1/inbox/dead")["dead"].clone();
    let find = |text: &str| {
        dead.as_array()
            .unwrap()
            .iter()
            .find(|x| x["text"] == text)
            .unwrap()
            .clone()
    };
    let (kept, dropped) = (find("kept for later"), find("given up on"));
    assert!(kept["error"].as_str().unwrap().contains("LLM"), "{kept}");

    v.failing.store(false, std::sync::atomic::Ordering::SeqCst);
    common::api::put_settings(&d, json!({"core.agent.outage_wait": "1h"}));
    let (status, body) = post(&d, &format!("/api/v1/inbox/dead/{}/retry", kept["id"]), Value::Null);
    assert_eq!(status, 202, "{body}");
    let (status, body) = post(&d, &format!("/api/v1/inbox/dead/{}/retry", kept["id"]), Value::Null);
    assert_eq!(status, 404, "a second retry of the same: {body}");
    let r = d
        .client()
        .delete(d.url(&format!("/api/v1/inbox/dead/{}", dropped["id"])))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let ran = wait_log(&d, &data, "the retried input answered", |ran| {
        ran.iter().any(|r| r == "kept for later")
    });
    assert!(!ran.iter().any(|r| r == "given up on"), "a discarded input ran");
    let deadline = Instant::now() + Duration::from_secs(20);
    while inbox_rows(&data) > 0 {
        assert!(Instant::now() < deadline, "rows left in the inbox");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Unmounts the tmpfs when the test ends, however it ends.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// `DATA/memory` on a 16 MiB tmpfs that fills up while the inbox (elsewhere) has room:
/// the acknowledged inputs cannot be recorded, so they wait — none is given up, none
/// runs — and once space is freed each is answered once. (Before issue 30, 20 of 20
/// such inputs never ran, not even after a restart.) Needs root for `mount`; skipped
/// with a message otherwise.
#[test]
fn inputs_wait_for_a_full_memory_disk_and_run_once_it_has_room() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let memory = data.join("memory");
    std::fs::create_dir_all(&memory).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(&memory)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: mounting a tmpfs needs root (run the suite as root to include the full-disk test)");
        return;
    }
    let _unmount = Mounted(memory.clone());
    let d = common::Daemon::start(&data);
    let v = common::vendor::start();
    common::api::put_settings(&d, common::vendor::source_settings("fake", &v.url, 0));
    common::api::wait_sources(&d, 1);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "before the disk fills"}));
    assert_eq!(status, 200, "{body}");

    // Fill the memory disk to the last byte.
    let filler = memory.join("filler");
    {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.write_all(&[0u8; 512]);
        let _ = f.sync_all();
    }
    let (statuses, _) = send_async(&d, 20, 2, |i| format!("disk-full-{i}"));
    assert!(statuses.iter().all(|s| *s == 202), "{statuses:?}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        inbox_rows(&data),
        20,
        "every input still stored; log:\n{}",
        d.log_text()
    );
    assert!(
        common::api::get(&d, "/api/v1/inbox/dead")["dead"]
            .as_array()
            .unwrap()
            .is_empty(),
        "an input was given up on a full disk"
    );

    std::fs::remove_file(&filler).unwrap();
    let want: Vec<String> = (0..20).map(|i| format!("disk-full-{i}")).collect();
    let ran = wait_log(&d, &data, "all 20 answered once the disk had room", |ran| {
        want.iter().all(|w| ran.contains(w))
    });
    for w in &want {
        assert_eq!(ran.iter().filter(|r| *r == w).count(), 1, "{w} answered more than once");
    }
    wait_inbox_empty(&data);
    let log = d.log_text();
    assert!(
        log.contains("retry=Record") && log.contains("database or disk is full"),
        "the inputs did not wait for the disk:\n{log}"
    );
}
