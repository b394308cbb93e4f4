//! Server mode: the inbox through a running server's `/api/approvals`
//! (`GET` to list and show, `POST` to vote, `DELETE` to withdraw, and the
//! server-sent events of `/api/approvals/stream` to watch), with
//! `TOOLGATE_TOKEN` as the bearer token when set. `watch --decide` also
//! asks `GET /api/me` who the server takes the caller for, and keeps "always
//! allow" with `POST /api/decisions` (scope `conversation`: the server keys
//! it by the caller's own conversation of that id, so only the requester's
//! applies to their calls).
//!
//! An error answer carrying `{"error": {"code", "message"}}` is a
//! [`Refusal`]; anything else that is not a success (or no answer at all)
//! is an ordinary error.

use anyhow::{Context, anyhow, bail};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::{Method, RequestBuilder, Url};
use serde_json::{Value, json};

use super::{Ballot, Listing, Refusal, STICKY_NOTE};

/// A server's inbox.
pub struct Remote {
    /// `.../api/approvals`.
    base: Url,
    /// `TOOLGATE_TOKEN`, when set.
    token: Option<String>,
    client: reqwest::Client,
}

impl Remote {
    /// The inbox of the server at `url` (`http://HOST:PORT`, or under a path prefix).
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let invalid = || anyhow!("--server must be an http:// or https:// URL, got `{url}`");
        let mut base = Url::parse(url.trim()).map_err(|_| invalid())?;
        if !matches!(base.scheme(), "http" | "https") || !base.has_host() {
            return Err(invalid());
        }
        let path = format!("{}/api/approvals", base.path().trim_end_matches('/'));
        base.set_path(&path);
        base.set_query(None);
        base.set_fragment(None);
        let token = std::env::var("TOOLGATE_TOKEN").ok().filter(|token| !token.is_empty());
        Ok(Self { base, token, client: reqwest::Client::new() })
    }

    /// `.../api/{name}`, beside `.../api/approvals`.
    fn api(&self, name: &str) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop().push(name);
        }
        url
    }

    /// `.../api/approvals/{segment}`.
    fn url(&self, segment: &str) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.push(segment);
        }
        url
    }

    /// A request with the bearer token.
    fn request(&self, method: Method, url: Url) -> RequestBuilder {
        let request = self.client.request(method, url);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// `GET /api/approvals?state=...&conversation=...&limit=...`.
    pub async fn list(&self, listing: &Listing) -> anyhow::Result<Vec<Value>> {
        let mut url = self.base.clone();
        {
            let mut query = url.query_pairs_mut();
            query.append_pair("state", listing.state.as_str());
            if let Some(conversation) = &listing.conversation {
                query.append_pair("conversation", conversation);
            }
            query.append_pair("limit", &listing.limit.to_string());
        }
        let mut answer = send(self.request(Method::GET, url.clone())).await?;
        match answer.get_mut("approvals").map(Value::take) {
            Some(Value::Array(items)) => Ok(items),
            _ => bail!("{url} answered without an `approvals` list: {answer}"),
        }
    }

    /// `GET /api/approvals/{id}`.
    pub async fn show(&self, id: &str) -> anyhow::Result<Value> {
        send(self.request(Method::GET, self.url(id))).await
    }

    /// `POST /api/approvals/{id}`.
    pub async fn vote(&self, id: &str, ballot: &Ballot) -> anyhow::Result<Value> {
        let mut body = json!({"decision": if ballot.approve { "approve" } else { "deny" }});
        if let Some(reason) = &ballot.reason {
            body["reason"] = json!(reason);
        }
        if let Some(input) = &ballot.edited_input {
            body["editedInput"] = input.clone();
        }
        if let Some(grant) = &ballot.grant {
            body["grant"] = serde_json::to_value(grant)?;
        }
        send(self.request(Method::POST, self.url(id)).json(&body)).await
    }

    /// `GET /api/me`: the principal the server takes the caller for (`None` without principals).
    pub async fn principal(&self) -> anyhow::Result<Option<String>> {
        let me = send(self.request(Method::GET, self.api("me"))).await?;
        Ok(me["principal"].as_str().map(str::to_owned))
    }

    /// `POST /api/decisions`: "always allow `item`'s tool in its conversation"; the decision's id.
    pub async fn always_allow(&self, item: &Value) -> anyhow::Result<String> {
        let url = self.api("decisions");
        let body = json!({"action": "allow", "tool": item["tool"], "scope": "conversation",
            "conversationId": item["conversationId"], "note": STICKY_NOTE});
        let decision = send(self.request(Method::POST, url.clone()).json(&body)).await?;
        match decision["id"].as_str() {
            Some(id) => Ok(id.to_owned()),
            None => bail!("{url} answered without the decision's id: {decision}"),
        }
    }

    /// `DELETE /api/approvals/{id}`.
    pub async fn withdraw(&self, id: &str) -> anyhow::Result<Value> {
        send(self.request(Method::DELETE, self.url(id))).await
    }

    /// `GET /api/approvals/stream`: each `approval` event's item, until the server closes it.
    pub async fn watch(&self, each: &mut dyn FnMut(&Value) -> anyhow::Result<()>) -> anyhow::Result<()> {
        let url = self.url("stream");
        let request = self.request(Method::GET, url.clone()).header("accept", "text/event-stream");
        let response = request.send().await.with_context(|| format!("cannot reach {url}"))?;
        if !response.status().is_success() {
            return Err(failure(&url, response.status(), &response.text().await.unwrap_or_default()));
        }
        let mut events = response.bytes_stream().eventsource();
        while let Some(event) = events.next().await {
            let event = event.map_err(|error| anyhow!("the stream of {url} broke: {error}"))?;
            if event.event == "approval" {
                let item: Value = serde_json::from_str(&event.data)
                    .with_context(|| format!("{url} sent an approval that is not JSON: {}", event.data))?;
                each(&item)?;
            }
        }
        bail!("{url}: the server closed the stream")
    }
}

/// Sends `request`; the JSON answer of a success, else a [`Refusal`] (or an error).
async fn send(request: RequestBuilder) -> anyhow::Result<Value> {
    let (client, request) = request.build_split();
    let request = request.context("cannot build the request")?;
    let url = request.url().clone();
    let response = client.execute(request).await.with_context(|| format!("cannot reach {url}"))?;
    let status = response.status();
    let text = response.text().await.with_context(|| format!("cannot read the answer of {url}"))?;
    if !status.is_success() {
        return Err(failure(&url, status, &text));
    }
    serde_json::from_str(&text).with_context(|| format!("{url} answered with something else than JSON: {text}"))
}

/// An error answer: a [`Refusal`] when it carries `{"error": {"code", "message"}}`.
fn failure(url: &Url, status: reqwest::StatusCode, text: &str) -> anyhow::Error {
    let body: Value = serde_json::from_str(text).unwrap_or_default();
    let error = &body["error"];
    match (error["code"].as_str(), error["message"].as_str()) {
        (Some(code), Some(message)) => Refusal { code: code.to_owned(), message: message.to_owned() }.into(),
        _ => anyhow!("{url} answered {status}: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_gets_the_inbox_path() {
        let remote = Remote::new("http://127.0.0.1:3000").unwrap();
        assert_eq!(remote.url("apr 1").as_str(), "http://127.0.0.1:3000/api/approvals/apr%201");
        let prefixed = Remote::new("https://example.com/toolgate/").unwrap();
        assert_eq!(prefixed.base.as_str(), "https://example.com/toolgate/api/approvals");
        assert_eq!(prefixed.api("decisions").as_str(), "https://example.com/toolgate/api/decisions");
        assert!(Remote::new("ftp://example.com").is_err());
    }
}
