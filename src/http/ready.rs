//! Readiness: the HTTP server binds before the kernel boots, so `/healthz` answers a
//! few milliseconds after exec (the runtime target is ≤ 40 ms) while the memory tiers,
//! the agent, the Lua states and the plugin processes come up behind it.
//!
//! Why requests wait instead of failing: a client that saw `/healthz` answer and then
//! sends a message must not get an error for being early, and the first turn must see
//! every plugin's tools. So every route but `/healthz`, `/readyz` and `/login` waits
//! here until the boot graph has run (at most [`BOOT_WAIT`], then 503), and only then
//! reaches its handler, which finds the kernel's handles ([`AppState`]) as request data.
//! `/readyz` says which phase it is for those who poll instead (200 once booted).

use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};
use homeagent_actors::i18n::Msg;
use serde::Serialize;

use super::AppState;

/// How long a request waits for the boot before it is answered 503.
pub const BOOT_WAIT: Duration = Duration::from_secs(60);

/// The kernel's handles ([`AppState`]; generic for the tests) once the boot graph has
/// run; shared by every HTTP worker.
pub struct Readiness<T = AppState> {
    app: OnceLock<web::Data<T>>,
    booted: tokio::sync::Notify,
    /// The start failed and the daemon serves the recovery page (`homed --failback`).
    recovery: std::sync::atomic::AtomicBool,
}

impl<T> Default for Readiness<T> {
    fn default() -> Self {
        Self {
            app: OnceLock::new(),
            booted: tokio::sync::Notify::new(),
            recovery: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl<T: 'static> Readiness<T> {
    /// The boot is done: requests waiting go on, later ones do not wait.
    pub fn set(&self, app: T) {
        if self.app.set(web::Data::new(app)).is_err() {
            tracing::error!("the kernel was marked ready twice; the second state is ignored");
        }
        self.booted.notify_waiters();
    }

    pub fn is_ready(&self) -> bool {
        self.app.get().is_some()
    }

    /// The start failed: no kernel will come; requests stop waiting for one.
    pub fn set_recovery(&self) {
        self.recovery.store(true, std::sync::atomic::Ordering::SeqCst);
        self.booted.notify_waiters();
    }

    pub fn in_recovery(&self) -> bool {
        self.recovery.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The handles, waiting for the boot up to `wait`.
    async fn app(&self, wait: Duration) -> Option<&web::Data<T>> {
        if let Some(app) = self.app.get() {
            return Some(app);
        }
        let booted = self.booted.notified();
        tokio::pin!(booted);
        // Registered before the second look, so a `set` between the two is not missed.
        booted.as_mut().enable();
        if let Some(app) = self.app.get() {
            return Some(app);
        }
        let _ = tokio::time::timeout(wait, booted).await;
        self.app.get()
    }
}

/// Routes that answer during the boot.
fn answers_while_booting(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/login")
}

/// What answers in recovery mode: the recovery routes, the restart, and the page's
/// own files (every other API route needs the kernel that did not start).
fn answers_in_recovery(path: &str) -> bool {
    path == "/api/v1/recovery"
        || path.starts_with("/api/v1/recovery/")
        || path == "/api/v1/daemon/restart"
        || !path.starts_with("/api/")
}

/// The answer of a route that needs the kernel, in recovery mode.
fn recovery_refusal(req: ServiceRequest) -> ServiceResponse<BoxBody> {
    let body = super::error::ErrorBody {
        error: Msg::RecoveryMode.text(),
    };
    req.into_response(HttpResponse::ServiceUnavailable().json(body))
        .map_into_boxed_body()
}

/// The middleware (inside the gate, so a refused request never waits).
pub async fn wait_for_boot(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    wait_for::<AppState>(req, next).await
}

/// [`wait_for_boot`] for handles of type `T`.
async fn wait_for<T: 'static>(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if answers_while_booting(req.path()) {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    }
    let Some(ready) = req.app_data::<web::Data<Readiness<T>>>().cloned() else {
        return Ok(req
            .into_response(HttpResponse::InternalServerError().json(super::error::ErrorBody {
                error: "the daemon's readiness gate is not configured; this is a bug, restart homed".into(),
            }))
            .map_into_boxed_body());
    };
    if ready.in_recovery() {
        let path = req.path();
        if path == "/" || path == "/index.html" {
            return Ok(req
                .into_response(super::assets::page("recovery.html"))
                .map_into_boxed_body());
        }
        if answers_in_recovery(path) {
            return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
        }
        return Ok(recovery_refusal(req));
    }
    let Some(app) = ready.app(BOOT_WAIT).await else {
        if ready.in_recovery() {
            return Ok(recovery_refusal(req));
        }
        tracing::warn!(
            path = req.path(),
            "a request waited {BOOT_WAIT:?} for the boot; answered 503"
        );
        let body = super::error::ErrorBody {
            error: Msg::StillStarting {
                waited_secs: BOOT_WAIT.as_secs(),
            }
            .text(),
        };
        return Ok(req
            .into_response(HttpResponse::ServiceUnavailable().json(body))
            .map_into_boxed_body());
    };
    let mut data = Extensions::new();
    data.insert(app.clone());
    req.add_data_container(Rc::new(data));
    next.call(req).await.map(ServiceResponse::map_into_boxed_body)
}

/// Body of `GET /readyz`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Ready {
    /// `ready` once the kernel has booted (every module, plugins included), `recovery`
    /// when the start failed and the recovery page is served (`homed --failback`),
    /// else `starting`.
    pub status: &'static str,
}

#[utoipa::path(
    get, path = "/readyz", tag = "daemon",
    responses(
        (status = 200, description = "The kernel has booted", body = Ready),
        (status = 503, description = "Still booting: other routes wait for it", body = Ready),
    )
)]
pub async fn readyz(ready: web::Data<Readiness>) -> HttpResponse {
    readyz_of(&ready)
}

fn readyz_of<T: 'static>(ready: &Readiness<T>) -> HttpResponse {
    if ready.is_ready() {
        HttpResponse::Ok().json(Ready { status: "ready" })
    } else if ready.in_recovery() {
        HttpResponse::ServiceUnavailable().json(Ready { status: "recovery" })
    } else {
        HttpResponse::ServiceUnavailable().json(Ready { status: "starting" })
    }
}

#[cfg(test)]
mod tests {
    use actix_web::App;
    use actix_web::test as web_test;

    use super::*;

    /// Stands in for the kernel's handles.
    struct Kernel(&'static str);

    async fn gate(
        req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
        wait_for::<Kernel>(req, next).await
    }

    #[actix_web::test]
    async fn a_request_sent_during_the_boot_waits_for_it_then_reaches_the_kernel() {
        let ready = web::Data::new(Readiness::<Kernel>::default());
        let app = web_test::init_service(
            App::new()
                .app_data(ready.clone())
                .wrap(actix_web::middleware::from_fn(gate))
                .route("/healthz", web::get().to(|| async { "ok" }))
                .route(
                    "/readyz",
                    web::get().to(|r: web::Data<Readiness<Kernel>>| async move { readyz_of(&r) }),
                )
                .route("/api", web::get().to(|k: web::Data<Kernel>| async move { k.0 })),
        )
        .await;
        let get = |uri: &str| web_test::TestRequest::get().uri(uri).to_request();
        // During the boot: alive, not ready.
        assert_eq!(web_test::call_service(&app, get("/healthz")).await.status(), 200);
        let r = web_test::call_service(&app, get("/readyz")).await;
        assert_eq!(r.status(), 503);
        assert_eq!(web_test::read_body(r).await, r#"{"status":"starting"}"#);
        // A request now waits (still pending after the runtime ran everything else)...
        let mut early = Box::pin(web_test::call_service(&app, get("/api")));
        for _ in 0..10 {
            assert!(futures_util::poll!(early.as_mut()).is_pending());
            actix_web::rt::task::yield_now().await;
        }
        // ...and reaches the kernel's handles once the boot is done.
        ready.set(Kernel("booted"));
        let r = early.await;
        assert_eq!(r.status(), 200);
        assert_eq!(web_test::read_body(r).await, "booted");
        assert_eq!(
            web_test::read_body(web_test::call_service(&app, get("/api")).await).await,
            "booted"
        );
        let r = web_test::call_service(&app, get("/readyz")).await;
        assert_eq!(
            (r.status(), web_test::read_body(r).await),
            (200.try_into().unwrap(), r#"{"status":"ready"}"#.into())
        );
    }

    #[actix_web::test]
    async fn a_boot_that_never_ends_answers_503_with_what_to_do() {
        let ready = Readiness::<Kernel>::default();
        assert!(ready.app(Duration::from_millis(20)).await.is_none());
        let text = Msg::StillStarting { waited_secs: 60 }.render(homeagent_actors::i18n::Lang::En);
        assert!(text.contains("retry") && text.contains("/readyz"), "{text}");
    }

    #[test]
    fn only_health_readiness_and_login_skip_the_wait() {
        for p in ["/healthz", "/readyz", "/login"] {
            assert!(answers_while_booting(p), "{p}");
        }
        for p in [
            "/",
            "/api/v1/messages",
            "/api/v1/actors",
            "/v1/chat/completions",
            "/healthz/x",
        ] {
            assert!(!answers_while_booting(p), "{p}");
        }
    }
}
