//! The handshake: the kernel's first request to a freshly spawned plugin.

use serde::{Deserialize, Serialize};

use crate::PROTOCOL_VERSION;
use crate::clock::ClockInfo;

/// Method name of the handshake request.
pub const METHOD: &str = "handshake";

/// Kernel → plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandshakeParams {
    pub protocol: u32,
    /// The daemon's version, for plugins that adapt to it.
    pub core_version: String,
    /// The name the kernel loaded the plugin under (from its manifest).
    pub plugin_name: String,
    /// The kernel's clock: its mode and its now (see [`crate::clock`]). Absent from a
    /// kernel older than the clock facility: the plugin then keeps the wall clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockInfo>,
}

/// Plugin → kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandshakeReply {
    pub protocol: u32,
    pub sdk_version: String,
    pub plugin_name: String,
    pub pid: u32,
    /// Optional protocol features the plugin implements: [`crate::clock::FEATURE`]
    /// (`"clock"`) when it follows the kernel's clock and answers `clock.set`.
    #[serde(default)]
    pub features: Vec<String>,
}

impl HandshakeReply {
    /// Whether the plugin declared `feature`.
    pub fn has(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }

    /// Refuses a reply in another protocol version, naming both versions.
    pub fn check(&self, expected_name: &str) -> Result<(), String> {
        if self.protocol != PROTOCOL_VERSION {
            return Err(format!(
                "plugin `{expected_name}` speaks protocol {} but this homed speaks {PROTOCOL_VERSION}; rebuild the plugin with a matching SDK",
                self.protocol
            ));
        }
        if self.plugin_name != expected_name {
            return Err(format!(
                "plugin answered the handshake as `{}` but its manifest names it `{expected_name}`; make them match",
                self.plugin_name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_and_name_are_checked() {
        let mut r = HandshakeReply {
            protocol: 1,
            sdk_version: "0.1".into(),
            plugin_name: "timer".into(),
            pid: 1,
            features: vec![],
        };
        assert!(r.check("timer").is_ok());
        assert!(!r.has(crate::clock::FEATURE));
        r.features.push("clock".into());
        assert!(r.has(crate::clock::FEATURE));
        assert!(r.check("other").unwrap_err().contains("manifest names it `other`"));
        r.protocol = 2;
        assert!(r.check("timer").unwrap_err().contains("protocol 2"));
    }
}
