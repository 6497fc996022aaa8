//! Embeds every bundled LLM adapter (`lua/*.lua` at the workspace root) and the shared
//! modules they `require` (`lua/lib/*.lua`) into the kernel, so the daemon needs no
//! files on disk to talk to a vendor.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `(stem, absolute path)` of the `.lua` files directly in `dir`, sorted.
fn lua_files(dir: &Path) -> Vec<(String, PathBuf)> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "lua"))
                .filter_map(|p| Some((p.file_stem()?.to_str()?.to_owned(), p.canonicalize().ok()?)))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn table(out: &mut String, name: &str, doc: &str, files: &[(String, PathBuf)]) {
    writeln!(out, "/// {doc}\npub static {name}: &[(&str, &str)] = &[").unwrap();
    for (stem, path) in files {
        println!("cargo:rerun-if-changed={}", path.display());
        writeln!(out, "    ({stem:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    out.push_str("];\n");
}

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../lua");
    let mut out = String::new();
    table(
        &mut out,
        "BUNDLED",
        "`(name, source)` of every adapter in `lua/`, sorted by name.",
        &lua_files(&dir),
    );
    table(
        &mut out,
        "LIBS",
        "`(name, source)` of every shared module in `lua/lib/`.",
        &lua_files(&dir.join("lib")),
    );
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("bundled_adapters.rs");
    std::fs::write(dest, out).unwrap();
}
