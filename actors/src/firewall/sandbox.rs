//! The sandbox of tools that touch the machine: read roots, write roots, a network switch.
//!
//! A path is allowed when, with every symlink resolved, it lies inside a root of the
//! right kind (write roots are readable too). `..` is refused outright, even when it
//! would stay inside: a path that needs it is a path a model was talked into. A path
//! that does not exist yet (a file to create) is resolved through its longest existing
//! ancestor, so a symlinked directory cannot smuggle a new file out either.
//!
//! What it cannot see: a link swapped in after the check (the tools open what was
//! checked, and the owner's roots should not be writable by others).

use std::path::{Component, Path, PathBuf};

/// What a tool wants to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    fn as_str(self) -> &'static str {
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
}

/// The roots, canonical (symlinks resolved) at construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    read_roots: Vec<PathBuf>,
    write_roots: Vec<PathBuf>,
    network: bool,
}

/// The path with every existing part's symlinks resolved; parts that do not exist yet
/// are appended as they are (they cannot be links).
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
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

impl Sandbox {
    /// A sandbox over these roots. Roots that do not exist are skipped with a warning
    /// (a typo must not widen anything: it only removes a root).
    pub fn new(read_roots: &[PathBuf], write_roots: &[PathBuf], network: bool) -> Self {
        let canon = |roots: &[PathBuf]| -> Vec<PathBuf> {
            roots
                .iter()
                .filter_map(|r| match r.canonicalize() {
                    Ok(c) => Some(c),
                    Err(e) => {
                        tracing::warn!(root = %r.display(), "sandbox root skipped: {e}");
                        None
                    }
                })
                .collect()
        };
        Self {
            read_roots: canon(read_roots),
            write_roots: canon(write_roots),
            network,
        }
    }

    /// The read-only roots (canonical).
    pub fn read_roots(&self) -> &[PathBuf] {
        &self.read_roots
    }

    /// The read-write roots (canonical).
    pub fn write_roots(&self) -> &[PathBuf] {
        &self.write_roots
    }

    /// Whether tools may use the network.
    pub fn network(&self) -> bool {
        self.network
    }

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
        if roots.is_empty() {
            return Err(SandboxError::NoRoots(access.as_str()));
        }
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            self.workdir().expect("roots exist").join(path)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Sandbox, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (work, docs, secret) = (
            dir.path().join("work"),
            dir.path().join("docs"),
            dir.path().join("secret"),
        );
        for d in [&work, &docs, &secret] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(secret.join("key.txt"), "sk-secret").unwrap();
        std::fs::write(docs.join("a.md"), "a").unwrap();
        // Escapes planted inside the roots.
        symlink(secret.join("key.txt"), work.join("innocent.txt")).unwrap();
        symlink(&secret, work.join("linkdir")).unwrap();
        let sb = Sandbox::new(std::slice::from_ref(&docs), std::slice::from_ref(&work), false);
        (dir, sb, work, docs)
    }

    #[test]
    fn paths_inside_the_roots_pass_with_their_real_location() {
        let (_d, sb, work, docs) = setup();
        let w = work.canonicalize().unwrap();
        assert_eq!(
            sb.check(Path::new("notes/new.md"), Access::Write).unwrap(),
            w.join("notes/new.md")
        );
        assert_eq!(sb.check(&work.join("x.txt"), Access::Write).unwrap(), w.join("x.txt"));
        assert!(sb.check(&docs.join("a.md"), Access::Read).is_ok());
        assert!(sb.check(Path::new("./x"), Access::Read).is_ok(), "`.` is harmless");
        assert_eq!(sb.workdir(), Some(w.as_path()));
    }

    #[test]
    fn escapes_are_refused() {
        let (_d, sb, work, docs) = setup();
        let cases = [
            (work.join("../secret/key.txt"), Access::Read, "contains `..`"),
            (
                PathBuf::from("notes/../../secret/key.txt"),
                Access::Write,
                "contains `..`",
            ),
            (PathBuf::from("/etc/passwd"), Access::Read, "outside the read roots"),
            (work.join("innocent.txt"), Access::Read, "outside"),
            (work.join("linkdir/key.txt"), Access::Read, "outside"),
            (work.join("linkdir/new-file"), Access::Write, "outside the write roots"),
            (docs.join("a.md"), Access::Write, "outside the write roots"),
        ];
        for (path, access, why) in cases {
            let e = sb.check(&path, access).unwrap_err().to_string();
            assert!(e.contains(why), "{} ({access:?}): {e}", path.display());
        }
        assert!(matches!(sb.check_network(), Err(SandboxError::Network)));
    }

    #[test]
    fn no_roots_means_nothing_and_missing_roots_widen_nothing() {
        let sb = Sandbox::new(&[PathBuf::from("/no/such/root")], &[], true);
        assert_eq!(
            sb.check(Path::new("/tmp"), Access::Read).unwrap_err(),
            SandboxError::NoRoots("read")
        );
        assert_eq!(
            sb.check(Path::new("x"), Access::Write).unwrap_err(),
            SandboxError::NoRoots("write")
        );
        assert!(sb.check_network().is_ok());
    }
}
