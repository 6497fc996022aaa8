//! The StageHost on real actors: concurrency, timeouts, crash isolation, scopes.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use homeagent_actors::stages::{
    GetTools, Patch, RegisterStage, RegisterTool, RunStage, Scope, Stage, StageContext, StageHandler, StageHost,
    StageToolCall, ToolHandler, ToolSpec, UnregisterPlugin,
};
use homeagent_actors::supervisor::start_root;
use homeagent_actors::{EventBus, Registry, RestartPolicy, SupervisorConfig, TAddr};
use serde_json::{Value, json};

type H = Arc<dyn StageHandler>;

fn handler(f: impl Fn(StageContext) -> Result<Patch, String> + Send + Sync + 'static, delay: Duration) -> H {
    let f = Arc::new(f);
    Arc::new(
        move |_stage: Stage, ctx: StageContext| -> BoxFuture<'static, Result<Patch, String>> {
            let f = f.clone();
            Box::pin(async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                f(ctx)
            })
        },
    )
}

/// A handler that sleeps `delay` and records how many such handlers ran at once (in
/// `peak`): concurrency is proven by overlap, not by a wall-clock bound.
fn overlapping(
    f: impl Fn(StageContext) -> Result<Patch, String> + Send + Sync + 'static,
    delay: Duration,
    running: Arc<std::sync::atomic::AtomicUsize>,
    peak: Arc<std::sync::atomic::AtomicUsize>,
) -> H {
    use std::sync::atomic::Ordering::SeqCst;
    let f = Arc::new(f);
    Arc::new(
        move |_stage: Stage, ctx: StageContext| -> BoxFuture<'static, Result<Patch, String>> {
            let (f, running, peak) = (f.clone(), running.clone(), peak.clone());
            Box::pin(async move {
                let now = running.fetch_add(1, SeqCst) + 1;
                peak.fetch_max(now, SeqCst);
                tokio::time::sleep(delay).await;
                running.fetch_sub(1, SeqCst);
                f(ctx)
            })
        },
    )
}

async fn host(registry: Arc<Registry>) -> TAddr<StageHost> {
    let (root, exit) = start_root(
        registry.clone(),
        EventBus::default(),
        "kernel",
        SupervisorConfig::default(),
    )
    .unwrap();
    std::mem::forget(exit);
    let r = registry.clone();
    root.worker("stages", RestartPolicy::Permanent, move || {
        // The timeout only has to separate the 300 ms handlers from the 30 s one: keep it
        // far above 300 ms so a loaded machine cannot make a slow handler time out.
        Ok(StageHost::new("kernel/stages", r.clone(), EventBus::default()).with_timeout(Duration::from_secs(3)))
    })
    .await
    .unwrap()
}

async fn register(h: &TAddr<StageHost>, plugin: &str, stage: Stage, scope: Scope, handler: H) {
    h.send(RegisterStage {
        plugin: plugin.into(),
        stage,
        scope,
        handler,
    })
    .await
    .unwrap()
    .unwrap();
}

#[actix_rt::test]
async fn handlers_run_concurrently_and_slow_or_crashing_ones_are_skipped() {
    let registry = Arc::new(Registry::default());
    let h = host(registry.clone()).await;
    let slow = Duration::from_millis(300);
    let (running, peak) = (Arc::default(), Arc::new(std::sync::atomic::AtomicUsize::new(0)));
    register(
        &h,
        "a",
        Stage::OnInput,
        Scope::Global,
        overlapping(
            |c| {
                Ok(Patch {
                    raw_message: Some(format!("{} [a]", c.raw_message)),
                    ..Default::default()
                })
            },
            slow,
            Arc::clone(&running),
            peak.clone(),
        ),
    )
    .await;
    register(
        &h,
        "b",
        Stage::OnInput,
        Scope::Global,
        overlapping(|_| Ok(Patch::default()), slow, running, peak.clone()),
    )
    .await;
    register(
        &h,
        "sleepy",
        Stage::OnInput,
        Scope::Global,
        handler(|_| Ok(Patch::default()), Duration::from_secs(30)),
    )
    .await;
    // Panics while building its future: the handler's actor dies and is started again.
    let crashy: H =
        Arc::new(|_: Stage, _: StageContext| -> BoxFuture<'static, Result<Patch, String>> { panic!("handler bug") });
    register(&h, "crashy", Stage::OnInput, Scope::Global, crashy).await;
    register(
        &h,
        "failing",
        Stage::OnInput,
        Scope::Global,
        handler(|_| Err("no database".into()), Duration::ZERO),
    )
    .await;
    // Panics inside its future: only that call fails.
    register(
        &h,
        "flaky",
        Stage::OnInput,
        Scope::Global,
        handler(|_| panic!("async bug"), Duration::ZERO),
    )
    .await;

    let out = h
        .send(RunStage(
            Stage::OnInput,
            StageContext {
                raw_message: "hi".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    assert_eq!(out.raw_message, "hi [a]");
    assert_eq!(
        peak.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the two slow handlers ran at the same time"
    );
    let errors = out.errors.join("\n");
    assert!(errors.contains("sleepy: handler timed out"), "{errors}");
    assert!(errors.contains("crashy: handler crashed"), "{errors}");
    assert!(errors.contains("failing: no database"), "{errors}");
    assert!(errors.contains("flaky: handler crashed"), "{errors}");

    // The crashed handler was started again behind the same registration.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let crashy = registry
        .snapshot()
        .into_iter()
        .find(|s| s.id == "kernel/stages/handler-4")
        .unwrap();
    assert_eq!(crashy.restarts, 1);
    assert!(crashy.last_exit.unwrap().contains("handler bug"));
    let again = h
        .send(RunStage(
            Stage::OnInput,
            StageContext {
                raw_message: "x".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    assert!(
        again.errors.iter().any(|e| e.contains("crashy: handler crashed")),
        "it runs (and crashes) again"
    );
}

#[actix_rt::test]
async fn short_circuit_scopes_and_unregistering() {
    let registry = Arc::new(Registry::default());
    let h = host(registry.clone()).await;
    register(
        &h,
        "guard",
        Stage::PreAction,
        Scope::Global,
        handler(
            |_| {
                Ok(Patch {
                    response: Some("blocked".into()),
                    ..Default::default()
                })
            },
            Duration::ZERO,
        ),
    )
    .await;
    register(
        &h,
        "timer",
        Stage::BeforeToolcall,
        Scope::OwnTools,
        handler(
            |_| {
                Ok(Patch {
                    response: Some("denied".into()),
                    ..Default::default()
                })
            },
            Duration::ZERO,
        ),
    )
    .await;

    let out = h
        .send(RunStage(Stage::PreAction, StageContext::default()))
        .await
        .unwrap();
    assert_eq!(out.response.as_deref(), Some("blocked"));

    let call = |plugin: &str| StageContext {
        tool_calls: vec![StageToolCall {
            id: "1".into(),
            name: "x".into(),
            plugin: plugin.into(),
            arguments: json!({}),
        }],
        ..Default::default()
    };
    assert_eq!(
        h.send(RunStage(Stage::BeforeToolcall, call("timer")))
            .await
            .unwrap()
            .response
            .as_deref(),
        Some("denied")
    );
    assert_eq!(
        h.send(RunStage(Stage::BeforeToolcall, call("other")))
            .await
            .unwrap()
            .response,
        None,
        "own_tools scope"
    );

    let echo: Arc<dyn ToolHandler> = Arc::new(|a: Value| -> BoxFuture<'static, homeagent_actors::stages::ToolResult> {
        Box::pin(async move { Ok(a.to_string()) })
    });
    h.send(RegisterTool {
        spec: ToolSpec::new("timer_set", "sets a timer", json!({})),
        handler: echo.clone(),
    })
    .await
    .unwrap()
    .unwrap();
    let dup = h
        .send(RegisterTool {
            spec: ToolSpec::new("timer_set", "again", json!({})),
            handler: echo,
        })
        .await
        .unwrap();
    assert!(dup.unwrap_err().to_string().contains("already registered"));
    assert_eq!(h.send(GetTools).await.unwrap().len(), 1);

    let (tools, handlers) = h.send(UnregisterPlugin("timer".into())).await.unwrap();
    assert_eq!((tools, handlers), (1, 1));
    assert!(
        registry.get("kernel/stages/handler-2").is_none(),
        "its actor left the tree"
    );
    assert_eq!(
        h.send(RunStage(Stage::BeforeToolcall, call("timer")))
            .await
            .unwrap()
            .response,
        None
    );
}
