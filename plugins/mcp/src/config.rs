//! The setting `plugin.mcp.servers`: the usual `mcpServers` object, and what changed
//! between two versions of it.
//!
//! Accepted shapes: `{"<name>": {"command", "args", "env"}}` (a stdio server) or
//! `{"<name>": {"url", "headers", "oauth"}}` (a remote server over Streamable HTTP),
//! the same wrapped as `{"mcpServers": {...}}` (a file pasted whole), or either as a
//! JSON string. A bad entry is reported and skipped; the others still apply.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::names::valid_server_name;

/// How to start one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Working directory (optional).
    pub cwd: Option<String>,
}

/// How to reach one remote MCP server (the Streamable HTTP transport).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpConfig {
    /// The MCP endpoint (`http://` or `https://`).
    pub url: String,
    /// Extra headers sent with every request (an API key, for instance).
    pub headers: BTreeMap<String, String>,
    pub oauth: OAuthConfig,
}

/// What the OAuth flow of the MCP authorization spec may use; every field is
/// optional (discovery and dynamic client registration fill the rest in).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthConfig {
    /// A client registered by hand at the authorization server (no dynamic registration).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The scope to ask for when neither the server's challenge nor its metadata names one.
    pub scope: Option<String>,
    /// An `https` URL of this client's metadata document, used as the client id where
    /// the authorization server supports client id metadata documents.
    pub client_metadata_url: Option<String>,
    /// Where the authorization server sends the code (default [`DEFAULT_REDIRECT_URI`]).
    pub redirect_uri: Option<String>,
}

/// The redirect URI registered when none is configured (loopback, per RFC 8252).
pub const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1:33418/oauth/callback";

/// One configured server: a process on stdio or a remote endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    Stdio(ServerConfig),
    Http(HttpConfig),
}

/// The servers to run and the problems found on the way.
#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    pub servers: BTreeMap<String, Server>,
    /// One message per skipped entry, saying what to fix.
    pub problems: Vec<String>,
}

const HINT: &str = r#"expected {"<name>": {"command": "...", "args": [...], "env": {...}}} or {"<name>": {"url": "https://...", "headers": {...}}}"#;

/// Reads the setting's value (`null` = no servers).
pub fn parse(value: &Value) -> Parsed {
    let mut out = Parsed::default();
    let parsed;
    let value = match value {
        Value::Null => return out,
        Value::String(s) if s.trim().is_empty() => return out,
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v) => {
                parsed = v;
                &parsed
            }
            Err(e) => {
                out.problems
                    .push(format!("plugin.mcp.servers is a string but not JSON ({e}); {HINT}"));
                return out;
            }
        },
        v => v,
    };
    let Some(obj) = value.as_object() else {
        out.problems
            .push(format!("plugin.mcp.servers must be an object; {HINT}"));
        return out;
    };
    let obj = match obj.get("mcpServers") {
        Some(Value::Object(inner)) => inner,
        Some(_) => {
            out.problems.push(format!("`mcpServers` must be an object; {HINT}"));
            return out;
        }
        None => obj,
    };
    for (name, entry) in obj {
        match server(name, entry) {
            Ok(Some(c)) => {
                out.servers.insert(name.clone(), c);
            }
            Ok(None) => {}
            Err(e) => out.problems.push(format!("MCP server `{name}` skipped: {e}")),
        }
    }
    out
}

fn server(name: &str, v: &Value) -> Result<Option<Server>, String> {
    if !valid_server_name(name) {
        return Err("a server name is 1-32 characters of [A-Za-z0-9_-]; rename it".into());
    }
    let o = v
        .as_object()
        .ok_or_else(|| format!("its entry must be an object; {HINT}"))?;
    if o.get("disabled").and_then(Value::as_bool) == Some(true) {
        return Ok(None);
    }
    if o.contains_key("url") && !o.contains_key("command") {
        return http(o).map(|c| Some(Server::Http(c)));
    }
    let command = o
        .get("command")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or("`command` (the program to run) is missing or not a string")?
        .to_owned();
    let args = match o.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("`args` must be an array of strings")?,
        Some(_) => return Err("`args` must be an array of strings".into()),
    };
    let env = strings(o, "env")?;
    let cwd = o.get("cwd").and_then(Value::as_str).map(str::to_owned);
    Ok(Some(Server::Stdio(ServerConfig {
        command,
        args,
        env,
        cwd,
    })))
}

/// An object of strings (numbers and booleans written as text), e.g. `env`, `headers`.
fn strings(o: &serde_json::Map<String, Value>, key: &str) -> Result<BTreeMap<String, String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Some((k.clone(), s.clone())),
                Value::Number(n) => Some((k.clone(), n.to_string())),
                Value::Bool(b) => Some((k.clone(), b.to_string())),
                _ => None,
            })
            .collect::<Option<BTreeMap<_, _>>>()
            .ok_or_else(|| format!("`{key}` values must be strings")),
        Some(_) => Err(format!("`{key}` must be an object of strings")),
    }
}

/// A remote server's entry: `url`, optional `headers`, optional `oauth`.
fn http(o: &serde_json::Map<String, Value>) -> Result<HttpConfig, String> {
    if let Some(t) = o.get("type").and_then(Value::as_str)
        && !matches!(t, "http" | "streamable-http" | "streamableHttp" | "streamable_http")
    {
        return Err(format!(
            "transport `{t}` is not supported; remote servers speak Streamable HTTP (`\"type\": \"http\"` or no `type`)"
        ));
    }
    let url = o
        .get("url")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("")
        .to_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("`url` must be an http:// or https:// URL (got `{url}`)"));
    }
    let headers = strings(o, "headers")?;
    let oauth = match o.get("oauth") {
        None | Some(Value::Null) => OAuthConfig::default(),
        Some(Value::Object(a)) => {
            let s = |k: &str| {
                a.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .filter(|s| !s.is_empty())
            };
            OAuthConfig {
                client_id: s("client_id"),
                client_secret: s("client_secret"),
                scope: s("scope"),
                client_metadata_url: s("client_metadata_url"),
                redirect_uri: s("redirect_uri"),
            }
        }
        Some(_) => {
            return Err(
                "`oauth` must be an object (client_id, client_secret, scope, client_metadata_url, redirect_uri)".into(),
            );
        }
    };
    Ok(HttpConfig { url, headers, oauth })
}

/// What to do to go from `old` to `new`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub start: Vec<String>,
    pub restart: Vec<String>,
    pub stop: Vec<String>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.start.is_empty() && self.restart.is_empty() && self.stop.is_empty()
    }
}

/// Servers only in `new` start, servers whose config changed restart, servers only in
/// `old` stop; unchanged ones are left alone (sorted by name).
pub fn diff(old: &BTreeMap<String, Server>, new: &BTreeMap<String, Server>) -> Diff {
    let mut d = Diff::default();
    for (name, cfg) in new {
        match old.get(name) {
            None => d.start.push(name.clone()),
            Some(prev) if prev != cfg => d.restart.push(name.clone()),
            Some(_) => {}
        }
    }
    d.stop = old.keys().filter(|k| !new.contains_key(*k)).cloned().collect();
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_usual_shapes_parse() {
        let inner = json!({"everything": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1", "N": 2}}});
        let a = parse(&inner);
        assert!(a.problems.is_empty(), "{:?}", a.problems);
        let Server::Stdio(s) = &a.servers["everything"] else {
            panic!("a stdio server")
        };
        assert_eq!(s.command, "npx");
        assert_eq!(s.args, ["-y", "x"]);
        assert_eq!(s.env["N"], "2");
        assert_eq!(parse(&json!({"mcpServers": inner.clone()})), a);
        assert_eq!(parse(&Value::String(inner.to_string())), a);
        assert_eq!(parse(&Value::Null), Parsed::default());
        assert_eq!(parse(&json!("")), Parsed::default());
    }

    #[test]
    fn bad_entries_are_skipped_with_a_reason_and_the_rest_applies() {
        let p = parse(&json!({
            "ok": {"command": "srv"},
            "nocmd": {"args": []},
            "badargs": {"command": "x", "args": "a b"},
            "remote": {"url": "https://example.invalid/mcp", "headers": {"X-Key": "k"}, "oauth": {"client_id": "c"}},
            "oldsse": {"url": "https://example.invalid/sse", "type": "sse"},
            "notaurl": {"url": "ftp://x"},
            "off": {"command": "x", "disabled": true},
            "bad name": {"command": "x"},
        }));
        assert_eq!(p.servers.keys().collect::<Vec<_>>(), ["ok", "remote"]);
        assert_eq!(p.problems.len(), 5, "{:?}", p.problems);
        let Server::Http(h) = &p.servers["remote"] else {
            panic!("a remote server")
        };
        assert_eq!(h.url, "https://example.invalid/mcp");
        assert_eq!(h.headers["X-Key"], "k");
        assert_eq!(h.oauth.client_id.as_deref(), Some("c"));
        assert!(
            p.problems
                .iter()
                .any(|m| m.contains("`oldsse`") && m.contains("Streamable HTTP"))
        );
        assert!(
            p.problems
                .iter()
                .any(|m| m.contains("`notaurl`") && m.contains("http://"))
        );
        assert!(
            p.problems
                .iter()
                .any(|m| m.contains("`nocmd`") && m.contains("`command`"))
        );
        assert!(parse(&json!([1])).problems[0].contains("must be an object"));
        assert!(parse(&json!("{nope")).problems[0].contains("not JSON"));
    }

    #[test]
    fn diff_starts_restarts_and_stops() {
        let cfg = |c: &str| {
            Server::Stdio(ServerConfig {
                command: c.into(),
                args: vec![],
                env: BTreeMap::new(),
                cwd: None,
            })
        };
        let old = BTreeMap::from([
            ("a".to_string(), cfg("a")),
            ("b".into(), cfg("b")),
            ("c".into(), cfg("c")),
        ]);
        let new = BTreeMap::from([
            ("a".to_string(), cfg("a")),
            ("b".into(), cfg("b2")),
            ("d".into(), cfg("d")),
        ]);
        let d = diff(&old, &new);
        assert_eq!(d.start, ["d"]);
        assert_eq!(d.restart, ["b"]);
        assert_eq!(d.stop, ["c"]);
        assert!(diff(&new, &new).is_empty());
    }
}
