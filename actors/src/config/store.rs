//! [`ConfigStore`]: the SQLite-backed settings store.
//!
//! The store is owned by exactly one actor (a rusqlite connection is `Send` but not
//! `Sync`), so its methods take `&mut self` for writes and need no locking. Every write
//! is validated against the definitions before anything is touched, and committed
//! before the method returns.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use rusqlite_migration::{M, Migrations};
use serde_json::{Value, json};

use super::defs::{self, KeyInfo, LLM_PREFIX, PLUGIN_PREFIX, SettingDef, core_defs, describe_json, is_valid_name};
use super::duration::parse_duration;
use super::error::ConfigError;

/// File name of the LLM section snapshot inside the data directory.
pub const LLM_SNAPSHOT_FILE: &str = "config-llm-snapshot.json";

/// Version of the snapshot file layout, so a later release can read older snapshots.
const SNAPSHOT_FORMAT: u64 = 1;

/// Schema migrations, in order. Append new files; never edit a released one
/// (rusqlite_migration tracks the applied count in `PRAGMA user_version`).
const MIGRATION_LIST: &[M<'static>] = &[
    M::up(include_str!("../../../migrations/config/0001_init.sql")),
    M::up(include_str!("../../../migrations/config/0002_history.sql")),
];
const MIGRATIONS: Migrations<'static> = Migrations::from_slice(MIGRATION_LIST);

/// The settings database's migrations (for [`crate::schema`]).
pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::from_slice(MIGRATION_LIST)
}

/// The effect of one write, so that the caller can publish a `setting_changed` event.
///
/// `old` and `new` are *effective* values, i.e. what [`ConfigStore::get`] returned
/// before and returns after, including the fallback to the default.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The key as written (`plugin.<name>.<key>` for plugin settings).
    pub key: String,
    /// Effective value before the write.
    pub old: Option<Value>,
    /// Effective value after the write.
    pub new: Option<Value>,
    /// The stored value was deleted (a `null` write); `new` is the default, if any.
    pub reset: bool,
    /// The setting holds a secret (an API key): publish the event without the values.
    pub secret: bool,
}

impl Change {
    /// The effective value did not change (subscribers need not react).
    pub fn is_noop(&self) -> bool {
        self.old == self.new
    }
}

/// One recorded settings change (`GET /api/v1/settings/history`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HistoryEntry {
    pub id: i64,
    pub at_ms: i64,
    pub key: String,
    /// The value in force before (`None`: a secret, whose values are not kept, or none).
    pub old: Option<Value>,
    pub new: Option<Value>,
    pub secret: bool,
    /// Who: `owner`, `cli`, `plugin:<name>`, `model`, `revert:<id>`, `kernel`.
    pub author: String,
}

fn history_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<HistoryEntry> {
    let json = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
    Ok(HistoryEntry {
        id: r.get(0)?,
        at_ms: r.get(1)?,
        key: r.get(2)?,
        old: json(r.get(3)?),
        new: json(r.get(4)?),
        secret: r.get(5)?,
        author: r.get(6)?,
    })
}

/// What a plugin declared about one of its settings besides the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginMeta {
    /// One line for the settings page.
    pub description: String,
    /// Hide the value from displays and from other plugins (the plugin itself reads it).
    pub secret: bool,
}

/// A plugin setting's declaration, as listed by [`ConfigStore::plugin_defs`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PluginDef {
    /// The key inside the plugin's namespace.
    pub key: String,
    pub default: Value,
    pub description: String,
    pub secret: bool,
}

/// A plugin the user switched off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisabledPlugin {
    /// The plugin's name.
    pub name: String,
    /// When it was disabled, Unix seconds.
    pub disabled_at: i64,
    /// Who disabled it (user name, "webui", "supervisor" after repeated crashes, ...).
    pub disabled_by: String,
}

/// Where a write goes.
#[derive(Debug, Clone)]
enum Target {
    /// The `config` table, under the key itself.
    Core,
    /// The plugin's own table, under the key inside the plugin's namespace.
    Plugin { plugin: String, key: String },
}

/// A validated write waiting for its transaction.
struct Planned {
    key: String,
    target: Target,
    /// Normalised value; `Null` deletes.
    value: Value,
    secret: bool,
}

/// The configuration registry's storage: core settings in `config`, each plugin's
/// settings in its own table, defaults from [`core_defs`].
pub struct ConfigStore {
    /// The only connection to the database; owned, never shared across threads.
    conn: Connection,
    /// Known core settings: validation rules and the defaults reads fall back to.
    defs: Vec<SettingDef>,
    /// Defaults plugins registered in this process, keyed by (plugin, key), so that a
    /// deleted plugin setting falls back to its default like a core one does. Plugins
    /// register again at every start, so this need not be persisted.
    plugin_defaults: HashMap<(String, String), Value>,
    /// What plugins said about their settings when registering them (description,
    /// secret), keyed like `plugin_defaults`; in memory for the same reason.
    plugin_meta: HashMap<(String, String), PluginMeta>,
    /// Where path defaults point and where the LLM snapshot is written.
    data_dir: PathBuf,
}

impl std::fmt::Debug for ConfigStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigStore")
            .field("path", &self.conn.path())
            .field("data_dir", &self.data_dir)
            .field("defs", &self.defs.len())
            .finish_non_exhaustive()
    }
}

impl ConfigStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to
    /// date. An empty `path` opens an in-memory database, as the reference does.
    ///
    /// Does not seed: call [`seed_defaults`](Self::seed_defaults) afterwards.
    pub fn open(path: &Path, data_dir: &Path) -> Result<Self, ConfigError> {
        if path.as_os_str().is_empty() {
            return Self::open_in_memory(data_dir);
        }
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            fs::create_dir_all(parent).map_err(|source| ConfigError::Io {
                action: "create directory",
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        Self::init(conn, data_dir, true)
    }

    /// The core settings stored in the database at `path`, read without writing: no
    /// migration, no seeding (a key not stored reads as its default). `None` when it
    /// cannot be read. For command-line questions about a data dir that a daemon may be
    /// using, or that the upgrade gate has not looked at yet (`open` would migrate it
    /// without the snapshot the gate takes first).
    pub fn peek(path: &Path) -> Option<super::settings::Settings> {
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
        read_table(&conn, "config").ok().map(super::settings::Settings::new)
    }

    /// Opens a private in-memory database (tests, and runs that must not persist).
    /// The LLM snapshot is still written to `data_dir`.
    pub fn open_in_memory(data_dir: &Path) -> Result<Self, ConfigError> {
        let conn = Connection::open_in_memory()?;
        Self::init(conn, data_dir, false)
    }

    fn init(mut conn: Connection, data_dir: &Path, file_backed: bool) -> Result<Self, ConfigError> {
        // Another process (a backup tool, a second daemon by mistake) may hold a lock
        // briefly; wait instead of failing the write.
        conn.busy_timeout(Duration::from_secs(5))?;
        if file_backed {
            let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                tracing::warn!(%mode, "config database could not switch to WAL journaling");
            }
        }
        // FULL rather than NORMAL: in WAL mode NORMAL may lose the last commits on power
        // loss. Settings writes are rare, and a value the UI reported as saved must still
        // be there after a crash, so the extra fsync per commit is worth it.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", true)?;
        // Replaced values are zeroed, not left in free pages: a secret rewritten sealed
        // leaves no plain copy behind.
        conn.pragma_update(None, "secure_delete", true)?;
        MIGRATIONS.to_latest(&mut conn)?;
        Ok(Self {
            conn,
            defs: core_defs(data_dir),
            plugin_defaults: HashMap::new(),
            plugin_meta: HashMap::new(),
            data_dir: data_dir.to_path_buf(),
        })
    }

    /// The known core settings (for the settings page).
    pub fn defs(&self) -> &[SettingDef] {
        &self.defs
    }

    /// The data directory the defaults and the LLM snapshot refer to.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Inserts every definition's default whose key is absent. Never overwrites a stored
    /// value, so it is safe at every start; returns how many keys were inserted (0 on
    /// a second call).
    pub fn seed_defaults(&mut self) -> Result<usize, ConfigError> {
        let now = unix_now();
        let tx = self.conn.transaction()?;
        let mut inserted = 0;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO config (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO NOTHING",
            )?;
            for def in &self.defs {
                inserted += stmt.execute(params![def.key, def.default.to_string(), now])?;
            }
        }
        // Settings an older version had and this one retired.
        for key in defs::RETIRED_KEYS {
            if tx.execute("DELETE FROM config WHERE key = ?1", [key])? > 0 {
                tracing::info!(%key, "removed a setting this version no longer has");
            }
        }
        // A default an older version stored, still untouched: the current one replaces it.
        for (key, old) in defs::SUPERSEDED_DEFAULTS {
            let Some(def) = self.defs.iter().find(|d| d.key == *key) else {
                continue;
            };
            let n = tx.execute(
                "UPDATE config SET value = ?1, updated_at = ?2 WHERE key = ?3 AND value = ?4",
                params![
                    def.default.to_string(),
                    now,
                    key,
                    Value::String((*old).to_owned()).to_string()
                ],
            )?;
            if n > 0 {
                tracing::info!(%key, "replaced an older version's default that was never changed");
            }
        }
        tx.commit()?;
        if inserted > 0 {
            tracing::info!(inserted, "seeded default settings");
        }
        // Secrets written by an older version (or the defaults just seeded) are sealed.
        self.seal_core_secrets()?;
        Ok(inserted)
    }

    /// Declares a plugin setting with its default: creates the plugin's table if needed
    /// and inserts the default only if the key is absent. Returns whether it was
    /// inserted. The default is also remembered for reads after a delete.
    pub fn register_plugin_def(&mut self, plugin: &str, key: &str, default: Value) -> Result<bool, ConfigError> {
        let full_key = format!("{PLUGIN_PREFIX}{plugin}.{key}");
        let info = defs::lookup(&self.defs, &full_key)?;
        if default.is_null() {
            return Err(ConfigError::InvalidValue {
                key: full_key,
                expected: "a default other than null".to_owned(),
                example: "\"\"".to_owned(),
                got: "null".to_owned(),
            });
        }
        let default = defs::check_value(&info, &full_key, &default)?;
        let tx = self.conn.transaction()?;
        let table = ensure_plugin_table(&tx, plugin)?;
        let inserted = tx.execute(
            &format!(
                "INSERT INTO \"{table}\" (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO NOTHING"
            ),
            params![key, default.to_string(), unix_now()],
        )?;
        tx.commit()?;
        self.plugin_defaults
            .insert((plugin.to_owned(), key.to_owned()), default);
        Ok(inserted > 0)
    }

    /// Records a plugin setting's description and whether it is a secret (see
    /// [`PluginMeta`]); call after [`register_plugin_def`](Self::register_plugin_def).
    pub fn describe_plugin_setting(&mut self, plugin: &str, key: &str, meta: PluginMeta) {
        let secret = meta.secret;
        self.plugin_meta.insert((plugin.to_owned(), key.to_owned()), meta);
        if secret && let Err(e) = self.seal_stored(&format!("{PLUGIN_PREFIX}{plugin}.{key}")) {
            tracing::warn!(%plugin, %key, "cannot seal a stored secret: {e}");
        }
    }

    /// Seals `key`'s stored value if it is a secret still stored in plain text (written
    /// before sealing existed, or before its plugin declared it secret).
    fn seal_stored(&mut self, key: &str) -> Result<bool, ConfigError> {
        let info = defs::lookup(&self.defs, key)?;
        let (table, inner) = match &info {
            KeyInfo::Plugin { plugin, key: k } => match plugin_table(&self.conn, plugin)? {
                Some(t) => (t, (*k).to_owned()),
                None => return Ok(false),
            },
            _ => ("config".to_owned(), key.to_owned()),
        };
        let Some(text) = read_stored_text(&self.conn, &table, &inner)? else {
            return Ok(false);
        };
        let stored: Value = serde_json::from_str(&text).map_err(|source| ConfigError::Corrupt {
            key: key.to_owned(),
            source,
        })?;
        if super::seal::is_sealed(&stored) {
            return Ok(false);
        }
        let sealed = super::seal::seal(&inner, &stored)?;
        self.conn.execute(
            &format!("UPDATE \"{table}\" SET value = ?1 WHERE key = ?2"),
            params![sealed.to_string(), inner],
        )?;
        Ok(true)
    }

    /// Seals every core secret still stored in plain text (at each start; a no-op once
    /// done) and answers how many it sealed. With `secure_delete` on, the old text is
    /// zeroed in the file; a checkpoint moves it out of the WAL.
    pub fn seal_core_secrets(&mut self) -> Result<usize, ConfigError> {
        let keys: Vec<String> = read_raw_keys(&self.conn, "config")?
            .into_iter()
            .filter(|k| self.is_secret(k))
            .collect();
        let mut sealed = 0;
        for k in &keys {
            match self.seal_stored(k) {
                Ok(done) => sealed += usize::from(done),
                // No key on this machine: start anyway (a write of a secret will say
                // what to do); the values stay as they are.
                Err(ConfigError::Seal(e @ super::seal::SealError::NoKey(_))) => {
                    tracing::error!("secrets stay unsealed: {e}");
                    return Ok(0);
                }
                Err(e) => return Err(e),
            }
        }
        if sealed > 0 {
            tracing::info!(
                sealed,
                "sealed secret settings stored in plain text by an older version"
            );
            self.checkpoint()?;
        }
        Ok(sealed)
    }

    /// The settings `plugin` registered in this process, by key.
    pub fn plugin_defs(&self, plugin: &str) -> Vec<PluginDef> {
        let mut out: Vec<PluginDef> = self
            .plugin_defaults
            .iter()
            .filter(|((p, _), _)| p == plugin)
            .map(|((p, k), default)| {
                let meta = self
                    .plugin_meta
                    .get(&(p.clone(), k.clone()))
                    .cloned()
                    .unwrap_or_default();
                PluginDef {
                    key: k.clone(),
                    default: default.clone(),
                    description: meta.description,
                    secret: meta.secret,
                }
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Whether displays must hide `key`'s value: core secrets (API keys) and plugin
    /// settings registered as secret. Unknown keys are not secret.
    pub fn is_secret(&self, key: &str) -> bool {
        match defs::lookup(&self.defs, key) {
            Ok(KeyInfo::Plugin { plugin, key }) => self
                .plugin_meta
                .get(&(plugin.to_owned(), key.to_owned()))
                .is_some_and(|m| m.secret),
            Ok(info) => info.secret(),
            Err(_) => false,
        }
    }

    /// The effective value of `key`: the stored value, else the default (core
    /// definition or registered plugin default), else `None`. Unknown keys are an error
    /// (with a suggestion), so a typo in code is noticed.
    pub fn get(&self, key: &str) -> Result<Option<Value>, ConfigError> {
        let target = match defs::lookup(&self.defs, key)? {
            KeyInfo::Plugin { plugin, key: k } => Target::Plugin {
                plugin: plugin.to_owned(),
                key: k.to_owned(),
            },
            _ => Target::Core,
        };
        effective(&self.conn, &self.defs, &self.plugin_defaults, key, &target)
    }

    /// Every setting with its effective value: all core definitions (stored value or
    /// default), other stored core keys (LLM sources), and every plugin's settings as
    /// `plugin.<name>.<key>`.
    pub fn all(&self) -> Result<BTreeMap<String, Value>, ConfigError> {
        let mut out: BTreeMap<String, Value> = self
            .defs
            .iter()
            .map(|d| (d.key.to_owned(), d.default.clone()))
            .collect();
        out.extend(read_table(&self.conn, "config")?);
        let mut plugins: BTreeSet<String> = self.plugins()?.into_iter().collect();
        plugins.extend(self.plugin_defaults.keys().map(|(p, _)| p.clone()));
        for plugin in plugins {
            for (key, value) in self.plugin_settings(&plugin)? {
                out.insert(format!("{PLUGIN_PREFIX}{plugin}.{key}"), value);
            }
        }
        Ok(out)
    }

    /// Every effective value as one typed-readable snapshot (see
    /// [`super::settings::Settings`]): what subsystems read their typed groups from.
    pub fn snapshot(&self) -> Result<super::settings::Settings, ConfigError> {
        Ok(super::settings::Settings::new(self.all()?))
    }

    /// The names of plugins that have a settings table.
    pub fn plugins(&self) -> Result<Vec<String>, ConfigError> {
        let mut stmt = self.conn.prepare("SELECT plugin FROM plugin_tables ORDER BY plugin")?;
        let rows = stmt.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One plugin's settings (keys inside its namespace), defaults included.
    pub fn plugin_settings(&self, plugin: &str) -> Result<BTreeMap<String, Value>, ConfigError> {
        let mut out: BTreeMap<String, Value> = self
            .plugin_defaults
            .iter()
            .filter(|((p, _), _)| p == plugin)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        if let Some(table) = plugin_table(&self.conn, plugin)? {
            out.extend(read_table(&self.conn, &table)?);
        }
        Ok(out)
    }

    /// Validates and writes one setting; `Value::Null` deletes it (reads then return the
    /// default). Committed before returning.
    pub fn set(&mut self, key: &str, value: Value) -> Result<Change, ConfigError> {
        let mut changes = self.set_many([(key.to_owned(), value)])?;
        changes
            .pop()
            .ok_or_else(|| ConfigError::Missing { key: key.to_owned() })
    }

    /// Validates every entry, then writes them all in one transaction: either all are
    /// stored or none is. The first invalid entry's error names its key. Changes are
    /// returned in input order.
    pub fn set_many<I, K>(&mut self, entries: I) -> Result<Vec<Change>, ConfigError>
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        self.write_many(entries, None)
    }

    /// [`ConfigStore::set_many`], recording each real change in the history with its
    /// author (`owner`, `cli`, `plugin:<name>`, `model`, …), in the same transaction.
    pub fn set_many_by<I, K>(&mut self, entries: I, author: &str) -> Result<Vec<Change>, ConfigError>
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        self.write_many(entries, Some(author))
    }

    /// The history, newest first: every change of `key` (or of any key), at most `limit`.
    pub fn history(&self, key: Option<&str>, limit: usize) -> Result<Vec<HistoryEntry>, ConfigError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, at_ms, key, old, new, secret, author FROM history
             WHERE (?1 IS NULL OR key = ?1) ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![key, limit as i64], history_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One history entry.
    pub fn history_entry(&self, id: i64) -> Result<Option<HistoryEntry>, ConfigError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, at_ms, key, old, new, secret, author FROM history WHERE id = ?1")?;
        let mut rows = stmt.query_map([id], history_row)?;
        Ok(rows.next().transpose()?)
    }

    /// The entries after `at_ms`, oldest first (what going back to that moment undoes).
    pub fn history_since(&self, at_ms: i64) -> Result<Vec<HistoryEntry>, ConfigError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, at_ms, key, old, new, secret, author FROM history WHERE at_ms > ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([at_ms], history_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn write_many<I, K>(&mut self, entries: I, author: Option<&str>) -> Result<Vec<Change>, ConfigError>
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        let mut plan = Vec::new();
        for (key, value) in entries {
            let key = key.into();
            plan.push(self.plan_write(key, &value)?);
        }
        if plan.is_empty() {
            return Ok(Vec::new());
        }
        if plan.iter().any(|p| p.key.starts_with(LLM_PREFIX)) {
            self.snapshot_llm()?;
        }

        let now = unix_now();
        let tx = self.conn.transaction()?;
        let mut changes = Vec::with_capacity(plan.len());
        for p in plan {
            let old = effective(&tx, &self.defs, &self.plugin_defaults, &p.key, &p.target)?;
            write(&tx, &p.target, &p.key, &p.value, p.secret, now)?;
            let new = effective(&tx, &self.defs, &self.plugin_defaults, &p.key, &p.target)?;
            let change = Change {
                reset: p.value.is_null(),
                key: p.key,
                old,
                new,
                secret: p.secret,
            };
            if let Some(author) = author.filter(|_| !change.is_noop()) {
                // A secret's values stay out of the history (they would outlive a rotation).
                let text = |v: &Option<Value>| v.as_ref().filter(|_| !change.secret).map(Value::to_string);
                tx.execute(
                    "INSERT INTO history (at_ms, key, old, new, secret, author) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        crate::clock::now_ms(),
                        change.key,
                        text(&change.old),
                        text(&change.new),
                        change.secret,
                        author
                    ],
                )?;
            }
            changes.push(change);
        }
        tx.commit()?;
        Ok(changes)
    }

    fn plan_write(&self, key: String, value: &Value) -> Result<Planned, ConfigError> {
        let info = defs::lookup(&self.defs, &key)?;
        let value = if value.is_null() {
            Value::Null
        } else {
            defs::check_value(&info, &key, value)?
        };
        let target = match info {
            KeyInfo::Plugin { plugin, key: k } => Target::Plugin {
                plugin: plugin.to_owned(),
                key: k.to_owned(),
            },
            _ => Target::Core,
        };
        let secret = self.is_secret(&key);
        Ok(Planned {
            key,
            target,
            value,
            secret,
        })
    }

    fn require(&self, key: &str) -> Result<Value, ConfigError> {
        self.get(key)?
            .ok_or_else(|| ConfigError::Missing { key: key.to_owned() })
    }

    /// A duration setting (stored as a string with units).
    pub fn get_duration(&self, key: &str) -> Result<Duration, ConfigError> {
        let value = self.require(key)?;
        let expected = "a duration string such as \"30s\"";
        match value.as_str() {
            Some(s) => {
                parse_duration(s).map_err(|e| wrong_type(key, expected, format!("{} ({e})", describe_json(&value))))
            }
            None => Err(wrong_type(key, expected, describe_json(&value))),
        }
    }

    /// A non-negative integer setting.
    pub fn get_u64(&self, key: &str) -> Result<u64, ConfigError> {
        let value = self.require(key)?;
        value
            .as_u64()
            .ok_or_else(|| wrong_type(key, "a non-negative integer", describe_json(&value)))
    }

    /// An integer setting.
    pub fn get_i64(&self, key: &str) -> Result<i64, ConfigError> {
        let value = self.require(key)?;
        value
            .as_i64()
            .ok_or_else(|| wrong_type(key, "an integer", describe_json(&value)))
    }

    /// A number setting.
    pub fn get_f64(&self, key: &str) -> Result<f64, ConfigError> {
        let value = self.require(key)?;
        value
            .as_f64()
            .ok_or_else(|| wrong_type(key, "a number", describe_json(&value)))
    }

    /// A string setting.
    pub fn get_string(&self, key: &str) -> Result<String, ConfigError> {
        let value = self.require(key)?;
        match value {
            Value::String(s) => Ok(s),
            other => Err(wrong_type(key, "a string", describe_json(&other))),
        }
    }

    /// A boolean setting.
    pub fn get_bool(&self, key: &str) -> Result<bool, ConfigError> {
        let value = self.require(key)?;
        value
            .as_bool()
            .ok_or_else(|| wrong_type(key, "true or false", describe_json(&value)))
    }

    /// Marks a plugin as disabled; returns false if it already was.
    pub fn disable_plugin(&mut self, name: &str, disabled_by: &str) -> Result<bool, ConfigError> {
        check_plugin_name(name)?;
        let n = self.conn.execute(
            "INSERT INTO disabled_plugins (name, disabled_at, disabled_by) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO NOTHING",
            params![name, unix_now(), disabled_by],
        )?;
        Ok(n > 0)
    }

    /// Re-enables a plugin; returns false if it was not disabled.
    pub fn enable_plugin(&mut self, name: &str) -> Result<bool, ConfigError> {
        let n = self
            .conn
            .execute("DELETE FROM disabled_plugins WHERE name = ?1", [name])?;
        Ok(n > 0)
    }

    /// Whether a plugin is disabled.
    pub fn is_plugin_disabled(&self, name: &str) -> Result<bool, ConfigError> {
        Ok(self
            .conn
            .query_row("SELECT 1 FROM disabled_plugins WHERE name = ?1", [name], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// All disabled plugins, by name.
    pub fn disabled_plugins(&self) -> Result<Vec<DisabledPlugin>, ConfigError> {
        let mut stmt = self
            .conn
            .prepare("SELECT name, disabled_at, disabled_by FROM disabled_plugins ORDER BY name")?;
        let rows = stmt.query_map([], |row| {
            Ok(DisabledPlugin {
                name: row.get(0)?,
                disabled_at: row.get(1)?,
                disabled_by: row.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Folds the WAL back into the database file and truncates it. Called at shutdown
    /// so that the data directory holds one self-contained file.
    pub fn checkpoint(&self) -> Result<(), ConfigError> {
        let (busy, log, done): (i64, i64, i64) = self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
        if busy != 0 {
            tracing::warn!(log, done, "config WAL checkpoint incomplete: database busy");
        } else {
            tracing::debug!(log, done, "config WAL checkpointed");
        }
        Ok(())
    }

    /// Where the LLM section snapshot is kept.
    pub fn llm_snapshot_path(&self) -> PathBuf {
        self.data_dir.join(LLM_SNAPSHOT_FILE)
    }

    /// Saves the stored `core.llm.*` section to the snapshot file (mode 0600: it holds
    /// API keys), atomically. Done automatically before every `core.llm.*` write.
    pub fn snapshot_llm(&self) -> Result<PathBuf, ConfigError> {
        // Secrets (API keys) stay out: a snapshot must not keep a key the owner just
        // replaced. A restore leaves the current keys as they are.
        let settings: BTreeMap<String, Value> = read_table(&self.conn, "config")?
            .into_iter()
            .filter(|(k, _)| k.starts_with(LLM_PREFIX) && !self.is_secret(k))
            .collect();
        let doc = json!({
            "format": SNAPSHOT_FORMAT,
            "taken_at": unix_now(),
            "settings": settings,
        });
        let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_else(|_| doc.to_string().into_bytes());
        let path = self.llm_snapshot_path();
        write_private_atomic(&path, &bytes)?;
        Ok(path)
    }

    /// Replaces the stored `core.llm.*` section with the snapshot: keys in the snapshot
    /// are written, other stored LLM keys are deleted (back to their defaults). All in
    /// one transaction, after validating every value. Keys this version no longer knows
    /// are skipped with a warning. Returns only the changes that altered a value. Does
    /// not take a new snapshot, so restoring twice gives the same result.
    pub fn restore_llm_snapshot(&mut self) -> Result<Vec<Change>, ConfigError> {
        let path = self.llm_snapshot_path();
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(ConfigError::NoSnapshot { path });
            }
            Err(source) => {
                return Err(ConfigError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        let bad = |reason: String| ConfigError::BadSnapshot {
            path: path.clone(),
            reason,
        };
        let doc: Value = serde_json::from_str(&text).map_err(|e| bad(format!("it is not valid JSON ({e})")))?;
        let settings = doc
            .get("settings")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("it has no `settings` object".to_owned()))?;

        let mut wanted: BTreeMap<String, (Value, bool)> = BTreeMap::new();
        for (key, value) in settings {
            if !key.starts_with(LLM_PREFIX) {
                return Err(bad(format!("`{key}` is not a `{LLM_PREFIX}*` setting")));
            }
            match defs::lookup(&self.defs, key) {
                Ok(info) => {
                    // An older snapshot may hold keys; they are not restored.
                    if value.is_null() || info.secret() {
                        continue;
                    }
                    let v = defs::check_value(&info, key, value).map_err(|e| bad(e.to_string()))?;
                    wanted.insert(key.clone(), (v, info.secret()));
                }
                Err(ConfigError::UnknownKey { .. } | ConfigError::InvalidKey { .. }) => {
                    tracing::warn!(%key, "skipping unknown setting in LLM snapshot");
                }
                Err(e) => return Err(e),
            }
        }

        let now = unix_now();
        let tx = self.conn.transaction()?;
        let current: BTreeSet<String> = read_table(&tx, "config")?
            .into_keys()
            .filter(|k| k.starts_with(LLM_PREFIX) && !defs::lookup(&self.defs, k).is_ok_and(|i| i.secret()))
            .collect();
        let keys: BTreeSet<String> = current.into_iter().chain(wanted.keys().cloned()).collect();
        let mut changes = Vec::new();
        for key in keys {
            let old = effective(&tx, &self.defs, &self.plugin_defaults, &key, &Target::Core)?;
            let (value, secret) = match wanted.get(&key) {
                Some((v, secret)) => (v.clone(), *secret),
                None => (Value::Null, defs::lookup(&self.defs, &key).map_or(true, |i| i.secret())),
            };
            write(&tx, &Target::Core, &key, &value, secret, now)?;
            let new = effective(&tx, &self.defs, &self.plugin_defaults, &key, &Target::Core)?;
            if old != new {
                changes.push(Change {
                    reset: value.is_null(),
                    key,
                    old,
                    new,
                    secret,
                });
            }
        }
        tx.commit()?;
        tracing::info!(changed = changes.len(), "restored LLM settings from snapshot");
        Ok(changes)
    }
}

fn wrong_type(key: &str, expected: &str, got: String) -> ConfigError {
    ConfigError::WrongType {
        key: key.to_owned(),
        expected: expected.to_owned(),
        got,
    }
}

fn check_plugin_name(name: &str) -> Result<(), ConfigError> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(ConfigError::InvalidKey {
            key: name.to_owned(),
            reason: "plugin names use only a-z, 0-9, `_` and `-` (1 to 64 characters)".to_owned(),
        })
    }
}

/// Unix seconds on the kernel's clock: a setting's history follows a virtual clock
/// like every other timestamp the kernel writes.
fn unix_now() -> i64 {
    crate::clock::now_ms() / 1000
}

fn parse_stored(key: &str, text: &str) -> Result<Value, ConfigError> {
    let stored: Value = serde_json::from_str(text).map_err(|source| ConfigError::Corrupt {
        key: key.to_owned(),
        source,
    })?;
    Ok(super::seal::open(key, stored)?)
}

/// All rows of a settings table (`config` or a plugin table). `table` is never user
/// text: it is `config` or a name from `plugin_tables`, made of `[a-z0-9_]`.
fn read_table(conn: &Connection, table: &str) -> Result<BTreeMap<String, Value>, ConfigError> {
    let mut stmt = conn.prepare(&format!("SELECT key, value FROM \"{table}\""))?;
    let rows = stmt.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?;
    let mut out = BTreeMap::new();
    for row in rows {
        let (key, text) = row?;
        let value = parse_stored(&key, &text)?;
        out.insert(key, value);
    }
    Ok(out)
}

/// The keys of a settings table.
fn read_raw_keys(conn: &Connection, table: &str) -> Result<Vec<String>, ConfigError> {
    let mut stmt = conn.prepare(&format!("SELECT key FROM \"{table}\""))?;
    let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// One row's value as stored (JSON text, sealed if a secret).
fn read_stored_text(conn: &Connection, table: &str, key: &str) -> Result<Option<String>, ConfigError> {
    Ok(conn
        .query_row(&format!("SELECT value FROM \"{table}\" WHERE key = ?1"), [key], |row| {
            row.get(0)
        })
        .optional()?)
}

fn read_row(conn: &Connection, table: &str, key: &str) -> Result<Option<Value>, ConfigError> {
    read_stored_text(conn, table, key)?
        .map(|t| parse_stored(key, &t))
        .transpose()
}

/// The stored value, else the default.
fn effective(
    conn: &Connection,
    defs: &[SettingDef],
    plugin_defaults: &HashMap<(String, String), Value>,
    key: &str,
    target: &Target,
) -> Result<Option<Value>, ConfigError> {
    match target {
        Target::Core => Ok(match read_row(conn, "config", key)? {
            Some(v) => Some(v),
            None => defs.iter().find(|d| d.key == key).map(|d| d.default.clone()),
        }),
        Target::Plugin { plugin, key: k } => {
            let stored = match plugin_table(conn, plugin)? {
                Some(table) => read_row(conn, &table, k)?,
                None => None,
            };
            Ok(stored.or_else(|| plugin_defaults.get(&(plugin.clone(), k.clone())).cloned()))
        }
    }
}

/// Stores (or, for `Null`, deletes) one normalised value.
/// A secret value is sealed under its row's key ([`super::seal`]).
fn write(
    conn: &Connection,
    target: &Target,
    key: &str,
    value: &Value,
    secret: bool,
    now: i64,
) -> Result<(), ConfigError> {
    let (table, inner_key) = match target {
        Target::Core => ("config".to_owned(), key),
        Target::Plugin { plugin, key: k } => {
            if value.is_null() {
                match plugin_table(conn, plugin)? {
                    Some(table) => (table, k.as_str()),
                    // Nothing stored, nothing to delete; don't create a table for it.
                    None => return Ok(()),
                }
            } else {
                (ensure_plugin_table(conn, plugin)?, k.as_str())
            }
        }
    };
    if value.is_null() {
        conn.execute(&format!("DELETE FROM \"{table}\" WHERE key = ?1"), [inner_key])?;
    } else {
        conn.execute(
            &format!(
                "INSERT INTO \"{table}\" (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
            ),
            params![
                inner_key,
                if secret {
                    super::seal::seal(inner_key, value)?.to_string()
                } else {
                    value.to_string()
                },
                now
            ],
        )?;
    }
    Ok(())
}

/// Lower-case, and every character outside `[a-z0-9_]` replaced by `_`, so the result
/// is safe as an SQL identifier.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn plugin_table(conn: &Connection, plugin: &str) -> Result<Option<String>, ConfigError> {
    Ok(conn
        .query_row(
            "SELECT table_name FROM plugin_tables WHERE plugin = ?1",
            [plugin],
            |row| row.get(0),
        )
        .optional()?)
}

/// The plugin's table, created (and recorded in `plugin_tables`) on first use. If the
/// sanitised name is taken by another plugin, a numeric suffix keeps them apart.
fn ensure_plugin_table(conn: &Connection, plugin: &str) -> Result<String, ConfigError> {
    if let Some(table) = plugin_table(conn, plugin)? {
        return Ok(table);
    }
    let base = format!("config_{}", sanitize(plugin));
    let mut table = base.clone();
    let mut n = 2;
    loop {
        let taken = conn
            .query_row(
                "SELECT 1 FROM sqlite_schema WHERE name = ?1
                 UNION ALL SELECT 1 FROM plugin_tables WHERE table_name = ?1",
                [&table],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !taken {
            break;
        }
        table = format!("{base}_{n}");
        n += 1;
    }
    conn.execute(
        &format!(
            "CREATE TABLE \"{table}\" (
                key        TEXT    NOT NULL PRIMARY KEY,
                value      TEXT    NOT NULL CHECK (json_valid(value)),
                updated_at INTEGER NOT NULL
            ) STRICT"
        ),
        [],
    )?;
    conn.execute(
        "INSERT INTO plugin_tables (plugin, table_name, created_at) VALUES (?1, ?2, ?3)",
        params![plugin, table, unix_now()],
    )?;
    tracing::debug!(%plugin, %table, "created plugin settings table");
    Ok(table)
}

/// Writes `bytes` to `path` so that readers see either the old or the new file, never a
/// partial one, and so that only the owner can read it (it holds API keys).
fn write_private_atomic(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| ConfigError::Io {
            action,
            path: p,
            source,
        }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
    let file_name = path
        .file_name()
        .map_or_else(|| "snapshot".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{file_name}.tmp"));
    // A temp file left by a crash is recreated, so that the mode below applies.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io("remove", &tmp)(e)),
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp).map_err(io("create", &tmp))?;
    file.write_all(bytes).map_err(io("write", &tmp))?;
    file.sync_all().map_err(io("sync", &tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(io("rename into place", path))?;
    // Make the rename itself durable.
    #[cfg(unix)]
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> ConfigStore {
        ConfigStore::open(&dir.join("config.db"), dir).expect("open config store")
    }

    fn core_rows(store: &ConfigStore) -> BTreeMap<String, Value> {
        read_table(&store.conn, "config").unwrap()
    }

    #[test]
    fn opens_in_wal_mode_with_foreign_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mode: String = store.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = store.conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0)).unwrap();
        assert_eq!(fk, 1);
        let sync: i64 = store.conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
        assert_eq!(sync, 2, "synchronous=FULL");
    }

    /// Secrets are sealed in the file (also the ones an older version wrote in plain
    /// text, at the next start) and read back in clear.
    #[test]
    fn secrets_are_sealed_at_rest_and_old_plain_ones_at_the_next_start() {
        const KEY: &str = "sk-sealed-canary-123456";
        let dir = tempfile::tempdir().unwrap();
        let raw = |dir: &Path| {
            let mut bytes = std::fs::read(dir.join("config.db")).unwrap();
            bytes.extend(std::fs::read(dir.join("config.db-wal")).unwrap_or_default());
            String::from_utf8_lossy(&bytes).contains(KEY)
        };
        {
            let mut store = open(dir.path());
            store.seed_defaults().unwrap();
            store.set("core.llm.sources.main.api_key", json!(KEY)).unwrap();
            assert_eq!(store.get("core.llm.sources.main.api_key").unwrap(), Some(json!(KEY)));
            store.checkpoint().unwrap();
        }
        assert!(!raw(dir.path()), "the key is in the file in clear");
        // A value from before sealing existed.
        {
            let store = open(dir.path());
            store
                .conn
                .execute(
                    "UPDATE config SET value = ?1 WHERE key = 'core.llm.sources.main.api_key'",
                    [json!(KEY).to_string()],
                )
                .unwrap();
            store.checkpoint().unwrap();
        }
        assert!(raw(dir.path()));
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        assert_eq!(store.get("core.llm.sources.main.api_key").unwrap(), Some(json!(KEY)));
        drop(store);
        assert!(!raw(dir.path()), "sealed at the next start");
    }

    #[test]
    fn seeding_never_overwrites_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.set("core.llm.provider", json!("my-model")).unwrap();
        let n = store.seed_defaults().unwrap();
        assert_eq!(n, store.defs().len() - 1);
        assert_eq!(store.get("core.llm.provider").unwrap(), Some(json!("my-model")));
        assert_eq!(store.seed_defaults().unwrap(), 0, "second seed is a no-op");

        store.set("core.agent.max_tool_turns", json!(3)).unwrap();
        assert_eq!(store.seed_defaults().unwrap(), 0);
        assert_eq!(store.get_u64("core.agent.max_tool_turns").unwrap(), 3);
        assert_eq!(core_rows(&store).get("core.llm.max_tokens"), Some(&json!(4096)));
    }

    #[test]
    fn set_get_delete_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();

        let change = store.set("core.agent.personal_prompt", json!("be brief")).unwrap();
        assert_eq!(change.old, Some(json!("")));
        assert_eq!(change.new, Some(json!("be brief")));
        assert!(!change.reset && !change.is_noop() && !change.secret);
        assert_eq!(store.get_string("core.agent.personal_prompt").unwrap(), "be brief");

        // A source key that has no definition: absent, set, deleted.
        let key = "core.llm.sources.local.model";
        assert_eq!(store.get(key).unwrap(), None);
        store.set(key, json!("llama")).unwrap();
        assert_eq!(store.get(key).unwrap(), Some(json!("llama")));
        let change = store.set(key, Value::Null).unwrap();
        assert_eq!(change.old, Some(json!("llama")));
        assert_eq!(change.new, None);
        assert!(change.reset);
        assert_eq!(store.get(key).unwrap(), None);
        assert!(!core_rows(&store).contains_key(key));

        assert!(store.set("core.llm.api_key", json!("sk-1")).unwrap().secret);
    }

    #[test]
    fn null_deletes_and_get_falls_back_to_default() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        store.set("core.llm.max_tokens", json!(100)).unwrap();
        let change = store.set("core.llm.max_tokens", Value::Null).unwrap();
        assert!(change.reset);
        assert_eq!(change.old, Some(json!(100)));
        assert_eq!(change.new, Some(json!(4096)));
        assert!(!core_rows(&store).contains_key("core.llm.max_tokens"));
        assert_eq!(store.get_u64("core.llm.max_tokens").unwrap(), 4096);
        assert!(store.all().unwrap().contains_key("core.llm.max_tokens"));
        // Re-seeding brings the row back with the default.
        assert_eq!(store.seed_defaults().unwrap(), 1);
    }

    #[test]
    fn bad_type_is_rejected_with_reason_and_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        let err = store.set("core.llm.max_tokens", json!("lots")).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConfigError::InvalidValue { .. }), "{msg}");
        assert!(msg.contains("`core.llm.max_tokens`"), "{msg}");
        assert!(msg.contains("expected an integer"), "{msg}");
        assert!(msg.contains("the string \"lots\""), "{msg}");
        assert_eq!(store.get("core.llm.max_tokens").unwrap(), Some(json!(4096)));

        let err = store.set("core.llm.thinking_enabled", json!(1)).unwrap_err();
        assert!(err.to_string().contains("JSON boolean"), "{err}");
    }

    #[test]
    fn unknown_key_is_rejected_with_suggestion() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let err = store.set("core.llm.max_tokns", json!("x")).unwrap_err();
        assert!(matches!(err, ConfigError::UnknownKey { .. }));
        let msg = err.to_string();
        assert!(
            msg.starts_with("unknown setting `core.llm.max_tokns`; did you mean `core.llm.max_tokens`?"),
            "{msg}"
        );
        assert!(matches!(
            store.get("core.supervisor.max_restart"),
            Err(ConfigError::UnknownKey { .. })
        ));
        assert!(core_rows(&store).is_empty());
    }

    #[test]
    fn plugin_keys_are_namespaced() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        assert!(
            store
                .register_plugin_def("alpha", "api_key", json!("a-default"))
                .unwrap()
        );
        assert!(
            store
                .register_plugin_def("beta", "api_key", json!("b-default"))
                .unwrap()
        );
        store.set("plugin.alpha.api_key", json!("alpha-secret")).unwrap();

        assert_eq!(store.get("plugin.alpha.api_key").unwrap(), Some(json!("alpha-secret")));
        assert_eq!(store.get("plugin.beta.api_key").unwrap(), Some(json!("b-default")));

        // Nothing leaks into the core table.
        let core = core_rows(&store);
        assert!(
            core.keys().all(|k| !k.starts_with("plugin.") && k != "api_key"),
            "{core:?}"
        );
        assert!(
            !core
                .values()
                .any(|v| v == &json!("alpha-secret") || v == &json!("b-default"))
        );

        let all = store.all().unwrap();
        assert_eq!(all.get("plugin.alpha.api_key"), Some(&json!("alpha-secret")));
        assert_eq!(all.get("plugin.beta.api_key"), Some(&json!("b-default")));
        assert_eq!(store.plugins().unwrap(), vec!["alpha".to_owned(), "beta".to_owned()]);

        // Names that sanitise alike still get separate tables.
        store.set("plugin.my-plugin.k", json!(1)).unwrap();
        store.set("plugin.my_plugin.k", json!(2)).unwrap();
        assert_eq!(store.get("plugin.my-plugin.k").unwrap(), Some(json!(1)));
        assert_eq!(store.get("plugin.my_plugin.k").unwrap(), Some(json!(2)));
        assert_eq!(
            plugin_table(&store.conn, "my-plugin").unwrap().as_deref(),
            Some("config_my_plugin")
        );
        assert_eq!(
            plugin_table(&store.conn, "my_plugin").unwrap().as_deref(),
            Some("config_my_plugin_2")
        );

        // Dotted keys and structured values.
        store.set("plugin.alpha.ui.theme", json!({"dark": true})).unwrap();
        assert_eq!(
            store.plugin_settings("alpha").unwrap().get("ui.theme"),
            Some(&json!({"dark": true}))
        );
    }

    #[test]
    fn plugin_defaults_insert_if_absent_and_back_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.register_plugin_def("webui", "addr", json!(":8080")).unwrap();
        store.set("plugin.webui.addr", json!(":9000")).unwrap();
        assert!(!store.register_plugin_def("webui", "addr", json!(":7000")).unwrap());
        assert_eq!(store.get("plugin.webui.addr").unwrap(), Some(json!(":9000")));
        let change = store.set("plugin.webui.addr", Value::Null).unwrap();
        assert_eq!(change.new, Some(json!(":7000")), "latest registered default");
        assert!(store.register_plugin_def("webui", "addr", Value::Null).is_err());
        assert!(store.register_plugin_def("Bad Name", "addr", json!(1)).is_err());
        // Deleting a key of a plugin without a table creates nothing.
        store.set("plugin.ghost.k", Value::Null).unwrap();
        assert!(!store.plugins().unwrap().contains(&"ghost".to_owned()));
    }

    #[test]
    fn plugin_settings_can_be_described_and_secret() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        store.register_plugin_def("lamp", "token", json!("")).unwrap();
        store.describe_plugin_setting(
            "lamp",
            "token",
            PluginMeta {
                description: "bridge token".into(),
                secret: true,
            },
        );
        store.register_plugin_def("lamp", "color", json!("warm")).unwrap();
        assert!(store.is_secret("plugin.lamp.token") && !store.is_secret("plugin.lamp.color"));
        assert!(store.is_secret("core.llm.api_key") && !store.is_secret("core.llm.provider"));
        assert!(store.is_secret("core.llm.sources.x.api_key") && !store.is_secret("plugin.other.token"));
        assert!(!store.is_secret("no.such.key"));
        let change = store.set("plugin.lamp.token", json!("s3cret")).unwrap();
        assert!(
            change.secret,
            "a write of a secret plugin setting is flagged for masking"
        );
        let defs = store.plugin_defs("lamp");
        assert_eq!(
            defs.iter().map(|d| d.key.as_str()).collect::<Vec<_>>(),
            ["color", "token"]
        );
        assert_eq!((defs[1].description.as_str(), defs[1].secret), ("bridge token", true));
        assert_eq!(defs[0].default, json!("warm"));
        assert!(store.plugin_defs("other").is_empty());
    }

    #[test]
    fn set_many_is_all_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        let mut batch = BTreeMap::new();
        batch.insert("core.agent.max_tool_turns".to_owned(), json!(20));
        batch.insert("core.llm.temperature".to_owned(), json!("hot"));
        batch.insert("plugin.alpha.x".to_owned(), json!(1));
        let err = store.set_many(batch).unwrap_err();
        assert!(err.to_string().contains("`core.llm.temperature`"), "{err}");
        assert_eq!(store.get_u64("core.agent.max_tool_turns").unwrap(), 10);
        assert_eq!(store.get("plugin.alpha.x").unwrap(), None);
        assert!(store.plugins().unwrap().is_empty());

        let changes = store
            .set_many([
                ("core.agent.max_tool_turns", json!(20)),
                ("core.llm.temperature", json!(1.2)),
                ("plugin.alpha.x", json!(1)),
            ])
            .unwrap();
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].key, "core.agent.max_tool_turns");
        assert_eq!(store.get_f64("core.llm.temperature").unwrap(), 1.2);
        assert_eq!(store.get_i64("plugin.alpha.x").unwrap(), 1);
    }

    #[test]
    fn set_many_rolls_back_on_database_error() {
        // Validation passes but the transaction fails midway: nothing may remain.
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.set("plugin.alpha.x", json!(1)).unwrap();
        store
            .conn
            .execute_batch("CREATE TRIGGER no_beta BEFORE INSERT ON config_alpha WHEN NEW.key = 'y' BEGIN SELECT RAISE(ABORT, 'boom'); END;")
            .unwrap();
        let err = store
            .set_many([("core.agent.max_tool_turns", json!(20)), ("plugin.alpha.y", json!(2))])
            .unwrap_err();
        assert!(matches!(err, ConfigError::Database(_)), "{err}");
        assert!(!core_rows(&store).contains_key("core.agent.max_tool_turns"));
    }

    #[test]
    fn values_persist_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut store = open(dir.path());
            store.seed_defaults().unwrap();
            store.set("core.agent.distill_interval", json!("45m")).unwrap();
            store.set("plugin.alpha.token", json!("t")).unwrap();
            store.disable_plugin("beta", "test").unwrap();
            store.checkpoint().unwrap();
        }
        let store = open(dir.path());
        assert_eq!(
            store.get_duration("core.agent.distill_interval").unwrap(),
            Duration::from_secs(45 * 60)
        );
        assert_eq!(store.get_string("plugin.alpha.token").unwrap(), "t");
        assert!(store.is_plugin_disabled("beta").unwrap());
        assert_eq!(store.disabled_plugins().unwrap()[0].disabled_by, "test");
    }

    #[test]
    fn duration_keys_are_validated() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        assert_eq!(
            store.get_duration("core.supervisor.backoff_initial").unwrap(),
            Duration::from_millis(100)
        );
        assert_eq!(
            store.get_duration("core.agent.merge_interval").unwrap(),
            Duration::from_secs(7200)
        );
        store.set("core.supervisor.restart_window", json!("1.5m")).unwrap();
        assert_eq!(
            store.get_duration("core.supervisor.restart_window").unwrap(),
            Duration::from_secs(90)
        );
        for bad in [json!("45"), json!("-1s"), json!("3 parsecs"), json!(30), json!("0s")] {
            let err = store.set("core.supervisor.restart_window", bad.clone()).unwrap_err();
            assert!(matches!(err, ConfigError::InvalidValue { .. }), "{bad}: {err}");
        }
        let err = store.get_duration("core.llm.provider").unwrap_err();
        assert!(matches!(err, ConfigError::WrongType { .. }), "{err}");
        assert!(matches!(
            store.get_bool("core.llm.provider"),
            Err(ConfigError::WrongType { .. })
        ));
        assert!(!store.get_bool("core.llm.thinking_enabled").unwrap());
        assert!(matches!(
            store.get_string("core.llm.sources.nothing.model"),
            Err(ConfigError::Missing { .. })
        ));
    }

    #[test]
    fn llm_writes_snapshot_first_with_private_mode() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        let path = dir.path().join(LLM_SNAPSHOT_FILE);

        // Non-LLM writes don't snapshot.
        store.set("core.agent.max_tool_turns", json!(4)).unwrap();
        assert!(!path.exists());

        store.set("core.llm.provider", json!("broken-model")).unwrap();
        store.set("core.llm.sources.extra.model", json!("x")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // The snapshot holds the state before the last write.
        let doc: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["settings"]["core.llm.provider"], json!("broken-model"));
        assert!(doc["settings"].get("core.llm.sources.extra.model").is_none());
        assert!(doc["settings"].get("core.agent.max_tool_turns").is_none());

        // Restore undoes the last write only.
        let changes = store.restore_llm_snapshot().unwrap();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].key, "core.llm.sources.extra.model");
        assert!(changes[0].reset);
        assert_eq!(store.get("core.llm.sources.extra.model").unwrap(), None);
        assert_eq!(store.get_string("core.llm.provider").unwrap(), "broken-model");
        assert!(
            store.restore_llm_snapshot().unwrap().is_empty(),
            "restore is idempotent"
        );
        assert!(!dir.path().join(format!(".{LLM_SNAPSHOT_FILE}.tmp")).exists());

        // A replaced key never survives in the snapshot, and a restore keeps the new one.
        store
            .set("core.llm.sources.extra.api_key", json!("sk-OLD-CANARY"))
            .unwrap();
        store.set("core.llm.sources.extra.api_key", json!("sk-new")).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-OLD-CANARY") && !text.contains("sk-new"), "{text}");
        store.restore_llm_snapshot().unwrap();
        assert_eq!(store.get_string("core.llm.sources.extra.api_key").unwrap(), "sk-new");
    }

    #[test]
    fn restore_validates_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        assert!(matches!(
            store.restore_llm_snapshot(),
            Err(ConfigError::NoSnapshot { .. })
        ));
        let path = store.llm_snapshot_path();
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(
            store.restore_llm_snapshot(),
            Err(ConfigError::BadSnapshot { .. })
        ));
        fs::write(&path, r#"{"settings": {"core.llm.max_tokens": "many"}}"#).unwrap();
        let err = store.restore_llm_snapshot().unwrap_err();
        assert!(err.to_string().contains("core.llm.max_tokens"), "{err}");
        fs::write(&path, r#"{"settings": {"core.agent.max_tool_turns": 1}}"#).unwrap();
        assert!(matches!(
            store.restore_llm_snapshot(),
            Err(ConfigError::BadSnapshot { .. })
        ));
        fs::write(
            &path,
            r#"{"settings": {"core.llm.retired_key": 1, "core.llm.max_tokens": 99}}"#,
        )
        .unwrap();
        let changes = store.restore_llm_snapshot().unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(store.get_u64("core.llm.max_tokens").unwrap(), 99);
    }

    #[test]
    fn retired_settings_are_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        store
            .conn
            .execute(
                "INSERT INTO config (key, value, updated_at) VALUES ('core.llm.model', '\"m\"', 0)",
                [],
            )
            .unwrap();
        store.seed_defaults().unwrap();
        let left: i64 = store
            .conn
            .query_row("SELECT COUNT(*) FROM config WHERE key = 'core.llm.model'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(left, 0);
    }

    #[test]
    fn checkpoint_truncates_wal() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        store.seed_defaults().unwrap();
        store.checkpoint().unwrap();
        let wal = dir.path().join("config.db-wal");
        assert_eq!(fs::metadata(&wal).map(|m| m.len()).unwrap_or(0), 0);
    }

    #[test]
    fn in_memory_and_empty_path() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ConfigStore::open(Path::new(""), dir.path()).unwrap();
        assert!(store.seed_defaults().unwrap() > 0);
        store.checkpoint().unwrap();
        let mut store = ConfigStore::open_in_memory(dir.path()).unwrap();
        store.set("webui.listen_addr", json!("0.0.0.0:80")).unwrap();
        assert_eq!(store.get_string("webui.listen_addr").unwrap(), "0.0.0.0:80");
        assert_eq!(
            store.get_string("core.plugin.dir").unwrap(),
            dir.path().join("plugins").to_string_lossy()
        );
    }

    #[test]
    fn disabled_plugins_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        assert!(store.disable_plugin("mcp-bridge", "webui").unwrap());
        assert!(!store.disable_plugin("mcp-bridge", "webui").unwrap());
        assert!(store.is_plugin_disabled("mcp-bridge").unwrap());
        assert!(store.disable_plugin("Bad!", "x").is_err());
        assert!(store.enable_plugin("mcp-bridge").unwrap());
        assert!(!store.enable_plugin("mcp-bridge").unwrap());
        assert!(store.disabled_plugins().unwrap().is_empty());
    }

    #[test]
    fn types_can_cross_threads() {
        // The actor owns the store on its own arbiter and sends errors back in replies.
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<ConfigStore>();
        send_sync::<ConfigError>();
        send_sync::<Change>();
    }

    #[test]
    fn sanitize_makes_identifiers() {
        assert_eq!(sanitize("My-Plugin.v2"), "my_plugin_v2");
        assert_eq!(sanitize("ok_1"), "ok_1");
    }
}
