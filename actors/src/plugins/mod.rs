//! Plugins: every channel and outside capability lives outside the kernel.
//!
//! * [`conn`]: one plugin's stdio connection (NDJSON frames, call correlation);
//! * [`process`]: the actor around one subprocess plugin;
//! * [`clock`]: the subprocess plugins told the time of a virtual clock (`clock.set`);
//! * [`confine`]: what each subprocess plugin may touch, enforced by the kernel;
//! * [`set`]: discovery in `DATA/plugins` and the per-plugin supervisors;
//! * [`watch`]: hot reload when an entry file changes;
//! * [`package`]: `.hmap` package install (checked, unpacked, renamed into place);
//! * [`pack`]: `homed plugin pack`, a checked `.hmap` built from a plugin directory;
//! * [`manager`]: the built-in `pluginmgr` tools (list, enable, disable, reload,
//!   install, the LLM source switch) and `get_plugin_tools`.

pub mod clock;
pub mod confine;
pub mod conn;
pub mod lua;
pub mod manager;
pub mod pack;
pub mod package;
pub mod process;
pub mod services;
pub mod set;
pub mod skill;
pub mod watch;

/// The daemon's version as plugins see it: the handshake's `core_version`, and what a
/// manifest's `min_version` is compared with.
pub const CORE_VERSION: &str = env!("CARGO_PKG_VERSION");
