//! The LLM sources: their health, and the presets a first model is connected from.

use std::time::Duration;

use actix_web::{HttpResponse, web};
use homeagent_actors::llm::provider::GetLlmStatus;
use serde_json::json;

use super::AppState;
use super::error::ApiError;

#[utoipa::path(get, path = "/api/v1/llm/sources", tag = "agent",
    responses((status = 200, description = "Configured sources with health (API keys never shown) and skipped sources with the reason")))]
pub async fn get_sources(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(state.llm.send(GetLlmStatus).await?))
}

/// Where the setup looks for a local Ollama (its own default address).
const OLLAMA_TAGS: &str = "http://127.0.0.1:11434/api/tags";

/// The models a local Ollama has pulled (`GET /api/tags`), or `None` when none answers
/// within a moment (a fixed loopback address: nothing from the request reaches it).
async fn local_ollama_models() -> Option<Vec<String>> {
    let client = awc::Client::builder().timeout(Duration::from_millis(800)).finish();
    let mut resp = client.get(OLLAMA_TAGS).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let body: serde_json::Value = resp.json().limit(1 << 20).await.ok()?;
    Some(
        body["models"]
            .as_array()?
            .iter()
            .filter_map(|m| m["name"].as_str().map(str::to_owned))
            .take(50)
            .collect(),
    )
}

#[utoipa::path(get, path = "/api/v1/llm/presets", tag = "agent",
    responses((status = 200, description = "The providers a first model can be connected from: each bundled adapter with its base URL, suggested models, whether it needs a key and where to get one; `ollama_found` and its models when an Ollama answers on 127.0.0.1:11434; `configured`: whether any source is usable now")))]
pub async fn get_presets(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let status = state.llm.send(GetLlmStatus).await?;
    let ollama = local_ollama_models().await;
    let presets: Vec<serde_json::Value> = homeagent_actors::llm::presets::PRESETS
        .iter()
        .map(|p| {
            let mut v = serde_json::to_value(p).unwrap_or_default();
            if p.adapter == "ollama"
                && let Some(models) = &ollama
            {
                v["models"] = json!(models);
            }
            v
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "presets": presets,
        "ollama_found": ollama.is_some(),
        "configured": status.current.is_some(),
    })))
}
