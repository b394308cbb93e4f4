//! Wrappers that see every request a model receives.
//!
//! [`ObservedModel`] forwards every call to the model it wraps after handing
//! the request to a [`RequestObserver`]. [`RecordingModel`] is the observed
//! model that keeps the requests in memory (tests, `toolgate run --emit
//! prompts`); other observers (e.g. the server's prompt trace file) plug in the same way.

use std::sync::{Arc, Mutex, PoisonError};

use toolgate_protocol::{ModelMessage, ModelRequest, ModelResponse};

use super::{LanguageModel, ModelError, ModelStream};

/// Sees each request before the model does.
pub trait RequestObserver: Send + Sync {
    /// Called once per model call, with the exact request.
    fn observe(&self, request: &ModelRequest);
}

/// A model whose requests an observer sees first.
#[derive(Debug, Clone)]
pub struct ObservedModel<M, O> {
    inner: M,
    observer: O,
}

impl<M, O> ObservedModel<M, O> {
    /// Wraps `inner`, reporting its requests to `observer`.
    pub fn with_observer(inner: M, observer: O) -> Self {
        Self { inner, observer }
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.observer
    }
}

impl<M: LanguageModel, O: RequestObserver> LanguageModel for ObservedModel<M, O> {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        self.observer.observe(&request);
        self.inner.generate(request).await
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        self.observer.observe(&request);
        self.inner.stream(request).await
    }
}

/// Keeps every request in memory. Clones share the log.
#[derive(Debug, Clone, Default)]
pub struct RequestLog(Arc<Mutex<Vec<ModelRequest>>>);

impl RequestLog {
    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl RequestObserver for RequestLog {
    fn observe(&self, request: &ModelRequest) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(request.clone());
    }
}

/// A model that keeps a copy of every request sent to it. Clones share the record.
pub type RecordingModel<M> = ObservedModel<M, RequestLog>;

impl<M> ObservedModel<M, RequestLog> {
    /// Wraps `inner` with an empty log.
    pub fn new(inner: M) -> Self {
        Self::with_observer(inner, RequestLog::default())
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.observer.requests()
    }

    /// Every prompt so far, in order.
    pub fn prompts(&self) -> Vec<Vec<ModelMessage>> {
        self.requests().into_iter().map(|request| request.prompt.into_vec()).collect()
    }
}
