//! Table tests for a policy (`toolgate policy test FILE...`): a test file
//! names its config and lists cases, each a call (tool, input, principal,
//! groups, conversation), the calls that ran before it (for history terms),
//! and what the rules should decide (and, optionally, which rule).
//!
//! ```toml
//! config = "payments.toml"          # relative to this file
//!
//! [[case]]
//! name = "the third transfer today is refused"
//! tool = "transfer_money"
//! input = { amount = 50, to = "bob" }
//! principal = "alice"               # optional; groups from the config's [groups], or `groups = [...]`
//! expect = "deny"                   # allow | ask | deny | none (no rule matched)
//! rule = "two-a-day"                # optional: the deciding rule
//! [[case.history]]                  # calls that ran before, `ago` before now
//! input = { amount = 10, to = "bob" }   # tool: the case's; principal: the case's
//! ago = "1h"
//! ```
//!
//! Each case runs on a fresh in-memory store holding its history rows, with
//! the rules as the server evaluates them (history terms included); the
//! tool's own policy is not consulted (`none` says no rule matched).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::ledger::{ApprovalStore, LedgerConfig, MemoryStore, conversation_key, groups_listing};
use toolgate::tool::GateCall;

use crate::{Policy, PolicyError, StoredGate, now_ms};

/// Why a test file cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CasesError {
    /// A file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The test file is not a table of cases.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The config's rules do not load.
    #[error("{path}: {source}")]
    Policy {
        /// The config file.
        path: PathBuf,
        /// Why.
        source: Box<PolicyError>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestFile {
    config: PathBuf,
    #[serde(default, rename = "case")]
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    tool: String,
    #[serde(default = "empty_object")]
    input: Value,
    #[serde(default)]
    principal: Option<String>,
    #[serde(default)]
    groups: Option<Vec<String>>,
    #[serde(default)]
    conversation: Option<String>,
    expect: String,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    history: Vec<Row>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    #[serde(default)]
    tool: Option<String>,
    #[serde(default = "empty_object")]
    input: Value,
    ago: String,
    #[serde(default)]
    principal: Option<String>,
    #[serde(default)]
    conversation: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// The config's `[groups]`, if any (other keys are not read here).
#[derive(Debug, Default, Deserialize)]
struct Groups {
    #[serde(default)]
    groups: BTreeMap<String, Vec<String>>,
}

/// What one case expected and got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// `allow`, `ask`, `deny` or `none`, and the rule when the case names one.
    pub expected: (String, Option<String>),
    /// What the rules decided, the deciding rule, and why.
    pub got: (String, Option<String>, Option<String>),
}

impl CaseResult {
    /// Whether the decision (and the rule, when expected) is what the case expected.
    pub fn passed(&self) -> bool {
        self.expected.0 == self.got.0 && self.expected.1.as_ref().is_none_or(|rule| Some(rule) == self.got.1.as_ref())
    }
}

/// Runs every case of the test file at `path`, in order.
pub async fn run_file(path: &Path) -> Result<Vec<CaseResult>, CasesError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| CasesError::Read { path: path.to_owned(), source })
    };
    let invalid = |message: String| CasesError::Invalid { path: path.to_owned(), message };
    let file: TestFile = toml::from_str(&read(path)?).map_err(|error| invalid(error.to_string()))?;
    let config_path = path.parent().unwrap_or(Path::new(".")).join(&file.config);
    let text = read(&config_path)?;
    let policy = Policy::from_toml_str(&text)
        .map_err(|source| CasesError::Policy { path: config_path.clone(), source: Box::new(source) })?;
    let groups: Groups = toml::from_str(&text).unwrap_or_default();
    let (policy, groups) = (Arc::new(policy), Arc::new(groups.groups));
    let mut results = Vec::with_capacity(file.cases.len());
    for case in &file.cases {
        if !["allow", "ask", "deny", "none"].contains(&case.expect.as_str()) {
            let message = format!("case `{}`: expect `{}`: use allow, ask, deny or none", case.name, case.expect);
            return Err(invalid(message));
        }
        results.push(run_case(case, &policy, &groups).await.map_err(&invalid)?);
    }
    Ok(results)
}

async fn run_case(
    case: &Case,
    policy: &Arc<Policy>,
    groups: &Arc<BTreeMap<String, Vec<String>>>,
) -> Result<CaseResult, String> {
    let store = Arc::new(MemoryStore::new());
    let config = LedgerConfig::new(store.clone());
    let now = now_ms();
    let mut events = Vec::with_capacity(case.history.len());
    for (index, row) in case.history.iter().enumerate() {
        let ago = humantime::parse_duration(&row.ago)
            .map_err(|error| format!("case `{}`: history row {}: ago `{}`: {error}", case.name, index + 1, row.ago))?;
        let who = row.principal.as_deref().or(case.principal.as_deref());
        let chat = row.conversation.as_deref().unwrap_or("history");
        let ledger = config.owned(who, chat);
        let ledger = match who {
            Some(who) => ledger.principal(who),
            None => ledger,
        };
        let tool = row.tool.as_deref().unwrap_or(&case.tool);
        let call = DirectCall { tool_call_id: "history", tool_name: tool, input: &row.input };
        let at = now.saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX));
        events.push(direct::ran(&ledger, call, Ok(&Value::Null), at));
    }
    store.append(&events).await.map_err(|error| error.to_string())?;
    let principal = case.principal.as_deref();
    let key = conversation_key(principal, case.conversation.as_deref().unwrap_or("case"));
    let member_of = match (&case.groups, principal) {
        (Some(listed), _) => listed.clone(),
        (None, Some(principal)) => groups_listing(groups, principal),
        (None, None) => Vec::new(),
    };
    let gate = StoredGate::new(Arc::clone(policy), store.clone(), Some(key.clone()), principal.map(str::to_owned), now)
        .with_history(store, Arc::clone(groups));
    let call = GateCall {
        tool_name: &case.tool,
        input: &case.input,
        tool_call_id: "case",
        conversation_id: Some(&key),
        principal,
        groups: &member_of,
    };
    let explanation = gate.explain(&call).await.map_err(|error| error.to_string())?;
    let decided = explanation.decision.map_or("none", |action| action.as_str()).to_owned();
    Ok(CaseResult {
        name: case.name.clone(),
        expected: (case.expect.clone(), case.rule.clone()),
        got: (decided, explanation.rule, explanation.reason),
    })
}
