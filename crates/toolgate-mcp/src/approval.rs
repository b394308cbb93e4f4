//! Approval defaults from MCP tool annotations.
//!
//! MCP tool annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
//! `openWorldHint`) are claims a server makes about its own tools; the MCP
//! specification says clients must not base decisions on them when the
//! server is not trusted. So they are believed only to *relax* approval, and
//! only for servers configured `trusted = true`:
//!
//! | the tool says | trusted server | untrusted server |
//! |---|---|---|
//! | `readOnlyHint: true`, and neither `destructiveHint: true` nor `openWorldHint: true` | **runs without approval** | asks |
//! | `readOnlyHint: true` with `destructiveHint: true` or `openWorldHint: true` | asks | asks |
//! | `readOnlyHint` false or absent (whatever `destructiveHint` says) | asks | asks |
//! | no annotations (MCP's defaults: not read-only, destructive, open world) | asks | asks |
//!
//! For a read-only tool only an explicit `true` of `destructiveHint` or
//! `openWorldHint` counts (the specification defines `destructiveHint` only
//! for tools that are not read-only). `idempotentHint: true` on a trusted
//! server, and any read-only tool that runs without approval, make the tool
//! [`idempotent`](toolgate::Tool::idempotent) (re-run after a crash).
//!
//! Every asking default carries a reason the approval card shows. Declarative
//! allow rules (a request's [`CallGate`](toolgate::tool::CallGate)) can still
//! lift an ask; nothing here can deny.

use serde::{Deserialize, Serialize};

/// The hints of an MCP tool's annotations; `None` where the tool says nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolHints {
    /// `readOnlyHint`: the tool does not modify its environment.
    pub read_only_hint: Option<bool>,
    /// `destructiveHint`: the tool may destroy or overwrite data.
    pub destructive_hint: Option<bool>,
    /// `idempotentHint`: calling it twice with the same input has no further effect.
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint`: the tool reaches systems outside the server's own domain.
    pub open_world_hint: Option<bool>,
}

impl From<&rmcp::model::ToolAnnotations> for ToolHints {
    fn from(annotations: &rmcp::model::ToolAnnotations) -> Self {
        Self {
            read_only_hint: annotations.read_only_hint,
            destructive_hint: annotations.destructive_hint,
            idempotent_hint: annotations.idempotent_hint,
            open_world_hint: annotations.open_world_hint,
        }
    }
}

/// What a tool gets by default: whether a person approves its calls, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDefault {
    /// True when every call asks a person (before any request-wide rules).
    pub needs_approval: bool,
    /// Why it asks (as the approval card shows it) or why it does not.
    pub reason: String,
    /// True when the tool is declared idempotent.
    pub idempotent: bool,
}

/// The default for the tool named `tool_name` (the model-facing name) of
/// `server`, from its annotations (`None` when it has none). See the module docs.
pub fn approval_default(tool_name: &str, server: &str, trusted: bool, hints: Option<&ToolHints>) -> ApprovalDefault {
    let ask = |reason: String| ApprovalDefault { needs_approval: true, reason, idempotent: false };
    let modifies = || ask(format!("MCP tool `{tool_name}` may modify data (destructiveHint or no annotations)"));
    let Some(hints) = hints else {
        return modifies();
    };
    let idempotent = trusted && hints.idempotent_hint == Some(true);
    let mut decided = if hints.read_only_hint == Some(true) {
        if !trusted {
            ask(format!(
                "MCP tool `{tool_name}` asks for approval: server `{server}` is not trusted, so readOnlyHint is not believed"
            ))
        } else if hints.destructive_hint == Some(true) {
            ask(format!("MCP tool `{tool_name}` may modify data (destructiveHint despite readOnlyHint)"))
        } else if hints.open_world_hint == Some(true) {
            ask(format!("MCP tool `{tool_name}` reaches outside systems (openWorldHint)"))
        } else {
            return ApprovalDefault {
                needs_approval: false,
                reason: format!("server `{server}` is trusted and marks `{tool_name}` readOnlyHint"),
                idempotent: true,
            };
        }
    } else if hints.destructive_hint == Some(false) {
        let open_world = if hints.open_world_hint == Some(false) { "" } else { " and may reach outside systems" };
        ask(format!("MCP tool `{tool_name}` may modify data{open_world} (not marked readOnlyHint)"))
    } else {
        modifies()
    };
    decided.idempotent = idempotent;
    decided
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints(read_only: Option<bool>, destructive: Option<bool>, open_world: Option<bool>) -> ToolHints {
        ToolHints {
            read_only_hint: read_only,
            destructive_hint: destructive,
            idempotent_hint: None,
            open_world_hint: open_world,
        }
    }

    #[test]
    fn only_trusted_read_only_tools_skip_approval() {
        let read_only = hints(Some(true), None, Some(false));
        let trusted = approval_default("fs__read", "fs", true, Some(&read_only));
        assert!(!trusted.needs_approval);
        assert!(trusted.idempotent);
        let untrusted = approval_default("fs__read", "fs", false, Some(&read_only));
        assert!(untrusted.needs_approval);
        assert!(untrusted.reason.contains("server `fs` is not trusted, so readOnlyHint is not believed"));
        assert!(!untrusted.idempotent);
        let unspecified_world = hints(Some(true), None, None);
        assert!(!approval_default("fs__read", "fs", true, Some(&unspecified_world)).needs_approval);
    }

    #[test]
    fn everything_else_asks_with_a_reason() {
        for trusted in [true, false] {
            let none = approval_default("fs__write_file", "fs", trusted, None);
            assert!(none.needs_approval);
            assert_eq!(none.reason, "MCP tool `fs__write_file` may modify data (destructiveHint or no annotations)");
            let empty = approval_default("fs__write_file", "fs", trusted, Some(&ToolHints::default()));
            assert_eq!(empty, none, "empty annotations mean MCP's defaults");
            let destructive = approval_default("fs__x", "fs", trusted, Some(&hints(Some(false), Some(true), None)));
            assert!(destructive.needs_approval);
            assert!(destructive.reason.contains("destructiveHint"));
            let additive = approval_default("fs__x", "fs", trusted, Some(&hints(None, Some(false), Some(false))));
            assert!(additive.needs_approval);
            assert!(additive.reason.contains("not marked readOnlyHint"));
        }
        let open = approval_default("s__search", "s", true, Some(&hints(Some(true), None, Some(true))));
        assert!(open.needs_approval);
        assert!(open.reason.contains("openWorldHint"));
        let contradictory = approval_default("s__x", "s", true, Some(&hints(Some(true), Some(true), Some(false))));
        assert!(contradictory.needs_approval);
    }

    #[test]
    fn idempotent_hint_counts_only_from_trusted_servers() {
        let write = ToolHints { idempotent_hint: Some(true), ..hints(Some(false), Some(true), Some(false)) };
        assert!(approval_default("fs__write_file", "fs", true, Some(&write)).idempotent);
        assert!(!approval_default("fs__write_file", "fs", false, Some(&write)).idempotent);
    }
}
