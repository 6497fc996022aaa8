//! The MCP side of the wire, as pure functions: JSON-RPC 2.0 messages on stdio (one
//! per line), version negotiation for the two eras, tool list paging and how a tool
//! result becomes text for the model.

use serde_json::{Map, Value, json};

/// The stateless revision: no `initialize`, `server/discover`, `_meta` on every request.
pub const MODERN: &str = "2026-07-28";
/// The revision we ask for in `initialize`.
pub const LEGACY: &str = "2025-11-25";
/// Revisions we accept in an `initialize` answer (their tool methods are the same).
pub const LEGACY_ACCEPTED: &[&str] = &[LEGACY, "2025-06-18", "2025-03-26", "2024-11-05"];
/// Error codes of `UnsupportedProtocolVersionError` (the final 2026-07-28 code and the
/// one used by drafts and early SDKs).
pub const UNSUPPORTED_VERSION_CODES: &[i64] = &[-32022, -32004];
/// Most pages of `tools/list` we follow (a cursor loop guard).
pub const MAX_PAGES: usize = 100;

/// `_meta` keys of the stateless revision.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";

/// Which revision a server speaks, once known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// `initialize` done; the negotiated version.
    Legacy(String),
    /// Stateless; every request carries `_meta` with this version.
    Modern(String),
}

impl Era {
    pub fn version(&self) -> &str {
        match self {
            Era::Legacy(v) | Era::Modern(v) => v,
        }
    }
}

/// Who we are, for `initialize` and `_meta`.
pub fn client_info() -> Value {
    json!({"name": "homeagent-mcp", "version": env!("CARGO_PKG_VERSION")})
}

/// An error answer of the server.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

/// One line from the server, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Response {
        id: i64,
        result: Result<Value, RpcError>,
    },
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// Not JSON-RPC we understand (logged and dropped).
    Junk(String),
}

/// Classifies one line of the server's stdout.
pub fn classify(line: &str) -> Incoming {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Incoming::Junk(format!("not JSON ({e})")),
    };
    let Some(o) = v.as_object() else {
        return Incoming::Junk("not a JSON object".into());
    };
    let params = o.get("params").cloned().unwrap_or(Value::Null);
    match (o.get("method").and_then(Value::as_str), o.get("id")) {
        (Some(m), Some(id)) if !id.is_null() => Incoming::Request {
            id: id.clone(),
            method: m.to_owned(),
            params,
        },
        (Some(m), _) => Incoming::Notification {
            method: m.to_owned(),
            params,
        },
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else {
                return Incoming::Junk(format!("response with an id we never sent: {id}"));
            };
            let result = match (o.get("result"), o.get("error")) {
                (_, Some(e)) => Err(RpcError {
                    code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: e.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
                    data: e.get("data").cloned(),
                }),
                (Some(r), None) => Ok(r.clone()),
                (None, None) => return Incoming::Junk("response without result or error".into()),
            };
            Incoming::Response { id, result }
        }
        (None, None) => Incoming::Junk("neither request nor response".into()),
    }
}

/// A request line (no trailing newline). In the stateless era `_meta` is merged into
/// the params.
pub fn request(id: i64, method: &str, params: Value, era: Option<&Era>) -> String {
    let params = match era {
        Some(Era::Modern(v)) => with_meta(params, v),
        _ => params,
    };
    let mut o = Map::new();
    o.insert("jsonrpc".into(), json!("2.0"));
    o.insert("id".into(), json!(id));
    o.insert("method".into(), json!(method));
    if !params.is_null() {
        o.insert("params".into(), params);
    }
    Value::Object(o).to_string()
}

/// A notification line.
pub fn notification(method: &str, params: Value) -> String {
    let mut o = Map::new();
    o.insert("jsonrpc".into(), json!("2.0"));
    o.insert("method".into(), json!(method));
    if !params.is_null() {
        o.insert("params".into(), params);
    }
    Value::Object(o).to_string()
}

/// A response line to a server's request.
pub fn response(id: &Value, result: Result<Value, (i64, String)>) -> String {
    match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    }
    .to_string()
}

/// `params` with the stateless `_meta` keys added (existing `_meta` entries kept).
pub fn with_meta(params: Value, version: &str) -> Value {
    let mut p = match params {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let meta = p.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert(META_VERSION.into(), json!(version));
        m.insert(META_CAPS.into(), json!({}));
        m.insert(META_CLIENT.into(), client_info());
    }
    Value::Object(p)
}

/// The `initialize` params.
pub fn initialize_params() -> Value {
    json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": client_info()})
}

/// What the `server/discover` probe told us.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    Answer(Value),
    Error(RpcError),
    /// No answer in time (the server may be in an undefined state).
    Silent,
}

/// What to do after the probe.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Modern(String),
    /// Do the `initialize` handshake; `restart` the process first.
    Legacy {
        restart: bool,
    },
    Fail(String),
}

fn versions(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The stdio era rule: a `server/discover` answer listing our stateless version means
/// stateless; an unsupported-version error lists what the server speaks (an old one
/// means `initialize`, an unknown new one is a clear failure); any other error means
/// a server that predates discovery; silence means the same, on a fresh process.
pub fn decide(probe: &Probe) -> Next {
    match probe {
        Probe::Answer(r) => {
            let supported = versions(r.get("supportedVersions"));
            if supported.iter().any(|v| v == MODERN) {
                Next::Modern(MODERN.into())
            } else {
                Next::Legacy { restart: false }
            }
        }
        Probe::Error(e) => {
            let supported = versions(e.data.as_ref().and_then(|d| d.get("supported")));
            let unsupported = UNSUPPORTED_VERSION_CODES.contains(&e.code) || !supported.is_empty();
            if !unsupported {
                return Next::Legacy { restart: false };
            }
            if supported.iter().any(|v| v == MODERN) {
                Next::Modern(MODERN.into())
            } else if supported.is_empty() || supported.iter().any(|v| LEGACY_ACCEPTED.contains(&v.as_str())) {
                Next::Legacy { restart: false }
            } else {
                Next::Fail(format!(
                    "the server speaks MCP {} only; this bridge speaks {MODERN} and {}",
                    supported.join(", "),
                    LEGACY_ACCEPTED.join(", ")
                ))
            }
        }
        Probe::Silent => Next::Legacy { restart: true },
    }
}

/// Checks the version an `initialize` answer chose.
pub fn check_initialize(result: &Value) -> Result<Era, String> {
    let v = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    if LEGACY_ACCEPTED.contains(&v) {
        Ok(Era::Legacy(v.to_owned()))
    } else {
        Err(format!(
            "the server answered initialize with protocol version `{v}`; this bridge accepts {}",
            LEGACY_ACCEPTED.join(", ")
        ))
    }
}

/// One tool of a server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub read_only: bool,
}

/// The tools and the next cursor of one `tools/list` page.
pub fn tools_page(result: &Value) -> Result<(Vec<McpTool>, Option<String>), String> {
    let tools = result
        .get("tools")
        .and_then(Value::as_array)
        .ok_or("tools/list answer has no `tools` array")?;
    let mut out = Vec::new();
    for t in tools {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        let mut description = t.get("description").and_then(Value::as_str).unwrap_or("").to_owned();
        if description.is_empty() {
            description = t.get("title").and_then(Value::as_str).unwrap_or("").to_owned();
        }
        let mut schema = t.get("inputSchema").cloned().unwrap_or(Value::Null);
        match schema.as_object_mut() {
            // Some vendors refuse the `$schema` keyword; the schema means the same without it.
            Some(o) => {
                o.remove("$schema");
            }
            None => schema = json!({"type": "object", "properties": {}}),
        }
        let read_only = t
            .get("annotations")
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        out.push(McpTool {
            name: name.to_owned(),
            description,
            input_schema: schema,
            read_only,
        });
    }
    let next = result
        .get("nextCursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    Ok((out, next))
}

/// Follows `nextCursor` through every page; `fetch(cursor)` answers one page. Stops
/// with an error on a repeated cursor or past [`MAX_PAGES`].
pub fn list_all(mut fetch: impl FnMut(Option<&str>) -> Result<Value, String>) -> Result<Vec<McpTool>, String> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..MAX_PAGES {
        let page = fetch(cursor.as_deref())?;
        let (tools, next) = tools_page(&page)?;
        all.extend(tools);
        match next {
            None => return Ok(all),
            Some(c) => {
                if !seen.insert(c.clone()) {
                    return Err(format!("tools/list repeated the cursor `{c}`; stopped paging"));
                }
                cursor = Some(c);
            }
        }
    }
    Err(format!("tools/list has more than {MAX_PAGES} pages; stopped paging"))
}

/// The `tools/list` params for one page.
pub fn list_params(cursor: Option<&str>) -> Value {
    match cursor {
        Some(c) => json!({"cursor": c}),
        None => json!({}),
    }
}

/// Largest tool answer passed to the kernel (its frames are capped at 1 MiB).
pub const MAX_RESULT: usize = 512 * 1024;

/// A `tools/call` result as text: text parts joined, other parts described, the
/// structured content when there is nothing else. `Err` when the tool reported an
/// error (`isError`) or the server wants a multi-round-trip exchange.
pub fn render_result(result: &Value) -> Result<String, String> {
    if let Some(rt) = result.get("resultType").and_then(Value::as_str)
        && rt != "complete"
    {
        return Err(format!(
            "the MCP server answered with resultType `{rt}` (it needs more input from the client), which this bridge does not support"
        ));
    }
    let mut parts = Vec::new();
    for c in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        parts.push(match kind {
            "text" => s("text"),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes of base64]",
                s("mimeType"),
                c.get("data").and_then(Value::as_str).map_or(0, str::len)
            ),
            "resource_link" => format!("[resource link: {} {}]", s("uri"), s("name")),
            "resource" => {
                let r = c.get("resource").cloned().unwrap_or(Value::Null);
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => format!(
                        "[resource: {} ({})]",
                        r.get("uri").and_then(Value::as_str).unwrap_or(""),
                        r.get("mimeType").and_then(Value::as_str).unwrap_or("binary")
                    ),
                }
            }
            other => format!("[{other} content]"),
        });
    }
    let mut text = parts.join("\n");
    if text.is_empty()
        && let Some(sc) = result.get("structuredContent")
    {
        text = sc.to_string();
    }
    if text.len() > MAX_RESULT {
        let mut cut = MAX_RESULT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = text.len();
        text.truncate(cut);
        text.push_str(&format!("\n[truncated: {total} bytes in all]"));
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        Err(if text.is_empty() {
            "the tool reported an error".into()
        } else {
            text
        })
    } else {
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified() {
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":3,"result":{"x":1}}"#),
            Incoming::Response {
                id: 3,
                result: Ok(json!({"x": 1}))
            }
        );
        let Incoming::Response { result: Err(e), .. } =
            classify(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope"}}"#)
        else {
            panic!("error response")
        };
        assert_eq!((e.code, e.message.as_str()), (-32601, "nope"));
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            Incoming::Request { method, .. } if method == "ping"
        ));
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            Incoming::Notification { method, .. } if method == "notifications/tools/list_changed"
        ));
        assert!(matches!(classify("hello"), Incoming::Junk(_)));
        assert!(matches!(classify(r#"{"id":"x","result":1}"#), Incoming::Junk(_)));
    }

    #[test]
    fn requests_carry_meta_only_in_the_stateless_era() {
        let legacy: Value =
            serde_json::from_str(&request(1, "tools/list", json!({}), Some(&Era::Legacy(LEGACY.into())))).unwrap();
        assert!(legacy["params"].get("_meta").is_none());
        assert_eq!(legacy["jsonrpc"], "2.0");
        let modern: Value = serde_json::from_str(&request(
            2,
            "tools/call",
            json!({"name": "echo", "_meta": {"progressToken": 5}}),
            Some(&Era::Modern(MODERN.into())),
        ))
        .unwrap();
        let meta = &modern["params"]["_meta"];
        assert_eq!(meta[META_VERSION], MODERN);
        assert!(meta[META_CAPS].is_object());
        assert_eq!(meta["progressToken"], 5, "existing _meta kept");
        assert_eq!(modern["params"]["name"], "echo");
        let line = request(3, "ping", Value::Null, None);
        assert!(!line.contains("params") && !line.contains('\n'));
    }

    #[test]
    fn the_probe_picks_the_era() {
        let answer = Probe::Answer(json!({"supportedVersions": [MODERN, LEGACY], "capabilities": {}}));
        assert_eq!(decide(&answer), Next::Modern(MODERN.into()));
        let not_found = Probe::Error(RpcError {
            code: -32601,
            message: "Method not found".into(),
            data: None,
        });
        assert_eq!(decide(&not_found), Next::Legacy { restart: false });
        let invalid = Probe::Error(RpcError {
            code: -32602,
            message: "invalid".into(),
            data: None,
        });
        assert_eq!(
            decide(&invalid),
            Next::Legacy { restart: false },
            "not keyed to one code"
        );
        assert_eq!(decide(&Probe::Silent), Next::Legacy { restart: true });
        let newer = Probe::Error(RpcError {
            code: -32022,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": ["2027-01-01"]})),
        });
        assert!(matches!(decide(&newer), Next::Fail(m) if m.contains("2027-01-01")));
        let dual = Probe::Error(RpcError {
            code: -32004,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": ["2025-11-25"]})),
        });
        assert_eq!(decide(&dual), Next::Legacy { restart: false });
    }

    #[test]
    fn initialize_answers_are_checked() {
        assert_eq!(
            check_initialize(&json!({"protocolVersion": "2025-06-18"})).unwrap(),
            Era::Legacy("2025-06-18".into())
        );
        assert!(check_initialize(&json!({"protocolVersion": "1999-01-01"})).is_err());
    }

    #[test]
    fn paging_follows_cursors_and_stops_on_loops() {
        let pages = [
            json!({"tools": [{"name": "a", "inputSchema": {"$schema": "x", "type": "object"}}], "nextCursor": "p2"}),
            json!({"tools": [{"name": "b", "annotations": {"readOnlyHint": true}}], "nextCursor": "p3"}),
            json!({"tools": [{"name": "c", "title": "Cee"}]}),
        ];
        let mut asked = Vec::new();
        let all = list_all(|c| {
            asked.push(c.map(str::to_owned));
            Ok(pages[asked.len() - 1].clone())
        })
        .unwrap();
        assert_eq!(asked, [None, Some("p2".into()), Some("p3".into())]);
        assert_eq!(all.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(all[1].read_only && !all[0].read_only);
        assert_eq!(all[0].input_schema, json!({"type": "object"}), "$schema dropped");
        assert_eq!(all[1].input_schema["type"], "object", "missing schema filled in");
        assert_eq!(all[2].description, "Cee");
        let looped = list_all(|_| Ok(json!({"tools": [], "nextCursor": "same"})));
        assert!(looped.unwrap_err().contains("repeated the cursor"));
        assert!(list_all(|_| Ok(json!({}))).is_err());
    }

    #[test]
    fn results_become_text() {
        let r = json!({"content": [
            {"type": "text", "text": "Echo: hi"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
        ]});
        assert_eq!(
            render_result(&r).unwrap(),
            "Echo: hi\n[image: image/png, 4 bytes of base64]\ninside"
        );
        assert_eq!(
            render_result(&json!({"content": [], "structuredContent": {"n": 1}})).unwrap(),
            r#"{"n":1}"#
        );
        assert_eq!(
            render_result(&json!({"content": [{"type": "text", "text": "denied"}], "isError": true})),
            Err("denied".into())
        );
        assert!(render_result(&json!({"resultType": "input_required"})).is_err());
        let big = "x".repeat(MAX_RESULT + 10);
        let t = render_result(&json!({"content": [{"type": "text", "text": big}]})).unwrap();
        assert!(t.len() < MAX_RESULT + 100 && t.ends_with("bytes in all]"));
    }
}
