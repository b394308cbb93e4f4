//! The server's Prometheus metrics: one registry per server ([`Metrics`]),
//! rendered in the text format by `GET /metrics`.
//!
//! Where each series is fed:
//! - `toolgate_http_requests_total{route, status}` and
//!   `toolgate_http_request_duration_seconds{route}`: the router's middleware
//!   (`http::track`), by route template (never a raw path, so the labels
//!   stay bounded);
//! - `toolgate_store_operation_seconds{op}`, `toolgate_approvals_decided_total{outcome}`,
//!   `toolgate_approval_decision_seconds` and `toolgate_tool_calls_total{tool, outcome}`:
//!   the store every path writes through (`store::MeteredStore`), from the
//!   transitions it applies, whichever path decided (the chat's claim, a
//!   vote, a timer, a withdrawal) and whichever replica;
//! - `toolgate_model_request_seconds{provider, model}`: the model every run calls
//!   (`model::TimedModel`), until its answer (or its stream) ends;
//! - `toolgate_continuation_seconds`: the continuation of a conversation,
//!   from the last decision of its step to the continued run's start;
//! - `toolgate_notifications_total{channel, outcome}`: the delivery worker,
//!   once an attempt is recorded (a channel's name is the config's);
//! - `toolgate_approvals_pending` and `toolgate_outbox_pending`: counted in
//!   the store at each scrape ([`Metrics::scrape`]), so every replica reports
//!   the same truth.
//!
//! A tool's label is the name its approval was issued for: a tool the
//! toolkit or the config offers (the engine issues no approval for any
//! other), so the label set stays bounded.

pub(crate) mod http;
pub(crate) mod model;
pub(crate) mod store;

use std::time::Duration;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};
use toolgate::ledger::LedgerStore;

/// Every series the server exports, by name (`examples/grafana/toolgate.json`
/// charts each of them; a test holds the two together).
pub const SERIES: [&str; 11] = [
    "toolgate_approvals_pending",
    "toolgate_approvals_decided_total",
    "toolgate_approval_decision_seconds",
    "toolgate_continuation_seconds",
    "toolgate_tool_calls_total",
    "toolgate_notifications_total",
    "toolgate_outbox_pending",
    "toolgate_http_requests_total",
    "toolgate_http_request_duration_seconds",
    "toolgate_model_request_seconds",
    "toolgate_store_operation_seconds",
];

/// How a decided approval ended, as `toolgate_approvals_decided_total` labels it.
pub(crate) const DECIDED: [&str; 4] = ["approved", "denied", "expired", "withdrawn"];

/// The server's metrics (see the module docs). Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    store_seconds: HistogramVec,
    decided: IntCounterVec,
    decision_seconds: Histogram,
    continuation_seconds: Histogram,
    tool_calls: IntCounterVec,
    model_seconds: HistogramVec,
    notifications: IntCounterVec,
    approvals_pending: IntGauge,
    outbox_pending: IntGauge,
}

impl Metrics {
    /// A registry with every series, each at zero. Fails only if a series
    /// is defined wrongly (a name, a label or buckets), which every test run
    /// would show.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let human = vec![1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14_400.0, 86_400.0];
        let store = vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];
        let model = vec![0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];
        let metrics = Self {
            http_requests: counter("toolgate_http_requests_total", "HTTP requests answered.", &["route", "status"])?,
            http_duration: histogram_vec(
                "toolgate_http_request_duration_seconds",
                "How long an HTTP request took to answer (its headers; a stream goes on after).",
                &["route"],
                prometheus::DEFAULT_BUCKETS.to_vec(),
            )?,
            store_seconds: histogram_vec(
                "toolgate_store_operation_seconds",
                "How long a ledger store operation took.",
                &["op"],
                store,
            )?,
            decided: counter("toolgate_approvals_decided_total", "Approvals decided, by outcome.", &["outcome"])?,
            decision_seconds: histogram(
                "toolgate_approval_decision_seconds",
                "From an approval's issue to its decision: how long people take.",
                human.clone(),
            )?,
            continuation_seconds: histogram(
                "toolgate_continuation_seconds",
                "From the last decision of a step to the server's continued run.",
                human,
            )?,
            tool_calls: counter("toolgate_tool_calls_total", "Gated tool calls, by outcome.", &["tool", "outcome"])?,
            model_seconds: histogram_vec(
                "toolgate_model_request_seconds",
                "How long a model request took, to the end of its answer.",
                &["provider", "model"],
                model,
            )?,
            notifications: counter(
                "toolgate_notifications_total",
                "Notification delivery attempts, by channel and outcome (a failed attempt that is retried counts too).",
                &["channel", "outcome"],
            )?,
            approvals_pending: gauge(
                "toolgate_approvals_pending",
                "Approvals waiting for a decision, in the whole store (every replica reports the same).",
            )?,
            outbox_pending: gauge("toolgate_outbox_pending", "Notifications waiting for an attempt or a retry.")?,
            registry,
        };
        metrics.register()?;
        for outcome in DECIDED {
            metrics.decided.with_label_values(&[outcome]);
        }
        Ok(metrics)
    }

    fn register(&self) -> Result<(), prometheus::Error> {
        let collectors: [Box<dyn prometheus::core::Collector>; 11] = [
            Box::new(self.approvals_pending.clone()),
            Box::new(self.outbox_pending.clone()),
            Box::new(self.notifications.clone()),
            Box::new(self.http_requests.clone()),
            Box::new(self.http_duration.clone()),
            Box::new(self.store_seconds.clone()),
            Box::new(self.decided.clone()),
            Box::new(self.decision_seconds.clone()),
            Box::new(self.continuation_seconds.clone()),
            Box::new(self.tool_calls.clone()),
            Box::new(self.model_seconds.clone()),
        ];
        collectors.into_iter().try_for_each(|collector| self.registry.register(collector))
    }

    /// Every series in the Prometheus text format, the store's gauges read
    /// from `store` first (when the server has one; a store that fails leaves
    /// them as they were, with a warning).
    pub async fn scrape(&self, store: Option<&dyn LedgerStore>) -> String {
        if let Some(store) = store {
            match (store.count_pending().await, store.count_pending_deliveries().await) {
                (Ok(approvals), Ok(deliveries)) => {
                    self.approvals_pending.set(i64::try_from(approvals).unwrap_or(i64::MAX));
                    self.outbox_pending.set(i64::try_from(deliveries).unwrap_or(i64::MAX));
                }
                (Err(error), _) | (_, Err(error)) => tracing::warn!(%error, "cannot count what waits in the store"),
            }
        }
        self.render()
    }

    /// Every series in the Prometheus text format, as they stand.
    pub fn render(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_else(|error| {
            tracing::error!(%error, "the metrics could not be rendered");
            String::new()
        })
    }

    /// An HTTP request answered on `route` (its template) with `status`.
    pub(crate) fn http_request(&self, route: &str, status: u16, took: Duration) {
        self.http_requests.with_label_values(&[route, &status.to_string()]).inc();
        self.http_duration.with_label_values(&[route]).observe(took.as_secs_f64());
    }

    /// A store operation `op` took `took`.
    pub(crate) fn store_operation(&self, op: &str, took: Duration) {
        self.store_seconds.with_label_values(&[op]).observe(took.as_secs_f64());
    }

    /// An approval was decided (`outcome`: one of [`DECIDED`]) `waited` after its issue.
    pub(crate) fn decided(&self, outcome: &str, waited: Duration) {
        self.decided.with_label_values(&[outcome]).inc();
        self.decision_seconds.observe(waited.as_secs_f64());
    }

    /// A gated call of `tool` ended (`executed`, `denied`, `failed`, `interrupted`).
    pub(crate) fn tool_call(&self, tool: &str, outcome: &str) {
        self.tool_calls.with_label_values(&[tool, outcome]).inc();
    }

    /// A model request to `provider`'s `model` took `took`.
    pub(crate) fn model_request(&self, provider: &str, model: &str, took: Duration) {
        self.model_seconds.with_label_values(&[provider, model]).observe(took.as_secs_f64());
    }

    /// A notification attempt on `channel` was recorded: delivered, or failed.
    pub(crate) fn notification(&self, channel: &str, delivered: bool) {
        let outcome = if delivered { "delivered" } else { "failed" };
        self.notifications.with_label_values(&[channel, outcome]).inc();
    }

    /// A conversation's step was continued `lag` after its last decision.
    pub(crate) fn continued(&self, lag: Duration) {
        self.continuation_seconds.observe(lag.as_secs_f64());
    }
}

fn counter(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(Opts::new(name, help), labels)
}

fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> prometheus::Result<HistogramVec> {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
}

fn gauge(name: &str, help: &str) -> prometheus::Result<IntGauge> {
    IntGauge::new(name, help)
}

fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> prometheus::Result<Histogram> {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
}
