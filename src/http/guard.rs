//! The HTTP gate: who may talk to this daemon, from where.
//!
//! Three checks, in this order, on every request (only `/healthz`, `/readyz` and `/login`
//! skip the last):
//!
//! 1. **Host** must name this daemon — a loopback name or address, the listen address,
//!    or one of `core.daemon.allowed_hosts`. A page on `attacker.example` whose name was
//!    rebound to 127.0.0.1 (DNS rebinding) sends `Host: attacker.example` and is refused.
//! 2. **Origin**: a state-changing request (anything but GET/HEAD/OPTIONS) that comes
//!    from a browser page of another *origin* is refused — the `text/plain` or form
//!    POST that needs no CORS preflight. Origins are compared whole (host *and* port,
//!    against the `Host` the request was sent to): a page on another port of
//!    127.0.0.1 is the same *site* as the WebUI, and the owner's `SameSite=Strict`
//!    cookie goes along with its requests, but it is not the WebUI. `Sec-Fetch-Site`
//!    other than `same-origin` or `none` (typed by the user) is refused as well.
//! 3. **The owner token**: `Authorization: Bearer <token>`, or the WebUI's session cookie
//!    (`HttpOnly`, `SameSite=Strict`, obtained at `/login`). A write authenticated by
//!    the cookie alone must also prove it comes from the WebUI's own pages: an `Origin`
//!    equal to this daemon's or `Sec-Fetch-Site: same-origin` (every current browser
//!    sends one of them; a client without either uses the bearer token). Without the
//!    token the API answers 401 with where the token is, and the WebUI shows its login
//!    page.
//!
//! No CORS headers are ever sent, so no other origin can read an answer.

use std::net::SocketAddr;
use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};
use parking_lot::RwLock;

use crate::auth::{Owner, SESSION_COOKIE};

/// What the gate knows: the token, the listen address and the extra allowed hosts.
pub struct Gate {
    pub owner: Owner,
    pub listen: SocketAddr,
    /// `core.daemon.allowed_hosts` (lower-case host names or addresses, no port).
    pub allowed_hosts: RwLock<Vec<String>>,
}

/// A refused request: the status and the JSON error.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    ForeignHost(String),
    CrossSite(String),
    NoToken,
}

impl Refusal {
    fn response(&self, path: &str) -> HttpResponse {
        let (status, msg) = match self {
            Self::ForeignHost(h) => (
                StatusCode::FORBIDDEN,
                format!(
                    "Host `{h}` is not this daemon's name; use http://127.0.0.1:<port>/ or add the name to core.daemon.allowed_hosts"
                ),
            ),
            Self::CrossSite(o) => (
                StatusCode::FORBIDDEN,
                format!(
                    "cross-site request from `{o}` refused; state-changing requests must come from the daemon's own pages or a non-browser client"
                ),
            ),
            Self::NoToken if path == "/v1" || path.starts_with("/v1/") => {
                // OpenAI clients read `error.message` of OpenAI's error shape.
                let msg = "missing or wrong API key: send the owner token as `Authorization: Bearer <token>` (the OpenAI SDKs' api_key); it is in DATA/api-token (`homed token` prints it)";
                return HttpResponse::Unauthorized().json(super::openai::OpenAiError::body(
                    StatusCode::UNAUTHORIZED,
                    msg,
                    None,
                    Some("invalid_api_key"),
                ));
            }
            Self::NoToken => {
                if !path.starts_with("/api/") {
                    return HttpResponse::Unauthorized()
                        .content_type("text/html; charset=utf-8")
                        .insert_header((header::CACHE_CONTROL, "no-store"))
                        .body(login_page());
                }
                (
                    StatusCode::UNAUTHORIZED,
                    "missing or wrong API token: send `Authorization: Bearer <token>`; the token is in DATA/api-token (`homed token` prints it)".to_owned(),
                )
            }
        };
        HttpResponse::build(status).json(serde_json::json!({ "error": msg }))
    }
}

/// The host part of a `Host` or `Origin` authority (`[::1]:8080` → `::1`), lower-cased.
fn host_of(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_owned();
    }
    a.rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(a.clone(), |(h, _)| h.to_owned())
}

/// Whether the page `origin` (`scheme://authority`) is the one the request was sent to
/// (`host`, the `Host` header): same host and same port, a missing port being the
/// scheme's default. The scheme itself is not compared: behind a TLS proxy the page is
/// `https://name` while the daemon is reached as plain `name`.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => "443",
        "http" => "80",
        _ => return false,
    };
    let split = |a: &str| -> (String, String) {
        let a = a.trim().to_ascii_lowercase();
        let port = match a.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => p.to_owned(),
            _ => default.to_owned(),
        };
        (host_of(&a), port)
    };
    let (o, h) = (split(authority), split(host));
    !o.0.is_empty() && o == h
}

impl Gate {
    /// Whether `host` (no port) names this daemon.
    fn host_allowed(&self, host: &str) -> bool {
        if host.is_empty() {
            return false;
        }
        if host == "localhost" || host.ends_with(".localhost") {
            return true;
        }
        if let Ok(ip) = host.parse::<std::net::IpAddr>() {
            let ip = ip.to_canonical();
            if ip.is_loopback() || ip == self.listen.ip().to_canonical() {
                return true;
            }
        }
        self.allowed_hosts.read().iter().any(|h| h == host)
    }

    /// The decision for one request: `None` lets it through.
    pub fn check(&self, method: &Method, path: &str, headers: &header::HeaderMap) -> Option<Refusal> {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
        let host = host_of(text("host"));
        if !self.host_allowed(&host) {
            return Some(Refusal::ForeignHost(host));
        }
        let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        let origin = text("origin");
        let fetch_site = text("sec-fetch-site");
        if !safe {
            if !matches!(fetch_site, "" | "same-origin" | "none") {
                return Some(Refusal::CrossSite(origin.to_owned()));
            }
            if !origin.is_empty() && !same_origin(origin, text("host")) {
                return Some(Refusal::CrossSite(origin.to_owned()));
            }
        }
        if path == "/healthz" || path == "/readyz" || path == "/login" {
            return None;
        }
        let bearer = text("authorization").strip_prefix("Bearer ").unwrap_or("").trim();
        if !bearer.is_empty() && self.owner.token_ok(bearer) {
            return None;
        }
        let cookie = text("cookie")
            .split(';')
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == SESSION_COOKIE)
            .map_or("", |(_, v)| v);
        if !cookie.is_empty() && self.owner.session_ok(cookie) {
            // A cookie rides along with any request the browser makes; a write needs
            // the browser's word that the WebUI's own page made it (checked above).
            if safe || !origin.is_empty() || fetch_site == "same-origin" {
                return None;
            }
            return Some(Refusal::CrossSite(String::new()));
        }
        Some(Refusal::NoToken)
    }
}

/// The middleware around every route.
pub async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    // Fail closed: an app built without a gate serves nothing.
    let Some(gate) = req.app_data::<web::Data<Arc<Gate>>>().cloned() else {
        tracing::error!("the HTTP gate is not configured; refusing every request");
        return Ok(req
            .into_response(HttpResponse::InternalServerError().json(serde_json::json!({
                "error": "the daemon's HTTP gate is not configured; this is a bug, restart homed"
            })))
            .map_into_boxed_body());
    };
    if let Some(refusal) = gate.check(req.method(), req.path(), req.headers()) {
        tracing::debug!(path = req.path(), ?refusal, "request refused by the gate");
        let path = req.path().to_owned();
        return Ok(req.into_response(refusal.response(&path)).map_into_boxed_body());
    }
    next.call(req).await.map(ServiceResponse::map_into_boxed_body)
}

/// `GET /login?token=…` (the login URL of the ready line) or `POST /login` with
/// `{"token": …}` (the login page): sets the session cookie and goes to the WebUI.
pub async fn login(
    gate: web::Data<Arc<Gate>>,
    query: web::Query<std::collections::HashMap<String, String>>,
    body: Option<web::Json<serde_json::Value>>,
) -> HttpResponse {
    let token = body
        .as_ref()
        .and_then(|b| b.get("token").and_then(|t| t.as_str()).map(str::to_owned))
        .or_else(|| query.get("token").cloned())
        .unwrap_or_default();
    if token.is_empty() || !gate.owner.token_ok(token.trim()) {
        tracing::warn!("a login with a wrong token was refused");
        return HttpResponse::Unauthorized().json(serde_json::json!({
            "error": homeagent_actors::i18n::Msg::LoginWrong.text()
        }));
    }
    // The value is hex, so it needs no quoting; written by hand rather than pulling in
    // actix-web's cookie jar for one header.
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        gate.owner.session()
    );
    HttpResponse::SeeOther()
        .insert_header((header::SET_COOKIE, cookie))
        .insert_header((header::LOCATION, "/"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// The sign-in page in the daemon's language (`core.agent.language`, from the
/// catalog). Its texts have no markup of their own, but are escaped all the same.
fn login_page() -> String {
    use homeagent_actors::i18n::{Lang, Msg, language};
    let esc = |m: Msg| {
        m.text()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    LOGIN_PAGE
        .replace("{lang}", if language() == Lang::Zh { "zh-CN" } else { "en" })
        .replace("{intro}", &esc(Msg::LoginIntro))
        .replace("{field}", &esc(Msg::LoginField))
        .replace("{button}", &esc(Msg::LoginButton))
}

/// Shown instead of the WebUI without a session: one field for the token.
const LOGIN_PAGE: &str = r#"<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>HomeAgent — sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
body{font:15px system-ui,sans-serif;background:#111418;color:#e6e6e6;display:grid;place-items:center;height:100vh;margin:0}
form{background:#1b2026;padding:2rem;border-radius:10px;min-width:22rem}
input{width:100%;box-sizing:border-box;padding:.6rem;margin:.8rem 0;background:#0d1014;color:inherit;border:1px solid #333;border-radius:6px}
button{padding:.6rem 1.2rem;border:0;border-radius:6px;background:#3b82f6;color:#fff;cursor:pointer}
p{color:#9aa4ae;font-size:13px} #err{color:#f87171}
</style></head><body>
<form id="f"><h2>HomeAgent</h2>
<p>{intro}</p>
<input id="t" type="password" autocomplete="current-password" placeholder="{field}" aria-label="{field}" autofocus>
<button>{button}</button><p id="err"></p></form>
<script>
document.getElementById('f').addEventListener('submit', async (e) => {
  e.preventDefault();
  const r = await fetch('/login', {method: 'POST', headers: {'content-type': 'application/json'},
    body: JSON.stringify({token: document.getElementById('t').value.trim()}), redirect: 'manual'});
  if (r.type === 'opaqueredirect' || r.ok) { location.href = '/'; return; }
  const b = await r.json().catch(() => ({}));
  document.getElementById('err').textContent = b.error || ('sign-in failed: ' + r.status);
});
</script></body></html>"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> (tempfile::TempDir, Gate, String) {
        let dir = tempfile::tempdir().unwrap();
        let (token, _) = crate::auth::ensure_token(dir.path()).unwrap();
        let g = Gate {
            owner: Owner::new(dir.path()).unwrap(),
            listen: "127.0.0.1:8080".parse().unwrap(),
            allowed_hosts: RwLock::new(vec!["homed.lan".into()]),
        };
        (dir, g, token)
    }

    fn headers(pairs: &[(&str, &str)]) -> header::HeaderMap {
        let mut h = header::HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                header::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn host_origin_and_token_decide_in_that_order() {
        let (_d, g, token) = gate();
        let bearer = format!("Bearer {token}");
        let ok = |m: Method, path: &str, h: &[(&str, &str)]| g.check(&m, path, &headers(h));
        assert_eq!(ok(Method::GET, "/healthz", &[("host", "127.0.0.1:8080")]), None);
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "homed.lan:8080",
            "app.localhost",
        ] {
            assert_eq!(
                ok(
                    Method::GET,
                    "/api/v1/actors",
                    &[("host", host), ("authorization", &bearer)]
                ),
                None,
                "{host}"
            );
        }
        assert_eq!(
            ok(Method::GET, "/healthz", &[("host", "attacker.example:8080")]),
            Some(Refusal::ForeignHost("attacker.example".into()))
        );
        assert_eq!(
            ok(Method::GET, "/api/v1/actors", &[]),
            Some(Refusal::ForeignHost(String::new()))
        );
        assert_eq!(
            ok(Method::GET, "/api/v1/actors", &[("host", "127.0.0.1")]),
            Some(Refusal::NoToken)
        );
        assert_eq!(
            ok(
                Method::GET,
                "/api/v1/actors",
                &[("host", "127.0.0.1"), ("authorization", "Bearer wrong")]
            ),
            Some(Refusal::NoToken)
        );
        // Cross-site writes are refused even with the token (a page cannot have it, but
        // a browser could send a cookie if SameSite ever failed).
        for origin in ["http://attacker.example", "null", "http://127.0.0.1.attacker.example"] {
            assert_eq!(
                ok(
                    Method::POST,
                    "/api/v1/stop",
                    &[("host", "127.0.0.1"), ("origin", origin), ("authorization", &bearer)]
                ),
                Some(Refusal::CrossSite(origin.into())),
                "{origin}"
            );
        }
        assert_eq!(
            ok(
                Method::POST,
                "/api/v1/stop",
                &[
                    ("host", "127.0.0.1"),
                    ("sec-fetch-site", "cross-site"),
                    ("authorization", &bearer)
                ]
            ),
            Some(Refusal::CrossSite(String::new()))
        );
        assert_eq!(
            ok(
                Method::POST,
                "/api/v1/stop",
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://127.0.0.1:8080"),
                    ("authorization", &bearer)
                ]
            ),
            None
        );
        // Another port of the same host is the same site, not the same origin.
        for (origin, site) in [("http://127.0.0.1:9999", ""), ("http://127.0.0.1:8080", "same-site")] {
            let mut h = vec![
                ("host", "127.0.0.1:8080"),
                ("origin", origin),
                ("authorization", &bearer),
            ];
            if !site.is_empty() {
                h.push(("sec-fetch-site", site));
            }
            assert_eq!(
                ok(Method::POST, "/api/v1/messages", &h),
                Some(Refusal::CrossSite(origin.into())),
                "{origin} {site}"
            );
        }
        let cookie = format!("a=b; {SESSION_COOKIE}={}", crate::auth::session_value(&token));
        // The cookie alone does not make a write: the browser must say whose page it is.
        assert_eq!(
            ok(
                Method::PUT,
                "/api/v1/settings",
                &[("host", "localhost"), ("cookie", &cookie)]
            ),
            Some(Refusal::CrossSite(String::new()))
        );
        for proof in [("origin", "http://localhost"), ("sec-fetch-site", "same-origin")] {
            assert_eq!(
                ok(
                    Method::PUT,
                    "/api/v1/settings",
                    &[("host", "localhost"), ("cookie", &cookie), proof]
                ),
                None,
                "{proof:?}"
            );
        }
        assert_eq!(
            ok(
                Method::GET,
                "/api/v1/actors",
                &[("host", "localhost"), ("cookie", &cookie)]
            ),
            None
        );
        assert_eq!(
            ok(
                Method::GET,
                "/",
                &[("host", "localhost"), ("cookie", "homed_session=x")]
            ),
            Some(Refusal::NoToken)
        );
    }

    #[test]
    fn hosts_are_parsed_without_ports() {
        assert_eq!(host_of("Example.COM:8080"), "example.com");
        assert_eq!(host_of("[::1]:80"), "::1");
        assert_eq!(host_of("127.0.0.1"), "127.0.0.1");
    }
}
