//! The authorization flow of the MCP spec (2025-11-25 "Authorization", with the
//! 2025-03-26 fallbacks) for remote servers that answer 401: protected-resource
//! metadata (RFC 9728), authorization-server metadata (RFC 8414 / OpenID discovery),
//! client id metadata documents, dynamic client registration (RFC 7591), the
//! authorization code grant with PKCE S256, resource indicators (RFC 8707), scope
//! step-up on 403 `insufficient_scope`, and token refresh.
//!
//! The pure parts (challenge parsing, discovery URL order, scope choice, PKCE, client
//! authentication) are functions tested here; [`Session`] runs them over a blocking
//! HTTP client. Tokens live in memory only: a bridge restart authorizes again.
//!
//! The authorization step is "headless": the bridge fetches the authorization URL
//! and takes the code from the redirect. That completes with an authorization server
//! that approves at once (a pre-approved client, a trusted network, the conformance
//! suite); one that shows a sign-in page gets a clear error naming the URL, since the
//! daemon has no browser to show it in.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use reqwest::Url;
use reqwest::blocking::Client as Http;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::{DEFAULT_REDIRECT_URI, OAuthConfig};

/// Most authorizations one request may start (a server that keeps asking for a
/// scope it never grants must not loop us forever).
pub const MAX_AUTHORIZATIONS: u32 = 3;
/// A token this close to its expiry is refreshed before use.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// Time for each authorization-server request.
const AS_TIMEOUT: Duration = Duration::from_secs(30);

/// What a `WWW-Authenticate: Bearer ...` challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

/// Parses the Bearer challenge of a `WWW-Authenticate` header (RFC 6750 §3): the
/// auth-params after the scheme, quoted or not.
pub fn parse_challenge(header: &str) -> Challenge {
    let mut c = Challenge::default();
    let rest = header.trim();
    let rest = match rest.get(..6) {
        Some(s) if s.eq_ignore_ascii_case("bearer") => &rest[6..],
        _ => rest,
    };
    let mut chars = rest.chars().peekable();
    loop {
        // skip separators
        while matches!(chars.peek(), Some(' ' | ',' | '\t')) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|&ch| ch != '=').collect();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(ch) = chars.next() {
                match ch {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => break,
                    _ => value.push(ch),
                }
            }
        } else {
            while let Some(&ch) = chars.peek() {
                if ch == ',' || ch == ' ' {
                    break;
                }
                value.push(ch);
                chars.next();
            }
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "resource_metadata" => c.resource_metadata = Some(value),
            "scope" => c.scope = Some(value),
            "error" => c.error = Some(value),
            _ => {}
        }
    }
    c
}

/// Where to look for the protected-resource metadata when the challenge names no
/// URL: the path-based well-known URL first, then the root one (RFC 9728 §3.1).
pub fn prm_urls(server: &Url) -> Vec<Url> {
    let mut out = Vec::new();
    let path = server.path().trim_end_matches('/');
    let mut root = server.clone();
    root.set_query(None);
    root.set_fragment(None);
    if !path.is_empty() {
        let mut u = root.clone();
        u.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        out.push(u);
    }
    root.set_path("/.well-known/oauth-protected-resource");
    out.push(root);
    out
}

/// Where to look for an authorization server's metadata, in the spec's order: OAuth
/// then OpenID with the issuer's path inserted after the well-known prefix, then
/// OpenID with it appended (only the first two for an issuer without a path).
pub fn as_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut base = issuer.clone();
    base.set_query(None);
    base.set_fragment(None);
    let at = |p: String| {
        let mut u = base.clone();
        u.set_path(&p);
        u
    };
    if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server".into()),
            at("/.well-known/openid-configuration".into()),
        ]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// The resource indicator (RFC 8707) for a server URL: no fragment, no query.
pub fn canonical_resource(server: &Url) -> String {
    let mut u = server.clone();
    u.set_fragment(None);
    u.set_query(None);
    let s = u.to_string();
    // `Url` writes an empty path as "/"; the spec's canonical form drops it.
    if u.path() == "/" {
        s.trim_end_matches('/').to_owned()
    } else {
        s
    }
}

/// The scope to ask for, in the spec's order of preference: the challenge's, the
/// resource metadata's `scopes_supported`, the configured one; none at all otherwise
/// (the authorization server then applies its default).
pub fn choose_scope(challenge: Option<&str>, supported: &[String], configured: Option<&str>) -> Option<String> {
    if let Some(s) = challenge.map(str::trim).filter(|s| !s.is_empty()) {
        return Some(s.to_owned());
    }
    if !supported.is_empty() {
        return Some(supported.join(" "));
    }
    configured.map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// The union of two space-separated scope lists, in order of first appearance.
pub fn union_scopes(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// A PKCE pair: a 43-character verifier from 32 random bytes and its S256 challenge.
pub fn pkce() -> (String, String) {
    let verifier = URL_SAFE_NO_PAD.encode(random_bytes::<32>());
    let challenge = s256(&verifier);
    (verifier, challenge)
}

/// `BASE64URL(SHA256(verifier))`.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the OS random source");
    b
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// A public client: `client_id` in the form.
    None,
    /// HTTP Basic with the id and secret.
    Basic,
    /// `client_id` and `client_secret` in the form.
    Post,
}

/// Picks the token endpoint's client authentication: what registration said, else
/// (with a secret) Basic when the server lists it or lists nothing (RFC 8414's
/// default), Post when only that is listed; a client without a secret is public.
pub fn client_auth(supported: &[String], registered: Option<&str>, has_secret: bool) -> ClientAuth {
    match registered {
        Some("client_secret_basic") if has_secret => return ClientAuth::Basic,
        Some("client_secret_post") if has_secret => return ClientAuth::Post,
        Some("none") => return ClientAuth::None,
        _ => {}
    }
    if !has_secret {
        return ClientAuth::None;
    }
    let lists = |m: &str| supported.iter().any(|s| s == m);
    if supported.is_empty() || lists("client_secret_basic") || !lists("client_secret_post") {
        ClientAuth::Basic
    } else {
        ClientAuth::Post
    }
}

/// The `Authorization` header of client_secret_basic (RFC 6749 §2.3.1: both parts
/// form-encoded first).
pub fn basic_header(id: &str, secret: &str) -> String {
    let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!("Basic {}", STANDARD.encode(format!("{}:{}", enc(id), enc(secret))))
}

/// An authorization server's endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub auth_methods: Vec<String>,
    pub cimd: bool,
    pub pkce_s256: bool,
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

impl Metadata {
    /// Reads an RFC 8414 document.
    pub fn from_json(v: &Value) -> Result<Metadata, String> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let methods = strs(v.get("code_challenge_methods_supported"));
        Ok(Metadata {
            authorization_endpoint: s("authorization_endpoint")
                .ok_or("the authorization server metadata has no authorization_endpoint")?,
            token_endpoint: s("token_endpoint").ok_or("the authorization server metadata has no token_endpoint")?,
            registration_endpoint: s("registration_endpoint"),
            auth_methods: strs(v.get("token_endpoint_auth_methods_supported")),
            cimd: v.get("client_id_metadata_document_supported").and_then(Value::as_bool) == Some(true),
            pkce_s256: methods.iter().any(|m| m == "S256"),
        })
    }

    /// The 2025-03-26 fallback: the default endpoints at the server's origin.
    pub fn fallback(origin: &Url) -> Metadata {
        let at = |p: &str| origin.join(p).map(|u| u.to_string()).unwrap_or_default();
        Metadata {
            authorization_endpoint: at("/authorize"),
            token_endpoint: at("/token"),
            registration_endpoint: Some(at("/register")),
            auth_methods: Vec::new(),
            cimd: false,
            pkce_s256: true,
        }
    }
}

/// Tokens from the token endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    pub access: String,
    pub refresh: Option<String>,
    pub expires_at: Option<Instant>,
    pub scope: Option<String>,
}

/// Reads a token response (RFC 6749 §5.1).
pub fn parse_tokens(v: &Value, asked_scope: Option<&str>) -> Result<Tokens, String> {
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        let d = v.get("error_description").and_then(Value::as_str).unwrap_or("");
        return Err(format!("the token endpoint refused: {e} {d}").trim().to_owned());
    }
    let access = v
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("the token endpoint's answer has no access_token")?;
    Ok(Tokens {
        access: access.to_owned(),
        refresh: v.get("refresh_token").and_then(Value::as_str).map(str::to_owned),
        expires_at: v
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| Instant::now() + Duration::from_secs(s)),
        scope: v
            .get("scope")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| asked_scope.map(str::to_owned)),
    })
}

/// A registered (or configured) client.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Registration {
    id: String,
    secret: Option<String>,
    method: Option<String>,
}

/// The authorization state of one remote server.
pub struct Session {
    cfg: OAuthConfig,
    server: Url,
    http: Http,
    meta: Option<Metadata>,
    client: Option<Registration>,
    resource: Option<String>,
    tokens: Option<Tokens>,
}

impl Session {
    pub fn new(cfg: OAuthConfig, server: Url, http: Http) -> Session {
        let client = cfg.client_id.clone().map(|id| Registration {
            id,
            secret: cfg.client_secret.clone(),
            method: None,
        });
        Session {
            cfg,
            server,
            http,
            meta: None,
            client,
            resource: None,
            tokens: None,
        }
    }

    /// The access token to send, refreshed first when it is about to expire.
    pub fn bearer(&mut self) -> Option<String> {
        let expiring = self
            .tokens
            .as_ref()
            .and_then(|t| t.expires_at)
            .is_some_and(|at| at <= Instant::now() + EXPIRY_MARGIN);
        if expiring && !self.refresh() {
            self.tokens = None;
        }
        self.tokens.as_ref().map(|t| t.access.clone())
    }

    /// Whether we hold a token (a 401 then means it was rejected).
    pub fn has_token(&self) -> bool {
        self.tokens.is_some()
    }

    /// Uses the refresh token; whether a new access token came back.
    pub fn refresh(&mut self) -> bool {
        let (Some(refresh), Some(meta), Some(client)) = (
            self.tokens.as_ref().and_then(|t| t.refresh.clone()),
            self.meta.clone(),
            self.client.clone(),
        ) else {
            return false;
        };
        let scope = self.tokens.as_ref().and_then(|t| t.scope.clone());
        let mut form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh.clone()),
        ];
        if let Some(r) = &self.resource {
            form.push(("resource", r.clone()));
        }
        match self.token_request(&meta, &client, form, scope.as_deref()) {
            Ok(mut t) => {
                // A server may keep the refresh token (no new one in the answer).
                t.refresh = t.refresh.or(Some(refresh));
                tracing_log(&format!("refreshed the access token of {}", self.server));
                self.tokens = Some(t);
                true
            }
            Err(e) => {
                tracing_log(&format!(
                    "token refresh at {} failed ({e}); authorizing anew",
                    self.server
                ));
                false
            }
        }
    }

    /// Runs the whole flow for a 401 (or a 403 asking for more scope) and keeps the
    /// tokens. `Err` says what failed and what to configure.
    pub fn authorize(&mut self, ch: &Challenge) -> Result<(), String> {
        // 1. Protected-resource metadata (absent: a 2025-03-26 server is its own AS).
        let prm = self.protected_resource(ch.resource_metadata.as_deref())?;
        let (issuer, supported) = match &prm {
            Some(p) => {
                if let Some(r) = p.get("resource").and_then(Value::as_str) {
                    let ours = canonical_resource(&self.server);
                    if !ours.starts_with(r.trim_end_matches('/')) {
                        return Err(format!(
                            "the protected-resource metadata is for `{r}`, not this server (`{ours}`); refusing to send it a token"
                        ));
                    }
                    self.resource = Some(r.to_owned());
                } else {
                    self.resource = Some(canonical_resource(&self.server));
                }
                let issuer = strs(p.get("authorization_servers"))
                    .into_iter()
                    .next()
                    .ok_or("the protected-resource metadata lists no authorization_servers")?;
                let issuer = Url::parse(&issuer).map_err(|e| format!("authorization server `{issuer}`: {e}"))?;
                (issuer, strs(p.get("scopes_supported")))
            }
            None => {
                self.resource = Some(canonical_resource(&self.server));
                let mut origin = self.server.clone();
                origin.set_path("/");
                origin.set_query(None);
                (origin, Vec::new())
            }
        };
        // 2. Authorization-server metadata (absent for a 2025-03-26 server: defaults).
        let meta = match self.as_metadata(&issuer)? {
            Some(m) => m,
            None if prm.is_none() => Metadata::fallback(&issuer),
            None => {
                return Err(format!(
                    "no authorization server metadata at {} (tried {})",
                    issuer,
                    as_metadata_urls(&issuer)
                        .iter()
                        .map(Url::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        };
        if !meta.pkce_s256 {
            return Err(format!(
                "the authorization server at {issuer} does not list PKCE S256 in code_challenge_methods_supported; the MCP spec forbids authorizing without it"
            ));
        }
        // 3. Scope: a step-up keeps what we had and adds what is asked.
        let mut scope = choose_scope(ch.scope.as_deref(), &supported, self.cfg.scope.as_deref());
        if ch.error.as_deref() == Some("insufficient_scope") {
            let had = self.tokens.as_ref().and_then(|t| t.scope.clone());
            scope = union_scopes(had.as_deref(), scope.as_deref());
        }
        // 4. The client: configured, a metadata document URL, or registered now.
        let client = self.client_for(&meta)?;
        // 5. Authorization code with PKCE, then the token.
        let redirect = self
            .cfg
            .redirect_uri
            .clone()
            .unwrap_or_else(|| DEFAULT_REDIRECT_URI.to_owned());
        let (verifier, challenge) = pkce();
        let state = URL_SAFE_NO_PAD.encode(random_bytes::<16>());
        let mut url = Url::parse(&meta.authorization_endpoint)
            .map_err(|e| format!("authorization endpoint `{}`: {e}", meta.authorization_endpoint))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &client.id)
                .append_pair("redirect_uri", &redirect)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state);
            if let Some(r) = &self.resource {
                q.append_pair("resource", r);
            }
            if let Some(s) = &scope {
                q.append_pair("scope", s);
            }
        }
        let code = self.fetch_code(&url, &state)?;
        let mut form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", redirect),
            ("code_verifier", verifier),
        ];
        if let Some(r) = &self.resource {
            form.push(("resource", r.clone()));
        }
        let tokens = self.token_request(&meta, &client, form, scope.as_deref())?;
        tracing_log(&format!(
            "authorized at {} (client `{}`, scope {})",
            issuer,
            client.id,
            tokens.scope.as_deref().unwrap_or("(server default)")
        ));
        self.meta = Some(meta);
        self.client = Some(client);
        self.tokens = Some(tokens);
        Ok(())
    }

    fn get_json(&self, url: &Url) -> Result<Option<Value>, String> {
        let r = self
            .http
            .get(url.clone())
            .header("Accept", "application/json")
            .timeout(AS_TIMEOUT)
            .send()
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !r.status().is_success() {
            return Ok(None);
        }
        let text = read_body(r).map_err(|e| format!("GET {url}: {e}"))?;
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("GET {url}: not JSON ({e})"))
    }

    fn protected_resource(&self, named: Option<&str>) -> Result<Option<Value>, String> {
        let urls = match named {
            Some(u) => vec![
                Url::parse(u)
                    .or_else(|_| self.server.join(u))
                    .map_err(|e| format!("resource_metadata `{u}`: {e}"))?,
            ],
            None => prm_urls(&self.server),
        };
        for u in urls {
            if let Some(v) = self.get_json(&u)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    fn as_metadata(&self, issuer: &Url) -> Result<Option<Metadata>, String> {
        for u in as_metadata_urls(issuer) {
            if let Some(v) = self.get_json(&u)? {
                return Metadata::from_json(&v).map(Some);
            }
        }
        Ok(None)
    }

    fn client_for(&mut self, meta: &Metadata) -> Result<Registration, String> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        if meta.cimd
            && let Some(url) = &self.cfg.client_metadata_url
        {
            return Ok(Registration {
                id: url.clone(),
                secret: None,
                method: Some("none".into()),
            });
        }
        let Some(endpoint) = &meta.registration_endpoint else {
            return Err(
                "the authorization server offers no dynamic client registration; register a client there and set `oauth.client_id` (and `oauth.client_secret`) for this server in plugin.mcp.servers".into(),
            );
        };
        let redirect = self
            .cfg
            .redirect_uri
            .clone()
            .unwrap_or_else(|| DEFAULT_REDIRECT_URI.to_owned());
        let method = if meta.auth_methods.is_empty() || meta.auth_methods.iter().any(|m| m == "none") {
            "none"
        } else if meta.auth_methods.iter().any(|m| m == "client_secret_basic") {
            "client_secret_basic"
        } else {
            "client_secret_post"
        };
        let body = json!({
            "client_name": "HomeAgent",
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
        });
        let r = self
            .http
            .post(endpoint)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .timeout(AS_TIMEOUT)
            .body(body.to_string())
            .send()
            .map_err(|e| format!("client registration at {endpoint}: {e}"))?;
        let status = r.status();
        let text = read_body(r).unwrap_or_default();
        if !status.is_success() {
            return Err(format!(
                "client registration at {endpoint} failed ({status}): {}; set `oauth.client_id` to a client registered by hand",
                snippet(&text)
            ));
        }
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("client registration answer: {e}"))?;
        let id = v
            .get("client_id")
            .and_then(Value::as_str)
            .ok_or("the client registration answer has no client_id")?;
        let reg = Registration {
            id: id.to_owned(),
            secret: v.get("client_secret").and_then(Value::as_str).map(str::to_owned),
            method: v
                .get("token_endpoint_auth_method")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        self.client = Some(reg.clone());
        Ok(reg)
    }

    /// Follows the authorization URL without a browser: the code comes back in the
    /// redirect's `Location`.
    fn fetch_code(&self, url: &Url, state: &str) -> Result<String, String> {
        let r = self
            .http
            .get(url.clone())
            .timeout(AS_TIMEOUT)
            .send()
            .map_err(|e| format!("authorization request: {e}"))?;
        let location = r
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let Some(location) = location.filter(|_| r.status().is_redirection()) else {
            return Err(format!(
                "the authorization server did not approve at once (HTTP {}): it wants a person to sign in at {url}, which the daemon cannot show; authorize a client there and configure `headers` with its token, or `oauth.client_id`/`oauth.client_secret` of a pre-approved client",
                r.status()
            ));
        };
        let back = Url::parse(&location)
            .or_else(|_| url.join(&location))
            .map_err(|e| format!("the authorization redirect `{location}`: {e}"))?;
        let q: Vec<(String, String)> = back.query_pairs().into_owned().collect();
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        if let Some(e) = get("error") {
            return Err(format!(
                "the authorization server refused: {e} {}",
                get("error_description").unwrap_or_default()
            ));
        }
        if get("state").as_deref() != Some(state) {
            return Err(
                "the authorization redirect carried a different `state`; refusing its code (a possible CSRF)".into(),
            );
        }
        get("code").ok_or_else(|| "the authorization redirect carried no code".into())
    }

    fn token_request(
        &self,
        meta: &Metadata,
        client: &Registration,
        mut form: Vec<(&str, String)>,
        scope: Option<&str>,
    ) -> Result<Tokens, String> {
        let auth = client_auth(&meta.auth_methods, client.method.as_deref(), client.secret.is_some());
        let mut req = self
            .http
            .post(&meta.token_endpoint)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json")
            .timeout(AS_TIMEOUT);
        match auth {
            ClientAuth::None => form.push(("client_id", client.id.clone())),
            ClientAuth::Post => {
                form.push(("client_id", client.id.clone()));
                form.push(("client_secret", client.secret.clone().unwrap_or_default()));
            }
            ClientAuth::Basic => {
                req = req.header(
                    "Authorization",
                    basic_header(&client.id, client.secret.as_deref().unwrap_or("")),
                );
            }
        }
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let r = req
            .body(body)
            .send()
            .map_err(|e| format!("token request at {}: {e}", meta.token_endpoint))?;
        let status = r.status();
        let text = read_body(r).unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            let why = parse_tokens(&v, None).err().unwrap_or_else(|| snippet(&text));
            return Err(format!(
                "token request at {} failed ({status}): {why}",
                meta.token_endpoint
            ));
        }
        parse_tokens(&v, scope)
    }
}

/// Most of an authorization server's answer read (metadata, registration, tokens).
const MAX_AS_BODY: u64 = 1024 * 1024;

fn read_body(r: reqwest::blocking::Response) -> Result<String, String> {
    crate::body::read_capped(r, MAX_AS_BODY)
}

/// The first 200 characters of a body, for error messages.
pub fn snippet(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// The bridge logs to stderr (the kernel records a plugin's stderr).
fn tracing_log(msg: &str) {
    eprintln!("mcp: oauth: {msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_parsed() {
        let c = parse_challenge(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", error_description="a \"quoted\" word""#,
        );
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:write"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(parse_challenge("Bearer"), Challenge::default());
        assert_eq!(parse_challenge(r#"bearer scope=read"#).scope.as_deref(), Some("read"));
    }

    #[test]
    fn discovery_urls_follow_the_spec_order() {
        let s = Url::parse("http://h:1/mcp").unwrap();
        let p: Vec<String> = prm_urls(&s).iter().map(|u| u.to_string()).collect();
        assert_eq!(
            p,
            [
                "http://h:1/.well-known/oauth-protected-resource/mcp",
                "http://h:1/.well-known/oauth-protected-resource"
            ]
        );
        let a: Vec<String> = as_metadata_urls(&Url::parse("http://a/tenant1").unwrap())
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(
            a,
            [
                "http://a/.well-known/oauth-authorization-server/tenant1",
                "http://a/.well-known/openid-configuration/tenant1",
                "http://a/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(as_metadata_urls(&Url::parse("http://a").unwrap()).len(), 2);
        assert_eq!(
            canonical_resource(&Url::parse("http://h:1/mcp#x").unwrap()),
            "http://h:1/mcp"
        );
        assert_eq!(canonical_resource(&Url::parse("http://h:1/").unwrap()), "http://h:1");
    }

    #[test]
    fn scope_choice_and_step_up() {
        let sup = vec!["a".to_string(), "b".into()];
        assert_eq!(choose_scope(Some("x"), &sup, Some("c")).as_deref(), Some("x"));
        assert_eq!(choose_scope(None, &sup, Some("c")).as_deref(), Some("a b"));
        assert_eq!(choose_scope(Some(" "), &[], Some("c")).as_deref(), Some("c"));
        assert_eq!(choose_scope(None, &[], None), None);
        assert_eq!(union_scopes(Some("a b"), Some("b c")).as_deref(), Some("a b c"));
        assert_eq!(union_scopes(None, None), None);
    }

    #[test]
    fn pkce_pairs_verify() {
        let (v, c) = pkce();
        assert_eq!(v.len(), 43);
        assert_eq!(c, s256(&v));
        // RFC 7636 appendix B.
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_ne!(pkce().0, v, "fresh randomness each time");
    }

    #[test]
    fn client_authentication_is_chosen() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(client_auth(&s(&["none"]), Some("none"), false), ClientAuth::None);
        assert_eq!(client_auth(&s(&["client_secret_post"]), None, true), ClientAuth::Post);
        assert_eq!(client_auth(&s(&["client_secret_basic"]), None, true), ClientAuth::Basic);
        assert_eq!(client_auth(&[], None, true), ClientAuth::Basic);
        assert_eq!(
            client_auth(&s(&["client_secret_basic"]), Some("client_secret_post"), true),
            ClientAuth::Post
        );
        assert_eq!(client_auth(&s(&["client_secret_basic"]), None, false), ClientAuth::None);
        assert_eq!(
            basic_header("a b", "s:t"),
            format!("Basic {}", STANDARD.encode("a+b:s%3At"))
        );
    }

    #[test]
    fn token_answers_are_read() {
        let t = parse_tokens(
            &json!({"access_token": "x", "expires_in": 60, "refresh_token": "r"}),
            Some("s"),
        )
        .unwrap();
        assert_eq!(
            (t.access.as_str(), t.refresh.as_deref(), t.scope.as_deref()),
            ("x", Some("r"), Some("s"))
        );
        assert!(t.expires_at.is_some());
        assert!(
            parse_tokens(&json!({"error": "invalid_grant"}), None)
                .unwrap_err()
                .contains("invalid_grant")
        );
        assert!(parse_tokens(&json!({}), None).is_err());
        let m = Metadata::from_json(&json!({"authorization_endpoint": "http://a/authorize", "token_endpoint": "http://a/token", "client_id_metadata_document_supported": true, "code_challenge_methods_supported": ["S256"]})).unwrap();
        assert!(m.cimd && m.pkce_s256 && m.registration_endpoint.is_none());
        assert!(Metadata::from_json(&json!({"token_endpoint": "x"})).is_err());
        let f = Metadata::fallback(&Url::parse("http://h:9/").unwrap());
        assert_eq!(f.token_endpoint, "http://h:9/token");
    }
}
