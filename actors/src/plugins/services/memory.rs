//! The data families: graph memory (`memory.*`), documents (`doc.*`), the knowledge
//! base (`knowledge.*`), the text memory (`textmemory.append`) and the social reads
//! and writes over the graph (`social.*`). Params arrive typed (decoded once at the
//! connection, or built by the Lua API); what is checked here is what the types
//! cannot say: non-empty strings, at least one purge filter, the clamps.

use homeagent_plugin_protocol::PluginRequest as R;
use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::TextAppend;
use serde_json::{Value, json};

use super::KernelServices;
use super::errors::{bad, need, unavailable};
use crate::memory::context::actor::CountEvents;
use crate::memory::documents::{CommitDocument, CountDocuments, GetDocuments};
use crate::memory::graph::actor::{CommitTriples, GraphCall, GraphQuery, GraphStats, SocialQuery};
use crate::memory::graph::{PurgeCriteria, RecallSort, Triple};
use crate::memory::knowledge::KnowledgeQuery;
use crate::memory::textlog::{LogText, TextEvent};

/// `s` if it is not blank; else the error naming the parameter.
fn nonempty(method: &str, key: &str, s: String) -> Result<String, RpcError> {
    if s.trim().is_empty() {
        return Err(bad(method, format!("`{key}` (a non-empty string) is required")));
    }
    Ok(s)
}

/// Whether `req` belongs to these families.
pub fn serves(req: &R) -> bool {
    matches!(
        req,
        R::MemoryRecall(_)
            | R::MemoryCommit(_)
            | R::MemoryIntrospect(_)
            | R::MemoryMerge(_)
            | R::MemoryPurge(_)
            | R::DocQuery(_)
            | R::DocInsert(_)
            | R::DocRemove(_)
            | R::DocStats(_)
            | R::KnowledgeSearch(_)
            | R::KnowledgeAdd(_)
            | R::KnowledgeList(_)
            | R::TextAppend(_)
            | R::SocialGetPerson(_)
            | R::SocialGetTrait(_)
            | R::SocialGetNetwork(_)
            | R::SocialGetRelations(_)
            | R::SocialListPersons(_)
            | R::SocialSetTrait(_)
            | R::SocialRelate(_)
    )
}

impl KernelServices {
    /// Runs one call of these families for `plugin` (capability already checked).
    pub(super) async fn memory(&self, plugin: &str, req: R) -> Result<Value, RpcError> {
        let method = req.method();
        let gone = |e: crate::addr::SendError| unavailable(method, e);
        // `social.getRelations` is `social.getPerson` cut to the relations.
        let relations_only = matches!(req, R::SocialGetRelations(_));
        match req {
            R::MemoryRecall(p) => {
                let graph = need("graph memory", &self.graph)?;
                let q = nonempty(method, "query", p.query.joined())?;
                let depth = p.depth.unwrap_or(1).min(3);
                let r = graph
                    .send(GraphQuery {
                        q,
                        depth,
                        sort: RecallSort::Relevance,
                        top: None,
                    })
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))?;
                Ok(serde_json::to_value(r).unwrap_or_default())
            }
            R::MemoryCommit(p) => {
                let graph = need("graph memory", &self.graph)?;
                if p.triples.is_empty() {
                    return Err(bad(method, "`triples` is empty"));
                }
                let triples = p
                    .triples
                    .into_iter()
                    .map(|t| Triple {
                        subject: t.subject,
                        subject_type: t.subject_type,
                        relation: t.relation,
                        object: t.object,
                        object_type: t.object_type,
                        confidence: t.confidence,
                        sentence: t.sentence,
                    })
                    .collect();
                let (e, r) = graph
                    .send(CommitTriples {
                        triples,
                        session: format!("plugin:{plugin}"),
                    })
                    .await
                    .map_err(gone)?
                    .map_err(|e| bad(method, e))?;
                Ok(json!({"entities": e, "relations": r}))
            }
            R::MemoryIntrospect(_) => {
                let graph = need("graph memory", &self.graph)?;
                let i = graph
                    .send(GraphStats)
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))?;
                Ok(serde_json::to_value(i).unwrap_or_default())
            }
            R::MemoryMerge(p) => {
                let graph = need("graph memory", &self.graph)?;
                let source = nonempty(method, "source", p.source)?;
                let target = nonempty(method, "target", p.target)?;
                let text = graph
                    .send(GraphCall::Merge { source, target })
                    .await
                    .map_err(gone)?
                    .unwrap_or_else(|refused| refused.to_string());
                Ok(json!({ "text": text }))
            }
            R::MemoryPurge(p) => {
                let graph = need("graph memory", &self.graph)?;
                if p.subject_contains.is_empty() && p.relation_type.is_empty() && p.target_contains.is_empty() {
                    return Err(bad(
                        method,
                        "give at least one of subject_contains, relation_type, target_contains",
                    ));
                }
                let criteria = PurgeCriteria {
                    subject_contains: p.subject_contains,
                    relation_type: p.relation_type,
                    target_contains: p.target_contains,
                };
                let mode = if p.hard { "hard" } else { "soft" }.to_owned();
                let text = graph
                    .send(GraphCall::Purge { criteria, mode })
                    .await
                    .map_err(gone)?
                    .unwrap_or_else(|refused| refused.to_string());
                Ok(json!({ "text": text }))
            }
            R::DocQuery(p) => {
                let ctx = need("document memory", &self.documents)?;
                let query = nonempty(method, "query", p.query)?;
                let top_k = p.top_k.unwrap_or(5).clamp(1, 20);
                let mut docs = ctx
                    .send(GetDocuments {
                        query: Some(query),
                        qv: None,
                    })
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))?;
                docs.truncate(top_k);
                Ok(json!({ "documents": docs }))
            }
            R::DocInsert(p) => {
                let ctx = need("document memory", &self.documents)?;
                let content = nonempty(method, "content", p.content)?;
                let id = ctx
                    .send(CommitDocument {
                        summary: p.summary,
                        content,
                    })
                    .await
                    .map_err(gone)?
                    .map_err(|e| bad(method, e))?;
                Ok(json!({ "id": id }))
            }
            R::DocRemove(p) => {
                let docs = need("document memory", &self.documents)?;
                let id = nonempty(method, "id", p.id)?;
                let removed = crate::memory::lifecycle::forget::forget_document(&docs, self.graph.as_ref(), &id)
                    .await
                    .map_err(|e| unavailable(method, e))?;
                Ok(json!({ "removed": removed.existed }))
            }
            R::DocStats(_) => {
                let ctx = need("document memory", &self.context)?;
                let docs = need("document memory", &self.documents)?;
                let (events, documents) = futures_util::join!(ctx.send(CountEvents), docs.send(CountDocuments));
                let events = events.map_err(gone)?;
                let documents = documents.map_err(gone)?.map_err(|e| unavailable(method, e))?;
                Ok(json!({"events": events, "documents": documents}))
            }
            R::KnowledgeSearch(_) | R::KnowledgeAdd(_) | R::KnowledgeList(_) => {
                let kb = need("the knowledge base", &self.knowledge)?;
                let q = match req {
                    R::KnowledgeSearch(p) => KnowledgeQuery::Search {
                        query: nonempty(method, "query", p.query)?,
                        top_k: p.top_k.unwrap_or(5),
                    },
                    R::KnowledgeAdd(p) => KnowledgeQuery::Add {
                        name: nonempty(method, "name", p.name)?,
                        content: nonempty(method, "content", p.content)?,
                    },
                    _ => KnowledgeQuery::List,
                };
                kb.send(q).await.map_err(gone)?.map_err(|e| bad(method, e))
            }
            R::TextAppend(t) => self.text_append(plugin, t).await,
            R::SocialGetPerson(p) | R::SocialGetRelations(p) => {
                let graph = need("graph memory", &self.graph)?;
                let name = nonempty(method, "name", p.name)?;
                let v = graph
                    .send(SocialQuery::Person { name })
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))?;
                Ok(if relations_only {
                    json!({ "relations": v["relations"] })
                } else {
                    v
                })
            }
            R::SocialGetTrait(p) => {
                let graph = need("graph memory", &self.graph)?;
                let q = SocialQuery::Trait {
                    name: nonempty(method, "name", p.name)?,
                    trait_: nonempty(method, "trait", p.trait_)?,
                };
                graph.send(q).await.map_err(gone)?.map_err(|e| unavailable(method, e))
            }
            R::SocialGetNetwork(p) => {
                let graph = need("graph memory", &self.graph)?;
                let q = SocialQuery::Network {
                    name: nonempty(method, "name", p.name)?,
                    depth: p.depth.unwrap_or(2).clamp(1, 3),
                };
                graph.send(q).await.map_err(gone)?.map_err(|e| unavailable(method, e))
            }
            R::SocialSetTrait(p) => {
                let graph = need("graph memory", &self.graph)?;
                let q = SocialQuery::SetTrait {
                    name: nonempty(method, "name", p.name)?,
                    trait_: nonempty(method, "trait", p.trait_)?,
                    value: nonempty(method, "value", p.value)?,
                };
                graph.send(q).await.map_err(gone)?.map_err(|e| bad(method, e))
            }
            R::SocialRelate(p) => {
                let graph = need("graph memory", &self.graph)?;
                let q = SocialQuery::Relate {
                    a: nonempty(method, "a", p.a)?,
                    relation: nonempty(method, "relation", p.relation)?,
                    b: nonempty(method, "b", p.b)?,
                };
                graph.send(q).await.map_err(gone)?.map_err(|e| bad(method, e))
            }
            R::SocialListPersons(_) => {
                let graph = need("graph memory", &self.graph)?;
                graph
                    .send(SocialQuery::Persons)
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))
            }
            other => Err(RpcError {
                code: RpcError::UNKNOWN_METHOD,
                message: format!("`{}` is not a data method", other.method()),
            }),
        }
    }

    async fn text_append(&self, plugin: &str, t: TextAppend) -> Result<Value, RpcError> {
        let method = homeagent_plugin_protocol::methods::TEXTMEMORY_APPEND;
        let log = need("the text memory", &self.textlog)?;
        if t.content.trim().is_empty() {
            return Err(bad(method, "`content` is empty"));
        }
        let source = match t.channel.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => format!("{plugin}/{c}"),
            None => plugin.to_owned(),
        };
        let assistant = t.role == "assistant";
        let event = TextEvent {
            ts: t.timestamp.unwrap_or_else(crate::clock::now_ms),
            source,
            input: if assistant { String::new() } else { t.content.clone() },
            response: if assistant { t.content } else { String::new() },
            tools_used: vec![],
            imported: false,
            level: None,
            media: Vec::new(),
        };
        log.send(LogText(event)).await.map_err(|e| unavailable(method, e))?;
        Ok(json!({ "ok": true }))
    }
}
