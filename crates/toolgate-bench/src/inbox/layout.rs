//! The data set: `approvals` pending approvals spread round-robin over
//! `conversations` conversations, each conversation owned by one of
//! `requesters` requesters, each approval routed to one of the groups of
//! `group_size` approvers (`group:team-G`, members resolved at issue, as the
//! engine records them) with a quorum, and no self-approval.
//!
//! Everything is a function of the approval's number `n` (0 is the oldest),
//! so the bench knows, without reading the store, which group decides an
//! approval and who may vote on it.

use serde_json::{Value, json};
use toolgate::approval::input_digest;
use toolgate::approval::lifecycle::{GROUP_PREFIX, Route};
use toolgate::ledger::{ApprovalRecord, ApprovalState, AuditEvent, AuditKind, Millis, conversation_key};

/// How long the filled approvals stay answerable: far beyond any run.
const TTL_MILLIS: Millis = 30 * 24 * 60 * 60 * 1000;

/// The shape of the data set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Pending approvals.
    pub approvals: usize,
    /// Conversations they are spread over.
    pub conversations: usize,
    /// Approvers, `approver-00` on.
    pub approvers: usize,
    /// Approvers per group (the groups are `approvers / group_size`).
    pub group_size: usize,
    /// Distinct approvals an approval needs.
    pub quorum: u32,
    /// Requesters (conversation owners), `requester-000` on.
    pub requesters: usize,
    /// Makes ids unique across runs against one database.
    pub run: String,
    /// When the newest approval was issued; approval `n` was issued `approvals - n` ms before.
    pub now: Millis,
}

impl Layout {
    /// Refuses shapes the bench cannot use.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.approvals > 0 && self.conversations > 0 && self.requesters > 0, "counts must be positive");
        anyhow::ensure!(self.group_size >= 2, "--group-size must be at least 2 (the quorum is at least 2)");
        anyhow::ensure!(
            self.approvers >= self.group_size && self.approvers.is_multiple_of(self.group_size),
            "--approvers ({}) must be a multiple of --group-size ({})",
            self.approvers,
            self.group_size
        );
        anyhow::ensure!((2..=self.group_size as u32).contains(&self.quorum), "--quorum must be from 2 to --group-size");
        Ok(())
    }

    /// The number of groups.
    pub fn groups(&self) -> usize {
        self.approvers / self.group_size
    }

    /// Approver `i`'s principal.
    pub fn approver(i: usize) -> String {
        format!("approver-{i:02}")
    }

    /// Requester `i`'s principal.
    pub fn requester(i: usize) -> String {
        format!("requester-{i:03}")
    }

    /// Group `g`'s name (as `[groups]` lists it).
    pub fn group_name(g: usize) -> String {
        format!("team-{g}")
    }

    /// The approver indices of group `g`.
    pub fn members(&self, g: usize) -> Vec<usize> {
        (g * self.group_size..(g + 1) * self.group_size).collect()
    }

    /// The group that decides approval `n` (spread evenly, not in runs).
    pub fn group_of(&self, n: usize) -> usize {
        (mix(n as u64) % self.groups() as u64) as usize
    }

    /// The approval id of approval `n`.
    pub fn approval_id(&self, n: usize) -> String {
        format!("apv-{}-{n:06}", self.run)
    }

    /// The conversation key (owner and id) of approval `n`.
    pub fn conversation_of(&self, n: usize) -> String {
        let conversation = n % self.conversations;
        let owner = Self::requester(conversation % self.requesters);
        conversation_key(Some(&owner), &format!("chat-{}-{conversation:05}", self.run))
    }

    /// Approval `n` as the engine issues it under a rule with group approvers.
    pub fn record(&self, n: usize) -> ApprovalRecord {
        let group = self.group_of(n);
        let (tool_name, input) = tool_call(n);
        let issued_at = self.now - (self.approvals - n) as Millis;
        let route = Route {
            approvers: vec![format!("{GROUP_PREFIX}{}", Self::group_name(group))],
            quorum: self.quorum,
            self_approval: false,
            ..Route::default()
        };
        let routing = route.resolve(|name| {
            (name == Self::group_name(group)).then(|| self.members(group).into_iter().map(Self::approver).collect())
        });
        ApprovalRecord {
            approval_id: self.approval_id(n),
            conversation_id: self.conversation_of(n),
            owner: Some(Self::requester((n % self.conversations) % self.requesters)),
            client: None,
            tool_call_id: format!("call_{}_{n:06}", self.run),
            tool_name: tool_name.to_owned(),
            input_digest: input_digest(&input).expect("the inputs are plain JSON"),
            input,
            issued_at,
            expires_at: self.now + TTL_MILLIS,
            state: ApprovalState::Pending,
            decision: None,
            output: None,
            lease: None,
            updated_at: issued_at,
            routing: Some(routing),
            votes: Vec::new(),
            reason: Some(format!(
                "rule `{tool_name}-review` asks: {} approvers of group {} must agree",
                self.quorum,
                Self::group_name(group)
            )),
            supersedes: None,
            superseded_by: None,
            origin: Default::default(),
            input_schema: None,
            lineage: Vec::new(),
        }
    }

    /// The `issued` audit event the engine records with `record`.
    pub fn issued_event(record: &ApprovalRecord) -> AuditEvent {
        let owner = record.owner.as_deref();
        let routing = record.routing.as_ref();
        AuditEvent {
            seq: 0,
            at: record.issued_at,
            kind: AuditKind::Issued,
            approval_id: record.approval_id.clone(),
            tool_call_id: record.tool_call_id.clone(),
            conversation_id: record.conversation_name().to_owned(),
            owner: owner.map(str::to_owned),
            principal: owner.map(str::to_owned),
            data: json!({
                "toolName": record.tool_name,
                "input": record.input,
                "expiresAt": record.expires_at,
                "reason": record.reason,
                "approvers": routing.map(|routing| routing.approvers.clone()),
                "quorum": routing.map(|routing| routing.quorum),
            }),
        }
    }
}

/// A tool call of the kinds that ask for approval, with a realistic input.
fn tool_call(n: usize) -> (&'static str, Value) {
    match n % 4 {
        0 => (
            "send_email",
            json!({
                "to": format!("customer-{}@example.com", n % 9_973),
                "subject": "About your refund request",
                "body": "Hello,\n\nwe have reviewed your request and issued a refund of the full amount to the \
                         card you paid with. It should appear on your statement within five business days.\n\n\
                         Kind regards,\nSupport",
            }),
        ),
        1 => (
            "transfer_funds",
            json!({
                "from": "operating-eur",
                "to": format!("DE89 3704 0044 0532 {:04} {:02}", n % 10_000, n % 100),
                "amount": 1_000.0 + (n % 50_000) as f64 / 4.0,
                "currency": "EUR",
                "memo": format!("invoice INV-2026-{n:06}"),
            }),
        ),
        2 => ("delete_file", json!({"path": format!("/srv/reports/2026/q{}/export-{n:06}.csv", n % 4 + 1)})),
        _ => (
            "run_sql",
            json!({
                "database": "billing",
                "statement": format!("UPDATE invoices SET status = 'void', voided_by = 'agent' WHERE id = {n}"),
            }),
        ),
    }
}

/// A 64-bit mix (splitmix64's finalizer): spreads consecutive numbers over the groups.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use toolgate::approval::lifecycle::{Voter, is_approver, viewers};

    use super::*;

    fn layout() -> Layout {
        Layout {
            approvals: 1_000,
            conversations: 100,
            approvers: 50,
            group_size: 5,
            quorum: 2,
            requesters: 10,
            run: "t".into(),
            now: 10_000_000,
        }
    }

    #[test]
    fn approvals_are_routed_to_their_group_and_spread_over_all_groups() {
        let layout = layout();
        layout.check().unwrap();
        let mut per_group = vec![0; layout.groups()];
        for n in 0..layout.approvals {
            per_group[layout.group_of(n)] += 1;
        }
        assert!(per_group.iter().all(|&count| (60..140).contains(&count)), "{per_group:?}");
        let record = layout.record(7);
        let group = layout.group_of(7);
        let member = Voter::new(Some(Layout::approver(layout.members(group)[0])));
        assert!(is_approver(&record, &member));
        let outsider = Voter::new(Some(Layout::approver(layout.members((group + 1) % layout.groups())[0])));
        assert!(!is_approver(&record, &outsider));
        // The requester, the group and its five members.
        assert_eq!(viewers(&record).len(), 7);
        assert!(record.issued_at < layout.record(8).issued_at);
    }

    #[test]
    fn shapes_the_bench_cannot_use_are_refused() {
        assert!(Layout { approvers: 49, ..layout() }.check().is_err());
        assert!(Layout { quorum: 1, ..layout() }.check().is_err());
        assert!(Layout { quorum: 6, ..layout() }.check().is_err());
    }
}
