//! Sub-agents end to end (spec §6): a real daemon, the fake vendor on loopback, and
//! every assertion on what crossed HTTP — the replies, the requests the vendor got
//! (told apart by their last input: a helper's task text, the parent's notice), and
//! the supervision tree of `GET /api/v1/actors`.

mod common;

use common::api::{ask, daemon_with_vendor, daemon_with_vendor_env, get, listen, wait_for};
use common::vendor::{Stamp, Vendor};
use serde_json::Value;

/// The ids of every actor in the tree.
fn actor_ids(d: &common::Daemon) -> Vec<String> {
    get(d, "/api/v1/actors")["actors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["id"].as_str().map(str::to_owned))
        .collect()
}

/// The chat requests whose input (the last message: a user message, or the system
/// message of an interrupt) contains `needle` — not counting the parent's requests
/// that only quote it in a `call-tool` line.
fn requests_for(v: &Vendor, needle: &str) -> Vec<Value> {
    v.all
        .lock()
        .unwrap()
        .iter()
        .filter(|body| {
            body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                // (Not the parent's own tool request that merely quotes the text.)
                .is_some_and(|t| t.contains(needle) && (needle.contains("call-tool") || !t.contains("call-tool")))
        })
        .cloned()
        .collect()
}

/// Whether a request came from a resident (its system prompt carries its task).
fn from_resident(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("[Task]"))
}

/// Waits (60 s at most) until the vendor got a request whose input contains `prefix`.
fn wait_request(d: &common::Daemon, v: &Vendor, prefix: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if let Some(r) = requests_for(v, prefix).pop() {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no request for `{prefix}` reached the vendor; log:\n{}", d.log_text());
}

fn stamps_of<'a>(stamps: &'a [Stamp], text: &str, answered: bool) -> Vec<&'a Stamp> {
    stamps
        .iter()
        .filter(|s| s.text == text && s.answered == answered)
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn two_helpers_run_in_parallel_announce_their_end_and_deliver_their_result_once() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    common::api::offer_every_tool(&d);
    let events = listen(&d);
    // The parent's model starts two helpers in one parallel group; each helper's model
    // takes a while (the vendor's `slow` script) and answers `slow done: <name>`.
    let plan = r#"{"steps":[{"parallel":[{"tool":"spawn_child","args":{"task":"slow 1500 alpha"}},{"tool":"spawn_child","args":{"task":"slow 1500 beta","max_turns":99}}]}]}"#;
    let reply = ask(&d, &format!("call-tool seq_run {plan}"));
    assert!(
        reply.contains("child_1") && reply.contains("child_2"),
        "both helpers started: {reply}"
    );
    assert!(
        reply.contains("at most 30 tool rounds"),
        "max_turns clamped to 30: {reply}"
    );

    // Each helper was a supervised subtree of the agent while it ran (the tree's own
    // lifecycle events say so, however fast it ended).
    let started: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _)| name == "actor_started")
        .filter_map(|(_, e)| e["id"].as_str().map(str::to_owned))
        .collect();
    for n in [1, 2] {
        for a in ["task", "context"] {
            let id = format!("kernel/agent/children/child_{n}/{a}");
            assert!(started.contains(&id), "{id} never started: {started:?}");
        }
    }

    // The parent hears of each end through a self message (its own later turn).
    let notice_a = wait_request(&d, &v, "Helper child_1 finished");
    let notice_b = wait_request(&d, &v, "Helper child_2 finished");
    let text = |r: &Value| r["messages"].to_string();
    assert!(text(&notice_a).contains("slow done: alpha"), "{notice_a}");
    assert!(text(&notice_b).contains("slow done: beta"), "{notice_b}");

    // Overlap, from the vendor's own record: each helper's request arrived before the
    // other's answer left.
    let stamps = v.stamps.lock().unwrap().clone();
    let (a_in, a_out) = (
        stamps_of(&stamps, "slow 1500 alpha", false),
        stamps_of(&stamps, "slow 1500 alpha", true),
    );
    let (b_in, b_out) = (
        stamps_of(&stamps, "slow 1500 beta", false),
        stamps_of(&stamps, "slow 1500 beta", true),
    );
    assert!(
        !a_in.is_empty() && !a_out.is_empty() && !b_in.is_empty() && !b_out.is_empty(),
        "{stamps:?}"
    );
    assert!(
        b_in[0].at < a_out.last().unwrap().at,
        "helper B started before A answered: {stamps:?}"
    );
    assert!(
        a_in[0].at < b_out.last().unwrap().at,
        "helper A started before B answered: {stamps:?}"
    );

    // A helper's request: its task alone (nothing of the parent's conversation), no
    // output channels, no spawn_child; the parent's own request offers both tools.
    let child_req = requests_for(&v, "slow 1500 alpha").remove(0);
    assert!(!text(&child_req).contains("call-tool seq_run"), "{child_req}");
    let tools = tool_names(&child_req);
    assert!(tools.iter().all(|t| !t.starts_with("output_send__")), "{tools:?}");
    assert!(!tools.contains(&"spawn_child".to_owned()), "{tools:?}");
    assert!(tools.contains(&"child_result".to_owned()), "{tools:?}");
    let parent_tools = tool_names(&requests_for(&v, "call-tool seq_run").remove(0));
    assert!(parent_tools.contains(&"spawn_child".to_owned()), "{parent_tools:?}");

    // The result, once; then "already delivered", never "not found".
    let first = ask(&d, r#"call-tool child_result {"id":"child_1"}"#);
    assert_eq!(first, "tool said: slow done: alpha");
    // (Another spelling of the same call: the duplicate guard drops a repeated text.)
    let again = ask(&d, r#"call-tool child_result {"id": "child_1"}"#);
    assert!(again.contains("already delivered"), "{again}");
    let unknown = ask(&d, r#"call-tool child_result {"id":"child_77"}"#);
    assert!(unknown.contains("no helper `child_77`"), "{unknown}");

    // Ended helpers leave the tree.
    wait_for(&d, "/api/v1/actors", "the helpers' subtrees removed", |v| {
        !v["actors"].to_string().contains("kernel/agent/children/child_")
    });
    assert!(actor_ids(&d).contains(&"kernel/agent/children".to_owned()));
}

#[test]
fn a_helper_cannot_spawn_helpers_and_says_so_in_its_result() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let task = r#"call-tool spawn_child {\"task\":\"grandchild\"}"#;
    let reply = ask(&d, &format!(r#"call-tool spawn_child {{"task":"{task}"}}"#));
    assert!(reply.contains("child_1"), "{reply}");
    wait_request(&d, &v, "Helper child_1 finished");
    let result = ask(&d, r#"call-tool child_result {"id":"child_1"}"#);
    assert!(
        result.contains("Tool spawn_child does not exist"),
        "the helper's call was refused: {result}"
    );
    assert!(requests_for(&v, "grandchild").is_empty(), "no grandchild ever ran");
    assert!(!d.log_text().contains("child_2"), "no second helper was booked");
}

/// Calls `resident_agents` through the parent's model and answers the tool's text.
fn resident(d: &common::Daemon, args: &str) -> String {
    let reply = ask(d, &format!("call-tool resident_agents {args}"));
    reply.strip_prefix("tool said: ").unwrap_or(&reply).to_owned()
}

/// Restart counts of every actor outside `kernel/agent/residents/`, by id.
fn restarts_outside_residents(d: &common::Daemon) -> Vec<(String, u64)> {
    get(d, "/api/v1/actors")["actors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a["id"].as_str()?.to_owned(), a["restarts"].as_u64()?)))
        .filter(|(id, _)| !id.starts_with("kernel/agent/residents/") && !id.contains("/task-"))
        .collect()
}

#[test]
fn a_resident_is_created_sent_work_inspected_and_destroyed_keeping_or_dropping_its_residual() {
    let (_dir, data, d, v) = daemon_with_vendor();
    common::api::offer_every_tool(&d);
    let created = resident(&d, r#"{"action":"create","id":"scout","task":"slow 100 scouting"}"#);
    assert!(created.contains("Resident scout created"), "{created}");
    // Its subtree, its directory, its first round reported to the parent as an interrupt.
    let ids = actor_ids(&d);
    for a in ["scheduler", "context", "event-loop"] {
        assert!(
            ids.contains(&format!("kernel/agent/residents/scout/{a}")),
            "{a}: {ids:?}"
        );
    }
    assert!(data.join("residents/scout/memory.db").exists());
    let report = wait_request(
        &d,
        &v,
        "Report from resident scout (round on: slow 100 scouting): slow done: scouting",
    );
    assert!(!from_resident(&report), "the report reached the parent");
    let first = requests_for(&v, "slow 100 scouting").remove(0);
    assert!(
        from_resident(&first),
        "the resident's own turn carries its task in the prompt: {first}"
    );
    let tools = tool_names(&first);
    assert!(
        !tools.contains(&"resident_agents".to_owned()) && tools.iter().any(|t| t.starts_with("output_send__")),
        "{tools:?}"
    );
    // Its rounds are background work in the ledger (its own limits, the background
    // source), not the owner's turns.
    common::api::wait_for(&d, "/api/v1/usage?by=kind", "the resident's round accounted", |u| {
        u["rows"].as_array().is_some_and(|rows| {
            rows.iter()
                .any(|r| r["key"] == "resident" && r["calls"].as_u64() >= Some(1))
        })
    });

    // send: an L4 interrupt into it; a second one waits behind (equal levels never preempt).
    assert!(
        resident(&d, r#"{"action":"send","id":"scout","text":"slow 4000 long job"}"#)
            .contains("Sent to resident scout")
    );
    wait_request(&d, &v, "slow 4000 long job");
    resident(&d, r#"{"action":"send","id":"scout","text":"residual-one"}"#);
    let listed = get(&d, "/api/v1/residents");
    let scout = &listed["residents"][0];
    assert_eq!(scout["id"], "scout", "{listed}");
    assert_eq!(
        scout["tasks"]["interrupts"][3].as_array().map(Vec::len),
        Some(1),
        "one L4 waits: {listed}"
    );
    assert!(scout["tasks"]["running"].is_object(), "{listed}");
    let inspected = resident(&d, r#"{"action":"inspect","id":"scout"}"#);
    let inspected: Value = serde_json::from_str(&inspected).unwrap_or_else(|e| panic!("{e}: {inspected}"));
    assert_eq!(inspected["state"], "running");
    assert!(
        inspected["round_table"][0]["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("Round done: input=slow 100 scouting"),
        "{inspected}"
    );

    // destroy, keep: the waiting instruction comes back to the parent's own queue.
    let destroyed = resident(&d, r#"{"action":"destroy","id":"scout","residual":"keep"}"#);
    assert!(destroyed.contains("1 residual tasks were returned"), "{destroyed}");
    let back = wait_request(&d, &v, "residual-one");
    assert!(!from_resident(&back), "the parent ran it: {back}");
    assert!(requests_for(&v, "residual-one").iter().all(|r| !from_resident(r)));
    assert!(!data.join("residents/scout").exists(), "its temporary memory is gone");
    wait_for(&d, "/api/v1/actors", "the resident's subtree removed", |v| {
        !v["actors"].to_string().contains("kernel/agent/residents/scout")
    });
    assert_eq!(get(&d, "/api/v1/residents")["residents"], serde_json::json!([]));

    // destroy, drop (through the API): the waiting instruction is logged and never runs.
    resident(&d, r#"{"action":"create","id":"scout2","task":"slow 100 warm"}"#);
    wait_request(&d, &v, "Report from resident scout2");
    resident(&d, r#"{"action":"send","id":"scout2","text":"slow 4000 long again"}"#);
    wait_request(&d, &v, "slow 4000 long again");
    resident(&d, r#"{"action":"send","id":"scout2","text":"dropped-one"}"#);
    let r = d
        .client()
        .delete(d.url("/api/v1/residents/scout2?residual=drop"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("1 residual tasks were dropped"),
        "{body}"
    );
    let again = d.client().delete(d.url("/api/v1/residents/scout2")).send().unwrap();
    assert_eq!(again.status().as_u16(), 404);
    assert_eq!(ask(&d, "after the drop"), "echo: after the drop");
    assert!(requests_for(&v, "dropped-one").is_empty(), "a dropped task never ran");
    let log = d.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("residual task dropped by the parent") && l.contains("dropped-one")),
        "each dropped item is logged"
    );

    // Hostile ids and duplicates are refused with what to do.
    let bad = resident(&d, r#"{"action":"create","id":"../etc","task":"x"}"#);
    assert!(bad.contains("is invalid"), "{bad}");
    assert!(!data.join("etc").exists() && !data.join("residents/../etc").exists());
    resident(&d, r#"{"action":"create","id":"twin","task":"slow 50 one"}"#);
    let dup = resident(&d, r#"{"action":"create","id":"twin","task":"slow 50 two"}"#);
    assert!(dup.contains("already exists"), "{dup}");
}

#[test]
fn restarting_a_resident_restarts_only_its_subtree_and_it_keeps_working() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    resident(&d, r#"{"action":"create","id":"steady","task":"slow 50 hello"}"#);
    wait_request(&d, &v, "Report from resident steady");
    let before = restarts_outside_residents(&d);
    let sub = |v: &Value| {
        v["actors"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["id"] == "kernel/agent/residents/steady")
            .and_then(|a| a["restarts"].as_u64())
            .unwrap_or(0)
    };
    let r0 = sub(&get(&d, "/api/v1/actors"));
    let r = d
        .client()
        .post(d.url("/api/v1/residents/steady/restart"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text());
    wait_for(&d, "/api/v1/actors", "the resident restarted", |v| sub(v) > r0);
    assert_eq!(
        restarts_outside_residents(&d),
        before,
        "nothing of the parent restarted"
    );
    // It still works (same id, same directory, a fresh scheduler).
    resident(&d, r#"{"action":"send","id":"steady","text":"after the restart"}"#);
    wait_request(&d, &v, "Report from resident steady (round on: after the restart)");
    let missing = d
        .client()
        .post(d.url("/api/v1/residents/nobody/restart"))
        .send()
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}

#[test]
fn a_busy_agent_hands_its_backlog_to_a_triage_assistant_that_answers_each_caller() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    common::api::put_settings(
        &d,
        serde_json::json!({
            "core.agent.offload_enabled": true,
            "core.agent.offload_busy_after": "1s",
            "core.agent.offload_min_pending": 2,
        }),
    );
    // The main agent is busy with a slow task...
    let (status, _) = common::api::post(
        &d,
        "/api/v1/messages",
        serde_json::json!({"text": "slow 8000 main job", "sync": false}),
    );
    assert_eq!(status, 202);
    wait_request(&d, &v, "slow 8000 main job");
    // ...while three callers wait behind it, each on its own connection: two are handed
    // over (all or nothing, up to min_pending), one stays with the main agent.
    let texts = ["quick one", "quick two", "quick three"];
    let callers: Vec<_> = texts
        .into_iter()
        .map(|text| {
            let (client, url) = (d.client(), d.url("/api/v1/messages"));
            std::thread::spawn(move || {
                let r = client
                    .post(url)
                    .timeout(std::time::Duration::from_secs(60))
                    .json(&serde_json::json!({ "text": text }))
                    .send()
                    .unwrap();
                (r.status().as_u16(), r.json::<Value>().unwrap())
            })
        })
        .collect();
    let replies: Vec<(u16, Value)> = callers.into_iter().map(|h| h.join().unwrap()).collect();
    for ((status, body), text) in replies.iter().zip(texts) {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["reply"], format!("echo: {text}"), "each caller got its own answer");
    }
    // Two were answered by the triage assistant (its prompt carries the contract)...
    let triaged = |text: &str| {
        let reqs = requests_for(&v, text);
        assert_eq!(reqs.len(), 1, "{text}: {reqs:?}");
        reqs[0]["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("[Task] You are standing in for the main assistant")
    };
    let (handed, kept): (Vec<&str>, Vec<&str>) = texts.into_iter().partition(|t| triaged(t));
    assert_eq!((handed.len(), kept.len()), (2, 1), "log:\n{}", d.log_text());
    // ...while the slow task was still running: their answers left before its own.
    let stamps = v.stamps.lock().unwrap().clone();
    let main_done = stamps_of(&stamps, "slow 8000 main job", true);
    for text in &handed {
        let done = stamps_of(&stamps, text, true);
        assert!(!done.is_empty(), "{stamps:?}");
        if let Some(m) = main_done.first() {
            assert!(done[0].at < m.at, "answered during the slow task: {stamps:?}");
        }
    }
    // The triage assistant is a resident owned by the offload; the main agent is told
    // first — the notice goes to the front of its queue, before the input it kept.
    let listed = get(&d, "/api/v1/residents");
    let r = &listed["residents"][0];
    assert_eq!(r["owner"], "offload", "{listed}");
    assert!(r["id"].as_str().unwrap_or("").starts_with("offload-"), "{listed}");
    let notice = wait_request(
        &d,
        &v,
        "Kernel notice: while you were busy, 2 waiting messages were handed",
    );
    assert!(!from_resident(&notice));
    let stamps = v.stamps.lock().unwrap().clone();
    let notice_at = stamps
        .iter()
        .find(|s| !s.answered && s.text.starts_with("Kernel notice: while you were busy"))
        .map(|s| s.at);
    let kept_at = stamps_of(&stamps, kept[0], false).first().map(|s| s.at);
    assert!(
        notice_at.is_some() && kept_at.is_some() && notice_at < kept_at,
        "the notice ran before the kept input: {stamps:?}"
    );
}

#[test]
fn a_previous_run_s_resident_memory_is_deleted_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let stale = data.join("residents/ghost");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("memory.db"), b"left by a crashed run").unwrap();
    let keep = data.join("residents/Not-An-Id");
    std::fs::create_dir_all(&keep).unwrap();
    let d = common::Daemon::start(&data);
    assert!(!stale.exists(), "orphaned temporary memory is deleted");
    assert!(keep.exists(), "only directories a resident could have made");
    assert!(d.log_text().contains("a previous run's resident memory deleted"));
    assert_eq!(get(&d, "/api/v1/residents")["residents"], serde_json::json!([]));
}

#[test]
fn a_resident_notifies_its_parent_mid_task_and_the_main_agent_is_told_it_has_no_parent() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    common::api::offer_every_tool(&d);
    let task = r#"call-tool notify_parent {\"text\":\"halfway there\"}"#;
    resident(&d, &format!(r#"{{"action":"create","id":"herald","task":"{task}"}}"#));
    let notice = wait_request(&d, &v, "Notice from resident herald: halfway there");
    assert!(!from_resident(&notice), "the parent heard it");
    // The resident's own answer after the tool is reported too.
    let report = wait_request(&d, &v, "Report from resident herald (round on: call-tool notify_parent");
    assert!(report["messages"].to_string().contains("tool said: ok"), "{report}");
    // The main agent is not offered the residents' own tools; called by name anyway, it
    // is told it has no parent.
    let reply = ask(&d, r#"call-tool notify_parent {"text": "hello?"}"#);
    assert!(reply.contains("this task has no parent"), "{reply}");
    let main = requests_for(&v, "call-tool notify_parent {\"text\": \"hello?\"}").remove(0);
    let offered = tool_names(&main);
    assert!(
        !offered.contains(&"notify_parent".to_owned()) && !offered.contains(&"inputch_note".to_owned()),
        "{offered:?}"
    );
    assert!(offered.contains(&"resident_agents".to_owned()), "{offered:?}");
    let herald_tools = tool_names(&requests_for(&v, "call-tool notify_parent {\"text\":").remove(0));
    assert!(herald_tools.contains(&"inputch_note".to_owned()), "{herald_tools:?}");
}

#[test]
fn a_resident_s_own_note_is_its_round_record() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let task = r#"call-tool inputch_note {\"text\":\"read the three design docs; two left\"}"#;
    resident(&d, &format!(r#"{{"action":"create","id":"scribe","task":"{task}"}}"#));
    wait_request(&d, &v, "Report from resident scribe (round on: call-tool inputch_note");
    let inspected: Value = serde_json::from_str(&resident(&d, r#"{"action":"inspect","id":"scribe"}"#)).unwrap();
    assert_eq!(
        inspected["round_table"][0],
        serde_json::json!({"proactive": true, "text": "read the three design docs; two left"}),
        "{inspected}"
    );
    // A round without a note gets the automatic record.
    resident(&d, r#"{"action":"send","id":"scribe","text":"plain round"}"#);
    wait_request(&d, &v, "Report from resident scribe (round on: plain round)");
    // (Worded apart from the first inspect: the same text within 10 s is a duplicate.)
    let inspected: Value = serde_json::from_str(&resident(&d, r#"{"id":"scribe","action":"inspect"}"#)).unwrap();
    assert_eq!(inspected["round_table"][1]["proactive"], false, "{inspected}");
    assert!(
        inspected["round_table"][1]["text"]
            .as_str()
            .unwrap()
            .starts_with("Round done: input=plain round"),
        "{inspected}"
    );
}

/// The relations the main graph holds about `entity`, as `source relation target (session)`.
fn main_facts(d: &common::Daemon, entity: &str) -> Vec<String> {
    get(d, &format!("/api/v1/memory/graph?q={entity}"))["relations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} {} {} ({})",
                r["source"].as_str().unwrap_or(""),
                r["relation"].as_str().unwrap_or(""),
                r["target"].as_str().unwrap_or(""),
                r["session"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn a_resident_writes_its_own_memory_and_reclaim_promotes_it_to_the_main_graph() {
    let (_dir, data, d, v) = daemon_with_vendor();
    let task = r#"call-tool memory_commit {\"triples\":[{\"subject\":\"Zoltan\",\"relation\":\"flies\",\"object\":\"box kites\"}]}"#;
    resident(&d, &format!(r#"{{"action":"create","id":"keeper","task":"{task}"}}"#));
    wait_request(&d, &v, "Report from resident keeper (round on: call-tool memory_commit");
    assert!(data.join("residents/keeper/graph.db").exists());
    assert!(
        main_facts(&d, "Zoltan").is_empty(),
        "a resident's writes stay in its temporary graph: {:?}",
        main_facts(&d, "Zoltan")
    );
    // It reads its own memory (and the main graph) back.
    resident(
        &d,
        r#"{"action":"send","id":"keeper","text":"call-tool memory_recall {\"query_intent\":\"Zoltan\"}"}"#,
    );
    let report = wait_request(&d, &v, "Report from resident keeper (round on: call-tool memory_recall");
    let said = report["messages"].to_string();
    assert!(
        said.contains("[Your temporary memory]") && said.contains("box kites"),
        "{said}"
    );
    // The main agent's own recall does not see it yet.
    let mine = ask(&d, r#"call-tool memory_recall {"query_intent":"Zoltan"}"#);
    assert!(!mine.contains("box kites"), "{mine}");

    let reclaimed = resident(&d, r#"{"action":"reclaim","id":"keeper"}"#);
    assert!(reclaimed.contains("promoted=1"), "{reclaimed}");
    assert_eq!(
        main_facts(&d, "Zoltan"),
        vec!["Zoltan flies box kites (reclaim/keeper)".to_owned()]
    );
    assert!(!data.join("residents/keeper").exists(), "its temporary memory is gone");
    // Nothing to promote is a reclaim of zero.
    resident(&d, r#"{"action":"create","id":"idle","task":"slow 10 nothing"}"#);
    wait_request(&d, &v, "Report from resident idle");
    assert!(resident(&d, r#"{"action":"reclaim","id":"idle"}"#).contains("promoted=0"));
}

#[test]
fn a_resident_s_real_crash_restarts_only_its_subtree() {
    // A debug build panics in a scheduler that receives this text (HOMEAGENT_FAULT).
    let (_dir, _data, d, v) = daemon_with_vendor_env(&[("HOMEAGENT_FAULT", "scheduler.submit:BOOM-IN-RESIDENT")]);
    resident(&d, r#"{"action":"create","id":"fragile","task":"slow 20 warm up"}"#);
    wait_request(&d, &v, "Report from resident fragile");
    let before = restarts_outside_residents(&d);
    let restarts_of = |v: &Value, id: &str| {
        v["actors"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["id"] == id)
            .and_then(|a| a["restarts"].as_u64())
            .unwrap_or(0)
    };
    // The parent's own input holds the needle only JSON-escaped, and the report of the
    // failed round quotes the first 80 characters only, so only the resident's
    // scheduler (which gets the decoded text) panics.
    let pad = "pad ".repeat(21);
    resident(
        &d,
        &format!(r#"{{"action":"send","id":"fragile","text":"{pad}BOOM\u002dIN\u002dRESIDENT"}}"#),
    );
    wait_for(
        &d,
        "/api/v1/actors",
        "the resident's scheduler restarted after its panic",
        |v| restarts_of(v, "kernel/agent/residents/fragile/scheduler") > 0,
    );
    assert!(
        d.log_text().contains("injected fault at scheduler.submit"),
        "a real panic"
    );
    // The parent hears that the round was lost.
    let told = wait_request(&d, &v, "Report from resident fragile (round on: pad pad");
    assert!(
        told["messages"]
            .to_string()
            .contains("the task ended without answering"),
        "{told}"
    );
    assert_eq!(
        restarts_outside_residents(&d),
        before,
        "nothing of the parent restarted"
    );
    // The rebuilt subtree works, and so does the parent.
    resident(&d, r#"{"action":"send","id":"fragile","text":"after the crash"}"#);
    wait_request(&d, &v, "Report from resident fragile (round on: after the crash)");
    assert_eq!(ask(&d, "still here"), "echo: still here");
}

#[test]
fn a_resident_takes_the_input_of_its_assigned_channels_until_it_is_destroyed() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let created = resident(
        &d,
        r#"{"action":"create","id":"desk","task":"slow 10 open the desk","input_channels":["frontdesk"]}"#,
    );
    assert!(created.contains("Resident desk created"), "{created}");
    wait_request(&d, &v, "Report from resident desk");
    let on = |text: &str| {
        let (status, body) = common::api::post(
            &d,
            "/api/v1/messages",
            serde_json::json!({"text": text, "channel": "frontdesk"}),
        );
        assert_eq!(status, 200, "{body}");
        body["reply"].as_str().unwrap_or("").to_owned()
    };
    // Its channel's input runs in the resident, and the caller gets the answer.
    assert_eq!(on("hello desk"), "echo: hello desk");
    assert!(
        from_resident(&requests_for(&v, "hello desk").remove(0)),
        "the resident ran it"
    );
    // Other channels stay with the main agent.
    assert_eq!(ask(&d, "hello main"), "echo: hello main");
    assert!(!from_resident(&requests_for(&v, "hello main").remove(0)));
    let inspected: Value = serde_json::from_str(&resident(&d, r#"{"action":"inspect","id":"desk"}"#)).unwrap();
    assert_eq!(
        inspected["input_channels"],
        serde_json::json!(["frontdesk"]),
        "{inspected}"
    );
    // A channel has one owner; the kernel's own channels are never assigned.
    let taken = resident(
        &d,
        r#"{"action":"create","id":"desk2","task":"slow 10 x","input_channels":["frontdesk"]}"#,
    );
    assert!(taken.contains("is assigned to resident `desk` already"), "{taken}");
    let reserved = resident(
        &d,
        r#"{"action":"create","id":"desk3","task":"slow 10 y","input_channels":["kernel"]}"#,
    );
    assert!(reserved.contains("cannot be assigned"), "{reserved}");
    assert_eq!(
        get(&d, "/api/v1/residents")["residents"].as_array().map(Vec::len),
        Some(1)
    );
    // Destroyed: the channel comes back to the main agent.
    resident(&d, r#"{"action":"destroy","id":"desk"}"#);
    assert_eq!(on("hello again"), "echo: hello again");
    assert!(!from_resident(&requests_for(&v, "hello again").remove(0)));
}
