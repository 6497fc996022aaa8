//! The tool sandbox as both sides of the protocol see it: read roots, write roots, a
//! network switch and the daemon's own addresses.
//!
//! The kernel's firewall checks every path argument a tool declares
//! ([`crate::methods::PathArg`]) with [`SandboxInfo::check`] before the call leaves
//! the kernel, and rewrites it to the real (canonical) path it checked. It then hands
//! the same [`SandboxInfo`] to the plugin with the call (`args.__sandbox`, moved onto
//! [`crate::sdk::Call::sandbox`] by the SDK), and the plugin checks again right before
//! it opens anything: the path may have been swapped for a symlink in between
//! (time of check, time of use), and a plugin must never trust that it is only ever
//! called through the kernel. One implementation serves both checks, so they cannot
//! disagree.
//!
//! A path is allowed when, with every symlink resolved, it lies inside a root of the
//! right kind (write roots are readable too). `..` is refused outright, even when it
//! would stay inside: a path that needs it is a path a model was talked into. A path
//! that does not exist yet (a file to create) is resolved through its longest existing
//! ancestor, so a symlinked directory cannot smuggle a new file out either.

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The argument key under which the kernel passes the [`SandboxInfo`] with a call of
/// a tool that declared paths or network use. A key of that name sent by the model is
/// removed before anything else sees the arguments.
pub const SANDBOX_ARG: &str = "__sandbox";

/// What a tool wants to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// Why a path or a network use was refused. Each says what the owner can change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("no {0} roots are configured; the owner sets core.security.sandbox.{0}_roots")]
    NoRoots(&'static str),
    #[error("`{0}` contains `..`; give the path inside the sandbox without `..`")]
    Parent(String),
    #[error(
        "`{path}` is outside the {access} roots ({roots}); ask the owner to add a root in core.security.sandbox.{access}_roots"
    )]
    Outside {
        path: String,
        access: &'static str,
        roots: String,
    },
    #[error("`{0}` cannot be resolved: {1}")]
    Unresolvable(String, String),
    #[error("network access is switched off for tools (core.security.sandbox.network = false)")]
    Network,
    #[error("`{0}` is the daemon's own address; tools may not call the daemon's API (use the tools it offers instead)")]
    OwnAddress(SocketAddr),
}

/// The sandbox of one call: roots canonical (symlinks resolved) as the kernel holds
/// them, plus the network switch and the addresses the daemon serves on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    #[serde(default)]
    pub read_roots: Vec<PathBuf>,
    #[serde(default)]
    pub write_roots: Vec<PathBuf>,
    #[serde(default)]
    pub network: bool,
    /// The daemon's listen addresses: refused as destinations (SSRF against the API).
    #[serde(default)]
    pub own_addrs: Vec<SocketAddr>,
}

/// The path with every existing part's symlinks resolved; parts that do not exist yet
/// are appended as they are (they cannot be links).
pub fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let mut existing = path.to_owned();
    let mut missing = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(real) => {
                let mut out = real;
                for part in missing.iter().rev() {
                    out.push(part);
                }
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name().map(|n| n.to_owned()) else {
                    return Err(e);
                };
                missing.push(name);
                if !existing.pop() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

impl SandboxInfo {
    /// The directory relative paths start from: the first write root, else the first
    /// read root.
    pub fn workdir(&self) -> Option<&Path> {
        self.write_roots
            .first()
            .or(self.read_roots.first())
            .map(PathBuf::as_path)
    }

    /// The real path a tool may use for `access`, or why not.
    pub fn check(&self, path: &Path, access: Access) -> Result<PathBuf, SandboxError> {
        let shown = path.display().to_string();
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(SandboxError::Parent(shown));
        }
        let roots: Vec<&PathBuf> = match access {
            Access::Read => self.write_roots.iter().chain(&self.read_roots).collect(),
            Access::Write => self.write_roots.iter().collect(),
        };
        let Some(workdir) = self.workdir().filter(|_| !roots.is_empty()) else {
            return Err(SandboxError::NoRoots(access.as_str()));
        };
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            workdir.join(path)
        };
        let real = resolve(&absolute).map_err(|e| SandboxError::Unresolvable(shown.clone(), e.to_string()))?;
        if roots.iter().any(|r| real.starts_with(r)) {
            Ok(real)
        } else {
            Err(SandboxError::Outside {
                path: shown,
                access: access.as_str(),
                roots: roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }

    /// `Ok` when tools may use the network.
    pub fn check_network(&self) -> Result<(), SandboxError> {
        if self.network {
            Ok(())
        } else {
            Err(SandboxError::Network)
        }
    }

    /// Refuses `to` when it is one of the daemon's own addresses: the same port on the
    /// same IP, or on any loopback or unspecified address when the daemon listens on
    /// loopback or on all addresses (`::ffff:127.0.0.1` is 127.0.0.1).
    pub fn check_destination(&self, to: SocketAddr) -> Result<(), SandboxError> {
        let ip = to.ip().to_canonical();
        let own = self.own_addrs.iter().any(|own| {
            let own_ip = own.ip().to_canonical();
            own.port() == to.port()
                && (own_ip == ip
                    || ((own_ip.is_unspecified() || own_ip.is_loopback()) && (ip.is_loopback() || ip.is_unspecified())))
        });
        if own { Err(SandboxError::OwnAddress(to)) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_is_refused_on_every_spelling_of_its_address() {
        let sb = SandboxInfo {
            own_addrs: vec!["127.0.0.1:8080".parse().unwrap()],
            network: true,
            ..SandboxInfo::default()
        };
        for to in [
            "127.0.0.1:8080",
            "127.0.0.2:8080",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:8080",
            "0.0.0.0:8080",
        ] {
            assert!(
                matches!(
                    sb.check_destination(to.parse().unwrap()),
                    Err(SandboxError::OwnAddress(_))
                ),
                "{to}"
            );
        }
        assert!(sb.check_destination("127.0.0.1:8081".parse().unwrap()).is_ok());
        assert!(sb.check_destination("10.0.0.1:8080".parse().unwrap()).is_ok());
    }

    #[test]
    fn the_info_round_trips_and_an_empty_one_refuses_everything() {
        let sb = SandboxInfo::default();
        assert_eq!(
            sb.check(Path::new("/tmp"), Access::Read).unwrap_err(),
            SandboxError::NoRoots("read")
        );
        assert_eq!(sb.check_network().unwrap_err(), SandboxError::Network);
        let v = serde_json::to_value(SandboxInfo {
            write_roots: vec!["/w".into()],
            ..SandboxInfo::default()
        })
        .unwrap();
        let back: SandboxInfo = serde_json::from_value(v).unwrap();
        assert_eq!(back.workdir(), Some(Path::new("/w")));
    }
}
