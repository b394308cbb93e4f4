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
//! - With an owner it is `owner`, [`OWNER_SEPARATOR`], `id`. Neither ids nor
//!   principals may hold control characters ([`is_valid_conversation_id`],
//!   [`super::check_principal`]; both are refused where they enter), so two
//!   different (owner, id) pairs never share a key.
//!
//! The key only binds. Who owns a conversation is stored beside it as a field
//! (an approval's and a stored conversation's `owner`, an approval's
//! `client`), never read back out of the key: [`conversation_name`] strips an
//! owner the caller already holds, and nothing splits a key to find one.
//!
//! The audit log records both halves ([`crate::ledger::AuditEvent`]'s `owner`
//! and `conversation_id`) and is read through an [`AuditView`].

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

/// The id of `owner`'s conversation whose key is `key`: the key without
/// `owner` and the separator, or the whole key when it does not start with
/// them (an unowned conversation's key is its id).
pub fn conversation_name<'k>(key: &'k str, owner: Option<&str>) -> &'k str {
    owner.and_then(|owner| key.strip_prefix(owner)).and_then(|rest| rest.strip_prefix(OWNER_SEPARATOR)).unwrap_or(key)
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
        assert_eq!(conversation_name("chat-1", None), "chat-1");
        assert_eq!(conversation_name(&conversation_key(Some("alice"), "chat-1"), Some("alice")), "chat-1");
        // Another owner's name strips nothing: the name is only ever taken with the stored owner.
        assert_eq!(conversation_name(&conversation_key(Some("alice"), "c"), Some("al")), "alice\u{1f}c");
    }

    #[test]
    fn ids_with_control_characters_are_not_valid() {
        assert!(is_valid_conversation_id("agui:thread 7/é"));
        assert!(!is_valid_conversation_id(""));
        assert!(!is_valid_conversation_id("alice\u{1f}chat"));
        assert!(!is_valid_conversation_id("line\nbreak"));
    }

    proptest! {
        /// Different (valid owner, valid id) pairs never share a key, and the
        /// stored owner gives the id back.
        #[test]
        fn keys_are_injective(
            a in (proptest::option::of("[^\\p{Cc}]{0,6}"), "[^\\p{Cc}]{1,6}"),
            b in (proptest::option::of("[^\\p{Cc}]{0,6}"), "[^\\p{Cc}]{1,6}"),
        ) {
            let key_a = conversation_key(a.0.as_deref(), &a.1);
            let key_b = conversation_key(b.0.as_deref(), &b.1);
            prop_assert_eq!(conversation_name(&key_a, a.0.as_deref()), a.1.as_str());
            prop_assert_eq!(key_a == key_b, a == b);
        }
    }
}
