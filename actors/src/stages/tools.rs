//! The tool registry: tools plugins (and the kernel) register for the model to call.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::llm::{ToolDef, types::ToolFunction};

/// Filters a tool's output before it reaches the compute layer (vectors, keywords);
/// the stored text is never changed.
pub type Cleaner = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Why a tool call failed. Its text is what the model reads (the runner wraps it in
/// the catalog's "tool failed" line); the variant says where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ToolFailure {
    /// The arguments do not fit the tool's schema; nothing ran. Decoded once, by
    /// [`typed`], naming the field.
    #[error("invalid arguments: {0}; call it again with the arguments its schema describes")]
    Arguments(String),
    /// A kernel tool's own typed error.
    #[error(transparent)]
    Kernel(Box<dyn std::error::Error + Send + Sync>),
    /// A failure known only by its text: a subprocess plugin's or a Lua script's
    /// answer (the wire, and the script engine, carry text). No kernel tool uses it.
    #[error("{0}")]
    Text(String),
}

impl ToolFailure {
    /// A kernel tool's typed error.
    pub fn kernel(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Kernel(Box::new(e))
    }
}

/// A tool's result: its text for the model, or why it failed.
pub type ToolResult = Result<String, ToolFailure>;

/// Runs a tool: arguments in, text out (`Err` = a tool error shown to the model).
pub trait ToolHandler: Send + Sync {
    fn call(&self, args: Value) -> BoxFuture<'static, ToolResult>;
}

impl<F> ToolHandler for F
where
    F: Fn(Value) -> BoxFuture<'static, ToolResult> + Send + Sync,
{
    fn call(&self, args: Value) -> BoxFuture<'static, ToolResult> {
        self(args)
    }
}

/// A kernel tool's handler from a function of its typed arguments `A`.
///
/// The model's JSON is decoded once, here: a value that does not fit is answered
/// [`ToolFailure::Arguments`] naming the field, and the function never runs; the
/// function's error `E` (the tool family's own enum) becomes [`ToolFailure::Kernel`].
/// The schema the model sees comes from the same type ([`ToolSpec::typed`]), so the
/// two cannot disagree.
pub fn typed<A, E, F, Fut>(f: F) -> Arc<dyn ToolHandler>
where
    A: serde::de::DeserializeOwned + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, E>> + Send + 'static,
{
    Arc::new(move |args: Value| -> BoxFuture<'static, ToolResult> {
        match decode_args::<A>(args) {
            Ok(a) => {
                let fut = f(a);
                Box::pin(async move { fut.await.map_err(ToolFailure::kernel) })
            }
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    })
}

/// The arguments of a tool that takes none (any given are ignored).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// A tool's arguments as `A` (an absent or `null` argument object reads as `{}`).
pub fn decode_args<A: serde::de::DeserializeOwned>(args: Value) -> Result<A, ToolFailure> {
    let args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args
    };
    homeagent_plugin_protocol::request::decode_value(args).map_err(ToolFailure::Arguments)
}

/// The JSON Schema of `A` as the model is shown it: subschemas inlined (vendors differ
/// on `$ref`), optional fields without a `null` type, no `$schema` or `title`. A
/// field's doc line is its description; the struct's own doc is not shown (so a nested
/// argument struct documents itself with `//`, or its doc becomes the description).
pub fn schema_of<A: schemars::JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let mut v = schema.to_value();
    plain(&mut v);
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
        o.remove("description");
        if !o.contains_key("properties") {
            o.insert("properties".into(), Value::Object(Default::default()));
        }
    }
    v
}

/// Makes a generated schema read as a hand-written one would, for every vendor: an
/// optional field is just its type (no `null` alternative: absent means unset); the
/// generator's numeric `format`s (`uint`, `double`, ...), which some vendors refuse,
/// and its `default`s are dropped.
fn plain(v: &mut Value) {
    let Value::Object(o) = v else { return };
    if let Some(Value::Array(types)) = o.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let t = types.remove(0);
            o.insert("type".into(), t);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = o.get_mut(key) {
            alts.retain(|a| a.get("type").is_none_or(|t| t != "null") && a.get("const") != Some(&Value::Null));
            if alts.len() == 1 {
                let Some(Value::Object(only)) = alts.pop() else {
                    unreachable!()
                };
                o.remove(key);
                for (k, x) in only {
                    o.entry(k).or_insert(x);
                }
            }
        }
    }
    if o.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t == "integer" || t == "number")
    {
        o.remove("format");
    }
    // `#[serde(default)]`'s value (`null`, `""`): the description says a default.
    o.remove("default");
    o.remove("title");
    // Only where subschemas are: a property may be called `default` or `format`.
    for (k, sub) in o.iter_mut() {
        match (k.as_str(), sub) {
            ("properties" | "$defs", Value::Object(named)) => named.values_mut().for_each(plain),
            ("anyOf" | "oneOf" | "allOf", Value::Array(alts)) => alts.iter_mut().for_each(plain),
            ("items" | "additionalProperties", sub) => plain(sub),
            _ => {}
        }
    }
}

/// Who called a tool whose spec asks ([`ToolSpec::origin`]): the calling task, as the
/// runner fills [`ORIGIN_ARG`]. A typed tool reads it as a field
/// `#[serde(rename = "__origin", default)] #[schemars(skip)] caller: Caller`. (Not
/// `prompt::Origin`, which is where an input came from.)
///
/// Reading it never fails: an absent or unreadable one (a call that did not pass the
/// runner) is [`Caller::unknown`], a guest, so a sub-agent's work never speaks for more
/// than its caller did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Caller {
    pub source: String,
    pub channel: String,
    pub task_id: u64,
    pub principal: crate::firewall::Principal,
    /// Which agent runs the call: `""` the main agent, else a helper's or resident's id.
    pub agent: String,
}

impl Caller {
    /// The caller of a call that did not pass the runner: a guest nobody knows.
    pub fn unknown() -> Self {
        Self {
            source: String::new(),
            channel: String::new(),
            task_id: 0,
            principal: crate::firewall::Principal::plugin_guest("unknown"),
            agent: String::new(),
        }
    }
}

impl Default for Caller {
    fn default() -> Self {
        Self::unknown()
    }
}

impl<'de> serde::Deserialize<'de> for Caller {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Wire {
            #[serde(default)]
            source: String,
            #[serde(default)]
            channel: String,
            #[serde(default)]
            task_id: u64,
            principal: crate::firewall::Principal,
            #[serde(default)]
            agent: String,
        }
        let v = Value::deserialize(d)?;
        Ok(serde_json::from_value::<Wire>(v).map_or_else(
            |_| Self::unknown(),
            |w| Self {
                source: w.source,
                channel: w.channel,
                task_id: w.task_id,
                principal: w.principal,
                agent: w.agent,
            },
        ))
    }
}

/// Owners of the kernel's own tool groups whose names look like a plugin's (the
/// catalogue the model reads groups tools by owner, and these read naturally there).
/// No plugin may take one: the stage host withdraws a plugin's tools by its name, so a
/// plugin called `memory` could withdraw the kernel's memory tools by stopping. Every
/// other kernel owner has a `.` (`builtin.pluginmgr`), which no plugin name can.
pub mod owners {
    pub const MEMORY: &str = "memory";
    pub const KNOWLEDGE: &str = "knowledge";
    pub const SEQ: &str = "seq";
    pub const SKILLS: &str = "skills";
    /// All of them: the names the plugin host refuses.
    pub const RESERVED: [&str; 4] = [MEMORY, KNOWLEDGE, SEQ, SKILLS];
}

/// The argument the tool runner fills with the calling task's origin for tools whose
/// spec asks ([`ToolSpec::origin`]); a model's (or a stage's) own value is removed first.
pub const ORIGIN_ARG: &str = "__origin";

/// Which agent ran a call, from the runner's [`ORIGIN_ARG`] (`""`: the main agent).
pub fn origin_agent(args: &Value) -> &str {
    // Read in place (no copy): the graph tools ask it on every call.
    args[ORIGIN_ARG]["agent"].as_str().unwrap_or("")
}

/// A tool's declaration.
#[derive(Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// Owning plugin; inferred from the name's prefix (before the first `_`) if empty.
    pub plugin: String,
    /// Keep the output out of the compute layer (it stays in the context).
    pub no_memory: bool,
    pub cleaner: Option<Cleaner>,
    /// May run in parallel with the other calls of a batch.
    pub parallel_safe: bool,
    /// Forces the whole batch it is in to run serially.
    pub serial: bool,
    /// Path arguments the firewall's sandbox checks (and rewrites to the real path)
    /// before the call reaches the tool.
    pub paths: Vec<homeagent_plugin_protocol::methods::PathArg>,
    /// The tool uses the network: refused while the network switch is off.
    pub network: bool,
    /// The runner passes the calling task's origin in the `__origin` argument (source,
    /// channel, task, principal, and which agent — main, helper or resident — runs it):
    /// the kernel's own agent and memory tools act for, or on behalf of, their caller.
    /// Only kernel code sets it; a plugin's tool never learns who called it.
    pub origin: bool,
    /// Words a person may use when they need it ([`homeagent_plugin_protocol::methods::
    /// ToolRegister::keywords`]): matched against the input to decide whether a request
    /// offers the tool; never sent.
    pub keywords: Vec<String>,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.name)
            .field("plugin", &self.plugin)
            .finish()
    }
}

impl ToolSpec {
    /// Whether calls pass the sandbox (and carry it to the tool).
    pub fn sandboxed(&self) -> bool {
        self.network || !self.paths.is_empty()
    }

    /// A kernel tool whose parameters are the schema of its typed arguments `A`
    /// (see [`typed`]).
    pub fn typed<A: schemars::JsonSchema>(name: &str, description: &str) -> Self {
        Self::new(name, description, schema_of::<A>())
    }

    pub fn new(name: &str, description: &str, parameters: Value) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
            plugin: String::new(),
            no_memory: false,
            cleaner: None,
            parallel_safe: false,
            serial: false,
            paths: Vec::new(),
            network: false,
            origin: false,
            keywords: Vec::new(),
        }
    }

    /// Sets [`Self::keywords`] (a builder for the kernel's own tools).
    #[must_use]
    pub fn with_keywords(mut self, words: &str) -> Self {
        self.keywords = keywords(words);
        self
    }

    pub fn def(&self) -> ToolDef {
        ToolDef {
            kind: "function".into(),
            function: ToolFunction {
                name: self.name.clone(),
                description: self.description.clone(),
                parameters: self.parameters.clone(),
            },
        }
    }
}

/// Comma-separated words as [`ToolSpec::keywords`].
pub fn keywords(words: &str) -> Vec<String> {
    words
        .split(',')
        .map(|w| w.trim().to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

/// A registered tool.
#[derive(Clone)]
pub struct Tool {
    pub spec: ToolSpec,
    pub handler: Arc<dyn ToolHandler>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("tool {0} already registered; pick another name (tool names are global)")]
    Duplicate(String),
    #[error("invalid tool name `{0}`: use 1-64 characters of [a-zA-Z0-9_-]")]
    InvalidName(String),
    /// Withdrawn, but no tool of that name is registered.
    #[error("no tool `{0}` is registered")]
    Unknown(String),
    /// Withdrawn by a plugin that does not own it.
    #[error("tool `{name}` belongs to `{owner}`; a plugin may withdraw only its own tools")]
    NotOwner { name: String, owner: String },
}

/// All registered tools, by name.
///
/// A snapshot is what a turn holds (`GetTools`, every LLM call): cloning one is two
/// reference counts, not a copy of every schema — the list changes when a plugin comes
/// or goes, and is read on every turn, so a change pays for the copy (`Arc::make_mut`)
/// and the model's view of the list ([`Self::shared_defs`]) is built once per change.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<BTreeMap<String, Tool>>,
    defs: Arc<Vec<ToolDef>>,
}

impl ToolRegistry {
    /// Registers a tool; a duplicate name is refused (the first registration stays).
    pub fn register(&mut self, mut spec: ToolSpec, handler: Arc<dyn ToolHandler>) -> Result<(), ToolError> {
        let valid = !spec.name.is_empty()
            && spec.name.len() <= 64
            && spec
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(ToolError::InvalidName(spec.name));
        }
        if self.tools.contains_key(&spec.name) {
            return Err(ToolError::Duplicate(spec.name));
        }
        if spec.plugin.is_empty() {
            spec.plugin = spec.name.split_once('_').map(|(p, _)| p.to_owned()).unwrap_or_default();
        }
        Arc::make_mut(&mut self.tools).insert(spec.name.clone(), Tool { spec, handler });
        self.changed();
        Ok(())
    }

    /// Rebuilds the model's view after a change.
    fn changed(&mut self) {
        self.defs = Arc::new(self.tools.values().map(|t| t.spec.def()).collect());
    }

    /// Removes every tool of `plugin` (unload or crash); returns how many.
    pub fn unregister_plugin(&mut self, plugin: &str) -> usize {
        let before = self.tools.len();
        if self.tools.values().any(|t| t.spec.plugin == plugin) {
            Arc::make_mut(&mut self.tools).retain(|_, t| t.spec.plugin != plugin);
            self.changed();
        }
        before - self.tools.len()
    }

    /// Removes one tool of `plugin`; a tool of another owner is refused.
    pub fn unregister(&mut self, plugin: &str, name: &str) -> Result<(), ToolError> {
        match self.tools.get(name) {
            None => Err(ToolError::Unknown(name.to_owned())),
            Some(t) if t.spec.plugin != plugin => Err(ToolError::NotOwner {
                name: name.to_owned(),
                owner: t.spec.plugin.clone(),
            }),
            Some(_) => {
                Arc::make_mut(&mut self.tools).remove(name);
                self.changed();
                Ok(())
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    pub fn defs(&self) -> Vec<ToolDef> {
        self.defs.as_ref().clone()
    }

    /// The model's view of the list, shared (built once per change of the registry).
    pub fn shared_defs(&self) -> &Arc<Vec<ToolDef>> {
        &self.defs
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// The registered names, in order (a cheap fingerprint of the list: recall caches
    /// the tool schemas' token count by it).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Whether a batch may run in parallel: every call is a registered tool that is
    /// parallel-safe and not serial (one unsafe tool makes the whole batch serial).
    pub fn batch_is_parallel(&self, names: &[&str]) -> bool {
        names.len() > 1
            && names.iter().all(|n| {
                self.tools
                    .get(*n)
                    .is_some_and(|t| t.spec.parallel_safe && !t.spec.serial)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn echo() -> Arc<dyn ToolHandler> {
        Arc::new(|args: Value| -> BoxFuture<'static, ToolResult> { Box::pin(async move { Ok(args.to_string()) }) })
    }

    #[test]
    fn duplicates_are_refused_and_plugins_inferred() {
        let mut r = ToolRegistry::default();
        r.register(ToolSpec::new("timer_set", "d", json!({})), echo()).unwrap();
        assert_eq!(r.get("timer_set").unwrap().spec.plugin, "timer");
        assert_eq!(
            r.register(ToolSpec::new("timer_set", "other", json!({})), echo()),
            Err(ToolError::Duplicate("timer_set".into()))
        );
        assert_eq!(
            r.get("timer_set").unwrap().spec.description,
            "d",
            "first registration kept"
        );
        let mut own = ToolSpec::new("plain", "d", json!({}));
        own.plugin = "mine".into();
        r.register(own, echo()).unwrap();
        assert!(r.register(ToolSpec::new("bad name", "d", json!({})), echo()).is_err());
        assert!(
            r.unregister("timer", "plain")
                .unwrap_err()
                .to_string()
                .contains("belongs to `mine`")
        );
        assert!(r.unregister("mine", "nope").is_err());
        assert_eq!(r.unregister_plugin("timer"), 1);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn one_unsafe_tool_makes_the_batch_serial() {
        let mut r = ToolRegistry::default();
        for (name, safe) in [("a_x", true), ("b_x", true), ("c_x", false)] {
            let mut s = ToolSpec::new(name, "d", json!({}));
            s.parallel_safe = safe;
            r.register(s, echo()).unwrap();
        }
        assert!(r.batch_is_parallel(&["a_x", "b_x"]));
        assert!(!r.batch_is_parallel(&["a_x", "c_x"]));
        assert!(!r.batch_is_parallel(&["a_x", "unknown"]));
        assert!(!r.batch_is_parallel(&["a_x"]), "a single call is just run");
    }
}

#[cfg(test)]
mod typed_tests {
    use super::*;
    use serde_json::json;

    /// A tool's arguments as a kernel tool declares them.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        /// what to look for
        query: String,
        /// how many (default 3)
        #[serde(default)]
        top_k: Option<usize>,
        #[serde(rename = "__origin", default)]
        #[schemars(skip)]
        caller: Caller,
    }

    #[test]
    fn a_typed_tools_schema_reads_as_a_hand_written_one() {
        assert_eq!(
            schema_of::<Args>(),
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "what to look for"},
                "top_k": {"type": "integer", "minimum": 0, "description": "how many (default 3)"}
            }, "required": ["query"]})
        );
        assert_eq!(schema_of::<NoArgs>(), json!({"type": "object", "properties": {}}));
    }

    #[actix_rt::test]
    async fn arguments_are_decoded_once_and_a_misfit_names_its_field() {
        #[derive(Debug, thiserror::Error)]
        #[error("nothing about {0}")]
        struct Nothing(String);
        let h = typed(|a: Args| async move {
            if a.query == "none" {
                Err(Nothing(a.query))
            } else {
                Ok(format!(
                    "{} x{} for {}",
                    a.query,
                    a.top_k.unwrap_or(3),
                    a.caller.principal.name
                ))
            }
        });
        let owner = json!({"principal": crate::firewall::Principal::owner()});
        assert_eq!(
            h.call(json!({"query": "cats", "__origin": owner})).await.unwrap(),
            "cats x3 for owner"
        );
        // Without the runner's origin (or with one that does not read): a guest.
        let r = h
            .call(json!({"query": "cats", "__origin": {"principal": "owner"}}))
            .await
            .unwrap();
        assert!(!r.ends_with("for owner"), "{r}");
        let e = h.call(json!({"query": "cats", "top_k": "two"})).await.unwrap_err();
        assert!(matches!(e, ToolFailure::Arguments(_)), "{e:?}");
        assert!(e.to_string().contains("`top_k`"), "{e}");
        assert!(matches!(h.call(Value::Null).await, Err(ToolFailure::Arguments(_))));
        let e = h.call(json!({"query": "none"})).await.unwrap_err();
        assert!(matches!(e, ToolFailure::Kernel(_)), "{e:?}");
        assert_eq!(e.to_string(), "nothing about none");
    }
}
