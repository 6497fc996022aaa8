//! The task's tool step with plugin tools and stage handlers, on the real actors
//! (scheduler, task, stage host, LLM actor) against a scripted OpenAI-format fake.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use futures_util::future::BoxFuture;
use homeagent_actors::agent::channels::Channels;
use homeagent_actors::agent::input::{Input, ReplyTo};
use homeagent_actors::agent::intake::{EventLoop, Inject, SelfInput};
use homeagent_actors::agent::scheduler::{SchedulerActor, Stop};
use homeagent_actors::agent::task::{AgentSettings, TaskDeps};
use homeagent_actors::llm::provider::{Configure, LlmActor};
use homeagent_actors::stages::{
    Patch, RegisterStage, RegisterTool, Scope, Stage, StageContext, StageHandler, StageHost, ToolHandler, ToolSpec,
};
use homeagent_actors::supervisor::start_root;
use homeagent_actors::{EventBus, Registry, RestartPolicy, SupervisorConfig, TAddr};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// Each LLM call pops the next scripted assistant turn: `Ok(text)` or `Err(tool names)`.
type Script = Arc<Mutex<(VecDeque<Result<String, Vec<String>>>, Vec<Value>)>>;

async fn chat(body: web::Json<Value>, script: web::Data<Script>) -> HttpResponse {
    let next = {
        let mut s = script.lock();
        s.1.push(body.into_inner());
        s.0.pop_front().unwrap_or(Ok("script exhausted".into()))
    };
    let mut chunks = Vec::new();
    match next {
        Ok(text) => {
            chunks.push(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}))
        }
        Err(tools) => {
            for (i, name) in tools.iter().enumerate() {
                chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": "{}"}}]}, "finish_reason": null}]}));
            }
            chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
        }
    }
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    HttpResponse::Ok().content_type("text/event-stream").body(body)
}

struct Stack {
    event_loop: TAddr<EventLoop>,
    scheduler: TAddr<SchedulerActor>,
    stages: TAddr<StageHost>,
    script: Script,
}

async fn stack(settings: AgentSettings) -> Stack {
    let script: Script = Arc::default();
    let data = web::Data::new(script.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/v1/chat/completions", web::post().to(chat))
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")
    .unwrap();
    let url = format!("http://{}/v1", server.addrs()[0]);
    actix_web::rt::spawn(server.run());

    let registry = Arc::new(Registry::default());
    let bus = EventBus::default();
    let (root, exit) = start_root(registry.clone(), bus.clone(), "kernel", SupervisorConfig::default()).unwrap();
    std::mem::forget(exit);
    let arb = actix::Arbiter::new();
    let llm = root
        .worker_on(arb.handle(), "llm", RestartPolicy::Permanent, || {
            Ok(LlmActor::new(std::env::temp_dir()))
        })
        .await
        .unwrap();
    std::mem::forget(arb);
    let mut s = BTreeMap::new();
    for (k, v) in [
        ("base_url", json!(url)),
        ("model", json!("m")),
        ("adapter", json!("openai")),
        ("api_key", json!("sk")),
    ] {
        s.insert(format!("core.llm.sources.fake.{k}"), v);
    }
    llm.send(Configure(s)).await.unwrap();
    let (r, b) = (registry.clone(), bus.clone());
    let stages = root
        .worker("stages", RestartPolicy::Permanent, move || {
            Ok(StageHost::new("kernel/stages", r.clone(), b.clone()))
        })
        .await
        .unwrap();
    let documents = root
        .worker("documents", RestartPolicy::Permanent, || {
            let store = homeagent_actors::memory::store::MemoryStore::open_in_memory()?;
            Ok(homeagent_actors::memory::documents::DocumentsActor::new(store))
        })
        .await
        .unwrap();
    let docs = documents.clone();
    let context = root
        .worker("context", RestartPolicy::Permanent, move || {
            let store = homeagent_actors::memory::store::MemoryStore::open_in_memory()?;
            Ok(homeagent_actors::memory::context::actor::ContextActor::open(
                store,
                docs.clone(),
            )?)
        })
        .await
        .unwrap();
    let text_dir = std::env::temp_dir().join(format!("homeagent-textlog-{}", std::process::id()));
    let textlog = root
        .worker("textlog", RestartPolicy::Permanent, move || {
            use homeagent_actors::memory::textlog::{MAX_AGE, MAX_BYTES, TextLog, TextLogActor};
            Ok(TextLogActor::new(TextLog::new(&text_dir, MAX_AGE, MAX_BYTES)))
        })
        .await
        .unwrap();
    let deps = Arc::new(TaskDeps {
        registry: registry.clone(),
        bus: bus.clone(),
        llm,
        stages: stages.clone(),
        context,
        documents,
        textlog,
        graph: None,
        embedder: None,
        knowledge: None,
        recall_thread: None,
        tool_list: Default::default(),
        recent_tools: Default::default(),
        owner_route: Default::default(),
        channels: Channels::builtin(),
        skills_index: Default::default(),
        settings: parking_lot::RwLock::new(settings),
        persona: None,
        firewall: Default::default(),
        media: None,
        refused_tools: &[],
        hidden_tools: &[],
        agent: String::new(),
    });
    let me: Arc<OnceLock<TAddr<SchedulerActor>>> = Arc::default();
    let (d, m) = (deps.clone(), me.clone());
    let scheduler = root
        .worker("scheduler", RestartPolicy::Permanent, move || {
            Ok(SchedulerActor::new(d.clone(), m.clone()))
        })
        .await
        .unwrap();
    let _ = me.set(scheduler.clone());
    let sc = scheduler.clone();
    let event_loop = root
        .worker("event-loop", RestartPolicy::Permanent, move || {
            Ok(EventLoop::new(sc.clone()))
        })
        .await
        .unwrap();
    Stack {
        event_loop,
        scheduler,
        stages,
        script,
    }
}

/// A tool that logs `start <name>` / `end <name>`, waits `delay`, and returns its name.
fn tool(name: &'static str, delay: Duration, log: Arc<Mutex<Vec<String>>>) -> Arc<dyn ToolHandler> {
    Arc::new(
        move |_args: Value| -> BoxFuture<'static, homeagent_actors::stages::ToolResult> {
            let log = log.clone();
            Box::pin(async move {
                log.lock().push(format!("start {name}"));
                tokio::time::sleep(delay).await;
                log.lock().push(format!("end {name}"));
                Ok(format!("result of {name}"))
            })
        },
    )
}

fn stage_fn(f: impl Fn(&StageContext) -> Patch + Send + Sync + 'static) -> Arc<dyn StageHandler> {
    let f = Arc::new(f);
    Arc::new(
        move |_s: Stage, ctx: StageContext| -> BoxFuture<'static, Result<Patch, String>> {
            let p = f(&ctx);
            Box::pin(async move { Ok(p) })
        },
    )
}

async fn ask(s: &Stack, text: &str) -> homeagent_actors::agent::Reply {
    let mut input = Input::text("http", text);
    let (reply, rx) = ReplyTo::channel(&input.request_id);
    input.reply = reply;
    s.event_loop.send(Inject(input)).await.unwrap().unwrap();
    tokio::time::timeout(Duration::from_secs(20), rx)
        .await
        .unwrap()
        .unwrap()
}

#[actix_rt::test]
async fn plugin_tools_parallel_batches_denials_timeouts_and_stages() {
    let settings = AgentSettings {
        tool_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let s = stack(settings).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    for (name, parallel, delay) in [
        ("demo_a", true, Duration::from_millis(150)),
        ("demo_b", true, Duration::from_millis(150)),
        ("demo_serial", false, Duration::from_millis(10)),
        ("demo_denied", true, Duration::ZERO),
        ("demo_slow", false, Duration::from_secs(5)),
    ] {
        let mut spec = ToolSpec::new(name, "a demo tool", json!({"type": "object", "properties": {}}));
        spec.parallel_safe = parallel;
        s.stages
            .send(RegisterTool {
                spec,
                handler: tool(name, delay, log.clone()),
            })
            .await
            .unwrap()
            .unwrap();
    }
    let deny = stage_fn(|c| Patch {
        response: c
            .tool_calls
            .first()
            .filter(|t| t.name == "demo_denied")
            .map(|_| "not allowed here".to_string()),
        ..Default::default()
    });
    s.stages
        .send(RegisterStage {
            plugin: "guard".into(),
            stage: Stage::BeforeToolcall,
            scope: Scope::Global,
            handler: deny,
        })
        .await
        .unwrap()
        .unwrap();
    let note = stage_fn(|_| Patch {
        context_msgs: vec![homeagent_actors::stages::ContextMsg {
            role: "system".into(),
            content: "note from a plugin".into(),
        }],
        ..Default::default()
    });
    s.stages
        .send(RegisterStage {
            plugin: "notes".into(),
            stage: Stage::PreAction,
            scope: Scope::Global,
            handler: note,
        })
        .await
        .unwrap()
        .unwrap();
    let sign = stage_fn(|c| Patch {
        final_text: Some(format!("{} (checked)", c.final_text)),
        ..Default::default()
    });
    s.stages
        .send(RegisterStage {
            plugin: "signer".into(),
            stage: Stage::BeforeOutput,
            scope: Scope::Global,
            handler: sign,
        })
        .await
        .unwrap()
        .unwrap();

    s.script.lock().0.extend([
        Err(vec!["demo_a".into(), "demo_b".into()]),
        Err(vec!["demo_a".into(), "demo_serial".into()]),
        Err(vec!["demo_denied".into()]),
        Err(vec!["demo_slow".into()]),
        Ok("final".into()),
    ]);
    let reply = ask(&s, "use the tools").await;
    assert_eq!(
        reply.content, "final (checked)",
        "before_output rewrote the final text: {reply:?}"
    );
    assert_eq!(
        reply.tools_used,
        ["demo_a", "demo_b", "demo_a", "demo_serial", "demo_denied", "demo_slow"]
    );

    let log = log.lock().clone();
    assert_eq!(
        &log[..4],
        ["start demo_a", "start demo_b", "end demo_a", "end demo_b"],
        "parallel-safe batch ran concurrently"
    );
    assert_eq!(
        &log[4..8],
        ["start demo_a", "end demo_a", "start demo_serial", "end demo_serial"],
        "one unsafe tool made the batch serial"
    );
    assert!(
        !log.iter().any(|l| l.contains("demo_denied")),
        "a denied tool never runs"
    );

    let requests = s.script.lock().1.clone();
    let first = &requests[0]["messages"];
    assert!(
        first
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "note from a plugin"),
        "pre_action context message sent"
    );
    let tools: Vec<_> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(tools.contains(&"demo_a".to_string()) && tools.contains(&"output_send__http".to_string()));
    let tool_msgs = |i: usize| -> Vec<String> {
        requests[i]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        tool_msgs(1),
        ["result of demo_a", "result of demo_b"],
        "results in call order"
    );
    assert_eq!(tool_msgs(3).last().unwrap(), "not allowed here");
    assert!(
        tool_msgs(4).last().unwrap().contains("timed out after"),
        "the slow tool timed out: {:?}",
        tool_msgs(4)
    );
}

#[actix_rt::test]
async fn on_input_can_answer_and_post_action_can_rewrite() {
    let s = stack(AgentSettings::default()).await;
    let canned = stage_fn(|c| Patch {
        response: (c.raw_message == "ping").then(|| "pong from a plugin".to_string()),
        ..Default::default()
    });
    s.stages
        .send(RegisterStage {
            plugin: "canned".into(),
            stage: Stage::OnInput,
            scope: Scope::Global,
            handler: canned,
        })
        .await
        .unwrap()
        .unwrap();
    let shout = stage_fn(|c| Patch {
        llm_text: Some(c.llm_text.to_uppercase()),
        ..Default::default()
    });
    s.stages
        .send(RegisterStage {
            plugin: "shout".into(),
            stage: Stage::PostAction,
            scope: Scope::Global,
            handler: shout,
        })
        .await
        .unwrap()
        .unwrap();

    assert_eq!(ask(&s, "ping").await.content, "pong from a plugin");
    assert!(s.script.lock().1.is_empty(), "short-circuited before any LLM call");
    s.script.lock().0.push_back(Ok("quiet words".into()));
    assert_eq!(ask(&s, "say something").await.content, "QUIET WORDS");
}

async fn register_tool(s: &Stack, name: &'static str, handler: Arc<dyn ToolHandler>) {
    let spec = ToolSpec::new(name, "a demo tool", json!({"type": "object", "properties": {}}));
    s.stages.send(RegisterTool { spec, handler }).await.unwrap().unwrap();
}

fn texts(req: &Value) -> Vec<String> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[actix_rt::test]
async fn an_interrupt_during_a_tool_waits_for_the_tool_then_runs_first() {
    let s = stack(AgentSettings::default()).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    register_tool(
        &s,
        "demo_long",
        tool("demo_long", Duration::from_millis(400), log.clone()),
    )
    .await;
    s.script.lock().0.extend([
        Err(vec!["demo_long".into()]),
        Ok("interrupt done".into()),
        Ok("victim done".into()),
    ]);

    let mut input = Input::text("http", "start the long tool");
    let (reply, victim_rx) = ReplyTo::channel(&input.request_id);
    input.reply = reply;
    s.event_loop.send(Inject(input)).await.unwrap().unwrap();
    while !log.lock().iter().any(|l| l == "start demo_long") {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut urgent = Input::text("webui", "urgent");
    urgent.level = Some(homeagent_actors::scheduler::Level::L4);
    let (reply, urgent_rx) = ReplyTo::channel(&urgent.request_id);
    urgent.reply = reply;
    s.scheduler
        .send(homeagent_actors::agent::scheduler::Submit(
            homeagent_actors::agent::door::admit(urgent, None, None).unwrap(),
        ))
        .await
        .unwrap()
        .unwrap();

    let urgent = tokio::time::timeout(Duration::from_secs(10), urgent_rx)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(urgent.content, "interrupt done");
    assert_eq!(
        *log.lock(),
        ["start demo_long", "end demo_long"],
        "the running tool was not interrupted"
    );
    let victim = tokio::time::timeout(Duration::from_secs(10), victim_rx)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(victim.content, "victim done");
    let requests = s.script.lock().1.clone();
    assert!(
        texts(&requests[1]).iter().any(|t| t == "[Interrupt] urgent"),
        "the interrupt ran second"
    );
    assert!(
        texts(&requests[2]).iter().any(|t| t == "result of demo_long"),
        "the victim resumed with its tool result"
    );
    let snap = s
        .scheduler
        .send(homeagent_actors::agent::scheduler::GetTasks)
        .await
        .unwrap();
    assert_eq!((snap.stats.suspended, snap.stats.resumed), (1, 1));
}

#[actix_rt::test]
async fn a_crashing_task_answers_its_caller_and_the_model_hears_of_it() {
    let s = stack(AgentSettings::default()).await;
    let boom: Arc<dyn ToolHandler> = Arc::new(
        |_a: Value| -> BoxFuture<'static, homeagent_actors::stages::ToolResult> {
            Box::pin(async move { panic!("tool bug") })
        },
    );
    register_tool(&s, "demo_boom", boom).await;
    s.script
        .lock()
        .0
        .extend([Err(vec!["demo_boom".into()]), Ok("noted the crash".into())]);
    let reply = ask(&s, "crash please").await;
    assert!(
        reply.error.as_deref().unwrap_or("").contains("without answering"),
        "{reply:?}"
    );
    // The notice is a new task; on a loaded machine it can take a while to be asked.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while s.script.lock().1.len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let requests = s.script.lock().1.clone();
    let notice = texts(&requests[1]);
    assert!(
        notice
            .iter()
            .any(|t| t.starts_with("[Interrupt] Kernel event: task #1 panicked") && t.contains("tool bug")),
        "{notice:?}"
    );
    // The scheduler survived: a new input runs.
    s.script.lock().0.push_back(Ok("still alive".into()));
    assert_eq!(ask(&s, "are you there").await.content, "still alive");
}

#[actix_rt::test]
async fn max_tool_turns_caps_a_runaway_loop() {
    let s = stack(AgentSettings {
        max_tool_turns: 2,
        ..Default::default()
    })
    .await;
    register_tool(&s, "demo_again", tool("demo_again", Duration::ZERO, Arc::default())).await;
    s.script.lock().0.extend((0..5).map(|_| Err(vec!["demo_again".into()])));
    let reply = ask(&s, "loop forever").await;
    assert_eq!(
        reply.content,
        "[system] The limit of 2 tool rounds was reached; the task was stopped."
    );
    assert_eq!(s.script.lock().1.len(), 2, "no third LLM call");
}

#[actix_rt::test]
async fn consolidation_is_a_critical_section() {
    let s = stack(AgentSettings::default()).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    register_tool(
        &s,
        "demo_long",
        tool("demo_long", Duration::from_millis(300), log.clone()),
    )
    .await;
    s.script.lock().0.extend([
        Err(vec!["demo_long".into()]),
        Ok("merged".into()),
        Ok("interrupt done".into()),
    ]);
    s.event_loop
        .send(SelfInput("merge entities A and B".into()))
        .await
        .unwrap()
        .unwrap();
    while !log.lock().iter().any(|l| l == "start demo_long") {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut urgent = Input::text("webui", "urgent");
    urgent.level = Some(homeagent_actors::scheduler::Level::L4);
    let (reply, rx) = ReplyTo::channel(&urgent.request_id);
    urgent.reply = reply;
    s.scheduler
        .send(homeagent_actors::agent::scheduler::Submit(
            homeagent_actors::agent::door::admit(urgent, None, None).unwrap(),
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), rx)
            .await
            .unwrap()
            .unwrap()
            .content,
        "interrupt done"
    );
    let requests = s.script.lock().1.clone();
    assert_eq!(requests.len(), 3);
    assert!(
        texts(&requests[1]).iter().any(|t| t == "result of demo_long"),
        "consolidation finished first"
    );
    assert!(texts(&requests[2]).iter().any(|t| t == "[Interrupt] urgent"));
    let snap = s
        .scheduler
        .send(homeagent_actors::agent::scheduler::GetTasks)
        .await
        .unwrap();
    assert_eq!(snap.stats.suspended, 0, "never suspended");
}

#[actix_rt::test]
async fn stop_while_the_prompt_is_being_built_ends_the_task_before_any_llm_call() {
    let s = stack(AgentSettings::default()).await;
    // A slow on_input handler keeps the task busy before its first LLM call.
    let entered = Arc::new(tokio::sync::Notify::new());
    let e = entered.clone();
    let slow: Arc<dyn StageHandler> = Arc::new(
        move |_s: Stage, _ctx: StageContext| -> BoxFuture<'static, Result<Patch, String>> {
            let e = e.clone();
            Box::pin(async move {
                e.notify_one();
                tokio::time::sleep(Duration::from_millis(600)).await;
                Ok(Patch::default())
            })
        },
    );
    s.stages
        .send(RegisterStage {
            plugin: "slowpoke".into(),
            stage: Stage::OnInput,
            scope: Scope::Global,
            handler: slow,
        })
        .await
        .unwrap()
        .unwrap();
    s.script.lock().0.push_back(Ok("should never be asked".into()));
    let mut input = Input::text("http", "hello");
    let (reply, rx) = ReplyTo::channel(&input.request_id);
    input.reply = reply;
    s.event_loop.send(Inject(input)).await.unwrap().unwrap();
    entered.notified().await;
    s.scheduler.send(Stop { clear_queue: false }).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(20), rx)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.content, "Generation stopped.");
    assert!(s.script.lock().1.is_empty(), "no LLM call was made after the stop");
}
