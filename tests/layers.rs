//! No circles of imports (issue 34): within each crate of the workspace, the files that
//! import each other in a loop are found from the code's own paths (`use crate::…`,
//! `super::…`, `self::…`, a child module named first, and such paths written inline),
//! and there must be none. A path through a module face (`pub use x::*`, `pub use
//! x::{A, B as C}`) lands in the file that defines the name, so a face does not hide a
//! loop behind it; test modules do not count. A loop fails this test with each import
//! that makes it; the way out is to give the shared piece a module of its own (as
//! `agent/subagents.rs`, `config/error.rs`, `memory/documents/tools.rs` did).
//!
//! Above the files, the kernel's top-level modules stand in layers ([`KERNEL_LAYERS`]):
//! a module imports only modules below it, so no two modules lean on each other even
//! through files that do not loop. An import that runs back up fails with its files.
//!
//! Why a test of our own and not a tool run: it runs in `.ci/run` with nothing to
//! install, and it reads exactly the module layout rustc does (`a.rs` or `a/mod.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The crates' source roots (each with `lib.rs`), relative to the workspace.
fn crates() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("src"), PathBuf::from("actors/src")];
    for dir in std::fs::read_dir(root().join("plugins")).unwrap().flatten() {
        let src = dir.path().join("src");
        if src.join("lib.rs").exists() {
            out.push(src.strip_prefix(root()).unwrap().to_owned());
        } else if dir.path().join("lib.rs").exists() {
            out.push(dir.path().strip_prefix(root()).unwrap().to_owned());
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            // Binaries are crates of their own; they import the library by name.
            if p.file_name().is_some_and(|n| n != "bin") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of `file` under the crate root `src` (`a/b.rs`, `a/b/mod.rs` → a::b).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments, string literals and its test modules.
fn code_of(text: &str) -> String {
    without_test_modules(&plain_code(text))
}

/// `code` (comments and strings gone) without each `#[cfg(test)] mod … { … }`: a test
/// module's `super` is the file, not its parent, and tests may import what they check.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(i) = rest.find("#[cfg(test)]") {
        let after = rest[i + 12..].trim_start();
        if !is_test_module(after) {
            out.push_str(&rest[..i + 12]);
            rest = &rest[i + 12..];
            continue;
        }
        out.push_str(&rest[..i]);
        let Some(open) = after.find('{') else { return out };
        let mut depth = 0;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Whether what follows a `#[cfg(test)]` is a module (`mod`, `pub mod`, `pub(crate) mod`).
fn is_test_module(after: &str) -> bool {
    let after = after.trim_start();
    let after = match after.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => rest.split_once(')').map_or(rest, |(_, r)| r),
        Some(rest) => rest,
        None => after,
    };
    after.trim_start().starts_with("mod ")
}

/// `text` without comments, and each string literal as `""`.
fn plain_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i + 1 < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            // A string (raw strings of `r"…"` and `r#"…"#` too): skipped whole.
            let raw = i > 0 && (b[i - 1] == b'r' || b[i - 1] == b'#');
            let hashes = if raw {
                b[..i].iter().rev().take_while(|c| **c == b'#').count()
            } else {
                0
            };
            i += 1;
            while i < b.len() {
                if !raw && b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if b[i] == b'"' && b[i + 1..].iter().take(hashes).all(|c| *c == b'#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('"', '\n'), not a lifetime.
            let end = text[i + 1..].find('\'').map_or(b.len(), |e| i + 1 + e + 1);
            i = end.max(i + 1);
            out.push(' ');
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// `use a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e` (whitespace already removed).
fn expand(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let mut leaves = Vec::new();
    expand_with_aliases(tree, prefix, &mut leaves);
    out.extend(leaves.into_iter().map(|(path, _)| path));
}

/// [`expand`], each path with its `as` alias (`a::{b as c}` → `a::b`, `c`).
fn expand_with_aliases(tree: &str, prefix: &str, out: &mut Vec<(String, Option<String>)>) {
    let join = |p: &str, s: &str| {
        if p.is_empty() {
            s.to_owned()
        } else {
            format!("{p}::{s}")
        }
    };
    match tree.find('{') {
        None => {
            let (path, alias) = match tree.split_once(" as ") {
                Some((path, alias)) => (path, Some(alias.trim().to_owned())),
                None => (tree, None),
            };
            out.push((join(prefix, path), alias));
        }
        Some(open) => {
            let head = tree[..open].trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let base = join(prefix, head);
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand_with_aliases(inner[start..i].trim(), &base, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            if !inner[start..].trim().is_empty() {
                expand_with_aliases(inner[start..].trim(), &base, out);
            }
        }
    }
}

/// The paths a file names: its `use` trees, expanded, and inline `crate::`/`super::` paths.
fn paths_of(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        let after = &rest[i + 4..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = after.find(';') else { break };
        let mut tree: String = after[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        for (from, to) in [
            (" {", "{"),
            ("{ ", "{"),
            (" }", "}"),
            (", ", ","),
            (" ,", ","),
            (":: ", "::"),
            (" ::", "::"),
        ] {
            tree = tree.replace(from, to);
        }
        expand(&tree, "", &mut out);
    }
    let b = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':') {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            let path = code[at..end].trim_end_matches(':');
            // A bare `super::{…}` names its items through the `use` tree above.
            if path.contains("::") {
                out.push(path.to_owned());
            }
        }
    }
    out
}

/// What a module hands on with `pub use`: `(module, name)` → the absolute path it names
/// (`"*"` for a glob), so a path through a face lands in the file that defines the name.
type Reexports = HashMap<(Vec<String>, String), Vec<String>>;

/// The absolute module path `path` names from module `here` (`crate::`, `self::`,
/// `super::`, or a child module of `here` named first, as a `use` inside it may).
fn absolute(path: &str, here: &[String], modules: &HashMap<Vec<String>, PathBuf>) -> Option<Vec<String>> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut abs: Vec<String> = match segs.first().copied() {
        Some("crate") => {
            segs.remove(0);
            Vec::new()
        }
        Some("self") => {
            segs.remove(0);
            here.to_vec()
        }
        Some("super") => {
            let mut m = here.to_vec();
            while segs.first() == Some(&"super") {
                segs.remove(0);
                m.pop();
            }
            m
        }
        Some(child) if modules.contains_key(&[here, &[child.to_owned()]].concat()) => here.to_vec(),
        _ => return None,
    };
    abs.extend(segs.iter().map(|s| (*s).to_owned()));
    Some(abs)
}

/// The file a path lands in: the longest prefix naming a module file of the crate, or,
/// when that module only hands the next name on (`pub use`), the file it comes from.
fn resolve_with(
    path: &str,
    here: &[String],
    modules: &HashMap<Vec<String>, PathBuf>,
    reexports: &Reexports,
    defines: &HashMap<PathBuf, String>,
) -> Option<PathBuf> {
    let mut abs = absolute(path, here, modules)?;
    // A face may hand on what another face hands on; a few steps always suffice.
    for _ in 0..8 {
        let k = (1..=abs.len()).rev().find(|k| modules.contains_key(&abs[..*k]))?;
        let Some(name) = abs.get(k) else {
            return modules.get(&abs[..k]).cloned();
        };
        let module = abs[..k].to_vec();
        let next = reexports.get(&(module.clone(), name.clone())).cloned().or_else(|| {
            // Through a glob: only if the glob's module defines the name.
            let target = reexports.get(&(module.clone(), "*".to_owned()))?;
            let file = modules.get(target)?;
            let code = defines.get(file)?;
            defines_name(code, name).then(|| [target.as_slice(), std::slice::from_ref(name)].concat())
        });
        match next {
            Some(target) if target != abs[..=k] => {
                abs = [target, abs[k + 1..].to_vec()].concat();
            }
            _ => return modules.get(&module).cloned(),
        }
    }
    None
}

/// Whether `code` defines an item called `name` (its own, not one it imports).
fn defines_name(code: &str, name: &str) -> bool {
    [
        "struct", "enum", "fn", "const", "static", "type", "trait", "mod", "union",
    ]
    .iter()
    .any(|kw| {
        let needle = format!("{kw} {name}");
        code.match_indices(&needle).any(|(i, _)| {
            let after = code[i + needle.len()..].chars().next();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

/// The `pub use` re-exports of a file that is module `here`: each exported name (its
/// alias, if renamed) → the absolute path it names.
fn reexports_of(code: &str, here: &[String], modules: &HashMap<Vec<String>, PathBuf>, out: &mut Reexports) {
    for (i, _) in code.match_indices("pub use ") {
        let after = &code[i + 8..];
        let Some(end) = after.find(';') else { continue };
        let tree: String = after[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        let tree = tree
            .replace(" {", "{")
            .replace("{ ", "{")
            .replace(" }", "}")
            .replace(", ", ",");
        let mut paths = Vec::new();
        expand_with_aliases(&tree, "", &mut paths);
        for (path, alias) in paths {
            let Some(abs) = absolute(&path, here, modules) else {
                continue;
            };
            let name = alias.unwrap_or_else(|| abs.last().cloned().unwrap_or_default());
            let target = if name == "*" {
                abs[..abs.len() - 1].to_vec()
            } else {
                abs
            };
            out.insert((here.to_vec(), name), target);
        }
    }
}

/// Strongly connected components with more than one file (Tarjan, iterative enough for
/// a few hundred files).
fn loops(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<BTreeSet<PathBuf>> {
    struct T<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: HashMap<&'a PathBuf, usize>,
        low: HashMap<&'a PathBuf, usize>,
        on: BTreeSet<&'a PathBuf>,
        stack: Vec<&'a PathBuf>,
        next: usize,
        out: Vec<BTreeSet<PathBuf>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a PathBuf) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        if let Some(ws) = t.edges.get(v) {
            for w in ws {
                let Some((w, _)) = t.edges.get_key_value(w) else {
                    continue;
                };
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        on: BTreeSet::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Every file's imports of other files of its crate, for the crates `crates` (source
/// roots under `root`); paths are relative to `root`. The crate root, a face that only
/// hands names on, is left out.
fn import_graph(root: &Path, crates: &[PathBuf]) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    tied_graph(root, crates)
        .into_iter()
        .map(|(f, ts)| (f, ts.into_keys().collect()))
        .collect()
}

/// [`import_graph`], each import with the first path that makes it (for the failure
/// message: what ties a loop).
fn tied_graph(root: &Path, crates: &[PathBuf]) -> BTreeMap<PathBuf, BTreeMap<PathBuf, String>> {
    let mut edges: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
    for krate in crates {
        let src = root.join(krate);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let modules: HashMap<Vec<String>, PathBuf> = files
            .iter()
            .map(|f| (module_of(&src, f), f.strip_prefix(root).unwrap().to_owned()))
            .filter(|(m, _)| !m.is_empty())
            .collect();
        let codes: HashMap<PathBuf, String> = files
            .iter()
            .map(|f| {
                (
                    f.strip_prefix(root).unwrap().to_owned(),
                    code_of(&std::fs::read_to_string(f).unwrap()),
                )
            })
            .collect();
        let mut reexports = Reexports::new();
        for f in &files {
            let here = module_of(&src, f);
            if !here.is_empty() {
                reexports_of(&codes[f.strip_prefix(root).unwrap()], &here, &modules, &mut reexports);
            }
        }
        for f in &files {
            let here = module_of(&src, f);
            if here.is_empty() {
                continue;
            }
            let me = f.strip_prefix(root).unwrap().to_owned();
            let out = edges.entry(me.clone()).or_default();
            for p in paths_of(&codes[&me]) {
                // In a.rs and in a/mod.rs alike, `self::` is `a` and `super::` its parent.
                if let Some(target) = resolve_with(&p, &here, &modules, &reexports, &codes)
                    && target != me
                {
                    out.entry(target).or_insert(p);
                }
            }
        }
    }
    edges
}

#[test]
fn no_files_import_each_other_in_a_loop() {
    let tied = tied_graph(&root(), &crates());
    let edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = tied
        .iter()
        .map(|(f, ts)| (f.clone(), ts.keys().cloned().collect()))
        .collect();
    assert!(edges.len() > 200, "the sources were not found: {} files", edges.len());
    let found: Vec<Vec<String>> = loops(&edges)
        .iter()
        .map(|l| {
            let mut ties = Vec::new();
            for f in l {
                for (t, path) in &tied[f] {
                    if l.contains(t) {
                        ties.push(format!("{} -> {} ({path})", f.display(), t.display()));
                    }
                }
            }
            ties
        })
        .collect();
    assert!(
        found.is_empty(),
        "files import each other in a loop (give the shared piece its own module, or \
         pass it in from above); each import with a path that makes it: {found:#?}"
    );
}

/// A scratch crate at `k/src` under a temporary directory, with `files` (path, text).
fn scratch(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let file = dir.path().join("k/src").join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    dir
}

/// The loops of the scratch crate in `dir`, each as its files' paths.
fn loops_in(dir: &tempfile::TempDir) -> Vec<Vec<String>> {
    loops(&import_graph(dir.path(), &[PathBuf::from("k/src")]))
        .iter()
        .map(|l| l.iter().map(|p| p.to_string_lossy().into_owned()).collect())
        .collect()
}

/// The check sees a loop when there is one, through each way of naming a file (so a
/// pass above means something): `use crate::…` with a group, an inline `crate::` path,
/// `super::` from a `mod.rs`, and not a path in a comment or a string.
#[test]
fn the_check_finds_a_loop_of_each_kind() {
    let dir = scratch(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n"),
        ("a.rs", "use crate::{b::{X, Y as Z}, d};\npub struct W;\n"),
        ("b.rs", "pub struct X;\npub struct Y;\npub fn f(_: crate::c::V) {}\n"),
        ("c/mod.rs", "pub mod e;\npub struct V(super::a::W);\n"),
        (
            "c/e.rs",
            "// crate::d::Q in a comment\nconst S: &str = \"crate::d::Q\";\n",
        ),
        ("d.rs", "pub struct Q;\n"),
    ]);
    let names = loops_in(&dir);
    assert_eq!(names, [["k/src/a.rs", "k/src/b.rs", "k/src/c/mod.rs"]]);
}

/// A loop behind a module face is found in the files that define what they use: the
/// face's glob and named re-exports are followed, a `use child::…` inside a module
/// counts, and a test module's `super` is not its file's parent.
#[test]
fn the_check_sees_through_a_face_and_not_into_test_modules() {
    let dir = scratch(&[
        ("lib.rs", "pub mod f;\npub mod g;\npub mod h;\npub mod t;\npub mod u;\n"),
        // f is a face: its items live in f/inner.rs.
        (
            "f/mod.rs",
            "mod inner;\npub use inner::*;\npub use inner::A as Renamed;\n",
        ),
        ("f/inner.rs", "pub struct A;\npub fn uses(_: crate::g::B) {}\n"),
        ("g.rs", "pub struct B;\npub fn back(_: crate::f::A) {}\n"),
        // t's test module reaches u (its `super` is t); u uses t: no loop.
        (
            "t.rs",
            "pub struct T;\n#[cfg(test)]\nmod checks {\n    use super::super::u::U;\n}\n",
        ),
        ("u.rs", "pub struct U(crate::t::T);\n"),
        // h/mod.rs names its child without `self::`; the child uses h's own item.
        ("h/mod.rs", "mod kid;\nuse kid::K;\npub struct Only;\n"),
        ("h/kid.rs", "pub struct K(super::Only);\n"),
    ]);
    let names = loops_in(&dir);
    assert_eq!(
        names,
        [
            vec!["k/src/f/inner.rs", "k/src/g.rs"],
            vec!["k/src/h/kid.rs", "k/src/h/mod.rs"]
        ]
    );
}

/// Files of `crate_src` (relative to the workspace) whose code (comments, strings and
/// the test module left out) contains one of `needles`, less those under an allowed
/// prefix. Each rule below names its exceptions with the reason beside them, so a new
/// use is either one of them or a failure that says which rule it breaks.
fn offenders(crate_src: &str, needles: &[&str], allowed: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root().join(crate_src), &mut files);
    let mut out: Vec<String> = files
        .iter()
        .filter(|f| {
            let code = code_of(&std::fs::read_to_string(f).unwrap());
            needles.iter().any(|n| code.contains(n))
        })
        .map(|f| f.strip_prefix(root()).unwrap().to_string_lossy().into_owned())
        .filter(|f| !allowed.iter().any(|a| f.starts_with(a)))
        .collect();
    out.sort();
    out
}

/// ARCHITECTURE, "Every timestamp and heartbeat reads the kernel clock": a virtual
/// clock moves the whole kernel only if nothing else reads the time.
#[test]
fn the_kernel_reads_the_time_only_from_its_clock() {
    let found = offenders(
        "actors/src",
        &["SystemTime::now", "Utc::now", "Local::now"],
        &[
            "actors/src/clock.rs",        // the clock itself: wall time plus the virtual offset
            "actors/src/agent/input.rs",  // request ids: unique, not a time
            "actors/src/llm/opaque.rs",   // a per-process nonce
            "actors/src/memory/store.rs", // document ids: unique, not a time
            // A vendor's request signature and its `Retry-After` date are the vendor's
            // wall time, whatever the kernel's clock says.
            "actors/src/llm/provider.rs",
        ],
    );
    assert!(
        found.is_empty(),
        "these read the system time (use `crate::clock::now_ms()`, or add the file here \
         with why its time is not the kernel's): {found:#?}"
    );
}

/// ARCHITECTURE, "The kernel is a network client only of what the owner configured,
/// and runs no terminal".
#[test]
fn the_kernel_opens_no_socket_but_its_configured_clients() {
    let found = offenders(
        "actors/src",
        &[
            "awc::",
            "reqwest",
            "hyper::",
            "TcpStream",
            "TcpListener",
            "UdpSocket",
            "UnixListener",
            "HttpServer",
            "tokio::net",
            "openpty",
            "portable_pty",
        ],
        &[
            "actors/src/llm/provider.rs",         // the LLM sources
            "actors/src/llm/adapter.rs",          // the Lua adapters' HTTP
            "actors/src/memory/embed/remote.rs",  // the remote embedder
            "actors/src/memory/embed/install.rs", // the embedder's set-up from a package index
        ],
    );
    assert!(
        found.is_empty(),
        "kernel code opening a socket or a terminal (channels and terminals live in `src/` \
         and the plugins): {found:#?}"
    );
}

/// ARCHITECTURE, "crossbeam-channel only where threads hand each other work".
#[test]
fn crossbeam_channels_only_between_threads() {
    let mut found = Vec::new();
    for c in crates() {
        found.extend(offenders(
            &c.to_string_lossy(),
            &["crossbeam"],
            &[
                "plugins/mcp/",                // the MCP bridge's reader and writer threads
                "plugins/protocol/src/sdk.rs", // the plugin SDK's stdin thread
            ],
        ));
    }
    assert!(
        found.is_empty(),
        "crossbeam in async code (use tokio's channels on the actix threads): {found:#?}"
    );
}

/// The kernel crate's top-level modules, bottom up. A module's files import only files
/// of their own module and of the modules listed before it: the runtime first (what
/// every actor stands on), then settings, what the model calls cost, the vendors, the
/// firewall that stands between them and the tools, the stage host with its tool
/// registry, memory, the agent, the plugins that extend the agent, and the list of the
/// kernel's databases that names every tier's store. `docs/ARCHITECTURE.md` (code map)
/// draws the same order.
const KERNEL_LAYERS: &[&str] = &[
    // The runtime: leaves first.
    "clock",
    "fault",
    "trace",
    "panic",
    "pattern",
    "control",
    "scheduler",
    "modgraph",
    "registry",
    "host",
    "addr",
    "bus",
    "supervisor",
    // What runs on it.
    "config",
    "usage",
    "llm",
    "firewall",
    "stages",
    "memory",
    "agent",
    "plugins",
    "schema",
];

/// The imports of `edges` (files of the crate at `src`, relative to the workspace) that
/// run from a module up to one listed after it in `layers`, or touch a module the list
/// does not name; each as `from -> to (why)`.
fn upward(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>, src: &str, layers: &[&str]) -> Vec<String> {
    let top = |f: &Path| -> Option<String> {
        let rel = f.strip_prefix(src).ok()?;
        let first = rel.iter().next()?.to_string_lossy();
        Some(first.trim_end_matches(".rs").to_owned())
    };
    let rank = |m: &str| layers.iter().position(|l| *l == m);
    let mut out = Vec::new();
    for (from, tos) in edges {
        let Some(a) = top(from) else { continue };
        for to in tos {
            let Some(b) = top(to) else { continue };
            if a == b {
                continue;
            }
            match (rank(&a), rank(&b)) {
                (Some(i), Some(j)) if j < i => {}
                (Some(_), Some(_)) => out.push(format!(
                    "{} -> {} (`{a}` stands below `{b}`)",
                    from.display(),
                    to.display()
                )),
                (None, _) | (_, None) => out.push(format!(
                    "{} -> {} (`{}` is in no layer: add it to KERNEL_LAYERS)",
                    from.display(),
                    to.display(),
                    if rank(&a).is_none() { &a } else { &b }
                )),
            }
        }
    }
    out
}

/// ARCHITECTURE, "The kernel's modules stand in layers".
#[test]
fn the_kernels_modules_import_only_the_layers_below() {
    let edges = import_graph(&root(), &[PathBuf::from("actors/src")]);
    let found = upward(&edges, "actors/src", KERNEL_LAYERS);
    assert!(
        found.is_empty(),
        "imports that run back up the kernel's layers (move the shared piece down, or \
         hand it in from above as a value or a function): {found:#?}"
    );
    // Every module of the crate has its place.
    let mut modules = Vec::new();
    for e in std::fs::read_dir(root().join("actors/src")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().trim_end_matches(".rs").to_owned();
        if name != "lib" {
            modules.push(name);
        }
    }
    modules.sort();
    let mut listed: Vec<String> = KERNEL_LAYERS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(modules, listed, "KERNEL_LAYERS and the modules of actors/src differ");
}

/// The layer check sees an import up, and one into a module of no layer.
#[test]
fn the_layer_check_finds_an_import_up() {
    let dir = scratch(&[
        ("lib.rs", "pub mod low;\npub mod high;\npub mod stray;\n"),
        ("low.rs", "pub fn f(_: crate::high::part::T) {}\n"),
        ("high/mod.rs", "pub mod part;\nuse crate::low::f;\n"),
        ("high/part.rs", "pub struct T;\n"),
        ("stray.rs", "use crate::low::f;\n"),
    ]);
    let edges = import_graph(dir.path(), &[PathBuf::from("k/src")]);
    let found = upward(&edges, "k/src", &["low", "high"]);
    assert_eq!(
        found,
        [
            "k/src/low.rs -> k/src/high/part.rs (`low` stands below `high`)",
            "k/src/stray.rs -> k/src/low.rs (`stray` is in no layer: add it to KERNEL_LAYERS)",
        ]
    );
}

/// ARCHITECTURE, "reached only through a `TAddr`; no code keeps a raw `Addr`": actix's
/// own address type is named only where a `TAddr` is made and filled (the supervisor
/// starts the actor and installs its address in the slot).
#[test]
fn no_code_names_a_raw_actor_address_but_the_slot_and_the_supervisor() {
    let allowed = ["actors/src/addr.rs", "actors/src/supervisor/mod.rs"];
    let mut found = Vec::new();
    for c in crates() {
        let mut files = Vec::new();
        rust_files(&root().join(&c), &mut files);
        for f in files {
            let rel = f.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
            let code = code_of(&std::fs::read_to_string(&f).unwrap());
            let raw = code
                .match_indices("Addr<")
                .any(|(i, _)| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'));
            if raw && !allowed.contains(&rel.as_str()) {
                found.push(rel);
            }
        }
    }
    assert!(
        found.is_empty(),
        "these name actix's raw `Addr` (hold a `TAddr`, which survives restarts and counts \
         the mailbox): {found:#?}"
    );
}

/// ARCHITECTURE, "Settings are read only through typed structs": outside `config/`, a
/// setting's key is spelt only where a text names it for a person or the model, or
/// where an open-ended family is parsed. Each such file is listed with why; a key spelt
/// anywhere else fails (name a `config::keys` constant, or read a typed group).
#[test]
fn setting_keys_are_spelt_only_in_config_and_the_listed_mentions() {
    let allowed: &[(&str, &str)] = &[
        ("actors/src/config/", "the key table and the typed groups"),
        ("actors/src/llm/source.rs", "the open family core.llm.sources.<name>.*"),
        (
            "actors/src/usage/budget.rs",
            "the budget families, per scope and per source",
        ),
        (
            "actors/src/agent/settings.rs",
            "the settings tool's refusal lists and its examples",
        ),
        ("actors/src/agent/relay.rs", "which changed key reloads what (a prefix)"),
        ("actors/src/llm/provider.rs", "an error text naming the key to fix"),
        ("actors/src/usage/ledger.rs", "an error text naming the key to fix"),
        (
            "actors/src/firewall/",
            "audit reasons and error texts naming the rule's key",
        ),
        ("actors/src/memory/media/actor.rs", "a log line naming the key to fix"),
        ("src/bench", "the benchmarks' daemon settings"),
        ("src/eval_daemon.rs", "the evaluation's daemon settings"),
        ("src/metrics.rs", "a metric's help text"),
        ("src/http/api.rs", "an error text's example"),
    ];
    let mut found = Vec::new();
    for c in ["actors/src", "src"] {
        let mut files = Vec::new();
        rust_files(&root().join(c), &mut files);
        for f in files {
            let rel = f.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
            if rel.ends_with("/tests.rs") || allowed.iter().any(|(a, _)| rel.starts_with(a)) {
                continue;
            }
            // Strings kept (the key is one), so the test module is cut where it starts:
            // braces inside strings would mislead a brace count.
            let text = std::fs::read_to_string(&f).unwrap();
            let text = match text
                .match_indices("#[cfg(test)]")
                .find(|(i, _)| is_test_module(&text[i + 12..]))
            {
                Some((i, _)) => &text[..i],
                None => &text,
            };
            let spelt = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| l.contains("\"core."));
            if spelt {
                found.push(rel);
            }
        }
    }
    assert!(
        found.is_empty(),
        "these spell a setting's key (name a `config::keys` constant or read a typed \
         group; or list the file here with why): {found:#?}"
    );
}

/// ARCHITECTURE, "a map that is true": `actors/src/lib.rs` lists every module of the
/// kernel, bottom up as [`KERNEL_LAYERS`] orders them, and `agent/mod.rs` every module
/// of the agent — so a newcomer's first page names each module, and a new one that is
/// not placed there fails here.
#[test]
fn the_crate_pages_list_every_module_in_its_place() {
    let docs_of = |file: &str| -> String {
        std::fs::read_to_string(root().join(file))
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let lib = docs_of("actors/src/lib.rs");
    let at = |m: &str| {
        lib.find(&format!("[`{m}`]"))
            .or_else(|| lib.find(&format!("[`{m}`](")))
            .unwrap_or_else(|| panic!("actors/src/lib.rs does not list `{m}`"))
    };
    let places: Vec<usize> = KERNEL_LAYERS.iter().map(|m| at(m)).collect();
    assert!(
        places.windows(2).all(|w| w[0] < w[1]),
        "actors/src/lib.rs lists the modules out of their layer order ({KERNEL_LAYERS:?})"
    );
    let agent = docs_of("actors/src/agent/mod.rs");
    let code = std::fs::read_to_string(root().join("actors/src/agent/mod.rs")).unwrap();
    let missing: Vec<&str> = code
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';')))
        .filter(|m| !agent.contains(&format!("[`{m}`]")))
        .collect();
    assert!(missing.is_empty(), "actors/src/agent/mod.rs does not list {missing:?}");
}
