//! What the settings page needs beyond `GET|PUT /api/v1/settings`: the definitions it
//! builds its forms from, the "keep this secret" rule of a masked value sent back, and
//! the LLM source test (one real call through the provider).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix_web::{HttpResponse, web};
use homeagent_actors::config::{
    GetDefs, GetPluginDefs, GetSetting, GetSettings, MASKED, PLUGIN_PREFIX, SOURCE_FIELDS, SettingDef, ValueKind,
};
use homeagent_actors::i18n::{setting_zh, source_field_zh};
use homeagent_actors::llm::provider::{GetLlmStatus, ProbeSource};
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiError, ErrorBody};

/// The JSON shape of a value kind: `type` plus its bounds or options, so the page can
/// pick an input and check it before the server does (the server checks anyway).
fn kind_json(kind: &ValueKind) -> Value {
    match kind {
        ValueKind::String => json!({"type": "string"}),
        ValueKind::Url => json!({"type": "url"}),
        ValueKind::SocketAddr => json!({"type": "socket_addr"}),
        ValueKind::Bool => json!({"type": "bool"}),
        ValueKind::Int { min, max } => json!({"type": "int", "min": min, "max": max}),
        ValueKind::Float { min, max } => json!({"type": "float", "min": min, "max": max}),
        ValueKind::Duration { min } => json!({"type": "duration", "min_ms": min.as_millis() as u64}),
        ValueKind::Enum(options) => json!({"type": "enum", "options": options}),
        ValueKind::Any => json!({"type": "json"}),
        ValueKind::SecretMap => json!({"type": "secret_map"}),
    }
}

/// The unit a number or duration is written in, read from the key's name: the
/// definitions table has no unit column and the names already say it (`*_ms`,
/// `*_bytes`, `context_window` in tokens).
fn unit(key: &str, kind: &ValueKind) -> Option<&'static str> {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    match kind {
        ValueKind::Duration { .. } => Some("duration: 500ms, 30s, 5m, 1h, 2d"),
        ValueKind::Int { .. } | ValueKind::Float { .. } => {
            if leaf.ends_with("_ms") {
                Some("ms")
            } else if leaf.ends_with("_bytes") {
                Some("bytes")
            } else if leaf.contains("tokens") || leaf.ends_with("context_size") || leaf == "context_window" {
                Some("tokens")
            } else if leaf.ends_with("_secs") {
                Some("s")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A default as displays may see it (a secret default is masked like a value).
fn shown_default(secret: bool, v: &Value) -> Value {
    match v {
        Value::String(s) if secret && !s.is_empty() => json!(MASKED),
        Value::Object(m) if secret => Value::Object(m.keys().map(|k| (k.clone(), json!(MASKED))).collect()),
        other => other.clone(),
    }
}

fn def_json(d: &SettingDef) -> Value {
    let mut v = kind_json(&d.kind);
    let namespace = d.key.rsplit_once('.').map_or("", |(ns, _)| ns);
    v["key"] = json!(d.key);
    v["namespace"] = json!(namespace);
    v["default"] = shown_default(d.secret, &d.default);
    v["description"] = json!(d.description);
    v["description_zh"] = json!(setting_zh(d.key));
    v["secret"] = json!(d.secret);
    v["unit"] = json!(unit(d.key, &d.kind));
    v
}

/// Query of `GET /api/v1/settings/history`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryParams {
    /// Only this setting's changes.
    key: Option<String>,
    /// At most this many (default 100, at most 1000).
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/settings/history", tag = "settings", params(HistoryParams),
    responses((status = 200, description = "`{changes: [{id, at_ms, key, old, new, secret, author}]}`, newest first: every settings change with who made it (`owner` = the API or WebUI, `cli`, `plugin:<name>`, `model` = an owner-only tool, `revert:<id>`). A secret's values are never kept (`old`/`new` null)"),
        (status = 503, body = ErrorBody)))]
pub async fn history(state: web::Data<AppState>, q: web::Query<HistoryParams>) -> Result<HttpResponse, ApiError> {
    let q = q.into_inner();
    let changes = state
        .config
        .send(homeagent_actors::config::GetHistory {
            key: q.key.filter(|k| !k.is_empty()),
            limit: q.limit.unwrap_or(100).clamp(1, 1000),
        })
        .await?
        .map_err(super::error::config_error)?;
    Ok(HttpResponse::Ok().json(json!({ "changes": changes })))
}

#[utoipa::path(post, path = "/api/v1/settings/history/{id}/revert", tag = "settings",
    params(("id" = i64, Path, description = "A change's id from GET /api/v1/settings/history")),
    responses((status = 200, description = "`{changed: [keys]}`: the setting is back to its value before that change (recorded as `revert:<id>`)"),
        (status = 400, description = "No such change, or a secret's (its old value is not kept)", body = ErrorBody)))]
pub async fn revert_one(state: web::Data<AppState>, id: web::Path<i64>) -> Result<HttpResponse, ApiError> {
    let changes = state
        .config
        .send(homeagent_actors::config::Revert::Change(id.into_inner()))
        .await?
        .map_err(super::error::config_error)?;
    Ok(HttpResponse::Ok().json(json!({ "changed": changes.iter().map(|c| &c.key).collect::<Vec<_>>() })))
}

/// Query of `POST /api/v1/settings/history/revert`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RevertSince {
    /// Go back to this moment (Unix ms): every change after it is undone.
    to: i64,
}

#[utoipa::path(post, path = "/api/v1/settings/history/revert", tag = "settings", params(RevertSince),
    responses((status = 200, description = "`{changed: [keys]}`: every setting changed after `to` is back to its value then"),
        (status = 400, description = "A secret changed since then (its old value is not kept): nothing was changed", body = ErrorBody)))]
pub async fn revert_since(state: web::Data<AppState>, q: web::Query<RevertSince>) -> Result<HttpResponse, ApiError> {
    let changes = state
        .config
        .send(homeagent_actors::config::Revert::Since(q.to))
        .await?
        .map_err(super::error::config_error)?;
    Ok(HttpResponse::Ok().json(json!({ "changed": changes.iter().map(|c| &c.key).collect::<Vec<_>>() })))
}

#[utoipa::path(get, path = "/api/v1/settings/definitions", tag = "settings",
    responses((status = 200, description = "`{definitions: [{key, namespace, type, min?, max?, min_ms?, options?, default, description, description_zh, secret, unit}], source_fields: [{name, type, …, description, description_zh, secret, unit}], plugins: [{plugin, key, default, description, description_zh, secret}]}`: what the settings page builds its forms from (secret defaults masked). `description` is English; `description_zh` is its Simplified Chinese, `null` where the catalog has none (a third-party plugin's setting)"),
        (status = 503, body = ErrorBody)))]
pub async fn definitions(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let defs = state.config.send(GetDefs).await?;
    let definitions: Vec<Value> = defs.iter().map(def_json).collect();
    let source_fields: Vec<Value> = SOURCE_FIELDS
        .iter()
        .map(|f| {
            let mut v = kind_json(&f.kind);
            v["name"] = json!(f.name);
            v["description"] = json!(f.description);
            v["description_zh"] = json!(source_field_zh(f.name));
            v["secret"] = json!(f.secret);
            v["unit"] = json!(unit(f.name, &f.kind));
            v
        })
        .collect();
    let mut plugins = Vec::new();
    for name in state.plugins.names() {
        for d in state.config.send(GetPluginDefs(name.clone())).await? {
            plugins.push(json!({
                "plugin": name, "key": d.key, "default": shown_default(d.secret, &d.default),
                "description": d.description, "secret": d.secret,
                "description_zh": setting_zh(&format!("{PLUGIN_PREFIX}{name}.{}", d.key)),
            }));
        }
    }
    Ok(HttpResponse::Ok().json(json!({
        "definitions": definitions,
        "source_fields": source_fields,
        "plugins": plugins,
    })))
}

/// Whether `key` is a secret the page only ever saw masked: the core definitions'
/// flag, a source's `api_key`, or a masked value in the current listing.
fn masked_now(listing: &BTreeMap<String, Value>, key: &str) -> bool {
    match listing.get(key) {
        Some(Value::String(s)) => s == MASKED,
        Some(Value::Object(m)) => m.values().any(|v| v == MASKED),
        _ => false,
    }
}

/// Turns the masked values of an update back into "unchanged": the settings page only
/// ever has `********` for a secret, and sending the form back must keep the secret,
/// not store the mask. A secret string sent as `********` is dropped from the update;
/// in a secret map every `********` entry gets its stored value back (entries left
/// out are removed, new ones added). Answers the update to write.
pub async fn unmask_update(
    state: &AppState,
    mut updates: BTreeMap<String, Value>,
) -> Result<BTreeMap<String, Value>, ApiError> {
    if !updates.values().any(contains_mask) {
        return Ok(updates);
    }
    let listing = state
        .config
        .send(GetSettings)
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    // Secret maps by definition: an empty one lists no mask, yet a mask sent for a
    // new name must still be refused rather than stored.
    let secret_maps: Vec<&'static str> = state
        .config
        .send(GetDefs)
        .await?
        .into_iter()
        .filter(|d| d.kind == ValueKind::SecretMap)
        .map(|d| d.key)
        .collect();
    let keys: Vec<String> = updates.keys().cloned().collect();
    for key in keys {
        let secret_map = secret_maps.contains(&key.as_str());
        if !contains_mask(&updates[&key]) || !(secret_map || masked_now(&listing, &key)) {
            continue;
        }
        if updates[&key].is_string() {
            tracing::debug!(%key, "settings update: a masked secret was sent back; kept as it is");
            updates.remove(&key);
            continue;
        }
        let stored = state
            .config
            .send(GetSetting(key.clone()))
            .await?
            .map_err(super::error::config_error)?;
        let old = match stored {
            Some(Value::Object(old)) => old,
            _ => serde_json::Map::new(),
        };
        if let Some(Value::Object(sent)) = updates.get_mut(&key) {
            for (name, v) in sent.iter_mut() {
                if v == MASKED {
                    match old.get(name) {
                        Some(real) => *v = real.clone(),
                        None => {
                            return Err(ApiError::bad_request(format!(
                                "`{key}`: the secret `{name}` is new, so `{MASKED}` cannot stand for its value; type the value"
                            )));
                        }
                    }
                }
            }
        }
    }
    if updates.is_empty() {
        return Err(ApiError::bad_request(
            "nothing to change: every value sent was a masked secret (type a new value to replace one)",
        ));
    }
    Ok(updates)
}

fn contains_mask(v: &Value) -> bool {
    match v {
        Value::String(s) => s == MASKED,
        Value::Object(m) => m.values().any(|v| v == MASKED),
        _ => false,
    }
}

/// How long the test waits for a source that was just saved to reach the provider
/// (the settings relay applies a write a moment after the PUT answered).
const SOURCE_APPEAR_WAIT: Duration = Duration::from_secs(3);
/// Longest the test call itself may take (a slow reasoning model answers "OK" well
/// within this; a hung vendor is reported instead of holding the page).
const TEST_CALL_TIMEOUT: Duration = Duration::from_secs(60);

#[utoipa::path(post, path = "/api/v1/llm/sources/{name}/test", tag = "agent",
    params(("name" = String, Path, description = "A source configured under `core.llm.sources.<name>`")),
    responses(
        (status = 200, description = "`{ok: true, source, model, content, elapsed_ms, usage}`: the source answered a minimal call (\"reply with OK\", 8 tokens) on its own, without falling back to another source"),
        (status = 404, description = "No source of that name", body = ErrorBody),
        (status = 409, description = "The source is configured but unusable (no model, no key…): the reason", body = ErrorBody),
        (status = 502, description = "The call failed: the vendor's error text", body = ErrorBody),
        (status = 504, description = "No answer within 60 s", body = ErrorBody),
    ))]
pub async fn test_source(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let deadline = Instant::now() + SOURCE_APPEAR_WAIT;
    loop {
        let status = state.llm.send(GetLlmStatus).await?;
        if status.sources.iter().any(|s| s.config.name == name) {
            break;
        }
        if Instant::now() >= deadline {
            if let Some(s) = status.skipped.iter().find(|s| s.name == name) {
                return Err(ApiError::conflict(format!(
                    "source `{name}` is not usable: {}",
                    s.reason
                )));
            }
            let known: Vec<String> = status.sources.iter().map(|s| s.config.name.clone()).collect();
            return Err(ApiError::not_found(format!(
                "no LLM source `{name}` (configured: {}); set core.llm.sources.{name}.base_url and .model first",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = Instant::now();
    let call = state.llm.send(ProbeSource {
        name: name.clone(),
        request: homeagent_actors::agent::selftest::probe_request(),
    });
    let result = tokio::time::timeout(TEST_CALL_TIMEOUT, call).await.map_err(|_| {
        ApiError::new(
            actix_web::http::StatusCode::GATEWAY_TIMEOUT,
            format!(
                "source `{name}` did not answer within {} s; check its base_url and first_byte_timeout",
                TEST_CALL_TIMEOUT.as_secs()
            ),
        )
    })??;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    match result {
        Ok(c) => {
            tracing::info!(source = %name, elapsed_ms, "LLM source test: answered");
            Ok(HttpResponse::Ok().json(json!({
                "ok": true, "source": c.source, "model": c.model,
                "content": c.response.content, "elapsed_ms": elapsed_ms, "usage": c.response.usage,
            })))
        }
        Err(e) => {
            tracing::info!(source = %name, "LLM source test failed: {e}");
            Err(ApiError::new(
                actix_web::http::StatusCode::BAD_GATEWAY,
                format!("source `{name}` failed: {e}"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_come_from_the_key_and_the_kind() {
        let int = ValueKind::Int { min: 0, max: 10 };
        assert_eq!(unit("core.x.timeout_ms", &int), Some("ms"));
        assert_eq!(unit("core.x.max_bytes", &int), Some("bytes"));
        assert_eq!(unit("context_window", &int), Some("tokens"));
        assert_eq!(unit("core.llm.max_tokens", &int), Some("tokens"));
        assert_eq!(unit("core.agent.max_tool_turns", &int), None);
        let d = ValueKind::Duration {
            min: Duration::from_secs(1),
        };
        assert!(unit("core.agent.tool_timeout", &d).unwrap().contains("30s"));
        // A string is never given a unit, whatever its name.
        assert_eq!(unit("core.x.path_ms", &ValueKind::String), None);
    }

    #[test]
    fn kinds_carry_their_bounds_and_secret_defaults_are_masked() {
        assert_eq!(
            kind_json(&ValueKind::Int { min: 1, max: 5 }),
            json!({"type": "int", "min": 1, "max": 5})
        );
        assert_eq!(
            kind_json(&ValueKind::Enum(&["a", "b"])),
            json!({"type": "enum", "options": ["a", "b"]})
        );
        assert_eq!(shown_default(true, &json!("sk-1")), json!(MASKED));
        assert_eq!(shown_default(true, &json!("")), json!(""));
        assert_eq!(shown_default(true, &json!({"gh": "x"})), json!({"gh": MASKED}));
        assert_eq!(shown_default(false, &json!("plain")), json!("plain"));
    }

    #[test]
    fn only_masks_count_as_masked() {
        assert!(contains_mask(&json!(MASKED)));
        assert!(contains_mask(&json!({"a": "real", "b": MASKED})));
        assert!(!contains_mask(&json!("********x")));
        assert!(!contains_mask(&json!(["********"])));
        let listing: BTreeMap<String, Value> = [
            ("k".to_owned(), json!(MASKED)),
            ("m".to_owned(), json!({"a": MASKED})),
            ("plain".to_owned(), json!("v")),
        ]
        .into();
        assert!(masked_now(&listing, "k") && masked_now(&listing, "m"));
        assert!(!masked_now(&listing, "plain") && !masked_now(&listing, "absent"));
    }
}
