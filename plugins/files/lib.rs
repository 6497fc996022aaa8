//! The bundled files plugin: `files_read`, `files_write`, `files_edit`, `files_list`
//! and `files_search`, inside the firewall's sandbox roots. It runs as
//! `homed plugin files`.
//!
//! Two checks guard every path. The kernel checks each declared path argument before
//! the call leaves it (refusing with the firewall's reason) and passes the real path;
//! this plugin checks again with the sandbox that came with the call, on the path it is
//! about to open, and opens without following a final symlink (`O_NOFOLLOW`): a link
//! planted between the two checks fails instead of leading out. Writes go to a
//! temporary file in the same directory that is then renamed over the target, so a
//! write never follows a link and never leaves half a file. Walks (`files_list`,
//! `files_search`) never follow symlinks.
//!
//! Every tool is a plain function of `(args, sandbox)`, unit-tested on a temporary
//! directory without the kernel.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use homeagent_plugin_protocol::methods::{PathArg, ToolRegister};
use homeagent_plugin_protocol::sandbox::{Access, SandboxInfo};
use homeagent_plugin_protocol::sdk::{Call, Plugin};
use homeagent_plugin_protocol::toolkit::{bool_arg, cap, looks_binary, opt_str, str_arg, uint_arg};
use serde_json::{Value, json};

/// Largest file `files_read` and `files_edit` load (bigger ones: read a line range of
/// a smaller file, or use `cmd_run` with `head`/`tail`).
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Most text one `files_read` answers: about 4k tokens, so one answer fits the
/// smallest window the kernel assumes (8k tokens) with room for the rest.
pub const MAX_READ_OUTPUT: usize = 16 * 1024;
/// Largest `content` one `files_write` accepts.
pub const MAX_WRITE_BYTES: usize = 4 * 1024 * 1024;
/// Limits of `files_list`.
pub const MAX_DEPTH: u64 = 6;
pub const MAX_LIST: u64 = 2000;
/// Limits of `files_search`: results, files looked at, size of a file searched.
pub const MAX_RESULTS: u64 = 500;
pub const MAX_FILES_SCANNED: usize = 20_000;
pub const MAX_SEARCH_FILE: u64 = 2 * 1024 * 1024;

type R = Result<String, String>;

/// The real path of `args[key]` (or of `default` when absent) for `access`,
/// re-checked here on the path that will be opened.
fn checked(
    sb: &SandboxInfo,
    args: &Value,
    key: &str,
    access: Access,
    default: Option<&Path>,
) -> Result<PathBuf, String> {
    let path = match (opt_str(args, key), default) {
        (Some(p), _) => PathBuf::from(p),
        (None, Some(d)) => d.to_owned(),
        (None, None) => return Err(format!("`{key}` (a path) is required")),
    };
    sb.check(&path, access).map_err(|e| e.to_string())
}

/// Opens an existing file for reading without following a final symlink; refuses
/// what is not a regular file. `O_NONBLOCK` so a FIFO planted in a root cannot hang
/// the call in `open` (it is then refused as not a regular file; regular files ignore
/// the flag).
fn open_file(path: &Path) -> Result<(std::fs::File, u64), String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("`{}` does not exist; files_list shows what does", path.display()),
            _ => format!("cannot open `{}`: {e}", path.display()),
        })?;
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot stat `{}`: {e}", path.display()))?;
    if meta.is_dir() {
        return Err(format!("`{}` is a directory; use files_list", path.display()));
    }
    if !meta.is_file() {
        return Err(format!("`{}` is not a regular file", path.display()));
    }
    Ok((f, meta.len()))
}

/// The text of a file, refusing big and binary ones with what to do instead.
fn read_text(path: &Path) -> Result<String, String> {
    let (f, len) = open_file(path)?;
    if len > MAX_FILE_BYTES {
        return Err(format!(
            "`{}` is {len} bytes, over the {MAX_FILE_BYTES}-byte limit of files_read/files_edit; look at part of it with cmd_run (head, tail, grep)",
            path.display()
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    if looks_binary(&bytes) {
        return Err(format!(
            "`{}` is binary ({} bytes; NUL bytes or not UTF-8); files_read shows text only",
            path.display(),
            bytes.len()
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("`{}` is not UTF-8 text", path.display()))
}

/// `files_read`: the text of a file, or of lines `start_line..=end_line` (from 1).
pub fn read(args: &Value, sb: &SandboxInfo) -> R {
    let path = checked(sb, args, "path", Access::Read, None)?;
    let text = read_text(&path)?;
    let total = text.lines().count();
    let start = uint_arg(args, "start_line", 1, u64::MAX)? as usize;
    let end = uint_arg(args, "end_line", total.max(1) as u64, u64::MAX)? as usize;
    if total == 0 {
        return Ok(format!("{} is empty", path.display()));
    }
    if start > total {
        return Err(format!(
            "`start_line` {start} is past the end: the file has {total} lines"
        ));
    }
    if end < start {
        return Err(format!("`end_line` ({end}) is before `start_line` ({start})"));
    }
    let end = end.min(total);
    let body: Vec<&str> = text.lines().skip(start - 1).take(end - start + 1).collect();
    let body = body.join("\n");
    let head = format!("{} (lines {start}-{end} of {total}):\n", path.display());
    let hint = "read the rest with start_line/end_line";
    Ok(format!("{head}{}", cap(&body, MAX_READ_OUTPUT, hint)))
}

/// Writes `bytes` to `path` through a temporary file renamed over it: the rename
/// replaces a link planted at `path` instead of writing through it.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = path.parent().ok_or("the path has no parent directory")?;
    let name = path.file_name().ok_or("the path names no file")?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write `{}`: {e}", path.display())
    })
}

/// `files_write`: creates or overwrites a file (or appends), creating its parent
/// directories inside the write roots.
pub fn write(args: &Value, sb: &SandboxInfo) -> R {
    let path = checked(sb, args, "path", Access::Write, None)?;
    let content = args
        .get("content")
        .and_then(Value::as_str)
        .ok_or("`content` (a string) is required")?;
    if content.len() > MAX_WRITE_BYTES {
        return Err(format!(
            "`content` is {} bytes, over the {MAX_WRITE_BYTES}-byte limit; write it in parts with append: true",
            content.len()
        ));
    }
    if path.is_dir() {
        return Err(format!("`{}` is a directory", path.display()));
    }
    if let Some(parent) = path.parent() {
        // The parent was resolved inside a write root; check again what will be created.
        sb.check(parent, Access::Write).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create `{}`: {e}", parent.display()))?;
    }
    let existed = path.exists();
    if bool_arg(args, "append") && existed {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| format!("cannot open `{}` to append: {e}", path.display()))?;
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            return Err(format!("`{}` is not a regular file", path.display()));
        }
        f.write_all(content.as_bytes())
            .map_err(|e| format!("cannot append to `{}`: {e}", path.display()))?;
        return Ok(format!("appended {} bytes to {}", content.len(), path.display()));
    }
    write_atomic(&path, content.as_bytes())?;
    Ok(format!(
        "{} {} ({} bytes)",
        if existed { "overwrote" } else { "created" },
        path.display(),
        content.len()
    ))
}

/// `files_edit`: replaces the one exact occurrence of `old` by `new`.
pub fn edit(args: &Value, sb: &SandboxInfo) -> R {
    let path = checked(sb, args, "path", Access::Write, None)?;
    let old = str_arg(args, "old")?;
    let new = args
        .get("new")
        .and_then(Value::as_str)
        .ok_or("`new` (a string, may be empty) is required")?;
    let text = read_text(&path)?;
    match text.matches(old).count() {
        0 => Err(format!(
            "`old` does not occur in {}; files_read it and copy the text exactly (whitespace included)",
            path.display()
        )),
        1 => {
            let out = text.replacen(old, new, 1);
            write_atomic(&path, out.as_bytes())?;
            let line = text[..text.find(old).unwrap_or(0)].matches('\n').count() + 1;
            Ok(format!("edited {} at line {line}", path.display()))
        }
        n => Err(format!(
            "`old` occurs {n} times in {}; include more of the surrounding text so it matches once",
            path.display()
        )),
    }
}

/// Entries of `dir`, sorted by name (unreadable entries skipped).
fn entries(dir: &Path) -> Vec<std::fs::DirEntry> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).collect())
        .unwrap_or_default();
    v.sort_by_key(|e| e.file_name());
    v
}

/// `files_list`: a directory tree to `depth` levels, at most `limit` entries.
pub fn list(args: &Value, sb: &SandboxInfo) -> R {
    let root = checked(sb, args, "path", Access::Read, sb.workdir())?;
    let depth = uint_arg(args, "depth", 1, MAX_DEPTH)? as usize;
    let limit = uint_arg(args, "limit", 200, MAX_LIST)? as usize;
    if !root.is_dir() {
        return Err(format!("`{}` is not a directory", root.display()));
    }
    let mut out = vec![format!("{}/", root.display())];
    let mut shown = 0;
    let mut more = false;
    // Depth-first, so the tree reads in order.
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.clone(), 0)];
    let mut pending: Vec<Vec<std::fs::DirEntry>> = vec![entries(&root)];
    while let Some(level) = pending.last_mut() {
        let Some(e) = (!level.is_empty()).then(|| level.remove(0)) else {
            pending.pop();
            stack.pop();
            continue;
        };
        if shown == limit {
            more = true;
            break;
        }
        let d = stack.last().map_or(0, |s| s.1);
        let indent = "  ".repeat(d + 1);
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(ft) = e.file_type() else { continue };
        shown += 1;
        if ft.is_symlink() {
            let target = std::fs::read_link(e.path())
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            out.push(format!("{indent}{name} -> {target} (link, not followed)"));
        } else if ft.is_dir() {
            out.push(format!("{indent}{name}/"));
            if d + 1 < depth {
                stack.push((e.path(), d + 1));
                pending.push(entries(&e.path()));
            }
        } else {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            out.push(format!("{indent}{name} ({len} bytes)"));
        }
    }
    if more {
        out.push(format!(
            "[stopped at {limit} entries; raise `limit` (max {MAX_LIST}) or list a subdirectory]"
        ));
    }
    Ok(out.join("\n"))
}

/// What `files_search` looks for.
enum Needle {
    Text(String),
    Regex(regex::Regex),
}

impl Needle {
    fn find(&self, line: &str) -> bool {
        match self {
            Needle::Text(t) => line.contains(t.as_str()),
            Needle::Regex(r) => r.is_match(line),
        }
    }
}

/// `files_search`: lines containing `pattern` (text, or a regex with `regex: true`)
/// in the files under `path`, skipping links, binary and big files.
pub fn search(args: &Value, sb: &SandboxInfo) -> R {
    let root = checked(sb, args, "path", Access::Read, sb.workdir())?;
    let pattern = str_arg(args, "pattern")?;
    let needle = if bool_arg(args, "regex") {
        Needle::Regex(
            regex::RegexBuilder::new(pattern)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("`pattern` is not a valid regex: {e}"))?,
        )
    } else {
        Needle::Text(pattern.to_owned())
    };
    let max = uint_arg(args, "max_results", 50, MAX_RESULTS)? as usize;
    let mut hits = Vec::new();
    let mut scanned = 0;
    let mut skipped = 0;
    let mut dirs = vec![root.clone()];
    'walk: while let Some(dir) = dirs.pop() {
        for e in entries(&dir) {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() {
                dirs.push(path);
                continue;
            }
            if !ft.is_file() {
                continue; // links are not followed
            }
            scanned += 1;
            if scanned > MAX_FILES_SCANNED {
                break 'walk;
            }
            let text = match e.metadata() {
                Ok(m) if m.len() <= MAX_SEARCH_FILE => read_text(&path).ok(),
                _ => None,
            };
            let Some(text) = text else {
                skipped += 1;
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if needle.find(line) {
                    let shown = homeagent_plugin_protocol::toolkit::prefix(line, 200);
                    hits.push(format!("{}:{}: {shown}", path.display(), i + 1));
                    if hits.len() == max {
                        break 'walk;
                    }
                }
            }
        }
    }
    let mut out = if hits.is_empty() {
        format!("no match for `{pattern}` under {}", root.display())
    } else {
        hits.join("\n")
    };
    if hits.len() == max {
        out.push_str(&format!(
            "\n[stopped at {max} results; narrow `path` or `pattern`, or raise `max_results` (max {MAX_RESULTS})]"
        ));
    }
    if scanned > MAX_FILES_SCANNED {
        out.push_str(&format!(
            "\n[stopped after {MAX_FILES_SCANNED} files; search a subdirectory]"
        ));
    }
    if skipped > 0 {
        out.push_str(&format!("\n({skipped} binary or large files skipped)"));
    }
    Ok(out)
}

fn tool(name: &str, description: &str, parameters: Value, access: Access, parallel_safe: bool) -> ToolRegister {
    ToolRegister {
        name: name.into(),
        description: description.into(),
        parameters,
        parallel_safe,
        paths: vec![PathArg::new("path", access)],
        ..ToolRegister::default()
    }
    .with_keywords(keywords_of(name))
}

/// Words a person may use when they need each tool (`ToolRegister::keywords`).
fn keywords_of(name: &str) -> &'static str {
    match name {
        "files_read" => "open, show, view, cat, contents, look at, what is in, 读取, 打开, 查看, 文件, 内容",
        "files_write" => "save, create, new file, write down, store, put into, 保存, 写入, 新建, 文件",
        "files_edit" => "change, modify, replace, update, fix, patch, set, 修改, 替换, 编辑, 改成",
        "files_list" => "directory, folder, ls, tree, contents of, 目录, 文件夹, 列出",
        "files_search" => "find, grep, mentions, contains, look for, occurrences, where, 查找, 搜索, 包含",
        _ => "",
    }
}

/// Runs `f` with the call's sandbox (refusing a call that came without one).
fn sandboxed(f: fn(&Value, &SandboxInfo) -> R) -> impl Fn(Value, &Call) -> R + Send + Sync + 'static {
    move |args, call| f(&args, call.require_sandbox()?)
}

/// The tools, for `homed plugin files` and tests.
pub fn plugin() -> Plugin {
    let path = |what: &str| json!({"type": "string", "description": what});
    Plugin::new("files")
        .tool_with_call(
            tool(
                "files_read",
                "Read a text file inside the sandbox roots (relative paths start in the work directory). \
                 Answers `PATH (lines A-B of N):` then the text. For long files give start_line/end_line \
                 (from 1); output over 16 KiB is cut with a marker. Binary files are refused.",
                json!({"type": "object", "properties": {
                    "path": path("file to read"),
                    "start_line": {"type": "integer", "description": "first line (from 1)"},
                    "end_line": {"type": "integer", "description": "last line (inclusive)"}
                }, "required": ["path"]}),
                Access::Read,
                true,
            ),
            sandboxed(read),
        )
        .tool_with_call(
            tool(
                "files_write",
                "Create or overwrite a text file inside the write roots (parent directories are created). \
                 `append: true` adds to the end instead. At most 4 MiB per call. To change part of a file, use files_edit.",
                json!({"type": "object", "properties": {
                    "path": path("file to write"),
                    "content": {"type": "string", "description": "the whole new text"},
                    "append": {"type": "boolean", "description": "append instead of overwriting"}
                }, "required": ["path", "content"]}),
                Access::Write,
                false,
            ),
            sandboxed(write),
        )
        .tool_with_call(
            tool(
                "files_edit",
                "Replace one exact piece of text in a file: `old` must occur exactly once (copy it from files_read, \
                 whitespace included; add surrounding lines if it occurs more than once). `new` may be empty to delete.",
                json!({"type": "object", "properties": {
                    "path": path("file to edit"),
                    "old": {"type": "string", "description": "the exact text to replace (must match once)"},
                    "new": {"type": "string", "description": "the replacement"}
                }, "required": ["path", "old", "new"]}),
                Access::Write,
                false,
            ),
            sandboxed(edit),
        )
        .tool_with_call(
            tool(
                "files_list",
                "List a directory inside the sandbox roots as a tree (default: the work directory, depth 1, 200 entries; \
                 depth up to 6, limit up to 2000). Symlinks are shown, not followed.",
                json!({"type": "object", "properties": {
                    "path": path("directory (default: the work directory)"),
                    "depth": {"type": "integer", "description": "levels to descend (default 1)"},
                    "limit": {"type": "integer", "description": "most entries (default 200)"}
                }}),
                Access::Read,
                true,
            ),
            sandboxed(list),
        )
        .tool_with_call(
            tool(
                "files_search",
                "Search file contents under a directory (default: the work directory): lines containing `pattern` \
                 (plain text; `regex: true` for a regular expression), as `PATH:LINE: text`. Skips binary files, \
                 files over 2 MiB and symlinks; at most `max_results` (default 50, max 500).",
                json!({"type": "object", "properties": {
                    "pattern": {"type": "string", "description": "text (or regex) to find"},
                    "path": path("directory to search (default: the work directory)"),
                    "regex": {"type": "boolean"},
                    "max_results": {"type": "integer"}
                }, "required": ["pattern"]}),
                Access::Read,
                true,
            ),
            sandboxed(search),
        )
}

/// Runs the plugin on stdin/stdout until the kernel stops it; the process exit code.
pub fn run() -> i32 {
    match plugin().run(|_| eprintln!("files plugin ready")) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("files plugin: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, SandboxInfo, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let secret = dir.path().join("secret");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("key.txt"), "sk-secret").unwrap();
        symlink(secret.join("key.txt"), work.join("link.txt")).unwrap();
        symlink(&secret, work.join("linkdir")).unwrap();
        let work = work.canonicalize().unwrap();
        let sb = SandboxInfo {
            write_roots: vec![work.clone()],
            ..SandboxInfo::default()
        };
        (dir, sb, work)
    }

    #[test]
    fn write_read_edit_round_trip() {
        let (_d, sb, work) = setup();
        let w = write(&json!({"path": "notes/a.txt", "content": "one\ntwo\nthree\n"}), &sb).unwrap();
        assert!(w.starts_with("created") && w.contains("notes/a.txt"), "{w}");
        let r = read(&json!({"path": "notes/a.txt", "start_line": 2, "end_line": 3}), &sb).unwrap();
        assert_eq!(
            r,
            format!("{} (lines 2-3 of 3):\ntwo\nthree", work.join("notes/a.txt").display())
        );
        assert!(
            write(
                &json!({"path": "notes/a.txt", "content": "four\n", "append": true}),
                &sb
            )
            .is_ok()
        );
        let e = edit(&json!({"path": "notes/a.txt", "old": "two", "new": "2"}), &sb).unwrap();
        assert!(e.contains("at line 2"), "{e}");
        assert_eq!(
            std::fs::read_to_string(work.join("notes/a.txt")).unwrap(),
            "one\n2\nthree\nfour\n"
        );
        let zero = edit(&json!({"path": "notes/a.txt", "old": "zzz", "new": ""}), &sb).unwrap_err();
        assert!(zero.contains("does not occur"), "{zero}");
        write(&json!({"path": "b.txt", "content": "x x"}), &sb).unwrap();
        let many = edit(&json!({"path": "b.txt", "old": "x", "new": "y"}), &sb).unwrap_err();
        assert!(many.contains("occurs 2 times"), "{many}");
        assert!(
            read(&json!({"path": "notes/a.txt", "start_line": 9}), &sb)
                .unwrap_err()
                .contains("past the end")
        );
    }

    #[test]
    fn escapes_binary_and_oversize_are_refused() {
        let (_d, sb, work) = setup();
        for (p, why) in [
            ("link.txt", "outside"),
            ("linkdir/key.txt", "outside"),
            ("../secret/key.txt", "contains `..`"),
            ("/etc/passwd", "outside"),
        ] {
            let e = read(&json!({ "path": p }), &sb).unwrap_err();
            assert!(e.contains(why), "{p}: {e}");
        }
        assert!(
            write(&json!({"path": "linkdir/new.txt", "content": "x"}), &sb)
                .unwrap_err()
                .contains("outside")
        );
        std::fs::write(work.join("bin.dat"), [0u8, 1, 2, 255]).unwrap();
        assert!(read(&json!({"path": "bin.dat"}), &sb).unwrap_err().contains("binary"));
        let big = "x".repeat(MAX_WRITE_BYTES + 1);
        assert!(
            write(&json!({"path": "big", "content": big}), &sb)
                .unwrap_err()
                .contains("limit")
        );
        // A huge read is cut with a marker.
        let lines: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(work.join("long.txt"), lines).unwrap();
        let r = read(&json!({"path": "long.txt"}), &sb).unwrap();
        assert!(
            r.len() < MAX_READ_OUTPUT + 300 && r.contains("[truncated:"),
            "{}",
            r.len()
        );
        // A link planted where a checked path was: not followed on open.
        assert!(open_file(&work.join("link.txt")).is_err());
        // A FIFO (no writer) is refused at once instead of hanging the call.
        let fifo = work.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in the test's own directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            read(&json!({"path": "fifo"}), &sb)
                .unwrap_err()
                .contains("not a regular file")
        );
        let none = SandboxInfo::default();
        assert!(
            read(&json!({"path": "x"}), &none)
                .unwrap_err()
                .contains("no read roots")
        );
    }

    #[test]
    fn list_and_search_stay_inside_and_are_capped() {
        let (_d, sb, _work) = setup();
        for i in 0..5 {
            write(
                &json!({"path": format!("d/f{i}.txt"), "content": format!("hello {i}\nbye\n")}),
                &sb,
            )
            .unwrap();
        }
        let l = list(&json!({"depth": 2}), &sb).unwrap();
        assert!(l.contains("  d/\n    f0.txt (12 bytes)"), "{l}");
        assert!(l.contains("linkdir -> ") && l.contains("not followed"), "{l}");
        let capped = list(&json!({"depth": 2, "limit": 3}), &sb).unwrap();
        assert!(capped.contains("[stopped at 3 entries"), "{capped}");
        let s = search(&json!({"pattern": "hello [0-2]", "regex": true}), &sb).unwrap();
        assert_eq!(s.lines().count(), 3, "{s}");
        let through_link = search(&json!({"pattern": "sk-secret"}), &sb).unwrap();
        assert!(
            through_link.starts_with("no match"),
            "links are not followed: {through_link}"
        );
        let c = search(&json!({"pattern": "bye", "max_results": 2}), &sb).unwrap();
        assert!(c.contains("[stopped at 2 results"), "{c}");
        assert!(
            search(&json!({"pattern": "(", "regex": true}), &sb)
                .unwrap_err()
                .contains("not a valid regex")
        );
    }
}
