//! What the memory browser needs beyond the read routes of `agent`: delete a document,
//! edit or delete a relation of the graph, and the knowledge base.

use actix_web::{HttpResponse, web};
use homeagent_actors::memory::graph_actor::{DeleteRelation, GraphCall};
use homeagent_actors::memory::knowledge::{KnowledgeCall, KnowledgeQuery};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::{ApiError, ErrorBody};

#[utoipa::path(delete, path = "/api/v1/memory/documents/{id}", tag = "memory",
    params(("id" = String, Path, description = "A document id from GET /api/v1/memory/documents")),
    responses((status = 200, description = "`{\"id\", \"deleted\": true, \"facts\": n}`: the document, its passages and vectors are gone, and the `facts` graph relations derived from it alone"), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_document(state: web::Data<AppState>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let gone =
        homeagent_actors::memory::forget::forget_document(&state.agent.deps.documents, state.graph.as_ref(), &id)
            .await
            .map_err(|e| ApiError::unavailable(e.to_string()))?;
    if !gone.existed {
        return Err(ApiError::not_found(format!(
            "no document `{id}`; GET /api/v1/memory/documents lists them"
        )));
    }
    tracing::info!(document = %id, facts = gone.facts, "document deleted by the owner, with the facts derived from it");
    Ok(HttpResponse::Ok().json(json!({"id": id, "deleted": true, "facts": gone.facts})))
}

fn graph(
    state: &AppState,
) -> Result<&homeagent_actors::TAddr<homeagent_actors::memory::graph_actor::GraphActor>, ApiError> {
    state
        .graph
        .as_ref()
        .ok_or_else(|| ApiError::unavailable("the graph tier is not running"))
}

/// Body of `PUT /api/v1/memory/graph/relations`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RelationEdit {
    /// The relation as it is: `[source, relation, target]`.
    pub old: [String; 3],
    /// What it becomes; an empty or missing part stays as it was.
    pub new: [Option<String>; 3],
}

#[utoipa::path(put, path = "/api/v1/memory/graph/relations", tag = "memory",
    request_body = RelationEdit,
    responses((status = 200, description = "`{\"result\": text}` (what the memory_edit tool would answer)"), (status = 400, description = "Nothing was changed: why", body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn edit_relation(
    state: web::Data<AppState>,
    body: web::Json<RelationEdit>,
) -> Result<HttpResponse, ApiError> {
    let RelationEdit { old, new } = body.into_inner();
    let result = graph(&state)?
        .send(GraphCall::Edit { old, new })
        .await?
        .map_err(ApiError::bad_request)?;
    Ok(HttpResponse::Ok().json(json!({ "result": result })))
}

#[utoipa::path(delete, path = "/api/v1/memory/graph/relations/{id}", tag = "memory",
    params(("id" = i64, Path, description = "A relation id from GET /api/v1/memory/graph")),
    responses((status = 200, description = "`{\"id\", \"deleted\": true}` (soft: kept as deleted, no longer recalled)"), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_relation(state: web::Data<AppState>, id: web::Path<i64>) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let existed = graph(&state)?
        .send(DeleteRelation(id))
        .await?
        .map_err(ApiError::unavailable)?;
    if !existed {
        return Err(ApiError::not_found(format!(
            "no active relation {id}; GET /api/v1/memory/graph?q=<entity> lists them"
        )));
    }
    tracing::info!(relation = id, "relation deleted from the memory page");
    Ok(HttpResponse::Ok().json(json!({"id": id, "deleted": true})))
}

fn knowledge(
    state: &AppState,
) -> Result<&homeagent_actors::TAddr<homeagent_actors::memory::knowledge::KnowledgeActor>, ApiError> {
    state
        .agent
        .deps
        .knowledge
        .as_ref()
        .ok_or_else(|| ApiError::unavailable("the knowledge base is not running"))
}

/// Query of `GET /api/v1/memory/knowledge`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KnowledgeParams {
    /// Text to search (BM25); without it every item with its size.
    q: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/memory/knowledge", tag = "memory", params(KnowledgeParams),
    responses((status = 200, description = "`{items: [{name, category, bytes}]}`, or with `q` `{results: [{name, category, content, score}]}` (the 10 best)"), (status = 503, body = ErrorBody)))]
pub async fn get_knowledge(
    state: web::Data<AppState>,
    q: web::Query<KnowledgeParams>,
) -> Result<HttpResponse, ApiError> {
    let query = match q.into_inner().q.filter(|s| !s.trim().is_empty()) {
        Some(query) => KnowledgeQuery::Search { query, top_k: 10 },
        None => KnowledgeQuery::List,
    };
    let v = knowledge(&state)?.send(query).await?.map_err(ApiError::bad_request)?;
    Ok(HttpResponse::Ok().json(v))
}

/// Body of `POST /api/v1/memory/knowledge`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeItem {
    /// `category/name` or `name`.
    pub name: String,
    pub content: String,
    /// Guests may recall it too: the item is stored under the `public/` category
    /// (moving an item there or out of it with any tool has the same effect).
    #[serde(default)]
    pub public: bool,
}

#[utoipa::path(post, path = "/api/v1/memory/knowledge", tag = "memory", request_body = KnowledgeItem,
    responses((status = 200, description = "`{\"name\"}` (as stored, sanitised)"), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn add_knowledge(
    state: web::Data<AppState>,
    body: web::Json<KnowledgeItem>,
) -> Result<HttpResponse, ApiError> {
    let KnowledgeItem { name, content, public } = body.into_inner();
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("`name` must not be empty"));
    }
    let public_category = homeagent_actors::memory::knowledge::PUBLIC_CATEGORY;
    let name = if public && !homeagent_actors::memory::knowledge::is_public(name.trim()) {
        format!("{public_category}/{}", name.trim())
    } else {
        name
    };
    let v = knowledge(&state)?
        .send(KnowledgeQuery::Add { name, content })
        .await?
        .map_err(ApiError::bad_request)?;
    Ok(HttpResponse::Ok().json(v))
}

#[utoipa::path(delete, path = "/api/v1/memory/knowledge/{name}", tag = "memory",
    params(("name" = String, Path, description = "An item name from GET /api/v1/memory/knowledge (slashes not encoded)")),
    responses((status = 200, description = "`{\"name\", \"deleted\": true}`"), (status = 404, description = "No such item: the knowledge base's text", body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_knowledge(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let kb = knowledge(&state)?;
    // The delete call answers a text for the model, so success is read from the list.
    let listed = |kb: homeagent_actors::TAddr<homeagent_actors::memory::knowledge::KnowledgeActor>, name: String| async move {
        let items = kb.send(KnowledgeQuery::List).await?.map_err(ApiError::unavailable)?;
        Ok::<bool, ApiError>(
            items["items"]
                .as_array()
                .is_some_and(|items| items.iter().any(|i| i["name"] == name.as_str())),
        )
    };
    if !listed(kb.clone(), name.clone()).await? {
        return Err(ApiError::not_found(format!(
            "no knowledge item `{name}`; GET /api/v1/memory/knowledge lists them"
        )));
    }
    let text = kb.send(KnowledgeCall::Delete { name: name.clone() }).await?;
    if listed(kb.clone(), name.clone()).await? {
        return Err(ApiError::unavailable(text));
    }
    Ok(HttpResponse::Ok().json(json!({"name": name, "deleted": true})))
}
