-- Configuration registry, schema version 1.
-- Values are JSON text (checked by json_valid) so that a setting keeps its type:
-- 4096 stays a number and "30m" a string. Timestamps are Unix seconds.

-- Core settings, flat dotted keys (core.*, webui.*).
CREATE TABLE config (
    key        TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL CHECK (json_valid(value)),
    updated_at INTEGER NOT NULL
) STRICT;

-- Plugins the user switched off; kept here so the choice survives restarts.
CREATE TABLE disabled_plugins (
    name        TEXT    NOT NULL PRIMARY KEY,
    disabled_at INTEGER NOT NULL,
    disabled_by TEXT    NOT NULL DEFAULT ''
) STRICT;

-- Which table holds each plugin's settings. Table names are derived from plugin names
-- (lower-cased, other characters replaced by '_'), and this mapping keeps two plugins
-- whose names sanitise alike (my-plugin, my_plugin) in separate tables. The per-plugin
-- tables themselves are created lazily by the store, with the same shape as `config`.
CREATE TABLE plugin_tables (
    plugin     TEXT    NOT NULL PRIMARY KEY,
    table_name TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
) STRICT;
