//! Subprocess plugins on the kernel's clock (issue 28, "time you can drive"): on a
//! daemon started with `--virtual-clock`, the bundled timer and memo plugins keep the
//! kernel's time, and `POST /api/v1/clock/advance` fires the reminders due inside the
//! advanced span — each at its simulated moment, before the advance answers — while
//! the test waits for none of that time.
//!
//! What the advance guarantees is read right after it answers, with nothing polled:
//! the scheduler's count of L3 interrupts (the reminders' injections were accepted
//! before the plugins acknowledged the clock), the timers left, and the memo's record
//! of the delivery. Only the model's turns on those reminders are waited for.

mod common;

use std::time::{Duration, Instant};

use common::api::{call_tool, daemon_with_vendor_env, get, post, wait_for};
use common::{Daemon, vendor};
use serde_json::{Value, json};

/// 2001-09-09T01:46:40Z: far from any wall clock, so a wall-clock stamp cannot pass
/// for a virtual one.
const START_MS: i64 = 1_000_000_000_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// A daemon on a virtual clock at [`START_MS`] with the fake model, once `plugin` has
/// registered `tools` tools.
fn daemon(plugin: &str, tools: usize) -> (tempfile::TempDir, Daemon, vendor::Vendor) {
    let start = (START_MS / 1000).to_string();
    let (dir, _data, d, v) = daemon_with_vendor_env(&[("HOMED_VIRTUAL_CLOCK", start.as_str())]);
    wait_for(&d, "/api/v1/plugins", &format!("{plugin} running"), |v| {
        v["plugins"].as_array().is_some_and(|ps| {
            ps.iter().any(|p| {
                p["name"] == plugin
                    && p["state"] == "running"
                    && p["tools"].as_array().is_some_and(|t| t.len() == tools)
            })
        })
    });
    let clock = get(&d, "/api/v1/clock");
    assert_eq!(clock["virtual"], true, "{clock}");
    assert_eq!(clock["heartbeats"][0], "plugins", "the plugins are told first: {clock}");
    (dir, d, v)
}

fn advance(d: &Daemon, by: &str) -> Value {
    let (status, body) = post(d, "/api/v1/clock/advance", json!({ "by": by }));
    assert_eq!(status, 200, "{body}\nlog:\n{}", d.log_text());
    assert_eq!(body["failed"], 0, "{body}\nlog:\n{}", d.log_text());
    body
}

/// L3 interrupts the scheduler has registered (the reminders are L3).
fn reminders_raised(d: &Daemon) -> u64 {
    let tasks = get(d, "/api/v1/tasks");
    tasks["stats"]["interrupts_by_level"][2]
        .as_u64()
        .unwrap_or_else(|| panic!("{tasks}"))
}

/// Waits until some request the model received holds a message `content`.
fn wait_model_saw(d: &Daemon, v: &vendor::Vendor, content: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = v.all.lock().unwrap().iter().any(|r| {
            r["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["content"] == content))
        });
        if seen {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{content:?} never reached the model\nlog:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_advance_fires_the_timers_due_inside_it_at_their_moments() {
    let (_dir, d, v) = daemon("timer", 3);
    assert_eq!(
        call_tool(&d, "timer_set", json!({"after": "1h", "message": "tea time"})),
        "timer #1 set: reminder in 1h"
    );
    assert_eq!(
        call_tool(
            &d,
            "timer_set",
            json!({"after": "30m", "message": "stretch", "repeat_every": "1h"})
        ),
        "timer #2 set: first reminder in 30m, then every 1h"
    );
    assert_eq!(
        call_tool(&d, "timer_set", json!({"after": "5h", "message": "call home"})),
        "timer #3 set: reminder in 5h"
    );
    assert_eq!(reminders_raised(&d), 0, "nothing fires while the clock stands");

    // Two hours: tea at 1h, stretch at 30m and 1h30m — three moments the advance stopped
    // at, each reminder in the kernel before the answer.
    let step = advance(&d, "2h");
    assert_eq!(step["rounds"]["plugins"], 3, "{step}");
    assert_eq!(reminders_raised(&d), 3, "{step}");
    for text in [
        "[Interrupt] ⏰ Reminder #1: tea time",
        "[Interrupt] ⏰ Reminder #2: stretch",
    ] {
        wait_model_saw(&d, &v, text);
    }
    let left = call_tool(&d, "timer_list", json!({}));
    let ids: Vec<&str> = left.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(ids, ["#2", "#3"], "the one-shot tea timer is gone: {left}");
    assert!(left.contains("every 1h: stretch"), "{left}");

    // Cancelled: it fires no more; the 5h timer fires at its moment in the next advance.
    assert_eq!(call_tool(&d, "timer_cancel", json!({"id": 2})), "timer #2 cancelled");
    let step = advance(&d, "4h");
    assert_eq!(step["rounds"]["plugins"], 1, "{step}");
    assert_eq!(reminders_raised(&d), 4, "{step}");
    wait_model_saw(&d, &v, "[Interrupt] ⏰ Reminder #3: call home");
    // (Other words than the first listing's: the intake drops a repeat within 10 s.)
    assert_eq!(call_tool(&d, "timer_list", json!({"again": true})), "no timers");
}

/// The page's view of the notes: the memo plugin's `list` API.
fn memo_notes(d: &Daemon) -> Vec<Value> {
    let (status, out) = post(d, "/api/v1/plugins/memo/api/list", json!({"include_done": true}));
    assert_eq!(status, 200, "{out}");
    out["result"]["notes"].as_array().unwrap().clone()
}

#[test]
fn memo_stamps_notes_with_the_kernels_time_and_an_advance_delivers_a_reminder_a_day_ahead() {
    let (_dir, d, v) = daemon("memo", 6);
    let saved = call_tool(&d, "memo_add", json!({"text": "pay the rent", "remind_at": "1d"}));
    assert!(
        saved.starts_with("note #1 saved; reminder at ") && saved.ends_with("(in 1d 0h)"),
        "{saved}"
    );
    let note = memo_notes(&d)[0].clone();
    let created = note["created_ms"].as_i64().unwrap();
    assert!(
        (START_MS..START_MS + 6 * HOUR).contains(&created),
        "stamped with the kernel's virtual time, not the wall clock: {note}"
    );
    assert_eq!(note["remind_at_ms"].as_i64(), Some(created + DAY), "{note}");
    assert_eq!(reminders_raised(&d), 0);

    let step = advance(&d, "2d");
    // Delivered and recorded before the advance answered...
    assert_eq!(step["rounds"]["plugins"], 1, "{step}");
    assert_eq!(reminders_raised(&d), 1, "{step}");
    let note = memo_notes(&d)[0].clone();
    let (due, reminded) = (
        note["remind_at_ms"].as_i64().unwrap(),
        note["reminded_ms"]
            .as_i64()
            .unwrap_or_else(|| panic!("not recorded: {note}")),
    );
    // ...at its own moment, a day before the advance ended.
    assert!(
        reminded >= due && reminded < due + HOUR,
        "reminded at {reminded}, due {due}: {note}"
    );
    assert!(step["now_ms"].as_i64().unwrap() >= due + DAY - HOUR, "{step}");
    wait_model_saw(&d, &v, "[Interrupt] 📝 Reminder of note #1: pay the rent");

    // A note taken after the advance carries the advanced time.
    assert_eq!(
        call_tool(&d, "memo_add", json!({"text": "the rent is paid"})),
        "note #2 saved"
    );
    let newest = memo_notes(&d)[0].clone();
    assert!(
        newest["created_ms"].as_i64().unwrap() >= step["now_ms"].as_i64().unwrap(),
        "{newest} {step}"
    );
}
