//! The model as every run calls it, traced: a `chat {model}` span per
//! request (the GenAI conventions' inference span), from the request to the
//! end of its answer (a stream's last part, or the stream dropped), with the
//! token usage and finish reason the model reports. The state wraps the
//! model in it only when traces are exported.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use toolgate::model::{DynLanguageModel, LanguageModel, ModelError, ModelStream, SharedModel};
use toolgate_protocol::{FinishReason, ModelRequest, ModelResponse, ModelStreamPart, Usage};
use tracing::{Instrument, Span};

use super::SPAN_TARGET;

/// A model whose requests are traced.
pub(crate) struct TracedModel {
    inner: SharedModel,
}

impl TracedModel {
    /// Traces `inner`'s requests.
    pub(crate) fn new(inner: SharedModel) -> Self {
        Self { inner }
    }

    fn span(&self) -> Span {
        let (provider, model) = (DynLanguageModel::provider(&*self.inner), DynLanguageModel::model_id(&*self.inner));
        tracing::info_span!(
            target: SPAN_TARGET,
            "chat",
            otel.name = format!("chat {model}"),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = provider,
            gen_ai.request.model = model,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        )
    }
}

impl LanguageModel for TracedModel {
    fn provider(&self) -> &str {
        DynLanguageModel::provider(&*self.inner)
    }

    fn model_id(&self) -> &str {
        DynLanguageModel::model_id(&*self.inner)
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let span = self.span();
        let answer = self.inner.generate_boxed(request).instrument(span.clone()).await;
        match &answer {
            Ok(response) => finished(&span, response.finish_reason, &response.usage),
            Err(error) => failed(&span, error),
        }
        answer
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let span = self.span();
        match self.inner.stream_boxed(request).instrument(span.clone()).await {
            Ok(stream) => Ok(Box::pin(TracedStream { inner: stream, span })),
            Err(error) => {
                failed(&span, &error);
                Err(error)
            }
        }
    }
}

/// Records how a model request ended.
fn finished(span: &Span, reason: FinishReason, usage: &Usage) {
    span.record("gen_ai.response.finish_reasons", finish_reason(reason));
    // As integers (a `u64` would be exported as text).
    if let Some(tokens) = usage.input_tokens {
        span.record("gen_ai.usage.input_tokens", i64::try_from(tokens).unwrap_or(i64::MAX));
    }
    if let Some(tokens) = usage.output_tokens {
        span.record("gen_ai.usage.output_tokens", i64::try_from(tokens).unwrap_or(i64::MAX));
    }
}

/// A finish reason as the AI SDK names it.
fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content-filter",
        FinishReason::ToolCalls => "tool-calls",
        FinishReason::Error => "error",
        FinishReason::Other => "other",
    }
}

/// Records a failed model request.
fn failed(span: &Span, error: &ModelError) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", error_type(error));
}

/// The error's kind, as `error.type` names it (never its text).
fn error_type(error: &ModelError) -> &'static str {
    match error {
        ModelError::Authentication { .. } => "authentication",
        ModelError::BadRequest { .. } => "bad_request",
        ModelError::RateLimited { .. } => "rate_limited",
        ModelError::Server { .. } => "server",
        ModelError::Transport { .. } => "transport",
        ModelError::StreamInterrupted { .. } => "stream_interrupted",
        ModelError::InvalidResponse { .. } => "invalid_response",
        ModelError::ContextTooLong { .. } => "context_too_long",
        ModelError::Configuration { .. } => "configuration",
    }
}

/// A model's stream inside its span, which ends with the stream.
struct TracedStream {
    inner: ModelStream,
    span: Span,
}

impl Stream for TracedStream {
    type Item = <ModelStream as Stream>::Item;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let span = self.span.clone();
        let _entered = span.enter();
        let polled = self.inner.as_mut().poll_next(context);
        match &polled {
            Poll::Ready(Some(Ok(ModelStreamPart::Finish { finish_reason, usage, .. }))) => {
                finished(&span, *finish_reason, usage);
            }
            Poll::Ready(Some(Err(error))) => failed(&span, error),
            _ => {}
        }
        polled
    }
}
