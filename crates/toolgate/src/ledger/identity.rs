//! The names that identify people and conversations, checked where they enter.
//!
//! A principal, a group, an MCP client's name and a conversation id all come
//! from outside (a tokens file, a JWT claim, a header, `clientInfo.name`, a
//! chat request). Each is checked here before it is used or stored, so that:
//! - none holds a control character: they are printed in logs, rendered in
//!   notifications and the page, and joined into conversation keys with
//!   [`super::OWNER_SEPARATOR`], which must never appear inside one;
//! - none is longer than its limit, so the work for a request stays linear
//!   in what the server chose to accept;
//! - a principal is never named like a group (`group:finance`) or a link
//!   voter (`link:email`): approvers are listed under those names, so a
//!   principal so named would be taken for every member of the group.
//!
//! Servers answer a bad name with 400 (or 401 for a credential's claim), the
//! gateway refuses the client's `initialize`, and a tokens file that names
//! such a principal is refused at load.

use crate::approval::lifecycle::GROUP_PREFIX;

/// How a signed link's holder is named among voters: `link:<channel>`.
pub const LINK_PREFIX: &str = "link:";
/// The longest principal or group name, in bytes.
pub const MAX_PRINCIPAL_LEN: usize = 256;
/// The longest MCP client name, in bytes.
pub const MAX_CLIENT_NAME_LEN: usize = 128;
/// The longest conversation (chat or thread) id, in bytes.
pub const MAX_CONVERSATION_ID_LEN: usize = 1024;

/// What kind of name a [`NameError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameKind {
    /// Who sent a request.
    Principal,
    /// A group of principals.
    Group,
    /// An MCP client's `clientInfo.name`.
    Client,
    /// A chat or thread id.
    Conversation,
}

impl NameKind {
    /// The name in words (`principal`, `group`, `client name`, `conversation id`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Principal => "principal",
            Self::Group => "group",
            Self::Client => "client name",
            Self::Conversation => "conversation id",
        }
    }

    fn max_len(self) -> usize {
        match self {
            Self::Principal | Self::Group => MAX_PRINCIPAL_LEN,
            Self::Client => MAX_CLIENT_NAME_LEN,
            Self::Conversation => MAX_CONVERSATION_ID_LEN,
        }
    }
}

/// Why a name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    #[error("the {} is empty", .0.as_str())]
    Empty(NameKind),
    /// The name is longer than its limit.
    #[error("the {} is {len} bytes long; at most {max} are allowed", kind.as_str())]
    TooLong {
        /// What the name is.
        kind: NameKind,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The name holds a control character.
    #[error("the {} {shown} holds a control character (U+{code:04X})", kind.as_str())]
    ControlCharacter {
        /// What the name is.
        kind: NameKind,
        /// The name, escaped for display.
        shown: String,
        /// The character's code point.
        code: u32,
    },
    /// A principal named like a group or a link voter.
    #[error("the principal {shown} starts with `{prefix}`, which names {} among approvers", if *.prefix == GROUP_PREFIX { "a group" } else { "a link's holder" })]
    ReservedPrefix {
        /// The name, escaped for display.
        shown: String,
        /// The reserved prefix it starts with.
        prefix: &'static str,
    },
}

/// Checks a principal: not empty, at most [`MAX_PRINCIPAL_LEN`] bytes, no
/// control character, and not starting with `group:` or `link:`.
pub fn check_principal(name: &str) -> Result<(), NameError> {
    check(NameKind::Principal, name)?;
    match [GROUP_PREFIX, LINK_PREFIX].into_iter().find(|prefix| name.starts_with(prefix)) {
        Some(prefix) => Err(NameError::ReservedPrefix { shown: shown(name), prefix }),
        None => Ok(()),
    }
}

/// Checks a group name (as configured or claimed, without `group:`).
pub fn check_group(name: &str) -> Result<(), NameError> {
    check(NameKind::Group, name)
}

/// Checks an MCP client's name.
pub fn check_client_name(name: &str) -> Result<(), NameError> {
    check(NameKind::Client, name)
}

/// Checks a chat or thread id.
pub fn check_conversation_id(id: &str) -> Result<(), NameError> {
    check(NameKind::Conversation, id)
}

/// The checks every name shares.
fn check(kind: NameKind, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty(kind));
    }
    let max = kind.max_len();
    if name.len() > max {
        return Err(NameError::TooLong { kind, len: name.len(), max });
    }
    match name.chars().find(|c| c.is_control()) {
        Some(c) => Err(NameError::ControlCharacter { kind, shown: shown(name), code: u32::from(c) }),
        None => Ok(()),
    }
}

/// A name as an error message shows it: quoted, control characters escaped.
fn shown(name: &str) -> String {
    format!("{name:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_named_like_groups_or_links_are_refused() {
        assert!(check_principal("alice").is_ok());
        assert!(check_principal("alice@example.com").is_ok());
        let group = check_principal("group:finance").unwrap_err();
        assert!(group.to_string().contains("a group"), "{group}");
        let link = check_principal("link:email").unwrap_err();
        assert!(link.to_string().contains("link"), "{link}");
        assert!(check_group("finance").is_ok());
    }

    #[test]
    fn control_characters_lengths_and_empty_names_are_named() {
        let error = check_client_name("cli\u{1f}x").unwrap_err();
        assert_eq!(error.to_string(), "the client name \"cli\\u{1f}x\" holds a control character (U+001F)");
        assert!(check_conversation_id("chat\n1").is_err());
        assert_eq!(check_principal(""), Err(NameError::Empty(NameKind::Principal)));
        let long = "a".repeat(MAX_CLIENT_NAME_LEN + 1);
        assert!(matches!(check_client_name(&long), Err(NameError::TooLong { len: 129, max: 128, .. })));
        assert!(check_conversation_id(&"é".repeat(MAX_CONVERSATION_ID_LEN / 2)).is_ok());
        assert!(check_conversation_id(&"é".repeat(MAX_CONVERSATION_ID_LEN / 2 + 1)).is_err());
    }
}
