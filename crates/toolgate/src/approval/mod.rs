//! Approvals: signing them, finding the answers in a history, and deciding
//! what runs before the model is called.

mod collect;
mod resolve;
mod signing;

pub(crate) use collect::collect;
pub(crate) use resolve::{Resolved, resolve};
pub(crate) use signing::unsigned_approval_id;
pub use signing::{ApprovalSigner, IssuedApproval, SignatureError, SignerError, input_digest};

/// The denial reason for an approval the person never answered before the
/// conversation moved on.
pub const NO_ANSWER_REASON: &str =
    "No answer was given to this approval request before the conversation continued; the tool call did not run.";
