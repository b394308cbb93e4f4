//! A wrapper that records every request a model receives.

use std::sync::{Arc, Mutex, PoisonError};

use toolgate_protocol::{ModelRequest, ModelResponse};

use super::{LanguageModel, ModelError, ModelStream};

/// Wraps a model and keeps a copy of every request sent to it. Clones share the record.
#[derive(Debug, Clone)]
pub struct RecordingModel<M> {
    inner: M,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl<M> RecordingModel<M> {
    /// Wraps `inner`.
    pub fn new(inner: M) -> Self {
        Self { inner, requests: Arc::default() }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn record(&self, request: &ModelRequest) {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).push(request.clone());
    }
}

impl<M: LanguageModel> LanguageModel for RecordingModel<M> {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        self.record(&request);
        self.inner.generate(request).await
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        self.record(&request);
        self.inner.stream(request).await
    }
}
