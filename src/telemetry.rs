//! OpenTelemetry traces of a turn, off by default: `core.telemetry.otlp_endpoint` names
//! an OTLP/HTTP collector (`http://127.0.0.1:4318`, or the full `…/v1/traces` URL), and
//! the spans the kernel makes for a turn — `turn`, with `recall`, each `llm_call` and
//! each `tool_call` inside it (target [`homeagent_actors::trace::TARGET`]) — are sent
//! there as protobuf, in batches, from the exporter's own thread. Nothing else the
//! daemon traces leaves the machine.
//!
//! Why a reloadable layer: logging starts before the settings are read, and the owner
//! may point the daemon at a collector (or stop) while it runs; the layer is empty until
//! the setting names one, and empty again when it is cleared.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::{Registry, reload};

type OtelLayer = tracing_opentelemetry::OpenTelemetryLayer<Registry, opentelemetry_sdk::trace::Tracer>;

/// The slot the daemon's subscriber holds (see [`layer`]).
pub type Slot = reload::Layer<Option<OtelLayer>, Registry>;

static HANDLE: OnceLock<reload::Handle<Option<OtelLayer>, Registry>> = OnceLock::new();
/// The provider exporting now, shut down (flushed) when replaced or at exit.
static PROVIDER: Mutex<Option<SdkTracerProvider>> = Mutex::new(None);

/// How long finished spans wait before a batch goes out: short, so a turn's trace is at
/// the collector seconds after the turn, long enough to batch a busy minute.
const BATCH_DELAY: Duration = Duration::from_secs(1);

/// The empty slot for the subscriber; [`apply`] fills it.
pub fn layer() -> Slot {
    let (slot, handle) = reload::Layer::new(None);
    let _ = HANDLE.set(handle);
    slot
}

/// The traces URL for an endpoint: a base gets the OTLP/HTTP path appended.
fn traces_url(endpoint: &str) -> String {
    let e = endpoint.trim().trim_end_matches('/');
    if e.ends_with("/v1/traces") {
        e.to_owned()
    } else {
        format!("{e}/v1/traces")
    }
}

/// Points the exporter at `endpoint` (empty: off). The previous exporter is flushed and
/// shut down on a thread of its own (it may block on a slow collector).
pub fn apply(endpoint: &str) -> Result<(), String> {
    let Some(handle) = HANDLE.get() else {
        return Ok(());
    };
    let old = PROVIDER.lock().map_err(|e| e.to_string())?.take();
    if let Some(old) = old {
        std::thread::spawn(move || {
            let _ = old.shutdown();
        });
    }
    if endpoint.trim().is_empty() {
        handle.reload(None).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let url = traces_url(endpoint);
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url.clone())
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot export traces to {url}: {e}"))?;
    let batch = opentelemetry_sdk::trace::BatchConfigBuilder::default()
        .with_scheduled_delay(BATCH_DELAY)
        .build();
    let processor = opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("homed")
                .build(),
        )
        .build();
    let tracer = provider.tracer("homed");
    handle
        .reload(Some(tracing_opentelemetry::layer().with_tracer(tracer)))
        .map_err(|e| e.to_string())?;
    *PROVIDER.lock().map_err(|e| e.to_string())? = Some(provider);
    tracing::info!(%url, "turn traces are exported (core.telemetry.otlp_endpoint)");
    Ok(())
}

/// Flushes what is buffered (at shutdown).
pub fn shutdown() {
    if let Ok(mut p) = PROVIDER.lock()
        && let Some(p) = p.take()
    {
        let _ = p.shutdown();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_base_gets_the_traces_path() {
        assert_eq!(super::traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(super::traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(super::traces_url(" http://c/v1/traces "), "http://c/v1/traces");
    }
}
