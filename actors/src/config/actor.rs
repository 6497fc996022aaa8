//! `kernel/config`: the actor that owns the settings database.
//!
//! The store is a plain struct ([`ConfigStore`]); this actor only serialises access to
//! it (one connection, one thread) and publishes `setting_changed` on the bus after
//! each committed write. It runs on the blocking arbiter: SQLite calls never stall
//! the actors that share the system thread.

use std::collections::BTreeMap;

use actix::prelude::*;
use serde_json::{Value, json};

use super::error::ConfigError;
use super::store::{ConfigStore, PluginDef, PluginMeta};
use crate::bus::{Event, EventBus};
use crate::host::{Handles, HostContext, KernelActor};

/// What the API shows instead of a secret value.
pub const MASKED: &str = "********";

/// The settings actor.
pub struct ConfigActor {
    store: ConfigStore,
    bus: EventBus,
}

impl ConfigActor {
    pub fn new(store: ConfigStore, bus: EventBus) -> Self {
        let me = Self { store, bus };
        me.apply_language();
        me.apply_input_cap();
        me
    }

    /// Sets the intake's text cap from `core.input_processing.text.max_bytes` (here,
    /// before a write is answered, like the language: see [`super::live`]).
    fn apply_input_cap(&self) {
        let key = super::keys::TEXT_MAX_BYTES;
        let bytes = self.store.get(key.name()).ok().flatten().and_then(|v| key.decode(&v));
        super::live::set_max_text_bytes(bytes.unwrap_or(super::live::DEFAULT_MAX_TEXT_BYTES));
    }

    /// Sets the message catalog's language from `core.agent.language` (here, before
    /// the write is answered, so that a text rendered after a settings write already
    /// uses the new language).
    fn apply_language(&self) {
        let key = super::keys::AGENT_LANGUAGE;
        let code = self.store.get(key.name()).ok().flatten().and_then(|v| key.decode(&v));
        let lang = code.as_deref().and_then(crate::i18n::Lang::parse).unwrap_or_default();
        if lang != crate::i18n::language() {
            tracing::info!(language = %lang, "message language set ({})", key.name());
        }
        crate::i18n::set_language(lang);
    }

    fn is_secret(&self, key: &str) -> bool {
        self.store.is_secret(key)
    }

    /// `value` as displays may see it: a non-empty secret becomes [`MASKED`]; in a
    /// secret map (`core.security.secrets`) every value does, the names stay visible.
    fn mask(&self, key: &str, value: Value) -> Value {
        if !self.is_secret(key) {
            return value;
        }
        match value {
            Value::String(s) if !s.is_empty() => json!(MASKED),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, _)| (k, json!(MASKED))).collect()),
            other => other,
        }
    }

    /// Every setting, with secret values masked (non-empty ones only, so an operator
    /// can still see that a key is unset).
    pub fn masked_all(&self) -> Result<BTreeMap<String, Value>, ConfigError> {
        let all = self.store.all()?;
        Ok(all.into_iter().map(|(k, v)| (k.clone(), self.mask(&k, v))).collect())
    }
}

impl KernelActor for ConfigActor {
    const KIND: &'static str = "config";

    fn stopped(&mut self, _: &mut HostContext<Self>) {
        // Fold the WAL back into the main file so a copy of config.db is complete.
        if let Err(e) = self.store.checkpoint() {
            tracing::warn!("settings checkpoint at shutdown failed: {e}");
        }
    }
}

/// All settings (secrets masked).
#[derive(Message)]
#[rtype(result = "Result<BTreeMap<String, Value>, ConfigError>")]
pub struct GetSettings;

/// One setting's current value (unmasked: for kernel code, not for display).
#[derive(Message)]
#[rtype(result = "Result<Option<Value>, ConfigError>")]
pub struct GetSetting(pub String);

/// One setting's current value as displays may see it (secrets masked): what a
/// plugin reading another namespace gets.
#[derive(Message)]
#[rtype(result = "Result<Option<Value>, ConfigError>")]
pub struct GetMaskedSetting(pub String);

/// A plugin declares one of its settings: default (stored only if the key is absent),
/// description and whether it is a secret.
#[derive(Message)]
#[rtype(result = "Result<bool, ConfigError>")]
pub struct RegisterPluginDef {
    pub plugin: String,
    pub key: String,
    pub default: Value,
    pub meta: PluginMeta,
}

/// The core setting definitions (type, default, description, secret flag), in table
/// order: what the settings page builds its forms from.
#[derive(Message)]
#[rtype(result = "Vec<super::defs::SettingDef>")]
pub struct GetDefs;

impl Handles<GetDefs> for ConfigActor {
    type Reply = actix::MessageResult<crate::host::Envelope<GetDefs>>;
    fn handle(&mut self, _: GetDefs, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.store.defs().to_vec())
    }
}

/// The settings a plugin declared (since this daemon started).
#[derive(Message)]
#[rtype(result = "Vec<PluginDef>")]
pub struct GetPluginDefs(pub String);

/// All settings, secrets included: for kernel code (LLM sources need their keys),
/// never for display.
#[derive(Message)]
#[rtype(result = "Result<BTreeMap<String, Value>, ConfigError>")]
pub struct GetRawSettings;

/// A snapshot of every setting, secrets included, for typed reads
/// ([`super::settings::AgentConfig::read`], …); kernel code only, never for display.
#[derive(Message)]
#[rtype(result = "Result<super::settings::Settings, ConfigError>")]
pub struct ReadSettings;

/// Marks a plugin disabled (`true`) or enabled (`false`), persistently.
#[derive(Message)]
#[rtype(result = "Result<(), ConfigError>")]
pub struct SetPluginDisabled {
    pub name: String,
    pub disabled: bool,
}

/// The names of the disabled plugins.
#[derive(Message)]
#[rtype(result = "Result<Vec<String>, ConfigError>")]
pub struct DisabledPlugins;

/// Who changed a setting, as the history records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Author {
    /// The owner, through the HTTP API or the WebUI.
    Owner,
    /// The owner, through the CLI socket (`waiter`'s `/set`).
    Cli,
    /// A plugin, through its settings capability.
    Plugin(String),
    /// The model, through an owner-only tool (`llm_source_use`).
    Model,
    /// The daemon itself (benchmarks, set-up).
    Kernel,
    /// The owner undoing history entry `id`.
    Revert(i64),
}

impl Author {
    /// The history's spelling: `owner`, `cli`, `plugin:<name>`, `model`, `kernel`,
    /// `revert:<id>`.
    pub fn label(&self) -> String {
        match self {
            Self::Owner => "owner".into(),
            Self::Cli => "cli".into(),
            Self::Plugin(p) => format!("plugin:{p}"),
            Self::Model => "model".into(),
            Self::Kernel => "kernel".into(),
            Self::Revert(id) => format!("revert:{id}"),
        }
    }
}

/// Sets several settings at once, all or nothing; `null` deletes. Each real change is
/// recorded in the history with its author.
#[derive(Message)]
#[rtype(result = "Result<Vec<super::store::Change>, ConfigError>")]
pub struct UpdateSettings(pub BTreeMap<String, Value>, pub Author);

/// The settings history, newest first (`key` alone, or every key).
#[derive(Message)]
#[rtype(result = "Result<Vec<super::store::HistoryEntry>, ConfigError>")]
pub struct GetHistory {
    pub key: Option<String>,
    pub limit: usize,
}

/// Undoes history entry `id` (its key set back to the value before it), or every
/// change after `id`'s moment when `since` (going back to a point in time).
#[derive(Message)]
#[rtype(result = "Result<Vec<super::store::Change>, ConfigError>")]
pub enum Revert {
    /// One change.
    Change(i64),
    /// Every change after this moment (Unix ms), newest undone last.
    Since(i64),
}

impl Handles<GetSettings> for ConfigActor {
    type Reply = Result<BTreeMap<String, Value>, ConfigError>;
    fn handle(&mut self, _: GetSettings, _: &mut HostContext<Self>) -> Self::Reply {
        self.masked_all()
    }
}

impl Handles<GetMaskedSetting> for ConfigActor {
    type Reply = Result<Option<Value>, ConfigError>;
    fn handle(&mut self, GetMaskedSetting(key): GetMaskedSetting, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.get(&key)?.map(|v| self.mask(&key, v)))
    }
}

impl Handles<RegisterPluginDef> for ConfigActor {
    type Reply = Result<bool, ConfigError>;
    fn handle(&mut self, msg: RegisterPluginDef, _: &mut HostContext<Self>) -> Self::Reply {
        let key = format!("{}{}.{}", super::defs::PLUGIN_PREFIX, msg.plugin, msg.key);
        let before = self.store.get(&key)?;
        let inserted = self.store.register_plugin_def(&msg.plugin, &msg.key, msg.default)?;
        self.store.describe_plugin_setting(&msg.plugin, &msg.key, msg.meta);
        let after = self.store.get(&key)?;
        tracing::info!(%key, inserted, "plugin setting declared");
        if before != after {
            let shown = after.map(|v| self.mask(&key, v)).unwrap_or(Value::Null);
            self.bus.publish(Event::SettingChanged {
                key,
                value: shown,
                reset: false,
            });
        }
        Ok(inserted)
    }
}

impl Handles<GetPluginDefs> for ConfigActor {
    type Reply = actix::MessageResult<crate::host::Envelope<GetPluginDefs>>;
    fn handle(&mut self, GetPluginDefs(plugin): GetPluginDefs, _: &mut HostContext<Self>) -> Self::Reply {
        actix::MessageResult(self.store.plugin_defs(&plugin))
    }
}

impl Handles<GetRawSettings> for ConfigActor {
    type Reply = Result<BTreeMap<String, Value>, ConfigError>;
    fn handle(&mut self, _: GetRawSettings, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.all()
    }
}

impl Handles<ReadSettings> for ConfigActor {
    type Reply = Result<super::settings::Settings, ConfigError>;
    fn handle(&mut self, _: ReadSettings, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.snapshot()
    }
}

impl Handles<SetPluginDisabled> for ConfigActor {
    type Reply = Result<(), ConfigError>;
    fn handle(&mut self, msg: SetPluginDisabled, _: &mut HostContext<Self>) -> Self::Reply {
        if msg.disabled {
            self.store.disable_plugin(&msg.name, "operator")?;
        } else {
            self.store.enable_plugin(&msg.name)?;
        }
        Ok(())
    }
}

impl Handles<DisabledPlugins> for ConfigActor {
    type Reply = Result<Vec<String>, ConfigError>;
    fn handle(&mut self, _: DisabledPlugins, _: &mut HostContext<Self>) -> Self::Reply {
        Ok(self.store.disabled_plugins()?.into_iter().map(|d| d.name).collect())
    }
}

impl Handles<GetSetting> for ConfigActor {
    type Reply = Result<Option<Value>, ConfigError>;
    fn handle(&mut self, GetSetting(key): GetSetting, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.get(&key)
    }
}

impl Handles<GetHistory> for ConfigActor {
    type Reply = Result<Vec<super::store::HistoryEntry>, ConfigError>;
    fn handle(&mut self, m: GetHistory, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.history(m.key.as_deref(), m.limit)
    }
}

impl Handles<Revert> for ConfigActor {
    type Reply = Result<Vec<super::store::Change>, ConfigError>;
    fn handle(&mut self, m: Revert, ctx: &mut HostContext<Self>) -> Self::Reply {
        let (entries, id) = match m {
            Revert::Change(id) => (
                vec![self.store.history_entry(id)?.ok_or(ConfigError::NoSuchChange { id })?],
                id,
            ),
            Revert::Since(at_ms) => (self.store.history_since(at_ms)?, 0),
        };
        // Per key, the value before the earliest change undone; secrets cannot be.
        let mut back: BTreeMap<String, Value> = BTreeMap::new();
        for e in &entries {
            if e.secret {
                return Err(ConfigError::SecretNotKept { key: e.key.clone() });
            }
            back.entry(e.key.clone())
                .or_insert_with(|| e.old.clone().unwrap_or(Value::Null));
        }
        let by = Author::Revert(entries.first().map_or(id, |e| e.id));
        self.handle(UpdateSettings(back, by), ctx)
    }
}

impl Handles<UpdateSettings> for ConfigActor {
    type Reply = Result<Vec<super::store::Change>, ConfigError>;
    fn handle(&mut self, UpdateSettings(map, by): UpdateSettings, _: &mut HostContext<Self>) -> Self::Reply {
        let changes = self.store.set_many_by(map, &by.label())?;
        let changes: Vec<_> = changes.into_iter().filter(|c| !c.is_noop()).collect();
        if changes.iter().any(|c| super::keys::AGENT_LANGUAGE.is(&c.key)) {
            self.apply_language();
        }
        if changes.iter().any(|c| super::keys::TEXT_MAX_BYTES.is(&c.key)) {
            self.apply_input_cap();
        }
        for c in &changes {
            let shown = if c.secret {
                json!(MASKED)
            } else {
                c.new.clone().unwrap_or(Value::Null)
            };
            tracing::info!(key = %c.key, value = %shown, "setting changed");
            self.bus.publish(Event::SettingChanged {
                key: c.key.clone(),
                value: shown,
                reset: c.reset,
            });
        }
        Ok(changes)
    }
}
