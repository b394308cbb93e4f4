//! The error codes of the API and what each means, and how the document
//! lists them.
//!
//! A handler's `#[utoipa::path]` names the codes of each error response in
//! an `x-error-codes` extension (a list of codes; `x-run-error-codes` for the
//! `RUN_ERROR` events of an AG-UI stream). The server turns each list into an
//! object of code and meaning from [`CODES`] and appends the same to the
//! response's description, and adds the codes every endpoint of a kind can
//! return, from what the operation itself says:
//! - 401 `unauthorized` where it takes credentials (`security`);
//! - 403 `cross_origin_request` for every method but `GET` (servers with OIDC sign-in);
//! - 400 `unreadable_body`, 413 `body_too_large`, 415 `unsupported_media_type`
//!   where the body is JSON.

use serde_json::{Map, Value, json};

/// Every error code the server answers with (`{"error": {"code", ...}}`,
/// or an AG-UI `RUN_ERROR`'s `code`), and what it means.
pub const CODES: &[(&str, &str)] = &[
    // The request itself.
    ("unauthorized", "No valid credentials: a bearer token, the principal header from a trusted proxy, or a session."),
    (
        "cross_origin_request",
        "A request signed in with the session cookie that changes something came from another origin.",
    ),
    (
        "invalid_principal",
        "The principal header is sent twice, or names no usable principal (control characters, too long, or `group:`/`link:`).",
    ),
    (
        "host_not_allowed",
        "421: the request's `Host` is not one of the server's names (loopback, `--public-url`, `--allowed-host`).",
    ),
    ("unsupported_media_type", "The body is not declared as `application/json`."),
    ("body_too_large", "The body is larger than the server accepts."),
    ("unreadable_body", "The body could not be read (cut off)."),
    ("invalid_json", "The body is not valid JSON."),
    ("invalid_body", "The body is JSON but not what the endpoint takes."),
    ("invalid_query", "An unknown or malformed query parameter."),
    (
        "invalid_chat_id",
        "The chat or thread id has control characters or is longer than 1024 bytes, or a chat id starts with `ag-ui:` (AG-UI threads) or `api:` (the call-gating API's calls).",
    ),
    (
        "missing_conversation_id",
        "With a store every request needs a conversation id (the chat `id`, the AG-UI `threadId`).",
    ),
    ("no_store", "The server runs without a store (`--store none`), which this endpoint needs."),
    ("receipts_off", "The server signs no receipts (it runs without a store, or with `--no-receipts`)."),
    (
        "no_receipt",
        "No receipt yet: nothing has decided, moved or ended the approval or call, or the audit event is of a kind that gets none.",
    ),
    ("unknown_event", "No audit event at that position in the caller's audit view (another owner's is unknown too)."),
    ("store_unavailable", "The approval store failed; nothing ran that was not recorded. Retry."),
    ("not_found", "The server does not sign people in with OpenID Connect."),
    // Messages and histories.
    ("invalid_message", "A message or part is malformed (the message and part are named)."),
    ("invalid_messages", "The messages cannot form a conversation."),
    (
        "history_mismatch",
        "The history holds a tool call, input or result the server never produced, or changed one it did.",
    ),
    ("corrupt_conversation", "The stored conversation cannot be read."),
    ("chat_not_found", "The requester has no stored chat of that id."),
    ("missing_tool_results", "Tool calls in the history have no result."),
    ("duplicate_tool_call_id", "Two tool calls in the history share an id."),
    ("forged_tool_result", "A tool result in the history contradicts the ledger: the server never produced it."),
    ("toolkit_required", "The history answers approvals, but no tools are offered to act on them."),
    ("tool_not_found", "A call names a tool the server does not offer."),
    ("invalid_tool_input", "A call's input (or its edit) fails the tool's input schema."),
    ("model_error", "The model failed."),
    // Approvals answered in a conversation.
    ("invalid_approval", "An approval answer cannot be mapped to a request."),
    ("unknown_approval", "No such approval (visible to the caller), or an answer to one nobody requested."),
    ("approval_tool_call_not_found", "An approval request names a tool call that is not in the history."),
    ("conflicting_approval_responses", "The same approval was answered twice, differently."),
    ("unanswered_approvals", "Approval requests have no answer and the conversation did not move on."),
    ("duplicate_approval_id", "Two approval requests share an approval id."),
    ("duplicate_approval_request", "One tool call has more than one approval request."),
    ("invalid_approval_signature", "An approval's signature is missing or wrong (forged or tampered)."),
    ("approval_not_issued", "The server never issued this approval id."),
    ("approval_mismatch", "The approval was issued for another call, input or conversation."),
    ("approval_already_decided", "The approval was already decided (otherwise); the recorded decision stands."),
    ("approval_in_progress", "The approved call is running in another request; retry for its outcome."),
    ("approvals_pending", "Approvals routed to others are pending: the step waits for their votes."),
    ("approval_expired", "The approval expired before it was decided."),
    (
        "edit_not_allowed",
        "The tool does not allow edited inputs, or (without a store to hold a new approval) the edit needs approvers \
         the answer does not satisfy.",
    ),
    ("edit_denied", "The policy denies the edited input."),
    ("edit_not_supported", "An edit of a provider-executed call, which the provider cannot take."),
    ("admin_only", "Only admins (`--admin`) may read this."),
    ("not_ready", "The store does not answer, or its schema is not this build's (the message says which)."),
    // Votes.
    ("not_an_approver", "The caller may see the approval but is not among its approvers."),
    ("self_approval_forbidden", "The requester may not approve their own request under its rule."),
    ("already_voted", "The caller already voted on the approval."),
    (
        "edit_needs_single_approver",
        "An edit of an approval that needs several approvers, who cannot approve different inputs.",
    ),
    ("not_the_requester", "Only the requester may withdraw an approval."),
    // Sticky decisions.
    ("invalid_decision", "The decision is malformed (scope, ttl, note or input)."),
    ("invalid_explain", "The body of `POST /api/policy/explain` is not `{tool, input, conversation}`."),
    ("unknown_tool", "The decision names a tool the server does not offer."),
    (
        "global_decision_forbidden",
        "With principals, decisions apply to a conversation or a principal, not to everyone.",
    ),
    ("too_many_decisions", "The scope holds as many live decisions as it may: revoke some first."),
    ("unknown_decision", "No such sticky decision visible to the requester."),
    // Grants.
    ("invalid_grant", "The grant is malformed (uses, within, input predicates or scope), or goes with a denial."),
    ("grant_not_allowed", "The approval needs a quorum: one person cannot grant it away."),
    ("unknown_grant", "No such grant visible to the requester."),
    // The call-gating API.
    ("unknown_call", "No such call of the caller's (another principal's call is unknown too)."),
    ("invalid_input_schema", "The `inputSchema` sent with a call is not a JSON Schema the server can check."),
    ("idempotency_key_reused", "The `idempotencyKey` already names a call of another tool or input."),
    ("call_already_started", "The call was started before (it is started, finished or interrupted): it runs once."),
    (
        "call_not_approved",
        "The call is not approved (pending, denied or expired, or denied by a rule as it starts): it may not start.",
    ),
    ("call_not_started", "The call is not started (or its lease lapsed and it is interrupted): it cannot finish."),
    ("call_already_finished", "The call's outcome was recorded before."),
    // The audit log.
    ("encoding_failed", "An audit event could not be encoded."),
    // AG-UI runs.
    ("invalid_input", "The body is not a decodable `RunAgentInput`."),
    ("unknown_role", "A message has an unknown `role`."),
    ("invalid_resume_entry", "A resume entry cannot be tied to an interrupt."),
    (
        "invalid_state",
        "AG-UI: `state` is not an object, or toolgate's key in it is malformed. Sign-in: the callback's `state` is \
         missing, unknown, expired or from another browser.",
    ),
    ("unknown_tool_call", "A tool message answers a call that is not in the messages."),
    ("invalid_tool_arguments", "A tool call's arguments are not JSON."),
    ("unsupported_content", "Content toolgate cannot pass to a model."),
    ("no_pending_interrupts", "A resume entry was sent, but no interrupt is pending."),
    ("unknown_interrupt", "A resume entry names an interrupt that is not pending."),
    ("duplicate_resume_entry", "Two resume entries answer the same interrupt."),
    ("missing_resume_entry", "Pending interrupts have no resume entry."),
    ("duplicate_pending_interrupt", "The pending interrupts list one twice, or two for one tool call."),
    ("interrupt_tool_call_not_found", "A pending interrupt names a tool call that is not in the messages."),
    ("interrupt_tool_mismatch", "A pending interrupt names another tool than the call in the messages."),
    // OpenID Connect sign-in.
    ("sign_in_refused", "The identity provider refused the sign-in."),
    ("missing_code", "The callback has no authorization code."),
    ("provider_error", "The identity provider failed (discovery or the code exchange)."),
    ("invalid_id_token", "The provider's ID token does not verify or names no principal."),
    ("session_too_large", "The session would not fit in a cookie (too many groups)."),
    ("sign_in_failed", "The sign-in could not be completed."),
];

/// What `code` means (`None` for a code not in [`CODES`]).
pub fn meaning(code: &str) -> Option<&'static str> {
    CODES.iter().find(|(known, _)| *known == code).map(|(_, meaning)| *meaning)
}

/// The extensions [`expand`] turns from lists of codes into code → meaning
/// objects, and the heading of their list in the description.
const LISTS: [(&str, &str); 2] =
    [("x-error-codes", "Error codes (`error.code`)"), ("x-run-error-codes", "`RUN_ERROR` codes (in the stream)")];

/// Expands the error codes of every response of `document` (see the module docs).
pub(crate) fn expand(document: &mut Value) {
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for item in paths.values_mut().filter_map(Value::as_object_mut) {
        for (method, operation) in item.iter_mut() {
            add_common(method, operation);
            let responses = operation.get_mut("responses").and_then(Value::as_object_mut);
            for response in responses.into_iter().flat_map(|responses| responses.values_mut()) {
                describe(response);
            }
        }
    }
}

/// Adds the codes every operation of its kind can return (module docs).
fn add_common(method: &str, operation: &mut Value) {
    if operation.get("security").is_some() {
        add_codes(operation, "401", "The request has no valid credentials.", &["unauthorized"]);
    }
    if method != "get" {
        add_codes(operation, "403", "Refused.", &["cross_origin_request"]);
    }
    if operation.pointer("/requestBody/content/application~1json").is_some() {
        add_codes(operation, "400", "Refused.", &["unreadable_body"]);
        add_codes(operation, "413", "The body is too large.", &["body_too_large"]);
        add_codes(operation, "415", "The body is not JSON.", &["unsupported_media_type"]);
    }
}

/// Adds `codes` to the `status` response (a JSON error response with
/// `description` when the operation has none for that status).
fn add_codes(operation: &mut Value, status: &str, description: &str, codes: &[&str]) {
    let Some(responses) = operation.get_mut("responses").and_then(Value::as_object_mut) else { return };
    let response = responses.entry(status).or_insert_with(|| json!({"description": description}));
    let content = response.as_object_mut().map(|response| response.entry("content").or_insert_with(|| json!({})));
    if let Some(content) = content.and_then(Value::as_object_mut) {
        content
            .entry("application/json")
            .or_insert_with(|| json!({"schema": {"$ref": "#/components/schemas/ErrorBody"}}));
    }
    let listed = response.as_object_mut().map(|response| response.entry("x-error-codes").or_insert(json!([])));
    if let Some(listed) = listed.and_then(Value::as_array_mut) {
        listed.extend(codes.iter().map(|code| json!(code)));
    }
    // In order of status.
    let mut sorted: Vec<(String, Value)> = std::mem::take(responses).into_iter().collect();
    sorted.sort_by(|(a, _), (b, _)| a.cmp(b));
    responses.extend(sorted);
}

/// Turns a response's lists of codes into objects of code and meaning, and
/// appends them to its description. A code without a meaning maps to `null`.
fn describe(response: &mut Value) {
    let Some(response) = response.as_object_mut() else { return };
    for (extension, heading) in LISTS {
        let Some(Value::Array(codes)) = response.get(extension) else { continue };
        let mut meanings = Map::new();
        for code in codes.iter().filter_map(Value::as_str) {
            meanings.insert(code.to_owned(), meaning(code).map_or(Value::Null, |meaning| json!(meaning)));
        }
        let lines: Vec<String> = meanings
            .iter()
            .map(|(code, meaning)| format!("- `{code}`: {}", meaning.as_str().unwrap_or("(undocumented)")))
            .collect();
        let description = response.get("description").and_then(Value::as_str).unwrap_or_default();
        let description = format!("{description}\n\n{heading}:\n{}", lines.join("\n"));
        response.insert("description".to_owned(), json!(description.trim_start()));
        response.insert(extension.to_owned(), Value::Object(meanings));
    }
}
