//! Settings and LLM-source methods for plugins (`settings.*`, `llm.*`), over the
//! settings actor and the LLM actor.
//!
//! Namespaces: a plugin reads and writes its own `plugin.<name>.*` keys freely (in
//! clear, secrets included: they are its own). Core keys and other plugins' keys need
//! the `settings_cross` capability (or no capability list at all, the manifest's
//! compatibility rule); what comes back from them has secrets masked. Writes go
//! through the same validation as `PUT /api/v1/settings` and are published as
//! `setting_changed` like any other write.

use std::collections::{BTreeMap, BTreeSet};

use homeagent_plugin_protocol::Manifest;
use homeagent_plugin_protocol::PluginRequest as R;
use homeagent_plugin_protocol::frame::RpcError;
use homeagent_plugin_protocol::methods::{self as m, own_setting_key};
use serde_json::{Value, json};

use super::KernelServices;
use super::errors::{bad, need, unavailable};
use crate::config::{
    ConfigError, GetMaskedSetting, GetPluginDefs, GetRawSettings, GetSetting, GetSettings, PLUGIN_PREFIX, PluginMeta,
    RegisterPluginDef, SOURCES_PREFIX, UpdateSettings,
};
use crate::llm::provider::{Configure, GetLlmStatus, LlmStatus};

/// Whether `req` is a settings or LLM-source call.
pub fn serves(req: &R) -> bool {
    matches!(
        req,
        R::SettingsGet(_)
            | R::SettingsSet(_)
            | R::SettingsList(_)
            | R::SettingsRegisterDef(_)
            | R::SettingsDefs(_)
            | R::SettingsLanguage(_)
            | R::SettingsGetCore(_)
            | R::SettingsSetCore(_)
            | R::SettingsListCore(_)
            | R::SettingsGetPlugin(_)
            | R::SettingsSetPlugin(_)
            | R::SettingsListPlugin(_)
            | R::SettingsDump(_)
            | R::SettingsPlugins(_)
            | R::LlmListSources(_)
            | R::LlmCurrentSource(_)
            | R::LlmSetSource(_)
    )
}

fn denied(message: String) -> RpcError {
    RpcError {
        code: RpcError::DENIED,
        message,
    }
}

/// The full key of one of the plugin's own settings (`token` or `plugin.<me>.token`).
pub fn own_key(me: &str, method: &str, key: &str) -> Result<(String, String), RpcError> {
    match own_setting_key(me, key) {
        Some(short) => Ok((format!("{PLUGIN_PREFIX}{me}.{short}"), short.to_owned())),
        None => {
            let verb = match method {
                m::SETTINGS_SET => "write",
                m::SETTINGS_REGISTER_DEF => "declare",
                _ => "read",
            };
            Err(denied(format!(
                "plugin `{me}` may {verb} only its own settings with `{method}`: give `<key>` or `plugin.{me}.<key>`, \
                 not `{key}`; for core settings use settings.getCore/setCore, for another plugin's \
                 settings.getPlugin/setPlugin (both need the `settings_cross` capability)"
            )))
        }
    }
}

/// The full key of `plugin`'s setting `key` (short or full), and whether it is the
/// caller's (`me`'s) own. That another plugin's key needs `settings_cross` was decided
/// on the decoded call, before it got here ([`PluginRequest::needs`]).
///
/// [`PluginRequest::needs`]: homeagent_plugin_protocol::request::PluginRequest::needs
pub fn plugin_key(me: &str, method: &str, plugin: &str, key: &str) -> Result<(String, bool), RpcError> {
    let short = own_setting_key(plugin, key).ok_or_else(|| {
        bad(
            method,
            format!("`key` must be `<key>` or `plugin.{plugin}.<key>`, not `{key}`"),
        )
    })?;
    Ok((format!("{PLUGIN_PREFIX}{plugin}.{short}"), plugin == me))
}

/// A core key (anything outside `plugin.*`).
pub fn core_key<'k>(method: &str, key: &'k str) -> Result<&'k str, RpcError> {
    if key.starts_with(PLUGIN_PREFIX) {
        return Err(bad(
            method,
            format!("`{key}` is a plugin setting; use settings.getPlugin/setPlugin (or settings.get/set for your own)"),
        ));
    }
    Ok(key)
}

/// The entries of `all` under `plugin.<plugin>.`, by short key.
pub fn plugin_section(all: &BTreeMap<String, Value>, plugin: &str) -> BTreeMap<String, Value> {
    let prefix = format!("{PLUGIN_PREFIX}{plugin}.");
    all.iter()
        .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|s| (s.to_owned(), v.clone())))
        .collect()
}

/// The names of the plugins that have settings in `all`.
pub fn plugin_names(all: &BTreeMap<String, Value>) -> Vec<String> {
    let names: BTreeSet<&str> = all
        .keys()
        .filter_map(|k| k.strip_prefix(PLUGIN_PREFIX)?.split_once('.').map(|(p, _)| p))
        .collect();
    names.into_iter().map(str::to_owned).collect()
}

/// The priority that makes `name` the first choice among `sources` (name, priority):
/// its own when already above every other, else one more than the highest other.
/// `None` when `name` is not among them.
pub fn preferred_priority(sources: &[(String, i64)], name: &str) -> Option<i64> {
    let own = sources.iter().find(|(n, _)| n == name)?.1;
    let others = sources.iter().filter(|(n, _)| n != name).map(|(_, p)| *p).max();
    Some(match others {
        Some(top) if top >= own => top.saturating_add(1),
        _ => own,
    })
}

/// The status sources as plugins see them (no keys), each marked `current`.
fn sources_json(status: &LlmStatus) -> Vec<Value> {
    status
        .sources
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert(
                    "current".into(),
                    json!(status.current.as_deref() == Some(s.config.name.as_str())),
                );
            }
            v
        })
        .collect()
}

fn config_error(method: &str, e: ConfigError) -> RpcError {
    match e {
        ConfigError::Database(_) | ConfigError::Migration(_) | ConfigError::Io { .. } => unavailable(method, e),
        other => bad(method, other),
    }
}

/// `key` unless it is blank.
fn key_param(method: &str, key: &str) -> Result<(), RpcError> {
    if key.trim().is_empty() {
        return Err(bad(method, "`key` (a non-empty string) is required"));
    }
    Ok(())
}

impl KernelServices {
    /// Runs a settings or LLM-source method for the plugin of `manifest` (the method's
    /// capability already checked; the namespace is checked here).
    pub(super) async fn settings(&self, manifest: &Manifest, req: R) -> Result<Value, RpcError> {
        let method = req.method();
        if method.starts_with("llm.") {
            return self.llm_sources(manifest, req).await;
        }
        let config = need("the settings", &self.config)?;
        let gone = |e: crate::addr::SendError| unavailable(method, e);
        let cfg = |e: ConfigError| config_error(method, e);
        let me = manifest.name.as_str();
        let write = |key: String, value: Value| {
            let config = config.clone();
            async move {
                if crate::config::keys::owner_only_setting(&key) {
                    tracing::warn!(plugin = %me, %key, "refused: a plugin tried to change an owner-only setting");
                    return Err(denied(format!(
                        "`{key}` decides where credentials go or what confines tools: only the owner changes it (WebUI, HTTP API or CLI); ask the owner"
                    )));
                }
                let changes = config
                    .send(UpdateSettings(
                        BTreeMap::from([(key, value)]),
                        crate::config::Author::Plugin(me.to_owned()),
                    ))
                    .await
                    .map_err(gone)?
                    .map_err(cfg)?;
                Ok::<bool, RpcError>(!changes.is_empty())
            }
        };
        match req {
            R::SettingsLanguage(_) => Ok(json!({"language": crate::i18n::language().code()})),
            R::SettingsGet(p) => {
                key_param(method, &p.key)?;
                let (full, short) = own_key(me, method, &p.key)?;
                let v = config.send(GetSetting(full)).await.map_err(gone)?.map_err(cfg)?;
                Ok(json!({"key": short, "value": v}))
            }
            R::SettingsSet(p) => {
                key_param(method, &p.key)?;
                let (full, short) = own_key(me, method, &p.key)?;
                let changed = write(full, p.value).await?;
                Ok(json!({"ok": true, "key": short, "changed": changed}))
            }
            R::SettingsList(_) => {
                let all = config.send(GetRawSettings).await.map_err(gone)?.map_err(cfg)?;
                Ok(json!({ "settings": plugin_section(&all, me) }))
            }
            R::SettingsRegisterDef(def) => {
                let (_, short) = own_key(me, method, &def.key)?;
                let inserted = config
                    .send(RegisterPluginDef {
                        plugin: me.to_owned(),
                        key: short.clone(),
                        default: def.default,
                        meta: PluginMeta {
                            description: def.description,
                            secret: def.secret,
                        },
                    })
                    .await
                    .map_err(gone)?
                    .map_err(cfg)?;
                Ok(json!({"key": short, "inserted": inserted}))
            }
            R::SettingsDefs(_) => {
                let defs = config.send(GetPluginDefs(me.to_owned())).await.map_err(gone)?;
                Ok(json!({ "defs": defs }))
            }
            R::SettingsGetCore(p) => {
                key_param(method, &p.key)?;
                let key = core_key(method, &p.key)?;
                let v = config
                    .send(GetMaskedSetting(key.to_owned()))
                    .await
                    .map_err(gone)?
                    .map_err(cfg)?;
                Ok(json!({"key": key, "value": v}))
            }
            R::SettingsSetCore(p) => {
                key_param(method, &p.key)?;
                let key = core_key(method, &p.key)?.to_owned();
                let changed = write(key.clone(), p.value).await?;
                tracing::info!(plugin = %me, %key, "plugin changed a core setting");
                Ok(json!({"ok": true, "key": key, "changed": changed}))
            }
            R::SettingsListCore(p) => {
                let prefix = p.prefix.as_str();
                let all = config.send(GetSettings).await.map_err(gone)?.map_err(cfg)?;
                let core: BTreeMap<_, _> = all
                    .into_iter()
                    .filter(|(k, _)| !k.starts_with(PLUGIN_PREFIX) && k.starts_with(prefix))
                    .collect();
                Ok(json!({ "settings": core }))
            }
            R::SettingsGetPlugin(p) => {
                plugin_param(method, &p.plugin)?;
                key_param(method, &p.key)?;
                let (full, own) = plugin_key(&manifest.name, method, &p.plugin, &p.key)?;
                let v = if own {
                    config.send(GetSetting(full.clone())).await
                } else {
                    config.send(GetMaskedSetting(full.clone())).await
                };
                let v = v.map_err(gone)?.map_err(cfg)?;
                Ok(json!({"key": full, "value": v}))
            }
            R::SettingsSetPlugin(p) => {
                plugin_param(method, &p.plugin)?;
                key_param(method, &p.key)?;
                let (full, own) = plugin_key(&manifest.name, method, &p.plugin, &p.key)?;
                let changed = write(full.clone(), p.value).await?;
                if !own {
                    tracing::info!(plugin = %me, key = %full, "plugin changed another plugin's setting");
                }
                Ok(json!({"ok": true, "key": full, "changed": changed}))
            }
            R::SettingsListPlugin(p) => {
                plugin_param(method, &p.plugin)?;
                let plugin = p.plugin.as_str();
                // Any key of the namespace answers the access question.
                let (_, own) = plugin_key(&manifest.name, method, plugin, "x")?;
                let all = if own {
                    config.send(GetRawSettings).await
                } else {
                    config.send(GetSettings).await
                };
                let all = all.map_err(gone)?.map_err(cfg)?;
                Ok(json!({ "settings": plugin_section(&all, plugin) }))
            }
            R::SettingsDump(_) => {
                let all = config.send(GetSettings).await.map_err(gone)?.map_err(cfg)?;
                Ok(json!({ "settings": all }))
            }
            R::SettingsPlugins(_) => {
                let all = config.send(GetSettings).await.map_err(gone)?.map_err(cfg)?;
                Ok(json!({ "plugins": plugin_names(&all) }))
            }
            other => Err(RpcError {
                code: RpcError::UNKNOWN_METHOD,
                message: format!("`{}` is not a settings method", other.method()),
            }),
        }
    }

    async fn llm_sources(&self, manifest: &Manifest, req: R) -> Result<Value, RpcError> {
        let method = req.method();
        let llm = need("the LLM sources", &self.llm)?;
        let gone = |e: crate::addr::SendError| unavailable(method, e);
        let status = llm.send(GetLlmStatus).await.map_err(gone)?;
        match req {
            R::LlmListSources(_) => Ok(json!({
                "sources": sources_json(&status),
                "current": status.current,
                "skipped": status.skipped,
            })),
            R::LlmCurrentSource(_) => Ok(json!({ "source": status.current })),
            R::LlmSetSource(p) => {
                let name = p.name.as_str();
                let pairs: Vec<(String, i64)> = status
                    .sources
                    .iter()
                    .map(|s| (s.config.name.clone(), s.config.priority))
                    .collect();
                let Some(priority) = preferred_priority(&pairs, name) else {
                    let known: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
                    let skipped: Vec<String> = status
                        .skipped
                        .iter()
                        .map(|s| format!("{} ({})", s.name, s.reason))
                        .collect();
                    let mut msg = format!(
                        "unknown LLM source `{name}`; loaded sources: {}",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    );
                    if !skipped.is_empty() {
                        msg.push_str(&format!("; skipped: {}", skipped.join("; ")));
                    }
                    return Err(bad(method, msg));
                };
                let current = pairs.iter().find(|(n, _)| n == name).map(|(_, p)| *p);
                if current != Some(priority) {
                    let config = need("the settings", &self.config)?;
                    let key = format!("{SOURCES_PREFIX}{name}.priority");
                    config
                        .send(UpdateSettings(
                            BTreeMap::from([(key, json!(priority))]),
                            crate::config::Author::Plugin(manifest.name.clone()),
                        ))
                        .await
                        .map_err(gone)?
                        .map_err(|e| config_error(method, e))?;
                    // Apply now rather than when the settings relay gets to it, so that
                    // `llm.currentSource` right after answers the new source.
                    let all = config
                        .send(GetRawSettings)
                        .await
                        .map_err(gone)?
                        .map_err(|e| config_error(method, e))?;
                    llm.send(Configure(all)).await.map_err(gone)?;
                    tracing::info!(source = %name, priority, "a plugin made this LLM source preferred");
                }
                let after = llm.send(GetLlmStatus).await.map_err(gone)?;
                let available = after.sources.iter().any(|s| s.config.name == name && s.available);
                Ok(json!({"source": name, "priority": priority, "available": available, "current": after.current}))
            }
            other => Err(RpcError {
                code: RpcError::UNKNOWN_METHOD,
                message: format!("`{}` is not an LLM-source method", other.method()),
            }),
        }
    }
}

/// `plugin` unless it is blank.
fn plugin_param(method: &str, plugin: &str) -> Result<(), RpcError> {
    if plugin.trim().is_empty() {
        return Err(bad(method, "`plugin` (a non-empty string) is required"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use homeagent_plugin_protocol::PluginRequest;

    fn manifest(v: Value) -> Manifest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn own_keys_are_free_and_others_need_settings_cross() {
        let (full, short) = own_key("lamp", "settings.get", "color").unwrap();
        assert_eq!((full.as_str(), short.as_str()), ("plugin.lamp.color", "color"));
        assert_eq!(own_key("lamp", "settings.set", "plugin.lamp.a.b").unwrap().1, "a.b");
        let err = own_key("lamp", "settings.set", "plugin.other.color").unwrap_err();
        assert_eq!(err.code, RpcError::DENIED);
        assert!(
            err.message.contains("setPlugin") && err.message.contains("settings_cross"),
            "{}",
            err.message
        );

        assert_eq!(
            plugin_key("lamp", "settings.getPlugin", "lamp", "color").unwrap(),
            ("plugin.lamp.color".to_owned(), true)
        );
        let narrow = manifest(json!({"name": "lamp", "capabilities": ["io"]}));
        let set_other = PluginRequest::from_message(
            "settings.setPlugin",
            json!({"plugin": "other", "key": "plugin.other.k"}),
        )
        .unwrap();
        let err = RpcError::from(narrow.permits(&set_other).unwrap_err());
        assert_eq!(err.code, RpcError::DENIED);
        assert!(
            err.message.contains("`settings_cross` capability")
                && err.message.contains("plugin.json")
                && err.message.contains("plugin `other`"),
            "{}",
            err.message
        );
        let wide = manifest(json!({"name": "lamp", "capabilities": ["settings_cross"]}));
        assert!(wide.permits(&set_other).is_ok());
        assert_eq!(
            plugin_key("lamp", "settings.getPlugin", "other", "k").unwrap(),
            ("plugin.other.k".to_owned(), false)
        );
        // No capability list at all: the core methods only, as for every other method
        // (this once let a plugin without a list touch every plugin's settings).
        let bare = manifest(json!({"name": "lamp"}));
        assert!(bare.permits(&set_other).is_err());
        // A full key of another namespace than the one named.
        assert!(plugin_key("lamp", "settings.getPlugin", "other", "plugin.third.k").is_err());

        assert_eq!(
            core_key("settings.getCore", "core.llm.max_tokens").unwrap(),
            "core.llm.max_tokens"
        );
        assert!(
            core_key("settings.getCore", "plugin.x.k")
                .unwrap_err()
                .message
                .contains("settings.getPlugin")
        );
    }

    #[test]
    fn sections_names_and_preferred_priority() {
        let all: BTreeMap<String, Value> = [
            ("core.llm.max_tokens", json!(9)),
            ("plugin.a.x", json!(1)),
            ("plugin.a.y.z", json!(2)),
            ("plugin.ab.x", json!(3)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let a = plugin_section(&all, "a");
        assert_eq!(a.keys().collect::<Vec<_>>(), ["x", "y.z"]);
        assert_eq!(plugin_names(&all), ["a", "ab"]);

        let s = |v: &[(&str, i64)]| v.iter().map(|(n, p)| (n.to_string(), *p)).collect::<Vec<_>>();
        assert_eq!(preferred_priority(&s(&[("a", 0), ("b", 0)]), "b"), Some(1));
        assert_eq!(preferred_priority(&s(&[("a", 5), ("b", 2)]), "b"), Some(6));
        assert_eq!(preferred_priority(&s(&[("a", 5), ("b", 9)]), "b"), Some(9));
        assert_eq!(preferred_priority(&s(&[("b", -3)]), "b"), Some(-3));
        assert_eq!(preferred_priority(&s(&[("a", 0)]), "zz"), None);
    }
}
