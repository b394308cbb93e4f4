//! Approvals: signing them, finding the answers in a history, and deciding
//! what runs before the model is called.

pub(crate) mod canonical;
mod collect;
pub mod lifecycle;
mod resolve;
mod signing;

use serde_json::Value;
use toolgate_protocol::ToolCallPart;

pub use canonical::{CanonicalError, canonical_json};
pub(crate) use collect::collect;
pub use resolve::HELD_NEEDS_APPROVAL_REASON;
pub(crate) use resolve::{Plan, ResolveOptions, Resolved, resolve};
pub(crate) use signing::unsigned_approval_id;
pub use signing::{
    ApprovalSigner, HeldCalls, IssuedApproval, SignatureError, SignedCall, SignerError, canonical_digest, input_digest,
};

/// The denial reason for an approval the person never answered before the
/// conversation moved on.
pub const NO_ANSWER_REASON: &str =
    "No answer was given to this approval request before the conversation continued; the tool call did not run.";

/// What pre-resolution did with one approval of the history: the audit
/// record of an answer (or of its absence).
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedApproval {
    /// The approval id.
    pub approval_id: String,
    /// The call as the model made it, with its original input.
    pub tool_call: ToolCallPart,
    /// What happened.
    pub outcome: ApprovalOutcome,
}

/// What happened to an approval's call before the model was called.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalOutcome {
    /// Approved: the call ran, with `edited_input` instead of the original when the person edited it.
    Approved {
        /// The person's replacement input.
        edited_input: Option<Value>,
    },
    /// The person denied it.
    Denied {
        /// Their reason.
        reason: Option<String>,
    },
    /// Nobody answered before the conversation moved on; it did not run.
    Unanswered,
    /// Approved, but the tool's policy refused it; it did not run.
    Refused {
        /// The policy's reason.
        reason: String,
    },
    /// A provider-executed call: the answer went to the provider, nothing ran here.
    Forwarded {
        /// The person's decision.
        approved: bool,
    },
    /// The ledger had already settled this approval (a replayed or duplicate
    /// answer): nothing ran, the stored outcome was returned.
    Replayed {
        /// The state on record.
        state: crate::ledger::ApprovalState,
    },
    /// The request expired before it was answered; it did not run.
    Expired,
    /// The call had started, but its process stopped before the outcome was
    /// stored; it was not run again (the outcome is unknown).
    Interrupted,
}
