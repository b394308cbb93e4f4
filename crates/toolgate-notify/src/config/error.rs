//! What [`Channels::from_config`](super::Channels::from_config) refuses.

/// A configuration problem, naming the channel (or principal) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyConfigError {
    /// The name is empty or has characters outside `[A-Za-z0-9_.-]`.
    #[error("notify channel name {name:?} is invalid: use letters, digits, `_`, `.` and `-`")]
    InvalidName {
        /// The name as written.
        name: String,
    },
    /// Two channels have the same name.
    #[error("notify channel {name:?} is defined twice")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// Neither `webhook` nor `smtp` is set.
    #[error("notify channel {channel:?}: set one of `webhook` or `smtp`")]
    NoTarget {
        /// The channel.
        channel: String,
    },
    /// Both `webhook` and `smtp` are set.
    #[error("notify channel {channel:?}: set only one of `webhook` and `smtp`, not both")]
    BothTargets {
        /// The channel.
        channel: String,
    },
    /// The webhook or SMTP URL is not usable.
    #[error("notify channel {channel:?}: invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// The channel.
        channel: String,
        /// The URL as written.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `events` names an unknown event kind.
    #[error(
        "notify channel {channel:?}: unknown event {event:?} (known: approval.requested, approval.decided, \
         approval.escalated, approval.expired, approval.executed, approval.reminded)"
    )]
    UnknownEvent {
        /// The channel.
        channel: String,
        /// The unknown kind.
        event: String,
    },
    /// `events` is an empty list.
    #[error("notify channel {channel:?}: `events` is empty (leave it out to send every event)")]
    EmptyEvents {
        /// The channel.
        channel: String,
    },
    /// `format` is neither `json` nor `slack`.
    #[error("notify channel {channel:?}: unknown format {format:?} (use \"json\" or \"slack\")")]
    UnknownFormat {
        /// The channel.
        channel: String,
        /// The format as written.
        format: String,
    },
    /// `links` is neither `signed` nor `bearer`.
    #[error("notify channel {channel:?}: unknown links {links:?} (use \"signed\" or \"bearer\")")]
    UnknownLinks {
        /// The channel.
        channel: String,
        /// The value as written.
        links: String,
    },
    /// `grant` is not a table, or is set where links vote as nobody (`links = "bearer"`).
    #[error("notify channel {channel:?}: invalid grant: {reason}")]
    InvalidGrant {
        /// The channel.
        channel: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `links = "bearer"` on an e-mail channel.
    #[error(
        "notify channel {channel:?}: e-mail links are always signed for their recipient; \
         `links = \"bearer\"` is only for webhook channels"
    )]
    BearerLinksOnEmail {
        /// The channel.
        channel: String,
    },
    /// `tls` is not `starttls`, `implicit` or `none`, or contradicts `smtps://`.
    #[error("notify channel {channel:?}: invalid tls {tls:?}: {reason}")]
    InvalidTls {
        /// The channel.
        channel: String,
        /// The value as written.
        tls: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `tls = "none"` for a server that is not on this machine.
    #[error(
        "notify channel {channel:?}: `tls = \"none\"` sends mail and credentials in plain text and is only \
         allowed to a loopback server (127.0.0.0/8, ::1, localhost), not {host:?}"
    )]
    PlaintextSmtp {
        /// The channel.
        channel: String,
        /// The SMTP host.
        host: String,
    },
    /// A key that belongs to the other kind of channel.
    #[error("notify channel {channel:?}: `{field}` does not apply to {target} channels")]
    NotApplicable {
        /// The channel.
        channel: String,
        /// The key.
        field: &'static str,
        /// `webhook` or `smtp`.
        target: &'static str,
    },
    /// A `json` webhook without `secret_env`.
    #[error("notify channel {channel:?}: a json webhook needs `secret_env`, the variable holding its HMAC key")]
    MissingSecret {
        /// The channel.
        channel: String,
    },
    /// A named environment variable is not set (or empty).
    #[error("notify channel {channel:?}: environment variable {var} is not set or empty")]
    MissingEnv {
        /// The channel.
        channel: String,
        /// The variable.
        var: String,
    },
    /// An SMTP user without a password or the other way round.
    #[error(
        "notify channel {channel:?}: the SMTP {present} is set ({present_var}) but the {missing} ({missing_var}) is not"
    )]
    IncompleteCredentials {
        /// The channel.
        channel: String,
        /// `user` or `password`, the part that was found.
        present: &'static str,
        /// The variable it was found in.
        present_var: String,
        /// `user` or `password`, the part that is missing.
        missing: &'static str,
        /// The variable it was looked for in.
        missing_var: String,
    },
    /// An e-mail channel without `from`.
    #[error("notify channel {channel:?}: an e-mail channel needs `from`")]
    MissingFrom {
        /// The channel.
        channel: String,
    },
    /// `from` is not a mailbox such as `name <address>`.
    #[error("notify channel {channel:?}: invalid `from` {from:?}: {reason}")]
    InvalidFrom {
        /// The channel.
        channel: String,
        /// The value as written.
        from: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An e-mail channel without recipients.
    #[error("notify channel {channel:?}: `to` is missing or empty")]
    EmptyTo {
        /// The channel.
        channel: String,
    },
    /// An entry of `to` is an invalid address or an empty group.
    #[error("notify channel {channel:?}: invalid recipient {entry:?} in `to`: {reason}")]
    InvalidRecipient {
        /// The channel.
        channel: String,
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An `[emails]` entry whose address does not parse.
    #[error("[emails]: the address {address:?} of principal {principal:?} is invalid: {reason}")]
    InvalidEmailMapping {
        /// The principal.
        principal: String,
        /// The address as written.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
}
