//! The agent end to end: real daemon, fake OpenAI-format vendor on loopback.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::api::{daemon_with_vendor, daemon_with_vendor_env, listen, post, put_settings, wait_sources};
use common::{Daemon, vendor};
use serde_json::{Value, json};

fn task_states(events: &Mutex<Vec<(String, Value)>>) -> Vec<(u64, String)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| n == "task")
        .map(|(_, d)| (d["task_id"].as_u64().unwrap(), d["state"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn no_source_then_reply_tool_loop_and_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));

    // Nothing configured: a clear 503 naming the settings.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "hello"}));
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().unwrap().contains("core.llm.sources."), "{body}");

    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    wait_sources(&d, 1);

    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "hello"}));
    assert_eq!(status, 200, "{body}\n{}", d.log_text());
    assert_eq!(body["reply"], "echo: hello");
    assert!(body["task_id"].as_u64().unwrap() > 0);

    // The model calls output_send__http_help, gets the channel help, then answers.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "call-help"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "done after tool");
    assert_eq!(body["tools_used"], json!(["output_send__http_help"]));

    // Async: 202 with the task id.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "later", "sync": false}));
    assert_eq!(status, 202);
    assert!(body["task_id"].as_u64().is_some());

    // Bad input.
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": ""}));
    assert_eq!(status, 400);
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "x", "priority": "L9"}));
    assert_eq!(status, 400);
    let (status, _) = post(&d, "/api/v1/messages", json!({"txt": "typo"}));
    assert_eq!(status, 400);

    // A second source with higher priority that fails: the backup still answers.
    let broken = "http://127.0.0.1:9/v1"; // nothing listens on the discard port
    put_settings(&d, vendor::source_settings("broken", broken, 10));
    wait_sources(&d, 2);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "fallback please"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "echo: fallback please");
    let sources: Value = common::api::get(&d, "/api/v1/llm/sources");
    let b = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "broken")
        .unwrap();
    assert_eq!(b["available"], false, "{sources}");
    assert!(b.get("api_key").is_none(), "keys are never shown");
}

#[test]
fn interrupt_preempts_a_running_task_which_resumes_after() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    wait_sources(&d, 1);
    let events = listen(&d);

    let url = d.url("/api/v1/messages");
    let client = d.client();
    let victim = std::thread::spawn(move || {
        client
            .post(url)
            .timeout(Duration::from_secs(60))
            .json(&json!({"text": "slow 1500 victim"}))
            .send()
            .unwrap()
            .json::<Value>()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(400));
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "urgent", "interrupt": true, "priority": "L3"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "echo: urgent");
    let victim = victim.join().unwrap();
    assert_eq!(victim["reply"], "slow done: victim", "{victim}");

    let (vid, iid) = (victim["task_id"].as_u64().unwrap(), body["task_id"].as_u64().unwrap());
    std::thread::sleep(Duration::from_millis(200));
    let states: Vec<_> = task_states(&events)
        .into_iter()
        .filter(|(id, _)| *id == vid || *id == iid)
        .collect();
    let expected = vec![
        (vid, "queued".to_string()),
        (vid, "running".into()),
        (iid, "queued".into()),
        (vid, "suspended".into()),
        (iid, "running".into()),
        (iid, "done".into()),
        (vid, "resumed".into()),
        (vid, "done".into()),
    ];
    assert_eq!(states, expected);
    let tasks: Value = common::api::get(&d, "/api/v1/tasks");
    assert_eq!(tasks["stats"]["suspended"], 1);
    assert_eq!(tasks["stats"]["resumed"], 1);
    assert!(tasks["running"].is_null());
}

#[test]
fn stop_ends_the_current_inference_and_with_clear_queue_the_waiting_inputs_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    common::api::chinese(&d); // the reference's texts are asserted below
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    wait_sources(&d, 1);

    let send = |text: &'static str| {
        let url = d.url("/api/v1/messages");
        let client = d.client();
        std::thread::spawn(move || {
            client
                .post(url)
                .timeout(Duration::from_secs(60))
                .json(&json!({"text": text}))
                .send()
                .unwrap()
                .json::<Value>()
                .unwrap()
        })
    };
    let a = send("slow 5000 a");
    std::thread::sleep(Duration::from_millis(300));
    let b = send("b");
    let c = send("c");
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let (status, body) = post(&d, "/api/v1/stop", json!({"clear_queue": true}));
    assert_eq!((status, &body["cleared_queue"]), (200, &json!(true)), "{body}");
    let later = post(&d, "/api/v1/messages", json!({"text": "after the stop"}));
    assert_eq!(a.join().unwrap()["reply"], "已停止生成。");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the inference ended before the vendor's 5 s answer"
    );
    assert_eq!(b.join().unwrap()["reply"], "已取消（用户停止）。");
    assert_eq!(c.join().unwrap()["reply"], "已取消（用户停止）。");
    assert_eq!(
        later.1["reply"], "echo: after the stop",
        "inputs after the stop are unaffected"
    );

    // A plain stop ends the turn in front of the owner; what the owner queued runs.
    let a = send("slow 5000 a2");
    std::thread::sleep(Duration::from_millis(300));
    let b = send("b2");
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = post(&d, "/api/v1/stop", Value::Null);
    assert_eq!((status, &body["cleared_queue"]), (200, &json!(false)), "{body}");
    assert_eq!(a.join().unwrap()["reply"], "已停止生成。");
    assert_eq!(b.join().unwrap()["reply"], "echo: b2", "the queued input ran");
}

#[test]
fn anthropic_wire_format_reply_and_tool_loop() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let v = vendor::start();
    put_settings(&d, vendor::anthropic_settings("claude", &v.anthropic_base()));
    wait_sources(&d, 1);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "hello"}));
    assert_eq!(status, 200, "{body}\n{}", d.log_text());
    assert_eq!(body["reply"], "echo: hello");
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "call-help"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "done after tool");
    assert_eq!(body["tools_used"], json!(["output_send__http_help"]));
}

#[test]
fn a_vendor_answering_500_falls_back_to_the_next_source_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    let primary = vendor::start();
    let backup = vendor::start();
    primary.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    put_settings(&d, vendor::source_settings("primary", &primary.url, 10));
    put_settings(&d, vendor::source_settings("backup", &backup.url, 0));
    wait_sources(&d, 2);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "are you there"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "echo: are you there", "answered by the backup");
    assert_eq!(
        primary.calls.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "two attempts on the failing source"
    );
    let sources: Value = common::api::get(&d, "/api/v1/llm/sources");
    let p = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "primary")
        .unwrap();
    assert_eq!(p["available"], false);
    assert!(p["last_error"].as_str().unwrap().contains("500"), "{p}");
    // Both down: a clear error, not a hang, and the daemon keeps serving.
    backup.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "still there?"}));
    assert_eq!(status, 502, "{body}");
    assert!(body["error"].as_str().unwrap().contains("LLM"), "{body}");
    assert_eq!(d.client().get(d.url("/healthz")).send().unwrap().status().as_u16(), 200);
}

#[test]
fn the_conversation_is_remembered_across_turns_and_kill_9() {
    let (_dir, data, d, v) = daemon_with_vendor();
    common::api::chinese(&d); // the reference's texts are asserted below
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "my cat is called Mimi"}));
    assert_eq!(status, 200);
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "what is my cat called?"}));
    assert_eq!(status, 200);
    let last = v.last.lock().unwrap().clone();
    let timeline = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["content"].as_str().is_some_and(|c| c.contains("【对话时序】")))
        .cloned();
    let timeline = timeline.unwrap_or_else(|| panic!("no timeline in {last}"));
    let text = timeline["content"].as_str().unwrap();
    // Dated, with who said it: the user (through `http`), then the reply.
    assert!(text.contains("] http: my cat is called Mimi\n"), "{text}");
    assert!(text.contains("] assistant: echo: my cat is called Mimi\n"), "{text}");
    assert!(
        !text.contains("what is my cat called"),
        "the current input is not in its own timeline"
    );

    // The raw text log has both turns as JSON lines.
    std::thread::sleep(Duration::from_millis(100));
    let text_dir = data.join("memory/text");
    let logged: String = std::fs::read_dir(&text_dir)
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .collect();
    let lines: Vec<Value> = logged.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{logged}");
    assert_eq!(lines[0]["input"], "my cat is called Mimi");
    assert_eq!(lines[0]["response"], "echo: my cat is called Mimi");

    // Everything acknowledged is on disk: kill -9 and look again.
    d.kill9();
    let d = Daemon::start(&data);
    let ctx: Value = common::api::get(&d, "/api/v1/memory/context");
    let events: Vec<(String, String)> = ctx["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap().to_owned(),
                e["input"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("http".to_string(), "my cat is called Mimi".to_string()),
            ("agent".into(), "my cat is called Mimi".into()),
            ("http".into(), "what is my cat called?".into()),
            ("agent".into(), "what is my cat called?".into()),
        ]
    );
}

#[test]
fn pruned_turns_become_documents_that_are_suggested_and_can_be_loaded_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&dir.path().join("data"));
    common::api::chinese(&d); // the reference's texts are asserted below
    let v = vendor::start();
    put_settings(&d, vendor::source_settings("fake", &v.url, 0));
    put_settings(&d, json!({"core.agent.max_context_size": 12}));
    wait_sources(&d, 1);
    std::thread::sleep(Duration::from_millis(200));
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "my cat Mimi loves tuna"}));
    assert_eq!(status, 200);
    for i in 0..12 {
        let (status, _) = post(&d, "/api/v1/messages", json!({"text": format!("filler number {i}")}));
        assert_eq!(status, 200);
    }
    // 26 events > 2 × 12: a distill round prunes the window back to 12.
    let (status, round) = post(&d, "/api/v1/heartbeats/distill/run", json!({}));
    assert_eq!(status, 200, "{round}");
    assert_eq!(round["archived"], 14, "{round}");
    let ctx: Value = common::api::get(&d, "/api/v1/memory/context");
    assert_eq!(ctx["events"].as_array().unwrap().len(), 12);
    let status: Value = common::api::get(&d, "/api/v1/memory/status");
    assert_eq!(status["context_events"], 12);
    assert_eq!(status["heartbeats"]["distill"]["trigger"], "operator");
    let (code, _) = post(&d, "/api/v1/heartbeats/nonesuch/run", json!({}));
    assert_eq!(code, 404);
    let docs: Value = common::api::get(&d, "/api/v1/memory/documents");
    let docs = docs["documents"].as_array().unwrap().clone();
    let mimi = docs
        .iter()
        .find(|d| d["content"].as_str().unwrap().contains("Mimi"))
        .cloned();
    let mimi = mimi.unwrap_or_else(|| panic!("the old turn was not archived: {docs:?}"));
    let (mimi_id, mimi_access) = (mimi["id"].clone(), mimi["access_count"].as_i64().unwrap());

    // A related input gets the archived turn itself (its passage) in its prompt.
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "what does Mimi eat?"}));
    assert_eq!(status, 200);
    let last = v.last.lock().unwrap().clone();
    let memory = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.contains("【相关记忆】"))
        .map(str::to_owned);
    let memory = memory.unwrap_or_else(|| panic!("no recalled memory in {last}"));
    assert!(memory.contains("http: my cat Mimi loves tuna\n"), "{memory}");

    // doc_query loads it back into the timeline; the document stays stored (the
    // timeline shows only its start).
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": r#"call-tool doc_query {"query":"Mimi tuna"}"#}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        body["reply"].as_str().unwrap().starts_with("tool said: 已加载 "),
        "{body}"
    );
    assert!(body["reply"].as_str().unwrap().contains("篇文档记忆"), "{body}");
    let ctx: Value = common::api::get(&d, "/api/v1/memory/context");
    assert!(
        ctx["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["source"] == "cold_storage" && e["response"].as_str().unwrap().contains("Mimi"))
    );
    let after: Value = common::api::get(&d, "/api/v1/memory/documents");
    assert!(
        after["documents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["id"] == mimi_id),
        "a loaded document is not consumed: {after}"
    );
    // It was read twice since it was archived (recall showed its passage, then
    // doc_query loaded it); reads are recorded in a batch, a moment later.
    let before = mimi_access;
    common::api::wait_for(&d, "/api/v1/memory/documents", "the reads recorded", |v| {
        v["documents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["id"] == mimi_id && d["access_count"].as_i64().unwrap_or(0) >= before + 2)
    });
}

#[test]
fn the_knowledge_base_is_written_and_searched_through_tools() {
    let (_dir, data, d, _v) = daemon_with_vendor();
    common::api::chinese(&d); // the reference's texts are asserted below
    let create = r#"call-tool knowledge_create {"name":"Recipes/Green Tea","content":"Brew green tea at 80 degrees for three minutes."}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": create }));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["reply"]
            .as_str()
            .unwrap()
            .contains("知识「recipes/green_tea」已创建"),
        "{body}"
    );
    assert!(
        data.join("knowledge/recipes/green_tea/content.md").is_file(),
        "a plain file the user can edit"
    );
    let (_, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": r#"call-tool knowledge_search {"query":"green tea temperature"}"#}),
    );
    assert!(
        body["reply"]
            .as_str()
            .unwrap()
            .contains("[recipes/green_tea]\nBrew green tea at 80 degrees"),
        "{body}"
    );
    let (_, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": r#"call-tool knowledge_create {"name":"../escape","content":"x"}"#}),
    );
    assert!(body["reply"].as_str().unwrap().contains("知识创建失败"), "{body}");
}

#[test]
fn facts_committed_through_memory_commit_are_recalled_and_survive_kill_9() {
    let (_dir, data, d, _v) = daemon_with_vendor();
    common::api::chinese(&d); // the reference's texts are asserted below
    let commit = r#"call-tool memory_commit {"triples":[{"subject":"张三","relation":"住在","object":"北京","sentence_text":"我叫张三，我住在北京"},{"subject":"x","relation":"bad","object":"y"}]}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": commit }));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["reply"].as_str().unwrap().contains("已写入 2 个实体和 1 条关系"),
        "{body}"
    );
    let (_, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": r#"call-tool memory_recall {"query_intent":"张三住在哪里"}"#}),
    );
    assert!(
        body["reply"].as_str().unwrap().contains("- 张三 →(住在)→ 北京"),
        "{body}"
    );
    let (_, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": r#"call-tool person_set_trait {"name":"张三","trait":"性格","value":"开朗"}"#}),
    );
    assert!(
        body["reply"].as_str().unwrap().contains("已记录：张三 的 性格 = 开朗"),
        "{body}"
    );
    let (_, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": r#"call-tool person_query {"name":"张三"}"#}),
    );
    let reply = body["reply"].as_str().unwrap();
    assert!(
        reply.contains("▎张三 的档案\n【特质】\n  性格: 开朗\n【社交关系】\n  张三 —(住在)—→ 北京"),
        "{body}"
    );
    d.kill9();

    let d = Daemon::start(&data);
    let graph: Value = common::api::get(&d, "/api/v1/memory/graph?q=张三&depth=1");
    let rel = graph["relations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["relation"] == "住在")
        .cloned()
        .unwrap_or_else(|| panic!("{graph}"));
    assert_eq!(
        (rel["source"].as_str(), rel["target"].as_str()),
        (Some("张三"), Some("北京")),
        "{graph}"
    );
    assert_eq!(rel["sentence"], "我叫张三，我住在北京");
    let status: Value = common::api::get(&d, "/api/v1/memory/status");
    assert_eq!(status["graph"]["relation_count"], 2, "{status}");

    // A new turn that mentions 张三 carries the memory index to the model, at the
    // conservative 8k window of an unknown model (the tools offered are a subset then,
    // so the schemas leave the memory its share: `agent::toolset`).
    let v = vendor::start();
    let mut source = vendor::source_settings("fake", &v.url, 0);
    source["core.llm.sources.fake.context_window"] = json!(8192);
    put_settings(&d, source);
    wait_sources(&d, 1);
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "张三最近好吗"}));
    assert_eq!(status, 200);
    let sent = v.last.lock().unwrap().to_string();
    assert!(
        sent.contains("【记忆索引】 关联 3 个记忆实体") && sent.contains("需更多细节请用 memory_recall 查询"),
        "{sent}"
    );
}

/// Another name finds the entity (issue 28): a nickname a fact gave and the name of an
/// entity merged into it bring the entity's facts into the prompt when only that name
/// is used, in English and Chinese — counted in the request the vendor receives.
#[test]
fn a_nickname_or_a_merged_name_brings_the_entitys_facts() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let fact_sent = |text: &str, marker: &str| {
        let (status, body) = post(&d, "/api/v1/messages", json!({ "text": text }));
        assert_eq!(status, 200, "{body}");
        v.last.lock().unwrap().to_string().contains(marker)
    };
    let commit = r#"call-tool memory_commit {"triples":[{"subject":"Melanie","relation":"paints","object":"sunsets","sentence_text":"Melanie paints sunsets by the lake"},{"subject":"Lanie Park","relation":"plays","object":"violin"},{"subject":"王伟","relation":"住在","object":"杭州","sentence_text":"王伟住在杭州"}]}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": commit }));
    assert_eq!(status, 200, "{body}");
    assert!(
        !fact_sent("What does Mel paint?", "→paints→"),
        "without the alias, Mel is nobody the graph knows"
    );
    let alias = r#"call-tool memory_commit {"triples":[{"subject":"Melanie","relation":"nickname","object":"Mel"},{"subject":"王伟","relation":"小名","object":"小王"}]}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": alias }));
    assert_eq!(status, 200, "{body}");
    // (Another wording: the same text within 10 s is refused as a duplicate.)
    assert!(fact_sent(
        "And what does Mel paint these days?",
        "(Melanie →paints→ sunsets)"
    ));
    assert!(fact_sent("小王住在哪个城市？", "(王伟 →住在→ 杭州)"));
    let merge = r#"call-tool memory_merge {"source":"Lanie Park","target":"Melanie"}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": merge }));
    assert_eq!(status, 200, "{body}");
    assert!(
        fact_sent("Which instrument does Lanie Park play?", "Melanie →plays→ violin"),
        "the merged name finds the entity its facts moved to"
    );
}

#[test]
fn the_rule_distiller_turns_self_statements_into_graph_facts_once() {
    let (_dir, _data, d, _v) = daemon_with_vendor();
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "我叫张三，我住在北京"}));
    assert_eq!(status, 200);
    // The text log is written just after the reply.
    let mut round = Value::Null;
    for _ in 0..50 {
        let (status, r) = post(&d, "/api/v1/heartbeats/rules/run", json!({}));
        assert_eq!(status, 200, "{r}");
        if r["records"].as_u64() > Some(0) {
            round = r;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        (round["triples"].as_u64(), round["relations"].as_u64()),
        (Some(2), Some(2)),
        "{round}"
    );
    let graph: Value = common::api::get(&d, "/api/v1/memory/graph?q=张三");
    assert!(
        graph["entities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "北京"),
        "张三 → 用户 → 北京 within two hops: {graph}"
    );
    let (_, again) = post(&d, "/api/v1/heartbeats/rules/run", json!({}));
    assert_eq!(again["records"], 0, "records are distilled once: {again}");
    let status: Value = common::api::get(&d, "/api/v1/memory/status");
    assert_eq!(status["heartbeats"]["rules"]["trigger"], "operator", "{status}");
}

#[test]
fn merge_and_review_heartbeats_hand_tasks_to_the_model_once() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    common::api::chinese(&d); // the reference's texts are asserted below
    let commit = r#"call-tool memory_commit {"triples":[{"subject":"machine learning","relation":"is","object":"statistics","sentence_text":"machine learning is statistics"},{"subject":"machine learnings","relation":"needs","object":"data"}]}"#;
    let (_, body) = post(&d, "/api/v1/messages", json!({ "text": commit }));
    assert!(body["reply"].as_str().unwrap().contains("2 条关系"), "{body}");

    let (status, round) = post(&d, "/api/v1/heartbeats/merge/run", json!({}));
    assert_eq!((status, round["items"].as_u64()), (200, Some(1)), "{round}");
    let saw_task = |marker: &str| {
        for _ in 0..100 {
            if v.last.lock().unwrap().to_string().contains(marker) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    assert!(saw_task("类型: entity_merge"), "the model got the merge task");

    let (_, round) = post(&d, "/api/v1/heartbeats/review/run", json!({}));
    assert_eq!(round["items"], 1, "only the relation with a sentence: {round}");
    assert!(saw_task("【关系复审】原始句子: 'machine learning is statistics'"));
    let (_, again) = post(&d, "/api/v1/heartbeats/review/run", json!({}));
    assert_eq!(again["items"], 0, "each relation is reviewed once: {again}");
    let status: Value = common::api::get(&d, "/api/v1/memory/status");
    assert_eq!(status["heartbeats"]["merge"]["kind"], "merge", "{status}");
}

#[test]
fn the_archive_heartbeat_distils_cold_documents_into_the_graph_and_keeps_them() {
    // On a virtual clock: time passes by asking, not by editing the database.
    let (_dir, _data, d, _v) = daemon_with_vendor_env(&[("HOMED_VIRTUAL_CLOCK", "now")]);
    common::api::chinese(&d); // the reference's texts are asserted below
    for (summary, content) in [("个人信息", "我叫李四，我住在上海"), ("随笔", "今天天气很好")] {
        let call = json!({"summary": summary, "content": content}).to_string();
        let (_, body) = post(
            &d,
            "/api/v1/messages",
            json!({ "text": format!("call-tool doc_commit {call}") }),
        );
        assert!(body["reply"].as_str().unwrap().contains("文档已提交"), "{body}");
    }
    // An operator's search ranks by similarity and does not count as a read.
    for _ in 0..3 {
        let found: Value = common::api::get(&d, "/api/v1/memory/documents?q=李四住在上海");
        assert_eq!(found["documents"][0]["summary"], "个人信息", "{found}");
        assert_eq!(found["documents"][0]["access_count"], 1, "{found}");
    }
    // Nothing is cold yet.
    let (_, round) = post(&d, "/api/v1/heartbeats/archive/run", json!({}));
    assert_eq!(round["items"], 0, "{round}");
    // Four days pass: the archive heartbeat runs every hour of them by itself.
    let (status, step) = post(&d, "/api/v1/clock/advance", json!({"by": "4d"}));
    assert_eq!(status, 200, "{step}");
    assert!(step["rounds"]["archive"].as_u64().unwrap() >= 90, "{step}");
    assert_eq!(step["failed"], 0, "{step}");
    let status: Value = common::api::get(&d, "/api/v1/memory/status");
    assert_eq!(status["heartbeats"]["archive"]["trigger"], "clock", "{status}");
    let graph: Value = common::api::get(&d, "/api/v1/memory/graph?q=李四");
    let relation = graph["relations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target"] == "上海")
        .unwrap_or_else(|| panic!("{graph}"))
        .clone();
    assert!(
        relation["sentence"]
            .as_str()
            .unwrap()
            .ends_with("] 我叫李四，我住在上海"),
        "the fact keeps its dated source sentence: {relation}"
    );
    let docs: Value = common::api::get(&d, "/api/v1/memory/documents");
    let docs = docs["documents"].as_array().unwrap();
    let mut summaries: Vec<&str> = docs
        .iter()
        .filter(|d| d["source"] != "graph_snapshot")
        .map(|d| d["summary"].as_str().unwrap())
        .collect();
    summaries.sort();
    assert_eq!(summaries, vec!["个人信息", "随笔"], "archiving deletes nothing");
    // What the graph learnt is also readable as its snapshot documents.
    assert!(
        docs.iter()
            .any(|d| d["source"] == "graph_snapshot" && d["content"].as_str().unwrap().contains("上海")),
        "{docs:?}"
    );
    // Archived once: later rounds do not commit the same facts again.
    let (_, round) = post(&d, "/api/v1/heartbeats/archive/run", json!({}));
    assert_eq!(round["items"], 0, "{round}");
}

/// Every event of the daemon's text log, oldest first.
fn text_log(data: &std::path::Path) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(data.join("memory/text"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect::<Vec<Value>>()
        })
        .collect()
}

#[test]
fn memory_edit_and_purge_reach_the_text_log_and_block_merge_silences_a_pair() {
    let (_dir, data, d, _v) = daemon_with_vendor();
    common::api::chinese(&d); // the reference's texts are asserted below
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "我叫王五，我住在上海"}));
    assert_eq!(status, 200);
    let commit = r#"call-tool memory_commit {"triples":[{"subject":"王五","relation":"住在","object":"上海"}]}"#;
    let (_, body) = post(&d, "/api/v1/messages", json!({ "text": commit }));
    assert!(body["reply"].as_str().unwrap().contains("1 条关系"), "{body}");

    let edit = r#"call-tool memory_edit {"old_subject":"王五","old_relation":"住在","old_object":"上海","new_subject":"王武"}"#;
    let (_, body) = post(&d, "/api/v1/messages", json!({ "text": edit }));
    let reply = body["reply"].as_str().unwrap();
    assert!(
        reply.contains("已编辑记忆：删除 1 条旧关系") && reply.contains("条文本记忆日志"),
        "{reply}"
    );
    let first = &text_log(&data)[0];
    assert_eq!(
        first["input"], "我叫王武，我住在上海",
        "the edit reached the text log: {first}"
    );

    let purge = r#"call-tool memory_purge {"subject_contains":"王武"}"#;
    let (_, body) = post(&d, "/api/v1/messages", json!({ "text": purge }));
    let reply = body["reply"].as_str().unwrap();
    assert!(reply.contains("已soft删除 1 条图记忆关系，清理 "), "{reply}");
    let log = text_log(&data);
    assert!(
        !log.iter().any(|e| e["input"] == "我叫王武，我住在上海"),
        "the purge removed the statement from the text log: {log:?}"
    );
    // The text log still takes new turns after its files were rewritten.
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "after the rewrite"}));
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !text_log(&data).iter().any(|e| e["input"] == "after the rewrite") {
        assert!(
            std::time::Instant::now() < deadline,
            "new turns are logged after a rewrite"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // memory_block_merge: the pair is skipped for the given rounds, then proposed again.
    let commit = r#"call-tool memory_commit {"triples":[{"subject":"machine learning","relation":"is","object":"statistics"},{"subject":"machine learnings","relation":"needs","object":"data"}]}"#;
    post(&d, "/api/v1/messages", json!({ "text": commit }));
    let block =
        r#"call-tool memory_block_merge {"entity_a":"machine learnings","entity_b":"machine learning","rounds":1}"#;
    let (_, body) = post(&d, "/api/v1/messages", json!({ "text": block }));
    assert!(
        body["reply"]
            .as_str()
            .unwrap()
            .contains("在接下来 1 轮整理中不再提议合并"),
        "{body}"
    );
    let (_, round) = post(&d, "/api/v1/heartbeats/merge/run", json!({}));
    assert_eq!(round["items"], 0, "blocked for one round: {round}");
    let (_, round) = post(&d, "/api/v1/heartbeats/merge/run", json!({}));
    assert_eq!(round["items"], 1, "proposed again once the marker ran out: {round}");
}

#[test]
fn a_context_full_vendor_error_prunes_twice_then_fails_naming_the_setting() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    common::api::chinese(&d); // the reference's texts are asserted below
    for i in 0..20 {
        let (status, _) = post(&d, "/api/v1/messages", json!({"text": format!("filler message {i}")}));
        assert_eq!(status, 200);
    }
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "too-long"}));
    assert_ne!(status, 200, "{body}");
    let err = body.to_string();
    assert!(err.contains("上下文超限：已裁剪 2 次"), "{err}");
    assert!(err.contains("core.agent.max_context_size"), "{err}");
    // The source is not to blame: it stays available, and the next turn works.
    let sources = common::api::get(&d, "/api/v1/llm/sources");
    assert_eq!(sources["sources"][0]["available"], true, "{sources}");
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "still here"}));
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("echo: still here")),
        "{body}"
    );
    // The first recovery moved events into a document and told the model (L4 notice).
    let status = common::api::get(&d, "/api/v1/memory/status");
    assert!(status["documents"].as_u64().unwrap() >= 1, "{status}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !v.last.lock().unwrap().to_string().contains("上下文超页：已裁剪") {
        assert!(
            std::time::Instant::now() < deadline,
            "the model never saw the overflow notice"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(d.log_text().contains("context overflow: recovery"));
}

#[test]
fn concurrent_rule_distiller_rounds_never_read_the_same_records_twice() {
    let (_dir, data, d, _v) = daemon_with_vendor();
    for text in ["我叫李雷", "我住在上海", "我喜欢围棋"] {
        let (status, _) = post(&d, "/api/v1/messages", json!({ "text": text }));
        assert_eq!(status, 200);
    }
    // The text log is written just after each reply.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while text_log(&data).len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the text log never got the three turns"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = d.url("/api/v1/heartbeats/rules/run");
    let rounds: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            let client = d.client();
            std::thread::spawn(move || {
                client
                    .post(url)
                    .json(&json!({}))
                    .send()
                    .unwrap()
                    .json::<Value>()
                    .unwrap()
            })
        })
        .collect();
    let records: u64 = rounds
        .into_iter()
        .map(|r| r.join().unwrap()["records"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(records, 3, "each record is distilled by exactly one round");
}

#[test]
fn heartbeat_intervals_apply_without_a_restart() {
    let (_dir, _data, d, _v) = daemon_with_vendor();
    let status = common::api::get(&d, "/api/v1/memory/status");
    assert!(
        status["heartbeats"]["review"].is_null(),
        "no round yet (2 h period): {status}"
    );
    put_settings(
        &d,
        json!({"core.agent.review_interval": "1s", "core.agent.distill_interval": "1s"}),
    );
    let status = common::api::wait_for(&d, "/api/v1/memory/status", "timer rounds at the new period", |s| {
        s["heartbeats"]["review"]["trigger"] == "timer" && s["heartbeats"]["distill"]["trigger"] == "timer"
    });
    assert!(
        status["heartbeats"]["merge"].is_null(),
        "untouched heartbeats keep their period: {status}"
    );
    assert!(d.log_text().contains("heartbeat interval changed"));
}

#[test]
fn an_operator_restart_of_the_stage_host_keeps_every_tool() {
    let (_dir, _data, d, _v) = daemon_with_vendor();
    common::api::chinese(&d); // the reference's texts are asserted below
    let before = common::api::get(&d, "/api/v1/actors");
    let restarts = |v: &Value| {
        v["actors"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["id"] == "kernel/stages")
            .and_then(|a| a["restarts"].as_u64())
            .unwrap_or(0)
    };
    let r0 = restarts(&before);
    let (status, body) = post(&d, "/api/v1/actors/kernel/stages/restart", json!({}));
    assert_eq!(status, 200, "{body}");
    common::api::wait_for(&d, "/api/v1/actors", "the stage host restarted", |v| restarts(v) > r0);
    // The memory tools (registered once at boot) still answer through the tool loop.
    let (status, body) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "call-tool memory_introspect {}"}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body["reply"].as_str().unwrap_or("").contains("记忆统计"), "{body}");
    assert!(d.log_text().contains("stage host restored its registrations"));
}

/// Stop keeps what the owner already saw: a long answer stopped half-way answers with
/// the words that streamed, marked as stopped, and nothing the model would have
/// written after the stop.
#[test]
fn a_stop_keeps_the_words_already_written_marked_as_stopped() {
    let (_dir, _data, d, _v) = common::api::daemon_with_vendor();
    let events = common::api::listen(&d);
    let (url, client) = (d.url("/api/v1/messages"), d.client());
    let asked = std::thread::spawn(move || {
        client
            .post(url)
            .timeout(std::time::Duration::from_secs(60))
            .json(&serde_json::json!({"text": "trickle 300 alpha beta gamma delta epsilon zeta eta theta iota kappa"}))
            .send()
            .unwrap()
            .json::<serde_json::Value>()
            .unwrap()
    });
    // Two words on the screen, then Stop.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let shown: String = events
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == "stream_delta")
            .filter_map(|(_, v)| v["content"].as_str().map(str::to_owned))
            .collect();
        if shown.contains("beta") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "nothing streamed: {shown:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = d
        .client()
        .post(d.url("/api/v1/stop"))
        .json(&serde_json::json!({}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let reply = asked.join().unwrap();
    let text = reply["reply"].as_str().unwrap_or_default();
    assert!(text.starts_with("alpha beta"), "{reply}");
    assert!(text.trim_end().ends_with("[stopped]"), "{reply}");
    assert!(!text.contains("kappa"), "nothing after the stop: {reply}");
    assert!(
        !events
            .lock()
            .unwrap()
            .iter()
            .any(|(n, v)| n == "stream_delta" && v["reset"] == true),
        "the stream is not taken back"
    );
}

/// The same words twice within the duplicate window are a re-delivery and refused;
/// asked again on purpose (`again`, the WebUI's Regenerate) they are answered again.
#[test]
fn asked_again_on_purpose_is_not_a_duplicate() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "one more time"}));
    assert_eq!(status, 200);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "one more time"}));
    assert_eq!(status, 409, "a re-delivery: {body}");
    let calls = v.calls.load(std::sync::atomic::Ordering::SeqCst);
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "one more time", "again": true}));
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("echo: one more time")),
        "{body}"
    );
    assert_eq!(v.calls.load(std::sync::atomic::Ordering::SeqCst), calls + 1);
}

/// A new conversation starts an empty timeline and forgets nothing: the window
/// becomes a document, and the next question's prompt still recalls what was said.
#[test]
fn a_new_conversation_starts_an_empty_timeline_and_memory_stays_one() {
    let (_dir, _data, d, v) = daemon_with_vendor();
    let (status, _) = post(
        &d,
        "/api/v1/messages",
        json!({"text": "my cat is called Mittens and she likes tuna"}),
    );
    assert_eq!(status, 200);
    let (status, body) = post(&d, "/api/v1/chat/new", json!({}));
    assert_eq!(status, 200, "{body}");
    assert!(body["archived"].as_u64() >= Some(1), "{body}");
    let context = common::api::get(&d, "/api/v1/memory/context");
    assert_eq!(context["events"].as_array().map(Vec::len), Some(0), "{context}");
    let (status, _) = post(&d, "/api/v1/messages", json!({"text": "what does my cat like to eat?"}));
    assert_eq!(status, 200);
    let sent = v.last.lock().unwrap().to_string();
    assert!(sent.contains("tuna"), "recall still finds it: {sent}");
    // The chat's list and search see both turns.
    let list = common::api::get(&d, "/api/v1/chat/conversations");
    assert_eq!(list["conversations"][0]["turns"], 2, "{list}");
    let found = common::api::get(&d, "/api/v1/chat/history?q=MITTENS");
    assert_eq!(
        found["items"][0]["text"], "my cat is called Mittens and she likes tuna",
        "{found}"
    );
}

/// The graph → document snapshot (issue 33 item 7, the seed's `syncGraphToDocs`): the
/// distill heartbeat writes what the graph holds about each entity whose facts changed
/// as a readable document (with each fact's source sentence), found by `doc_query`,
/// replaced when the facts change, never a recall passage (the facts tier already
/// brings graph facts into the prompt) and never distilled back into the graph.
#[test]
fn the_graph_is_snapshotted_into_readable_documents() {
    let (_dir, data, d, v) = daemon_with_vendor();
    let commit = r#"call-tool memory_commit {"triples":[{"subject":"Ingrid","relation":"lives_in","object":"Tromsø","sentence_text":"My sister Ingrid moved to Tromsø"}]}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": commit }));
    assert_eq!(status, 200, "{body}");
    let run = || {
        let (status, round) = post(&d, "/api/v1/heartbeats/distill/run", json!({}));
        assert_eq!(status, 200, "{round}");
        assert!(round["error"].is_null(), "{round}");
        round
    };
    assert!(run()["snapshots"].as_u64().unwrap() >= 1);
    let doc = |id: &str| -> Option<(String, String)> {
        let db = rusqlite::Connection::open(data.join("memory/memory.db")).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        db.query_row("SELECT source, content FROM documents WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .ok()
    };
    let (source, content) = doc("graph:Ingrid").expect("Ingrid's snapshot");
    assert_eq!(source, "graph_snapshot");
    assert!(
        content.contains("- Ingrid lives in Tromsø — \"My sister Ingrid moved to Tromsø\""),
        "{content}"
    );
    // Nothing changed: nothing rewritten.
    assert_eq!(run()["snapshots"], 0);
    // Not a recall passage: a question's prompt shows the fact once, from the facts tier.
    let (status, body) = post(&d, "/api/v1/messages", json!({"text": "where does Ingrid live?"}));
    assert_eq!(status, 200, "{body}");
    let sent = v.last.lock().unwrap().to_string();
    assert_eq!(sent.matches("Ingrid lives in Tromsø").count(), 0, "{sent}");
    assert!(
        sent.contains("Ingrid →lives_in→ Tromsø"),
        "the facts tier brings it: {sent}"
    );
    // The model finds it with doc_query (which loads it into the timeline; it stays).
    let found = common::api::call_tool(&d, "doc_query", json!({"query": "where does Ingrid live Tromsø"}));
    assert!(found.contains("What the memory graph holds about Ingrid"), "{found}");
    assert!(doc("graph:Ingrid").is_some(), "a query leaves it in place");
    // A new fact replaces the document.
    let more = r#"call-tool memory_commit {"triples":[{"subject":"Ingrid","relation":"works_as","object":"marine biologist"}]}"#;
    let (status, body) = post(&d, "/api/v1/messages", json!({ "text": more }));
    assert_eq!(status, 200, "{body}");
    assert!(run()["snapshots"].as_u64().unwrap() >= 1);
    let (_, content) = doc("graph:Ingrid").unwrap();
    assert!(
        content.contains("Ingrid works as marine biologist") && content.contains("lives in Tromsø"),
        "{content}"
    );
    let db = rusqlite::Connection::open(data.join("memory/memory.db")).unwrap();
    let passages: i64 = db
        .query_row("SELECT COUNT(*) FROM passages WHERE doc_id = 'graph:Ingrid'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(passages, 0);
    let archived: Option<i64> = db
        .query_row(
            "SELECT archived_at_ms FROM documents WHERE id = 'graph:Ingrid'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(archived.is_some(), "never distilled back into the graph");
}

/// A chat bridge's input channels keep the memory policies they declare, on the user's
/// path (plugin injection → door → turn → the request the vendor receives): the owner's
/// question recalls an archived turn; the same question on `bridge/quiet`
/// (`recall_policy: none`) gets the recent window and no memory; an input on
/// `bridge/tidy` (`context_policy: prune`) prunes the window back under its size.
#[test]
fn a_channels_declared_memory_policies_hold_for_its_inputs() {
    let (_dir, _data, d, v) = common::api::daemon_with_plugins(&["bridge"], &["bridge"]);
    put_settings(&d, json!({"core.agent.max_context_size": 12}));
    let say = |text: &str| assert_eq!(post(&d, "/api/v1/messages", json!({"text": text})).0, 200);
    say("my cat Mimi loves tuna");
    for i in 0..12 {
        say(&format!("filler number {i}"));
    }
    let (status, round) = post(&d, "/api/v1/heartbeats/distill/run", json!({}));
    assert_eq!(status, 200, "{round}");
    assert!(round["archived"].as_u64().is_some_and(|n| n > 0), "{round}");
    let contents = vendor::texts;

    // The owner's own question recalls the archived turn.
    say("what does Mimi eat?");
    let asked = v.last.lock().unwrap().clone();
    assert!(
        contents(&asked).iter().any(|c| c.contains("Mimi loves tuna")),
        "the owner's turn recalls the archived turn: {asked}"
    );

    // Through the bridge, on a channel that recalls nothing, as the owner.
    let inject = |text: &str, source: &str| {
        let (status, out) = post(
            &d,
            "/api/v1/plugins/bridge/api/inject",
            json!({"text": text, "profile": "owner", "source": source}),
        );
        assert_eq!(
            (status, out["result"]["text"].as_str()),
            (200, Some("injected")),
            "{out}"
        );
    };
    let request_for = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let last = v.last.lock().unwrap().clone();
            if contents(&last).last().is_some_and(|c| c == text) {
                return last;
            }
            assert!(
                Instant::now() < deadline,
                "no request for {text:?}; log:\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    inject("tell me what Mimi eats", "bridge/quiet");
    let quiet = request_for("tell me what Mimi eats");
    let quiet_texts = contents(&quiet);
    assert!(
        !quiet_texts.iter().any(|c| c.contains("loves tuna")),
        "a recall_policy: none channel gets no memory: {quiet}"
    );
    assert!(
        quiet_texts.iter().any(|c| c.contains("filler number 11")),
        "it keeps the recent window: {quiet}"
    );

    // A channel that prunes against each input: the window goes back under its size.
    let events = || {
        common::api::get(&d, "/api/v1/memory/context")["events"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert!(events() > 12, "the window has grown past its size: {}", events());
    inject("tidy up please", "bridge/tidy");
    request_for("tidy up please");
    let deadline = Instant::now() + Duration::from_secs(60);
    while events() > 12 {
        assert!(
            Instant::now() < deadline,
            "the tidy channel's input never pruned the window ({} events); log:\n{}",
            events(),
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
