//! `homed plugin pack DIR [-o FILE]`: a checked `.hmap` package from a plugin directory.
//!
//! The package is what [`super::package::install`] accepts, and the rules are the
//! installer's, applied before the archive exists so an author hears of a mistake
//! where it is made, not on the owner's daemon: the manifest (name, a semver
//! `version`, an `entry` that exists, is a regular file and fits its kind, `platforms`
//! among linux/darwin/windows, a `min_version` that parses), only plain files and
//! directories (a link is refused, never followed), the size and count limits, and
//! the guard of the reference's packager: a plugin with `auto_start: false` must ship
//! its `SKILL.md` in the same package, or the model never learns it exists and never
//! starts it. The daemon's own version and platform are not checked here: a package
//! may be built for a newer daemon or another platform (the installer checks those).
//!
//! The archive is reproducible: entries sorted by path, every timestamp the zip
//! epoch, permissions as on disk. Finally the installer's own entry check runs over
//! the bytes built.

use std::io::Write;
use std::path::{Path, PathBuf};

use homeagent_plugin_protocol::manifest::{ENTRY_PROBE, is_version};
use homeagent_plugin_protocol::{CompatError, EntryKind, Manifest};

use super::package::{
    MAX_ENTRIES, MAX_MANIFEST_BYTES, MAX_PACKAGE_BYTES, MAX_UNPACKED_BYTES, PackageError, check_entries, safe_relative,
    sha256_hex,
};
use crate::i18n::Msg;

/// Why a directory was not packed. Every message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("{0} is not a directory; give the plugin's directory (the one holding plugin.json)")]
    NotADir(String),
    #[error("{0}")]
    Manifest(String),
    #[error(
        "plugin `{name}` has version `{version}`, which is not a version: write MAJOR.MINOR.PATCH (e.g. 1.0.0) in plugin.json"
    )]
    Version { name: String, version: String },
    #[error("plugin.json names no `entry`; add \"entry\": \"{0}\" (one of plugin.bin, main.lua, SKILL.md)")]
    NoEntry(&'static str),
    #[error("entry `{0}` is not one of plugin.bin, main.lua or SKILL.md; rename the file and the entry")]
    BadEntry(String),
    #[error("entry `{0}` is not a regular file in the directory; put the file there (not a link)")]
    EntryMissing(String),
    #[error("plugin.bin is not executable; `chmod +x plugin.bin` and pack again")]
    NotExecutable,
    #[error("main.lua does not compile: {0}; fix the script and pack again")]
    Lua(String),
    #[error(transparent)]
    Compat(#[from] CompatError),
    #[error("{}", needs_skill(.0))]
    NeedsSkill(String),
    #[error("SKILL.md is invalid: {0}; fix it and pack again")]
    BadSkill(String),
    #[error("`{0}` is a symbolic link; packages hold only plain files and directories — copy the file in its place")]
    Link(String),
    #[error("`{0}` is not a plain file or directory (a socket, device or pipe); remove it from the directory")]
    Special(String),
    #[error("`{0}` cannot be named in a package (not UTF-8, or a backslash); rename it")]
    BadName(String),
    #[error("the directory holds more than {MAX_ENTRIES} entries; ship fewer files")]
    TooManyEntries,
    #[error("the files add up to more than {MAX_UNPACKED_BYTES} bytes; remove large files or ship them separately")]
    TooBig,
    #[error("plugin.json is {0} bytes; the limit is {MAX_MANIFEST_BYTES} bytes (64 KiB)")]
    ManifestTooLarge(u64),
    #[error(
        "the package would be {0} bytes; the install limit is {MAX_PACKAGE_BYTES} bytes (100 MB) — remove large files"
    )]
    PackageTooLarge(u64),
    #[error("{} lies inside the plugin directory; write the package somewhere else (-o FILE)", .0.display())]
    OutputInside(PathBuf),
    #[error("the package built does not pass the installer's check: {0}")]
    Check(#[from] PackageError),
    #[error("{0}")]
    Io(String),
}

/// A package built in memory.
#[derive(Debug)]
pub struct Packed {
    pub name: String,
    pub version: String,
    pub kind: EntryKind,
    /// Files in the package (directories not counted).
    pub files: usize,
    pub bytes: Vec<u8>,
    /// SHA-256 (hex) of `bytes`, as the installer reports it.
    pub sha256: String,
}

fn needs_skill(name: &str) -> String {
    Msg::PluginPackNeedsSkill { name }.text()
}

fn io(what: &Path) -> impl Fn(std::io::Error) -> PackError + '_ {
    move |e| PackError::Io(format!("cannot read {}: {e}", what.display()))
}

/// Checks the manifest and files of `dir` as the installer would, and whatever the
/// installer cannot see (the skill guard, `version` as semver, a Lua entry that
/// compiles). Answers the manifest and the entry's kind.
pub fn check_dir(dir: &Path) -> Result<(Manifest, EntryKind), PackError> {
    if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Err(PackError::NotADir(dir.display().to_string()));
    }
    let manifest_path = dir.join("plugin.json");
    match std::fs::symlink_metadata(&manifest_path) {
        Ok(m) if m.file_type().is_symlink() => return Err(PackError::Link("plugin.json".into())),
        Ok(m) if m.len() > MAX_MANIFEST_BYTES => return Err(PackError::ManifestTooLarge(m.len())),
        _ => {}
    }
    let manifest = Manifest::load(dir).map_err(|e| PackError::Manifest(e.to_string()))?;
    if !is_version(&manifest.version) {
        return Err(PackError::Version {
            name: manifest.name,
            version: manifest.version,
        });
    }
    if manifest.entry.is_empty() {
        let found = ENTRY_PROBE
            .into_iter()
            .find(|c| dir.join(c).is_file())
            .unwrap_or("main.lua");
        return Err(PackError::NoEntry(found));
    }
    if !ENTRY_PROBE.contains(&manifest.entry.as_str()) {
        return Err(PackError::BadEntry(manifest.entry));
    }
    let entry = dir.join(&manifest.entry);
    let meta = std::fs::symlink_metadata(&entry).map_err(|_| PackError::EntryMissing(manifest.entry.clone()))?;
    if !meta.file_type().is_file() {
        return Err(PackError::EntryMissing(manifest.entry));
    }
    let (_, kind) = manifest.entry(dir).map_err(|e| PackError::Manifest(e.to_string()))?;
    match kind {
        EntryKind::Subprocess => {
            use std::os::unix::fs::PermissionsExt;
            if meta.permissions().mode() & 0o111 == 0 {
                return Err(PackError::NotExecutable);
            }
        }
        EntryKind::Lua => {
            let source = std::fs::read_to_string(&entry).map_err(io(&entry))?;
            mlua::Lua::new()
                .load(&source)
                .set_name("main.lua")
                .into_function()
                .map_err(|e| PackError::Lua(e.to_string()))?;
        }
        EntryKind::Skill => {}
    }
    manifest.check_fields()?;
    let skill_md = dir.join("SKILL.md");
    let has_skill = std::fs::symlink_metadata(&skill_md).is_ok_and(|m| m.file_type().is_file());
    if kind != EntryKind::Skill && !manifest.auto_start && !has_skill {
        return Err(PackError::NeedsSkill(manifest.name));
    }
    if has_skill {
        super::skill::Skill::load(dir).map_err(|e| PackError::BadSkill(e.to_string()))?;
    }
    Ok((manifest, kind))
}

/// Every file and directory under `dir` (relative, `/`-separated, sorted), refusing
/// links and special files; with each one whether it is a directory.
fn walk(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, PackError> {
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let mut children: Vec<_> = std::fs::read_dir(&here)
            .map_err(io(&here))?
            .collect::<Result<_, _>>()
            .map_err(io(&here))?;
        children.sort_by_key(std::fs::DirEntry::file_name);
        for child in children {
            let child_rel = rel.join(child.file_name());
            let name = child_rel
                .to_str()
                .filter(|n| !n.contains('\\'))
                .ok_or_else(|| PackError::BadName(child_rel.display().to_string()))?
                .to_owned();
            if safe_relative(&name).is_none() {
                return Err(PackError::BadName(name));
            }
            let meta = std::fs::symlink_metadata(child.path()).map_err(io(&child.path()))?;
            let ft = meta.file_type();
            if ft.is_symlink() {
                return Err(PackError::Link(name));
            } else if ft.is_dir() {
                stack.push(child_rel.clone());
                out.push((name, child_rel, true));
            } else if ft.is_file() {
                total = total.saturating_add(meta.len());
                if total > MAX_UNPACKED_BYTES {
                    return Err(PackError::TooBig);
                }
                out.push((name, child_rel, false));
            } else {
                return Err(PackError::Special(name));
            }
            if out.len() > MAX_ENTRIES {
                return Err(PackError::TooManyEntries);
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Builds the package of `dir` in memory (see the module's rules).
pub fn pack(dir: &Path) -> Result<Packed, PackError> {
    use std::os::unix::fs::PermissionsExt;
    use zip::write::SimpleFileOptions;
    let (manifest, kind) = check_dir(dir)?;
    let entries = walk(dir)?;
    let base = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default());
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let zip_err = |e: zip::result::ZipError| PackError::Io(format!("cannot build the archive: {e}"));
    let mut files = 0;
    for (name, rel, is_dir) in &entries {
        let path = dir.join(rel);
        let mode = std::fs::symlink_metadata(&path)
            .map_err(io(&path))?
            .permissions()
            .mode()
            & 0o777;
        let opts = base.unix_permissions(mode);
        if *is_dir {
            w.add_directory(format!("{name}/"), opts).map_err(zip_err)?;
            continue;
        }
        w.start_file(name.as_str(), opts).map_err(zip_err)?;
        let mut f = std::fs::File::open(&path).map_err(io(&path))?;
        std::io::copy(&mut f, &mut w).map_err(io(&path))?;
        files += 1;
    }
    let bytes = w.finish().map_err(zip_err)?.into_inner();
    if bytes.len() as u64 > MAX_PACKAGE_BYTES {
        return Err(PackError::PackageTooLarge(bytes.len() as u64));
    }
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(&bytes[..])).map_err(|e| PackError::Io(e.to_string()))?;
    check_entries(&mut archive)?;
    Ok(Packed {
        sha256: sha256_hex(&bytes),
        name: manifest.name,
        version: manifest.version,
        kind,
        files,
        bytes,
    })
}

/// `homed plugin pack DIR [-o FILE]`: packs `dir` and writes the package to `out`
/// (default `./<name>-<version>.hmap`), through a temporary file renamed into place.
/// Answers where it went and the package.
pub fn pack_to(dir: &Path, out: Option<&Path>) -> Result<(PathBuf, Packed), PackError> {
    let packed = pack(dir)?;
    let out = out
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from(format!("{}-{}.hmap", packed.name, packed.version)));
    // A package written into the directory would be packed into the next one.
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let (dir_abs, parent_abs) = (
        std::fs::canonicalize(dir).map_err(io(dir))?,
        std::fs::canonicalize(&parent)
            .map_err(|e| PackError::Io(format!("cannot write to {}: {e}", parent.display())))?,
    );
    if parent_abs.starts_with(&dir_abs) {
        return Err(PackError::OutputInside(out));
    }
    let file_name = out
        .file_name()
        .ok_or_else(|| PackError::Io(format!("{} names no file; give -o FILE.hmap", out.display())))?;
    let tmp = parent.join(format!(".{}.tmp-{}", file_name.to_string_lossy(), std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&packed.bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &out)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(PackError::Io(format!("cannot write {}: {e}", out.display())));
    }
    Ok((out, packed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SKILL: &str = "---\nname: lazy\ndescription: Convert units when asked; start the plugin with plugin_enable first.\n---\nCall plugin_enable with name lazy, then use its tools.\n";

    /// A Lua plugin directory with `manifest` and extra files.
    fn plugin(manifest: &str, extra: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plugin.json"), manifest).unwrap();
        std::fs::write(dir.path().join("main.lua"), "return {}").unwrap();
        for (name, body) in extra {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        dir
    }

    const LUA: &str = r#"{"name": "lazy", "version": "1.2.0", "entry": "main.lua"}"#;
    /// Files besides plugin.json and main.lua: (path, content).
    type Extra = Vec<(&'static str, &'static str)>;

    #[test]
    fn a_packed_directory_installs_with_its_files() {
        let src = plugin(LUA, &[("lib/util.lua", "return 1"), ("SKILL.md", SKILL)]);
        std::fs::create_dir(src.path().join("empty")).unwrap();
        let packed = pack(src.path()).unwrap();
        assert_eq!(
            (packed.name.as_str(), packed.version.as_str(), packed.files),
            ("lazy", "1.2.0", 4)
        );
        assert_eq!(
            pack(src.path()).unwrap().bytes,
            packed.bytes,
            "the same directory packs to the same bytes"
        );
        let plugins = tempfile::tempdir().unwrap();
        let installed = super::super::package::install(&packed.bytes, plugins.path()).unwrap();
        assert_eq!(installed.checksum, packed.sha256);
        assert_eq!(installed.kind, EntryKind::Lua);
        let root = plugins.path().join("lazy");
        assert_eq!(std::fs::read_to_string(root.join("lib/util.lua")).unwrap(), "return 1");
        assert!(root.join("SKILL.md").is_file() && root.join("empty").is_dir());
    }

    #[test]
    fn a_subprocess_plugin_keeps_its_executable_bit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("plugin.json"),
            r#"{"name": "bin", "version": "0.1.0", "entry": "plugin.bin"}"#,
        )
        .unwrap();
        let bin = dir.path().join("plugin.bin");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(pack(dir.path()), Err(PackError::NotExecutable)));
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let packed = pack(dir.path()).unwrap();
        let plugins = tempfile::tempdir().unwrap();
        let installed = super::super::package::install(&packed.bytes, plugins.path()).unwrap();
        assert_eq!(installed.kind, EntryKind::Subprocess);
        let mode = std::fs::metadata(plugins.path().join("bin/plugin.bin"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o100, 0);
    }

    #[test]
    fn auto_start_false_needs_a_skill_in_the_package() {
        let manifest = r#"{"name": "lazy", "version": "1.0.0", "entry": "main.lua", "auto_start": false}"#;
        let err = pack(plugin(manifest, &[]).path()).unwrap_err();
        assert!(matches!(err, PackError::NeedsSkill(_)), "{err}");
        let text = err.to_string();
        assert!(text.contains("SKILL.md") && text.contains("auto_start"), "{text}");
        // A SKILL.md in a subdirectory is not the package's skill.
        let err = pack(plugin(manifest, &[("docs/SKILL.md", SKILL)]).path()).unwrap_err();
        assert!(matches!(err, PackError::NeedsSkill(_)), "{err}");
        let err = pack(plugin(manifest, &[("SKILL.md", "no front matter")]).path()).unwrap_err();
        assert!(matches!(err, PackError::BadSkill(_)), "{err}");
        let packed = pack(plugin(manifest, &[("SKILL.md", SKILL)]).path()).unwrap();
        assert_eq!(packed.files, 3);
        // A skill plugin is its own skill; auto_start means nothing to it.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("plugin.json"),
            r#"{"name": "lazy", "version": "1.0.0", "entry": "SKILL.md", "auto_start": false}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("SKILL.md"), SKILL).unwrap();
        assert_eq!(pack(dir.path()).unwrap().kind, EntryKind::Skill);
    }

    #[test]
    fn manifests_and_files_are_checked_before_packing() {
        let cases: Vec<(&str, Extra, &str)> = vec![
            (
                r#"{"name": "Bad Name", "version": "1.0.0", "entry": "main.lua"}"#,
                vec![],
                "[a-z0-9_-]",
            ),
            (
                r#"{"name": "p", "version": "1", "entry": "main.lua"}"#,
                vec![],
                "MAJOR.MINOR.PATCH",
            ),
            (r#"{"name": "p", "entry": "main.lua"}"#, vec![], "not a version"),
            (
                r#"{"name": "p", "version": "1.0.0"}"#,
                vec![],
                "\"entry\": \"main.lua\"",
            ),
            (
                r#"{"name": "p", "version": "1.0.0", "entry": "plugin.so"}"#,
                vec![],
                "not one of",
            ),
            (
                r#"{"name": "p", "version": "1.0.0", "entry": "plugin.bin"}"#,
                vec![],
                "not a regular file",
            ),
            (
                r#"{"name": "p", "version": "1.0.0", "entry": "main.lua", "platforms": ["linux", "macos"]}"#,
                vec![],
                "`macos`",
            ),
            (
                r#"{"name": "p", "version": "1.0.0", "entry": "main.lua", "min_version": "0.2"}"#,
                vec![],
                "MAJOR.MINOR.PATCH",
            ),
            (
                r#"{"name": "p", "version": "1.0.0", "entry": "main.lua"}"#,
                vec![("main.lua", "return {")],
                "does not compile",
            ),
        ];
        for (manifest, extra, want) in cases {
            let dir = plugin(manifest, &extra);
            let err = pack(dir.path()).unwrap_err().to_string();
            assert!(err.contains(want), "{manifest}: expected `{want}` in `{err}`");
        }
        // A package for another platform or a newer daemon is built all the same.
        let other = r#"{"name": "p", "version": "1.0.0", "entry": "main.lua", "platforms": ["windows"], "min_version": "99.0.0"}"#;
        assert!(pack(plugin(other, &[]).path()).is_ok());
        // Links are refused, never followed.
        let dir = plugin(LUA, &[]);
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
        let err = pack(dir.path()).unwrap_err();
        assert!(matches!(&err, PackError::Link(n) if n == "passwd"), "{err}");
        let dir = plugin(LUA, &[]);
        std::fs::remove_file(dir.path().join("main.lua")).unwrap();
        std::fs::write(dir.path().join("real.lua"), "return {}").unwrap();
        std::os::unix::fs::symlink("real.lua", dir.path().join("main.lua")).unwrap();
        assert!(pack(dir.path()).unwrap_err().to_string().contains("not a regular file"));
        assert!(matches!(pack(&dir.path().join("nope")), Err(PackError::NotADir(_))));
    }

    #[test]
    fn the_package_is_written_outside_the_directory() {
        let src = plugin(LUA, &[]);
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("lazy.hmap");
        let (written, packed) = pack_to(src.path(), Some(&out)).unwrap();
        assert_eq!(written, out);
        assert_eq!(std::fs::read(&out).unwrap(), packed.bytes);
        let names: Vec<_> = std::fs::read_dir(out_dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("lazy.hmap")],
            "no temporary file left"
        );
        let inside = src.path().join("lazy.hmap");
        assert!(matches!(
            pack_to(src.path(), Some(&inside)),
            Err(PackError::OutputInside(_))
        ));
        assert!(!inside.exists());
    }
}
