//! Lua script plugins (`main.lua`): each in its own Lua state, in its own actor, with
//! the same sandbox as the LLM adapters (no io/os, memory cap, instruction budget per
//! call), so a runaway script fails its call instead of stalling the daemon.
//!
//! The script gets a global `sdk` and may return `{start = fn(sdk), stop = fn()}`.
//! Registrations made while the script loads take effect when the plugin starts.
//!
//! * `sdk.log(level, msg)`, `sdk.json.encode/decode`, `sdk.http.get(url)` /
//!   `sdk.http.post(url, body, content_type)` → `{status, body}, err`;
//! * `sdk.register_tool(name, {description, parameters, parallel_safe, no_memory}, fn(args))`
//!   (a table result is sent as JSON, `nil, err` is a tool error);
//! * `sdk.register_stage(stage, fn(ctx), scope)` — the handler may change `ctx` fields
//!   (`raw_message`, `llm_text`, `final_text`, `response`, ...); scope `"own_tools"` or global;
//! * `sdk.register_output_channel(name, caps, description, def, fn(msg))` — the model
//!   gets `output_send__<name>`; `caps` is a list of names or the SDK bit mask;
//! * `sdk.register_input_channel(name, def)` — names an input source `<plugin>/<name>`;
//! * `sdk.events.subscribe(types, fn(event))` / `sdk.events.unsubscribe()` (capability `events`);
//! * `sdk.inject_text([source, channel,] text)`, `sdk.inject_interrupt([source, channel,] text, priority)`,
//!   `sdk.inject_text_no_memory(...)` (capability `io`);
//! * data APIs returning `result, err`, each gated by the manifest like the wire
//!   protocol: `sdk.memory.recall/commit/introspect/merge/purge`,
//!   `sdk.doc.query/insert/remove/stats`, `sdk.knowledge.search/add/list`,
//!   `sdk.text_memory.append`, `sdk.social.get_person/get_network/get_trait/get_relations/list_persons/set_trait/relate`;
//! * settings, same gates as the wire: `sdk.get_setting`/`sdk.set_setting` (own keys),
//!   `sdk.settings.list/defs/register_def` (own), `.get_plugin/set_plugin/list_plugin`
//!   (another plugin's: `settings_cross`), `.get_core/set_core/list_core/dump/plugins`
//!   (`settings_cross`; secrets masked); `sdk.llm.list_sources/current_source/set_source`
//!   (capability `llm`);
//! * `sdk.register_api(name, fn(body))` — answers `POST /api/v1/plugins/<plugin>/api/<name>`;
//! * `sdk.set_auto_restart(bool)` (accepted; the plugin's supervisor decides restarts).
//!
//! Data APIs are async Lua functions: they work in tool, stage, channel and event
//! handlers and in `start`, which the kernel runs as coroutines (`call_async`); not in
//! code that runs while the script loads, nor in `stop`.

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;
use homeagent_plugin_protocol::methods::{self as m, EventsSubscribe, InjectText, OutputRegister};
use homeagent_plugin_protocol::{Manifest, PluginRequest};
use mlua::{Function, Lua, LuaSerdeExt, Table, Value as LuaValue, Variadic};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::process::{PluginDeps, PluginInfo};
use super::services::{EventSub, KernelServices};
use crate::addr::TAddr;
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::stages::{
    Patch, RegisterStage, RegisterTool, Scope, Stage, StageContext, StageHandler, ToolHandler, ToolSpec,
    UnregisterPlugin,
};

type Pending<T> = Arc<Mutex<T>>;

/// The longest one call into a Lua plugin may take. Its caller gets an error then, and
/// the plugin watcher restarts the plugin on a fresh thread (a call stuck in C code —
/// a pattern match, a sort — cannot be interrupted, only abandoned). Lua code itself
/// is stopped much earlier by the instruction budget.
pub const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// `call` bounded by [`CALL_DEADLINE`], on the caller's side (the plugin's own thread
/// may be the one that is stuck).
async fn bounded<T>(
    plugin: String,
    call: impl std::future::Future<Output = Result<Result<T, LuaCallError>, crate::addr::SendError>>,
) -> Result<T, LuaCallError> {
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Ok(r) => r?,
        Err(_) => Err(LuaCallError::Deadline {
            plugin,
            secs: CALL_DEADLINE.as_secs(),
        }),
    }
}

/// The script's event subscription: types and handler.
type EventSlot = Arc<Mutex<Option<(Vec<String>, Function)>>>;
/// The script's named APIs (`sdk.register_api`), by name.
type ApiSlot = Arc<Mutex<std::collections::BTreeMap<String, Function>>>;

/// What the script registered while it loaded.
#[derive(Default)]
struct Registrations {
    tools: Vec<(ToolSpec, Function)>,
    stages: Vec<(Stage, Scope, Function)>,
    outputs: Vec<(OutputRegister, Function)>,
    /// Input channels (`sdk.register_input_channel`), checked when declared.
    inputs: Vec<m::InputRegister>,
}

/// A Lua plugin.
pub struct LuaPlugin {
    name: String,
    lua: Lua,
    budget: Arc<std::sync::atomic::AtomicU64>,
    tools: Vec<(ToolSpec, Function)>,
    stages: Vec<(Stage, Scope, Function)>,
    outputs: Vec<(OutputRegister, Function)>,
    inputs: Vec<m::InputRegister>,
    /// Events the script subscribed to (shared with `sdk.events.*`).
    events: EventSlot,
    /// Its named APIs (shared with `sdk.register_api`).
    apis: ApiSlot,
    sub: EventSub,
    stop: Option<Function>,
    start: Option<Function>,
    deps: PluginDeps,
    info: Arc<PluginInfo>,
    /// One Lua call at a time: the instruction budget is per call.
    gate: Arc<tokio::sync::Mutex<()>>,
    /// This instance's number (`process::Instances`).
    instance: u64,
}

fn lua_err(e: mlua::Error) -> String {
    e.to_string()
}

/// What the `sdk` functions need.
struct Env {
    name: String,
    manifest: Manifest,
    services: KernelServices,
}

/// The result of a data API: `result, nil` or `nil, err`.
type DataReply = (LuaValue, Option<String>);

/// Builds a data API function over [`KernelServices::call`] (capability checked
/// first). The Lua arguments become the method's params and are decoded by the same
/// [`PluginRequest::from_message`] as a subprocess plugin's frame, so a bad argument
/// gets the same typed error.
fn data_fn(
    lua: &Lua,
    env: &Arc<Env>,
    method: &'static str,
    field: Option<&'static str>,
    params: fn(&[Value]) -> Value,
) -> mlua::Result<Function> {
    let env = env.clone();
    lua.create_async_function(move |lua, args: Variadic<LuaValue>| {
        let env = env.clone();
        let vals: Vec<Value> = args
            .into_iter()
            .map(|a| lua.from_value(a).unwrap_or(Value::Null))
            .collect();
        async move {
            let call = match PluginRequest::from_message(method, params(&vals)) {
                Ok(c) => c,
                Err(e) => return Ok::<DataReply, mlua::Error>((LuaValue::Nil, Some(e.to_string()))),
            };
            if let Err(denial) = env.manifest.permits(&call) {
                return Ok((LuaValue::Nil, Some(denial.to_string())));
            }
            let Ok(fut) = env.services.call(&env.manifest, call) else {
                return Ok((LuaValue::Nil, Some(format!("`{method}` is not a data method"))));
            };
            match fut.await {
                Ok(v) => {
                    let v = match field {
                        Some(f) => v.get(f).cloned().unwrap_or(Value::Null),
                        None => v,
                    };
                    // An absent value (an unset setting) is `nil`, not the JSON null sentinel.
                    let v = if v.is_null() { LuaValue::Nil } else { lua.to_value(&v)? };
                    Ok((v, None))
                }
                Err(e) => Ok((LuaValue::Nil, Some(e.message))),
            }
        }
    })
}

fn arg(v: &[Value], i: usize) -> Value {
    v.get(i).cloned().unwrap_or(Value::Null)
}

fn arg_or(v: &[Value], i: usize, default: Value) -> Value {
    match v.get(i) {
        None | Some(Value::Null) => default,
        Some(x) => x.clone(),
    }
}

/// The data API tables (`sdk.memory`, `sdk.doc`, ...).
fn install_data_apis(lua: &Lua, sdk: &Table, env: &Arc<Env>) -> mlua::Result<()> {
    type Def = (&'static str, &'static str, Option<&'static str>, fn(&[Value]) -> Value);
    let tables: [(&str, Vec<Def>); 7] = [
        (
            "memory",
            vec![
                (
                    "recall",
                    m::MEMORY_RECALL,
                    None,
                    |v| json!({"query": arg(v, 0), "depth": arg_or(v, 1, json!(1))}),
                ),
                ("commit", m::MEMORY_COMMIT, None, |v| json!({ "triples": arg(v, 0) })),
                ("introspect", m::MEMORY_INTROSPECT, None, |_| json!({})),
                (
                    "merge",
                    m::MEMORY_MERGE,
                    Some("text"),
                    |v| json!({"source": arg(v, 0), "target": arg(v, 1)}),
                ),
                ("purge", m::MEMORY_PURGE, Some("text"), |v| {
                    let mut c = arg_or(v, 0, json!({}));
                    if let Some(o) = c.as_object_mut() {
                        o.insert("hard".into(), arg_or(v, 1, json!(false)));
                    }
                    c
                }),
            ],
        ),
        (
            "doc",
            vec![
                (
                    "query",
                    m::DOC_QUERY,
                    Some("documents"),
                    |v| json!({"query": arg(v, 0), "top_k": arg_or(v, 1, json!(5))}),
                ),
                ("insert", m::DOC_INSERT, Some("id"), |v| {
                    let t = arg(v, 0);
                    json!({"content": t["content"], "summary": t.get("title").or(t.get("summary")).cloned().unwrap_or_default()})
                }),
                ("remove", m::DOC_REMOVE, Some("removed"), |v| json!({ "id": arg(v, 0) })),
                ("stats", m::DOC_STATS, None, |_| json!({})),
            ],
        ),
        (
            "knowledge",
            vec![
                (
                    "search",
                    m::KNOWLEDGE_SEARCH,
                    Some("results"),
                    |v| json!({"query": arg(v, 0), "top_k": arg_or(v, 1, json!(5))}),
                ),
                (
                    "add",
                    m::KNOWLEDGE_ADD,
                    Some("name"),
                    |v| json!({"name": arg(v, 0), "content": arg(v, 1)}),
                ),
                ("list", m::KNOWLEDGE_LIST, Some("items"), |_| json!({})),
            ],
        ),
        (
            "text_memory",
            vec![("append", m::TEXTMEMORY_APPEND, Some("ok"), |v| arg(v, 0))],
        ),
        (
            "social",
            vec![
                (
                    "get_person",
                    m::SOCIAL_GET_PERSON,
                    None,
                    |v| json!({ "name": arg(v, 0) }),
                ),
                (
                    "get_network",
                    m::SOCIAL_GET_NETWORK,
                    None,
                    |v| json!({"name": arg(v, 0), "depth": arg_or(v, 1, json!(2))}),
                ),
                (
                    "get_trait",
                    m::SOCIAL_GET_TRAIT,
                    None,
                    |v| json!({"name": arg(v, 0), "trait": arg(v, 1)}),
                ),
                (
                    "get_relations",
                    m::SOCIAL_GET_RELATIONS,
                    Some("relations"),
                    |v| json!({ "name": arg(v, 0) }),
                ),
                ("list_persons", m::SOCIAL_LIST_PERSONS, Some("persons"), |_| json!({})),
                (
                    "set_trait",
                    m::SOCIAL_SET_TRAIT,
                    None,
                    |v| json!({"name": arg(v, 0), "trait": arg(v, 1), "value": arg(v, 2)}),
                ),
                (
                    "relate",
                    m::SOCIAL_RELATE,
                    None,
                    |v| json!({"a": arg(v, 0), "relation": arg(v, 1), "b": arg(v, 2)}),
                ),
            ],
        ),
        (
            "settings",
            vec![
                (
                    "get_core",
                    m::SETTINGS_GET_CORE,
                    Some("value"),
                    |v| json!({ "key": arg(v, 0) }),
                ),
                (
                    "set_core",
                    m::SETTINGS_SET_CORE,
                    Some("ok"),
                    |v| json!({"key": arg(v, 0), "value": arg(v, 1)}),
                ),
                (
                    "list_core",
                    m::SETTINGS_LIST_CORE,
                    Some("settings"),
                    |v| json!({ "prefix": arg_or(v, 0, json!("")) }),
                ),
                (
                    "get_plugin",
                    m::SETTINGS_GET_PLUGIN,
                    Some("value"),
                    |v| json!({"plugin": arg(v, 0), "key": arg(v, 1)}),
                ),
                (
                    "set_plugin",
                    m::SETTINGS_SET_PLUGIN,
                    Some("ok"),
                    |v| json!({"plugin": arg(v, 0), "key": arg(v, 1), "value": arg(v, 2)}),
                ),
                (
                    "list_plugin",
                    m::SETTINGS_LIST_PLUGIN,
                    Some("settings"),
                    |v| json!({ "plugin": arg(v, 0) }),
                ),
                ("list", m::SETTINGS_LIST, Some("settings"), |_| json!({})),
                ("register_def", m::SETTINGS_REGISTER_DEF, None, register_def_params),
                ("defs", m::SETTINGS_DEFS, Some("defs"), |_| json!({})),
                ("dump", m::SETTINGS_DUMP, Some("settings"), |_| json!({})),
                ("plugins", m::SETTINGS_PLUGINS, Some("plugins"), |_| json!({})),
            ],
        ),
        (
            "llm",
            vec![
                ("list_sources", m::LLM_LIST_SOURCES, Some("sources"), |_| json!({})),
                ("current_source", m::LLM_CURRENT_SOURCE, Some("source"), |_| json!({})),
                ("set_source", m::LLM_SET_SOURCE, None, |v| json!({ "name": arg(v, 0) })),
            ],
        ),
    ];
    for (table, defs) in tables {
        let t = lua.create_table()?;
        for (fname, method, field, params) in defs {
            t.set(fname, data_fn(lua, env, method, field, params)?)?;
        }
        sdk.set(table, t)?;
    }
    sdk.set(
        "get_setting",
        data_fn(
            lua,
            env,
            m::SETTINGS_GET,
            Some("value"),
            |v| json!({ "key": arg(v, 0) }),
        )?,
    )?;
    sdk.set(
        "set_setting",
        data_fn(
            lua,
            env,
            m::SETTINGS_SET,
            Some("ok"),
            |v| json!({"key": arg(v, 0), "value": arg(v, 1)}),
        )?,
    )?;
    Ok(())
}

/// `register_def{key, default, description, secret}` or `register_def(key, default,
/// description, secret)`.
fn register_def_params(v: &[Value]) -> Value {
    match arg(v, 0) {
        t @ Value::Object(_) => t,
        key => json!({
            "key": key,
            "default": arg(v, 1),
            "description": arg_or(v, 2, json!("")),
            "secret": arg_or(v, 3, json!(false)),
        }),
    }
}

/// `sdk.register_api(name, handler(body) → result)`: offers `handler` as
/// `POST /api/v1/plugins/<plugin>/api/<name>` (JSON body in, JSON result out).
/// Returns the route. Works while loading and later (in `start`, in handlers).
fn install_register_api(
    lua: &Lua,
    sdk: &Table,
    apis: &ApiSlot,
    info: &Arc<PluginInfo>,
    plugin: &str,
) -> mlua::Result<()> {
    let (apis, info, owner) = (apis.clone(), info.clone(), plugin.to_owned());
    sdk.set(
        "register_api",
        lua.create_function(move |_, (name, handler): (String, Option<Function>)| {
            let reg = homeagent_plugin_protocol::request::ApiRegister {
                name: name.clone(),
                description: String::new(),
            };
            if let Err(msg) = reg.check() {
                return Ok((None, Some(msg)));
            }
            let Some(handler) = handler else {
                let msg = format!(
                    "sdk.register_api(\"{name}\") needs a handler: sdk.register_api(\"{name}\", function(body) ... end); \
                     it answers POST /api/v1/plugins/{owner}/api/{name}"
                );
                return Ok((None, Some(msg)));
            };
            apis.lock().insert(name.clone(), handler);
            Ok((Some(info.add_api(&owner, &name)), None))
        })?,
    )
}

/// `sdk.http.get/post` over the sandbox's `http_get`/`http_post` (JSON strings).
fn install_http(lua: &Lua, sdk: &Table) -> mlua::Result<()> {
    let http = lua.create_table()?;
    let decode = |lua: &Lua, raw: String| -> mlua::Result<DataReply> {
        let v: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Ok((LuaValue::Nil, Some(e.to_owned())));
        }
        Ok((
            lua.to_value(&json!({"status": v["status"], "body": v["body"], "headers": {}}))?,
            None,
        ))
    };
    let get: Function = lua.globals().get("http_get")?;
    http.set(
        "get",
        lua.create_async_function(move |lua, url: String| {
            let get = get.clone();
            async move {
                let raw: String = get.call_async(url).await?;
                decode(&lua, raw)
            }
        })?,
    )?;
    let post: Function = lua.globals().get("http_post")?;
    http.set(
        "post",
        lua.create_async_function(move |lua, (url, body, _ct): (String, String, Option<String>)| {
            let post = post.clone();
            async move {
                let raw: String = post.call_async((url, body)).await?;
                decode(&lua, raw)
            }
        })?,
    )?;
    sdk.set("http", http)
}

/// `inject_*` arguments: `(text [, priority])` or `(source, channel, text [, priority])`,
/// as the [`InjectText`] a subprocess plugin sends (the `io` service files the source
/// under the plugin's name).
fn inject_args(args: &[String]) -> mlua::Result<InjectText> {
    let (source, channel, text, priority) = match args {
        [text] => (None, None, text, None),
        [text, p] => (None, None, text, Some(p)),
        [s, c, text] => (Some(s), Some(c), text, None),
        [s, c, text, p, ..] => (Some(s), Some(c), text, Some(p)),
        [] => return Err(mlua::Error::runtime("inject needs the text")),
    };
    let some = |s: Option<&String>| s.filter(|s| !s.is_empty()).cloned();
    Ok(InjectText {
        text: text.clone(),
        source: some(source),
        channel: some(channel),
        priority: some(priority),
        ..InjectText::default()
    })
}

impl LuaPlugin {
    /// Loads `source` (the plugin's `main.lua`); what it may use follows the
    /// manifest's capabilities.
    pub fn load(manifest: &Manifest, source: &str, deps: PluginDeps, info: Arc<PluginInfo>) -> Result<Self, String> {
        let name = manifest.name.as_str();
        let (lua, budget) = crate::llm::adapter::sandbox(name).map_err(lua_err)?;
        crate::llm::adapter::guard_patterns(&lua).map_err(lua_err)?;
        let regs: Pending<Registrations> = Arc::default();
        let events: EventSlot = Arc::default();
        let env = Arc::new(Env {
            name: name.to_owned(),
            manifest: manifest.clone(),
            services: deps.services.clone(),
        });
        let sdk = lua.create_table().map_err(lua_err)?;
        Self::install_core(&lua, &sdk, &env, &regs, &events, &deps).map_err(lua_err)?;
        install_data_apis(&lua, &sdk, &env).map_err(lua_err)?;
        install_http(&lua, &sdk).map_err(lua_err)?;
        let apis: ApiSlot = Arc::default();
        install_register_api(&lua, &sdk, &apis, &info, name).map_err(lua_err)?;
        sdk.set("json", lua.globals().get::<Table>("json").map_err(lua_err)?)
            .map_err(lua_err)?;
        sdk.set("plugin_name", name).map_err(lua_err)?;
        lua.globals().set("sdk", sdk).map_err(lua_err)?;
        budget.store(0, std::sync::atomic::Ordering::Relaxed);
        let ret: LuaValue = lua
            .load(source)
            .set_name(format!("@{name}/main.lua"))
            .eval()
            .map_err(lua_err)?;
        let (start, stop) = match &ret {
            LuaValue::Table(t) => (
                t.get::<Option<Function>>("start").ok().flatten(),
                t.get::<Option<Function>>("stop").ok().flatten(),
            ),
            _ => (None, None),
        };
        let r = std::mem::take(&mut *regs.lock());
        *info.lua_budget.lock() = Some(budget.clone());
        Ok(Self {
            name: name.to_owned(),
            lua,
            budget,
            tools: r.tools,
            stages: r.stages,
            outputs: r.outputs,
            inputs: r.inputs,
            events,
            apis,
            sub: EventSub::default(),
            stop,
            start,
            deps,
            info,
            gate: Arc::default(),
            instance: 0,
        })
    }

    /// `log`, `register_*`, `events`, `inject_*`, `set_auto_restart`.
    fn install_core(
        lua: &Lua,
        sdk: &Table,
        env: &Arc<Env>,
        regs: &Pending<Registrations>,
        events: &EventSlot,
        deps: &PluginDeps,
    ) -> mlua::Result<()> {
        let plugin = env.name.clone();
        let log_name = plugin.clone();
        sdk.set(
            "log",
            lua.create_function(move |_, (level, msg): (String, String)| {
                match level.as_str() {
                    "error" => tracing::error!(plugin = %log_name, "{msg}"),
                    "warn" => tracing::warn!(plugin = %log_name, "{msg}"),
                    "debug" => tracing::debug!(plugin = %log_name, "{msg}"),
                    _ => tracing::info!(plugin = %log_name, "{msg}"),
                }
                Ok(())
            })?,
        )?;
        let (r, owner) = (regs.clone(), plugin.clone());
        sdk.set(
            "register_tool",
            lua.create_function(move |lua, (tname, def, handler): (String, Option<Table>, Function)| {
                // The same declaration as a subprocess plugin's `tool.register`, decoded
                // the same way (a bad field is the same error).
                let mut def: Value = match def {
                    Some(d) => lua.from_value(LuaValue::Table(d))?,
                    None => json!({}),
                };
                if let Some(o) = def.as_object_mut() {
                    o.insert("name".into(), Value::String(tname));
                }
                let reg = match PluginRequest::from_message(m::TOOL_REGISTER, def) {
                    Ok(PluginRequest::ToolRegister(reg)) => reg,
                    Ok(_) => unreachable!("tool.register decodes as ToolRegister"),
                    Err(e) => return Err(mlua::Error::runtime(e.to_string())),
                };
                let spec = super::services::tool_spec(&owner, &reg)
                    .map_err(|e| mlua::Error::runtime(format!("tool `{}`: {e}", reg.name)))?;
                r.lock().tools.push((spec, handler));
                Ok(())
            })?,
        )?;
        let r = regs.clone();
        sdk.set(
            "register_stage",
            lua.create_function(move |_, (stage, handler, scope): (String, Function, Option<String>)| {
                let reg = m::StageRegister { stage, scope };
                let (stage, scope) = super::services::parse_stage(&reg).map_err(|e| mlua::Error::runtime(e.message))?;
                r.lock().stages.push((stage, scope, handler));
                Ok(())
            })?,
        )?;
        let r = regs.clone();
        sdk.set(
            "register_output_channel",
            lua.create_function(
                move |lua, (name, caps, desc, _def, handler): (String, LuaValue, Option<String>, LuaValue, Function)| {
                    let caps: Value = lua.from_value(caps).unwrap_or(Value::Null);
                    super::services::parse_caps(Some(&caps)).map_err(mlua::Error::runtime)?;
                    let reg = OutputRegister {
                        name,
                        description: desc.unwrap_or_default(),
                        caps: Some(caps),
                    };
                    r.lock().outputs.push((reg, handler));
                    Ok(())
                },
            )?,
        )?;
        let (env3, r4) = (env.clone(), regs.clone());
        sdk.set(
            "register_input_channel",
            lua.create_function(move |lua, (name, def): (String, Option<Table>)| {
                // The seed's `(name, ChannelDef)`: the channel is `<plugin>/<name>` (or the
                // plugin's own name), decoded as a subprocess plugin's `input.register`.
                let owner = &env3.name;
                let channel = if name.is_empty() || name == *owner {
                    owner.clone()
                } else {
                    format!("{owner}/{name}")
                };
                let mut def: Value = match def {
                    Some(d) => lua.from_value(LuaValue::Table(d))?,
                    None => json!({}),
                };
                if let Some(o) = def.as_object_mut() {
                    o.insert("name".into(), Value::String(channel.clone()));
                }
                let call = PluginRequest::from_message(m::INPUT_REGISTER, def)
                    .map_err(|e| mlua::Error::runtime(e.to_string()))?;
                env3.manifest
                    .permits(&call)
                    .map_err(|d| mlua::Error::runtime(d.to_string()))?;
                let PluginRequest::InputRegister(reg) = call else {
                    unreachable!("input.register decodes as InputRegister")
                };
                // Checked now (a bad declaration is the script's error), registered when
                // the plugin starts (a start withdraws everything the plugin had).
                crate::agent::inputdef::InputDef::from_register(owner, &reg)
                    .map_err(|e| mlua::Error::runtime(e.to_string()))?;
                r4.lock().inputs.push(reg);
                Ok(channel)
            })?,
        )?;
        let owner = plugin.clone();
        sdk.set(
            "set_auto_restart",
            lua.create_function(move |_, on: bool| {
                tracing::info!(plugin = %owner, on, "set_auto_restart: the plugin's supervisor decides restarts");
                Ok(())
            })?,
        )?;
        // Events (capability `events`).
        let ev = lua.create_table()?;
        let (e, env2) = (events.clone(), env.clone());
        ev.set(
            "subscribe",
            lua.create_function(move |lua, (types, handler): (LuaValue, Function)| {
                let call = PluginRequest::EventsSubscribe(Default::default());
                if let Err(denial) = env2.manifest.permits(&call) {
                    return Ok((LuaValue::Nil, Some(denial.to_string())));
                }
                let types: Vec<String> = match lua.from_value::<Value>(types) {
                    Ok(Value::String(s)) => vec![s],
                    Ok(Value::Array(a)) => a.into_iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
                    _ => vec![],
                };
                if types.is_empty() {
                    return Ok((
                        LuaValue::Nil,
                        Some("give event types, e.g. {\"agent_output\"}, or \"*\"".into()),
                    ));
                }
                *e.lock() = Some((types, handler));
                Ok((LuaValue::Boolean(true), None))
            })?,
        )?;
        let e = events.clone();
        ev.set(
            "unsubscribe",
            lua.create_function(move |_, ()| {
                *e.lock() = None;
                Ok(true)
            })?,
        )?;
        sdk.set("events", ev)?;
        // Injection (capability `io`).
        for (fname, interrupt, no_memory) in [
            ("inject_text", false, false),
            ("inject_text_no_memory", false, true),
            ("inject_interrupt", true, false),
        ] {
            let (deps, env) = (deps.clone(), env.clone());
            sdk.set(
                fname,
                lua.create_function(move |_, args: Variadic<String>| {
                    let mut text = inject_args(&args)?;
                    text.no_memory = no_memory;
                    // Lua plugins name no profile: a guest, unless the manifest
                    // declares profiles (then the injection is refused, never guessed).
                    let call = if interrupt {
                        PluginRequest::InjectInterrupt(text)
                    } else {
                        PluginRequest::InjectText(text)
                    };
                    env.manifest
                        .permits(&call)
                        .map_err(|d| mlua::Error::runtime(d.to_string()))?;
                    // Refusals are immediate; the hand-over is not waited for (the
                    // function works while the script loads, as it always did).
                    let prepared = match super::services::io::prepare(&deps.injector(), &env.manifest, call, 0) {
                        Ok(Ok(p)) => p,
                        Ok(Err(e)) => return Err(mlua::Error::runtime(e.to_string())),
                        Err(_) => unreachable!("an injection"),
                    };
                    let (fut, name) = (prepared.submit(&deps.injector()), env.name.clone());
                    actix::spawn(async move {
                        if let Err(e) = fut.await {
                            tracing::warn!(plugin = %name, "injection failed: {e}");
                        }
                    });
                    Ok(true)
                })?,
            )?;
        }
        Ok(())
    }

    /// Calls `f` as a coroutine (data APIs may await), one call at a time, under a
    /// fresh instruction budget. `nil, err` becomes `Err(err)`.
    fn call_async(&self, f: Function, arg: LuaValue) -> BoxFuture<'static, Result<LuaValue, String>> {
        let (gate, budget, info) = (self.gate.clone(), self.budget.clone(), self.info.clone());
        Box::pin(async move {
            let _one = gate.lock().await;
            budget.store(0, std::sync::atomic::Ordering::Relaxed);
            let started = std::time::Instant::now();
            *info.busy_since.lock() = Some(started);
            let rets = f.call_async::<mlua::MultiValue>(arg).await;
            // Only its own mark: an abandoned instance finishing late must not clear
            // the successor's.
            let mut busy = info.busy_since.lock();
            if *busy == Some(started) {
                *busy = None;
            }
            drop(busy);
            let mut rets = rets.map_err(lua_err)?;
            let first = rets.pop_front().unwrap_or(LuaValue::Nil);
            match (&first, rets.pop_front()) {
                (LuaValue::Nil, Some(LuaValue::String(err))) => Err(err.to_string_lossy()),
                _ => Ok(first),
            }
        })
    }

    fn call_sync(&self, f: &Function, arg: LuaValue) -> Result<LuaValue, String> {
        self.budget.store(0, std::sync::atomic::Ordering::Relaxed);
        f.call::<LuaValue>(arg).map_err(lua_err)
    }
}

/// A Lua value as a tool's text: strings as they are, tables as JSON.
fn to_text(lua: &Lua, v: LuaValue) -> Result<String, String> {
    match v {
        LuaValue::String(s) => Ok(s.to_string_lossy()),
        LuaValue::Nil => Ok(String::new()),
        other => {
            let v: Value = lua.from_value(other).map_err(lua_err)?;
            Ok(match v {
                Value::String(s) => s,
                v => v.to_string(),
            })
        }
    }
}

/// Why a call into the plugin's script did not answer. What the script itself raised
/// is its text (`Script`): the engine speaks text, as a subprocess plugin's wire does.
#[derive(Debug, thiserror::Error)]
pub enum LuaCallError {
    #[error("{0}")]
    Script(String),
    #[error("no API `{0}`")]
    NoApi(String),
    #[error("plugin `{plugin}` did not answer within {secs} s; it is being restarted")]
    Deadline { plugin: String, secs: u64 },
    #[error(transparent)]
    Mailbox(#[from] crate::addr::SendError),
}

impl LuaCallError {
    /// As a tool's failure: the script's words are [`ToolFailure::Text`].
    ///
    /// [`ToolFailure::Text`]: crate::stages::ToolFailure::Text
    fn into_tool_failure(self) -> crate::stages::ToolFailure {
        match self {
            Self::Script(text) => crate::stages::ToolFailure::Text(text),
            other => crate::stages::ToolFailure::kernel(other),
        }
    }
}

/// Runs a tool of the plugin (from its tool handler).
#[derive(Message)]
#[rtype(result = "Result<String, LuaCallError>")]
pub struct CallLuaTool(pub usize, pub Value);

/// Runs a stage handler of the plugin.
#[derive(Message)]
#[rtype(result = "Result<Patch, LuaCallError>")]
pub struct CallLuaStage(pub usize, pub StageContext);

/// Delivers a message to one of the plugin's output channels.
#[derive(Message)]
#[rtype(result = "Result<String, LuaCallError>")]
pub struct CallLuaOutput(pub usize, pub Value);

/// Hands a kernel event to the plugin's event handler.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CallLuaEvent(pub Value);

/// Calls one of the plugin's named APIs with a JSON body.
#[derive(Message)]
#[rtype(result = "Result<Value, LuaCallError>")]
pub struct CallLuaApi(pub String, pub Value);

impl Handles<CallLuaApi> for LuaPlugin {
    type Reply = ResponseFuture<Result<Value, LuaCallError>>;
    fn handle(&mut self, CallLuaApi(name, body): CallLuaApi, _: &mut HostContext<Self>) -> Self::Reply {
        let lua = self.lua.clone();
        let Some(f) = self.apis.lock().get(&name).cloned() else {
            return Box::pin(async move { Err(LuaCallError::NoApi(name)) });
        };
        let arg = match body {
            Value::Null => LuaValue::Nil,
            body => match lua.to_value(&body) {
                Ok(a) => a,
                Err(e) => return Box::pin(async move { Err(LuaCallError::Script(lua_err(e))) }),
            },
        };
        let call = self.call_async(f, arg);
        Box::pin(async move {
            let v = call.await.map_err(LuaCallError::Script)?;
            lua.from_value::<Value>(v).map_err(|e| LuaCallError::Script(lua_err(e)))
        })
    }
}

impl Handles<CallLuaTool> for LuaPlugin {
    type Reply = ResponseFuture<Result<String, LuaCallError>>;
    fn handle(&mut self, CallLuaTool(i, args): CallLuaTool, _: &mut HostContext<Self>) -> Self::Reply {
        let lua = self.lua.clone();
        let arg = match lua.to_value(&args) {
            Ok(a) => a,
            Err(e) => return Box::pin(async move { Err(LuaCallError::Script(lua_err(e))) }),
        };
        let call = self.call_async(self.tools[i].1.clone(), arg);
        Box::pin(async move { to_text(&lua, call.await.map_err(LuaCallError::Script)?).map_err(LuaCallError::Script) })
    }
}

impl Handles<CallLuaOutput> for LuaPlugin {
    type Reply = ResponseFuture<Result<String, LuaCallError>>;
    fn handle(&mut self, CallLuaOutput(i, msg): CallLuaOutput, _: &mut HostContext<Self>) -> Self::Reply {
        let lua = self.lua.clone();
        let arg = match lua.to_value(&msg) {
            Ok(a) => a,
            Err(e) => return Box::pin(async move { Err(LuaCallError::Script(lua_err(e))) }),
        };
        let call = self.call_async(self.outputs[i].1.clone(), arg);
        Box::pin(async move { to_text(&lua, call.await.map_err(LuaCallError::Script)?).map_err(LuaCallError::Script) })
    }
}

impl Handles<CallLuaEvent> for LuaPlugin {
    type Reply = ResponseFuture<()>;
    fn handle(&mut self, CallLuaEvent(ev): CallLuaEvent, _: &mut HostContext<Self>) -> Self::Reply {
        let handler = self.events.lock().as_ref().map(|(_, f)| f.clone());
        let (Some(f), Ok(arg)) = (handler, self.lua.to_value(&ev)) else {
            return Box::pin(async {});
        };
        let (call, name) = (self.call_async(f, arg), self.name.clone());
        Box::pin(async move {
            if let Err(e) = call.await {
                tracing::warn!(plugin = %name, "event handler failed: {e}");
            }
        })
    }
}

impl Handles<CallLuaStage> for LuaPlugin {
    type Reply = ResponseFuture<Result<Patch, LuaCallError>>;
    fn handle(&mut self, CallLuaStage(i, ctx): CallLuaStage, _: &mut HostContext<Self>) -> Self::Reply {
        let lua = self.lua.clone();
        let table = match lua.to_value(&ctx) {
            Ok(LuaValue::Table(t)) => t,
            Ok(_) => return Box::pin(async { Err(LuaCallError::Script("stage context is not a table".to_owned())) }),
            Err(e) => return Box::pin(async move { Err(LuaCallError::Script(lua_err(e))) }),
        };
        let call = self.call_async(self.stages[i].2.clone(), LuaValue::Table(table.clone()));
        Box::pin(async move {
            call.await.map_err(LuaCallError::Script)?;
            let after: StageContext = lua
                .from_value(LuaValue::Table(table))
                .map_err(|e| LuaCallError::Script(lua_err(e)))?;
            let changed = |a: &String, b: &String| (a != b).then(|| b.clone());
            Ok(Patch {
                raw_message: changed(&ctx.raw_message, &after.raw_message),
                llm_text: changed(&ctx.llm_text, &after.llm_text),
                final_text: changed(&ctx.final_text, &after.final_text),
                response: after.response.filter(|_| ctx.response.is_none()),
                context_msgs: after.context_msgs.into_iter().skip(ctx.context_msgs.len()).collect(),
                tool_calls: (after.tool_calls != ctx.tool_calls).then_some(after.tool_calls),
                tool_results: (after.tool_results != ctx.tool_results).then_some(after.tool_results),
                extra: Default::default(),
            })
        })
    }
}

impl LuaPlugin {
    /// Hands the registrations to the kernel (after `start` succeeded). The tools' and
    /// stage handlers' registrations are answered by the stage host: the future waits
    /// for the answers, so the plugin is ready only once they are in, and a refused
    /// one (a tool name another plugin took) is withdrawn from the plugin's listing and
    /// logged, not listed as if it were there.
    fn attach(&mut self, me: &TAddr<Self>) -> BoxFuture<'static, ()> {
        let mut answers: Vec<BoxFuture<'static, Option<String>>> = Vec::new();
        let stages = self.deps.stages.clone();
        // An instance abandoned while stuck never ran `stopped`: its registrations still
        // point at it. Cleared first (in order with what follows: one sender, one mailbox).
        let _ = stages.do_send(UnregisterPlugin(self.name.clone()));
        self.deps.services.channels.unregister_plugin(&self.name);
        self.info.tools.lock().clear();
        for (i, (spec, _)) in self.tools.iter().enumerate() {
            let (m, plugin) = (me.clone(), self.name.clone());
            let handler: Arc<dyn ToolHandler> =
                Arc::new(move |args: Value| -> BoxFuture<'static, crate::stages::ToolResult> {
                    let m = m.clone();
                    let call = bounded(plugin.clone(), async move { m.send(CallLuaTool(i, args)).await });
                    Box::pin(async move { call.await.map_err(LuaCallError::into_tool_failure) })
                });
            self.info.tools.lock().push(spec.name.clone());
            let (stages, spec, info) = (stages.clone(), spec.clone(), self.info.clone());
            answers.push(Box::pin(async move {
                let name = spec.name.clone();
                let refused = match stages.send(RegisterTool { spec, handler }).await {
                    Ok(Ok(())) => return None,
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                };
                info.tools.lock().retain(|t| *t != name);
                Some(format!("tool `{name}` refused: {refused}"))
            }));
        }
        for (i, (stage, scope, _)) in self.stages.iter().enumerate() {
            let (m, plugin) = (me.clone(), self.name.clone());
            let handler: Arc<dyn StageHandler> = Arc::new(
                move |_s: Stage, c: StageContext| -> BoxFuture<'static, Result<Patch, String>> {
                    let m = m.clone();
                    let call = bounded(plugin.clone(), async move { m.send(CallLuaStage(i, c)).await });
                    // A stage handler's failure is its text (stages speak text: most are plugins').
                    Box::pin(async move { call.await.map_err(|e| e.to_string()) })
                },
            );
            let (stages, stage, register) = (
                stages.clone(),
                *stage,
                RegisterStage {
                    plugin: self.name.clone(),
                    stage: *stage,
                    scope: *scope,
                    handler,
                },
            );
            answers.push(Box::pin(async move {
                match stages.send(register).await {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(format!("stage `{}` handler refused: {e}", stage.as_str())),
                    Err(e) => Some(format!("stage `{}` handler refused: {e}", stage.as_str())),
                }
            }));
        }
        for reg in &self.inputs {
            if let Err(e) = super::services::register_input(&self.deps.services.channels, &self.name, reg) {
                tracing::warn!(plugin = %self.name, "input channel `{}` refused: {}", reg.name, e.message);
            }
        }
        for (i, (reg, _)) in self.outputs.iter().enumerate() {
            let (m, plugin) = (me.clone(), self.name.clone());
            let deliver: super::services::Deliver =
                Arc::new(move |msg: Value| -> BoxFuture<'static, crate::stages::ToolResult> {
                    let m = m.clone();
                    let call = bounded(plugin.clone(), async move { m.send(CallLuaOutput(i, msg)).await });
                    Box::pin(async move { call.await.map_err(LuaCallError::into_tool_failure) })
                });
            if let Err(e) = self.deps.services.register_output(&self.name, reg, deliver) {
                tracing::warn!(plugin = %self.name, "output channel `{}` refused: {}", reg.name, e.message);
            }
        }
        let (m, plugin) = (me.clone(), self.name.clone());
        let call: super::process::ApiCall = Arc::new(
            move |name: String, body: Value| -> BoxFuture<'static, Result<Value, String>> {
                let m = m.clone();
                let call = bounded(plugin.clone(), async move { m.send(CallLuaApi(name, body)).await });
                Box::pin(async move { call.await.map_err(|e| e.to_string()) })
            },
        );
        self.info.apis.lock().call = Some(call);
        let types = self.events.lock().as_ref().map(|(t, _)| t.clone());
        if let Some(types) = types {
            let m = me.clone();
            let bus = self.deps.services.bus.clone();
            if let Err(e) = self.sub.subscribe(&bus, EventsSubscribe { topics: types }, move |ev| {
                let _ = m.do_send(CallLuaEvent(serde_json::to_value(&*ev).unwrap_or_default()));
            }) {
                tracing::warn!(plugin = %self.name, "event subscription refused: {}", e.message);
            }
        }
        let (plugin, tools, stages, channels) = (
            self.name.clone(),
            self.tools.len(),
            self.stages.len(),
            self.outputs.len(),
        );
        Box::pin(async move {
            for refused in futures_util::future::join_all(answers).await.into_iter().flatten() {
                tracing::warn!(%plugin, "{refused}");
            }
            tracing::info!(%plugin, tools, stages, channels, "Lua plugin ready");
        })
    }
}

impl KernelActor for LuaPlugin {
    const KIND: &'static str = "lua-plugin";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        self.instance = self.info.instances.begin();
        // Hand out callbacks that reach this actor (counted like any message).
        ctx.run_later(std::time::Duration::ZERO, |host, ctx| {
            let me = TAddr::of_self(host, ctx);
            let plugin = host.inner();
            let start = plugin.start.clone().map(|start| {
                let sdk = plugin.lua.globals().get::<LuaValue>("sdk").unwrap_or(LuaValue::Nil);
                plugin.call_async(start, sdk)
            });
            let fut = async move {
                match start {
                    Some(f) => f.await.map(|_| ()),
                    None => Ok(()),
                }
            };
            ctx.wait(
                actix::fut::wrap_future::<_, Host<Self>>(fut).map(move |res, host, ctx| match res {
                    Err(e) => {
                        let msg = format!("plugin `{}`: start() failed: {e}", host.inner().name);
                        host.inner().info.readiness.set(Err(msg.clone()));
                        Host::<Self>::fail(ctx, msg)
                    }
                    Ok(()) => {
                        let attached = host.inner().attach(&me);
                        ctx.wait(actix::fut::wrap_future::<_, Host<Self>>(attached).map(|(), host, _| {
                            let me = host.inner();
                            me.info.readiness.set(Ok(()));
                            me.info.instances.ready(me.instance);
                        }));
                    }
                }),
            );
        });
    }

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        if let Some(Err(e)) = self.stop.clone().map(|stop| self.call_sync(&stop, LuaValue::Nil)) {
            tracing::warn!(plugin = %self.name, "stop() failed: {e}");
        }
        // The thread was this instance's alone (`worker_on_own_thread`).
        actix::Arbiter::current().stop();
        self.sub = EventSub::default();
        self.info.instances.ended(self.instance);
        if !self.info.instances.is_current(self.instance) {
            // Abandoned while stuck and ended only now: what the plugin has registered
            // and shows is its successor's.
            tracing::info!(plugin = %self.name, "an abandoned instance ended; its successor keeps the registrations");
            return;
        }
        *self.info.busy_since.lock() = None;
        self.info.tools.lock().clear();
        *self.info.apis.lock() = Default::default();
        self.deps.services.channels.unregister_plugin(&self.name);
        let _ = self.deps.stages.do_send(UnregisterPlugin(self.name.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_arguments_are_the_wire_injection() {
        let t = inject_args(&["hi".into()]).unwrap();
        assert_eq!((t.text.as_str(), t.source, t.priority), ("hi", None, None));
        let t = inject_args(&["hi".into(), "L2".into()]).unwrap();
        assert_eq!((t.text.as_str(), t.priority.as_deref()), ("hi", Some("L2")));
        let t = inject_args(&["kitchen".into(), "qq".into(), "hello".into()]).unwrap();
        assert_eq!(
            (t.source.as_deref(), t.channel.as_deref(), t.text.as_str()),
            (Some("kitchen"), Some("qq"), "hello")
        );
        let t = inject_args(&["lamp/hall".into(), "".into(), "x".into()]).unwrap();
        assert_eq!((t.source.as_deref(), t.channel), (Some("lamp/hall"), None));
        assert!(inject_args(&[]).is_err());
    }
}
