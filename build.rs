//! Link settings of the shipped binaries.
//!
//! Relative relocations packed (`DT_RELR`): a position-independent executable keeps
//! ASLR, and its ~100,000 pointer relocations take a few kilobytes instead of 2.4 MB
//! of `.rela.dyn` (issue: `homed` <= 25 MB). Needs GNU ld >= 2.38 or lld and glibc >=
//! 2.36 at run time (Debian 12); `HOMEAGENT_NO_RELR=1` turns it off for older systems.

fn main() {
    println!("cargo:rerun-if-env-changed=HOMEAGENT_NO_RELR");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && std::env::var_os("HOMEAGENT_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
