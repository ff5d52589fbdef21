//! Produce and fetch traces exported over OTLP/HTTP (`otlp_endpoint`),
//! beside the log lines: the `produce` span with its `partition`,
//! `fdatasync` and `isr_confirmation` children, and the `fetch` span,
//! become OpenTelemetry spans (tracing-opentelemetry) sent in batches to a
//! collector by the SDK's own thread, never by a shard. Protobuf by
//! default, JSON with `otlp_protocol = "http/json"`; `otlp_sample_ratio`
//! keeps that share of the traces. Without an endpoint nothing here runs.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

/// The modules whose spans are exported: the produce path (request,
/// partition, flush, ISR wait) and the fetch handler.
const TRACED: [&str; 3] = [
    "broker::server::handlers::produce",
    "broker::server::handlers::fetch",
    "broker::partition::append",
];

/// The exporter's settings, from the broker's configuration.
pub struct OtlpSettings<'a> {
    /// The collector's base URL (`/v1/traces` is added).
    pub endpoint: &'a str,
    /// `http/protobuf` or `http/json`.
    pub protocol: &'a str,
    /// The share of traces kept, 0 to 1.
    pub sample_ratio: f64,
    /// This broker's node id, an attribute of every span's resource.
    pub node_id: i32,
}

/// The layer that exports the traced spans, and the provider to shut down
/// (flushing what is batched) when the process stops.
pub fn layer(
    settings: &OtlpSettings<'_>,
) -> Result<(Box<dyn Layer<Registry> + Send + Sync>, SdkTracerProvider), String> {
    let protocol = match settings.protocol {
        "http/protobuf" => Protocol::HttpBinary,
        "http/json" => Protocol::HttpJson,
        other => {
            return Err(format!(
                "otlp_protocol {other:?}: http/protobuf or http/json"
            ))
        }
    };
    let endpoint = format!("{}/v1/traces", settings.endpoint.trim_end_matches('/'));
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| format!("the OTLP exporter: {e}"))?;
    let resource = Resource::builder()
        .with_service_name("broker")
        .with_attribute(KeyValue::new("broker.node_id", i64::from(settings.node_id)))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::TraceIdRatioBased(settings.sample_ratio))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("broker");
    let traced = TRACED.iter().fold(Targets::new(), |t, target| {
        t.with_target(*target, tracing::Level::DEBUG)
    });
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(traced);
    Ok((Box::new(layer), provider))
}
