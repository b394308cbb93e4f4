//! Stored runs: a stored conversation run to its end on the server, whatever
//! its client does, from a chat request (the `POST /api/chat` handler) or
//! from the server's own continuation ([`continuation`]). Beside it:
//!
//! - [`conversation`]: a request's history reconciled with the stored
//!   conversation, and the conversation saved when the run ends;
//! - `replay`: the chunks that answer a repeated request from the record,
//!   and the prefix a client resuming a running response gets first;
//! - [`step`]: the step whose approvals are decided outside the chat (routed
//!   to approvers, or decided in the inbox);
//! - [`vote`]: every path's one way to vote, and the one edit check;
//! - [`continuation`]: a due conversation continued on the server;
//! - [`agui`]: stored AG-UI threads, run and continued the same way;
//! - [`calls`]: the call-gating API's calls, held on the approval lifecycle's held-call path.
//!
//! The handlers (`api/`) and the workers (`workers/`) call this floor; it
//! imports neither.

pub(crate) mod agui;
pub(crate) mod calls;
pub(crate) mod context;
pub(crate) mod continuation;
pub(crate) mod conversation;
mod replay;
pub(crate) mod step;
pub(crate) mod vote;

use std::sync::Arc;

use axum::body::Bytes;
use futures::StreamExt;
use toolgate::ledger::{Ledger, LedgerConfig};
use toolgate::{TextStream, stream_text};
use toolgate_ui::{
    EncoderOptions, SSE_DONE, UiChunk, UiMessage, UiMessageBuilder, UiRole, UiStreamEncoder, convert_to_model_messages,
    sse_frame,
};

use crate::error::ApiError;
use context::RunContext;

/// A stored conversation's run, ready to start: from a chat request, or
/// the server's own continuation ([`crate::continuation`]).
pub(crate) struct StoredRun {
    /// The conversation key.
    pub key: String,
    /// Whose run it is (the conversation's owner).
    pub principal: Option<String>,
    /// Their groups.
    pub groups: Vec<String>,
    /// The conversation's ledger, answered by `principal`.
    pub ledger: Ledger,
    /// The gate with the sticky decisions read (`None`: read when needed).
    pub gate: Option<toolgate_policy::StoredGate>,
    /// The history to run.
    pub messages: Vec<UiMessage>,
    /// The stored version it extends.
    pub version: Option<i64>,
    /// What the step's routed approvals say (see [`step`]).
    pub step: step::Step,
}

/// Runs a stored conversation to its end, whatever its client does, and
/// stores it; the frames of the response (recorded for `GET /api/chat/{id}/stream`).
pub(crate) async fn run_stored(
    context: &RunContext,
    run: StoredRun,
) -> Result<impl futures::Stream<Item = Bytes> + Send + 'static, ApiError> {
    let StoredRun { key, principal, groups, ledger, gate, messages, version, step } = run;
    let owner = ledger.owner.clone();
    let store = ledger.config.store.clone();
    let model_messages = convert_to_model_messages(&messages)?;
    tracing::info!(conversation = %key, messages = model_messages.len(), stored = ?version, "chat request");
    let clock = ledger.config.clock.clone();
    let gate = gate.unwrap_or_else(|| context.gate(&key, principal.as_deref()));
    let engine_request =
        context.gated_text_request(model_messages, &key, principal.as_deref(), gate).ledger(ledger).groups(groups);
    let stream = start(context, &key, engine_request).await?;
    let reported = step.approval_ids();
    let claim = match step {
        step::Step::Ready { claim, .. } => claim,
        step::Step::None | step::Step::Waiting { .. } => None,
    };

    let continued = messages.last().filter(|message| message.role == UiRole::Assistant).cloned();
    let mut history = messages;
    let mut builder = match continued {
        Some(message) => {
            history.pop();
            UiMessageBuilder::continuing(message)
        }
        None => UiMessageBuilder::new(new_message_id()),
    };
    let mut encoder = encoder(context, builder.message().id.clone());
    let running = context.running().start(&key, principal);
    if !builder.message().parts.is_empty() {
        // A client resuming this continuation gets the message as it stood first (see `resume_prefix`).
        for chunk in replay::resume_prefix(builder.message()) {
            running.push(&Bytes::from(sse_frame(&chunk)));
        }
    }
    // Renewed while the run goes on; ends with the stream, however it ends.
    let renewal = claim.as_ref().map(|(claim, holder)| renew_claim(context, store.clone(), claim, holder));
    let context = context.clone();
    Ok(async_stream::stream! {
        let renewal = renewal;
        let mut stream = stream;
        // From `finish` on, frames wait until the conversation is saved: a client that
        // answers as soon as the response finishes must find its calls on record.
        let mut held = Vec::new();
        while let Some(part) = stream.next().await {
            for chunk in encoder.encode(&part) {
                if matches!(chunk, UiChunk::Finish { .. }) {
                    // The routed approvals of the step, as they ended (executed, denied, ...).
                    for report in step::report(store.as_ref(), &reported).await {
                        builder.apply(&report);
                        held.push(Bytes::from(sse_frame(&report)));
                    }
                }
                builder.apply(&chunk);
                let frame = Bytes::from(sse_frame(&chunk));
                if matches!(chunk, UiChunk::Finish { .. }) || !held.is_empty() {
                    held.push(frame);
                    continue;
                }
                running.push(&frame);
                yield frame;
            }
        }
        history.push(builder.finish());
        conversation::save(store.as_ref(), (&key, owner.as_deref()), &history, version, clock.now()).await;
        if !reported.is_empty() {
            context.signals().approvals_changed();
        }
        // No renewal may take the claim back once it is ended.
        drop(renewal);
        if let Some((claim, holder)) = &claim {
            // A decision made while this ran bumped the mark: the worker continues from here.
            match store.finish_continuation(claim, holder).await {
                Ok(true) => {}
                Ok(false) => context.signals().wake_continuations(),
                Err(error) => tracing::warn!(%error, conversation = %key, "cannot end the continuation claim"),
            }
        }
        for frame in held.into_iter().chain([Bytes::from_static(SSE_DONE.as_bytes())]) {
            running.push(&frame);
            yield frame;
        }
    })
}

/// A task renewing a request's continuation claim every third of the lease;
/// aborted when the returned guard drops.
fn renew_claim(
    context: &RunContext,
    store: Arc<dyn toolgate::ledger::ContinuationStore>,
    claim: &toolgate::ledger::ContinuationClaim,
    holder: &str,
) -> AbortOnDrop {
    let (key, holder) = (claim.conversation_id.clone(), holder.to_owned());
    let (lease, clock) = (context.continuation_lease(), context.clock());
    AbortOnDrop(tokio::spawn(async move {
        loop {
            tokio::time::sleep(lease / 3).await;
            let now = clock.now();
            let until = now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
            if let Err(error) = store.claim_continuation(&key, &holder, until, now, false).await {
                tracing::warn!(%error, conversation = %key, "cannot renew the continuation claim");
            }
        }
    }))
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A claim holder for one continuation attempt of this process.
pub(crate) fn holder(ledger: &LedgerConfig) -> String {
    format!("{}/{}", ledger.executor, uuid::Uuid::now_v7().simple())
}

pub(crate) async fn start<'a>(
    context: &RunContext,
    chat_id: &str,
    request: toolgate::TextRequest,
) -> Result<TextStream<'a>, ApiError> {
    stream_text(context.model(), request).await.map_err(|error| {
        tracing::warn!(chat = %chat_id, %error, "chat request rejected");
        ApiError::from(error)
    })
}

pub(crate) fn encoder(context: &RunContext, message_id: String) -> UiStreamEncoder {
    UiStreamEncoder::new(EncoderOptions { message_id, signature_field: context.signature_field() })
}

pub(crate) fn new_message_id() -> String {
    format!("msg-{}", uuid::Uuid::now_v7().simple())
}
