//! Principals: who an input speaks for, and so which tools its turn may use.
//!
//! The owner drives the daemon through the API, the WebUI and the CLI socket (all
//! behind the owner's token or the 0600 socket), and the kernel speaks for the owner
//! (heartbeats, replays). A channel plugin — a chat bridge that anyone can message — is
//! different: it names, per input, one of the **profiles** its manifest declares
//! (`"profiles": {"owner": "owner", "guest": "guest"}`: profile → trust), because only
//! the plugin knows which account wrote. An undeclared profile is an error returned to
//! the plugin, never a silent fallback to some default; a plugin that declares no
//! profiles injects as a guest.
//!
//! A guest's turn is refused the owner-only tools (`core.security.owner_only_tools`):
//! the ones that touch the machine, the plugins or what the agent remembers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How far an input is trusted (the manifest's word for it, so profiles decode once).
pub use homeagent_plugin_protocol::manifest::Trust;

/// Who an input speaks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// `owner`, `<plugin>.<profile>`, or `plugin:<plugin>` for a plugin without profiles.
    pub name: String,
    pub trust: Trust,
}

impl Principal {
    /// The owner (API, WebUI, CLI socket, the kernel itself).
    pub fn owner() -> Self {
        Self {
            name: "owner".into(),
            trust: Trust::Owner,
        }
    }

    /// A plugin's input without a profile (its manifest declares none).
    pub fn plugin_guest(plugin: &str) -> Self {
        Self {
            name: format!("plugin:{plugin}"),
            trust: Trust::Guest,
        }
    }

    pub fn is_owner(&self) -> bool {
        self.trust == Trust::Owner
    }

    /// The principal of an input injected by `plugin`, which declares `profiles` and
    /// asked for `profile`.
    pub fn for_plugin(
        plugin: &str,
        profiles: &BTreeMap<String, Trust>,
        profile: Option<&str>,
    ) -> Result<Self, ProfileError> {
        match (profile.map(str::trim).filter(|p| !p.is_empty()), profiles.is_empty()) {
            (None, true) => Ok(Self::plugin_guest(plugin)),
            (None, false) => Err(ProfileError::Missing {
                plugin: plugin.to_owned(),
                declared: names(profiles),
            }),
            (Some(p), _) => match profiles.get(p) {
                Some(trust) => Ok(Self {
                    name: format!("{plugin}.{p}"),
                    trust: *trust,
                }),
                None => Err(ProfileError::Undeclared {
                    plugin: plugin.to_owned(),
                    profile: p.to_owned(),
                    declared: names(profiles),
                }),
            },
        }
    }
}

fn names(profiles: &BTreeMap<String, Trust>) -> String {
    if profiles.is_empty() {
        "none".into()
    } else {
        profiles.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Why a plugin's input was refused at the door.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "security profile `{profile}` is not declared by plugin `{plugin}` (declared: {declared}); add it to \"profiles\" in plugin.json or pick a declared one"
    )]
    Undeclared {
        plugin: String,
        profile: String,
        declared: String,
    },
    #[error(
        "plugin `{plugin}` declares security profiles ({declared}) but this input names none; pass `profile` with every injection"
    )]
    Missing { plugin: String, declared: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_must_be_declared_and_picked() {
        let declared = BTreeMap::from([("owner".to_owned(), Trust::Owner), ("guest".to_owned(), Trust::Guest)]);
        let p = Principal::for_plugin("qq", &declared, Some("owner")).unwrap();
        assert_eq!((p.name.as_str(), p.trust), ("qq.owner", Trust::Owner));
        assert_eq!(
            Principal::for_plugin("qq", &declared, Some("guest")).unwrap().trust,
            Trust::Guest
        );
        let e = Principal::for_plugin("qq", &declared, Some("admin")).unwrap_err();
        assert!(matches!(e, ProfileError::Undeclared { .. }));
        assert!(e.to_string().contains("declared: guest, owner"), "{e}");
        assert!(matches!(
            Principal::for_plugin("qq", &declared, None),
            Err(ProfileError::Missing { .. })
        ));
        let none = BTreeMap::new();
        assert_eq!(
            Principal::for_plugin("echo", &none, None).unwrap(),
            Principal::plugin_guest("echo")
        );
        assert!(
            Principal::for_plugin("echo", &none, Some("owner")).is_err(),
            "no implicit profiles"
        );
    }
}
