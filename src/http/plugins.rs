//! What the plugins page needs beyond the list and its actions: each plugin's tools
//! with their parameter schemas, and uninstall.

use actix_web::{HttpResponse, web};
use homeagent_actors::i18n::tool_zh;
use homeagent_actors::stages::GetTools;
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

fn entry(
    state: &AppState,
    name: &str,
) -> Result<std::sync::Arc<homeagent_actors::plugins::host::PluginEntry>, ApiError> {
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
    state.plugins.uninstall(&entry).await.map_err(ApiError::conflict)?;
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
