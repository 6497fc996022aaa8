//! Supervision rules proved on real actix actors (the decision logic itself is
//! unit-tested in `supervisor::core`).

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use homeagent_actors::supervisor::{BackoffPolicy, Intensity, start_root};
use homeagent_actors::{
    ActorState, EventBus, Exit, Handles, HostContext, KernelActor, Registry, RestartPolicy, Strategy, SupervisorConfig,
};
use parking_lot::Mutex;

type Log = Arc<Mutex<Vec<String>>>;

struct Worker {
    name: &'static str,
    log: Log,
}

impl KernelActor for Worker {
    const KIND: &'static str = "test-worker";
    fn started(&mut self, _: &mut HostContext<Self>) {
        self.log.lock().push(format!("start {}", self.name));
    }
    fn stopped(&mut self, _: &mut HostContext<Self>) {
        self.log.lock().push(format!("stop {}", self.name));
    }
}

#[derive(Message)]
#[rtype(result = "String")]
struct Ping;

#[derive(Message)]
#[rtype(result = "()")]
struct Boom;

#[derive(Message)]
#[rtype(result = "()")]
struct BoomLater;

#[derive(Message)]
#[rtype(result = "()")]
struct Quit;

#[derive(Message)]
#[rtype(result = "()")]
struct Sleep(Duration);

impl Handles<Ping> for Worker {
    type Reply = String;
    fn handle(&mut self, _: Ping, _: &mut HostContext<Self>) -> String {
        self.name.to_owned()
    }
}

impl Handles<Boom> for Worker {
    type Reply = ();
    fn handle(&mut self, _: Boom, _: &mut HostContext<Self>) {
        panic!("boom in {}", self.name);
    }
}

impl Handles<BoomLater> for Worker {
    type Reply = ();
    fn handle(&mut self, _: BoomLater, ctx: &mut HostContext<Self>) {
        // A panic in a future the actor spawned: no handler frame to catch it.
        ctx.spawn(actix::fut::wrap_future(async { panic!("boom in a spawned future") }));
    }
}

impl Handles<Quit> for Worker {
    type Reply = ();
    fn handle(&mut self, _: Quit, ctx: &mut HostContext<Self>) {
        ctx.stop();
    }
}

impl Handles<Sleep> for Worker {
    type Reply = ();
    fn handle(&mut self, Sleep(d): Sleep, _: &mut HostContext<Self>) {
        std::thread::sleep(d);
    }
}

fn fast(strategy: Strategy, max_restarts: u32) -> SupervisorConfig {
    SupervisorConfig {
        strategy,
        intensity: Intensity {
            max_restarts,
            window: Duration::from_secs(10),
        },
        backoff: BackoffPolicy {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(400),
            reset_after: Duration::from_secs(60),
            jitter: false,
            growth: Default::default(),
        },
        shutdown_timeout: Duration::from_secs(1),
    }
}

fn worker(
    name: &'static str,
    log: &Log,
) -> impl Fn() -> Result<Worker, homeagent_actors::supervisor::StartError> + Send + Sync + 'static {
    let log = log.clone();
    move || Ok(Worker { name, log: log.clone() })
}

/// Waits for `cond`; the bound is generous (a loaded CI machine is slow, not wrong).
async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if cond() {
            return;
        }
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

fn setup(
    config: SupervisorConfig,
) -> (
    Arc<Registry>,
    homeagent_actors::SupervisorRef,
    tokio::sync::oneshot::Receiver<Exit>,
) {
    let registry = Arc::new(Registry::default());
    let (root, exit) = start_root(registry.clone(), EventBus::default(), "kernel", config).unwrap();
    (registry, root, exit)
}

#[actix_rt::test]
async fn panicking_child_is_restarted_after_the_backoff() {
    let log = Log::default();
    let (registry, root, _exit) = setup(fast(Strategy::OneForOne, 5));
    let a = root
        .worker("a", RestartPolicy::Permanent, worker("a", &log))
        .await
        .unwrap();
    assert_eq!(a.send(Ping).await.unwrap(), "a");

    let err = a.send(Boom).await.unwrap_err();
    assert!(err.to_string().contains("boom in a"), "the caller learns why: {err}");
    let stats = registry.get("kernel/a").unwrap();
    // Visible in backoff before the restart (initial delay 50 ms).
    wait_for("backoff state", || stats.state() == ActorState::Backoff).await;
    assert!(stats.last_exit().unwrap().starts_with("panic: boom in a"));
    assert!(a.do_send(Ping).is_err(), "no instance while in backoff");
    wait_for("restart", || stats.state() == ActorState::Running).await;
    assert_eq!(stats.restarts(), 1);
    assert_eq!(
        a.send(Ping).await.unwrap(),
        "a",
        "the same address reaches the new instance"
    );
    assert_eq!(log.lock().iter().filter(|l| *l == "start a").count(), 2);
}

#[actix_rt::test]
async fn panic_in_a_spawned_future_is_reported_not_lost() {
    let log = Log::default();
    let (registry, root, _exit) = setup(fast(Strategy::OneForOne, 5));
    let a = root
        .worker("a", RestartPolicy::Permanent, worker("a", &log))
        .await
        .unwrap();
    a.do_send(BoomLater).unwrap();
    let stats = registry.get("kernel/a").unwrap();
    wait_for("restart", || {
        stats.restarts() == 1 && stats.state() == ActorState::Running
    })
    .await;
    assert!(
        stats.last_exit().unwrap().contains("boom in a spawned future"),
        "{:?}",
        stats.last_exit()
    );
}

#[actix_rt::test]
async fn transient_child_is_not_restarted_after_a_normal_exit() {
    let log = Log::default();
    let (registry, root, _exit) = setup(fast(Strategy::OneForOne, 5));
    let t = root
        .worker("t", RestartPolicy::Transient, worker("t", &log))
        .await
        .unwrap();
    t.do_send(Quit).unwrap();
    let stats = registry.get("kernel/t").unwrap();
    wait_for("stopped", || stats.state() == ActorState::Stopped).await;
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(stats.state(), ActorState::Stopped);
    assert_eq!(stats.restarts(), 0);
    assert_eq!(stats.last_exit().as_deref(), Some("normal"));
}

#[actix_rt::test]
async fn temporary_child_never_restarts() {
    let log = Log::default();
    let (registry, root, _exit) = setup(fast(Strategy::OneForOne, 5));
    let t = root
        .worker("tmp", RestartPolicy::Temporary, worker("tmp", &log))
        .await
        .unwrap();
    let _ = t.send(Boom).await;
    let stats = registry.get("kernel/tmp").unwrap();
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stats.state(), ActorState::Failed);
    assert_eq!(stats.restarts(), 0);
}

#[actix_rt::test]
async fn rest_for_one_restarts_only_later_siblings() {
    let log = Log::default();
    let (registry, root, _exit) = setup(fast(Strategy::RestForOne, 5));
    let _a = root
        .worker("a", RestartPolicy::Permanent, worker("a", &log))
        .await
        .unwrap();
    let b = root
        .worker("b", RestartPolicy::Permanent, worker("b", &log))
        .await
        .unwrap();
    let _c = root
        .worker("c", RestartPolicy::Permanent, worker("c", &log))
        .await
        .unwrap();
    log.lock().clear();
    let _ = b.send(Boom).await;
    let c_stats = registry.get("kernel/c").unwrap();
    wait_for("c restarted", || {
        c_stats.restarts() == 1 && c_stats.state() == ActorState::Running
    })
    .await;
    assert_eq!(
        *log.lock(),
        vec!["stop b", "stop c", "start b", "start c"],
        "b crashed (its cleanup hook still ran), c was stopped, then b and c restarted in order"
    );
    assert_eq!(
        registry.get("kernel/a").unwrap().restarts(),
        0,
        "earlier sibling untouched"
    );
    assert_eq!(registry.get("kernel/b").unwrap().restarts(), 1);
}

#[actix_rt::test]
async fn intensity_exceeded_stops_children_in_reverse_and_escalates() {
    let log = Log::default();
    let (registry, root, root_exit) = setup(fast(Strategy::OneForOne, 10));
    let sub = root
        .supervisor("sub", RestartPolicy::Temporary, fast(Strategy::OneForOne, 2))
        .await
        .unwrap();
    let x = sub
        .worker("x", RestartPolicy::Permanent, worker("x", &log))
        .await
        .unwrap();
    let _y = sub
        .worker("y", RestartPolicy::Permanent, worker("y", &log))
        .await
        .unwrap();
    let _z = sub
        .worker("z", RestartPolicy::Permanent, worker("z", &log))
        .await
        .unwrap();
    let mut events = root.bus().subscribe();
    let x_stats = registry.get("kernel/sub/x").unwrap();
    for round in 1..=2u64 {
        let _ = x.send(Boom).await;
        wait_for("x restarted", || {
            x_stats.restarts() == round && x_stats.state() == ActorState::Running
        })
        .await;
    }
    log.lock().clear();
    let _ = x.send(Boom).await; // third crash within the window: more than 2
    let sub_stats = registry.get("kernel/sub").unwrap();
    wait_for("sub failed", || sub_stats.state() == ActorState::Failed).await;
    assert_eq!(
        *log.lock(),
        vec!["stop x", "stop z", "stop y"],
        "x crashed, then siblings stopped in reverse start order"
    );
    assert!(sub_stats.last_exit().unwrap().contains("restart intensity exceeded"));
    let mut escalated = false;
    while let Ok(ev) = events.try_recv() {
        escalated |=
            matches!(&ev.event, homeagent_actors::bus::Event::SupervisorEscalated { id, .. } if id == "kernel/sub");
    }
    assert!(escalated, "escalation is published on the bus");
    // The root (temporary child policy for `sub`) keeps running.
    assert_eq!(registry.get("kernel").unwrap().state(), ActorState::Running);
    drop(root_exit);
}

#[actix_rt::test]
async fn escalation_reaches_the_parent_which_restarts_the_subtree() {
    let log = Log::default();
    let (registry, root, _exit) = setup(fast(Strategy::OneForOne, 10));
    let sub = root
        .supervisor("sub", RestartPolicy::Permanent, fast(Strategy::OneForOne, 0))
        .await
        .unwrap();
    let x = sub
        .worker("x", RestartPolicy::Permanent, worker("x", &log))
        .await
        .unwrap();
    let _ = x.send(Boom).await;
    let sub_stats = registry.get("kernel/sub").unwrap();
    wait_for("sub restarted by root", || {
        sub_stats.restarts() == 1 && sub_stats.state() == ActorState::Running
    })
    .await;
    wait_for("x back", || {
        registry.get("kernel/sub/x").unwrap().state() == ActorState::Running
    })
    .await;
    assert_eq!(
        x.send(Ping).await.unwrap(),
        "x",
        "the subtree came back with its children"
    );
}

#[actix_rt::test]
async fn operator_restart_and_orderly_shutdown() {
    let log = Log::default();
    let (registry, root, exit) = setup(fast(Strategy::OneForOne, 5));
    for name in ["a", "b", "c"] {
        root.worker(name, RestartPolicy::Permanent, worker(name, &log))
            .await
            .unwrap();
    }
    let n = homeagent_actors::supervisor::restart_actor(&registry, "kernel/b")
        .await
        .unwrap();
    assert_eq!(n, 1);
    let b = registry.get("kernel/b").unwrap();
    wait_for("b running", || b.state() == ActorState::Running && b.restarts() == 1).await;
    assert!(matches!(
        homeagent_actors::supervisor::restart_actor(&registry, "kernel").await,
        Err(homeagent_actors::supervisor::RestartError::NotRestartable(_))
    ));
    assert!(matches!(
        homeagent_actors::supervisor::restart_actor(&registry, "kernel/nope").await,
        Err(homeagent_actors::supervisor::RestartError::Unknown(_))
    ));
    log.lock().clear();
    root.addr().raw().unwrap().do_send(homeagent_actors::Shutdown);
    let reason = tokio::time::timeout(Duration::from_secs(5), exit)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reason, Exit::Shutdown);
    assert_eq!(*log.lock(), vec!["stop c", "stop b", "stop a"]);
}

#[actix_rt::test]
async fn mailbox_counters_track_queue_and_busy_time() {
    let log = Log::default();
    let registry = Arc::new(Registry::new(Duration::from_millis(50)));
    let (root, _exit) = start_root(
        registry.clone(),
        EventBus::default(),
        "kernel",
        fast(Strategy::OneForOne, 5),
    )
    .unwrap();
    let arb = Arbiter::new();
    let w = root
        .worker_on(arb.handle(), "slow", RestartPolicy::Permanent, worker("slow", &log))
        .await
        .unwrap();
    w.do_send(Sleep(Duration::from_millis(300))).unwrap();
    for _ in 0..5 {
        w.do_send(Ping).unwrap();
    }
    actix_rt::time::sleep(Duration::from_millis(150)).await;
    let snap = registry.snapshot().into_iter().find(|s| s.id == "kernel/slow").unwrap();
    assert_eq!(snap.state, ActorState::Busy);
    assert!(snap.stuck, "busy longer than the 50 ms threshold: {snap:?}");
    assert_eq!(snap.queued, 5);
    assert!(snap.oldest_queued_ms >= 100, "{snap:?}");
    assert!(snap.busy_ms >= 100);
    assert!(snap.restartable);
    wait_for("drained", || registry.get("kernel/slow").unwrap().handled() == 6).await;
    let snap = registry.snapshot().into_iter().find(|s| s.id == "kernel/slow").unwrap();
    assert_eq!(
        (snap.queued, snap.oldest_queued_ms, snap.state),
        (0, 0, ActorState::Running)
    );
    arb.stop();
}

#[actix_rt::test]
async fn start_failure_is_retried_with_backoff() {
    let (registry, root, _exit) = setup(fast(Strategy::OneForOne, 5));
    let tries = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let t = tries.clone();
    let log = Log::default();
    let l = log.clone();
    let err = root
        .worker("flaky", RestartPolicy::Permanent, move || {
            if t.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
                Err("database locked".into())
            } else {
                Ok(Worker {
                    name: "flaky",
                    log: l.clone(),
                })
            }
        })
        .await
        .err()
        .expect("first start fails");
    assert!(err.to_string().contains("database locked"));
    let stats = registry.get("kernel/flaky").unwrap();
    wait_for("eventually running", || stats.state() == ActorState::Running).await;
    assert_eq!(tries.load(std::sync::atomic::Ordering::SeqCst), 3);
}
