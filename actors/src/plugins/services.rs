//! Kernel services offered to plugins: the data methods of the protocol (graph
//! memory, documents, knowledge, text memory, social reads), output channel and stage
//! registration helpers, and event subscriptions. Shared by subprocess plugins
//! (`process.rs`, over the wire) and Lua plugins (`lua.rs`, as `sdk.*`), so both get
//! the same operations, results and capability checks.
//!
//! Capability checks by method happen before a call reaches [`KernelServices::data`]:
//! the caller asks the manifest ([`Manifest::allows`]) first. The settings methods
//! also check the namespace a call touches (own `plugin.<name>.*` keys are free; core
//! keys and other plugins' keys need `settings_cross`), which only the arguments tell.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use homeagent_plugin_protocol::Manifest;
use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::{self as m, EventsSubscribe, OutputRegister, StageRegister, TextAppend};
use parking_lot::RwLock;
use serde_json::{Value, json};

use crate::addr::TAddr;
pub use crate::agent::channels::Deliver;
use crate::agent::channels::{Channel, Channels, caps};
use crate::bus::{EventBus, KernelEvent};
use crate::memory::actor::{ContextActor, CountEvents};
use crate::memory::documents::{CommitDocument, CountDocuments, DeleteDoc, DocumentsActor, GetDocuments};
use crate::memory::graph::{PurgeCriteria, RecallSort, Triple};
use crate::memory::graph_actor::{CommitTriples, GraphActor, GraphCall, GraphQuery, GraphStats, SocialQuery};
use crate::memory::knowledge::{KnowledgeActor, KnowledgeQuery};
use crate::memory::textlog::{LogText, TextEvent, TextLogActor};
use crate::stages::{Scope, Stage};

mod settings;

use crate::config::ConfigActor;
use crate::llm::provider::LlmActor;

/// Handles of the kernel services plugins may use (each optional: a kernel built
/// without a tier answers "unavailable").
#[derive(Clone, Default)]
pub struct KernelServices {
    pub bus: EventBus,
    pub channels: Channels,
    pub context: Option<TAddr<ContextActor>>,
    /// The document tier (`doc.*`).
    pub documents: Option<TAddr<DocumentsActor>>,
    pub textlog: Option<TAddr<TextLogActor>>,
    pub graph: Option<TAddr<GraphActor>>,
    pub knowledge: Option<TAddr<KnowledgeActor>>,
    /// Settings (`settings.*`).
    pub config: Option<TAddr<ConfigActor>>,
    /// LLM sources (`llm.*`).
    pub llm: Option<TAddr<LlmActor>>,
    /// The media memory, where `io.injectMedia*` stores a plugin's images.
    pub media: Option<crate::memory::media::actor::MediaHandle>,
}

fn bad(method: &str, msg: impl std::fmt::Display) -> RpcError {
    RpcError {
        code: RpcError::INVALID_PARAMS,
        message: format!("invalid params for `{method}`: {msg}"),
    }
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> RpcError {
    RpcError {
        code: RpcError::GONE,
        message: format!("{what} is not available: {e}"),
    }
}

fn str_param<'a>(method: &str, p: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    p.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| bad(method, format!("`{key}` (a non-empty string) is required")))
}

fn usize_param(p: &Value, key: &str, default: usize) -> usize {
    p.get(key).and_then(Value::as_u64).map_or(default, |n| n as usize)
}

fn need<T: Clone>(what: &str, h: &Option<T>) -> Result<T, RpcError> {
    h.clone()
        .ok_or_else(|| unavailable(what, "this kernel runs without it"))
}

/// The source an input injected by `plugin` is filed under: a plugin speaks for
/// itself, so a source outside its own name is put under it (`<plugin>/<source>`);
/// none means the plugin's name.
pub fn inject_source(plugin: &str, source: Option<&str>) -> String {
    match source.filter(|s| !s.is_empty()) {
        Some(s) if s.split('/').next() == Some(plugin) => s.to_owned(),
        Some(s) => format!("{plugin}/{s}"),
        None => plugin.to_owned(),
    }
}

/// Whether `method` is one of the data methods [`KernelServices::data`] serves.
pub fn is_data_method(method: &str) -> bool {
    [
        m::MEMORY_RECALL,
        m::MEMORY_COMMIT,
        m::MEMORY_INTROSPECT,
        m::MEMORY_MERGE,
        m::MEMORY_PURGE,
        m::DOC_QUERY,
        m::DOC_INSERT,
        m::DOC_REMOVE,
        m::DOC_STATS,
        m::KNOWLEDGE_SEARCH,
        m::KNOWLEDGE_ADD,
        m::KNOWLEDGE_CREATE,
        m::KNOWLEDGE_LIST,
        m::TEXTMEMORY_APPEND,
        m::SOCIAL_GET_PERSON,
        m::SOCIAL_GET_TRAIT,
        m::SOCIAL_GET_NETWORK,
        m::SOCIAL_GET_RELATIONS,
        m::SOCIAL_LIST_PERSONS,
        m::SOCIAL_SET_TRAIT,
        m::SOCIAL_RELATE,
    ]
    .contains(&method)
        || settings::is_settings_method(method)
}

impl KernelServices {
    /// Runs a data method for the plugin of `manifest` (capability of the method
    /// already checked). `None` when the method is not a data method.
    pub fn data(
        &self,
        manifest: &Manifest,
        method: &str,
        p: Value,
    ) -> Option<BoxFuture<'static, Result<Value, RpcError>>> {
        if !is_data_method(method) {
            return None;
        }
        let (s, manifest, method) = (self.clone(), manifest.clone(), method.to_owned());
        Some(Box::pin(async move {
            if settings::is_settings_method(&method) {
                return s.settings(&manifest, &method, p).await;
            }
            s.run(&manifest.name, &method, p).await
        }))
    }

    async fn run(&self, plugin: &str, method: &str, p: Value) -> Result<Value, RpcError> {
        let gone = |e: crate::addr::SendError| unavailable(method, e);
        match method {
            m::MEMORY_RECALL => {
                let graph = need("graph memory", &self.graph)?;
                let q = match p.get("query") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
                    _ => return Err(bad(method, "`query` (a string or a list of strings) is required")),
                };
                if q.trim().is_empty() {
                    return Err(bad(method, "`query` is empty"));
                }
                let depth = usize_param(&p, "depth", 1).min(3);
                let r = graph
                    .send(GraphQuery {
                        q,
                        depth,
                        sort: RecallSort::Relevance,
                    })
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))?;
                Ok(serde_json::to_value(r).unwrap_or_default())
            }
            m::MEMORY_COMMIT => {
                let graph = need("graph memory", &self.graph)?;
                let triples: Vec<Triple> = serde_json::from_value(p.get("triples").cloned().unwrap_or(Value::Null))
                    .map_err(|e| {
                        bad(
                            method,
                            format!("`triples` must be a list of {{subject, relation, object}}: {e}"),
                        )
                    })?;
                if triples.is_empty() {
                    return Err(bad(method, "`triples` is empty"));
                }
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
            m::MEMORY_INTROSPECT => {
                let graph = need("graph memory", &self.graph)?;
                let i = graph
                    .send(GraphStats)
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))?;
                Ok(serde_json::to_value(i).unwrap_or_default())
            }
            m::MEMORY_MERGE => {
                let graph = need("graph memory", &self.graph)?;
                let source = str_param(method, &p, "source")?.to_owned();
                let target = str_param(method, &p, "target")?.to_owned();
                let text = graph
                    .send(GraphCall::Merge { source, target })
                    .await
                    .map_err(gone)?
                    .unwrap_or_else(|refused| refused);
                Ok(json!({ "text": text }))
            }
            m::MEMORY_PURGE => {
                let graph = need("graph memory", &self.graph)?;
                let criteria: PurgeCriteria = serde_json::from_value(p.clone()).map_err(|e| bad(method, e))?;
                if criteria.subject_contains.is_empty()
                    && criteria.relation_type.is_empty()
                    && criteria.target_contains.is_empty()
                {
                    return Err(bad(
                        method,
                        "give at least one of subject_contains, relation_type, target_contains",
                    ));
                }
                let hard = p.get("hard").and_then(Value::as_bool).unwrap_or(false);
                let mode = if hard { "hard" } else { "soft" }.to_owned();
                let text = graph
                    .send(GraphCall::Purge { criteria, mode })
                    .await
                    .map_err(gone)?
                    .unwrap_or_else(|refused| refused);
                Ok(json!({ "text": text }))
            }
            m::DOC_QUERY => {
                let ctx = need("document memory", &self.documents)?;
                let query = str_param(method, &p, "query")?.to_owned();
                let top_k = usize_param(&p, "top_k", 5).clamp(1, 20);
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
            m::DOC_INSERT => {
                let ctx = need("document memory", &self.documents)?;
                let content = str_param(method, &p, "content")?.to_owned();
                let summary = p
                    .get("summary")
                    .or_else(|| p.get("title"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let id = ctx
                    .send(CommitDocument { summary, content })
                    .await
                    .map_err(gone)?
                    .map_err(|e| bad(method, e))?;
                Ok(json!({ "id": id }))
            }
            m::DOC_REMOVE => {
                let ctx = need("document memory", &self.documents)?;
                let id = str_param(method, &p, "id")?.to_owned();
                let removed = ctx
                    .send(DeleteDoc(id))
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))?;
                Ok(json!({ "removed": removed }))
            }
            m::DOC_STATS => {
                let ctx = need("document memory", &self.context)?;
                let docs = need("document memory", &self.documents)?;
                let (events, documents) = futures_util::join!(ctx.send(CountEvents), docs.send(CountDocuments));
                let events = events.map_err(gone)?;
                let documents = documents.map_err(gone)?.map_err(|e| unavailable(method, e))?;
                Ok(json!({"events": events, "documents": documents}))
            }
            m::KNOWLEDGE_SEARCH | m::KNOWLEDGE_ADD | m::KNOWLEDGE_CREATE | m::KNOWLEDGE_LIST => {
                let kb = need("the knowledge base", &self.knowledge)?;
                let q = match method {
                    m::KNOWLEDGE_SEARCH => KnowledgeQuery::Search {
                        query: str_param(method, &p, "query")?.to_owned(),
                        top_k: usize_param(&p, "top_k", 5),
                    },
                    m::KNOWLEDGE_LIST => KnowledgeQuery::List,
                    _ => KnowledgeQuery::Add {
                        name: str_param(method, &p, "name")?.to_owned(),
                        content: str_param(method, &p, "content")?.to_owned(),
                    },
                };
                kb.send(q).await.map_err(gone)?.map_err(|e| bad(method, e))
            }
            m::TEXTMEMORY_APPEND => {
                let log = need("the text memory", &self.textlog)?;
                let t: TextAppend = serde_json::from_value(p).map_err(|e| bad(method, e))?;
                if t.content.trim().is_empty() {
                    return Err(bad(method, "`content` is empty"));
                }
                let source = match t.channel.as_deref().filter(|c| !c.is_empty()) {
                    Some(c) => format!("{plugin}/{c}"),
                    None => plugin.to_owned(),
                };
                let assistant = t.role == "assistant";
                let event = TextEvent {
                    ts: t.timestamp.unwrap_or_else(crate::memory::now_ms),
                    source,
                    input: if assistant { String::new() } else { t.content.clone() },
                    response: if assistant { t.content } else { String::new() },
                    tools_used: vec![],
                    imported: false,
                    level: None,
                };
                log.send(LogText(event)).await.map_err(gone)?;
                Ok(json!({ "ok": true }))
            }
            m::SOCIAL_GET_PERSON | m::SOCIAL_GET_TRAIT | m::SOCIAL_GET_NETWORK | m::SOCIAL_GET_RELATIONS => {
                let graph = need("graph memory", &self.graph)?;
                let name = str_param(method, &p, "name")?.to_owned();
                let q = match method {
                    m::SOCIAL_GET_TRAIT => SocialQuery::Trait {
                        name,
                        trait_: str_param(method, &p, "trait")?.to_owned(),
                    },
                    m::SOCIAL_GET_NETWORK => SocialQuery::Network {
                        name,
                        depth: usize_param(&p, "depth", 2).clamp(1, 3),
                    },
                    _ => SocialQuery::Person { name },
                };
                let v = graph.send(q).await.map_err(gone)?.map_err(|e| unavailable(method, e))?;
                Ok(if method == m::SOCIAL_GET_RELATIONS {
                    json!({ "relations": v["relations"] })
                } else {
                    v
                })
            }
            m::SOCIAL_SET_TRAIT | m::SOCIAL_RELATE => {
                let graph = need("graph memory", &self.graph)?;
                let q = if method == m::SOCIAL_SET_TRAIT {
                    SocialQuery::SetTrait {
                        name: str_param(method, &p, "name")?.to_owned(),
                        trait_: str_param(method, &p, "trait")?.to_owned(),
                        value: str_param(method, &p, "value")?.to_owned(),
                    }
                } else {
                    SocialQuery::Relate {
                        a: str_param(method, &p, "a")?.to_owned(),
                        relation: str_param(method, &p, "relation")?.to_owned(),
                        b: str_param(method, &p, "b")?.to_owned(),
                    }
                };
                graph.send(q).await.map_err(gone)?.map_err(|e| bad(method, e))
            }
            m::SOCIAL_LIST_PERSONS => {
                let graph = need("graph memory", &self.graph)?;
                graph
                    .send(SocialQuery::Persons)
                    .await
                    .map_err(gone)?
                    .map_err(|e| unavailable(method, e))
            }
            other => Err(RpcError {
                code: RpcError::UNKNOWN_METHOD,
                message: format!("unknown method `{other}`"),
            }),
        }
    }

    /// Registers an output channel for `plugin`, delivered by `deliver`.
    pub fn register_output(&self, plugin: &str, reg: &OutputRegister, deliver: Deliver) -> Result<Value, RpcError> {
        let caps = parse_caps(reg.caps.as_ref()).map_err(|e| bad(m::OUTPUT_REGISTER, e))?;
        let channel = Channel {
            name: reg.name.clone(),
            description: if reg.description.is_empty() {
                format!("channel of the plugin `{plugin}`")
            } else {
                reg.description.clone()
            },
            caps,
            sync: false,
        };
        self.channels
            .register(plugin, channel, deliver)
            .map_err(|e| bad(m::OUTPUT_REGISTER, e))?;
        Ok(json!({"ok": true, "tool": format!("{}{}", crate::agent::channels::SEND_PREFIX, reg.name)}))
    }
}

/// Channel capabilities from names or the SDK's bit mask; default text.
pub fn parse_caps(v: Option<&Value>) -> Result<u8, String> {
    const NAMES: [(&str, u8); 5] = [
        ("text", caps::TEXT),
        ("file", caps::FILE),
        ("image", caps::IMAGE),
        ("audio", caps::AUDIO),
        ("structured", caps::STRUCTURED),
    ];
    match v {
        None | Some(Value::Null) => Ok(caps::TEXT),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(b) if (1..32).contains(&b) => Ok(b as u8),
            _ => Err(format!("`caps` bit mask {n} is out of range (1..31)")),
        },
        Some(Value::Array(a)) => {
            let mut bits = 0;
            for c in a {
                let name = c.as_str().unwrap_or_default();
                bits |= NAMES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, b)| *b)
                    .ok_or_else(|| format!("unknown capability `{c}`; use text, file, image, audio, structured"))?;
            }
            Ok(if bits == 0 { caps::TEXT } else { bits })
        }
        Some(other) => Err(format!("`caps` must be a list of names or a bit mask, not {other}")),
    }
}

/// A stage registration's stage and scope, with errors that list the valid values.
pub fn parse_stage(reg: &StageRegister) -> Result<(Stage, Scope), RpcError> {
    let stage = Stage::parse(&reg.stage).ok_or_else(|| {
        let all: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        bad(
            m::STAGE_REGISTER,
            format!("unknown stage `{}`; stages: {}", reg.stage, all.join(", ")),
        )
    })?;
    let scope = match reg.scope.as_deref() {
        None | Some("") | Some("global") => Scope::Global,
        Some("own_tools") => Scope::OwnTools,
        Some(other) => {
            return Err(bad(
                m::STAGE_REGISTER,
                format!("unknown scope `{other}`; use global or own_tools"),
            ));
        }
    };
    Ok((stage, scope))
}

/// A plugin's event subscription: the types it wants and the task forwarding them.
/// Dropping it (the plugin stopped) ends the forwarding.
#[derive(Default)]
pub struct EventSub {
    types: Arc<RwLock<BTreeSet<String>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for EventSub {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl EventSub {
    /// Adds `types` (`"*"` = all); starts forwarding to `sink` on the first call.
    pub fn subscribe(
        &mut self,
        bus: &EventBus,
        req: EventsSubscribe,
        sink: impl Fn(Arc<KernelEvent>) + Send + 'static,
    ) -> Result<Value, RpcError> {
        if req.topics.is_empty() {
            return Err(bad(
                m::EVENTS_SUBSCRIBE,
                "`topics` is empty; list event types (e.g. [\"agent_output\"]) or [\"*\"] for all",
            ));
        }
        self.types.write().extend(req.topics);
        if self.task.is_none() {
            let (mut rx, types) = (bus.subscribe(), self.types.clone());
            self.task = Some(tokio::task::spawn_local(async move {
                use tokio::sync::broadcast::error::RecvError;
                loop {
                    match rx.recv().await {
                        Ok(ev) => {
                            let wanted = {
                                let t = types.read();
                                t.contains("*") || t.contains(ev.kind())
                            };
                            if wanted {
                                sink(ev);
                            }
                        }
                        Err(RecvError::Lagged(n)) => tracing::debug!(missed = n, "plugin event subscriber lagged"),
                        Err(RecvError::Closed) => break,
                    }
                }
            }));
        }
        Ok(json!({ "topics": self.types.read().iter().collect::<Vec<_>>() }))
    }

    /// Removes `types` (all when empty).
    pub fn unsubscribe(&mut self, req: EventsSubscribe) -> Value {
        {
            let mut t = self.types.write();
            if req.topics.is_empty() {
                t.clear();
            } else {
                for x in &req.topics {
                    t.remove(x);
                }
            }
        }
        json!({ "topics": self.types.read().iter().collect::<Vec<_>>() })
    }
}

/// The denial for a call the manifest does not allow, as an RPC error.
pub fn check(manifest: &Manifest, method: &str) -> Result<(), RpcError> {
    manifest.allows(method).map_err(|message| RpcError {
        code: RpcError::DENIED,
        message,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn injected_sources_stay_under_the_plugin_name() {
        assert_eq!(inject_source("timer", None), "timer");
        assert_eq!(inject_source("timer", Some("")), "timer");
        assert_eq!(inject_source("timer", Some("timer/kitchen")), "timer/kitchen");
        assert_eq!(inject_source("timer", Some("http")), "timer/http");
        assert_eq!(inject_source("timer", Some("timerx")), "timer/timerx");
    }

    use super::*;

    #[test]
    fn caps_and_stages_parse_with_helpful_errors() {
        assert_eq!(parse_caps(None), Ok(caps::TEXT));
        assert_eq!(
            parse_caps(Some(&json!(["text", "image"]))),
            Ok(caps::TEXT | caps::IMAGE)
        );
        assert_eq!(parse_caps(Some(&json!(6))), Ok(caps::FILE | caps::IMAGE));
        assert!(
            parse_caps(Some(&json!(["smell"])))
                .unwrap_err()
                .contains("unknown capability")
        );
        assert!(parse_caps(Some(&json!(64))).is_err());
        let reg = |stage: &str, scope: Option<&str>| StageRegister {
            stage: stage.into(),
            scope: scope.map(Into::into),
        };
        assert_eq!(
            parse_stage(&reg("before_output", None)).unwrap(),
            (Stage::BeforeOutput, Scope::Global)
        );
        assert_eq!(
            parse_stage(&reg("after_toolcall", Some("own_tools"))).unwrap().1,
            Scope::OwnTools
        );
        assert!(
            parse_stage(&reg("later", None))
                .unwrap_err()
                .message
                .contains("on_input")
        );
        assert!(
            parse_stage(&reg("on_input", Some("mine")))
                .unwrap_err()
                .message
                .contains("own_tools")
        );
        assert!(is_data_method("memory.recall") && !is_data_method("tool.register"));
    }

    #[test]
    fn data_methods_need_their_tier() {
        let s = KernelServices::default();
        let sys = actix::System::new();
        let manifest: Manifest = serde_json::from_value(json!({"name": "p"})).unwrap();
        let err = sys
            .block_on(s.data(&manifest, "memory.recall", json!({"query": "x"})).unwrap())
            .unwrap_err();
        assert!(err.message.contains("not available"), "{}", err.message);
        let err = sys
            .block_on(s.data(&manifest, "settings.get", json!({"key": "x"})).unwrap())
            .unwrap_err();
        assert!(err.message.contains("not available"), "{}", err.message);
        assert!(s.data(&manifest, "tool.register", json!({})).is_none());
    }
}
