//! Conversations belong to their owner: who may see what in the ledger.
//!
//! A conversation id is chosen by the client, so two people may pick the same
//! one. The ledger therefore keys a conversation by its owner (the principal
//! of the request that created it) and its id together: the *conversation
//! key* binds approvals, stored conversations and conversation-scoped sticky
//! decisions, so nothing of one owner's conversation is reachable under
//! another owner's key.
//!
//! - Without an owner (single-user mode, or a request without a principal)
//!   the key is the id itself, as it was before owners existed: stored data
//!   keeps its keys.
//! - With an owner it is `owner`, [`OWNER_SEPARATOR`], `id`. Ids may not hold
//!   control characters ([`is_valid_conversation_id`]; servers refuse such
//!   ids), so an id never contains the separator and the key splits back at
//!   its last separator: two different (owner, id) pairs never share a key.
//!
//! The audit log records both halves of the key ([`crate::ledger::AuditEvent`]'s
//! `owner` and `conversation_id`) and is read through an [`AuditView`].

/// What separates the owner from the id in a conversation key (ASCII unit separator).
pub const OWNER_SEPARATOR: char = '\u{1f}';

/// True when `id` may name a conversation: not empty, free of control
/// characters, not too long ([`super::check_conversation_id`] says why not).
pub fn is_valid_conversation_id(id: &str) -> bool {
    super::check_conversation_id(id).is_ok()
}

/// The key of `owner`'s conversation `id` (see the module docs).
pub fn conversation_key(owner: Option<&str>, id: &str) -> String {
    match owner {
        None => id.to_owned(),
        Some(owner) => {
            let mut key = String::with_capacity(owner.len() + 1 + id.len());
            key.push_str(owner);
            key.push(OWNER_SEPARATOR);
            key.push_str(id);
            key
        }
    }
}

/// The owner and the id of a conversation key.
pub fn split_conversation_key(key: &str) -> (Option<&str>, &str) {
    match key.rsplit_once(OWNER_SEPARATOR) {
        Some((owner, id)) => (Some(owner), id),
        None => (None, key),
    }
}

/// Whose view of the audit log a query takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuditView {
    /// Every event: the machine's operator (`toolgate audit`), an admin, or
    /// a server without principals (single-user mode).
    #[default]
    All,
    /// What this principal may see: the events of the conversations they
    /// own, and of the approvals they answered (approved, denied or edited).
    Principal(String),
    /// A request without a principal on a server that has principals: the
    /// events of conversations without an owner.
    Anonymous,
}

impl AuditView {
    /// The view of a request's principal (`None`: without one).
    pub fn of(principal: Option<&str>) -> Self {
        match principal {
            Some(principal) => Self::Principal(principal.to_owned()),
            None => Self::Anonymous,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn no_owner_keeps_the_id_as_its_key() {
        assert_eq!(conversation_key(None, "chat-1"), "chat-1");
        assert_eq!(split_conversation_key("chat-1"), (None, "chat-1"));
        assert_eq!(split_conversation_key(&conversation_key(Some("alice"), "chat-1")), (Some("alice"), "chat-1"));
    }

    #[test]
    fn ids_with_control_characters_are_not_valid() {
        assert!(is_valid_conversation_id("agui:thread 7/é"));
        assert!(!is_valid_conversation_id(""));
        assert!(!is_valid_conversation_id("alice\u{1f}chat"));
        assert!(!is_valid_conversation_id("line\nbreak"));
    }

    proptest! {
        /// Different (owner, valid id) pairs never share a key, and every key splits back.
        #[test]
        fn keys_are_injective(
            a in (proptest::option::of(".{0,6}"), "[^\\p{Cc}]{1,6}"),
            b in (proptest::option::of(".{0,6}"), "[^\\p{Cc}]{1,6}"),
        ) {
            let key_a = conversation_key(a.0.as_deref(), &a.1);
            let key_b = conversation_key(b.0.as_deref(), &b.1);
            prop_assert_eq!(split_conversation_key(&key_a), (a.0.as_deref(), a.1.as_str()));
            prop_assert_eq!(key_a == key_b, a == b);
        }
    }
}
