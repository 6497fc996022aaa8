//! The spans a turn makes for OpenTelemetry (`core.telemetry.otlp_endpoint`, exported
//! by the daemon's `telemetry` module): `turn` (one per task), inside it `recall`, each
//! `llm_call` and each `tool_call`. They carry this target, which the exporter's layer
//! alone listens to and the log output leaves out, so a turn's trace costs nothing
//! while no collector is set.

/// The target of the turn's spans (the tracing macros take it as a literal; a test
/// checks the two agree).
pub const TARGET: &str = "homed::trace";

/// A span of the turn's trace: `trace_span!(name, parent: &span, fields…)`.
#[macro_export]
macro_rules! trace_span {
    (parent: $parent:expr, $name:literal $(, $($fields:tt)*)?) => {
        tracing::info_span!(target: "homed::trace", parent: $parent, $name $(, $($fields)*)?)
    };
    ($name:literal $(, $($fields:tt)*)?) => {
        tracing::info_span!(target: "homed::trace", $name $(, $($fields)*)?)
    };
}
