//! The sandbox of tools that touch the machine: read roots, write roots, a network switch.
//!
//! A path is allowed when, with every symlink resolved, it lies inside a root of the
//! right kind (write roots are readable too). `..` is refused outright, even when it
//! would stay inside: a path that needs it is a path a model was talked into. A path
//! that does not exist yet (a file to create) is resolved through its longest existing
//! ancestor, so a symlinked directory cannot smuggle a new file out either.
//!
//! What it cannot see: a link swapped in after the check. That is why the plugin
//! checks again, with the same code, on the path it is about to open (see
//! `homeagent_plugin_protocol::sandbox`), and opens files without following links.

use std::path::{Path, PathBuf};

pub use homeagent_plugin_protocol::methods::PathArg;
pub use homeagent_plugin_protocol::sandbox::{Access, SANDBOX_ARG, SandboxError, SandboxInfo};

/// The roots, canonical (symlinks resolved) at construction. The checks themselves
/// live in the protocol crate ([`SandboxInfo`]) so the kernel's check and the plugin's
/// re-check are one implementation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    info: SandboxInfo,
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
            info: SandboxInfo {
                read_roots: canon(read_roots),
                write_roots: canon(write_roots),
                network,
                own_addrs: Vec::new(),
            },
        }
    }

    /// The read-only roots (canonical).
    pub fn read_roots(&self) -> &[PathBuf] {
        &self.info.read_roots
    }

    /// The read-write roots (canonical).
    pub fn write_roots(&self) -> &[PathBuf] {
        &self.info.write_roots
    }

    /// Whether tools may use the network.
    pub fn network(&self) -> bool {
        self.info.network
    }

    /// The directory relative paths start from: the first write root, else the first
    /// read root.
    pub fn workdir(&self) -> Option<&Path> {
        self.info.workdir()
    }

    /// The real path a tool may use for `access`, or why not.
    pub fn check(&self, path: &Path, access: Access) -> Result<PathBuf, SandboxError> {
        self.info.check(path, access)
    }

    /// `Ok` when tools may use the network.
    pub fn check_network(&self) -> Result<(), SandboxError> {
        self.info.check_network()
    }

    /// What a plugin receives with a call of a sandboxed tool: these roots and the
    /// daemon's own addresses (which its network helpers must refuse).
    pub fn info(&self, own_addrs: Vec<std::net::SocketAddr>) -> SandboxInfo {
        SandboxInfo {
            own_addrs,
            ..self.info.clone()
        }
    }
}

/// Guards one call of a sandboxed tool: the network switch (for a tool that declared
/// network use), then every declared path argument that is present, rewritten to the
/// real path the check resolved (so the tool opens what was checked, never a relative
/// path it might resolve differently). Then the sandbox itself goes along in
/// [`SANDBOX_ARG`] for the plugin's own check. `Err` is the refusal the model reads.
pub fn guard_call(
    sb: &Sandbox,
    own_addrs: Vec<std::net::SocketAddr>,
    paths: &[PathArg],
    network: bool,
    args: &mut serde_json::Value,
) -> Result<(), GuardRefusal> {
    if network {
        sb.check_network()?;
    }
    if !paths.is_empty() {
        let Some(obj) = args.as_object_mut() else {
            return Err(GuardRefusal::NotAnObject);
        };
        for p in paths {
            let Some(v) = obj.get_mut(&p.arg) else { continue };
            let arg = || p.arg.clone();
            let Some(raw) = v.as_str() else {
                return Err(GuardRefusal::NotAPath { arg: arg() });
            };
            if raw.contains('\0') {
                return Err(GuardRefusal::Nul { arg: arg() });
            }
            let real = sb
                .check(Path::new(raw), p.access)
                .map_err(|error| GuardRefusal::Path { arg: arg(), error })?;
            let Some(real) = real.to_str() else {
                return Err(GuardRefusal::NotUtf8 { arg: arg() });
            };
            *v = serde_json::Value::String(real.to_owned());
        }
    }
    if let Some(obj) = args.as_object_mut() {
        let info = serde_json::to_value(sb.info(own_addrs)).expect("serialisable");
        obj.insert(SANDBOX_ARG.to_owned(), info);
    }
    Ok(())
}

/// Why [`guard_call`] refused a call; the text is what the model reads (after the
/// credential gate masked it: a path may hold a filled secret).
#[derive(Debug, thiserror::Error)]
pub enum GuardRefusal {
    /// The tool wants the network and the sandbox has it switched off.
    #[error(transparent)]
    Network(#[from] SandboxError),
    #[error("the arguments must be a JSON object")]
    NotAnObject,
    #[error("`{arg}` must be a path (a string)")]
    NotAPath { arg: String },
    #[error("`{arg}` contains a NUL byte; give a plain path")]
    Nul { arg: String },
    /// The path is outside the roots, or contains `..`.
    #[error("`{arg}`: {error}")]
    Path { arg: String, error: SandboxError },
    #[error("`{arg}` resolves to a path that is not UTF-8")]
    NotUtf8 { arg: String },
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

    #[test]
    fn a_guarded_call_gets_real_paths_and_the_sandbox_or_a_refusal() {
        let (_d, sb, work, _docs) = setup();
        let paths = [PathArg::new("path", Access::Write), PathArg::new("cwd", Access::Read)];
        let mut args = serde_json::json!({"path": "notes/a.md", "content": "x", "__sandbox": {"write_roots": ["/"]}});
        guard_call(&sb, vec![], &paths, false, &mut args).unwrap();
        let real = work.canonicalize().unwrap().join("notes/a.md");
        assert_eq!(args["path"], real.to_str().unwrap(), "relative paths become real ones");
        assert_eq!(
            args[SANDBOX_ARG]["write_roots"][0],
            work.canonicalize().unwrap().to_str().unwrap(),
            "the kernel's sandbox replaces one the model forged"
        );
        for (bad, why) in [
            (serde_json::json!({"path": "../x"}), "contains `..`"),
            (serde_json::json!({"path": "/etc/passwd"}), "outside the write roots"),
            (serde_json::json!({"path": "innocent.txt"}), "outside"),
            (serde_json::json!({"path": 3}), "must be a path"),
            (serde_json::json!({"path": "a\0b"}), "NUL"),
            (serde_json::json!(["path"]), "JSON object"),
        ] {
            let mut a = bad.clone();
            let e = guard_call(&sb, vec![], &paths, false, &mut a).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let mut a = serde_json::json!({"url": "http://x"});
        let e = guard_call(&sb, vec![], &[], true, &mut a).unwrap_err().to_string();
        assert!(e.contains("network access is switched off"), "{e}");
    }
}
