//! The model contract of toolgate: the interface every provider implements.
//!
//! [`LanguageModel`] uses return-position `impl Trait` (no boxing on the hot
//! path) and works through `&M` and `Arc<M>`. When the model is chosen at
//! runtime, box it as [`SharedModel`] (an `Arc<dyn DynLanguageModel>`), which
//! is a `LanguageModel` too.
//!
//! Invariants: this crate depends on `toolgate-protocol` alone and does no IO
//! (a [`ScriptedModel`] reads its script only when asked to, from a path it
//! is given). Providers (`toolgate-openai`, `toolgate-anthropic`,
//! `toolgate-local`) and their shared HTTP plumbing (`toolgate-http`) depend
//! on it and never on the engine; the engine re-exports it as `toolgate::model`.

mod chain;
mod error;
mod provider_tool;
mod recording;
mod scripted;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream};
use toolgate_protocol::{ModelRequest, ModelResponse, ModelStreamPart};

pub use chain::error_chain;
pub use error::ModelError;
pub use provider_tool::ProviderTool;
pub use recording::{ObservedModel, RecordingModel, RequestLog, RequestObserver};
pub use scripted::{ScriptError, ScriptPart, ScriptedModel};

/// A stream of model parts; an `Err` ends it.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelStreamPart, ModelError>> + Send>>;

/// A language model: a provider's API, a local model, or a script.
pub trait LanguageModel: Send + Sync {
    /// The provider's name, e.g. `openai`.
    fn provider(&self) -> &str;

    /// The model's id, e.g. `gpt-4o-mini`.
    fn model_id(&self) -> &str;

    /// Answers a request in one piece.
    fn generate(&self, request: ModelRequest) -> impl Future<Output = Result<ModelResponse, ModelError>> + Send;

    /// Answers a request as a stream of parts.
    fn stream(&self, request: ModelRequest) -> impl Future<Output = Result<ModelStream, ModelError>> + Send;
}

/// Implements [`LanguageModel`] for a pointer to a model by forwarding to it.
macro_rules! forward_language_model {
    ($pointer:ty) => {
        impl<M: LanguageModel + ?Sized> LanguageModel for $pointer {
            fn provider(&self) -> &str {
                (**self).provider()
            }
            fn model_id(&self) -> &str {
                (**self).model_id()
            }
            fn generate(
                &self,
                request: ModelRequest,
            ) -> impl Future<Output = Result<ModelResponse, ModelError>> + Send {
                (**self).generate(request)
            }
            fn stream(&self, request: ModelRequest) -> impl Future<Output = Result<ModelStream, ModelError>> + Send {
                (**self).stream(request)
            }
        }
    };
}

forward_language_model!(&M);
forward_language_model!(Arc<M>);

/// The object-safe form of [`LanguageModel`], for models chosen at runtime.
/// Every `LanguageModel` is one.
pub trait DynLanguageModel: Send + Sync {
    /// See [`LanguageModel::provider`].
    fn provider(&self) -> &str;
    /// See [`LanguageModel::model_id`].
    fn model_id(&self) -> &str;
    /// See [`LanguageModel::generate`].
    fn generate_boxed(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>>;
    /// See [`LanguageModel::stream`].
    fn stream_boxed(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelStream, ModelError>>;
}

impl<M: LanguageModel> DynLanguageModel for M {
    fn provider(&self) -> &str {
        LanguageModel::provider(self)
    }
    fn model_id(&self) -> &str {
        LanguageModel::model_id(self)
    }
    fn generate_boxed(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelResponse, ModelError>> {
        self.generate(request).boxed()
    }
    fn stream_boxed(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelStream, ModelError>> {
        self.stream(request).boxed()
    }
}

impl LanguageModel for dyn DynLanguageModel {
    fn provider(&self) -> &str {
        DynLanguageModel::provider(self)
    }
    fn model_id(&self) -> &str {
        DynLanguageModel::model_id(self)
    }
    fn generate(&self, request: ModelRequest) -> impl Future<Output = Result<ModelResponse, ModelError>> + Send {
        self.generate_boxed(request)
    }
    fn stream(&self, request: ModelRequest) -> impl Future<Output = Result<ModelStream, ModelError>> + Send {
        self.stream_boxed(request)
    }
}

/// A model chosen at runtime.
pub type SharedModel = Arc<dyn DynLanguageModel>;
