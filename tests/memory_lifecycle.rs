//! Memory that never forgets (issue 28), through the user's path: a history imported
//! through `POST /api/v1/memory/import`, time driven on a virtual clock
//! (`homed --virtual-clock`, `POST /api/v1/clock/advance`) and every heartbeat run through
//! `POST /api/v1/heartbeats/{name}/run`, then the questions asked through
//! `POST /api/v1/messages`: the evidence must reach the request the vendor receives as
//! it does on a second daemon that got the same history and no heartbeats at all.
//! Also: an idle daemon makes no model call in a simulated month, and a document the
//! owner deletes leaves no passage, vector or derived fact behind.

mod common;

use std::time::Duration;

use common::api::{get, post, put_settings, wait_sources};
use common::{Daemon, vendor};
use serde_json::{Value, json};

const DAY: i64 = 86_400;
/// 2025-01-06 00:00 UTC: the history is about two years before the tests run.
const DAY0: i64 = 1_736_121_600;

/// The last turn of the history (Unix seconds).
const LAST: i64 = DAY0 + 11 * 7 * DAY + 40 * 60;

/// Facts said once, early, each with the question that needs it and the words that
/// must then be in the prompt.
const FACTS: &[(&str, &str, &str, &str)] = &[
    (
        "Caroline",
        "I adopted a beagle named Biscuit from the shelter on Elm Street.",
        "What is the name of Caroline's dog?",
        "Biscuit",
    ),
    (
        "Melanie",
        "My sister Ingrid moved to Tromsø to study marine biology.",
        "Where did Melanie's sister move to?",
        "Tromsø",
    ),
    (
        "Caroline",
        "我在杭州的一家茶馆学会了做龙井虾仁。",
        "Caroline 在哪里学会做龙井虾仁?",
        "龙井虾仁",
    ),
    (
        "Melanie",
        "I finally finished the pottery course at the Larkspur studio, my first vase cracked.",
        "Which studio did Melanie take the pottery course at?",
        "Larkspur",
    ),
];

/// Twelve sessions a week apart, 40 turns each; the facts are said in the first one and
/// never again, the rest is varied small talk.
fn history() -> String {
    const TALK: [&str; 12] = [
        "the weather was grey and windy all week",
        "we watched a documentary about volcanoes",
        "the bus schedule changed again this month",
        "I tried a new recipe with chickpeas and lemon",
        "the neighbours are repainting their fence",
        "my phone battery barely lasts a day now",
        "we went for a long walk by the river",
        "the library extended its opening hours",
        "I started learning a few chords on the guitar",
        "the market had strawberries early this year",
        "work has been busy with quarterly reports",
        "we played board games until midnight",
    ];
    let mut lines = Vec::new();
    for s in 0..12i64 {
        for t in 0..40i64 {
            let speaker = if t % 2 == 0 { "Caroline" } else { "Melanie" };
            let text = match FACTS.get(t as usize) {
                Some((who, fact, _, _)) if s == 0 => {
                    lines.push(json!({"time": DAY0 + s * 7 * DAY + t * 60, "speaker": who, "text": fact}));
                    continue;
                }
                _ => format!(
                    "Session {s}, turn {t}: {} ({}).",
                    TALK[((s + t) % 12) as usize],
                    ["honestly", "as usual", "for once", "again"][(t % 4) as usize]
                ),
            };
            lines.push(json!({"time": DAY0 + s * 7 * DAY + t * 60, "speaker": speaker, "text": text}));
        }
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn import(d: &Daemon, body: String) -> Value {
    let r = d
        .client()
        .post(d.url("/api/v1/memory/import"))
        .timeout(Duration::from_secs(300))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().unwrap()
}

/// A daemon with the fake vendor as its source, on a virtual clock starting at `start`
/// (Unix seconds) when given.
fn daemon(clock: Option<i64>) -> (tempfile::TempDir, Daemon, vendor::Vendor) {
    let dir = tempfile::tempdir().unwrap();
    let start = clock.map(|s| s.to_string());
    let env: Vec<(&str, &str)> = start.iter().map(|s| ("HOMED_VIRTUAL_CLOCK", s.as_str())).collect();
    let d = Daemon::start_env(&dir.path().join("data"), Some("info"), &env);
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    // What is measured here is memory; a year of daily backups (each seconds long with
    // this much memory) is tests/backup.rs's, on a smaller data dir.
    put_settings(&d, json!({"core.backup.keep": 0}));
    wait_sources(&d, 1);
    (dir, d, v)
}

fn advance(d: &Daemon, by: &str) -> Value {
    let (status, body) = post(d, "/api/v1/clock/advance", json!({ "by": by }));
    assert_eq!(status, 200, "{body}\n{}", d.log_text());
    body
}

/// Runs every heartbeat once through the operator's route.
fn run_every_heartbeat(d: &Daemon) {
    for name in ["distill", "rules", "archive", "merge", "review"] {
        let (status, body) = post(d, &format!("/api/v1/heartbeats/{name}/run"), json!({}));
        assert_eq!(status, 200, "{name}: {body}");
        assert!(body["error"].is_null(), "{name}: {body}");
    }
}

/// Waits until the agent has no task running or queued (merge and review hand it work).
fn wait_idle(d: &Daemon) {
    common::api::wait_for(d, "/api/v1/tasks", "the agent idle", |v| {
        v["running"].is_null() && v["ready"].as_array().is_none_or(|a| a.is_empty())
    });
}

/// Asks `question` and answers the text of the request the vendor received for it.
fn asked(d: &Daemon, v: &vendor::Vendor, question: &str) -> String {
    let (status, body) = post(d, "/api/v1/messages", json!({ "text": question }));
    assert_eq!(status, 200, "{body}");
    v.last.lock().unwrap()["messages"].to_string()
}

#[test]
fn a_year_of_heartbeats_loses_no_evidence_that_a_fresh_import_finds() {
    // The control: the same history, no time, no heartbeats.
    let (_c, fresh, fv) = daemon(None);
    // The subject: on a virtual clock starting an hour after the last session.
    let (_l, lived, lv) = daemon(Some(LAST + 3600));
    let (status, refused) = post(&fresh, "/api/v1/clock/advance", json!({"by": "1d"}));
    assert_eq!(status, 409, "the wall clock is not driven: {refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("--virtual-clock"),
        "{refused}"
    );
    for d in [&fresh, &lived] {
        let r = import(d, history());
        assert_eq!(r["imported"], 480, "{r}");
        assert!(r["archived"].as_u64().unwrap() >= 400, "most went into documents: {r}");
    }
    // A year passes for one of them: every heartbeat runs as often as its interval says.
    let calls_before = lv.calls.load(std::sync::atomic::Ordering::SeqCst);
    let mut rounds = json!({});
    for _ in 0..12 {
        let step = advance(&lived, "30d");
        for (k, n) in step["rounds"].as_object().unwrap() {
            rounds[k] = json!(rounds[k].as_u64().unwrap_or(0) + n.as_u64().unwrap());
        }
        assert_eq!(step["failed"], 0, "{step}\n{}", lived.log_text());
    }
    // 360 days: distill every 30 min, the rules every 10 min, archive every 60 min.
    assert!(rounds["distill"].as_u64().unwrap() >= 17_000, "{rounds}");
    assert!(rounds["archive"].as_u64().unwrap() >= 8_000, "{rounds}");
    assert!(rounds["merge"].as_u64().unwrap() >= 1, "{rounds}");
    // And every heartbeat a few more times by hand, as an operator would.
    for _ in 0..3 {
        run_every_heartbeat(&lived);
    }
    wait_idle(&lived);
    let status = get(&lived, "/api/v1/memory/status");
    let archive = &status["heartbeats"]["archive"];
    assert!(archive["error"].is_null(), "{status}");
    // The documents were distilled into the graph, and all of them are still there.
    let fresh_docs = get(&fresh, "/api/v1/memory/status")["documents"].as_u64().unwrap();
    assert_eq!(
        status["documents"].as_u64().unwrap(),
        fresh_docs,
        "no document deleted: {status}"
    );
    assert!(
        status["graph"]["relation_count"].as_u64().unwrap() >= 1,
        "the archive put facts into the graph: {status}"
    );
    // The heartbeats asked the model only about material there was, a bounded number
    // of times (merge proposals are made once per pair, reviews once per relation).
    let spent = lv.calls.load(std::sync::atomic::Ordering::SeqCst) - calls_before;
    let relations = status["graph"]["relations_total"].as_u64().unwrap() as usize;
    assert!(spent <= relations + 50, "{spent} model calls for {relations} relations");

    for (_, _, question, evidence) in FACTS {
        let before = asked(&fresh, &fv, question);
        let after = asked(&lived, &lv, question);
        assert!(
            before.contains(evidence),
            "the fresh import finds {evidence:?} for {question:?}: {before}"
        );
        assert!(
            after.contains(evidence),
            "after a simulated year {evidence:?} still reaches the prompt for {question:?}: {after}"
        );
    }
}

#[test]
fn an_idle_daemon_makes_no_model_call_in_a_simulated_month() {
    let (_dir, d, v) = daemon(Some(LAST + 3600));
    // Some memory to maintain; the heartbeats work on it while it is new (the archive
    // after three idle days, then the review of the facts it found) ...
    let r = import(&d, history());
    assert_eq!(r["imported"], 480, "{r}");
    for _ in 0..3 {
        advance(&d, "5d");
        wait_idle(&d);
    }
    // ... then nothing happens for thirty days.
    let before = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    let step = advance(&d, "30d");
    wait_idle(&d);
    assert!(step["rounds"]["merge"].as_u64().unwrap() >= 100, "{step}");
    assert!(step["rounds"]["review"].as_u64().unwrap() >= 100, "{step}");
    assert_eq!(
        v.calls.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "no new material: no heartbeat asked the model anything ({step})"
    );
}

#[test]
fn a_document_the_owner_deletes_leaves_no_passage_vector_or_fact() {
    let (dir, d, v) = daemon(Some(LAST + 3600));
    let r = import(&d, history());
    assert_eq!(r["imported"], 480, "{r}");
    // Four days later the archive heartbeat has distilled the documents into the graph.
    let step = advance(&d, "4d");
    assert!(step["rounds"]["archive"].as_u64().unwrap() >= 1, "{step}");
    let graph = get(&d, "/api/v1/memory/graph?q=Ingrid");
    assert!(graph.to_string().contains("Tromsø"), "{graph}");
    // The document holding the first session.
    let docs = get(
        &d,
        "/api/v1/memory/documents?q=sister Ingrid moved to Tromsø marine biology",
    );
    // The conversation's document (the graph's snapshot of Ingrid may rank above it).
    let doc = docs["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["source"] != "graph_snapshot")
        .unwrap_or_else(|| panic!("{docs}"))
        .clone();
    assert!(doc["content"].as_str().unwrap().contains("Ingrid"), "{docs}");
    let id = doc["id"].as_str().unwrap().to_owned();
    let db = dir.path().join("data/memory/memory.db");
    let count = |sql: &str| -> i64 {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        c.query_row(sql, [&id], |r| r.get(0)).unwrap()
    };
    assert!(count("SELECT COUNT(*) FROM passages WHERE doc_id = ?1") >= 1);

    let r = d
        .client()
        .delete(d.url(&format!("/api/v1/memory/documents/{id}")))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().unwrap();
    assert!(
        body["facts"].as_u64().unwrap() >= 1,
        "the facts derived from it went with it: {body}"
    );
    assert_eq!(count("SELECT COUNT(*) FROM documents WHERE id = ?1"), 0);
    assert_eq!(count("SELECT COUNT(*) FROM passages WHERE doc_id = ?1"), 0);
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM vectors WHERE kind = 'passage' AND ref NOT IN (SELECT CAST(id AS TEXT) FROM passages) AND ?1 = ?1"
        ),
        0,
        "no vector without its passage"
    );
    let graph = rusqlite::Connection::open(dir.path().join("data/memory/graph.db")).unwrap();
    let left: i64 = graph
        .query_row(
            "SELECT COUNT(*) FROM relations WHERE session_id = 'doc:' || ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0, "no fact derived from the document is left");
    let graph = get(&d, "/api/v1/memory/graph?q=Ingrid");
    assert!(!graph.to_string().contains("Tromsø"), "{graph}");
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "Where did Melanie's sister Ingrid move to?"}),
    );
    assert_eq!(status, 200, "{body}");
    let prompt = v.last.lock().unwrap()["messages"].to_string();
    assert!(
        !prompt.contains("Tromsø"),
        "the deleted conversation does not come back through any tier: {prompt}"
    );
}

#[test]
fn upkeep_never_spends_more_model_calls_a_day_than_its_budget() {
    let (_dir, d, v) = daemon(Some(LAST + 3600));
    put_settings(&d, json!({"core.agent.maintenance_daily_tasks": 2}));
    let r = import(&d, history());
    assert_eq!(r["imported"], 480, "{r}");
    let calls = || v.calls.load(std::sync::atomic::Ordering::SeqCst);
    let mut per_day = Vec::new();
    for _ in 0..10 {
        let before = calls();
        advance(&d, "1d");
        wait_idle(&d);
        per_day.push(calls() - before);
    }
    assert!(per_day.iter().all(|n| *n <= 2), "at most 2 a day: {per_day:?}");
    assert!(
        per_day.iter().sum::<usize>() >= 2,
        "the budget is used when there is work: {per_day:?}"
    );
    let budget = &get(&d, "/api/v1/memory/status")["heartbeats"]["budget"];
    assert_eq!(budget["daily_tasks"], 2, "{budget}");
    assert!(budget["used_today"].as_u64().unwrap() <= 2, "{budget}");
}

/// A busy day: 50 owner turns through HTTP, each teaching the memory something, then the
/// day's heartbeats. The background model calls the ledger counts for the day stay
/// within `core.agent.maintenance_daily_tasks` whatever the material.
#[test]
fn a_day_of_fifty_owner_turns_costs_at_most_the_configured_background_calls() {
    let (_dir, d, _v) = daemon(Some(LAST + 3600));
    put_settings(&d, json!({"core.agent.maintenance_daily_tasks": 3}));
    const PEOPLE: [&str; 10] = [
        "Alice", "Bob", "Carol", "Dan", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy",
    ];
    for i in 0..50 {
        let (a, b) = (PEOPLE[i % 10], PEOPLE[(i * 3 + 1) % 10]);
        let text = format!(
            r#"call-tool memory_commit {{"triples":[{{"subject":"{a}","relation":"knows","object":"{b} {i}"}},{{"subject":"{a}s","relation":"likes","object":"topic {i}"}}]}}"#
        );
        let (status, body) = post(&d, "/api/v1/messages", json!({ "text": text }));
        assert_eq!(status, 200, "{body}");
    }
    let owner_calls = get(&d, "/api/v1/usage?by=kind")["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "owner_turn")
        .map_or(0, |r| r["calls"].as_u64().unwrap());
    assert_eq!(owner_calls, 100, "two model calls per turn (the tool, then the answer)");
    let background = |d: &Daemon| {
        get(d, "/api/v1/usage?by=kind&from=2000-01-01&to=2100-01-01")["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == "heartbeat")
            .map_or(0, |r| r["calls"].as_u64().unwrap())
    };
    let mut per_day = Vec::new();
    for _ in 0..3 {
        let before = background(&d);
        advance(&d, "1d");
        wait_idle(&d);
        per_day.push(background(&d) - before);
    }
    // The cap is on the tasks handed out in a UTC day of the kernel clock. A jump of the
    // virtual clock runs a day's rounds first and their calls after it, so the ledger
    // stamps some of a day's tasks with the next day: what the cap bounds is the total
    // over the days the jumps spanned (four UTC days: the first jump starts mid-day).
    let by_day: Vec<(String, u64)> =
        get(&d, "/api/v1/usage?by=day&kind=heartbeat&from=2000-01-01&to=2100-01-01")["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["key"].as_str().unwrap().to_owned(), r["calls"].as_u64().unwrap()))
            .collect();
    let total: u64 = by_day.iter().map(|(_, n)| n).sum();
    eprintln!(
        "MEASURE background model calls after 50 owner turns: per 24 h advanced {per_day:?}, per ledger day {by_day:?}, {total} in all (cap 3 tasks a UTC day, 4 days spanned)"
    );
    assert!(total <= 3 * 4, "{by_day:?}");
    assert!(total >= 1, "the cap is used when there is work: {by_day:?}");
    let budget = &get(&d, "/api/v1/memory/status")["heartbeats"]["budget"];
    assert!(budget["used_today"].as_u64().unwrap() <= 3, "{budget}");
}
