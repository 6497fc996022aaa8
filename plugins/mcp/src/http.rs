//! The Streamable HTTP transport's HTTP side (MCP 2025-11-25 "Transports"): every
//! message is a POST to the endpoint with `Accept: application/json,
//! text/event-stream`; the answer is JSON, an SSE stream, or 202 for notifications
//! and responses. The session id the server assigns is kept and sent, and so is the
//! negotiated `MCP-Protocol-Version`; a GET opens the stream of server-initiated
//! messages (or resumes one with `Last-Event-ID`); DELETE ends the session.
//!
//! A 401 runs the OAuth flow ([`crate::oauth`]) and retries; a 403
//! `insufficient_scope` asks for more scope and retries; both at most
//! [`oauth::MAX_AUTHORIZATIONS`] times per request.
//!
//! Blocking reqwest on plain threads, like the rest of the bridge (see
//! docs/DEPENDENCIES.md): each POST is answered on a thread of its own (in
//! [`crate::client`]), so a long SSE answer blocks nothing else.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::blocking::{Client as Http, RequestBuilder, Response};
use reqwest::{Method, StatusCode, Url};

use crate::config::HttpConfig;
use crate::oauth::{self, Challenge, Session};

/// Time to open a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest JSON answer read (a hostile or broken server cannot fill the memory).
pub const MAX_BODY: u64 = 8 * 1024 * 1024;
/// Largest error body read (only its start is shown).
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// Reads at most `max` bytes of a body as text ([`crate::body::read_capped`]).
fn read_capped(resp: Response, max: u64) -> Result<String, HttpError> {
    crate::body::read_capped(resp, max).map_err(HttpError::Net)
}

/// What a POST brought back.
pub enum Answer {
    /// 202 (or an empty 2xx): nothing to read.
    Accepted,
    /// A JSON body: one message or a batch.
    Json(String),
    /// An SSE stream to read events from.
    Stream(Response),
}

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// 404 to a request carrying a session id: the server forgot the session; the
    /// client must initialize a new one.
    SessionGone,
    /// Authorization failed or was refused (what to do next is in the message).
    Auth(String),
    /// Another HTTP status, with the start of its body.
    Status(u16, String),
    /// The connection failed.
    Net(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::SessionGone => {
                f.write_str("the server ended the MCP session (404); reconnecting starts a new one")
            }
            HttpError::Auth(m) => write!(f, "authorization failed: {m}"),
            HttpError::Status(s, b) => write!(f, "HTTP {s}: {b}"),
            HttpError::Net(m) => write!(f, "connection failed: {m}"),
        }
    }
}

/// One remote server's HTTP state.
pub struct Conn {
    pub url: Url,
    headers: BTreeMap<String, String>,
    http: Http,
    session: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
    auth: Mutex<Session>,
}

impl Conn {
    pub fn new(cfg: &HttpConfig) -> Result<Conn, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = Url::parse(&cfg.url).map_err(|e| format!("`{}` is not a URL: {e}", cfg.url))?;
        // No overall timeout: a GET stream lives as long as the session. Each POST
        // sets its own.
        let http = Http::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(None::<Duration>)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
        Ok(Conn {
            auth: Mutex::new(Session::new(cfg.oauth.clone(), url.clone(), http.clone())),
            url,
            headers: cfg.headers.clone(),
            http,
            session: Mutex::new(None),
            version: Mutex::new(None),
        })
    }

    /// The session id the server assigned, if any.
    pub fn session(&self) -> Option<String> {
        self.session.lock().expect("session lock").clone()
    }

    /// The negotiated version, sent as `MCP-Protocol-Version` from now on.
    pub fn set_version(&self, v: &str) {
        *self.version.lock().expect("version lock") = Some(v.to_owned());
    }

    fn build(&self, method: Method, accept: &str, bearer: Option<&str>) -> RequestBuilder {
        let mut r = self.http.request(method, self.url.clone()).header("Accept", accept);
        for (k, v) in &self.headers {
            r = r.header(k, v);
        }
        if let Some(s) = self.session() {
            r = r.header("Mcp-Session-Id", s);
        }
        if let Some(v) = self.version.lock().expect("version lock").clone() {
            r = r.header("MCP-Protocol-Version", v);
        }
        if let Some(t) = bearer {
            r = r.header("Authorization", format!("Bearer {t}"));
        }
        r
    }

    /// Sends one request, authorizing on 401/403 as the spec says, and keeps the
    /// session id of the answer.
    fn send(
        &self,
        method: Method,
        accept: &str,
        body: Option<&str>,
        last_event_id: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Response, HttpError> {
        let mut authorizations = 0;
        loop {
            let bearer = self.auth.lock().expect("auth lock").bearer();
            let had_session = self.session().is_some();
            let mut r = self.build(method.clone(), accept, bearer.as_deref());
            if let Some(b) = body {
                r = r.header("Content-Type", "application/json").body(b.to_owned());
            }
            if let Some(id) = last_event_id {
                r = r.header("Last-Event-ID", id);
            }
            if let Some(t) = timeout {
                r = r.timeout(t);
            }
            let resp = r.send().map_err(|e| HttpError::Net(e.to_string()))?;
            if let Some(s) = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
                let mut cur = self.session.lock().expect("session lock");
                if cur.as_deref() != Some(s) {
                    *cur = Some(s.to_owned());
                }
            }
            let status = resp.status();
            let challenge = || {
                resp.headers()
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok())
                    .map(oauth::parse_challenge)
                    .unwrap_or_default()
            };
            let step_up = status == StatusCode::FORBIDDEN && challenge().error.as_deref() == Some("insufficient_scope");
            if status == StatusCode::UNAUTHORIZED || step_up {
                let ch: Challenge = challenge();
                let mut auth = self.auth.lock().expect("auth lock");
                // A rejected token with a refresh token: try the refresh first.
                if authorizations >= oauth::MAX_AUTHORIZATIONS {
                    return Err(HttpError::Auth(format!(
                        "the server still answers {status} after {authorizations} authorizations (scope asked: {}); check the account's permissions at the authorization server",
                        ch.scope.as_deref().unwrap_or("none")
                    )));
                }
                authorizations += 1;
                if status == StatusCode::UNAUTHORIZED && bearer.is_some() && auth.has_token() && auth.refresh() {
                    continue;
                }
                eprintln!(
                    "mcp: {} answered {status}; authorizing (attempt {authorizations})",
                    self.url
                );
                auth.authorize(&ch).map_err(HttpError::Auth)?;
                continue;
            }
            if status == StatusCode::NOT_FOUND && had_session {
                return Err(HttpError::SessionGone);
            }
            if !status.is_success() {
                let text = read_capped(resp, MAX_ERROR_BODY).unwrap_or_default();
                return Err(HttpError::Status(status.as_u16(), oauth::snippet(&text)));
            }
            return Ok(resp);
        }
    }

    /// POSTs one JSON-RPC message (request, notification or response).
    pub fn post(&self, body: &str, timeout: Duration) -> Result<Answer, HttpError> {
        let resp = self.send(
            Method::POST,
            "application/json, text/event-stream",
            Some(body),
            None,
            Some(timeout),
        )?;
        let kind = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if resp.status() == StatusCode::ACCEPTED {
            return Ok(Answer::Accepted);
        }
        if kind.starts_with("text/event-stream") {
            return Ok(Answer::Stream(resp));
        }
        let text = read_capped(resp, MAX_BODY)?;
        if text.trim().is_empty() {
            Ok(Answer::Accepted)
        } else {
            Ok(Answer::Json(text))
        }
    }

    /// Opens the GET stream (resuming after `last_event_id` when given); `None` when
    /// the server offers none (405, or another 4xx).
    pub fn get_stream(&self, last_event_id: Option<&str>) -> Result<Option<Response>, HttpError> {
        match self.send(Method::GET, "text/event-stream", None, last_event_id, None) {
            Ok(r) => Ok(Some(r)),
            Err(HttpError::Status(405, _)) => Ok(None),
            Err(HttpError::Status(s, b)) if (400..500).contains(&s) => {
                eprintln!("mcp: {} offers no GET stream (HTTP {s}: {b})", self.url);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Ends the session at the server (best effort: a 405 means it does not allow it).
    pub fn delete(&self) {
        if self.session().is_none() {
            return;
        }
        let bearer = self.auth.lock().expect("auth lock").bearer();
        let r = self
            .build(Method::DELETE, "application/json", bearer.as_deref())
            .timeout(Duration::from_secs(5))
            .send();
        if let Err(e) = r {
            eprintln!("mcp: DELETE of the session at {} failed: {e}", self.url);
        }
    }
}
