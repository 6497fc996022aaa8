//! The virtual clock drives heartbeats (its own process: the clock is process-wide).
//!
//! Two heartbeats with different periods are advanced through a simulated week: each
//! runs exactly as often as its period says, at the simulated moments it is due, in
//! the order they were added; time only moves forward; the wall clock refuses. A
//! follower (the plugins' timers) is told the time when an advance starts, at the
//! moment it named, before the heartbeats there, and where the advance ends.

use std::sync::{Arc, Mutex};

use homeagent_actors::clock::{self, Beats, ClockError, Due};

/// A heartbeat with a period, first due a period after `start`, that records the clock
/// at each round. (`start`, not the clock read here: the virtual clock moves with wall
/// time between advances, and a beat made a millisecond after `start` would be due a
/// millisecond after the week ends.)
fn beat(start: i64, period_ms: i64, log: Arc<Mutex<Vec<(&'static str, i64)>>>, name: &'static str) -> clock::DueFn {
    let next = Arc::new(Mutex::new(start + period_ms));
    Arc::new(move |now| {
        let (next, log) = (next.clone(), log.clone());
        Box::pin(async move {
            let mut n = next.lock().unwrap();
            if now < *n {
                return Due {
                    ran: false,
                    failed: false,
                    next_ms: *n,
                };
            }
            // What the round sees is the kernel's clock, which the driver set.
            log.lock().unwrap().push((name, clock::now_ms()));
            // Due again a period after it was due (not after the round, which the wall
            // clock under the virtual one made a few ms late: over a week of rounds
            // under load those ms added up to a missed last round).
            *n += period_ms;
            Due {
                ran: true,
                failed: false,
                next_ms: *n,
            }
        })
    })
}

/// A follower with one reminder due at `due_ms`, that records every time it is told.
fn follower(due_ms: i64, log: Arc<Mutex<Vec<(&'static str, i64)>>>) -> clock::DueFn {
    let fired = Arc::new(Mutex::new(false));
    Arc::new(move |now| {
        let (fired, log) = (fired.clone(), log.clone());
        Box::pin(async move {
            log.lock().unwrap().push(("plugins", now));
            let mut fired = fired.lock().unwrap();
            let ran = !*fired && now >= due_ms;
            *fired |= ran;
            Due {
                ran,
                failed: false,
                next_ms: if *fired { i64::MAX } else { due_ms },
            }
        })
    })
}

#[actix_rt::test]
async fn heartbeats_run_as_often_as_their_period_at_the_simulated_moments() {
    const HOUR: i64 = 3_600_000;
    let far = Beats::default();
    assert_eq!(
        far.advance(clock::now_ms() + HOUR, |_| {}).await.unwrap_err(),
        ClockError::NotVirtual,
        "the wall clock is not driven"
    );
    assert_eq!(clock::advance_to(0), Err(ClockError::NotVirtual));

    let start = 1_683_554_160_000; // 2023-05-08T13:56:00Z
    clock::start_virtual(start);
    assert!(clock::is_virtual());
    let t0 = clock::now_ms();
    assert!((t0 - start).abs() < 5_000, "starts where it was told: {t0}");

    let log: Arc<Mutex<Vec<(&'static str, i64)>>> = Arc::default();
    let mut beats = Beats::default();
    beats.add("distill", beat(t0, 30 * 60_000, log.clone(), "distill"));
    beats.add("archive", beat(t0, 2 * HOUR, log.clone(), "archive"));
    assert_eq!(beats.names(), vec!["distill", "archive"]);

    let mut stops = 0;
    let week = 7 * 24 * HOUR;
    let done = beats.advance(t0 + week, |_| stops += 1).await.unwrap();
    assert!(done.now_ms >= t0 + week && done.now_ms < t0 + week + 5_000, "{done:?}");
    assert_eq!(done.rounds["distill"], 7 * 48, "{done:?}");
    assert_eq!(done.rounds["archive"], 7 * 12, "{done:?}");
    assert_eq!(done.failed, 0);
    assert_eq!(stops, 7 * 48, "one stop per moment something was due");

    let log = log.lock().unwrap().clone();
    // Every round saw the simulated time it was due at (a few ms of wall time later).
    let archive: Vec<i64> = log.iter().filter(|(n, _)| *n == "archive").map(|(_, t)| *t).collect();
    for (i, t) in archive.iter().enumerate() {
        let due = t0 + (i as i64 + 1) * 2 * HOUR;
        assert!(*t >= due && *t < due + 5_000, "archive round {i} at {t}, due {due}");
    }
    // At a moment both are due, distill runs first (the order they were added).
    let both = t0 + 2 * HOUR;
    let at: Vec<&str> = log
        .iter()
        .filter(|(_, t)| (*t - both).abs() < 5_000)
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(at, vec!["distill", "archive"]);

    assert!(matches!(
        beats.advance(t0, |_| {}).await,
        Err(ClockError::Backwards { .. })
    ));
    assert!(matches!(clock::advance_to(t0), Err(ClockError::Backwards { .. })));

    // A follower: told at the start, at its moment (before the heartbeat due then), and
    // at the end; nowhere else.
    let t1 = clock::now_ms();
    let told: Arc<Mutex<Vec<(&'static str, i64)>>> = Arc::default();
    let mut beats = Beats::default();
    beats.add("archive", beat(t1, 2 * HOUR, told.clone(), "archive"));
    beats.follow("plugins", follower(t1 + 2 * HOUR, told.clone()));
    assert_eq!(beats.names(), vec!["plugins", "archive"], "followers first");
    let done = beats.advance(t1 + 5 * HOUR, |_| {}).await.unwrap();
    assert_eq!((done.rounds["plugins"], done.rounds["archive"]), (1, 2), "{done:?}");
    let told = told.lock().unwrap().clone();
    let expected = [
        ("plugins", t1),
        ("plugins", t1 + 2 * HOUR),
        ("archive", t1 + 2 * HOUR),
        ("archive", t1 + 4 * HOUR),
        ("plugins", t1 + 5 * HOUR),
    ];
    assert_eq!(told.len(), expected.len(), "{told:?}");
    for ((name, t), (want, at)) in told.iter().zip(expected) {
        assert!(*name == want && *t >= at && *t < at + 5_000, "{told:?}");
    }

    // The start can be given as people write times.
    assert_eq!(clock::parse_start("2023-05-08T13:56:00Z"), Ok(start));
    assert_eq!(clock::parse_start("1683554160"), Ok(start));
    assert!(clock::parse_start("yesterday").unwrap_err().contains("RFC 3339"));
}
