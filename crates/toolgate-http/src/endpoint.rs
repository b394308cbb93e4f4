//! [`Endpoint`]: what every provider's model holds.

use reqwest::header::HeaderMap;

use crate::{HttpClient, ModelError};

/// One model on one provider's server: the provider's config, the model id,
/// the HTTP client, and the headers built once from the config. `Debug`
/// leaves the headers out: they hold the API key.
#[derive(Clone)]
pub struct Endpoint<C> {
    config: C,
    model: String,
    http: HttpClient,
    headers: HeaderMap,
}

impl<C: std::fmt::Debug> std::fmt::Debug for Endpoint<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("config", &self.config)
            .field("model", &self.model)
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

impl<C> Endpoint<C> {
    /// `model` under `config`, reached through `http`, sending `headers` with every request.
    pub fn new(config: C, model: impl Into<String>, http: HttpClient, headers: HeaderMap) -> Self {
        Self { config, model: model.into(), http, headers }
    }

    /// The provider's config.
    pub fn config(&self) -> &C {
        &self.config
    }

    /// The model id.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// POSTs `body` as JSON to `url` with the endpoint's headers (see [`HttpClient::post_json`]).
    pub async fn post<B: serde::Serialize + ?Sized>(
        &self,
        url: &str,
        body: &B,
    ) -> Result<reqwest::Response, ModelError> {
        self.http.post_json(url, &self.headers, body).await
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::{AUTHORIZATION, HeaderValue};

    use super::*;
    use crate::HttpOptions;

    #[test]
    fn debug_shows_the_config_and_model_but_never_the_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer sk-very-secret"));
        let http = HttpClient::new(&HttpOptions::default()).unwrap();
        let endpoint = Endpoint::new("a config", "a-model", http, headers);
        let shown = format!("{endpoint:?}");
        assert!(shown.contains("a config") && shown.contains("a-model"), "{shown}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert_eq!((endpoint.config(), endpoint.model()), (&"a config", "a-model"));
    }
}
