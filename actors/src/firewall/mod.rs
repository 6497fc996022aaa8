//! The security firewall: the kernel's one place for "may this happen?".
//!
//! It sits between the agent and everything that touches the machine or the network.
//! Each part is a plain value with a pure decision function, unit-tested without
//! actors or IO beyond the file system it guards:
//!
//! * [`policy`]: which tools may run at all (allow and deny lists; deny wins);
//! * [`sandbox`]: which paths a tool may read or write (roots, `..` and symlink escapes
//!   rejected) and whether it may use the network.
//!
//! Every refusal is a [`Decision`] with a reason the model can act on; the caller logs
//! it with `tracing` and keeps it in a [`DecisionLog`] the API shows.

pub mod policy;
pub mod sandbox;

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;

pub use policy::ToolPolicy;
pub use sandbox::{Access, Sandbox, SandboxError};

/// One decision of the firewall, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// `tool_policy` or `sandbox`.
    pub gate: &'static str,
    /// The tool the decision was about.
    pub tool: String,
    pub allowed: bool,
    /// Why (for a refusal: what to change to allow it). Never the tool's arguments.
    pub reason: String,
}

/// The most recent decisions (refusals and the allowed calls of guarded tools), newest
/// last, bounded so a chatty agent cannot grow it.
#[derive(Debug, Clone, Default)]
pub struct DecisionLog {
    inner: Arc<Mutex<VecDeque<Decision>>>,
}

impl DecisionLog {
    /// Decisions kept.
    pub const CAPACITY: usize = 256;

    /// Records `d` (and logs it: refusals at `warn`, the rest at `debug`).
    pub fn record(&self, d: Decision) {
        if d.allowed {
            tracing::debug!(gate = d.gate, tool = %d.tool, "firewall: allowed");
        } else {
            tracing::warn!(gate = d.gate, tool = %d.tool, reason = %d.reason, "firewall: refused");
        }
        let mut q = self.inner.lock();
        if q.len() == Self::CAPACITY {
            q.pop_front();
        }
        q.push_back(d);
    }

    /// The kept decisions, oldest first.
    pub fn recent(&self) -> Vec<Decision> {
        self.inner.lock().iter().cloned().collect()
    }
}

/// The firewall the agent consults: the current policy and sandbox (replaced when the
/// owner's `core.security.*` settings change) and the decisions taken.
#[derive(Debug, Default)]
pub struct Firewall {
    policy: parking_lot::RwLock<ToolPolicy>,
    sandbox: parking_lot::RwLock<Sandbox>,
    pub log: DecisionLog,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Firewall {
    /// Replaces the policy and the sandbox.
    pub fn configure(&self, policy: ToolPolicy, sandbox: Sandbox) {
        tracing::info!(?policy, ?sandbox, "firewall configured");
        *self.policy.write() = policy;
        *self.sandbox.write() = sandbox;
    }

    /// The current sandbox (for tools that touch the machine).
    pub fn sandbox(&self) -> Sandbox {
        self.sandbox.read().clone()
    }

    /// Whether `tool` may run at all; a refusal is logged and kept.
    pub fn check_tool(&self, tool: &str) -> Result<(), String> {
        let verdict = self.policy.read().check(tool);
        if let Err(reason) = &verdict {
            self.log.record(Decision {
                at_ms: now_ms(),
                gate: "tool_policy",
                tool: tool.to_owned(),
                allowed: false,
                reason: reason.clone(),
            });
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_bounded_and_ordered() {
        let log = DecisionLog::default();
        for i in 0..(DecisionLog::CAPACITY + 3) {
            log.record(Decision {
                at_ms: i as u64,
                gate: "tool_policy",
                tool: format!("t{i}"),
                allowed: i % 2 == 0,
                reason: String::new(),
            });
        }
        let r = log.recent();
        assert_eq!(r.len(), DecisionLog::CAPACITY);
        assert_eq!(r[0].at_ms, 3);
        assert_eq!(r.last().unwrap().tool, format!("t{}", DecisionLog::CAPACITY + 2));
    }

    #[test]
    fn refusals_are_kept() {
        let fw = Firewall::default();
        assert!(fw.check_tool("anything").is_ok(), "the default policy allows");
        fw.configure(ToolPolicy::new("", "cmd_*"), Sandbox::default());
        assert!(fw.check_tool("cmd_run").is_err());
        let r = fw.log.recent();
        assert_eq!((r.len(), r[0].tool.as_str(), r[0].allowed), (1, "cmd_run", false));
    }
}
