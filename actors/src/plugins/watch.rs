//! `kernel/plugins/watcher`: hot reload. Every few seconds it hashes each running
//! plugin's entry file; when the content changed (a new build, an edited script), the
//! plugin is restarted through its supervisor. It also restarts a running subprocess
//! plugin whose confinement the settings changed (a sandbox root added or removed):
//! a running process can only be narrowed, so the new grants need a new process.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::prelude::*;

use super::confine::Confiner;
use super::set::{PluginEntry, PluginSet, file_hash};
use crate::host::{Handles, HostContext, KernelActor};
use crate::registry::Registry;

/// The watcher.
pub struct PluginWatcher {
    plugins: Arc<PluginSet>,
    registry: Arc<Registry>,
    every: Duration,
    confiner: Arc<Confiner>,
}

impl PluginWatcher {
    pub fn new(plugins: Arc<PluginSet>, registry: Arc<Registry>, every: Duration, confiner: Arc<Confiner>) -> Self {
        Self {
            plugins,
            registry,
            every,
            confiner,
        }
    }

    /// Restarts each of `entries` through its supervisor, saying `why` in the log.
    fn restart(&self, entries: Vec<Arc<PluginEntry>>, why: &'static str) {
        for entry in entries {
            let registry = self.registry.clone();
            tracing::info!(plugin = %entry.name, "{why}");
            actix::spawn(async move {
                if let Err(e) = entry.restart(&registry).await {
                    tracing::warn!(plugin = %entry.name, "restart failed ({why}): {e}");
                }
            });
        }
    }

    /// Lua plugins inside one call for longer than [`super::lua::CALL_DEADLINE`]: a call
    /// stuck where the instruction budget cannot reach (C code).
    fn wedged(&self) -> Vec<Arc<PluginEntry>> {
        let mut out = Vec::new();
        for e in self.plugins.list() {
            let mut busy = e.info.busy_since.lock();
            if busy.is_some_and(|t| t.elapsed() > super::lua::CALL_DEADLINE) {
                // Taken: one restart per stuck call. The abandoned thread stops at its
                // next instruction tick, once the C function it is in returns.
                *busy = None;
                if let Some(budget) = e.info.lua_budget.lock().as_ref() {
                    crate::llm::adapter::abort(budget);
                }
                out.push(e.clone());
            }
        }
        out
    }

    /// Running plugins whose grants differ from what the settings grant now.
    fn regranted(&self) -> Vec<Arc<PluginEntry>> {
        let mut out = Vec::new();
        for e in self.plugins.list() {
            let mut granted = e.info.grants.lock();
            let Some(old) = granted.as_ref() else { continue };
            if e.disabled.load(Ordering::SeqCst) || e.info.pid.lock().is_none() {
                continue;
            }
            let now = self.confiner.grants(&e.name, &e.dir);
            if *old != now {
                // Taken: one restart per change, whatever the restart's outcome.
                *granted = None;
                out.push(e.clone());
            }
        }
        out
    }

    /// Plugins whose entry file changed since they were (re)started.
    fn changed(&self) -> Vec<Arc<PluginEntry>> {
        let mut out = Vec::new();
        for e in self.plugins.list() {
            let Some(path) = &e.entry_path else { continue };
            if e.disabled.load(Ordering::SeqCst) {
                continue;
            }
            let now = file_hash(path);
            let mut known = e.entry_hash.lock();
            if known.is_some() && now.is_some() && *known != now {
                *known = now;
                drop(known);
                out.push(e);
            }
        }
        out
    }
}

/// One round of checks.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Check;

impl KernelActor for PluginWatcher {
    const KIND: &'static str = "plugin-watcher";

    fn started(&mut self, ctx: &mut HostContext<Self>) {
        ctx.run_interval(self.every, |host, ctx| host.notify(ctx, Check));
    }
}

impl Handles<Check> for PluginWatcher {
    type Reply = ();
    fn handle(&mut self, _: Check, _: &mut HostContext<Self>) {
        self.restart(self.changed(), "entry file changed: reloading the plugin");
        self.restart(
            self.wedged(),
            "a call has run past its deadline: restarting the plugin on a fresh thread",
        );
        self.restart(self.regranted(), "its confinement changed: restarting the plugin");
    }
}
