//! `settings_get` and `settings_set`: the model reads and changes the daemon's own
//! settings (the seed's cfgmgr), for the owner only.
//!
//! Why a gate beyond "owner-only": a prompt injection rides in an owner's turn (a web
//! page the owner asked to read), so what the model may change is limited to knobs
//! whose worst case is a worse answer, never a wider door. [`refusal`] refuses every
//! `core.security.*` key (the firewall's own rules), every secret, every key naming a
//! place or a destination — a URL, a listen address, a host list, a file or directory
//! (the daemon's data, its plugins, its log, the telemetry endpoint: each is a way to
//! carry data out or to load code) — and every key without a core definition
//! (sources, plugins' settings: `llm_source_use` and the owner's page do those).
//! Both tools are in the default owner-only list, and `settings_set` in the default
//! approval list (it asks once the turn read something untrusted). Every change is in
//! the settings history as the model's (`Author::Model`), so the owner can revert it.
//!
//! The pure parts are [`refusal`] and [`parse_set`]; [`register`] is the shell.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::addr::TAddr;
use crate::config::{Author, ConfigActor, GetDefs, GetSettings, SettingDef, UpdateSettings, ValueKind};
use crate::stages::{StageHost, ToolSpec};

pub const GET: &str = "settings_get";
pub const SET: &str = "settings_set";
/// The owner the tools register under (not a plugin name: those are `[a-z0-9_-]`).
pub const OWNER: &str = "builtin.settings";
/// At most this many settings in one `settings_get` answer.
const MAX_LISTED: usize = 60;

/// Keys naming a file or directory of the daemon (their kind is a plain string).
const PLACES: &[&str] = &[
    "core.daemon.data_dir",
    "core.plugin.dir",
    "core.memory.graph",
    "core.memory.text",
    "core.memory.documents",
    "core.memory.onnx_dir",
    "core.knowledge.path",
    "core.log.path",
];

/// Namespaces the model never writes: the firewall, the daemon's process and listen
/// address, where telemetry goes.
const CLOSED: &[&str] = &[
    "core.security.",
    "core.daemon.",
    "webui.",
    "core.telemetry.",
    "core.plugin.",
];

/// Why the model may not change a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetRefusal {
    #[error(
        "`{0}` is not a setting the agent knows; call settings_get to list them (LLM sources: llm_source_use; plugins' settings: the owner's settings page)"
    )]
    Unknown(String),
    #[error("`{0}` is a security setting; only the owner changes it, on the settings page or with `waiter`'s /set")]
    Security(String),
    #[error("`{0}` is a secret; only the owner sets it, on the settings page")]
    Secret(String),
    #[error(
        "`{0}` names a place or a destination (a file, a directory, an address or a URL); only the owner changes it, on the settings page"
    )]
    Place(String),
    #[error(
        "settings_set: give `values`, an object of key → value (e.g. {{\"values\": {{\"core.llm.temperature\": 0.3}}}})"
    )]
    NoValues,
    #[error("settings_set changes at most 20 settings at once; split the change")]
    TooMany,
}

/// `None` when the model may change `key` (whose core definition is `def`).
pub fn refusal(key: &str, def: Option<&SettingDef>) -> Option<SetRefusal> {
    let Some(def) = def else {
        return Some(SetRefusal::Unknown(key.to_owned()));
    };
    if key.starts_with("core.security.") {
        return Some(SetRefusal::Security(key.to_owned()));
    }
    if def.secret {
        return Some(SetRefusal::Secret(key.to_owned()));
    }
    let place_kind = matches!(def.kind, ValueKind::Url | ValueKind::SocketAddr);
    let place_name = ["url", "_addr", "endpoint", "hosts", "path", "dir"]
        .iter()
        .any(|end| key.ends_with(end));
    if place_kind || place_name || PLACES.contains(&key) || CLOSED.iter().any(|ns| key.starts_with(ns)) {
        return Some(SetRefusal::Place(key.to_owned()));
    }
    None
}

/// `settings_set`'s arguments: `{values: {key: value}}`, each key checked against
/// `defs` (the first refusal answers; nothing is written then).
pub fn parse_set(
    values: &serde_json::Map<String, Value>,
    defs: &[SettingDef],
) -> Result<BTreeMap<String, Value>, SetRefusal> {
    if values.is_empty() {
        return Err(SetRefusal::NoValues);
    }
    if values.len() > 20 {
        return Err(SetRefusal::TooMany);
    }
    for key in values.keys() {
        if let Some(r) = refusal(key, defs.iter().find(|d| d.key == key)) {
            return Err(r);
        }
    }
    Ok(values.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// `settings_get`: the settings whose key starts with `prefix` (all when empty), with
/// their value (secrets masked), description and whether the agent may change them.
fn listing(prefix: &str, defs: &[SettingDef], values: &BTreeMap<String, Value>) -> String {
    let rows: Vec<Value> = defs
        .iter()
        .filter(|d| d.key.starts_with(prefix))
        .take(MAX_LISTED)
        .map(|d| {
            json!({
                "key": d.key,
                "value": values.get(d.key).cloned().unwrap_or_else(|| d.default.clone()),
                "description": d.description,
                "agent_may_change": refusal(d.key, Some(d)).is_none(),
            })
        })
        .collect();
    let total = defs.iter().filter(|d| d.key.starts_with(prefix)).count();
    let mut out = json!({ "settings": rows });
    if total > rows.len() {
        out["more"] = json!(format!(
            "{} more; pass a longer prefix (e.g. core.agent., core.llm., core.memory.)",
            total - rows.len()
        ));
    }
    out.to_string()
}

/// `settings_get`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct GetArgs {
    /// e.g. core.agent. or core.llm.
    #[serde(default)]
    prefix: String,
}

/// `settings_set`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SetArgs {
    /// key → new value
    values: serde_json::Map<String, Value>,
}

/// Why a settings tool did nothing.
#[derive(Debug, thiserror::Error)]
pub enum SettingsToolError {
    #[error(transparent)]
    Refused(#[from] SetRefusal),
    #[error(transparent)]
    Unavailable(#[from] crate::addr::SendError),
    #[error(transparent)]
    Read(crate::config::ConfigError),
    #[error("{0}; nothing was changed")]
    Unchanged(crate::config::ConfigError),
}

fn specs() -> [ToolSpec; 2] {
    let mut get = ToolSpec::typed::<GetArgs>(
        GET,
        "List the daemon's settings whose key starts with `prefix` (all if empty): value (secrets masked), what each does, and whether you may change it with settings_set.",
    );
    get.parallel_safe = true;
    let mut set = ToolSpec::typed::<SetArgs>(
        SET,
        "Change some of the daemon's settings: {\"values\": {key: value}}. Security settings, secrets, addresses, URLs and paths are the owner's alone. Each change is recorded as yours and the owner can revert it.",
    );
    set.serial = true;
    let mut out = [get, set];
    for s in &mut out {
        s.plugin = OWNER.into();
        s.no_memory = true;
        s.keywords = crate::stages::tools::keywords(
            "setting, settings, configure, configuration, option, temperature, max tokens, language, interval, 设置, 配置, 选项",
        );
    }
    out
}

/// Registers both tools with the stage host.
pub async fn register(
    config: TAddr<ConfigActor>,
    stages: &TAddr<StageHost>,
) -> Result<(), crate::stages::host::RegisterError> {
    let [get, set] = specs();
    let c = config.clone();
    let get_h = crate::stages::typed(move |a: GetArgs| {
        let c = c.clone();
        async move { settings_get(&c, a.prefix.trim()).await }
    });
    let set_h = crate::stages::typed(move |a: SetArgs| {
        let c = config.clone();
        async move { settings_set(&c, &a.values).await }
    });
    crate::stages::host::register_all(stages, [(get, get_h), (set, set_h)]).await
}

async fn settings_get(config: &TAddr<ConfigActor>, prefix: &str) -> Result<String, SettingsToolError> {
    let defs = config.send(GetDefs).await?;
    let values = config.send(GetSettings).await?.map_err(SettingsToolError::Read)?;
    Ok(listing(prefix, &defs, &values))
}

async fn settings_set(
    config: &TAddr<ConfigActor>,
    values: &serde_json::Map<String, Value>,
) -> Result<String, SettingsToolError> {
    let defs = config.send(GetDefs).await?;
    let values = parse_set(values, &defs)?;
    let changes = config
        .send(UpdateSettings(values, Author::Model))
        .await?
        .map_err(SettingsToolError::Unchanged)?;
    let keys: Vec<&String> = changes.iter().map(|c| &c.key).collect();
    tracing::info!(?keys, "the model changed settings");
    Ok(json!({ "changed": keys }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs() -> Vec<SettingDef> {
        crate::config::core_defs(std::path::Path::new("/data"))
    }

    #[test]
    fn the_model_may_change_knobs_but_no_door() {
        let defs = defs();
        let verdict = |k: &str| refusal(k, defs.iter().find(|d| d.key == k));
        for ok in [
            "core.agent.max_tool_turns",
            "core.agent.language",
            "core.llm.temperature",
            "core.agent.archive_interval",
        ] {
            assert_eq!(verdict(ok), None, "{ok}");
        }
        assert!(matches!(
            verdict("core.security.sandbox.network"),
            Some(SetRefusal::Security(_))
        ));
        assert!(matches!(
            verdict("core.security.approval"),
            Some(SetRefusal::Security(_))
        ));
        assert!(matches!(verdict("core.llm.api_key"), Some(SetRefusal::Secret(_))));
        for place in [
            "core.telemetry.otlp_endpoint",
            "webui.listen_addr",
            "core.daemon.allowed_hosts",
            "core.daemon.data_dir",
            "core.plugin.dir",
            "core.memory.embed_url",
            "core.memory.graph",
            "core.knowledge.path",
            "core.memory.multimodal_space.base_url",
            "core.backup.dir",
        ] {
            assert!(
                matches!(verdict(place), Some(SetRefusal::Place(_))),
                "{place}: {:?}",
                verdict(place)
            );
        }
        assert!(matches!(
            verdict("core.llm.sources.x.base_url"),
            Some(SetRefusal::Unknown(_))
        ));
        assert!(matches!(verdict("plugin.onebot.url"), Some(SetRefusal::Unknown(_))));
    }

    #[test]
    fn one_refused_key_refuses_the_whole_change() {
        let defs = defs();
        let set = |v: Value| {
            let a: SetArgs = crate::stages::tools::decode_args(v).unwrap();
            parse_set(&a.values, &defs)
        };
        let ok = set(json!({"values": {"core.llm.temperature": 0.3}})).unwrap();
        assert_eq!(ok.len(), 1);
        let mixed = json!({"values": {"core.llm.temperature": 0.3, "core.security.tool_deny": ""}});
        assert!(matches!(set(mixed), Err(SetRefusal::Security(_))));
        assert_eq!(set(json!({"values": {}})), Err(SetRefusal::NoValues));
        // No `values` at all does not fit the schema, which requires it; the answer
        // names the field.
        let e = crate::stages::tools::decode_args::<SetArgs>(json!({})).err().unwrap();
        assert!(e.to_string().contains("missing field `values`"), "{e}");
        assert_eq!(
            specs()[1].parameters,
            json!({"type": "object", "properties": {"values": {"type": "object", "description": "key → new value",
                "additionalProperties": true}}, "required": ["values"]}),
            "the schema the model sees"
        );
    }

    #[test]
    fn a_listing_masks_nothing_it_was_not_given_and_says_what_may_change() {
        let defs = defs();
        let mut values = BTreeMap::new();
        values.insert("core.llm.api_key".to_owned(), json!("***"));
        let out: Value = serde_json::from_str(&listing("core.llm.", &defs, &values)).unwrap();
        let rows = out["settings"].as_array().unwrap();
        let key = rows.iter().find(|r| r["key"] == "core.llm.api_key").unwrap();
        assert_eq!(key["value"], "***");
        assert_eq!(key["agent_may_change"], false);
        let all: Value = serde_json::from_str(&listing("", &defs, &values)).unwrap();
        assert!(all["more"].as_str().unwrap().contains("longer prefix"));
    }
}
