//! `docs/ARCHITECTURE.md` stays true where it can be checked: every invariant names
//! the tests that hold it (`*Held by:*`), and each test it names exists in the file it
//! names. A renamed or deleted test fails here, naming the invariant that lost it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path as the map writes it: from the workspace root (`tests/…`, `src/…`,
/// `actors/tests/…`, `plugins/…`, `i18n/…`) or, for the kernel's modules, from
/// `actors/src/` (`memory/recall.rs`).
fn resolve(path: &str) -> PathBuf {
    let from_root = ["tests/", "src/", "actors/", "plugins/", "i18n/"];
    if from_root.iter().any(|p| path.starts_with(p)) {
        root().join(path)
    } else {
        root().join("actors/src").join(path)
    }
}

/// The backticked words of `text`.
fn ticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

fn has_fn(file: &Path, name: &str) -> bool {
    std::fs::read_to_string(file).is_ok_and(|code| code.contains(&format!("fn {name}(")))
}

#[test]
fn every_invariant_names_tests_that_exist() {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let section = doc
        .split("\n## Invariants")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has an Invariants section");
    let section = section.split("\n## ").next().unwrap();
    let bullets: Vec<&str> = section.split("\n* ").skip(1).collect();
    assert!(bullets.len() > 30, "only {} invariants found", bullets.len());
    let mut problems = Vec::new();
    let mut named = 0;
    for bullet in &bullets {
        let title = bullet.split("**").nth(1).unwrap_or(bullet);
        let Some((_, held)) = bullet.split_once("*Held by:*") else {
            problems.push(format!("{title}: no `*Held by:*` line"));
            continue;
        };
        // `file`: `test`, `test`; `file`: `test` … — a word with a `/` or ending in
        // `.rs` is a file, a word of letters, digits and `_` a test in the last file.
        let mut file: Option<PathBuf> = None;
        for word in ticked(held) {
            if word.ends_with(".rs") {
                let f = resolve(word);
                if !f.exists() {
                    problems.push(format!("{title}: no file {word}"));
                }
                file = Some(f);
            } else if word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && word.contains('_') {
                let Some(f) = &file else { continue };
                named += 1;
                if !has_fn(f, word) {
                    problems.push(format!("{title}: no `fn {word}` in {}", f.display()));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/ARCHITECTURE.md names tests that are not there: {problems:#?}"
    );
    assert!(named > 60, "only {named} tests named");
}
