//! The approvals in traces: an `approval requested` span when one is issued
//! and an `approval {decision}` span when one is decided, each a child of
//! whatever the server was doing (the chat request that asked, the inbox
//! request that voted, a timer), with toolgate's attributes:
//! `toolgate.approval.id`, `toolgate.approval.decision` (`pending` when
//! asked), `toolgate.approval.approvers` (asked: whom it is routed to, else
//! its conversation's owner; decided: who decided) and `toolgate.rule` (the
//! rule or tool policy that asked, as the approval's reason states it).
//!
//! The `issued` audit event of an approval requested while traces are
//! exported carries the W3C trace context of its `approval requested` span
//! (`traceparent` in its data); a continuation links to it ([`continuation`]).
//! Nothing here runs when traces are off.

use std::borrow::Cow;
use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Array, StringValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use toolgate::approval::lifecycle::Decision;
use toolgate::ledger::{ApprovalRecord, AuditEvent, AuditKind, AuditQuery, AuditStore, AuditView};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::SPAN_TARGET;

/// The key of the trace context in an `issued` event's data.
pub const TRACEPARENT: &str = "traceparent";

/// Opens (and ends) an `approval requested` span per issued record, and
/// returns `events` with each record's `issued` event carrying its span's
/// trace context. Borrows `events` unchanged when traces are off.
pub(crate) fn issued<'a>(records: &[ApprovalRecord], events: &'a [AuditEvent]) -> Cow<'a, [AuditEvent]> {
    if !super::enabled() {
        return Cow::Borrowed(events);
    }
    let mut events = events.to_vec();
    for record in records {
        let span = approval_span(record, "requested", "pending");
        let asked = match &record.routing {
            Some(routing) => routing.approvers.clone(),
            None => record.owner.iter().cloned().collect(),
        };
        span.set_attribute("toolgate.approval.approvers", strings(asked));
        let Some(traceparent) = traceparent(&span) else { continue };
        let issued = events.iter_mut().filter(|event| {
            event.kind == AuditKind::Issued && event.approval_id == record.approval_id && event.data.is_object()
        });
        for event in issued {
            event.data[TRACEPARENT] = serde_json::Value::String(traceparent.clone());
        }
    }
    Cow::Owned(events)
}

/// Opens (and ends) the `approval {outcome}` span of a decided record
/// (`outcome`: approved, denied, expired, withdrawn).
pub(crate) fn decided(record: &ApprovalRecord, outcome: &str) {
    if !super::enabled() {
        return;
    }
    let span = approval_span(record, outcome, outcome);
    span.set_attribute("toolgate.approval.approvers", strings(deciders(record, outcome)));
}

/// Who decided: the voters on the side of the outcome, else the deciding answer's principal.
fn deciders(record: &ApprovalRecord, outcome: &str) -> Vec<String> {
    let approved = outcome == "approved";
    let mut who: Vec<String> = record
        .votes
        .iter()
        .filter(|vote| matches!(vote.decision, Decision::Approve { .. }) == approved)
        .filter_map(|vote| vote.principal.clone())
        .collect();
    if let Some(principal) = record.decision.as_ref().and_then(|decision| decision.principal.clone())
        && !who.contains(&principal)
    {
        who.push(principal);
    }
    who
}

/// An approval's span, ended when the caller drops it.
fn approval_span(record: &ApprovalRecord, what: &str, decision: &str) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "approval",
        otel.name = format!("approval {what}"),
        otel.kind = "internal",
        toolgate.approval.id = record.approval_id.as_str(),
        toolgate.approval.decision = decision,
        toolgate.rule = record.reason.as_deref(),
        gen_ai.tool.name = record.tool_name.as_str(),
        gen_ai.tool.call.id = record.tool_call_id.as_str(),
    )
}

/// The span of a server-side continuation of `conversation` (its id as its owner named it), with
/// a link to the `approval requested` span of each approval of `records`
/// whose `issued` event names one (read from `store`). A disabled span when
/// traces are off.
pub(crate) async fn continuation(
    store: &dyn AuditStore,
    conversation: &str,
    records: &[(String, ApprovalRecord)],
) -> Span {
    if !super::enabled() {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "continue_conversation",
        otel.kind = "internal",
        toolgate.conversation.id = conversation,
    );
    let ids: Vec<String> = records.iter().map(|(_, record)| record.approval_id.clone()).collect();
    span.set_attribute("toolgate.approval.id", strings(ids.clone()));
    let Some((_, first)) = records.first() else { return span };
    let query = AuditQuery {
        conversation_id: Some(first.conversation_name().to_owned()),
        since: records.iter().map(|(_, record)| record.issued_at).min(),
        view: AuditView::All,
        ..AuditQuery::default()
    };
    let events = match store.audit(&query).await {
        Ok(events) => events,
        Err(error) => {
            tracing::warn!(%error, conversation, "cannot read where the continued approvals were asked");
            return span;
        }
    };
    let asked = events.iter().filter(|event| event.kind == AuditKind::Issued && ids.contains(&event.approval_id));
    for traceparent in asked.filter_map(|event| event.data.get(TRACEPARENT)?.as_str()) {
        let context =
            TraceContextPropagator::new().extract(&HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]));
        let asking = context.span().span_context().clone();
        if asking.is_valid() {
            span.add_link(asking);
        }
    }
    span
}

/// The W3C `traceparent` of a span, when it is in a trace.
fn traceparent(span: &Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    if !span_context.is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// A list of names as an attribute value.
fn strings(values: Vec<String>) -> Value {
    Value::Array(Array::String(values.into_iter().map(StringValue::from).collect()))
}
