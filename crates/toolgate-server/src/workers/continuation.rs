//! Server-side continuation: when the last pending approval of a
//! conversation's step is decided out of band (the inbox, a link, the CLI on
//! the store), the server runs the rest of the step itself, without a client.
//!
//! - A deciding vote marks the conversation due in the store, in the vote's
//!   transaction ([`toolgate::ledger::Update::continuation`]); so does a
//!   withdrawal. The mark survives any crash.
//! - Every process runs [`worker`] (`serve_listener` starts it): it looks
//!   for due conversations every [`POLL`] (another replica's decision, the
//!   CLI's) and at once when a decision is made here, and claims each one for
//!   [`crate::ServerConfig::continuation_lease`] (default [`LEASE`], renewed
//!   while it runs): two replicas never continue the same conversation at once, and
//!   a claim whose process died is taken over once it lapses.
//! - Under the claim, the stored runs continue the conversation
//!   (`run/continuation.rs`): if an approval of its step is still pending,
//!   nothing runs; else the decisions on record answer the step and it runs
//!   as its owner's chat request would, recorded for
//!   `GET /api/chat/{id}/stream` and stored at the end. An AG-UI thread is
//!   continued the same way, as a resume of its open interrupts.
//! - The mark is cleared only if no decision came while it ran; otherwise
//!   the conversation is continued again.

use std::time::Duration;

use toolgate::ledger::{LedgerConfig, Millis};

use crate::app::AppState;
use crate::run::context::RunContext;
use crate::run::continuation::continue_conversation;
use crate::run::holder;

/// How often a worker looks for conversations decided elsewhere.
pub const POLL: Duration = Duration::from_millis(500);
/// How long a continuation claim lasts without renewal (the state's default,
/// [`crate::ServerConfig::continuation_lease`]).
pub use crate::app::CONTINUATION_LEASE as LEASE;
/// Conversations one look claims at most.
const BATCH: usize = 16;

/// Continues due conversations until the server stops (see the module docs),
/// on the state's ledger (nothing without one). `serve_listener` runs the
/// same loop on the parts it needs (the ledger and the run context, never
/// the state); a server built on [`crate::router`] alone runs it itself with this.
pub async fn worker(state: AppState) {
    let Some(ledger) = state.config().ledger.clone() else { return };
    continue_due(ledger, state.run_context().clone()).await;
}

/// The worker's loop, on what it needs: the ledger's store and clock, and
/// what runs a stored conversation (whose signals wake it, and whose lease
/// its claims last).
pub(crate) async fn continue_due(ledger: LedgerConfig, context: RunContext) {
    loop {
        match ledger.store.due_continuations(ledger.clock.now(), BATCH).await {
            Ok(due) => {
                for key in due {
                    tokio::spawn(continue_one(context.clone(), ledger.clone(), key));
                }
            }
            Err(error) => tracing::warn!(%error, "cannot list the conversations due to continue"),
        }
        let _ = tokio::time::timeout(POLL, context.signals().continuations_woken()).await;
    }
}

/// Claims one conversation, continues it while renewing the claim, and ends the claim.
async fn continue_one(context: RunContext, ledger: LedgerConfig, key: String) {
    let store = &ledger.store;
    let lease = context.continuation_lease();
    let lease_millis = Millis::try_from(lease.as_millis()).unwrap_or(Millis::MAX);
    // One holder per attempt: two attempts of this process exclude each other too.
    let holder = holder(&ledger);
    let claim = |now: Millis| {
        let until = now.saturating_add(lease_millis);
        store.claim_continuation(&key, &holder, until, now, false)
    };
    let claimed = match claim(ledger.clock.now()).await {
        Ok(Some(claimed)) => claimed,
        Ok(None) => return,
        Err(error) => return tracing::warn!(%error, conversation = %key, "cannot claim a continuation"),
    };
    let renew = async {
        loop {
            tokio::time::sleep(lease / 3).await;
            if let Err(error) = claim(ledger.clock.now()).await {
                tracing::warn!(%error, conversation = %key, "cannot renew a continuation claim");
            }
        }
    };
    let outcome = tokio::select! {
        outcome = continue_conversation(&context, &ledger, &key, &claimed) => outcome,
        () = renew => unreachable!("the renewal loop never ends"),
    };
    if let Err(error) = outcome {
        tracing::warn!(conversation = %key, %error, "the continuation failed");
    }
    match store.finish_continuation(&claimed, &holder).await {
        Ok(true) => {}
        // Settled again meanwhile: the next look continues it again.
        Ok(false) => context.signals().wake_continuations(),
        Err(error) => tracing::warn!(%error, conversation = %key, "cannot end a continuation claim"),
    }
}
