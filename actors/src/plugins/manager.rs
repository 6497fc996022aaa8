//! `pluginmgr`: the model's tools to manage plugins and the LLM sources — `plugin_list`,
//! `plugin_enable`, `plugin_disable`, `plugin_reload`, `plugin_install` and
//! `llm_source_use` — and the catalogue tools `get_plugin_tools` and
//! `output_list_channels`.
//!
//! Built in, not a plugin (the seed's rule: what needs an internal capability stays
//! built in): they act on the live [`PluginSet`], the settings actor and the LLM actor,
//! which no plugin protocol method reaches. They do exactly what the HTTP API's plugin
//! routes do (a disable is persisted before the plugin stops, as
//! `POST /api/v1/plugins/{name}/disable`), so the model and the dashboard cannot
//! disagree about a plugin's state.
//!
//! Who may call them is not decided here: `plugin_*` and `llm_source_use` are in the
//! default `core.security.owner_only_tools`, so the firewall refuses them to a guest
//! before a handler runs; `plugin_install`'s path passes the sandbox's read roots (and
//! arrives here as the real, link-free path).
//!
//! The pure part is [`parse`] (arguments → an [`Action`]) and [`source_switch`] (which
//! settings make a source the primary one); [`Manager::run`] is the shell.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use homeagent_i18n::Msg;
use homeagent_plugin_protocol::methods::PathArg;
use homeagent_plugin_protocol::sandbox::Access;
use serde_json::{Value, json};

use super::set::{InstallError, PluginSet};
use crate::addr::TAddr;
use crate::config::ConfigActor;
use crate::llm::provider::{GetLlmStatus, LlmActor};
use crate::llm::source::{SOURCES_PREFIX, Skipped};
use crate::registry::Registry;
use crate::stages::tools::{NoArgs, decode_args};
use crate::stages::{GetTools, StageHost, ToolRegistry, ToolSpec};

/// The owner the built-in manager tools register under. A plugin name is
/// `[a-z0-9_-]`, so no installed plugin can share it (a plugin's stop withdraws every
/// tool of its name; one named `pluginmgr` would otherwise withdraw these).
pub const OWNER: &str = "builtin.pluginmgr";

pub const LIST: &str = "plugin_list";
pub const ENABLE: &str = "plugin_enable";
pub const DISABLE: &str = "plugin_disable";
pub const RELOAD: &str = "plugin_reload";
pub const INSTALL: &str = "plugin_install";
pub const SOURCE_USE: &str = "llm_source_use";
pub use crate::agent::toolset::PLUGIN_TOOLS;
pub const LIST_CHANNELS: &str = "output_list_channels";

/// What a call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    List,
    Enable(String),
    Disable(String),
    Reload(String),
    Install(PathBuf),
    UseSource(String),
    /// `""`: every owner with its tool names; else one owner's tools in full.
    PluginTools(String),
    ListChannels,
}

/// Why a manager call failed; each says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum MgrError {
    #[error("{tool}: `{arg}` is required ({hint})")]
    Missing {
        tool: &'static str,
        arg: &'static str,
        hint: &'static str,
    },
    #[error("no plugin `{name}`; plugins: {known}. Call plugin_list to see them")]
    NoSuchPlugin { name: String, known: String },
    #[error("plugin `{name}` is already {state}")]
    Already { name: String, state: &'static str },
    #[error(transparent)]
    Plugin(#[from] super::set::PluginOpError),
    /// `get_plugin_tools`' arguments do not decode.
    #[error("{PLUGIN_TOOLS}: {0}")]
    Arguments(ToolFailure),
    #[error("cannot install {path}: {why}")]
    Package { path: String, why: String },
    #[error("no LLM source `{name}`; sources: {known}. Add it under {SOURCES_PREFIX}{name}.* in the settings first")]
    NoSuchSource { name: String, known: String },
    #[error("LLM source `{name}` is configured but not usable: {reason}. Fix its settings first")]
    SourceNotUsable { name: String, reason: String },
    #[error("cannot reach the {what}: {why}; try again once the daemon is up")]
    Unavailable { what: &'static str, why: String },
    #[error("no tools are registered for `{name}`; owners: {known}")]
    NoSuchOwner { name: String, known: String },
}

/// The arguments of the tools that name one plugin.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NameArgs {
    /// the plugin's name (see plugin_list)
    name: String,
}

/// `plugin_install`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct InstallArgs {
    /// path of the .hmap file (relative paths start in the work directory)
    path: String,
}

/// `llm_source_use`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SourceArgs {
    // The model reads this description; `<name>` is no HTML tag for rustdoc here.
    #[schemars(description = "the source's name, as in core.llm.sources.<name>")]
    source: String,
}

/// `get_plugin_tools`' arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct PluginToolsArgs {
    /// a plugin's name, or empty for all
    plugin: Option<String>,
}

/// The one argument of `tool` as `A`'s text field, trimmed; a missing, mistyped or
/// blank argument is [`MgrError::Missing`] with the hint of what to pass.
fn one_arg<A: serde::de::DeserializeOwned>(
    tool: &'static str,
    arg: &'static str,
    hint: &'static str,
    args: &Value,
    field: impl FnOnce(A) -> String,
) -> Result<String, MgrError> {
    decode_args::<A>(args.clone())
        .ok()
        .map(field)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .ok_or(MgrError::Missing { tool, arg, hint })
}

fn name_arg(tool: &'static str, args: &Value) -> Result<String, MgrError> {
    one_arg(
        tool,
        "name",
        "the plugin's name as plugin_list shows it",
        args,
        |a: NameArgs| a.name,
    )
}

/// The action of a call to `tool` with `args`, each tool's arguments decoded into its
/// own struct (the struct is also the schema the model reads, [`specs`]).
pub fn parse(tool: &str, args: &Value) -> Result<Action, MgrError> {
    Ok(match tool {
        ENABLE => Action::Enable(name_arg(ENABLE, args)?),
        DISABLE => Action::Disable(name_arg(DISABLE, args)?),
        RELOAD => Action::Reload(name_arg(RELOAD, args)?),
        INSTALL => Action::Install(PathBuf::from(one_arg(
            INSTALL,
            "path",
            "the path of an .hmap package inside the sandbox's read roots",
            args,
            |a: InstallArgs| a.path,
        )?)),
        SOURCE_USE => Action::UseSource(one_arg(
            SOURCE_USE,
            "source",
            "the source's name as in core.llm.sources.<name>",
            args,
            |a: SourceArgs| a.source,
        )?),
        PLUGIN_TOOLS => Action::PluginTools(
            decode_args::<PluginToolsArgs>(args.clone())
                .map_err(MgrError::Arguments)?
                .plugin
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ),
        LIST_CHANNELS => Action::ListChannels,
        _ => Action::List,
    })
}

/// The settings that make `target` the source a request asks first.
///
/// Sources are ordered by priority, then the default source (`core.llm.provider`),
/// then name ([`crate::llm::health::order`]); so the target becomes the default and,
/// when another source has a higher priority, is raised to that priority (the tie
/// then goes to the default). Other sources are left alone: switching back is one
/// more call, not an undo of someone else's settings.
pub fn source_switch(
    target: &str,
    sources: &[(String, i64)],
    skipped: &[Skipped],
) -> Result<(BTreeMap<String, Value>, i64), MgrError> {
    let Some(own) = sources.iter().find(|(n, _)| n == target).map(|(_, p)| *p) else {
        if let Some(s) = skipped.iter().find(|s| s.name == target) {
            return Err(MgrError::SourceNotUsable {
                name: target.to_owned(),
                reason: s.reason.clone(),
            });
        }
        let known: Vec<&str> = sources.iter().map(|(n, _)| n.as_str()).collect();
        return Err(MgrError::NoSuchSource {
            name: target.to_owned(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        });
    };
    let top = sources.iter().filter(|(n, _)| n != target).map(|(_, p)| *p).max();
    let mut changes = BTreeMap::new();
    changes.insert(crate::config::keys::LLM_PROVIDER.name().to_owned(), json!(target));
    let priority = match top {
        Some(top) if top > own => {
            changes.insert(format!("{SOURCES_PREFIX}{target}.priority"), json!(top));
            top
        }
        _ => own,
    };
    Ok((changes, priority))
}

/// `get_plugin_tools`: with no owner, every owner with its tool names (the catalogue);
/// with one, that owner's tools with their descriptions and parameters.
pub fn plugin_tools(tools: &ToolRegistry, owner: &str) -> Result<String, MgrError> {
    let mut by_owner: BTreeMap<&str, Vec<&ToolSpec>> = BTreeMap::new();
    for name in tools.names() {
        if let Some(t) = tools.get(name) {
            by_owner.entry(t.spec.plugin.as_str()).or_default().push(&t.spec);
        }
    }
    let out = if owner.is_empty() {
        let list: Vec<Value> = by_owner
            .iter()
            .map(|(p, specs)| {
                json!({"plugin": p, "count": specs.len(), "tools": specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()})
            })
            .collect();
        json!({"plugins": list, "hint": "call get_plugin_tools with {\"plugin\": name} for the descriptions and parameters"})
    } else {
        let specs = by_owner.get(owner).ok_or_else(|| MgrError::NoSuchOwner {
            name: owner.to_owned(),
            known: by_owner.keys().copied().collect::<Vec<_>>().join(", "),
        })?;
        let list: Vec<Value> = specs
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "parameters": s.parameters}))
            .collect();
        json!({"plugin": owner, "tools": list})
    };
    Ok(serde_json::to_string_pretty(&out).expect("serialisable"))
}

/// `output_list_channels`: every output channel with its capabilities, whether it is
/// synchronous (a plain reply reaches it) and the tools that send to it (kernel spec
/// §7.2). Which agent takes a channel's input is not listed here: a resident's assigned
/// channels are in `resident_agents`.
pub fn list_channels(channels: &crate::agent::channels::Channels) -> String {
    use crate::agent::channels::SEND_PREFIX;
    let list: Vec<Value> = channels
        .all()
        .iter()
        .map(|c| {
            json!({
                "channel": c.name,
                "description": c.description,
                "capabilities": c.cap_names(),
                "synchronous": c.sync,
                "tools": [format!("{SEND_PREFIX}{}", c.name), format!("{SEND_PREFIX}{}_help", c.name)],
            })
        })
        .collect();
    let note = "synchronous channels get your plain reply; any other channel receives only what you send with its output_send__ tool";
    serde_json::to_string_pretty(&json!({"channels": list, "note": note})).expect("serialisable")
}

/// What the tools act on.
pub struct Manager {
    pub plugins: Arc<PluginSet>,
    pub registry: Arc<Registry>,
    pub config: TAddr<ConfigActor>,
    pub llm: TAddr<LlmActor>,
    pub stages: TAddr<StageHost>,
    /// The output channels (a disabled plugin's leave with it; `output_list_channels`).
    pub channels: crate::agent::channels::Channels,
}

fn unavailable(what: &'static str) -> impl Fn(crate::addr::SendError) -> MgrError {
    move |e| MgrError::Unavailable {
        what,
        why: e.to_string(),
    }
}

impl Manager {
    fn entry(&self, name: &str) -> Result<Arc<super::set::PluginEntry>, MgrError> {
        self.plugins.get(name).ok_or_else(|| MgrError::NoSuchPlugin {
            name: name.to_owned(),
            known: self.plugins.names().join(", "),
        })
    }

    async fn persist_disabled(&self, name: &str, disabled: bool) -> Result<(), MgrError> {
        self.config
            .send(crate::config::SetPluginDisabled {
                name: name.to_owned(),
                disabled,
            })
            .await
            .map_err(unavailable("settings actor"))?
            .map_err(|e| MgrError::Unavailable {
                what: "settings database",
                why: e.to_string(),
            })
    }

    /// Runs one action; `Ok` is the text the model reads.
    pub async fn run(&self, action: Action) -> Result<String, MgrError> {
        tracing::info!(?action, "pluginmgr");
        match action {
            Action::List => {
                let list: Vec<Value> = self
                    .plugins
                    .list()
                    .iter()
                    .map(|e| {
                        let s = e.status(&self.registry);
                        let mut v = json!({"name": s.name, "kind": s.kind, "state": s.state, "tools": s.tools, "restarts": s.restarts});
                        if let Some(p) = s.problem {
                            v["problem"] = json!(p);
                        }
                        v
                    })
                    .collect();
                Ok(serde_json::to_string_pretty(&json!({ "plugins": list })).expect("serialisable"))
            }
            Action::Disable(name) => {
                let entry = self.entry(&name)?;
                if entry.disabled.load(Ordering::SeqCst) {
                    return Err(MgrError::Already {
                        name,
                        state: "disabled",
                    });
                }
                let tools = entry.info.tools.lock().join(", ");
                self.persist_disabled(&name, true).await?;
                // Its tools, channels and skill leave the very next request.
                self.plugins.disable(&entry).await?;
                Ok(Msg::PluginDisabled {
                    name: &name,
                    tools: if tools.is_empty() { "-" } else { &tools },
                }
                .text())
            }
            Action::Enable(name) => {
                let entry = self.entry(&name)?;
                if let Some(problem) = &entry.problem {
                    return Err(super::set::PluginOpError::CannotRun {
                        name,
                        problem: problem.clone(),
                    }
                    .into());
                }
                if entry.is_idle() {
                    // `auto_start: false`: enabled but waiting to be asked; start it now.
                    self.plugins.enable(&entry).await?;
                    let state = entry.status(&self.registry).state;
                    return Ok(Msg::PluginEnabled { name: &name, state }.text());
                }
                if !entry.disabled.load(Ordering::SeqCst) {
                    return Err(MgrError::Already { name, state: "enabled" });
                }
                self.persist_disabled(&name, false).await?;
                self.plugins.enable(&entry).await?;
                let state = entry.status(&self.registry).state;
                Ok(Msg::PluginEnabled { name: &name, state }.text())
            }
            Action::Reload(name) => {
                let entry = self.entry(&name)?;
                entry.restart(&self.registry).await?;
                let state = entry.status(&self.registry).state;
                Ok(Msg::PluginReloaded { name: &name, state }.text())
            }
            Action::Install(path) => self.install(path).await,
            Action::UseSource(target) => {
                let status = self.llm.send(GetLlmStatus).await.map_err(unavailable("LLM actor"))?;
                let sources: Vec<(String, i64)> = status
                    .sources
                    .iter()
                    .map(|s| (s.config.name.clone(), s.config.priority))
                    .collect();
                let (changes, priority) = source_switch(&target, &sources, &status.skipped)?;
                let model = status
                    .sources
                    .iter()
                    .find(|s| s.config.name == target)
                    .map(|s| s.config.model.clone())
                    .unwrap_or_default();
                self.config
                    .send(crate::config::UpdateSettings(changes, crate::config::Author::Model))
                    .await
                    .map_err(unavailable("settings actor"))?
                    .map_err(|e| MgrError::Unavailable {
                        what: "settings database",
                        why: e.to_string(),
                    })?;
                tracing::info!(source = %target, priority, "primary LLM source switched by the model");
                Ok(Msg::LlmSourceSwitched {
                    source: &target,
                    model: &model,
                    priority,
                }
                .text())
            }
            Action::ListChannels => Ok(list_channels(&self.channels)),
            Action::PluginTools(owner) => {
                let tools = self.stages.send(GetTools).await.map_err(unavailable("stage host"))?;
                plugin_tools(&tools, &owner)
            }
        }
    }

    /// Reads the package (a regular file, at most the HTTP API's limit) and installs it
    /// as `POST /api/v1/plugins/install` does.
    async fn install(&self, path: PathBuf) -> Result<String, MgrError> {
        use super::package::MAX_PACKAGE_BYTES;
        let shown = path.display().to_string();
        let fail = |why: String| MgrError::Package {
            path: shown.clone(),
            why,
        };
        let p = path.clone();
        let bytes = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
            let meta = std::fs::metadata(&p).map_err(|e| format!("{e}; give the path of an existing .hmap file"))?;
            if !meta.is_file() {
                return Err("not a regular file; give the path of an .hmap package".into());
            }
            if meta.len() > MAX_PACKAGE_BYTES {
                return Err(format!(
                    "{} bytes is over the {MAX_PACKAGE_BYTES}-byte package limit",
                    meta.len()
                ));
            }
            std::fs::read(&p).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| fail(e.to_string()))?
        .map_err(fail)?;
        match self.plugins.install(bytes).await {
            Ok((installed, status)) if status.state == "idle" => Ok(Msg::PluginInstalledIdle {
                name: &installed.name,
                version: &installed.version,
            }
            .text()),
            Ok((installed, status)) => {
                let tools = status.tools.join(", ");
                Ok(Msg::PluginInstalled {
                    name: &installed.name,
                    version: &installed.version,
                    tools: if tools.is_empty() { "-" } else { &tools },
                }
                .text())
            }
            Err(e @ InstallError::Package(super::package::PackageError::Exists(_))) => {
                Err(fail(format!("{e}; disable or remove the installed plugin first")))
            }
            Err(e) => Err(fail(e.to_string())),
        }
    }
}

/// The tools' declarations: each description carries its usage.
pub fn specs() -> Vec<ToolSpec> {
    let mut out = vec![
        ToolSpec::typed::<NoArgs>(
            LIST,
            "List the installed plugins: name, kind (process, lua, skill), state \
             (starting, running, backoff, quarantined, disabled, stopped; idle: not started until enabled), \
             tools and restarts. No arguments.",
        ),
        ToolSpec::typed::<NameArgs>(
            ENABLE,
            "Enable a disabled plugin and start it; the choice persists across daemon restarts. \
             Also starts an idle plugin (one that waits to be asked, as its skill says). \
             Example: {\"name\": \"web\"}",
        ),
        ToolSpec::typed::<NameArgs>(
            DISABLE,
            "Stop a plugin and keep it stopped across daemon restarts; its tools disappear from the next request. \
             Example: {\"name\": \"web\"}",
        ),
        ToolSpec::typed::<NameArgs>(
            RELOAD,
            "Restart a plugin, re-reading its entry file (also ends a quarantine after repeated crashes). \
             Example: {\"name\": \"web\"}",
        ),
        ToolSpec::typed::<InstallArgs>(
            INSTALL,
            "Install an .hmap plugin package from a file inside the sandbox's read roots and start it at once \
             (unless its manifest says auto_start: false: then it is idle until plugin_enable); \
             a package that does not start is rolled back. Example: {\"path\": \"downloads/notes.hmap\"}",
        ),
        ToolSpec::typed::<SourceArgs>(
            SOURCE_USE,
            "Make a configured LLM source the primary one (the first a request asks; the others stay as fallbacks). \
             The setting persists. Example: {\"source\": \"deepseek\"}",
        ),
        ToolSpec::typed::<PluginToolsArgs>(
            PLUGIN_TOOLS,
            "List the tools by plugin. With no argument (or \"\"): every plugin with its tool names; \
             with {\"plugin\": name}: that plugin's tools with their descriptions and parameters.",
        ),
        ToolSpec::typed::<NoArgs>(
            LIST_CHANNELS,
            "List the output channels: capabilities, whether a plain reply reaches it (synchronous) \
             and its send tools. Call it when unsure where or how a message can be sent. No arguments.",
        ),
    ];
    for s in &mut out {
        s.keywords = crate::stages::tools::keywords(keywords_of(&s.name));
        s.plugin = OWNER.into();
        s.no_memory = true;
        // Changing plugins or sources mid-batch must not interleave with other calls.
        s.serial = ![LIST, PLUGIN_TOOLS, LIST_CHANNELS].contains(&s.name.as_str());
        s.parallel_safe = !s.serial;
        if s.name == INSTALL {
            s.paths = vec![PathArg::new("path", Access::Read)];
        }
    }
    out
}

/// Words a person may use for each manager tool (`ToolSpec::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        LIST => "plugins, installed, extensions, 插件, 已安装",
        ENABLE => "enable, turn on, switch on, activate, 启用, 打开插件",
        DISABLE => "disable, turn off, switch off, deactivate, 禁用, 关闭插件, 停用",
        RELOAD => "restart, reload, quarantined, crashed, 重启, 重新加载",
        INSTALL => "install, package, hmap, add a plugin, 安装, 插件包",
        SOURCE_USE => "switch, model, llm, provider, primary, deepseek, openai, anthropic, 切换, 模型",
        LIST_CHANNELS => "channels, where to send, deliver, 渠道, 发送到",
        _ => "",
    }
}

/// Registers every manager tool with the stage host. [`parse`] decodes each call into
/// an [`Action`] (the schemas above are those of the argument structs `parse` decodes).
pub async fn register(mgr: Arc<Manager>) -> Result<(), crate::stages::host::RegisterError> {
    let stages = mgr.stages.clone();
    crate::stages::host::register_family(&stages, specs(), move |tool, args| {
        let m = mgr.clone();
        async move {
            let action = parse(&tool, &args).map_err(ToolFailure::kernel)?;
            m.run(action).await.map_err(|e| {
                tracing::warn!(tool = %tool, "pluginmgr refused: {e}");
                ToolFailure::kernel(e)
            })
        }
    })
    .await
}

use crate::stages::ToolFailure;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_become_actions_or_say_what_is_missing() {
        assert_eq!(parse(LIST, &json!({})).unwrap(), Action::List);
        assert_eq!(
            parse(DISABLE, &json!({"name": " web "})).unwrap(),
            Action::Disable("web".into())
        );
        assert_eq!(
            parse(INSTALL, &json!({"path": "/x/a.hmap"})).unwrap(),
            Action::Install("/x/a.hmap".into())
        );
        assert_eq!(
            parse(PLUGIN_TOOLS, &json!({})).unwrap(),
            Action::PluginTools(String::new())
        );
        for (tool, args, want) in [
            (ENABLE, json!({}), "plugin_enable: `name` is required"),
            (RELOAD, json!({"name": "  "}), "`name` is required"),
            (INSTALL, json!({"path": 3}), "`path` is required"),
            (SOURCE_USE, json!({}), "`source` is required"),
        ] {
            let e = parse(tool, &args).unwrap_err().to_string();
            assert!(e.contains(want), "{tool}: {e}");
        }
    }

    /// The schemas come from the argument structs now; the model reads the very schemas
    /// it read when they were written out by hand.
    #[test]
    fn the_generated_schemas_are_the_ones_written_before() {
        let name = json!({"type": "object", "properties": {"name": {"type": "string", "description": "the plugin's name (see plugin_list)"}}, "required": ["name"]});
        let none = json!({"type": "object", "properties": {}});
        let want = [
            (LIST, none.clone()),
            (ENABLE, name.clone()),
            (DISABLE, name.clone()),
            (RELOAD, name),
            (
                INSTALL,
                json!({"type": "object", "properties": {"path": {"type": "string", "description": "path of the .hmap file (relative paths start in the work directory)"}}, "required": ["path"]}),
            ),
            (
                SOURCE_USE,
                json!({"type": "object", "properties": {"source": {"type": "string", "description": "the source's name, as in core.llm.sources.<name>"}}, "required": ["source"]}),
            ),
            (
                PLUGIN_TOOLS,
                json!({"type": "object", "properties": {"plugin": {"type": "string", "description": "a plugin's name, or empty for all"}}}),
            ),
            (LIST_CHANNELS, none),
        ];
        let specs = specs();
        assert_eq!(specs.len(), want.len());
        for (tool, schema) in want {
            let spec = specs.iter().find(|s| s.name == tool).expect(tool);
            assert_eq!(spec.parameters, schema, "{tool}");
        }
    }

    #[test]
    fn a_switch_makes_the_source_default_and_raises_it_to_the_top_priority() {
        let sources = [("a".to_owned(), 5), ("b".to_owned(), 0), ("c".to_owned(), 2)];
        let (changes, prio) = source_switch("b", &sources, &[]).unwrap();
        assert_eq!(prio, 5);
        assert_eq!(changes["core.llm.provider"], json!("b"));
        assert_eq!(changes["core.llm.sources.b.priority"], json!(5));
        // Already the highest: only the default changes.
        let (changes, prio) = source_switch("a", &sources, &[]).unwrap();
        assert_eq!((changes.len(), prio), (1, 5));
        // The order the LLM actor uses now puts the target first.
        let cands = [
            crate::llm::health::Candidate {
                name: "a",
                model: "m",
                priority: 5,
            },
            crate::llm::health::Candidate {
                name: "b",
                model: "m",
                priority: 5,
            },
        ];
        assert_eq!(crate::llm::health::order(&cands, None, "b")[0], "b");
        let skipped = [Skipped {
            name: "k".into(),
            reason: "no API key".into(),
        }];
        let e = source_switch("k", &sources, &skipped).unwrap_err().to_string();
        assert!(e.contains("not usable: no API key"), "{e}");
        let e = source_switch("zz", &sources, &skipped).unwrap_err().to_string();
        assert!(e.contains("no LLM source `zz`; sources: a, b, c"), "{e}");
    }

    #[test]
    fn the_catalogue_groups_tools_by_owner() {
        let mut r = ToolRegistry::default();
        for spec in specs() {
            r.register(spec, crate::agent::seq::handler()).unwrap();
        }
        r.register(crate::agent::seq::spec(), crate::agent::seq::handler())
            .unwrap();
        let all: Value = serde_json::from_str(&plugin_tools(&r, "").unwrap()).unwrap();
        let owners: Vec<&str> = all["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["plugin"].as_str().unwrap())
            .collect();
        assert_eq!(owners, [OWNER, "seq"]);
        assert_eq!(all["plugins"][0]["count"], 8);
        let one: Value = serde_json::from_str(&plugin_tools(&r, "seq").unwrap()).unwrap();
        assert_eq!(one["tools"][0]["name"], "seq_run");
        assert!(one["tools"][0]["parameters"]["properties"]["steps"].is_object());
        let e = plugin_tools(&r, "nope").unwrap_err().to_string();
        assert!(e.contains("owners: builtin.pluginmgr, seq"), "{e}");
    }

    #[test]
    fn channels_are_listed_with_their_send_tools() {
        let v: Value = serde_json::from_str(&list_channels(&crate::agent::channels::Channels::builtin())).unwrap();
        let http = &v["channels"][0];
        assert_eq!(http["channel"], "http");
        assert_eq!(http["synchronous"], true);
        assert_eq!(http["tools"], json!(["output_send__http", "output_send__http_help"]));
        assert!(http["capabilities"].as_array().unwrap().contains(&json!("text")));
    }

    #[test]
    fn install_declares_its_path_for_the_sandbox_and_changes_run_serially() {
        let specs = specs();
        let install = specs.iter().find(|s| s.name == INSTALL).unwrap();
        assert!(install.sandboxed() && install.paths[0].arg == "path");
        assert!(specs.iter().find(|s| s.name == DISABLE).unwrap().serial);
        assert!(specs.iter().find(|s| s.name == LIST).unwrap().parallel_safe);
    }
}
