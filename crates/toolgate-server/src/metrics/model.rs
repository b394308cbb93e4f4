//! The model as every run calls it, timed: `toolgate_model_request_seconds`
//! from the request to the end of its answer (a stream's last part, or the
//! stream dropped).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::Stream;
use toolgate::model::{DynLanguageModel, LanguageModel, ModelError, ModelStream, SharedModel};
use toolgate_protocol::{ModelRequest, ModelResponse};

use super::Metrics;

/// A model whose requests are timed into [`Metrics`].
pub(crate) struct TimedModel {
    inner: SharedModel,
    metrics: Arc<Metrics>,
}

impl TimedModel {
    /// Times `inner`'s requests.
    pub(crate) fn new(inner: SharedModel, metrics: Arc<Metrics>) -> Self {
        Self { inner, metrics }
    }
}

impl LanguageModel for TimedModel {
    fn provider(&self) -> &str {
        DynLanguageModel::provider(&*self.inner)
    }

    fn model_id(&self) -> &str {
        DynLanguageModel::model_id(&*self.inner)
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let started = Instant::now();
        let answer = self.inner.generate_boxed(request).await;
        self.metrics.model_request(LanguageModel::provider(self), LanguageModel::model_id(self), started.elapsed());
        answer
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let started = Instant::now();
        match self.inner.stream_boxed(request).await {
            Ok(stream) => {
                let labels = (LanguageModel::provider(self).to_owned(), LanguageModel::model_id(self).to_owned());
                Ok(Box::pin(TimedStream { inner: stream, started, labels, metrics: Some(self.metrics.clone()) }))
            }
            Err(error) => {
                self.metrics.model_request(
                    LanguageModel::provider(self),
                    LanguageModel::model_id(self),
                    started.elapsed(),
                );
                Err(error)
            }
        }
    }
}

/// A model's stream that reports its time once, when it ends or is dropped.
struct TimedStream {
    inner: ModelStream,
    started: Instant,
    labels: (String, String),
    metrics: Option<Arc<Metrics>>,
}

impl TimedStream {
    fn report(&mut self) {
        if let Some(metrics) = self.metrics.take() {
            metrics.model_request(&self.labels.0, &self.labels.1, self.started.elapsed());
        }
    }
}

impl Stream for TimedStream {
    type Item = <ModelStream as Stream>::Item;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(context);
        if let Poll::Ready(None) = polled {
            self.report();
        }
        polled
    }
}

impl Drop for TimedStream {
    fn drop(&mut self) {
        self.report();
    }
}
