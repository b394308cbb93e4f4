//! Declarative approval policies for toolgate: rules written in TOML, plus
//! people's sticky decisions, evaluated as a [`toolgate::tool::CallGate`].
//!
//! Pure logic: no network or database of its own. Only [`watch`] touches the
//! file system, and only [`stored`] reads a store (through the ledger's
//! [`ApprovalStore`](toolgate::ledger::ApprovalStore) trait).
//!
//! # The rule format
//!
//! One `[[rule]]` table per rule, in the project's config file (other
//! top-level keys, such as `[[mcp]]`, are ignored here):
//!
//! ```toml
//! [[rule]]
//! name = "no-rm-rf"                 # optional; default "rule #N" (1-based); unique
//! action = "deny"                   # deny | ask | allow (required)
//! tool = "shell__*"                 # glob over tool names; default "*"
//! reason = "never delete recursively"
//! [rule.input]                      # JSON pointer -> predicate; all must hold
//! "/command" = { regex = "rm\\s+-rf" }
//!
//! [[rule]]
//! name = "ask-writes"
//! action = "ask"
//! tool = "fs__write_file"
//! principal = "contractor-*"        # glob over the principal
//! [rule.input]
//! "/path" = { glob = "/etc/**" }
//!
//! [[rule]]
//! action = "ask"
//! tool = "transfer_money"
//! input = { "/amount" = { gt = 1000 }, "/to" = { one_of = ["a@x.com", "b@x.com"] } }
//! approvers = ["group:finance", "dave"]   # who decides; default the conversation's owner
//! quorum = 2                        # distinct approvals needed (default 1)
//! self_approval = false             # may the requester count (default false)
//!
//! [[rule]]
//! action = "allow"
//! tool = "get_*"
//! ```
//!
//! Keys of a rule: `name`, `action`, `tool`, `principal`, `reason`, `input`,
//! and for an `ask` rule `approvers`, `quorum` and `self_approval` (the last
//! two need `approvers`; the quorum is at least 1, and at most the number of
//! approvers when they are all principals). The deciding `ask` rule's
//! approvers travel with its verdict ([`Verdict::route`](toolgate::tool::Verdict::route)).
//! Predicate operators (one table may combine several; all must hold):
//!
//! | operator | holds when the value |
//! |---|---|
//! | `regex = "..."` | is a string in which the regex finds a match (unanchored; `^…$` to anchor) |
//! | `glob = "..."` | is a string the glob matches as a whole |
//! | `lt`, `le`, `gt`, `ge` = number | is a number `<`, `<=`, `>`, `>=` the bound |
//! | `one_of = [...]` | equals one of the values |
//! | `equals = ...` | equals the value (JSON equality; numbers by value, `1 == 1.0`) |
//!
//! # Matching
//!
//! A rule matches a call when its `tool` glob matches the tool's name, its
//! `principal` glob (if any) matches the caller's principal (a rule with
//! `principal` never matches a call without one), and every input predicate
//! holds. Pointers are RFC 6901 JSON pointers (`/a/0/b`, `~1` for `/`,
//! `~0` for `~`); the empty pointer `""` is the whole input.
//!
//! - **A pointer that does not resolve makes its predicate false.** So a
//!   `deny` rule with predicates matches only calls that have the field: a
//!   rule denying `"/recursive" = { equals = true }` does not deny a call
//!   without `recursive`. If a missing field should count as a match, write a
//!   second rule for that case (e.g. a `deny` or `ask` rule on the same tool
//!   without the predicate, which then decides every call to the tool).
//! - `regex` and `glob` look at string values only, numeric comparisons at
//!   numbers only: `"5000"` (a string) is not `gt = 1000`.
//! - Globs use [globset] syntax with `literal_separator = false`: `*` and `?`
//!   also match `/`, so `/etc/*` matches `/etc/ssl/cert.pem` too. For `deny`
//!   and `ask` rules this errs on the side of matching more. Globs and regexes
//!   see the string as given, without path normalisation: `/tmp/../etc/x` does
//!   not match `/etc/**`, so a rule meant to fence paths should also deny
//!   `..` (`{ regex = "(^|/)\\.\\.(/|$)" }`) or the tool should canonicalise.
//!   Matching is case-sensitive; `\` escapes a glob metacharacter.
//! - Everything is compiled when the policy loads; evaluation never
//!   backtracks (the `regex` crate is linear-time) and is linear in the input.
//!
//! Loading fails, naming the rule (its name, else `rule #N`, and its line)
//! and the offending key or value, for: a missing or unknown `action`, an
//! unknown key or operator, an empty predicate table, an invalid glob or
//! regex, a pointer neither empty nor starting with `/`, a NaN bound, a
//! duplicate name, or a value of the wrong type. See [`PolicyError`].
//!
//! # Deciding
//!
//! Among every rule that matches, the highest action wins: **deny > ask >
//! allow**; the verdict names the first matching rule with that action, in
//! file order, e.g. ``rule `ask-writes` matched tool `fs__write_file`, /path =
//! "/etc/hosts"`` followed by `: <reason>` when the rule has one. No rule
//! matches: no verdict, and the tool's own approval policy decides. The
//! engine combines a verdict with the tool's own policy: a deny here always
//! wins, a tool's own deny beats an ask or allow here (see
//! [`toolgate::tool::CallGate`]).
//!
//! [`StickyDecision`]s (a person's "always allow this tool in this
//! conversation", "always allow exactly this input", "never allow") take
//! part too: a sticky deny as a rule that wins over everything; an allowing
//! one is a grant ([`grants`]), which ranks as no rule but lifts a question
//! the rules or the tool ask, when its author may decide the call (never a
//! deny, never others' routes or a quorum), spending one of its uses. See
//! [`sticky`]. [`PolicyGate`] evaluates a policy with decisions in hand;
//! [`StoredGate`] reads them from a ledger store first.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use toolgate::tool::{GateAction, GateCall};
//! use toolgate_policy::{DecisionScope, Policy, PolicyGate, StickyAction, StickyDecision};
//!
//! let policy = Policy::from_toml_str(r#"
//!     [[rule]]
//!     name = "no-rm-rf"
//!     action = "deny"
//!     tool = "shell__*"
//!     reason = "never delete recursively"
//!     input = { "/command" = { regex = 'rm\s+-rf' } }
//! "#)?;
//! let input = json!({"command": "rm -rf /"});
//! let call = GateCall {
//!     tool_name: "shell__exec",
//!     input: &input,
//!     tool_call_id: "call-1",
//!     conversation_id: Some("c1"),
//!     principal: Some("alice"),
//!     groups: &[],
//! };
//! let scope = DecisionScope::Conversation { conversation_id: "c1".into() };
//! let always = StickyDecision::new("d1", StickyAction::Allow, "shell__exec", scope, 0);
//! let gate = PolicyGate::new(Arc::new(policy), vec![always], toolgate_policy::now_ms());
//! let verdict = gate.decide(&call).unwrap();
//! assert_eq!(verdict.action, GateAction::Deny);
//! assert_eq!(
//!     verdict.reason.as_deref(),
//!     Some(r#"rule `no-rm-rf` matched tool `shell__exec`, /command = "rm -rf /": never delete recursively"#)
//! );
//! // Pass it to the engine: `TextRequest::new(history).gate(Arc::new(gate))`.
//! # Ok::<(), toolgate_policy::PolicyError>(())
//! ```
//!
//! # Reloading
//!
//! A [`PolicyHandle`] holds the current policy; [`watch::watch_file`]
//! replaces it when the file changes and keeps the previous policy when the
//! new text does not parse.

pub mod cases;
pub mod compile;
pub mod config;
pub mod error;
pub mod evaluate;
pub mod explain;
pub mod grants;
pub mod handle;
pub mod history;
mod predicate;
pub mod sticky;
pub mod stored;
pub mod watch;

pub use compile::{GROUP_PREFIX, Policy, Rule};
pub use config::{BoundsConfig, EscalationConfig, HistoryConfig, MeasureConfig, PredicateConfig, RuleConfig};
pub use error::{PolicyError, RuleRef};
pub use evaluate::PolicyGate;
pub use explain::{Explanation, MatchSource, RuleMatch};
pub use handle::PolicyHandle;
pub use history::{Fact, HistoryTerm};
pub use predicate::json_eq;
pub use sticky::{DecisionScope, StickyAction, StickyDecision, now_ms, scope_covers};
pub use stored::{DecisionSource, StoredGate, decode_stored, to_stored, visible_to};
/// What a rule decides: re-exported from toolgate for convenience.
pub use toolgate::tool::GateAction;
pub use watch::{WatchError, WatchStatus, Watcher, watch_file};
