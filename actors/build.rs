//! Embeds every bundled LLM adapter (`lua/*.lua` at the workspace root) into the
//! kernel, so the daemon needs no files on disk to talk to a vendor.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../lua");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "lua"))
                .filter_map(|p| Some((p.file_stem()?.to_str()?.to_owned(), p.canonicalize().ok()?)))
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    let mut out = String::from(
        "/// `(name, source)` of every adapter in `lua/`, sorted by name.\npub static BUNDLED: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &entries {
        println!("cargo:rerun-if-changed={}", path.display());
        writeln!(out, "    ({name:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    out.push_str("];\n");
    // Shared modules adapters load with `require("<name>")`.
    let lib_dir = dir.join("lib");
    println!("cargo:rerun-if-changed={}", lib_dir.display());
    let mut libs: Vec<(String, PathBuf)> = std::fs::read_dir(&lib_dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "lua"))
                .filter_map(|p| Some((p.file_stem()?.to_str()?.to_owned(), p.canonicalize().ok()?)))
                .collect()
        })
        .unwrap_or_default();
    libs.sort();
    out.push_str("/// `(name, source)` of every shared module in `lua/lib/`.\npub static LIBS: &[(&str, &str)] = &[\n");
    for (name, path) in &libs {
        println!("cargo:rerun-if-changed={}", path.display());
        writeln!(out, "    ({name:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("bundled_adapters.rs");
    std::fs::write(dest, out).unwrap();
}
