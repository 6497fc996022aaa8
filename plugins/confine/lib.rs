//! Confinement by the operating system for plugin processes and the commands they run.
//!
//! Deny lists in a tool cannot hold against a hostile model (`$(echo dd)`, `eval`,
//! globbing, a script written first and run second). What holds is the kernel: a
//! process confined here can touch only the paths it was granted, cannot connect to
//! the daemon's own port, cannot signal or trace anything outside its confinement
//! (so it cannot read `/proc/<daemon>/environ` either), runs without capabilities
//! even when the daemon runs as root, and with the network switch off has no network
//! at all. Everything it starts inherits all of that; nothing it does can undo it.
//!
//! How, on Linux:
//! - **Landlock** (filesystem rules, ABI 1+; TCP connect rules, ABI 4+; signal and
//!   abstract-socket scoping, ABI 6+) through the Landlock maintainers' crate. Rules
//!   are *allow* lists, so "everything but the data dir" is built by [`carve`]: a root
//!   that contains a forbidden path is replaced by its other entries, level by level.
//! - **capabilities**: the bounding set is emptied, so an exec as root gains none.
//! - **no network**: a private user and network namespace (only a downed loopback).
//!
//! The work splits in two because the second half runs between `fork` and `exec`,
//! where only async-signal-safe calls are allowed: [`Confinement::prepare`] opens
//! every path and builds the rulesets in the parent; [`Prepared::apply`] then makes
//! only raw system calls (`unshare`, `prctl`, `landlock_restrict_self`) in the child.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

/// What the running kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version (0: none).
    pub abi: i32,
}

impl Support {
    /// Asks the kernel (`landlock_create_ruleset` with the version flag).
    pub fn probe() -> Self {
        // SAFETY: the documented version query: no ruleset, size 0, flag 1.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        Self { abi: v.max(0) as i32 }
    }

    /// Filesystem rules.
    pub fn filesystem(self) -> bool {
        self.abi >= 1
    }

    /// TCP connect rules (the daemon's port closed to confined processes).
    pub fn tcp(self) -> bool {
        self.abi >= 4
    }

    /// Signal and abstract-socket scoping.
    pub fn scoping(self) -> bool {
        self.abi >= 6
    }

    /// What is missing for full confinement, for the start-up report; empty when nothing.
    pub fn missing(self) -> Vec<&'static str> {
        let mut m = Vec::new();
        if !self.filesystem() {
            m.push("Landlock filesystem rules (Linux 5.13+, `lsm=landlock` at boot)");
        }
        if !self.tcp() {
            m.push("Landlock TCP rules (Linux 6.7+)");
        }
        if !self.scoping() {
            m.push("Landlock signal scoping (Linux 6.12+)");
        }
        m
    }

    /// Whether every rule this crate relies on is enforced.
    pub fn complete(self) -> bool {
        self.missing().is_empty()
    }
}

/// Why a confinement could not be prepared or applied.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error(
        "this kernel cannot confine processes (Landlock ABI {abi}; missing: {missing}); plugins that run code are refused. Boot a kernel with Landlock enabled, or set core.security.confinement to false to run them unconfined at your own risk"
    )]
    Unsupported { abi: i32, missing: String },
    #[error("cannot build the confinement rules: {0}")]
    Rules(String),
}

/// What a confined process may do. Paths are granted with everything beneath them.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// Read and execute.
    pub read: Vec<PathBuf>,
    /// Read, execute, create, write, remove.
    pub write: Vec<PathBuf>,
    /// Device files opened for reading, writing and `ioctl` (`/dev/null`, terminals).
    pub devices: Vec<PathBuf>,
    /// Paths never granted, even beneath a granted root (see [`carve`]).
    pub forbidden: Vec<PathBuf>,
    /// The only places inside a forbidden path that may still be granted (a plugin's
    /// own data dir, the workspace); a granted path inside a forbidden one and outside
    /// all of these is dropped.
    pub exempt: Vec<PathBuf>,
    /// A TCP port confined processes may not connect to (the daemon's own).
    pub closed_port: Option<ClosedPort>,
}

/// Read and execute access to the usual system locations that exist on this machine
/// (programs, libraries, configuration, `/proc`, `/sys`).
pub fn system_read_roots() -> Vec<PathBuf> {
    [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys", "/run",
        "/nix", "/snap",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect()
}

/// The device files an ordinary program expects (`/dev/null`, random numbers, terminals).
pub fn system_devices() -> Vec<PathBuf> {
    [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
        "/dev/ptmx",
        "/dev/pts",
        "/dev/shm",
        "/dev/fd",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect()
}

/// `root` with every path in `forbidden` cut out: the root itself when it holds none
/// of them; nothing when it lies inside one; otherwise the entries of `root` (listed
/// now) with the same applied to each, so `/` minus `/home/u/.homeagent` becomes
/// `/bin`, `/etc`, …, `/home/v`, `/home/u/Documents`, …. Entries created later beside
/// a forbidden path are not granted (safe side). Paths are compared as given: pass
/// canonical ones.
pub fn carve(root: &Path, forbidden: &[PathBuf]) -> Vec<PathBuf> {
    if forbidden.iter().any(|f| root.starts_with(f)) {
        return Vec::new();
    }
    if !forbidden.iter().any(|f| f.starts_with(root)) {
        return vec![root.to_owned()];
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        out.extend(carve(&e.path(), forbidden));
    }
    out.sort();
    out
}

impl Confinement {
    /// Builds the rules (opens every path) in the calling process. Paths that do not
    /// exist are skipped. Fails when the kernel lacks Landlock's filesystem rules:
    /// a confinement that silently confines nothing is worse than a refusal.
    pub fn prepare(&self, support: Support) -> Result<Prepared, ConfineError> {
        if !support.filesystem() {
            return Err(ConfineError::Unsupported {
                abi: support.abi,
                missing: support.missing().join(", "),
            });
        }
        let abi = ABI::from(support.abi);
        let rules = |e: landlock::RulesetError| ConfineError::Rules(e.to_string());
        let canon = |p: &PathBuf| p.canonicalize().ok();
        let forbidden: Vec<PathBuf> = self.forbidden.iter().filter_map(canon).collect();
        let exempt: Vec<PathBuf> = self.exempt.iter().filter_map(canon).collect();
        let expand = |paths: &[PathBuf]| -> Vec<PathBuf> {
            paths
                .iter()
                .filter_map(canon)
                .flat_map(|p| {
                    if exempt.iter().any(|e| p.starts_with(e)) {
                        vec![p]
                    } else {
                        if forbidden.iter().any(|f| p.starts_with(f)) {
                            tracing::warn!(path = %p.display(), "not granted to a confined process: it lies inside the daemon's data");
                        }
                        carve(&p, &forbidden)
                    }
                })
                .collect()
        };
        let all = AccessFs::from_all(abi);
        let file = AccessFs::from_file(abi);
        let mut grants: Vec<PathBeneath<PathFd>> = Vec::new();
        let mut grant = |paths: Vec<PathBuf>, access: landlock::BitFlags<AccessFs>| {
            for p in paths {
                let Ok(fd) = PathFd::new(&p) else { continue };
                // A file gets only the rights that apply to files.
                let access = if p.is_dir() { access } else { access & file };
                grants.push(PathBeneath::new(fd, access));
            }
        };
        grant(expand(&self.read), AccessFs::from_read(abi));
        grant(expand(&self.write), all);
        grant(
            self.devices.iter().filter_map(canon).collect(),
            file | AccessFs::ReadDir,
        );
        let mut fs = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)
            .map_err(rules)?;
        if support.scoping() {
            fs = fs.scope(Scope::from_all(abi)).map_err(rules)?;
        }
        let fs = fs
            .create()
            .map_err(rules)?
            .add_rules(grants.into_iter().map(Ok::<_, landlock::RulesetError>))
            .map_err(rules)?;
        let mut layers: Vec<Arc<OwnedFd>> = Vec::new();
        layers.extend(Option::<OwnedFd>::from(fs).map(Arc::new));
        layers.extend(self.closed_port.as_ref().and_then(|p| p.layer.clone()));
        Ok(Prepared { layers })
    }
}

/// A layer that lets TCP connect to every port but one. Landlock rules allow, so this
/// is 65,534 rules (~40 ms to build): built once and shared by every confinement.
#[derive(Debug, Clone)]
pub struct ClosedPort {
    /// `None` when the kernel has no TCP rules (reported by [`Support::missing`]).
    layer: Option<Arc<OwnedFd>>,
}

impl ClosedPort {
    pub fn new(port: u16, support: Support) -> Result<Self, ConfineError> {
        if !support.tcp() {
            return Ok(Self { layer: None });
        }
        let rules = |e: landlock::RulesetError| ConfineError::Rules(e.to_string());
        let mut net = Ruleset::default()
            .handle_access(AccessNet::ConnectTcp)
            .map_err(rules)?
            .create()
            .map_err(rules)?;
        for p in (0..=u16::MAX).filter(|p| *p != port) {
            net = net.add_rule(NetPort::new(p, AccessNet::ConnectTcp)).map_err(rules)?;
        }
        Ok(Self {
            layer: Option::<OwnedFd>::from(net).map(Arc::new),
        })
    }
}

/// Rules built and ready to apply in a child between `fork` and `exec`.
#[derive(Debug)]
pub struct Prepared {
    layers: Vec<Arc<OwnedFd>>,
}

impl Prepared {
    /// Confines the calling process: no capabilities, `no_new_privs`, then every
    /// Landlock layer ([`isolate_network`] is the separate step for no network). Meant for `pre_exec`: it makes only
    /// system calls (no allocation, no locks), which is what `fork` in a threaded
    /// process allows.
    pub fn apply(&self) -> std::io::Result<()> {
        let check = |r: libc::c_long| {
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY: plain system calls on values owned by `self`; see the doc comment.
        unsafe {
            // Capabilities: an empty bounding set means an exec (even as root) gains
            // none. EINVAL past the last capability, EPERM without CAP_SETPCAP: both fine.
            for cap in 0..64 {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
            libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
            for fd in &self.layers {
                check(libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32))?;
            }
        }
        Ok(())
    }
}

/// Takes the calling process off the network: a private user and network namespace
/// with only a downed loopback (TCP, UDP and DNS alike fail). Meant for `pre_exec`
/// (one system call). What the sandbox's network switch (`core.security.sandbox.network`
/// off) does to every command and terminal.
pub fn isolate_network() -> std::io::Result<()> {
    // SAFETY: one system call with constant flags.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Resource limits for one command and what it starts (`setrlimit`, inherited across
/// `fork` and `exec`). `None` leaves a limit as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds (the process gets SIGXCPU, then SIGKILL a second later).
    pub cpu_secs: Option<u64>,
    /// The largest file it may write.
    pub file_bytes: Option<u64>,
    /// Processes of this user (not enforced for root, whose capabilities are gone but
    /// whose uid the kernel exempts).
    pub processes: Option<u64>,
    /// Open file descriptors.
    pub open_files: Option<u64>,
    /// Memory a process may allocate (`RLIMIT_DATA`: heap and private writable
    /// mappings, since Linux 4.7). Not `RLIMIT_AS`: runtimes that reserve large virtual
    /// ranges up front (V8, Go, the JVM) would fail to start under any useful bound.
    pub data_bytes: Option<u64>,
}

impl Limits {
    /// What `cmd_run` gives a command that may run `timeout`: CPU for that long (plus
    /// a margin), files up to 4 GiB, 512 processes, 1,024 descriptors, 4 GiB of memory
    /// per process (a runaway allocation fails in the command, not in the daemon's
    /// machine).
    pub fn for_command(timeout: std::time::Duration) -> Self {
        Self {
            cpu_secs: Some(timeout.as_secs() + 5),
            file_bytes: Some(4 << 30),
            processes: Some(512),
            open_files: Some(1024),
            data_bytes: Some(4 << 30),
        }
    }

    /// Applies them to the calling process. Meant for `pre_exec` (system calls only).
    /// A limit is only ever lowered: a value above the current hard limit is clamped.
    pub fn apply(&self) -> std::io::Result<()> {
        let set = |resource: libc::__rlimit_resource_t, value: Option<u64>| -> std::io::Result<()> {
            let Some(v) = value else { return Ok(()) };
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: plain system calls on a local struct.
            unsafe {
                if libc::getrlimit(resource, &mut cur) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let v = v.min(cur.rlim_max);
                let new = libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                };
                if libc::setrlimit(resource, &new) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        };
        set(libc::RLIMIT_CPU, self.cpu_secs)?;
        set(libc::RLIMIT_FSIZE, self.file_bytes)?;
        set(libc::RLIMIT_NPROC, self.processes)?;
        set(libc::RLIMIT_NOFILE, self.open_files)?;
        set(libc::RLIMIT_DATA, self.data_bytes)?;
        Ok(())
    }
}

/// Whether process `pid` runs with `no_new_privs`, which every process confined here
/// has (Landlock requires it without `CAP_SYS_ADMIN`) and which nothing can clear. A
/// daemon's local sockets use it to refuse confined peers; a process that cannot be
/// read (gone already) counts as confined.
pub fn is_confined(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("NoNewPrivs:"))
        .is_none_or(|v| v.trim() != "0")
}

#[cfg(test)]
mod tests;
