//! Lua script plugins (`main.lua`): each in its own Lua state, in its own actor, with
//! the same sandbox as the LLM adapters (no io/os, memory cap, instruction budget per
//! call), so a runaway script fails its call instead of stalling the daemon.
//!
//! The script gets a global `sdk` and may return `{start = fn(sdk), stop = fn()}`:
//! * `sdk.log(level, msg)`;
//! * `sdk.register_tool(name, {description, parameters, parallel_safe, no_memory}, fn(args) -> result)`
//!   (a table result is sent as JSON, `nil, err` is a tool error);
//! * `sdk.register_stage(stage, fn(ctx), scope)` — the handler may change `ctx` fields
//!   (`raw_message`, `llm_text`, `final_text`, `response`, ...); scope `"own_tools"` or global;
//! * `sdk.inject_text(text)`, `sdk.inject_interrupt(text, priority)` (capability `io`);
//! * `sdk.json`, plus the adapters' built-ins (`http_get`, hashing, ...).
//!
//! Registrations made while the script loads take effect when the plugin starts.

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;
use mlua::{Function, LuaSerdeExt, Table, Value as LuaValue};
use parking_lot::Mutex;
use serde_json::Value;

use super::process::{PluginDeps, PluginInfo};
use crate::addr::TAddr;
use crate::agent::input::Input;
use crate::agent::intake::{Inject, InjectInterrupt};
use crate::host::{Handles, Host, HostContext, KernelActor};
use crate::stages::{
    Patch, RegisterStage, RegisterTool, Scope, Stage, StageContext, StageHandler, ToolHandler, ToolSpec,
    UnregisterPlugin,
};

type Pending<T> = Arc<Mutex<Vec<T>>>;

/// A Lua plugin.
pub struct LuaPlugin {
    name: String,
    lua: mlua::Lua,
    budget: Arc<std::sync::atomic::AtomicU64>,
    tools: Vec<(ToolSpec, Function)>,
    stages: Vec<(Stage, Scope, Function)>,
    stop: Option<Function>,
    start: Option<Function>,
    deps: PluginDeps,
    info: Arc<PluginInfo>,
}

fn lua_err(e: mlua::Error) -> String {
    e.to_string()
}

impl LuaPlugin {
    /// Loads `source` (the plugin's `main.lua`); `may_inject` follows the manifest's
    /// capabilities.
    pub fn load(
        manifest: &homeagent_plugin_protocol::Manifest,
        source: &str,
        deps: PluginDeps,
        info: Arc<PluginInfo>,
    ) -> Result<Self, String> {
        let name = manifest.name.as_str();
        let may_inject = manifest
            .allows(homeagent_plugin_protocol::methods::IO_INJECT_TEXT)
            .is_ok();
        let (lua, budget) = crate::llm::adapter::sandbox(name).map_err(lua_err)?;
        let tools: Pending<(ToolSpec, Function)> = Arc::default();
        let stages: Pending<(Stage, Scope, Function)> = Arc::default();
        let sdk = lua.create_table().map_err(lua_err)?;
        let plugin = name.to_owned();
        let log_name = name.to_owned();
        sdk.set(
            "log",
            lua.create_function(move |_, (level, msg): (String, String)| {
                match level.as_str() {
                    "error" => tracing::error!(plugin = %log_name, "{msg}"),
                    "warn" => tracing::warn!(plugin = %log_name, "{msg}"),
                    _ => tracing::info!(plugin = %log_name, "{msg}"),
                }
                Ok(())
            })
            .map_err(lua_err)?,
        )
        .map_err(lua_err)?;
        let t = tools.clone();
        let owner = plugin.clone();
        sdk.set(
            "register_tool",
            lua.create_function(move |lua, (tname, def, handler): (String, Option<Table>, Function)| {
                let def: Value = match def {
                    Some(d) => lua.from_value(LuaValue::Table(d))?,
                    None => Value::Null,
                };
                let mut spec = ToolSpec::new(
                    &tname,
                    def.get("description").and_then(Value::as_str).unwrap_or(""),
                    def.get("parameters")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
                );
                spec.plugin = owner.clone();
                spec.parallel_safe = def.get("parallel_safe").and_then(Value::as_bool).unwrap_or(false);
                spec.no_memory = def.get("no_memory").and_then(Value::as_bool).unwrap_or(false);
                t.lock().push((spec, handler));
                Ok(())
            })
            .map_err(lua_err)?,
        )
        .map_err(lua_err)?;
        let st = stages.clone();
        sdk.set(
            "register_stage",
            lua.create_function(move |_, (stage, handler, scope): (String, Function, Option<String>)| {
                let stage = Stage::parse(&stage).ok_or_else(|| {
                    mlua::Error::runtime(format!(
                        "unknown stage `{stage}`; stages: on_input, pre_action, post_action, before_toolcall, after_toolcall, before_output, after_output"
                    ))
                })?;
                let scope = if scope.as_deref() == Some("own_tools") { Scope::OwnTools } else { Scope::Global };
                st.lock().push((stage, scope, handler));
                Ok(())
            })
            .map_err(lua_err)?,
        )
        .map_err(lua_err)?;
        let (el, il, src) = (deps.event_loop.clone(), deps.intercept_loop.clone(), plugin.clone());
        let denied = move || {
            mlua::Error::runtime("this plugin lacks the `io` capability; add it to \"capabilities\" in its plugin.json")
        };
        let d1 = denied;
        sdk.set(
            "inject_text",
            lua.create_function(move |_, text: String| {
                if !may_inject {
                    return Err(d1());
                }
                el.do_send(Inject(Input::text(&src, &text)))
                    .map_err(|e| mlua::Error::runtime(e.to_string()))?;
                Ok(true)
            })
            .map_err(lua_err)?,
        )
        .map_err(lua_err)?;
        let src = plugin.clone();
        sdk.set(
            "inject_interrupt",
            lua.create_function(move |_, (text, priority): (String, Option<String>)| {
                if !may_inject {
                    return Err(denied());
                }
                let msg = InjectInterrupt {
                    input: Input::text(&src, &text),
                    priority: priority.map(Value::String),
                    stop: false,
                };
                il.do_send(msg).map_err(|e| mlua::Error::runtime(e.to_string()))?;
                Ok(true)
            })
            .map_err(lua_err)?,
        )
        .map_err(lua_err)?;
        sdk.set("json", lua.globals().get::<Table>("json").map_err(lua_err)?)
            .map_err(lua_err)?;
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
        let tools = std::mem::take(&mut *tools.lock());
        let stages = std::mem::take(&mut *stages.lock());
        Ok(Self {
            name: name.to_owned(),
            lua,
            budget,
            tools,
            stages,
            stop,
            start,
            deps,
            info,
        })
    }

    fn call(&self, f: &Function, arg: LuaValue) -> Result<LuaValue, String> {
        self.budget.store(0, std::sync::atomic::Ordering::Relaxed);
        f.call::<mlua::MultiValue>(arg).map_err(lua_err).and_then(|mut rets| {
            let first = rets.pop_front().unwrap_or(LuaValue::Nil);
            match (&first, rets.pop_front()) {
                (LuaValue::Nil, Some(LuaValue::String(err))) => Err(err.to_string_lossy()),
                _ => Ok(first),
            }
        })
    }

    fn run_tool(&self, idx: usize, args: Value) -> Result<String, String> {
        let arg = self.lua.to_value(&args).map_err(lua_err)?;
        match self.call(&self.tools[idx].1, arg)? {
            LuaValue::String(s) => Ok(s.to_string_lossy()),
            LuaValue::Nil => Ok(String::new()),
            other => {
                let v: Value = self.lua.from_value(other).map_err(lua_err)?;
                Ok(match v {
                    Value::String(s) => s,
                    v => v.to_string(),
                })
            }
        }
    }

    fn run_stage(&self, idx: usize, ctx: StageContext) -> Result<Patch, String> {
        let table = self.lua.to_value(&ctx).map_err(lua_err)?;
        let LuaValue::Table(t) = table.clone() else {
            return Err("stage context is not a table".into());
        };
        self.call(&self.stages[idx].2, table)?;
        let after: StageContext = self.lua.from_value(LuaValue::Table(t)).map_err(lua_err)?;
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
    }
}

/// Runs a tool of the plugin (from its tool handler).
#[derive(Message)]
#[rtype(result = "Result<String, String>")]
pub struct CallLuaTool(pub usize, pub Value);

/// Runs a stage handler of the plugin.
#[derive(Message)]
#[rtype(result = "Result<Patch, String>")]
pub struct CallLuaStage(pub usize, pub StageContext);

impl Handles<CallLuaTool> for LuaPlugin {
    type Reply = Result<String, String>;
    fn handle(&mut self, CallLuaTool(i, args): CallLuaTool, _: &mut HostContext<Self>) -> Self::Reply {
        self.run_tool(i, args)
    }
}

impl Handles<CallLuaStage> for LuaPlugin {
    type Reply = Result<Patch, String>;
    fn handle(&mut self, CallLuaStage(i, ctx): CallLuaStage, _: &mut HostContext<Self>) -> Self::Reply {
        self.run_stage(i, ctx)
    }
}

impl KernelActor for LuaPlugin {
    const KIND: &'static str = "lua-plugin";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        // Hand out callbacks that reach this actor (counted like any message).
        ctx.run_later(std::time::Duration::ZERO, |host, ctx| {
            let me = TAddr::of_self(host, ctx);
            let plugin = host.inner();
            if let Some(start) = plugin.start.clone() {
                let sdk = plugin.lua.globals().get::<LuaValue>("sdk").unwrap_or(LuaValue::Nil);
                if let Err(e) = plugin.call(&start, sdk) {
                    return Host::<Self>::fail(ctx, format!("plugin `{}`: start() failed: {e}", plugin.name));
                }
            }
            let stages = plugin.deps.stages.clone();
            for (i, (spec, _)) in plugin.tools.iter().enumerate() {
                let m = me.clone();
                let handler: Arc<dyn ToolHandler> = Arc::new(move |args: Value| -> BoxFuture<'static, Result<String, String>> {
                    let m = m.clone();
                    Box::pin(async move { m.send(CallLuaTool(i, args)).await.map_err(|e| e.to_string())? })
                });
                plugin.info.tools.lock().push(spec.name.clone());
                let _ = stages.do_send(RegisterTool { spec: spec.clone(), handler });
            }
            for (i, (stage, scope, _)) in plugin.stages.iter().enumerate() {
                let m = me.clone();
                let handler: Arc<dyn StageHandler> =
                    Arc::new(move |_s: Stage, c: StageContext| -> BoxFuture<'static, Result<Patch, String>> {
                        let m = m.clone();
                        Box::pin(async move { m.send(CallLuaStage(i, c)).await.map_err(|e| e.to_string())? })
                    });
                let _ = stages.do_send(RegisterStage { plugin: plugin.name.clone(), stage: *stage, scope: *scope, handler });
            }
            tracing::info!(plugin = %plugin.name, tools = plugin.tools.len(), stages = plugin.stages.len(), "Lua plugin ready");
        });
    }

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        if let Some(Err(e)) = self.stop.clone().map(|stop| self.call(&stop, LuaValue::Nil)) {
            tracing::warn!(plugin = %self.name, "stop() failed: {e}");
        }
        self.info.tools.lock().clear();
        let _ = self.deps.stages.do_send(UnregisterPlugin(self.name.clone()));
    }
}
