//! The bridge as a one-shot MCP client, for the official conformance suite
//! (`@modelcontextprotocol/conformance client --command "homed plugin mcp-client"`):
//! the suite starts a test server per scenario, runs the command with the server's
//! URL appended, and judges what the server saw.
//!
//! It runs exactly the bridge's code path for a remote server — [`Client::connect_http`],
//! [`bridge::connect_remote`] (initialize, the GET stream), [`bridge::list_tools`],
//! [`bridge::call_tool`], then the session's DELETE — and calls every listed tool
//! once with arguments made from its schema, as the model would. The scenario's
//! context (`MCP_CONFORMANCE_CONTEXT`, e.g. pre-registered client credentials) fills
//! the `oauth` settings a user would write in `plugin.mcp.servers`.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::bridge;
use crate::client::Client;
use crate::config::{HttpConfig, OAuthConfig};

/// The client id metadata document URL the suite expects a client to offer where the
/// authorization server supports them (its `auth/basic-cimd` scenario).
pub const SUITE_CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The `oauth` settings for a scenario, from its context.
pub fn oauth_for(context: Option<&Value>) -> OAuthConfig {
    let s = |k: &str| {
        context
            .and_then(|c| c.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    OAuthConfig {
        client_id: s("client_id"),
        client_secret: s("client_secret"),
        scope: None,
        client_metadata_url: Some(SUITE_CLIENT_METADATA_URL.into()),
        redirect_uri: None,
    }
}

/// Arguments for a tool from its JSON Schema: each required property gets a value
/// of its type (its `default` or first `enum` value when it has one).
pub fn sample_args(schema: &Value) -> Value {
    let props = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut out = Map::new();
    for name in required {
        let p = props.and_then(|m| m.get(name)).cloned().unwrap_or(Value::Null);
        let v = if let Some(d) = p.get("default") {
            d.clone()
        } else if let Some(e) = p.get("enum").and_then(Value::as_array).and_then(|a| a.first()) {
            e.clone()
        } else {
            match p.get("type").and_then(Value::as_str).unwrap_or("string") {
                "number" | "integer" => json!(1),
                "boolean" => json!(true),
                "array" => json!([]),
                "object" => sample_args(&p),
                _ => json!("test"),
            }
        };
        out.insert(name.to_owned(), v);
    }
    Value::Object(out)
}

/// Runs one scenario against `url`; the exit code (0: every step succeeded).
pub fn run(url: &str) -> i32 {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Option<Value> = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok());
    eprintln!("mcp-client: scenario `{scenario}` against {url}");
    let cfg = HttpConfig {
        url: url.to_owned(),
        headers: Default::default(),
        oauth: oauth_for(context.as_ref()),
    };
    match session(&cfg) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mcp-client: {e}");
            1
        }
    }
}

fn session(cfg: &HttpConfig) -> Result<(), String> {
    let (tx, _events) = crossbeam_channel::unbounded();
    let client = Client::connect_http("conformance", cfg, 1, tx)?;
    let outcome = (|| {
        bridge::connect_remote(&client)?;
        let tools = bridge::list_tools(&client)?;
        eprintln!(
            "mcp-client: {} tools: {:?}",
            tools.len(),
            tools.iter().map(|t| &t.name).collect::<Vec<_>>()
        );
        for t in &tools {
            let args = sample_args(&t.input_schema);
            let text = bridge::call_tool(&client, &t.name, args, None)?;
            println!("{}: {text}", t.name);
        }
        Ok::<(), String>(())
    })();
    client.shutdown(Duration::from_secs(2));
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_the_schema() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "integer"}, "s": {"type": "string"},
            "e": {"enum": ["x", "y"]}, "d": {"type": "string", "default": "dd"},
            "o": {"type": "object", "properties": {"f": {"type": "boolean"}}, "required": ["f"]},
            "optional": {"type": "string"}
        }, "required": ["a", "b", "s", "e", "d", "o"]});
        assert_eq!(
            sample_args(&s),
            json!({"a": 1, "b": 1, "s": "test", "e": "x", "d": "dd", "o": {"f": true}})
        );
        assert_eq!(sample_args(&json!({"type": "object"})), json!({}));
    }

    #[test]
    fn the_context_fills_the_oauth_settings() {
        let o = oauth_for(Some(&json!({"client_id": "pre", "client_secret": "s"})));
        assert_eq!(
            (o.client_id.as_deref(), o.client_secret.as_deref()),
            (Some("pre"), Some("s"))
        );
        assert_eq!(oauth_for(None).client_id, None);
    }
}
