//! The usage ledger, black box: a real daemon, the scripted vendor (which reports 10
//! prompt and 5 completion tokens per answer), the owner's price table.

mod common;

use common::api::{daemon_with_vendor, get, post, put_settings};
use serde_json::{Value, json};

/// Every answered call is in `GET /api/v1/usage` with its kind, tokens and cost, by day
/// and by kind, and the ledger survives `kill -9`.
#[test]
fn every_model_call_is_accounted_with_its_kind_tokens_and_cost() {
    // The prices in the same change as the source: one reload applies both, so the
    // first answer is priced (a separate change could land after the first turn).
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = common::Daemon::start(&data);
    let _v = common::vendor::start();
    let mut settings = common::vendor::source_settings("fake", &_v.url, 0);
    settings["core.llm.prices"] = json!({"*": {"input": 1.0, "output": 2.0}});
    put_settings(&d, settings);
    common::api::wait_sources(&d, 1);
    for i in 0..3 {
        let (status, body) = post(&d, "/api/v1/messages", json!({"text": format!("count me {i}")}));
        assert_eq!(status, 200, "{body}");
        // The answer says what it cost: 10 × $1/Mtok + 5 × $2/Mtok = 20 µ$.
        assert_eq!(body["usage"]["cost_micros"], 20, "{body}");
    }
    let (status, body) = post(&d, "/api/v1/llm/sources/fake/test", serde_json::Value::Null);
    assert_eq!(status, 200, "{body}");

    let by_kind = |d: &common::Daemon| get(d, "/api/v1/usage?by=kind");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let usage = loop {
        let u = by_kind(&d);
        if u["total"]["calls"] == 4 {
            break u;
        }
        assert!(std::time::Instant::now() < deadline, "not every call was recorded: {u}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let rows = usage["rows"].as_array().unwrap();
    let owner = rows.iter().find(|r| r["key"] == "owner_turn").expect("owner turns");
    assert_eq!(
        (
            owner["calls"].as_u64(),
            owner["input"].as_u64(),
            owner["output"].as_u64()
        ),
        (Some(3), Some(30), Some(15)),
        "{usage}"
    );
    // 30 × $1/Mtok + 15 × $2/Mtok.
    assert!((owner["cost_usd"].as_f64().unwrap() - 60e-6).abs() < 1e-12, "{owner}");
    assert_eq!(owner["estimated_calls"], 0, "the vendor's own counts: {owner}");
    assert!(
        rows.iter().any(|r| r["key"] == "selftest" && r["calls"] == 1),
        "{usage}"
    );
    let by_day = get(&d, "/api/v1/usage");
    assert_eq!(by_day["rows"].as_array().unwrap().len(), 1, "{by_day}");
    assert_eq!(by_day["total"]["calls"], 4);
    let bad = d.client().get(d.url("/api/v1/usage?from=2026-99-01")).send().unwrap();
    assert_eq!(bad.status().as_u16(), 400);

    d.kill9();
    let d = common::Daemon::start(&data);
    assert_eq!(by_kind(&d)["total"]["calls"], 4, "the ledger survives kill -9");
}

/// A daily token budget is enforced before the call: once the day's limit cannot hold
/// the next call, the owner's turn is answered with the limit, the setting and when it
/// resets, and no request reaches the vendor.
#[test]
fn a_spent_daily_budget_answers_without_calling_the_vendor() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "within budget"}));
    assert_eq!(status, 200, "{body}");
    put_settings(&d, json!({"core.llm.budget.daily_tokens": 20}));
    common::api::wait_for(&d, "/api/v1/llm/sources", "the budget applied", |s| {
        s["budget"]["daily_tokens"] == 20 && s["budget"]["spent_today"] == 15
    });
    let calls = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "over budget"}));
    assert_eq!(status, 429, "a limit, not a failed vendor: {body}");
    let text = body.to_string();
    assert!(
        text.contains("daily token budget")
            && text.contains("core.llm.budget.daily_tokens")
            && text.contains("resets in"),
        "{body}"
    );
    assert_eq!(
        v.calls.load(std::sync::atomic::Ordering::SeqCst),
        calls,
        "a call reached the vendor"
    );
    // Lifting the limit lets the next turn through.
    put_settings(&d, json!({"core.llm.budget.daily_tokens": 0}));
    common::api::wait_for(&d, "/api/v1/llm/sources", "the budget lifted", |s| {
        s["budget"]["daily_tokens"] == 0
    });
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "budget lifted"}));
    assert_eq!(status, 200, "{body}");
}

/// A monthly limit holds across a restart: the month's spending is read back from the
/// ledger at start, so a new process does not hand the month's budget out again.
#[test]
fn a_spent_monthly_budget_stays_spent_after_a_restart() {
    let (_dir, data, d, v) = daemon_with_vendor();
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "within the month"}));
    assert_eq!(status, 200, "{body}");
    put_settings(&d, json!({"core.llm.budget.monthly_tokens": 20}));
    d.kill9();
    let d = common::Daemon::start(&data);
    common::api::wait_sources(&d, 1);
    common::api::wait_for(&d, "/api/v1/llm/sources", "the month's spending read back", |s| {
        s["budget"]["monthly_tokens"] == 20 && s["budget"]["spent_month"] == 15
    });
    let calls = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "over the month"}));
    assert_eq!(status, 429, "{body}");
    let text = body.to_string();
    assert!(
        text.contains("monthly token budget")
            && text.contains("core.llm.budget.monthly_tokens")
            && text.contains("1st of the month"),
        "{body}"
    );
    assert_eq!(
        v.calls.load(std::sync::atomic::Ordering::SeqCst),
        calls,
        "a call reached the vendor"
    );
}

/// Every cell of the limits matrix is one setting and survives a restart: a source's
/// own month of dollars, spent before the restart, is read back from the ledger, so the
/// next turn skips that source for the cheaper one, and the status lists the cell with
/// what it spent.
#[test]
fn a_sources_month_of_money_stays_spent_after_a_restart_and_the_cheaper_source_answers() {
    let (_dir, data, d, dear) = daemon_with_vendor();
    // The prices with a change the status shows, so the LLM actor has them before
    // the first call (one reload applies both).
    put_settings(
        &d,
        json!({"core.llm.prices": {"fake-model": {"input": 1000, "output": 1000}, "cheap-model": {"input": 1, "output": 1}},
               "core.llm.sources.fake.context_window": 64000}),
    );
    common::api::wait_for(&d, "/api/v1/llm/sources", "the prices applied", |s| {
        s["sources"][0]["context_window"] == 64000
    });
    // 10 + 5 tokens at $1,000/Mtok: $0.015 this month on the dear source.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "a dear answer"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["cost_micros"], 15_000, "{body}");
    d.kill9();
    let d = common::Daemon::start(&data);
    let cheap = common::vendor::start();
    let mut cheap_source = common::vendor::source_settings("cheap", &cheap.url, -1);
    cheap_source["core.llm.sources.cheap.model"] = json!("cheap-model");
    cheap_source["core.llm.sources.fake.monthly_usd"] = json!(0.01);
    put_settings(&d, cheap_source);
    common::api::wait_sources(&d, 2);
    let status = common::api::wait_for(&d, "/api/v1/llm/sources", "the source's month read back", |s| {
        s["budget"]["limits"]
            .as_array()
            .is_some_and(|rows| rows.iter().any(|r| r["setting"] == "core.llm.sources.fake.monthly_usd"))
    });
    let row = status["budget"]["limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["setting"] == "core.llm.sources.fake.monthly_usd")
        .unwrap()
        .clone();
    assert_eq!(
        (
            row["scope"].as_str(),
            row["period"].as_str(),
            row["unit"].as_str(),
            row["limit"].as_f64(),
            row["spent"].as_f64()
        ),
        (
            Some("source:fake"),
            Some("month"),
            Some("micros"),
            Some(0.01),
            Some(0.015)
        ),
        "{row}"
    );
    let dear_calls = dear.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "the cheap one, please"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        dear.calls.load(std::sync::atomic::Ordering::SeqCst),
        dear_calls,
        "the dear source was skipped"
    );
    assert_eq!(cheap.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// A money limit is checked per source at its own price: the expensive primary's worst
/// case no longer fits the day's dollars, so the cheap source answers — the owner's
/// turn goes on, and the owner hears of the limit once, not once per call. A source's
/// own daily tokens skip it the same way.
#[test]
fn at_a_money_limit_the_cheaper_source_answers_and_the_owner_is_told_once() {
    let (_dir, _data, d, dear) = daemon_with_vendor();
    let cheap = common::vendor::start();
    let mut cheap_source = common::vendor::source_settings("cheap", &cheap.url, -1);
    cheap_source["core.llm.sources.cheap.model"] = json!("cheap-model");
    put_settings(&d, cheap_source);
    common::api::wait_sources(&d, 2);
    put_settings(
        &d,
        json!({
            "core.llm.prices": {"fake-model": {"input": 1000, "output": 1000}, "cheap-model": {"input": 1, "output": 1}},
            "core.llm.budget.daily_usd": 1.0,
        }),
    );
    common::api::wait_for(&d, "/api/v1/llm/sources", "the money limit applied", |s| {
        s["budget"]["daily_usd"] == 1.0
    });
    let events = common::api::listen(&d);
    for text in ["first turn under the money limit", "second turn under the money limit"] {
        let (status, body) = post(&d, "/api/v1/messages", json!({ "text": text }));
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        dear.calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the dear source was skipped"
    );
    assert_eq!(cheap.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    let by_source = get(&d, "/api/v1/usage?by=source");
    let rows = by_source["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["key"] == "cheap"), "{by_source}");
    let notices: Vec<Value> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| n == "budget_reached")
        .map(|(_, v)| v.clone())
        .collect();
    assert_eq!(notices.len(), 1, "told once: {notices:?}");
    assert_eq!(notices[0]["setting"], "core.llm.budget.daily_usd", "{notices:?}");
    assert!(
        notices[0]["message"]
            .as_str()
            .unwrap()
            .contains("daily money budget cannot cover"),
        "{notices:?}"
    );

    // The cheap source's own day: once it cannot hold a call, no source can — the turn
    // is answered with that limit, no vendor reached.
    put_settings(&d, json!({"core.llm.sources.cheap.daily_tokens": 40}));
    common::api::wait_sources(&d, 2);
    let calls = cheap.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "over the cheap source's day"}));
    assert_eq!(status, 429, "{body}");
    assert!(
        body.to_string().contains("cheap: the daily token budget")
            && body.to_string().contains("core.llm.sources.cheap.daily_tokens"),
        "{body}"
    );
    assert_eq!(cheap.calls.load(std::sync::atomic::Ordering::SeqCst), calls);
    assert_eq!(dear.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// The owner hears of a limit where they are: the chat bridge their last input came
/// from gets the notice (once), beside the WebUI.
#[test]
fn a_budget_notice_reaches_the_owners_chat_bridge() {
    let (_dir, _data, d, _v) = common::api::daemon_with_plugins(&["bridge"], &["bridge"]);
    let body = json!({"text": "hello from my phone", "profile": "owner", "channel": "bridge"});
    let (status, r) = post(&d, "/api/v1/plugins/bridge/api/inject", body);
    assert_eq!(status, 200, "{r}");
    common::api::wait_for(&d, "/api/v1/usage?by=kind", "the bridged turn answered", |u| {
        u["total"]["calls"] == 1
    });
    put_settings(&d, json!({"core.llm.budget.daily_tokens": 20}));
    common::api::wait_for(&d, "/api/v1/llm/sources", "the budget applied", |s| {
        s["budget"]["daily_tokens"] == 20
    });
    for text in ["over the day's budget", "again over the day's budget"] {
        let (status, _) = post(&d, "/api/v1/messages", json!({ "text": text }));
        assert_eq!(status, 429);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let notices = loop {
        let (_, r) = post(&d, "/api/v1/plugins/bridge/api/outbox", json!({}));
        let notices: Vec<Value> = r["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["payload"].as_str().is_some_and(|p| p.contains("daily token budget")))
            .cloned()
            .collect();
        if !notices.is_empty() {
            break notices;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no notice reached the bridge: {r}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (_, r) = post(&d, "/api/v1/plugins/bridge/api/outbox", json!({}));
    let count = r["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["payload"].as_str().is_some_and(|p| p.contains("daily token budget")))
        .count();
    assert_eq!(count, 1, "told once, not per refused turn: {r}");
    assert!(
        notices[0]["payload"]
            .as_str()
            .unwrap()
            .contains("core.llm.budget.daily_tokens")
    );
}

/// Background work pinned to its own source uses it alone: the merge heartbeat's task
/// goes to the cheap source, never to the owner's, and the ledger says so.
#[test]
fn background_work_pinned_to_a_cheap_source_never_reaches_the_owners() {
    let (_dir, _data, d, main) = daemon_with_vendor();
    let cheap = common::vendor::start();
    put_settings(&d, common::vendor::source_settings("cheap", &cheap.url, -1));
    common::api::wait_sources(&d, 2);
    put_settings(&d, json!({"core.llm.background_source": "cheap"}));
    let commit = r#"call-tool memory_commit {"triples":[{"subject":"machine learning","relation":"is","object":"statistics"},{"subject":"machine learnings","relation":"needs","object":"data"}]}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": commit }));
    assert_eq!(status, 200, "{body}");
    let main_calls = main.calls.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        cheap.calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the owner's turn went to the main source"
    );

    let (status, round) = post(&d, "/api/v1/heartbeats/merge/run", json!({}));
    assert_eq!((status, round["items"].as_u64()), (200, Some(1)), "{round}");
    // The merge task among what the cheap source received (other background work,
    // pinned there too, may reach it first on a loaded machine).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !cheap
        .all
        .lock()
        .unwrap()
        .iter()
        .any(|r| r.to_string().contains("entity_merge"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the merge task never reached the cheap source; it received: {:?}",
            cheap.all.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        main.calls.load(std::sync::atomic::Ordering::SeqCst),
        main_calls,
        "background work reached the owner's source"
    );
    let by_source = get(&d, "/api/v1/usage?by=source&kind=heartbeat");
    let rows = by_source["rows"].as_array().unwrap();
    assert!(rows.len() == 1 && rows[0]["key"] == "cheap", "{by_source}");
}
