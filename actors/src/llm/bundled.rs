//! The adapters compiled into the binary (from `lua/` by `build.rs`).

include!(concat!(env!("OUT_DIR"), "/bundled_adapters.rs"));

/// The bundled source of adapter `name`.
pub fn bundled(name: &str) -> Option<&'static str> {
    BUNDLED.iter().find(|(n, _)| *n == name).map(|(_, src)| *src)
}

/// Names of all bundled adapters.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUNDLED.iter().map(|(n, _)| *n)
}

/// The shared module `name` (from `lua/lib/`), for the adapters' `require`.
pub fn lib(name: &str) -> Option<&'static str> {
    LIBS.iter().find(|(n, _)| *n == name).map(|(_, src)| *src)
}
