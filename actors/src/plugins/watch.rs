//! `kernel/plugins/watcher`: hot reload. Every few seconds it hashes each running
//! plugin's entry file; when the content changed (a new build, an edited script), the
//! plugin is restarted through its supervisor.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::prelude::*;

use super::host::{PluginEntry, PluginSet, file_hash};
use crate::host::{Handles, HostContext, KernelActor};
use crate::registry::Registry;

/// The watcher.
pub struct PluginWatcher {
    plugins: Arc<PluginSet>,
    registry: Arc<Registry>,
    every: Duration,
}

impl PluginWatcher {
    pub fn new(plugins: Arc<PluginSet>, registry: Arc<Registry>, every: Duration) -> Self {
        Self {
            plugins,
            registry,
            every,
        }
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
        for entry in self.changed() {
            let registry = self.registry.clone();
            tracing::info!(plugin = %entry.name, "entry file changed: reloading the plugin");
            actix::spawn(async move {
                if let Err(e) = entry.restart(&registry).await {
                    tracing::warn!(plugin = %entry.name, "hot reload failed: {e}");
                }
            });
        }
    }
}
