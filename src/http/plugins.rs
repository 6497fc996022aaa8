//! The plugins' routes: the list, install and uninstall, each plugin's actions
//! (restart, reload, enable, disable), its registered APIs and its tools with their
//! parameter schemas.

use actix_web::{HttpResponse, web};
use homeagent_actors::i18n::tool_zh;
use homeagent_actors::stages::GetTools;
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

fn entry(
    state: &AppState,
    name: &str,
) -> Result<std::sync::Arc<homeagent_actors::plugins::set::PluginEntry>, ApiError> {
    state
        .plugins
        .get(name)
        .ok_or_else(|| ApiError::not_found(format!("no plugin `{name}`; GET /api/v1/plugins lists them")))
}

#[utoipa::path(get, path = "/api/v1/plugins/{name}/tools", tag = "plugins",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, description = "`{\"tools\": [{name, description, description_zh, parameters}]}`: the tools the plugin registered, as the model sees them (parameters is the JSON Schema of the arguments); empty while it is stopped or disabled. `description_zh` is the description in Simplified Chinese, `null` for a tool the catalog does not know (a third-party plugin's)"),
        (status = 404, body = ErrorBody),
    ))]
pub async fn plugin_tools(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let entry = entry(&state, &name)?;
    let names = entry.info.tools.lock().clone();
    let registry = state.agent.deps.stages.send(GetTools).await?;
    let tools: Vec<_> = names
        .iter()
        .filter_map(|n| registry.get(n))
        .map(|t| {
            json!({"name": t.spec.name, "description": t.spec.description,
                "description_zh": tool_zh(&t.spec.name), "parameters": t.spec.parameters})
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "tools": tools })))
}

#[utoipa::path(delete, path = "/api/v1/plugins/{name}", tag = "plugins",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, description = "`{\"name\", \"status\": \"uninstalled\"}`: stopped, out of the supervision tree, its tools and skill out of the next prompt, its directory deleted (its data in DATA/plugin_data is kept)"),
        (status = 404, body = ErrorBody),
        (status = 409, description = "It could not be removed completely: what is left and what to do", body = ErrorBody),
    ))]
pub async fn uninstall(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let entry = entry(&state, &name)?;
    state.plugins.uninstall(&entry).await?;
    // A later install of the same name starts enabled.
    if let Err(e) = state
        .config
        .send(homeagent_actors::config::SetPluginDisabled {
            name: name.clone(),
            disabled: false,
        })
        .await?
    {
        tracing::warn!(plugin = %name, "uninstalled, but its disabled flag stays: {e}");
    }
    Ok(HttpResponse::Ok().json(json!({"name": name, "status": "uninstalled"})))
}

#[utoipa::path(get, path = "/api/v1/plugins", tag = "plugins",
    responses((status = 200, description = "`{\"plugins\": [{name, kind, state (starting|running|backoff|quarantined|disabled|stopped|idle; idle: `auto_start: false`, not started until enabled or reloaded), problem (why it cannot run: a bad manifest, a min_version above this homed, another platform), pid, restarts, last_exit, stderr_tail, tools, apis, actor}]}`")))]
pub async fn get_plugins(state: web::Data<AppState>) -> HttpResponse {
    let list: Vec<_> = state.plugins.list().iter().map(|p| p.status(&state.registry)).collect();
    HttpResponse::Ok().json(json!({ "plugins": list }))
}

fn find_plugin(
    state: &AppState,
    name: &str,
) -> Result<std::sync::Arc<homeagent_actors::plugins::set::PluginEntry>, ApiError> {
    let entry = state
        .plugins
        .get(name)
        .ok_or_else(|| ApiError::not_found(format!("no plugin `{name}`; GET /api/v1/plugins lists them")))?;
    if let Some(problem) = &entry.problem {
        return Err(ApiError::conflict(format!("plugin `{name}` cannot run: {problem}")));
    }
    Ok(entry)
}

#[utoipa::path(post, path = "/api/v1/plugins/{name}/api/{api}", tag = "plugins",
    params(
        ("name" = String, Path, description = "Plugin name"),
        ("api" = String, Path, description = "A name the plugin registered with `sdk.register_api` (listed as `apis` in GET /api/v1/plugins)"),
    ),
    request_body(content = Object, description = "Any JSON value, handed to the plugin's handler (empty body = nil)"),
    responses(
        (status = 200, description = "`{\"result\": ...}`: what the handler returned"),
        (status = 400, description = "The body is not JSON", body = ErrorBody),
        (status = 404, description = "No such plugin or API", body = ErrorBody),
        (status = 502, description = "The handler failed or answered `nil, err`", body = ErrorBody),
        (status = 503, description = "The plugin is not running", body = ErrorBody),
    ))]
pub async fn plugin_api(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    use homeagent_actors::plugins::process::ApiCallError;
    let (name, api) = path.into_inner();
    let entry = find_plugin(&state, &name)?;
    let body: serde_json::Value = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body must be JSON (or empty): {e}")))?
    };
    match entry.info.call_api(&name, &api, body).await {
        Ok(result) => Ok(HttpResponse::Ok().json(json!({ "result": result }))),
        Err(e @ ApiCallError::Unknown { .. }) => Err(ApiError::not_found(e.to_string())),
        Err(e @ ApiCallError::NotRunning(_)) => Err(ApiError::unavailable(e.to_string())),
        Err(e @ ApiCallError::Failed { .. }) => {
            Err(ApiError::new(actix_web::http::StatusCode::BAD_GATEWAY, e.to_string()))
        }
    }
}

#[utoipa::path(post, path = "/api/v1/plugins/{name}/{action}", tag = "plugins",
    params(
        ("name" = String, Path, description = "Plugin name"),
        ("action" = String, Path, description = "`restart` or `reload` (restart it now, re-reading its entry file; ends a quarantine), `disable` (stop it and keep it stopped, across daemon restarts), `enable`"),
    ),
    responses(
        (status = 200, description = "`{\"name\", \"action\", \"state\"}`"),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
    ))]
pub async fn plugin_action(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (name, action) = path.into_inner();
    let entry = find_plugin(&state, &name)?;
    match action.as_str() {
        "restart" | "reload" => {
            entry.restart(&state.registry).await?;
        }
        "disable" => {
            state
                .config
                .send(homeagent_actors::config::SetPluginDisabled {
                    name: name.clone(),
                    disabled: true,
                })
                .await?
                .map_err(|e| ApiError::unavailable(e.to_string()))?;
            state.plugins.disable(&entry).await?;
        }
        "enable" => {
            state
                .config
                .send(homeagent_actors::config::SetPluginDisabled {
                    name: name.clone(),
                    disabled: false,
                })
                .await?
                .map_err(|e| ApiError::unavailable(e.to_string()))?;
            state.plugins.enable(&entry).await?;
        }
        other => {
            return Err(ApiError::not_found(format!(
                "unknown action `{other}`; use restart, reload, enable or disable"
            )));
        }
    }
    Ok(HttpResponse::Ok().json(json!({"name": name, "action": action, "state": entry.status(&state.registry).state})))
}

#[utoipa::path(post, path = "/api/v1/plugins/install", tag = "plugins",
    request_body(content = Vec<u8>, content_type = "application/zip", description = "The `.hmap` package (a zip with plugin.json at its root), at most 100 MB"),
    responses(
        (status = 201, description = "`{\"status\": \"installed\", name, version, entry, kind, checksum, plugin: {status of the started plugin}}`"),
        (status = 400, description = "Not a package, unsafe path, link, bad manifest, a `min_version` above this homed (`version_too_old`) or `platforms` without this one (`wrong_platform`); `kind` says which, the error names both versions or platforms", body = ErrorBody),
        (status = 409, description = "A plugin of that name exists (`action: remove_first`)", body = ErrorBody),
        (status = 413, description = "Over 100 MB", body = ErrorBody),
        (status = 415, description = "Not sent as application/zip or application/octet-stream", body = ErrorBody),
    ))]
pub async fn install_plugin(
    state: web::Data<AppState>,
    req: actix_web::HttpRequest,
    mut payload: web::Payload,
) -> HttpResponse {
    use futures_util::StreamExt;
    use homeagent_actors::plugins::package::{MAX_PACKAGE_BYTES, PackageError};
    use homeagent_actors::plugins::set::InstallError;
    // Only a package's own media types: a browser form cannot send these without a
    // CORS preflight, so a cross-site page cannot post a package even by accident.
    let ct = super::media_type(&req);
    if ct != "application/zip" && ct != "application/octet-stream" {
        return HttpResponse::UnsupportedMediaType().json(json!({
            "error": format!("send the package with `Content-Type: application/zip` (got `{ct}`)"),
            "kind": "content_type",
        }));
    }
    // Read the body ourselves: the limit is far above the JSON one, and an overflow
    // must still answer JSON.
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                return HttpResponse::BadRequest()
                    .json(json!({"error": format!("cannot read the package body: {e}"), "kind": "not_a_package"}));
            }
        };
        if (body.len() + chunk.len()) as u64 > MAX_PACKAGE_BYTES {
            let e = PackageError::TooLarge {
                size: (body.len() + chunk.len()) as u64,
                limit: MAX_PACKAGE_BYTES,
            };
            return HttpResponse::PayloadTooLarge().json(json!({"error": e.to_string(), "kind": e.kind()}));
        }
        body.extend_from_slice(&chunk);
    }
    match state.plugins.install(body).await {
        Ok((installed, status)) => HttpResponse::Created().json(json!({
            "status": installed.status,
            "name": installed.name,
            "version": installed.version,
            "entry": installed.entry,
            "kind": installed.kind,
            "checksum": installed.checksum,
            "plugin": status,
        })),
        Err(e) => {
            let (code, kind) = match &e {
                InstallError::Package(p @ PackageError::Exists(_)) => (actix_web::http::StatusCode::CONFLICT, p.kind()),
                InstallError::Package(p @ PackageError::TooLarge { .. }) => {
                    (actix_web::http::StatusCode::PAYLOAD_TOO_LARGE, p.kind())
                }
                InstallError::Package(p @ PackageError::Io(_)) => {
                    (actix_web::http::StatusCode::INTERNAL_SERVER_ERROR, p.kind())
                }
                InstallError::Package(p) => (actix_web::http::StatusCode::BAD_REQUEST, p.kind()),
                InstallError::Load(_) => (actix_web::http::StatusCode::BAD_REQUEST, "bad_manifest"),
                InstallError::Reserved(_) => (actix_web::http::StatusCode::CONFLICT, "reserved_name"),
                InstallError::Start(_) => (actix_web::http::StatusCode::UNPROCESSABLE_ENTITY, "start_failed"),
            };
            tracing::warn!("package install refused: {e}");
            let mut body = json!({"error": e.to_string(), "kind": kind});
            if kind == "exists" {
                body["action"] = json!("remove_first");
            }
            HttpResponse::build(code).json(body)
        }
    }
}
