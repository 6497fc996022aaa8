//! Every citation of the behaviour spec resolves. Code comments and docs cite
//! `docs/spec/kernel.md` as "kernel spec §N.M" (or a bare "spec §N.M") and
//! `docs/spec/subsystems.md` as "spec subsystems §N.M"; each cited number must be a
//! heading of that file. A citation of a section nobody wrote, or a renumbered heading,
//! fails here with the place that cites it.
//!
//! Every `§` number in the trees counts, lists and ranges number by number
//! (`§1.9–§1.15, §3` is 1.9, 1.10, …, 1.15 and 3): it belongs to the subsystems spec when
//! "subsystems" comes right before it, to another document when an RFC is named
//! (`RFC 6749 §5.1`), and to the kernel spec otherwise. `docs/spec/` itself, build output
//! and vendored packages are not scanned, nor is this file (its examples are no citations).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The trees whose comments and docs may cite the spec, from the workspace root.
const TREES: [&str; 6] = ["actors/src", "src", "plugins", "tests", "docs", "lua"];

/// Which spec file a citation points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spec {
    Kernel,
    Subsystems,
}

impl Spec {
    fn name(self) -> &'static str {
        match self {
            Spec::Kernel => "kernel",
            Spec::Subsystems => "subsystems",
        }
    }

    fn doc(self) -> &'static str {
        match self {
            Spec::Kernel => "docs/spec/kernel.md",
            Spec::Subsystems => "docs/spec/subsystems.md",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Citation {
    line: usize,
    spec: Spec,
    section: String,
}

/// What a `§` number belongs to, decided by the words right before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Spec(Spec),
    /// Another document's section (`RFC 6749 §5.1`): not ours to check.
    Foreign,
}

/// The file as one line of text: every line's indentation and comment marker
/// (`//!`, `///`, `//`, `--`) removed and the lines joined by a space, so a citation
/// wrapped across comment lines ("spec\n/// §1.14") reads as one. Each char keeps the
/// 1-based number of the line it came from.
fn flatten(text: &str) -> (Vec<char>, Vec<usize>) {
    let mut chars = Vec::new();
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line.trim_start();
        for marker in ["//!", "///", "//", "--"] {
            if let Some(r) = rest.strip_prefix(marker) {
                rest = r;
                break;
            }
        }
        for c in rest.chars().chain([' ']) {
            chars.push(c);
            lines.push(n + 1);
        }
    }
    (chars, lines)
}

/// A section number at `at` (`5`, `5.9`, `10.2.3`; a trailing `.` is not part of it)
/// and the index after it.
fn number(chars: &[char], at: usize) -> Option<(String, usize)> {
    let mut end = at;
    let mut out = String::new();
    loop {
        let start = end;
        while end < chars.len() && chars[end].is_ascii_digit() {
            end += 1;
        }
        if end == start {
            return None;
        }
        out.extend(&chars[start..end]);
        if end + 1 < chars.len() && chars[end] == '.' && chars[end + 1].is_ascii_digit() {
            out.push('.');
            end += 1;
        } else {
            return Some((out, end));
        }
    }
}

/// Whose section a `§` starts, from the words before it: "subsystems" (as in
/// "spec subsystems §", "subsystems spec §") names the subsystems spec, "RFC 6750 §"
/// another document, anything else ("kernel spec §", "spec §", "spec kernel §", a bare
/// "§") the kernel spec.
fn owner(before: &str) -> Owner {
    let words: Vec<String> = before
        .split(|c: char| c.is_whitespace() || "()[],:;`*".contains(c))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut words = words.iter().rev().skip_while(|w| *w == "spec" || *w == "spec's");
    match (words.next(), words.next()) {
        (Some(w), _) if w == "subsystems" => Owner::Spec(Spec::Subsystems),
        (Some(n), Some(rfc)) if rfc == "rfc" && n.chars().all(|c| c.is_ascii_digit()) => Owner::Foreign,
        _ => Owner::Spec(Spec::Kernel),
    }
}

/// Whether the text between two `§` numbers only joins them into one list or range
/// (`§3, §5.9`, `§1.11 and §12`, `§1.9–§1.15`), so the second has the first's owner.
fn joins(between: &str) -> bool {
    let t = between.trim();
    ["", ",", ";", "and", ", and", "or", "/", "&", "–", "-", "—"].contains(&t)
}

/// Every spec citation in `text`. A range (`§1.9–§1.15`, `§1.2-1.4`) counts each
/// number in it when both ends share their parent; otherwise both ends.
fn citations(text: &str) -> Vec<Citation> {
    let (chars, lines) = flatten(text);
    let mut found = Vec::new();
    let mut last: Option<(usize, Owner)> = None;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '§' {
            i += 1;
            continue;
        }
        let Some((first, mut end)) = number(&chars, i + 1) else {
            i += 1;
            continue;
        };
        let whose = match last {
            Some((prev, o)) if joins(&chars[prev..i].iter().collect::<String>()) => o,
            _ => owner(&chars[i.saturating_sub(60)..i].iter().collect::<String>()),
        };
        let mut sections = vec![first.clone()];
        if end < chars.len() && "–-—".contains(chars[end]) {
            let from = if chars.get(end + 1) == Some(&'§') {
                end + 2
            } else {
                end + 1
            };
            if let Some((to, after)) = number(&chars, from) {
                sections = expand(&first, &to);
                end = after;
            }
        }
        if let Owner::Spec(spec) = whose {
            for section in sections {
                found.push(Citation {
                    line: lines[i],
                    spec,
                    section,
                });
            }
        }
        last = Some((end, whose));
        i = end;
    }
    found
}

/// The numbers of a range: `1.9`..`1.15` is 1.9, 1.10, …, 1.15.
fn expand(from: &str, to: &str) -> Vec<String> {
    fn split(s: &str) -> (&str, &str) {
        s.rsplit_once('.').unwrap_or(("", s))
    }
    let (fp, fl) = split(from);
    let (tp, tl) = split(to);
    match (fl.parse::<u32>(), tl.parse::<u32>()) {
        (Ok(a), Ok(b)) if fp == tp && a <= b && b - a < 50 => (a..=b)
            .map(|n| {
                if fp.is_empty() {
                    n.to_string()
                } else {
                    format!("{fp}.{n}")
                }
            })
            .collect(),
        _ => vec![from.to_string(), to.to_string()],
    }
}

/// The section numbers a spec file has headings for: a line of `#`s whose first word
/// is the number (`### 1.9 Safe points`, `## 3. The task lifecycle`).
fn headings(doc: &str) -> Vec<String> {
    doc.lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| l.trim_start_matches('#').split_whitespace().next())
        .map(|w| w.trim_end_matches('.').to_string())
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .collect()
}

/// The source and doc files under `dir`: `.rs`, `.md` and `.lua`, leaving out build
/// output, vendored packages, hidden directories and the spec itself.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            let skip = name == "target" || name == "node_modules" || name.starts_with('.');
            if !skip && path != root().join("docs/spec") {
                walk(&path, out);
            }
        } else if ["rs", "md", "lua"]
            .iter()
            .any(|e| path.extension().is_some_and(|x| x == *e))
            && !path.ends_with("tests/spec_citations.rs")
        {
            out.push(path);
        }
    }
}

/// Every citation in the trees, with the file it is in (from the workspace root).
fn scan() -> Vec<(String, Citation)> {
    let mut files = Vec::new();
    for tree in TREES {
        walk(&root().join(tree), &mut files);
    }
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let rel = file.strip_prefix(root()).unwrap_or(&file).display().to_string();
        all.extend(citations(&text).into_iter().map(|c| (rel.clone(), c)));
    }
    all
}

#[test]
fn every_spec_citation_resolves_to_a_heading() {
    let read = |spec: Spec| {
        let path = root().join(spec.doc());
        let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{} cannot be read: {e}", spec.doc()));
        headings(&doc)
    };
    let kernel = read(Spec::Kernel);
    let subsystems = read(Spec::Subsystems);
    let all = scan();
    let unresolved: Vec<String> = all
        .iter()
        .filter(|(_, c)| {
            let have = if c.spec == Spec::Kernel { &kernel } else { &subsystems };
            !have.contains(&c.section)
        })
        .map(|(path, c)| format!("{path}:{}: {} §{}", c.line, c.spec.name(), c.section))
        .collect();
    assert!(
        unresolved.is_empty(),
        "{} spec citation(s) name no heading of docs/spec/:\n{}\n\nEither add the section to \
         docs/spec/kernel.md or docs/spec/subsystems.md (a heading whose first word is the \
         number, e.g. `### 6.2 Resident sub-agents`, describing what the code does), or fix \
         the citation: a bare `spec §N` means the kernel spec, write `spec subsystems §N` \
         for the subsystems spec.",
        unresolved.len(),
        unresolved.join("\n")
    );
    assert!(
        all.len() > 50,
        "only {} citations found: is the scanner blind?",
        all.len()
    );
}

#[test]
fn the_scanner_finds_citations_in_text() {
    let text = "\
//! The turn (kernel spec §1.9–§1.11, §3, §5.9).
/// TF-IDF (spec subsystems §1.6); levels (spec §1.2-1.3).
/// A header (RFC 6750 §3, rule 8) and spec
/// §1.14) and the offload (§6.1 steps 2–5); spec kernel §4.
";
    let found: Vec<(usize, &str, String)> = citations(text)
        .into_iter()
        .map(|c| (c.line, c.spec.name(), c.section))
        .collect();
    let want = [
        (1, "kernel", "1.9"),
        (1, "kernel", "1.10"),
        (1, "kernel", "1.11"),
        (1, "kernel", "3"),
        (1, "kernel", "5.9"),
        (2, "subsystems", "1.6"),
        (2, "kernel", "1.2"),
        (2, "kernel", "1.3"),
        (4, "kernel", "1.14"),
        (4, "kernel", "6.1"),
        (4, "kernel", "4"),
    ];
    let want: Vec<(usize, &str, String)> = want.iter().map(|(l, s, n)| (*l, *s, n.to_string())).collect();
    assert_eq!(found, want);
}

#[test]
fn headings_are_read_by_their_first_word() {
    let doc = "# Title\n## 3. The task lifecycle\n### 1.9 Safe points\n#### 10.2.3 Deep\ntext 5.8\n";
    assert_eq!(headings(doc), ["3", "1.9", "10.2.3"]);
}
