//! `kernel/config`: the actor that owns the settings database.
//!
//! The store is a plain struct ([`ConfigStore`]); this actor only serialises access to
//! it (one connection, one thread) and publishes `setting_changed` on the bus after
//! each committed write. It runs on the blocking arbiter: SQLite calls never stall
//! the actors that share the system thread.

use std::collections::BTreeMap;

use actix::prelude::*;
use serde_json::{Value, json};

use super::{ConfigError, ConfigStore, lookup};
use crate::bus::{EventBus, kinds};
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
        Self { store, bus }
    }

    fn is_secret(&self, key: &str) -> bool {
        lookup(self.store.defs(), key).is_ok_and(|info| info.secret())
    }

    /// Every setting, with secret values masked (non-empty ones only, so an operator
    /// can still see that a key is unset).
    pub fn masked_all(&self) -> Result<BTreeMap<String, Value>, ConfigError> {
        let mut all = self.store.all()?;
        for (k, v) in all.iter_mut() {
            if self.is_secret(k) && v.as_str().is_some_and(|s| !s.is_empty()) {
                *v = json!(MASKED);
            }
        }
        Ok(all)
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

/// All settings, secrets included: for kernel code (LLM sources need their keys),
/// never for display.
#[derive(Message)]
#[rtype(result = "Result<BTreeMap<String, Value>, ConfigError>")]
pub struct GetRawSettings;

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

/// Sets several settings at once, all or nothing; `null` deletes.
#[derive(Message)]
#[rtype(result = "Result<Vec<super::Change>, ConfigError>")]
pub struct UpdateSettings(pub BTreeMap<String, Value>);

impl Handles<GetSettings> for ConfigActor {
    type Reply = Result<BTreeMap<String, Value>, ConfigError>;
    fn handle(&mut self, _: GetSettings, _: &mut HostContext<Self>) -> Self::Reply {
        self.masked_all()
    }
}

impl Handles<GetRawSettings> for ConfigActor {
    type Reply = Result<BTreeMap<String, Value>, ConfigError>;
    fn handle(&mut self, _: GetRawSettings, _: &mut HostContext<Self>) -> Self::Reply {
        self.store.all()
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

impl Handles<UpdateSettings> for ConfigActor {
    type Reply = Result<Vec<super::Change>, ConfigError>;
    fn handle(&mut self, UpdateSettings(map): UpdateSettings, _: &mut HostContext<Self>) -> Self::Reply {
        let changes = self.store.set_many(map)?;
        let changes: Vec<_> = changes.into_iter().filter(|c| !c.is_noop()).collect();
        for c in &changes {
            let shown = if c.secret {
                json!(MASKED)
            } else {
                c.new.clone().unwrap_or(Value::Null)
            };
            tracing::info!(key = %c.key, value = %shown, "setting changed");
            self.bus.publish(
                kinds::SETTING_CHANGED,
                json!({"key": c.key, "value": shown, "reset": c.reset}),
            );
        }
        Ok(changes)
    }
}
