//! Method names and their parameter types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Kernel → plugin: first request (see [`crate::handshake`]).
pub const HANDSHAKE: &str = "handshake";
/// Kernel → plugin: run one of the plugin's tools. Params [`ToolInvoke`]; result
/// [`ToolResult`].
pub const TOOL_INVOKE: &str = "tool.invoke";
/// Kernel → plugin (notification): stop now; stdin closes right after.
pub const PLUGIN_STOP: &str = "plugin.stop";
/// Kernel → plugin, on a virtual clock, to plugins that declared the `clock` feature:
/// the kernel's clock reached a time. Params [`crate::clock::ClockSet`]; result
/// [`crate::clock::ClockAck`], once what was due by then has run (see [`crate::clock`]).
pub const CLOCK_SET: &str = crate::clock::METHOD;

/// Plugin → kernel: offer a tool to the model. Params [`ToolRegister`].
pub const TOOL_REGISTER: &str = "tool.register";
/// Plugin → kernel: inject a queued input (capability `io`). Params [`InjectText`];
/// result `{"task_id"}`.
pub const IO_INJECT_TEXT: &str = "io.injectText";
/// Plugin → kernel: inject an interrupt (capability `io`). Params [`InjectText`] with
/// `priority`; non-built-in plugins are clamped to L3.
pub const IO_INJECT_INTERRUPT: &str = "io.injectInterrupt";
/// Plugin → kernel: inject a queued input carrying images (capability `io`). Params
/// [`InjectMedia`]; result `{"task_id", "media": [block ids]}`. The images are checked
/// like the HTTP API's attachments (type from the bytes, size cap) and stored as media
/// blocks before the input is queued; a bad one refuses the call with nothing stored.
pub const IO_INJECT_MEDIA: &str = "io.injectMedia";
/// Like [`IO_INJECT_MEDIA`], and waits for the reply: result `{"task_id", "reply",
/// "media"}`.
pub const IO_INJECT_MEDIA_SYNC: &str = "io.injectMediaSync";
/// An interrupt carrying images (may preempt the running task). Params [`InjectMedia`]
/// with `priority`.
pub const IO_INJECT_INTERRUPT_MEDIA: &str = "io.injectInterruptMedia";
/// Plugin → kernel: queue an input and wait for the agent's reply (capability `io`;
/// the seed's name). Params [`InjectText`]; result `{"task_id", "reply"}`. Refused at
/// once while one of the plugin's own tool calls is running: the queued input could
/// only run after the turn that waits on that tool (see docs/PROTOCOL.md).
pub const IO_INJECT_INPUT_SYNC: &str = "io.injectInputSync";
/// Plugin → kernel: offer a named HTTP API, `POST /api/v1/plugins/<plugin>/api/<name>`
/// (params [`crate::request::ApiRegister`]; result `{"route"}`). The kernel calls
/// [`API_INVOKE`] for each HTTP call.
pub const API_REGISTER: &str = "api.register";
/// Kernel → plugin: one call of a named API: `{"name", "body"}` (the JSON body, `null`
/// when empty); the result is answered to the HTTP caller as `{"result": ...}`, an
/// error answer as 502 with its message.
pub const API_INVOKE: &str = "api.invoke";

/// Plugin → kernel: declare an input channel (capability `io`): how memory treats
/// the inputs the plugin injects under it. Params [`InputRegister`]; result `{"channel"}`.
pub const INPUT_REGISTER: &str = "input.register";

/// Text rules the kernel applies to what *memory* keeps of a channel's inputs or a
/// tool's outputs — the stored passages, their vectors, the search index and the facts
/// distilled from them — never to what the model reads in the turn itself.
///
/// Why rules and not a call back into the plugin: they run on every input and every
/// stored tool output, in the kernel, with no round trip; and a plugin never sees the
/// text of other channels. Patterns are Rust `regex` (linear time: no pattern a
/// hostile plugin sends can hang the kernel), applied in order; `replace` may use
/// `$1`-style groups. A result that is empty keeps the original text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CleanerRules {
    pub rules: Vec<CleanRule>,
}

/// One rule of a [`CleanerRules`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CleanRule {
    pub pattern: String,
    /// What a match becomes (default: nothing).
    #[serde(default)]
    pub replace: String,
}

/// An input channel's definition (`input.register`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRegister {
    /// The channel: the plugin's name or `<plugin>/<part>`. Every input whose source is
    /// the channel or lies under it (`onebot/group:1` under `onebot`) follows it.
    pub name: String,
    /// Its inputs are answered but never remembered.
    #[serde(default)]
    pub no_memory: bool,
    /// What memory keeps of its inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaner: Option<CleanerRules>,
    /// `prune`: the context window is pruned against each input as it arrives;
    /// `none` or empty: only by the heartbeat and on overflow.
    #[serde(default)]
    pub context_policy: String,
    /// `none`: its inputs recall nothing from memory; `auto` or empty: as usual.
    #[serde(default)]
    pub recall_policy: String,
}

/// A tool declaration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolRegister {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments.
    #[serde(default)]
    pub parameters: Value,
    /// May run in parallel with the other calls of a batch.
    #[serde(default)]
    pub parallel_safe: bool,
    /// Keep the output out of the compute layer of memory.
    #[serde(default)]
    pub no_memory: bool,
    /// The arguments that are file-system paths, and what the tool does with them.
    /// The kernel's sandbox checks each one present before the call leaves the kernel
    /// (refusing it with the firewall's reason) and passes the real path it checked;
    /// the call then carries the sandbox (`args.__sandbox`) for the plugin's own check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathArg>,
    /// The tool uses the network: refused while the firewall's network switch is off,
    /// and the call carries the sandbox (with the daemon's own addresses to refuse).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// Words a person may use when they need this tool (any language), beyond its name
    /// and description: a request offers the tools whose words the input shares, the
    /// rest are listed by name, so these decide whether the tool is at hand. Never sent
    /// to the model (they cost no prompt tokens).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// What memory keeps of the tool's outputs (the model reads them whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaner: Option<CleanerRules>,
}

impl ToolRegister {
    /// Sets [`Self::keywords`] from comma-separated words.
    #[must_use]
    pub fn with_keywords(mut self, words: &str) -> Self {
        self.keywords = words
            .split(',')
            .map(|w| w.trim().to_owned())
            .filter(|w| !w.is_empty())
            .collect();
        self
    }
}

/// One path argument of a tool (see [`ToolRegister::paths`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathArg {
    /// The argument's name in the tool's parameters (a top-level string).
    pub arg: String,
    pub access: crate::sandbox::Access,
}

impl PathArg {
    pub fn new(arg: &str, access: crate::sandbox::Access) -> Self {
        Self {
            arg: arg.to_owned(),
            access,
        }
    }
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInvoke {
    pub name: String,
    pub args: Value,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub text: String,
}

/// Text to inject as input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InjectText {
    pub text: String,
    /// Defaults to the plugin's name.
    #[serde(default)]
    pub source: Option<String>,
    /// `L1`..`L4`, interrupts only.
    #[serde(default)]
    pub priority: Option<String>,
    /// One of the security profiles the manifest declares (required when it declares
    /// any; an undeclared name is an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Where the reply goes when not to the source's plugin (Lua's
    /// `inject_text(source, channel, text)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Keep the turn out of memory (the seed's `io.injectTextNoMem`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_memory: bool,
}

/// Text and images to inject (`io.injectMedia*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectMedia {
    #[serde(flatten)]
    pub input: InjectText,
    /// The images, base64 (the frame cap of 1 MiB bounds one call).
    #[serde(default)]
    pub media: Vec<MediaItem>,
}

/// One image of an injection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaItem {
    /// The declared type (`image/png`...); the kernel takes the real one from the bytes.
    #[serde(default)]
    pub mime: Option<String>,
    /// The bytes, base64.
    pub data: String,
}

// ---------------------------------------------------------------------------------
// Tool lifecycle, own settings and setting-change events (needed by plugins whose
// tools change at run time, e.g. the MCP bridge).
// ---------------------------------------------------------------------------------

/// Plugin → kernel: withdraw one of the plugin's own tools. Params [`ToolUnregister`];
/// result `{"ok": true}`.
pub const TOOL_UNREGISTER: &str = "tool.unregister";
/// Kernel → plugin (notification): the kernel gave up waiting for a `tool.invoke`
/// (timeout, stopped turn). Params [`ToolCancel`]; the plugin should stop the work.
pub const TOOL_CANCEL: &str = "tool.cancel";
/// Plugin → kernel: read one of the plugin's own settings (`plugin.<name>.<key>`).
/// Params [`SettingsGet`]; result [`SettingValue`] (`value` null when unset).
pub const SETTINGS_GET: &str = "settings.get";
/// Plugin → kernel (capability `events`): start receiving the named topics as
/// notifications. Params [`EventsSubscribe`]; result `{"topics": [...]}`. A topic is
/// `settings.changed` (the plugin's own settings, notified as `settings.changed`) or a
/// kernel event type (`agent_output`, `output`, `setting_changed`, `actor_exit`, ...;
/// `*` = all), notified as [`EVENT`].
pub const EVENTS_SUBSCRIBE: &str = "events.subscribe";
/// Plugin → kernel (capability `events`): stop receiving the named topics.
pub const EVENTS_UNSUBSCRIBE: &str = "events.unsubscribe";
/// Kernel → plugin (notification, after `events.subscribe` to it): one of the plugin's
/// own settings changed. Params [`SettingValue`] with the short key.
pub const SETTINGS_CHANGED: &str = "settings.changed";
/// Plugin → kernel (capability `events`): publish an event of the plugin's own on the
/// kernel bus, seen by the SSE stream (`/api/v1/events`, event name `plugin_event`)
/// and by plugins subscribed to `plugin_event`. Params [`EventsPublish`]; result
/// `{"ok": true}`. The kernel stamps the plugin's name, so no plugin speaks for another.
pub const EVENTS_PUBLISH: &str = "events.publish";
/// Largest `data` of one [`EVENTS_PUBLISH`], serialised.
pub const MAX_PUBLISH_BYTES: usize = 64 * 1024;

/// One event a plugin publishes: `topic` (`[a-z0-9_.-]{1,64}`, e.g.
/// `terminal.output`) and any JSON `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsPublish {
    pub topic: String,
    #[serde(default)]
    pub data: Value,
}

impl EventsPublish {
    /// Why the event cannot be published, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        let ok = !self.topic.is_empty()
            && self.topic.len() <= 64
            && self
                .topic
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b));
        if !ok {
            return Err(format!(
                "invalid event topic `{}`: use 1-64 characters of [a-z0-9_.-], e.g. `<plugin>.<what>`",
                self.topic
            ));
        }
        let size = self.data.to_string().len();
        if size > MAX_PUBLISH_BYTES {
            return Err(format!(
                "event data is {size} bytes, over {MAX_PUBLISH_BYTES}; publish smaller events"
            ));
        }
        Ok(())
    }
}

/// The special topics `events.subscribe` accepts (besides kernel event types).
pub const EVENT_TOPICS: &[&str] = &[SETTINGS_CHANGED];

/// Whether `topic` names kernel events (`[a-z_]+` or `*`) rather than a special topic.
pub fn is_kernel_event_topic(topic: &str) -> bool {
    topic == "*" || (!topic.is_empty() && topic.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
}

/// Withdraws a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUnregister {
    pub name: String,
}

/// The `id` of the abandoned `tool.invoke` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCancel {
    pub id: u64,
}

/// A setting read: `key` is the part after `plugin.<name>.` (the full name is
/// accepted too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsGet {
    pub key: String,
}

/// A setting's value (`null` when unset), and for `settings.changed` its short key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingValue {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: Value,
}

/// Topics to (un)subscribe (`types` is accepted as another name for `topics`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventsSubscribe {
    #[serde(default, alias = "types")]
    pub topics: Vec<String>,
}

/// The short key of `full` if it is one of `plugin`'s own settings: `servers` and
/// `plugin.mcp.servers` both give `servers` for plugin `mcp`.
pub fn own_setting_key<'k>(plugin: &str, full: &'k str) -> Option<&'k str> {
    let short = match full.strip_prefix("plugin.") {
        Some(rest) => rest.strip_prefix(plugin)?.strip_prefix('.')?,
        None => full,
    };
    (!short.is_empty()).then_some(short)
}

#[cfg(test)]
mod own_settings_tests {
    use super::own_setting_key;

    #[test]
    fn published_events_need_a_plain_topic_and_bounded_data() {
        use super::{EventsPublish, MAX_PUBLISH_BYTES};
        let ev = |topic: &str, data| EventsPublish {
            topic: topic.into(),
            data,
        };
        assert!(ev("terminal.output", serde_json::json!({"x": 1})).check().is_ok());
        for bad in ["", "Terminal", "a b", "x\n", &"t".repeat(65)] {
            let e = ev(bad, serde_json::Value::Null).check().unwrap_err();
            assert!(e.contains("[a-z0-9_.-]"), "{bad:?}: {e}");
        }
        let big = ev("t", serde_json::json!("x".repeat(MAX_PUBLISH_BYTES)));
        assert!(big.check().unwrap_err().contains("publish smaller events"));
    }

    #[test]
    fn own_keys_only() {
        assert_eq!(own_setting_key("mcp", "servers"), Some("servers"));
        assert_eq!(own_setting_key("mcp", "plugin.mcp.servers"), Some("servers"));
        assert_eq!(own_setting_key("mcp", "plugin.mcpx.servers"), None);
        assert_eq!(own_setting_key("mcp", "plugin.other.servers"), None);
        assert_eq!(own_setting_key("mcp", "plugin.mcp."), None);
        assert_eq!(own_setting_key("mcp", ""), None);
    }
}

// ---------------------------------------------------------------------------------
// Stage handlers, output channels, events and kernel data (memory, documents,
// knowledge, text memory, social). Results are JSON objects; see docs/PROTOCOL.md.
// ---------------------------------------------------------------------------------

/// Plugin → kernel: handle a pipeline stage. Params [`StageRegister`]; result `{"ok"}`.
/// The kernel then calls [`STAGE_INVOKE`] at every run of that stage.
pub const STAGE_REGISTER: &str = "stage.register";
/// Kernel → plugin: run a stage handler. Params `{"stage", "ctx"}` (the stage
/// context); result: a patch object with only the fields to change (`{}` = none).
pub const STAGE_INVOKE: &str = "stage.invoke";
/// Plugin → kernel: offer an output channel. Params [`OutputRegister`]; result
/// `{"ok", "tool": "output_send__<name>"}`.
pub const OUTPUT_REGISTER: &str = "output.register";
/// Plugin → kernel: withdraw one of its channels. Params `{"name"}`; result `{"removed"}`.
pub const OUTPUT_UNREGISTER: &str = "output.unregister";
/// Kernel → plugin: deliver a message the model sent to the plugin's channel. Params
/// `{"channel", "payload", "type", "meta", "task_id", "source"}`; result `{"text"}`
/// (shown to the model; empty = "ok").
pub const OUTPUT_INVOKE: &str = "output.invoke";
/// Kernel → plugin (notification, after `events.subscribe` to a kernel event type):
/// one kernel event, `{"type", "ts_ms", ...data}`.
pub const EVENT: &str = "event";

/// `memory.recall` (capability `memory`): `{"query": string | [string], "depth"?: 1}`
/// → `{"entities", "relations"}`.
pub const MEMORY_RECALL: &str = "memory.recall";
/// `memory.commit`: `{"triples": [{subject, relation, object, subject_type?,
/// object_type?, confidence?, sentence?}]}` → `{"entities", "relations"}` (created).
pub const MEMORY_COMMIT: &str = "memory.commit";
/// `memory.introspect`: `{}` → `{entity_count, relation_count, relations_total, memory_hotspots}`.
pub const MEMORY_INTROSPECT: &str = "memory.introspect";
/// `memory.merge`: `{"source", "target"}` → `{"text"}`.
pub const MEMORY_MERGE: &str = "memory.merge";
/// `memory.purge`: `{subject_contains?, relation_type?, target_contains?, hard?}` → `{"text"}`.
pub const MEMORY_PURGE: &str = "memory.purge";
/// `doc.query` (capability `doc_memory`): `{"query", "top_k"?: 5}` → `{"documents"}`
/// (read-only: the documents stay in the store).
pub const DOC_QUERY: &str = "doc.query";
/// `doc.insert`: `{"content", "summary"?}` → `{"id"}`.
pub const DOC_INSERT: &str = "doc.insert";
/// `doc.remove`: `{"id"}` → `{"removed"}`.
pub const DOC_REMOVE: &str = "doc.remove";
/// `doc.stats`: `{}` → `{"events", "documents"}`.
pub const DOC_STATS: &str = "doc.stats";
/// `knowledge.search` (capability `knowledge`): `{"query", "top_k"?: 5}` →
/// `{"results": [{name, category, content, score}]}`.
pub const KNOWLEDGE_SEARCH: &str = "knowledge.search";
/// `knowledge.add` (alias `knowledge.create`): `{"name", "content"}` → `{"name"}`.
pub const KNOWLEDGE_ADD: &str = "knowledge.add";
/// Alias of [`KNOWLEDGE_ADD`].
pub const KNOWLEDGE_CREATE: &str = "knowledge.create";
/// `knowledge.list`: `{}` → `{"items": [{name, category, bytes}]}`.
pub const KNOWLEDGE_LIST: &str = "knowledge.list";
/// `textmemory.append` (capability `text_memory`): [`TextAppend`] → `{"ok"}`.
pub const TEXTMEMORY_APPEND: &str = "textmemory.append";
/// `social.getPerson` (capability `social`): `{"name"}` → `{name, found, traits, relations}`.
pub const SOCIAL_GET_PERSON: &str = "social.getPerson";
/// `social.getTrait`: `{"name", "trait"}` → `{"value", "found"}`.
pub const SOCIAL_GET_TRAIT: &str = "social.getTrait";
/// `social.getNetwork`: `{"name", "depth"?: 2}` → `{"name", "people": [person]}`.
pub const SOCIAL_GET_NETWORK: &str = "social.getNetwork";
/// `social.getRelations`: `{"name"}` → `{"relations"}`.
pub const SOCIAL_GET_RELATIONS: &str = "social.getRelations";
/// `social.listPersons`: `{}` → `{"persons": [name]}`.
pub const SOCIAL_LIST_PERSONS: &str = "social.listPersons";
/// `social.setTrait`: `{"name", "trait", "value"}` (replaces an earlier value) → `{"relations"}`.
pub const SOCIAL_SET_TRAIT: &str = "social.setTrait";
/// `social.relate`: `{"a", "relation", "b"}` (two people) → `{"relations"}`.
pub const SOCIAL_RELATE: &str = "social.relate";

/// A stage handler registration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageRegister {
    /// `on_input`, `pre_action`, `post_action`, `before_toolcall`, `after_toolcall`,
    /// `before_output` or `after_output`.
    pub stage: String,
    /// `global` (default) or `own_tools` (tool stages: only this plugin's tools).
    #[serde(default)]
    pub scope: Option<String>,
}

/// An output channel registration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputRegister {
    /// `[A-Za-z0-9_-]+`; the model gets `output_send__<name>`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// What the channel carries: names (`text`, `file`, `image`, `audio`,
    /// `structured`) or the SDK's bit mask (Text 1, File 2, Image 4, Audio 8,
    /// Structured 16). Default: text.
    #[serde(default)]
    pub caps: Option<Value>,
}

/// A fact for `memory.commit` (and [`crate::sdk::Kernel::memory_commit`]):
/// `subject —relation→ object`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Triple {
    pub subject: String,
    pub relation: String,
    pub object: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub object_type: String,
    /// 0 = not given (stored as 1.0).
    #[serde(skip_serializing_if = "is_zero")]
    pub confidence: f64,
    /// The sentence the fact comes from.
    #[serde(skip_serializing_if = "String::is_empty", alias = "sentence_text")]
    pub sentence: String,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Triple {
    pub fn new(subject: &str, relation: &str, object: &str) -> Self {
        Self {
            subject: subject.into(),
            relation: relation.into(),
            object: object.into(),
            ..Default::default()
        }
    }
}

/// One turn line for the text memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextAppend {
    /// `user` (the text is an input) or `assistant` (a response).
    #[serde(default)]
    pub role: String,
    pub content: String,
    /// Unix milliseconds; default now.
    #[serde(default)]
    pub timestamp: Option<i64>,
    /// Recorded as the source `<plugin>/<channel>`.
    #[serde(default)]
    pub channel: Option<String>,
}

// ---------------------------------------------------------------------------------
// Settings beyond `settings.get`, and the LLM sources. A plugin's own settings
// (`plugin.<name>.*`) need no capability; core settings and other plugins' settings
// need `settings_cross`; secrets of others come back masked. See docs/PROTOCOL.md.
// ---------------------------------------------------------------------------------

/// `settings.set`: `{"key", "value"}` (own key, short or full; `null` = back to the
/// default) → `{"ok", "key", "changed"}`.
pub const SETTINGS_SET: &str = "settings.set";
/// `settings.list`: `{}` → `{"settings": {short_key: value}}` (own settings, in clear).
pub const SETTINGS_LIST: &str = "settings.list";
/// `settings.registerDef`: [`SettingDef`] → `{"key", "inserted"}` (the default is
/// stored only when the key has no value).
pub const SETTINGS_REGISTER_DEF: &str = "settings.registerDef";
/// `settings.defs`: `{}` → `{"defs": [SettingDef]}` (own declarations).
pub const SETTINGS_DEFS: &str = "settings.defs";
/// `settings.language` (no capability): `{}` → `{"language": "en"|"zh"}`, the
/// kernel's `core.agent.language`, for plugins that write texts for the owner or the
/// model (the timer's reminders) in the session's language.
pub const SETTINGS_LANGUAGE: &str = "settings.language";
/// `settings.getCore` (capability `settings_cross`): `{"key"}` → `{"key", "value"}`
/// (secrets masked).
pub const SETTINGS_GET_CORE: &str = "settings.getCore";
/// `settings.setCore` (`settings_cross`): `{"key", "value"}` → `{"ok", "key", "changed"}`.
pub const SETTINGS_SET_CORE: &str = "settings.setCore";
/// `settings.listCore` (`settings_cross`): `{"prefix"?}` → `{"settings"}` (masked).
pub const SETTINGS_LIST_CORE: &str = "settings.listCore";
/// `settings.getPlugin`: `{"plugin", "key"}` → `{"key", "value"}`; another plugin's
/// key needs `settings_cross` and its secrets come back masked.
pub const SETTINGS_GET_PLUGIN: &str = "settings.getPlugin";
/// `settings.setPlugin`: `{"plugin", "key", "value"}` → `{"ok", "key", "changed"}`.
pub const SETTINGS_SET_PLUGIN: &str = "settings.setPlugin";
/// `settings.listPlugin`: `{"plugin"}` → `{"settings": {short_key: value}}`.
pub const SETTINGS_LIST_PLUGIN: &str = "settings.listPlugin";
/// `settings.dump` (`settings_cross`): `{}` → `{"settings"}`: every setting, masked.
pub const SETTINGS_DUMP: &str = "settings.dump";
/// `settings.plugins` (`settings_cross`): `{}` → `{"plugins": [name]}` (plugins with settings).
pub const SETTINGS_PLUGINS: &str = "settings.plugins";
/// `llm.listSources` (capability `llm`): `{}` → `{"sources": [{name, model, adapter,
/// base_url, priority, available, current, ...}], "current"}` (never API keys).
pub const LLM_LIST_SOURCES: &str = "llm.listSources";
/// `llm.currentSource` (`llm`): `{}` → `{"source": name | null}`: the first available
/// source by priority.
pub const LLM_CURRENT_SOURCE: &str = "llm.currentSource";
/// `llm.setSource` (`llm`): `{"name"}` → `{"source", "priority", "available"}`: raises
/// the source's priority above every other source's (a persistent setting).
pub const LLM_SET_SOURCE: &str = "llm.setSource";

/// A plugin setting's declaration (`settings.registerDef`, `settings.defs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingDef {
    /// Own key, short (`token`) or full (`plugin.<name>.token`).
    pub key: String,
    /// Stored when the key has no value yet; not `null`.
    pub default: Value,
    #[serde(default)]
    pub description: String,
    /// Masked in `GET /api/v1/settings`, events and other plugins' reads.
    #[serde(default)]
    pub secret: bool,
}
