//! The protocol's calls as typed enums: [`PluginRequest`] (plugin → kernel) and
//! [`KernelRequest`] (kernel → plugin), one variant per method with its params type.
//!
//! A frame's `method` and `params` are decoded **once**, where the frame arrives
//! ([`PluginRequest::from_message`], like mini-redis' `Command::from_frame`): the host
//! then matches on variants, never on strings, and every handler gets its params
//! already typed. A method added here is one variant; the compiler then points at
//! every `match` that must handle it.
//!
//! The wire does not change: `method` stays the JSON-RPC method string and `params`
//! its object (the enums are serde-tagged `{"method", "params"}`). Decoding is lenient
//! where the wire always was: absent or `null` params read as `{}`, unknown fields
//! are ignored, optional fields may be `null`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::capability::Capability;
use crate::clock::ClockSet;
use crate::frame::{Request, RpcError};
use crate::handshake::HandshakeParams;
use crate::methods::{
    EventsPublish, EventsSubscribe, InjectMedia, InjectText, InputRegister, OutputRegister, SettingDef, SettingValue,
    SettingsGet, StageRegister, TextAppend, ToolCancel, ToolInvoke, ToolRegister, ToolUnregister, Triple,
};

/// Why a frame's `method`/`params` is not a call of the protocol. Answered to the
/// peer with [`DecodeError::code`] and the message, which says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown method `{method}`; {hint}; see docs/PROTOCOL.md for the methods a plugin may call")]
    UnknownMethod { method: String, hint: String },
    #[error("invalid params for `{method}`: {reason}; see docs/PROTOCOL.md for its params")]
    InvalidParams { method: &'static str, reason: String },
}

impl DecodeError {
    /// The JSON-RPC error code: `-32601` unknown method, `-32602` bad params.
    pub fn code(&self) -> i64 {
        match self {
            Self::UnknownMethod { .. } => RpcError::UNKNOWN_METHOD,
            Self::InvalidParams { .. } => RpcError::INVALID_PARAMS,
        }
    }

    fn unknown(method: &str, known: &[&str]) -> Self {
        // Same family first (`settings.gett` → the settings methods), else the families.
        let family = method.split('.').next().unwrap_or(method);
        let same: Vec<&str> = known
            .iter()
            .copied()
            .filter(|m| m.split('.').next() == Some(family))
            .collect();
        let hint = if same.is_empty() {
            let mut families: Vec<&str> = known.iter().filter_map(|m| m.split('.').next()).collect();
            families.dedup();
            format!("method families: {}", families.join(", "))
        } else {
            format!("the `{family}` methods are {}", same.join(", "))
        };
        Self::UnknownMethod {
            method: method.to_owned(),
            hint,
        }
    }
}

impl From<DecodeError> for RpcError {
    fn from(e: DecodeError) -> Self {
        RpcError {
            code: e.code(),
            message: e.to_string(),
        }
    }
}

/// `v` as `T`; the error names the field it is about (`` `triples[0].subject`: invalid
/// type ... ``), so it says what to fix. The plugin protocol's params and the kernel
/// tools' arguments are decoded by it.
pub fn decode_value<T: DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.into_inner().to_string()
        } else {
            format!("`{path}`: {}", e.into_inner())
        }
    })
}

/// Params of type `T` from the wire: `null` (or absent) is tried as itself, then as `{}`.
fn params<T: DeserializeOwned>(method: &'static str, p: Value) -> Result<T, DecodeError> {
    let bad = |reason| DecodeError::InvalidParams { method, reason };
    match p {
        Value::Null => T::deserialize(Value::Null).or_else(|_| decode_value(Value::Object(Map::new())).map_err(bad)),
        p => decode_value(p).map_err(bad),
    }
}

/// Defines a request enum: serde-tagged (`method` + `params`), with the method table,
/// the one decoder and the encoder generated from the same list.
macro_rules! requests {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[doc = $doc:literal])* $wire:literal $(| $alias:literal)* => $variant:ident($params:ty), )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "method", content = "params")]
        pub enum $name {
            $( $(#[doc = $doc])* #[serde(rename = $wire $(, alias = $alias)*)] $variant($params), )*
        }

        impl $name {
            /// Every method name this enum decodes (aliases included).
            pub const METHODS: &'static [&'static str] = &[$($wire, $($alias,)*)*];

            /// The method name on the wire.
            pub fn method(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $wire,)*
                }
            }

            /// Decodes a frame's method and params; unknown methods and params that do
            /// not fit are typed errors.
            pub fn from_message(method: &str, p: Value) -> Result<Self, DecodeError> {
                match method {
                    $($wire $(| $alias)* => params($wire, p).map(Self::$variant),)*
                    other => Err(DecodeError::unknown(other, Self::METHODS)),
                }
            }

            /// Decodes a request frame (its id stays with the caller).
            pub fn from_request(req: Request) -> Result<Self, DecodeError> {
                Self::from_message(&req.method, req.params)
            }

            /// The method and params to put on the wire.
            pub fn into_message(self) -> (&'static str, Value) {
                match self {
                    $(Self::$variant(p) => ($wire, serde_json::to_value(p).expect("params serialise")),)*
                }
            }

            /// The request frame for this call (`id` 0: a notification).
            pub fn into_request(self, id: u64) -> Request {
                let (method, params) = self.into_message();
                Request {
                    id,
                    method: method.to_owned(),
                    params,
                }
            }
        }
    };
}

requests! {
    /// A call a plugin makes to the kernel. Its capability is decided on the decoded
    /// call ([`PluginRequest::needs`], checked by [`crate::manifest::Manifest::permits`]).
    pub enum PluginRequest {
        /// Offer a tool to the model.
        "tool.register" => ToolRegister(ToolRegister),
        /// Withdraw one of the plugin's own tools.
        "tool.unregister" => ToolUnregister(ToolUnregister),
        /// Handle a pipeline stage (answered later by `stage.invoke`).
        "stage.register" => StageRegister(StageRegister),
        /// Offer an output channel (`output_send__<name>`).
        "output.register" => OutputRegister(OutputRegister),
        /// Declare an input channel: how memory treats its inputs.
        "input.register" => InputRegister(InputRegister),
        /// Withdraw one of the plugin's channels.
        "output.unregister" => OutputUnregister(OutputUnregister),
        /// Offer a named HTTP API (`POST /api/v1/plugins/<plugin>/api/<name>`, answered by `api.invoke`).
        "api.register" => ApiRegister(ApiRegister),
        /// Queue an input; answers the task id at once.
        "io.injectText" => InjectText(InjectText),
        /// Inject an interrupt (L1..L3 for plugins).
        "io.injectInterrupt" => InjectInterrupt(InjectText),
        /// Queue an input and answer the agent's reply once the turn ends.
        "io.injectInputSync" => InjectInputSync(InjectText),
        /// Queue an input carrying images.
        "io.injectMedia" => InjectMedia(InjectMedia),
        /// Queue an input carrying images and answer the reply.
        "io.injectMediaSync" => InjectMediaSync(InjectMedia),
        /// An interrupt carrying images.
        "io.injectInterruptMedia" => InjectInterruptMedia(InjectMedia),
        /// Receive topics as notifications.
        "events.subscribe" => EventsSubscribe(EventsSubscribe),
        /// Stop receiving topics (none: all).
        "events.unsubscribe" => EventsUnsubscribe(EventsSubscribe),
        /// Publish a `plugin_event` on the kernel bus.
        "events.publish" => EventsPublish(EventsPublish),
        "settings.get" => SettingsGet(SettingsGet),
        "settings.set" => SettingsSet(SettingsSet),
        "settings.list" => SettingsList(NoParams),
        "settings.registerDef" => SettingsRegisterDef(SettingDef),
        "settings.defs" => SettingsDefs(NoParams),
        "settings.language" => SettingsLanguage(NoParams),
        "settings.getCore" => SettingsGetCore(SettingsGet),
        "settings.setCore" => SettingsSetCore(SettingsSet),
        "settings.listCore" => SettingsListCore(SettingsListCore),
        "settings.getPlugin" => SettingsGetPlugin(PluginKey),
        "settings.setPlugin" => SettingsSetPlugin(PluginKeyValue),
        "settings.listPlugin" => SettingsListPlugin(PluginName),
        "settings.dump" => SettingsDump(NoParams),
        "settings.plugins" => SettingsPlugins(NoParams),
        "llm.listSources" => LlmListSources(NoParams),
        "llm.currentSource" => LlmCurrentSource(NoParams),
        "llm.setSource" => LlmSetSource(LlmSetSource),
        "memory.recall" => MemoryRecall(MemoryRecall),
        "memory.commit" => MemoryCommit(MemoryCommit),
        "memory.introspect" => MemoryIntrospect(NoParams),
        "memory.merge" => MemoryMerge(MemoryMerge),
        "memory.purge" => MemoryPurge(MemoryPurge),
        "doc.query" => DocQuery(Search),
        "doc.insert" => DocInsert(DocInsert),
        "doc.remove" => DocRemove(DocRemove),
        "doc.stats" => DocStats(NoParams),
        "knowledge.search" => KnowledgeSearch(Search),
        "knowledge.add" | "knowledge.create" => KnowledgeAdd(KnowledgeAdd),
        "knowledge.list" => KnowledgeList(NoParams),
        "textmemory.append" => TextAppend(TextAppend),
        "social.getPerson" => SocialGetPerson(Person),
        "social.getTrait" => SocialGetTrait(PersonTrait),
        "social.getNetwork" => SocialGetNetwork(PersonNetwork),
        "social.getRelations" => SocialGetRelations(Person),
        "social.listPersons" => SocialListPersons(NoParams),
        "social.setTrait" => SocialSetTrait(SetTrait),
        "social.relate" => SocialRelate(Relate),
    }
}

impl PluginRequest {
    /// The capability plugin `me` needs to make this call; `None`: any plugin may.
    ///
    /// Decided on the decoded call, one arm per method and no catch-all, so a method
    /// added to the protocol does not compile until someone decides what it needs; and
    /// the params count where they change the answer: a plugin reads and writes its
    /// own settings through `settings.*Plugin` freely, another plugin's only with
    /// `settings_cross`.
    pub fn needs(&self, me: &str) -> Option<Capability> {
        use Capability as C;
        let cross = |plugin: &str| (plugin != me).then_some(C::SettingsCross);
        match self {
            Self::ToolRegister(_)
            | Self::ToolUnregister(_)
            | Self::StageRegister(_)
            | Self::OutputRegister(_)
            | Self::OutputUnregister(_)
            | Self::ApiRegister(_)
            | Self::SettingsGet(_)
            | Self::SettingsSet(_)
            | Self::SettingsList(_)
            | Self::SettingsRegisterDef(_)
            | Self::SettingsDefs(_)
            | Self::SettingsLanguage(_) => None,
            // Declaring how its injected inputs are remembered is part of injecting.
            Self::InputRegister(_)
            | Self::InjectText(_)
            | Self::InjectInterrupt(_)
            | Self::InjectInputSync(_)
            | Self::InjectMedia(_)
            | Self::InjectMediaSync(_)
            | Self::InjectInterruptMedia(_) => Some(C::Io),
            Self::EventsSubscribe(_) | Self::EventsUnsubscribe(_) | Self::EventsPublish(_) => Some(C::Events),
            Self::SettingsGetCore(_)
            | Self::SettingsSetCore(_)
            | Self::SettingsListCore(_)
            | Self::SettingsDump(_)
            | Self::SettingsPlugins(_) => Some(C::SettingsCross),
            Self::SettingsGetPlugin(p) => cross(&p.plugin),
            Self::SettingsSetPlugin(p) => cross(&p.plugin),
            Self::SettingsListPlugin(p) => cross(&p.plugin),
            Self::LlmListSources(_) | Self::LlmCurrentSource(_) | Self::LlmSetSource(_) => Some(C::Llm),
            Self::MemoryRecall(_)
            | Self::MemoryCommit(_)
            | Self::MemoryIntrospect(_)
            | Self::MemoryMerge(_)
            | Self::MemoryPurge(_) => Some(C::Memory),
            Self::DocQuery(_) | Self::DocInsert(_) | Self::DocRemove(_) | Self::DocStats(_) => Some(C::DocMemory),
            Self::KnowledgeSearch(_) | Self::KnowledgeAdd(_) | Self::KnowledgeList(_) => Some(C::Knowledge),
            Self::TextAppend(_) => Some(C::TextMemory),
            Self::SocialGetPerson(_)
            | Self::SocialGetTrait(_)
            | Self::SocialGetNetwork(_)
            | Self::SocialGetRelations(_)
            | Self::SocialListPersons(_)
            | Self::SocialSetTrait(_)
            | Self::SocialRelate(_) => Some(C::Social),
        }
    }
}

requests! {
    /// A call or notification the kernel sends a plugin.
    pub enum KernelRequest {
        /// The first request (see [`crate::handshake`]).
        "handshake" => Handshake(HandshakeParams),
        /// Run one of the plugin's tools; answer [`crate::methods::ToolResult`].
        "tool.invoke" => ToolInvoke(ToolInvoke),
        /// Notification: the kernel gave up on a `tool.invoke`.
        "tool.cancel" => ToolCancel(ToolCancel),
        /// Run a stage handler; answer a patch object.
        "stage.invoke" => StageInvoke(StageInvoke),
        /// Deliver a message sent to the plugin's channel; answer `{"text"}`.
        "output.invoke" => OutputInvoke(OutputInvoke),
        /// Answer a call of a named API the plugin registered; answer any JSON.
        "api.invoke" => ApiInvoke(ApiInvoke),
        /// Notification: one of the plugin's own settings changed.
        "settings.changed" => SettingsChanged(SettingValue),
        /// Notification: a kernel event the plugin subscribed to (`{"type", "ts_ms", ...}`).
        "event" => Event(Value),
        /// Notification: a frame of the plugin could not be read (no id to answer).
        "error" => Error(ErrorNote),
        /// Notification: stop now; stdin closes right after.
        "plugin.stop" => PluginStop(Option<NoParams>),
        /// The kernel's virtual clock reached `now_ms` (only to plugins that declared the
        /// `clock` feature); answer [`crate::clock::ClockAck`] once what is due has run.
        "clock.set" => ClockSet(ClockSet),
    }
}

/// Params of a method that takes none (`{}`; any fields are ignored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoParams {}

/// `output.unregister`: the channel's name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputUnregister {
    #[serde(default)]
    pub name: String,
}

/// `api.register`: a named API, `[A-Za-z0-9_-]{1,64}` (one URL path segment).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiRegister {
    pub name: String,
    /// Shown in the plugin's listing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

impl ApiRegister {
    /// Why the name cannot be an API's, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        let ok = (1..=64).contains(&self.name.len())
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(())
        } else {
            Err(format!(
                "API name `{}` is not usable: use 1 to 64 of A-Z, a-z, 0-9, `_`, `-`",
                self.name
            ))
        }
    }
}

/// `settings.set` / `settings.setCore`: `value` absent or `null` = back to the default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SettingsSet {
    pub key: String,
    #[serde(default)]
    pub value: Value,
}

/// `settings.listCore`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SettingsListCore {
    #[serde(default, deserialize_with = "null_as_default")]
    pub prefix: String,
}

/// `settings.getPlugin`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PluginKey {
    pub plugin: String,
    pub key: String,
}

/// `settings.setPlugin`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PluginKeyValue {
    pub plugin: String,
    pub key: String,
    #[serde(default)]
    pub value: Value,
}

/// `settings.listPlugin`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PluginName {
    pub plugin: String,
}

/// `llm.setSource` (`source` is accepted for `name`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmSetSource {
    #[serde(default, alias = "source")]
    pub name: String,
}

/// Query terms: one string or a list of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Terms {
    One(String),
    Many(Vec<String>),
}

impl Terms {
    /// The terms as one query string.
    pub fn joined(&self) -> String {
        match self {
            Terms::One(s) => s.clone(),
            Terms::Many(v) => v.join(" "),
        }
    }
}

/// `memory.recall`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecall {
    pub query: Terms,
    /// Default 1, at most 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<usize>,
}

/// `memory.commit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryCommit {
    pub triples: Vec<Triple>,
}

/// `memory.merge`: merge entity `source` into `target`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryMerge {
    pub source: String,
    pub target: String,
}

/// `memory.purge`: non-empty filters are AND-ed; at least one is needed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryPurge {
    #[serde(default, deserialize_with = "null_as_default")]
    pub subject_contains: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub relation_type: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub target_contains: String,
    /// Delete rather than mark deleted.
    #[serde(default, deserialize_with = "null_as_default")]
    pub hard: bool,
}

/// `doc.query` / `knowledge.search`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Search {
    pub query: String,
    /// Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
}

/// `doc.insert` (`title` is accepted for `summary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DocInsert {
    pub content: String,
    #[serde(default, alias = "title", deserialize_with = "null_as_default")]
    pub summary: String,
}

/// `doc.remove`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DocRemove {
    pub id: String,
}

/// `knowledge.add`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeAdd {
    pub name: String,
    pub content: String,
}

/// `social.getPerson` / `social.getRelations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Person {
    pub name: String,
}

/// `social.getTrait`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PersonTrait {
    pub name: String,
    #[serde(rename = "trait")]
    pub trait_: String,
}

/// `social.getNetwork`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PersonNetwork {
    pub name: String,
    /// Default 2, 1 to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<usize>,
}

/// `social.setTrait`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetTrait {
    pub name: String,
    #[serde(rename = "trait")]
    pub trait_: String,
    pub value: String,
}

/// `social.relate`: `a —relation→ b`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Relate {
    pub a: String,
    pub relation: String,
    pub b: String,
}

/// `stage.invoke`: the stage and its whole context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageInvoke {
    pub stage: String,
    #[serde(default)]
    pub ctx: Value,
}

/// `output.invoke`: the channel and the message (`payload`, `type`, `meta`, `task_id`,
/// `source`), kept as sent so a field added later reaches the plugin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputInvoke {
    pub channel: String,
    #[serde(flatten)]
    pub message: Map<String, Value>,
}

impl OutputInvoke {
    /// The whole message as one object (`channel` included), as plugins get it.
    pub fn into_value(self) -> Value {
        serde_json::to_value(self).expect("serialisable")
    }
}

/// `api.invoke`: the API's name and the HTTP body (`null` when empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiInvoke {
    pub name: String,
    #[serde(default)]
    pub body: Value,
}

/// The `error` notification: why a frame of the plugin was dropped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorNote {
    #[serde(default)]
    pub message: String,
}

/// `null` reads as the type's default (Lua and some plugins send `null` for "none").
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods;
    use serde_json::json;

    /// One valid params object per plugin → kernel method.
    fn plugin_samples() -> Vec<(&'static str, Value)> {
        vec![
            (
                "tool.register",
                json!({"name": "t", "description": "d", "parameters": {"type": "object"}, "parallel_safe": true, "no_memory": false}),
            ),
            ("tool.unregister", json!({"name": "t"})),
            (
                "stage.register",
                json!({"stage": "before_output", "scope": "own_tools"}),
            ),
            (
                "output.register",
                json!({"name": "box", "description": "a box", "caps": ["text"]}),
            ),
            ("output.unregister", json!({"name": "box"})),
            (
                "input.register",
                json!({"name": "qq", "no_memory": false, "cleaner": {"rules": [{"pattern": "^\\[.*?\\] ", "replace": ""}]},
                    "context_policy": "prune", "recall_policy": "none"}),
            ),
            ("api.register", json!({"name": "ask", "description": "asks"})),
            ("io.injectText", json!({"text": "hi", "source": "s", "priority": null})),
            (
                "io.injectInterrupt",
                json!({"text": "hi", "source": null, "priority": "L2"}),
            ),
            (
                "io.injectInputSync",
                json!({"text": "hi", "source": null, "priority": null, "profile": "owner"}),
            ),
            (
                "io.injectMedia",
                json!({"text": "look", "source": null, "priority": null, "media": [{"mime": "image/png", "data": "AA=="}]}),
            ),
            (
                "io.injectMediaSync",
                json!({"text": "look", "source": null, "priority": null, "media": []}),
            ),
            (
                "io.injectInterruptMedia",
                json!({"text": "look", "source": null, "priority": "L1", "media": []}),
            ),
            (
                "events.subscribe",
                json!({"topics": ["agent_output", "settings.changed"]}),
            ),
            ("events.unsubscribe", json!({"topics": []})),
            ("events.publish", json!({"topic": "t.x", "data": {"n": 1}})),
            ("settings.get", json!({"key": "token"})),
            ("settings.set", json!({"key": "token", "value": 3})),
            ("settings.list", json!({})),
            (
                "settings.registerDef",
                json!({"key": "k", "default": 1, "description": "d", "secret": true}),
            ),
            ("settings.defs", json!({})),
            ("settings.language", json!({})),
            ("settings.getCore", json!({"key": "core.agent.language"})),
            ("settings.setCore", json!({"key": "core.agent.language", "value": "en"})),
            ("settings.listCore", json!({"prefix": "core."})),
            ("settings.getPlugin", json!({"plugin": "p", "key": "k"})),
            ("settings.setPlugin", json!({"plugin": "p", "key": "k", "value": [1]})),
            ("settings.listPlugin", json!({"plugin": "p"})),
            ("settings.dump", json!({})),
            ("settings.plugins", json!({})),
            ("llm.listSources", json!({})),
            ("llm.currentSource", json!({})),
            ("llm.setSource", json!({"name": "fast"})),
            ("memory.recall", json!({"query": ["Ann", "Bob"], "depth": 2})),
            (
                "memory.commit",
                json!({"triples": [{"subject": "Ann", "relation": "likes", "object": "tea"}]}),
            ),
            ("memory.introspect", json!({})),
            ("memory.merge", json!({"source": "Ann", "target": "Anna"})),
            (
                "memory.purge",
                json!({"subject_contains": "A", "relation_type": "", "target_contains": "", "hard": true}),
            ),
            ("doc.query", json!({"query": "tea", "top_k": 3})),
            ("doc.insert", json!({"content": "c", "summary": "s"})),
            ("doc.remove", json!({"id": "d1"})),
            ("doc.stats", json!({})),
            ("knowledge.search", json!({"query": "tea"})),
            ("knowledge.add", json!({"name": "n", "content": "c"})),
            ("knowledge.create", json!({"name": "n", "content": "c"})),
            ("knowledge.list", json!({})),
            (
                "textmemory.append",
                json!({"role": "user", "content": "c", "timestamp": 5, "channel": "qq"}),
            ),
            ("social.getPerson", json!({"name": "Ann"})),
            ("social.getTrait", json!({"name": "Ann", "trait": "hobby"})),
            ("social.getNetwork", json!({"name": "Ann", "depth": 2})),
            ("social.getRelations", json!({"name": "Ann"})),
            ("social.listPersons", json!({})),
            (
                "social.setTrait",
                json!({"name": "Ann", "trait": "hobby", "value": "chess"}),
            ),
            ("social.relate", json!({"a": "Ann", "relation": "friend", "b": "Bob"})),
        ]
    }

    fn kernel_samples() -> Vec<(&'static str, Value)> {
        vec![
            (
                "handshake",
                json!({"protocol": 1, "core_version": "0.1", "plugin_name": "p"}),
            ),
            ("tool.invoke", json!({"name": "t", "args": {"x": 1}})),
            ("tool.cancel", json!({"id": 7})),
            (
                "stage.invoke",
                json!({"stage": "on_input", "ctx": {"raw_message": "m"}}),
            ),
            (
                "output.invoke",
                json!({"channel": "box", "payload": "p", "type": "text", "meta": {}, "task_id": 3, "source": "s"}),
            ),
            ("api.invoke", json!({"name": "ask", "body": {"q": 1}})),
            ("settings.changed", json!({"key": "servers", "value": {}})),
            ("event", json!({"type": "agent_output", "ts_ms": 1, "text": "x"})),
            ("error", json!({"message": "bad frame"})),
            ("plugin.stop", Value::Null),
            ("clock.set", json!({"now_ms": 1_000_000_000_000i64})),
        ]
    }

    /// Every method: decoded by the one decoder, equal to what serde's tagged
    /// representation gives, and re-encoded to params that decode to the same call.
    fn round_trip<T>(
        samples: Vec<(&'static str, Value)>,
        methods: &[&str],
        decode: fn(&str, Value) -> Result<T, DecodeError>,
        encode: fn(T) -> (&'static str, Value),
    ) where
        T: std::fmt::Debug + PartialEq + Clone + DeserializeOwned,
    {
        let covered: std::collections::BTreeSet<&str> = samples.iter().map(|(m, _)| *m).collect();
        let all: std::collections::BTreeSet<&str> = methods.iter().copied().collect();
        assert_eq!(covered, all, "every method has a sample");
        for (method, p) in samples {
            let typed = decode(method, p.clone()).unwrap_or_else(|e| panic!("{method}: {e}"));
            if !p.is_null() {
                let tagged: T = serde_json::from_value(json!({"method": method, "params": p})).unwrap();
                assert_eq!(tagged, typed, "{method}: serde's tagged form agrees");
            }
            let (wire, again) = encode(typed.clone());
            assert!(
                wire == method || method == "knowledge.create",
                "{method} encodes as {wire}"
            );
            assert_eq!(decode(wire, again).unwrap(), typed, "{method} round-trips");
        }
    }

    #[test]
    fn every_method_round_trips() {
        round_trip(
            plugin_samples(),
            PluginRequest::METHODS,
            PluginRequest::from_message,
            PluginRequest::into_message,
        );
        round_trip(
            kernel_samples(),
            KernelRequest::METHODS,
            KernelRequest::from_message,
            KernelRequest::into_message,
        );
        // The wire names are the documented constants.
        for c in [
            methods::TOOL_REGISTER,
            methods::TOOL_UNREGISTER,
            methods::IO_INJECT_TEXT,
            methods::IO_INJECT_INTERRUPT,
            methods::IO_INJECT_INPUT_SYNC,
            methods::IO_INJECT_MEDIA,
            methods::IO_INJECT_MEDIA_SYNC,
            methods::IO_INJECT_INTERRUPT_MEDIA,
            methods::API_REGISTER,
            methods::EVENTS_SUBSCRIBE,
            methods::EVENTS_UNSUBSCRIBE,
            methods::EVENTS_PUBLISH,
            methods::STAGE_REGISTER,
            methods::OUTPUT_REGISTER,
            methods::OUTPUT_UNREGISTER,
            methods::SETTINGS_GET,
            methods::SETTINGS_LANGUAGE,
            methods::MEMORY_RECALL,
            methods::KNOWLEDGE_CREATE,
            methods::SOCIAL_RELATE,
            methods::LLM_SET_SOURCE,
        ] {
            assert!(PluginRequest::METHODS.contains(&c), "{c}");
        }
        for c in [
            methods::HANDSHAKE,
            methods::TOOL_INVOKE,
            methods::TOOL_CANCEL,
            methods::STAGE_INVOKE,
            methods::OUTPUT_INVOKE,
            methods::API_INVOKE,
            methods::SETTINGS_CHANGED,
            methods::EVENT,
            methods::PLUGIN_STOP,
            methods::CLOCK_SET,
        ] {
            assert!(KernelRequest::METHODS.contains(&c), "{c}");
        }
    }

    #[test]
    fn absent_params_read_as_empty_and_stop_stays_bare() {
        assert_eq!(
            PluginRequest::from_message("memory.introspect", Value::Null).unwrap(),
            PluginRequest::MemoryIntrospect(NoParams {})
        );
        assert_eq!(
            PluginRequest::from_message("events.unsubscribe", Value::Null).unwrap(),
            PluginRequest::EventsUnsubscribe(EventsSubscribe::default())
        );
        // `types` is another name for `topics`; unknown fields are ignored.
        assert_eq!(
            PluginRequest::from_message("events.subscribe", json!({"types": ["x"], "extra": 1})).unwrap(),
            PluginRequest::EventsSubscribe(EventsSubscribe {
                topics: vec!["x".into()]
            })
        );
        // A Lua `nil` arrives as null.
        assert_eq!(
            PluginRequest::from_message("doc.insert", json!({"content": "c", "summary": null})).unwrap(),
            PluginRequest::DocInsert(DocInsert {
                content: "c".into(),
                summary: String::new()
            })
        );
        let stop = KernelRequest::PluginStop(None).into_request(0);
        assert_eq!(
            stop.params,
            Value::Null,
            "plugin.stop goes out without params, as before"
        );
        let line = crate::encode(&crate::Frame::Request(stop)).unwrap();
        assert_eq!(line, b"{\"id\":0,\"method\":\"plugin.stop\"}\n");
        let recall = PluginRequest::from_message("memory.recall", json!({"query": "Ann"})).unwrap();
        let PluginRequest::MemoryRecall(r) = recall else {
            panic!()
        };
        assert_eq!((r.query.joined().as_str(), r.depth), ("Ann", None));
    }

    #[test]
    fn unknown_methods_and_bad_params_are_typed_errors_that_say_what_to_do() {
        let e = PluginRequest::from_message("settings.gett", json!({})).unwrap_err();
        assert_eq!(e.code(), RpcError::UNKNOWN_METHOD);
        let msg = e.to_string();
        assert!(
            msg.contains("unknown method `settings.gett`") && msg.contains("settings.get,"),
            "{msg}"
        );
        assert!(msg.contains("docs/PROTOCOL.md"), "{msg}");
        let e = PluginRequest::from_message("no.such.method", json!({})).unwrap_err();
        assert!(e.to_string().contains("method families: tool, stage"), "{e}");
        // A kernel-side method is not a plugin's call.
        assert!(matches!(
            PluginRequest::from_message("tool.invoke", json!({"name": "t", "args": {}})),
            Err(DecodeError::UnknownMethod { .. })
        ));

        for (method, p, want) in [
            ("tool.register", json!({}), "missing field `name`"),
            (
                "tool.register",
                json!({"name": 5}),
                "invalid type: integer `5`, expected a string",
            ),
            ("memory.recall", json!({"query": 5}), "did not match any variant"),
            (
                "memory.commit",
                json!({"triples": "Ann likes tea"}),
                "expected a sequence",
            ),
            ("doc.query", json!({"query": "q", "top_k": -1}), "invalid value"),
            ("io.injectText", Value::Null, "missing field `text`"),
            ("settings.set", json!([1, 2]), "invalid type"),
        ] {
            let e = PluginRequest::from_message(method, p).unwrap_err();
            assert_eq!(e.code(), RpcError::INVALID_PARAMS, "{method}");
            let rpc = RpcError::from(e.clone());
            assert!(
                rpc.message.starts_with(&format!("invalid params for `{method}`: ")) && rpc.message.contains(want),
                "{method}: {}",
                rpc.message
            );
            assert!(rpc.message.contains("see docs/PROTOCOL.md"), "{}", rpc.message);
        }
    }

    #[test]
    fn api_names_are_one_path_segment() {
        let reg = |n: &str| ApiRegister {
            name: n.into(),
            description: String::new(),
        };
        assert!(reg("ask-1_x").check().is_ok());
        for bad in ["", "a/b", "..", "a b", &"x".repeat(65)] {
            assert!(reg(bad).check().unwrap_err().contains("1 to 64"), "{bad:?}");
        }
    }
}
