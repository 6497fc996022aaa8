//! `.hmap` plugin packages: a zip archive with `plugin.json` at its root.
//!
//! Installing is all or nothing. The archive is checked entry by entry (no `..`, no
//! absolute path, nothing but plain files and directories), unpacked into a hidden
//! temporary directory inside `DATA/plugins`, its manifest is validated there, and
//! only then is the directory renamed to `DATA/plugins/<name>` — one `rename` on the
//! same file system, so a half-written plugin is never visible to discovery. Any
//! refusal removes the temporary directory and leaves `DATA/plugins` as it was.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use homeagent_plugin_protocol::{EntryKind, Manifest};
use serde::Serialize;

/// Largest package accepted (the archive itself).
pub const MAX_PACKAGE_BYTES: u64 = 100 * 1024 * 1024;
/// Largest total unpacked size: a small archive may not expand without bound.
pub const MAX_UNPACKED_BYTES: u64 = 512 * 1024 * 1024;
/// Prefix of the temporary install directories (discovery skips dot directories).
pub const STAGING_PREFIX: &str = ".install-";
/// Most entries a package may hold (a zip bomb of empty files is still a bomb).
pub const MAX_ENTRIES: usize = 10_000;
/// Largest `plugin.json` accepted: a manifest is a few hundred bytes.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;

/// Why a package was refused. Every message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("package is at least {size} bytes; the limit is {limit} bytes (100 MB)")]
    TooLarge { size: u64, limit: u64 },
    #[error("package is empty: send the .hmap file as the request body")]
    Empty,
    #[error("package is not a zip archive: {0}; build it with `zip -r name.hmap plugin.json <entry> ...`")]
    NotZip(String),
    #[error("package entry `{0}` has an unsafe path (`..`, absolute or NUL); use paths relative to the archive root")]
    UnsafePath(String),
    #[error(
        "package entry `{0}` is a link or special file; packages may hold only plain files and directories (zip without --symlinks)"
    )]
    Link(String),
    #[error("package entry `{0}` is encrypted; build the package without a password")]
    Encrypted(String),
    #[error("package unpacks to more than {0} bytes; remove large files or ship them separately")]
    TooBig(u64),
    #[error("package holds {0} entries; the limit is {MAX_ENTRIES} — pack fewer files")]
    TooManyEntries(usize),
    #[error("package holds `{0}` twice; every path may appear once (rebuild the archive)")]
    Duplicate(String),
    #[error("package's plugin.json is {0} bytes; the limit is {MAX_MANIFEST_BYTES} bytes (64 KiB)")]
    ManifestTooLarge(u64),
    #[error("package has no plugin.json at its root; put the manifest next to the entry file, not in a subdirectory")]
    NoManifest,
    #[error("package manifest is invalid: {0}")]
    Manifest(String),
    #[error("package manifest lacks `{0}`; packages must declare name, version and entry")]
    MissingField(&'static str),
    #[error("package entry `{0}` is not one of plugin.bin, main.lua or SKILL.md")]
    BadEntry(String),
    #[error("package declares entry `{0}` but the archive does not contain it")]
    EntryMissing(String),
    #[error("package's plugin.bin is not executable; `chmod +x plugin.bin` before zipping")]
    NotExecutable,
    #[error("package cannot run here: {0}")]
    Incompatible(#[from] homeagent_plugin_protocol::CompatError),
    #[error("package's SKILL.md is invalid: {0}; fix it (or leave it out) and pack again")]
    BadSkill(String),
    #[error("plugin `{0}` already exists; remove DATA/plugins/{0} (or uninstall it) first")]
    Exists(String),
    #[error("cannot install the package: {0}")]
    Io(#[from] std::io::Error),
}

impl PackageError {
    /// A short machine-readable kind for API clients.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } | Self::TooBig(_) | Self::TooManyEntries(_) | Self::ManifestTooLarge(_) => {
                "too_large"
            }
            Self::Duplicate(_) => "duplicate_entry",
            Self::Empty | Self::NotZip(_) => "not_a_package",
            Self::UnsafePath(_) => "unsafe_path",
            Self::Link(_) => "link",
            Self::Encrypted(_) => "encrypted",
            Self::NoManifest
            | Self::Manifest(_)
            | Self::MissingField(_)
            | Self::BadEntry(_)
            | Self::EntryMissing(_)
            | Self::NotExecutable
            | Self::BadSkill(_) => "bad_manifest",
            Self::Incompatible(c) => c.kind(),
            Self::Exists(_) => "exists",
            Self::Io(_) => "io",
        }
    }
}

/// A successful install.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub status: &'static str,
    pub name: String,
    pub version: String,
    pub entry: String,
    pub kind: EntryKind,
    /// SHA-256 (hex) of the package bytes.
    pub checksum: String,
    #[serde(skip)]
    pub dir: PathBuf,
}

/// Checks a path inside the archive: relative, no `..`, no NUL, no drive prefix.
pub(super) fn safe_relative(name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('\0') || name.contains('\\') || name.starts_with('/') {
        return None;
    }
    let p = Path::new(name);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Unix file-type bits of a zip entry: only regular files and directories pass.
fn plain_type(mode: Option<u32>) -> bool {
    const S_IFMT: u32 = 0o170000;
    match mode.map(|m| m & S_IFMT) {
        None | Some(0) | Some(0o100000) | Some(0o040000) => true,
        Some(_) => false,
    }
}

/// Installs `bytes` (an `.hmap` package) into `plugins_dir/<name>`.
pub fn install(bytes: &[u8], plugins_dir: &Path) -> Result<Installed, PackageError> {
    install_with_limit(bytes, plugins_dir, MAX_PACKAGE_BYTES)
}

/// [`install`] with an explicit size limit (tests use a small one).
pub fn install_with_limit(bytes: &[u8], plugins_dir: &Path, limit: u64) -> Result<Installed, PackageError> {
    if bytes.len() as u64 > limit {
        return Err(PackageError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    if bytes.is_empty() {
        return Err(PackageError::Empty);
    }
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| PackageError::NotZip(e.to_string()))?;
    check_entries(&mut archive)?;
    std::fs::create_dir_all(plugins_dir)?;
    let staging = tempdir_in(plugins_dir)?;
    // On error `staging` removes itself.
    let (manifest, kind) = unpack_and_check(&mut archive, &staging.0)?;
    let target = plugins_dir.join(&manifest.name);
    if target.exists() {
        return Err(PackageError::Exists(manifest.name));
    }
    std::fs::rename(&staging.0, &target)?;
    staging.keep();
    let checksum = sha256_hex(bytes);
    tracing::info!(plugin = %manifest.name, version = %manifest.version, %checksum, "package installed");
    Ok(Installed {
        status: "installed",
        name: manifest.name,
        version: manifest.version,
        entry: manifest.entry,
        kind,
        checksum,
        dir: target,
    })
}

/// SHA-256 of `bytes` in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Pass 1 of an install: every entry is checked before anything touches the disk —
/// safe relative paths, plain files and directories only, no encryption, the size
/// and count limits, no path twice, a `plugin.json` of at most 64 KiB at the root.
/// `homed plugin pack` runs it over what it built.
pub fn check_entries<R: Read + std::io::Seek>(archive: &mut zip::ZipArchive<R>) -> Result<(), PackageError> {
    if archive.len() > MAX_ENTRIES {
        return Err(PackageError::TooManyEntries(archive.len()));
    }
    let mut total = 0u64;
    let mut has_manifest = false;
    let mut seen = std::collections::HashSet::new();
    for i in 0..archive.len() {
        let f = archive.by_index(i).map_err(|e| PackageError::NotZip(e.to_string()))?;
        let name = f.name().map_err(|e| PackageError::NotZip(e.to_string()))?.into_owned();
        let Some(rel) = safe_relative(&name) else {
            return Err(PackageError::UnsafePath(name));
        };
        if f.is_symlink() || !plain_type(f.unix_mode()) {
            return Err(PackageError::Link(name));
        }
        if f.encrypted() {
            return Err(PackageError::Encrypted(name));
        }
        total = total.saturating_add(f.size());
        if total > MAX_UNPACKED_BYTES {
            return Err(PackageError::TooBig(MAX_UNPACKED_BYTES));
        }
        // Two entries for one path would make the unpacked tree depend on their order
        // (the second silently overwrites what pass 1 checked for the first).
        let normal: PathBuf = rel.components().collect();
        if !seen.insert(normal) {
            return Err(PackageError::Duplicate(name));
        }
        if f.is_file() && rel == Path::new("plugin.json") {
            if f.size() > MAX_MANIFEST_BYTES {
                return Err(PackageError::ManifestTooLarge(f.size()));
            }
            has_manifest = true;
        }
    }
    if !has_manifest {
        return Err(PackageError::NoManifest);
    }
    Ok(())
}

/// A staging directory that removes itself unless kept.
struct Staging(PathBuf, bool);

impl Staging {
    fn keep(mut self) {
        self.1 = true;
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.1 {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Removes the staging folders (`.install-*`) a previous run left in `plugins_dir`:
/// an install killed mid-unpack (`kill -9`) never reached its own cleanup. Called at
/// start while the data dir's lock is held, so no install of this daemon is under way.
/// Answers what was removed and its bytes (for the log); a folder that cannot be
/// removed is logged and left.
pub fn clean_staging(plugins_dir: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(entries) = std::fs::read_dir(plugins_dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(STAGING_PREFIX) {
            continue;
        }
        let path = e.path();
        let bytes = tree_bytes(&path);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed.push((path, bytes)),
            Err(err) => {
                tracing::warn!(path = %path.display(), "cannot remove a stale install staging folder: {err}; remove it by hand")
            }
        }
    }
    removed
}

/// Bytes of the files under `dir` (links not followed).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).into_iter().flatten().flatten().map(|e| e.path()));
        } else {
            total += meta.len();
        }
    }
    total
}

fn tempdir_in(dir: &Path) -> std::io::Result<Staging> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    loop {
        let p = dir.join(format!(
            "{STAGING_PREFIX}{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(Staging(p, false)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

fn unpack_and_check<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    root: &Path,
) -> Result<(Manifest, EntryKind), PackageError> {
    use std::os::unix::fs::PermissionsExt;
    let mut written = 0u64;
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).map_err(|e| PackageError::NotZip(e.to_string()))?;
        let name = f.name().map_err(|e| PackageError::NotZip(e.to_string()))?.into_owned();
        let rel = safe_relative(&name).ok_or_else(|| PackageError::UnsafePath(name.clone()))?;
        let path = root.join(&rel);
        if f.is_dir() {
            std::fs::create_dir_all(&path)?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
        // The declared size may lie: count what really comes out.
        let mut buf = [0u8; 64 * 1024];
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| PackageError::NotZip(format!("{name}: {e}")))?;
            if n == 0 {
                break;
            }
            written += n as u64;
            if written > MAX_UNPACKED_BYTES {
                return Err(PackageError::TooBig(MAX_UNPACKED_BYTES));
            }
            out.write_all(&buf[..n])?;
        }
        let mode = f.unix_mode().unwrap_or(0o644) & 0o700; // owner bits only: the data dir is private
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o600))?;
    }
    let manifest = Manifest::load(root).map_err(|e| PackageError::Manifest(e.to_string()))?;
    // Before anything else about the plugin: a package for a newer daemon or another
    // platform is refused naming both sides.
    manifest.check_host(super::CORE_VERSION, std::env::consts::OS)?;
    if manifest.version.is_empty() {
        return Err(PackageError::MissingField("version"));
    }
    if manifest.entry.is_empty() {
        return Err(PackageError::MissingField("entry"));
    }
    if !homeagent_plugin_protocol::manifest::ENTRY_PROBE.contains(&manifest.entry.as_str()) {
        return Err(PackageError::BadEntry(manifest.entry));
    }
    let entry = root.join(&manifest.entry);
    if !entry.is_file() {
        return Err(PackageError::EntryMissing(manifest.entry));
    }
    let (_, kind) = manifest
        .entry(root)
        .map_err(|e| PackageError::Manifest(e.to_string()))?;
    if kind == EntryKind::Subprocess && std::fs::metadata(&entry)?.permissions().mode() & 0o111 == 0 {
        return Err(PackageError::NotExecutable);
    }
    if kind == EntryKind::Skill {
        super::skill::Skill::load(root).map_err(|e| PackageError::Manifest(e.to_string()))?;
    } else if root.join("SKILL.md").is_file() {
        // The skill a plugin ships beside its entry goes into the skill index.
        super::skill::Skill::load(root).map_err(|e| PackageError::BadSkill(e.to_string()))?;
    }
    Ok((manifest, kind))
}

/// `DATA/plugin_data/<name>`: a plugin's own data (its `HOME` too, see `confine`).
pub fn plugin_data_dir(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("plugin_data").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zip::write::SimpleFileOptions;

    /// What a `kill -9` mid-install leaves is removed at the next start; plugins and
    /// other hidden entries stay.
    #[test]
    fn leftover_staging_folders_are_removed_with_their_size() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join(format!("{STAGING_PREFIX}123-0"));
        std::fs::create_dir_all(stale.join("bin")).unwrap();
        std::fs::write(stale.join("bin/big"), vec![0u8; 5000]).unwrap();
        std::fs::create_dir_all(dir.path().join("units")).unwrap();
        std::fs::create_dir_all(dir.path().join(".cache")).unwrap();
        let removed = clean_staging(dir.path());
        assert_eq!(removed, vec![(stale.clone(), 5000)]);
        assert!(!stale.exists());
        assert!(dir.path().join("units").exists() && dir.path().join(".cache").exists());
        assert!(clean_staging(dir.path()).is_empty());
    }

    fn package(files: &[(&str, &str, u32)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, body, mode) in files {
            w.start_file(*name, SimpleFileOptions::default().unix_permissions(*mode))
                .unwrap();
            w.write_all(body.as_bytes()).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    const LUA_MANIFEST: &str = r#"{"name": "hello", "version": "1.0.0", "entry": "main.lua"}"#;
    /// Names for a package one entry over the limit (with plugin.json and main.lua).
    static FILLER: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| (0..MAX_ENTRIES - 1).map(|i| format!("f/{i}")).collect());

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn a_good_package_installs_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = package(&[
            ("plugin.json", LUA_MANIFEST, 0o644),
            ("main.lua", "return {}", 0o644),
            ("lib/util.lua", "return 1", 0o644),
        ]);
        let got = install(&bytes, dir.path()).unwrap();
        assert_eq!((got.name.as_str(), got.version.as_str()), ("hello", "1.0.0"));
        assert_eq!(got.kind, EntryKind::Lua);
        assert_eq!(got.checksum.len(), 64);
        assert!(dir.path().join("hello/lib/util.lua").is_file());
        assert_eq!(listing(dir.path()), vec!["hello"], "no staging directory left");
        let again = install(&bytes, dir.path()).unwrap_err();
        assert!(matches!(again, PackageError::Exists(_)), "{again}");
        assert!(again.to_string().contains("remove"));
        assert_eq!(listing(dir.path()), vec!["hello"]);
    }

    /// What the refusal of a package for homed 999 says: both versions.
    static NEWER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "needs homed 999.0.0 or newer, but this is homed {}",
            super::super::CORE_VERSION
        )
    });
    /// A platform this test does not run on.
    const ELSEWHERE: &str = if cfg!(target_os = "windows") {
        "linux"
    } else {
        "windows"
    };
    static WRONG_PLATFORM: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("runs on {ELSEWHERE} only"));

    #[test]
    fn bad_packages_are_refused_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not a zip".to_vec(), "not a zip"),
            (
                package(&[("plugin.json", LUA_MANIFEST, 0o644), ("../evil.lua", "x", 0o644)]),
                "unsafe path",
            ),
            (
                package(&[("plugin.json", LUA_MANIFEST, 0o644), ("/etc/evil", "x", 0o644)]),
                "unsafe path",
            ),
            (
                package(&[("plugin.json", LUA_MANIFEST, 0o644), ("a/../../x", "x", 0o644)]),
                "unsafe path",
            ),
            (package(&[("main.lua", "return {}", 0o644)]), "no plugin.json"),
            (
                package(&[("sub/plugin.json", LUA_MANIFEST, 0o644), ("sub/main.lua", "", 0o644)]),
                "no plugin.json",
            ),
            (
                package(&[
                    ("plugin.json", r#"{"name": "x", "entry": "main.lua"}"#, 0o644),
                    ("main.lua", "", 0o644),
                ]),
                "lacks `version`",
            ),
            (package(&[("plugin.json", LUA_MANIFEST, 0o644)]), "does not contain"),
            (
                package(&[
                    ("plugin.json", LUA_MANIFEST, 0o644),
                    ("main.lua", "return {}", 0o644),
                    ("./main.lua", "os.execute('sh')", 0o644),
                ]),
                "twice",
            ),
            (
                package(&[
                    (
                        "plugin.json",
                        &format!("{}{}", LUA_MANIFEST, " ".repeat(64 * 1024)),
                        0o644,
                    ),
                    ("main.lua", "return {}", 0o644),
                ]),
                "64 KiB",
            ),
            (
                package(
                    &std::iter::once(("plugin.json", LUA_MANIFEST, 0o644))
                        .chain(std::iter::once(("main.lua", "return {}", 0o644)))
                        .chain(FILLER.iter().map(|n| (n.as_str(), "", 0o644)))
                        .collect::<Vec<_>>(),
                ),
                "the limit is 10000",
            ),
            (
                package(&[
                    (
                        "plugin.json",
                        r#"{"name": "x", "version": "1", "entry": "plugin.so"}"#,
                        0o644,
                    ),
                    ("plugin.so", "", 0o755),
                ]),
                "not one of",
            ),
            (
                package(&[
                    (
                        "plugin.json",
                        r#"{"name": "x", "version": "1", "entry": "plugin.bin"}"#,
                        0o644,
                    ),
                    ("plugin.bin", "#!/bin/sh\n", 0o644),
                ]),
                "chmod +x",
            ),
            (
                package(&[(
                    "plugin.json",
                    r#"{"name": "Bad Name", "version": "1", "entry": "main.lua"}"#,
                    0o644,
                )]),
                "invalid",
            ),
            (
                package(&[
                    (
                        "plugin.json",
                        r#"{"name": "x", "version": "1", "entry": "main.lua", "min_version": "999.0.0"}"#,
                        0o644,
                    ),
                    ("main.lua", "return {}", 0o644),
                ]),
                &NEWER,
            ),
            (
                package(&[
                    (
                        "plugin.json",
                        r#"{"name": "x", "version": "1", "entry": "main.lua", "min_version": "soon"}"#,
                        0o644,
                    ),
                    ("main.lua", "return {}", 0o644),
                ]),
                "MAJOR.MINOR.PATCH",
            ),
            (
                package(&[
                    (
                        "plugin.json",
                        &format!(
                            r#"{{"name": "x", "version": "1", "entry": "main.lua", "platforms": ["{ELSEWHERE}"]}}"#
                        ),
                        0o644,
                    ),
                    ("main.lua", "return {}", 0o644),
                ]),
                &WRONG_PLATFORM,
            ),
            (
                package(&[
                    ("plugin.json", LUA_MANIFEST, 0o644),
                    ("main.lua", "return {}", 0o644),
                    ("SKILL.md", "no front matter", 0o644),
                ]),
                "SKILL.md is invalid",
            ),
        ];
        for (bytes, want) in cases {
            let err = install(&bytes, dir.path()).unwrap_err().to_string();
            assert!(err.contains(want), "expected `{want}` in `{err}`");
            assert!(
                listing(dir.path()).is_empty(),
                "left {:?} after `{err}`",
                listing(dir.path())
            );
        }
        // A symbolic link.
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        w.start_file("plugin.json", SimpleFileOptions::default()).unwrap();
        w.write_all(LUA_MANIFEST.as_bytes()).unwrap();
        w.add_symlink("main.lua", "/etc/passwd", SimpleFileOptions::default())
            .unwrap();
        let bytes = w.finish().unwrap().into_inner();
        let err = install(&bytes, dir.path()).unwrap_err();
        assert!(matches!(err, PackageError::Link(_)), "{err}");
        // Over the size limit.
        let bytes = package(&[("plugin.json", LUA_MANIFEST, 0o644), ("main.lua", "", 0o644)]);
        let err = install_with_limit(&bytes, dir.path(), 10).unwrap_err();
        assert!(err.to_string().contains("the limit is 10 bytes"), "{err}");
        assert!(listing(dir.path()).is_empty());
    }

    #[test]
    fn paths_are_checked() {
        assert!(safe_relative("a/b.lua").is_some());
        assert!(safe_relative("./a").is_some());
        for bad in ["", "/a", "..", "a/../../b", "a/..", "c:\\x", "a\0b"] {
            assert!(safe_relative(bad).is_none() || bad == "a/..", "{bad:?}");
        }
        assert!(safe_relative("a/..").is_none(), "any `..` is refused");
        assert!(plain_type(Some(0o100644)) && plain_type(Some(0o040755)) && plain_type(None));
        assert!(!plain_type(Some(0o120777)), "symlink");
        assert!(!plain_type(Some(0o020644)), "device");
    }
}
