//! OpenTelemetry traces over OTLP, configured by the standard environment
//! variables only, and off (at no cost) when none of them is set.
//!
//! Contract:
//! - [`Telemetry::from_env`] reads [`ENV`]: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), `OTEL_EXPORTER_OTLP_PROTOCOL`
//!   (`http/protobuf`, the default, or `grpc`), `OTEL_SERVICE_NAME` (default
//!   `toolgate`), `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`,
//!   `OTEL_BSP_SCHEDULE_DELAY`. With none of them set (or `OTEL_SDK_DISABLED=true`)
//!   there is no exporter, no layer and no span: every span the server and
//!   the engine open has the target [`SPAN_TARGET`], which only the layer of
//!   [`Telemetry::layer`] enables (a log layer leaves it out with [`logs_only`]).
//! - The spans (the OpenTelemetry semantic conventions for HTTP servers and
//!   generative AI): one per HTTP request (`{method} {route}`, the route
//!   template, the status; a W3C `traceparent` header makes it a child of the
//!   caller's trace), `chat {model}` per model request (`gen_ai.operation.name`,
//!   `gen_ai.provider.name`, `gen_ai.request.model`, the token usage and
//!   finish reason when the model reports them), `execute_tool {tool}` per
//!   tool run (the engine's, with `gen_ai.tool.name` and `gen_ai.tool.call.id`),
//!   `approval {what}` per approval requested or decided (`toolgate.approval.id`,
//!   `toolgate.approval.decision`, `toolgate.approval.approvers`, `toolgate.rule`),
//!   and `continue_conversation` per server-side continuation, with a span
//!   link to each of its approvals' `approval requested` span: the trace of
//!   the request that asked.
//! - Where a continuation finds what it links to: the `issued` audit event of
//!   an approval requested while traces are exported carries `traceparent`
//!   in its data (the W3C trace context of its `approval requested` span).
//! - Tool inputs and outputs are recorded only when [`Telemetry::layer`] is
//!   asked for content (`--trace-content`); they may hold secrets.
//! - Spans are exported in batches from a thread of their own; [`flush`]
//!   exports what is left (the launcher calls it at shutdown), and
//!   [`Telemetry::shutdown`] ends the exporter.

pub(crate) mod approval;
pub(crate) mod http;
pub(crate) mod model;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
pub use toolgate::{CONTENT_TARGET, SPAN_TARGET};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterFn, filter_fn};
use tracing_subscriber::registry::LookupSpan;

/// The environment variables that turn traces on (any one of them set).
pub const ENV: [&str; 9] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_TRACES_EXPORTER",
];

/// The service name when `OTEL_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "toolgate";

/// Whether spans are exported in this process (set once, by [`Telemetry::from_env`]).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// The exporting provider, for [`flush`].
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Why traces could not be set up from the environment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// A protocol this build does not export with.
    #[error("{variable} is `{value}`; toolgate exports traces over `http/protobuf` (the default) or `grpc`")]
    Protocol {
        /// The variable.
        variable: &'static str,
        /// What it says.
        value: String,
    },
    /// `OTEL_TRACES_EXPORTER` names an exporter other than `otlp` or `none`.
    #[error("OTEL_TRACES_EXPORTER is `{0}`; toolgate exports traces with `otlp` (or `none`)")]
    Exporter(String),
    /// The exporter refused its configuration (an endpoint that is not a URL, ...).
    #[error("cannot set up the OTLP exporter: {0}")]
    Build(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// Traces exported over OTLP (see the module docs). Built once per process.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// The exporter the environment asks for, or `None` when none of [`ENV`]
    /// is set, `OTEL_SDK_DISABLED` is `true` or `OTEL_TRACES_EXPORTER` is
    /// `none`. With `grpc` it must be called inside a Tokio runtime, which
    /// must outlive it. Also installs the W3C trace context propagator.
    pub fn from_env() -> Result<Option<Self>, TelemetryError> {
        let set = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
        let disabled = set("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"));
        if disabled || !ENV.iter().any(|name| set(name).is_some()) {
            return Ok(None);
        }
        match set("OTEL_TRACES_EXPORTER").map(|value| value.to_ascii_lowercase()) {
            Some(value) if value == "none" => return Ok(None),
            Some(value) if value != "otlp" => return Err(TelemetryError::Exporter(value)),
            _ => {}
        }
        for variable in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(value) = set(variable) {
                if !matches!(value.as_str(), "http/protobuf" | "grpc") {
                    return Err(TelemetryError::Protocol { variable, value });
                }
                break;
            }
        }
        // The exporter reads the endpoint and protocol variables itself, the
        // provider the sampler's and the batch processor's.
        let exporter = opentelemetry_otlp::SpanExporter::builder().build()?;
        let service = set("OTEL_SERVICE_NAME").unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let _ = PROVIDER.set(provider.clone());
        ENABLED.store(true, Ordering::Relaxed);
        Ok(Some(Self { provider }))
    }

    /// The layer that turns the spans of [`SPAN_TARGET`] into exported spans,
    /// recording tool inputs and outputs too when `content` (`--trace-content`).
    pub fn layer<S>(&self, content: bool) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("toolgate"))
            .with_threads(false)
            .with_location(false)
            .with_tracked_inactivity(false)
            .with_filter(filter_fn(move |metadata| {
                let target = metadata.target();
                target == SPAN_TARGET || (content && target == CONTENT_TARGET)
            }))
    }

    /// Exports every span that ended and stops the exporter (blocks; call it
    /// outside the runtime's tasks, before the runtime stops).
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "the trace exporter did not shut down cleanly");
        }
    }
}

/// A log layer's filter: everything but the spans kept for traces.
pub fn logs_only() -> FilterFn {
    filter_fn(|metadata| !metadata.target().starts_with(SPAN_TARGET))
}

/// Whether spans are exported in this process.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Exports the spans that ended and are not exported yet (blocks until the
/// exporter answers or gives up); nothing without traces.
pub fn flush() {
    if let Some(provider) = PROVIDER.get()
        && let Err(error) = provider.force_flush()
    {
        tracing::warn!(%error, "cannot export the last spans");
    }
}
