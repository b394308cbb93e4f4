//! Store mode: the inbox read and decided on the store itself, as one
//! voter (`--as`, `--group`, `--config`).
//!
//! Every rule is the approval lifecycle's, as on the server: a listing
//! selects by the voter's keys and keeps what [`may_see`] admits; a vote is
//! [`lifecycle::cast`] with the conversation marked due to continue (a
//! running server's worker polls the store and continues it); a withdrawal
//! is [`lifecycle::withdraw`]. An approval the voter may not see is
//! `unknown_approval`, so an outsider never learns it exists.
//!
//! "Always allow" (`watch --decide`'s `a`) saves a sticky decision in the
//! store, scoped to the approval's conversation (its key, owner included)
//! and made by its owner, as the server's `POST /api/decisions` keeps one
//! its owner makes; only the owner (or anyone, in a conversation without
//! owner) may.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;
use toolgate::Decision;
use toolgate::approval::lifecycle::grant::{self, GrantRefusal};
use toolgate::approval::lifecycle::{
    self, EditCheck, GROUP_PREFIX, VoteError, VoteOptions, VoteRefusal, Voter, may_see, requester,
};
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, Clock, DecisionScope, InboxChanges, LedgerStore, StateFilter, SystemClock,
    check_conversation_id, check_group, check_principal,
};
use toolgate_policy::{StickyAction, StickyDecision, to_stored};
use toolgate_server::approval_item;

use super::{Ballot, Listing, Refusal, STICKY_NOTE};
use crate::config::Config;
use crate::store::StoreArgs;

/// How often `watch` reads the pending approvals again.
const POLL: Duration = Duration::from_secs(1);

/// The voter of the store-mode flags: `principal` (else the OS user name),
/// the `groups` given and the `[groups]` of the config file that list them;
/// an admin if the config's `admins` name them.
pub fn voter(principal: Option<String>, groups: &[String], config: Option<&Path>) -> anyhow::Result<Voter> {
    let principal = match principal {
        Some(principal) if principal.is_empty() => bail!("--as needs a principal"),
        Some(principal) => principal,
        None => crate::store::os_user()?,
    };
    check_principal(&principal).context("--as (or the OS user name) cannot name a voter")?;
    let mut own: Vec<String> = Vec::with_capacity(groups.len());
    for group in groups {
        let name = group.strip_prefix(GROUP_PREFIX).unwrap_or(group);
        if name.is_empty() || name.contains(':') || check_group(name).is_err() {
            bail!("--group `{group}` is not a group name");
        }
        own.push(name.to_owned());
    }
    let mut admin = false;
    if let Some(path) = config {
        let config = Config::load(path)?;
        own.extend(toolgate::ledger::groups_listing(&config.groups, &principal));
        admin = config.admins.contains(&principal);
    }
    own.sort_unstable();
    own.dedup();
    Ok(Voter { principal: Some(principal), groups: own, admin, ..Voter::default() })
}

/// The store, and who acts on it.
pub struct Local {
    store: Arc<dyn LedgerStore>,
    voter: Voter,
}

impl Local {
    /// Opens the store of `args` (as `toolgate audit` does) for `voter`.
    pub async fn open(args: &StoreArgs, voter: Voter) -> anyhow::Result<Self> {
        let Some(store) = args.open().await? else {
            bail!("`toolgate approvals` needs a store; --store none keeps no approvals");
        };
        Ok(Self { store, voter })
    }

    /// The keys a listing selects by (`None`: every approval, for an admin):
    /// the voter's, and `""`, under which a server without principals files
    /// its approvals (the operator on the store is its one user).
    fn viewer_keys(&self) -> Option<Vec<String>> {
        (!self.voter.admin).then(|| {
            let mut keys = self.voter.keys();
            keys.push(String::new());
            keys
        })
    }

    /// The approvals the voter may see, newest first.
    pub async fn list(&self, listing: &Listing) -> anyhow::Result<Vec<Value>> {
        if let Some(Err(error)) = listing.conversation.as_deref().map(check_conversation_id) {
            return Err(refusal("invalid_chat_id", &error.to_string()));
        }
        let query = ApprovalQuery {
            viewer_keys: self.viewer_keys(),
            states: listing.state.filter(),
            conversation_id: None,
            conversation_name: listing.conversation.clone(),
            limit: listing.limit,
        };
        let records = self.store.list_approvals(&query).await.context("cannot list the approvals")?;
        let visible = records.iter().filter(|record| may_see(record, &self.acting_on(record)));
        Ok(visible.map(approval_item).collect())
    }

    /// One approval the voter may see.
    pub async fn show(&self, id: &str) -> anyhow::Result<Value> {
        self.visible(id).await.map(|record| approval_item(&record))
    }

    /// Casts the voter's vote; the item as it is after.
    pub async fn vote(&self, id: &str, ballot: Ballot) -> anyhow::Result<Value> {
        let (decision, note) = match ballot.approve {
            true => (Decision::Approve { edited_input: ballot.edited_input }, ballot.reason),
            false => (Decision::Deny { reason: ballot.reason }, None),
        };
        let options = VoteOptions { continuation: true, note };
        let record = self.visible(id).await?;
        if record.routing.is_some() && matches!(decision, Decision::Approve { edited_input: Some(_) }) {
            // The edited input must be judged by the rules and the tool's own policy
            // (`lifecycle::check_edit`), which only the server that offers the tool has.
            return Err(refusal(
                "edit_not_allowed",
                "an edit of an approval routed to approvers is checked against the server's tools and rules: \
                 vote through the server (--server URL), or approve without the edit",
            ));
        }
        if let (Decision::Approve { edited_input: Some(edit) }, Some(schema)) = (&decision, &record.input_schema) {
            // The schema its requester gave with the call (the call-gating API's `inputSchema`)
            // needs no server: the one edit check judges the edit by it.
            let tool = toolgate::Tool::dynamic(record.tool_name.clone(), serde_json::json!({}));
            let context = toolgate::tool::ApprovalContext::new(record.tool_call_id.clone(), Vec::new());
            let requester = toolgate::tool::Caller::default();
            let input_schema = Some(schema);
            let check = EditCheck { tool: &tool, edit, requester, context, routed: false, voter: None, input_schema };
            if let Err(outside) = lifecycle::check_edit(check).await {
                return Err(refusal(outside.code(), &outside.to_string()));
            }
        }
        let voter = self.acting_on(&record);
        // A grant is checked before the vote and saved once it counted, as the server's inbox does.
        let grant = match &ballot.grant {
            None => None,
            Some(_) if !decision.is_approve() => return Err(grant_refused(GrantRefusal::NotApproving)),
            Some(spec) => {
                let made = toolgate_policy::grants::issue(&record, &voter, spec, SystemClock.now());
                Some(made.map_err(grant_refused)?)
            }
        };
        let voted = lifecycle::cast(self.store.as_ref(), &SystemClock, id, &voter, decision, options).await;
        let record = voted.map_err(vote_error)?;
        if let Some(made) = grant {
            grant::save(self.store.as_ref(), &made).await.context("cannot store the grant")?;
        }
        Ok(approval_item(&record))
    }

    /// Withdraws the voter's own pending request; the item as it is after.
    pub async fn withdraw(&self, id: &str) -> anyhow::Result<Value> {
        let voter = self.acting_on(&self.visible(id).await?);
        let withdrawn = lifecycle::withdraw(self.store.as_ref(), &SystemClock, id, &voter).await;
        withdrawn.map(|record| approval_item(&record)).map_err(vote_error)
    }

    /// The voter's principal.
    pub fn principal(&self) -> Option<String> {
        self.voter.principal.clone()
    }

    /// Saves "always allow this approval's tool in its conversation" as a
    /// sticky decision of the conversation's owner; returns its id. Anyone
    /// but the owner is refused (`not_the_requester`).
    pub async fn always_allow(&self, id: &str) -> anyhow::Result<String> {
        let record = self.visible(id).await?;
        let owner = requester(&record);
        if owner.is_some() && self.acting_on(&record).principal.as_deref() != owner {
            let message = format!("only the requester may always allow a tool in the conversation of approval `{id}`");
            return Err(refusal("not_the_requester", &message));
        }
        let scope = DecisionScope::Conversation { conversation_id: record.conversation_id.clone() };
        let decision_id = format!("dec_{}", uuid::Uuid::now_v7().simple());
        let mut decision =
            StickyDecision::new(decision_id, StickyAction::Allow, &record.tool_name, scope, SystemClock.now())
                .note(STICKY_NOTE);
        if let Some(owner) = owner {
            decision = decision.created_by(owner);
        }
        self.store.save_decision(&to_stored(&decision)).await.context("cannot store the sticky decision")?;
        Ok(decision.id)
    }

    /// Every [`POLL`], the pending approvals the voter may decide that are
    /// new or changed, and where those that stopped pending went (as the
    /// server's `/api/approvals/stream`); never returns but on `each`'s error.
    pub async fn watch(&self, each: &mut dyn FnMut(&Value) -> anyhow::Result<()>) -> anyhow::Result<()> {
        let query = ApprovalQuery {
            viewer_keys: self.viewer_keys(),
            states: StateFilter::Pending,
            conversation_id: None,
            conversation_name: None,
            limit: toolgate_server::MAX_APPROVALS_LIMIT,
        };
        let mut changes = InboxChanges::default();
        loop {
            match changes.next(self.store.as_ref(), &query, &self.voter).await {
                Ok(records) => records.iter().try_for_each(|record| each(&approval_item(record)))?,
                Err(error) => tracing::warn!("cannot read the approvals: {error:#}"),
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Who acts on `record`: the voter, or, for an approval of a server
    /// without principals (no requester, no approvers), its one user: the
    /// operator on the store is that user.
    fn acting_on(&self, record: &ApprovalRecord) -> Voter {
        match (requester(record), &record.routing) {
            (None, None) => Voter::new(None),
            _ => self.voter.clone(),
        }
    }

    /// The record, if the voter may see it.
    async fn visible(&self, id: &str) -> anyhow::Result<ApprovalRecord> {
        let record = self.store.approvals(&[id.to_owned()]).await.context("cannot read the approval")?.pop();
        match record {
            Some(record) if may_see(&record, &self.acting_on(&record)) => Ok(record),
            _ => Err(refused(VoteRefusal::Unknown(id.to_owned()))),
        }
    }
}

/// A refusal as an error.
fn refusal(code: &str, message: &str) -> anyhow::Error {
    Refusal { code: code.to_owned(), message: message.to_owned() }.into()
}

/// A grant refused, as an error.
fn grant_refused(refusal: GrantRefusal) -> anyhow::Error {
    Refusal { code: refusal.code().to_owned(), message: refusal.to_string() }.into()
}

/// The lifecycle's refusal as an error.
fn refused(refusal: VoteRefusal) -> anyhow::Error {
    Refusal { code: refusal.code().to_owned(), message: refusal.to_string() }.into()
}

/// A vote's or withdrawal's failure: a refusal, or the store's error.
fn vote_error(error: VoteError) -> anyhow::Error {
    match error {
        VoteError::Refused(refusal) => refused(refusal),
        VoteError::Store(error) => anyhow::Error::new(error).context("the store failed; nothing was recorded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_voter_named_like_a_group_or_a_link_is_refused() {
        for name in ["group:finance", "link:mail", "bo\u{1f}b"] {
            let refused = format!("{:#}", voter(Some(name.to_owned()), &[], None).unwrap_err());
            assert!(refused.contains("--as"), "{name:?}: {refused}");
        }
        assert!(voter(Some("bob".to_owned()), &["finance\u{7}".to_owned()], None).is_err());
        let bob = voter(Some("bob".to_owned()), &["group:finance".to_owned()], None).unwrap();
        assert_eq!((bob.principal.as_deref(), bob.groups), (Some("bob"), vec!["finance".to_owned()]));
    }
}
