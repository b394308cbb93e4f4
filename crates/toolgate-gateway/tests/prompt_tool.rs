//! `approval_prompt`: Claude Code's permission prompt, decided by a rule, a
//! sticky decision, and a person out of band (with an edit), in the shapes
//! Claude Code reads.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Client, Setup, call, connect, text};
use toolgate::approval::lifecycle::{Decision, VoteOptions, Voter, cast};
use toolgate::ledger::SystemClock;

const RULES: &str = r#"
    [[rule]]
    name = "git-reads"
    action = "allow"
    tool = "Bash"
    input = { "/command" = { regex = "^git (status|diff|log)" } }

    [[rule]]
    name = "no-rm"
    action = "deny"
    tool = "Bash"
    reason = "never delete recursively"
    input = { "/command" = { regex = "rm\\s+-rf" } }
"#;

fn answer(result: &Value) -> Value {
    assert_ne!(result["isError"], json!(true), "{result}");
    serde_json::from_str(&text(result)).unwrap()
}

fn prompt(tool: &str, input: Value) -> Value {
    json!({"tool_name": tool, "input": input, "tool_use_id": "toolu_1"})
}

async fn setup() -> Setup {
    Setup::new(RULES, |options| {
        options.permission_prompt_tool = true;
        options.hold = Duration::from_millis(300);
    })
    .await
}

#[tokio::test]
async fn is_offered_only_when_configured() {
    let with = setup().await;
    let session = connect(&with.gateway, Client::default(), "alice").await;
    let names: Vec<String> =
        session.peer().list_all_tools().await.unwrap().into_iter().map(|tool| tool.name.to_string()).collect();
    assert!(names.contains(&"approval_prompt".to_owned()), "{names:?}");
    let without = Setup::new(RULES, |_| {}).await;
    let session = connect(&without.gateway, Client::default(), "alice").await;
    let names: Vec<String> =
        session.peer().list_all_tools().await.unwrap().into_iter().map(|tool| tool.name.to_string()).collect();
    assert!(!names.contains(&"approval_prompt".to_owned()));
}

#[tokio::test]
async fn rules_allow_and_deny_with_the_documented_shapes() {
    let setup = setup().await;
    let session = connect(&setup.gateway, Client::eliciting([]), "alice").await;
    let allowed = answer(&call(&session, "approval_prompt", prompt("Bash", json!({"command": "git status"}))).await);
    assert_eq!(allowed, json!({"behavior": "allow", "updatedInput": {"command": "git status"}}));
    let denied = answer(&call(&session, "approval_prompt", prompt("Bash", json!({"command": "rm -rf /"}))).await);
    assert_eq!(denied["behavior"], json!("deny"));
    let message = denied["message"].as_str().unwrap();
    assert!(message.starts_with("denied by policy: rule `no-rm`") && message.ends_with("never delete recursively"));
}

#[tokio::test]
async fn a_sticky_decision_allows() {
    let setup = setup().await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let identity = toolgate_gateway::Identity { principal: "alice".into(), groups: vec![] };
    let session_view = toolgate_gateway::Session { identity, client: "test-client".into() };
    setup.gateway.allow_always(&session_view, "Edit").await.unwrap();
    let input = json!({"file_path": "/tmp/a", "old_string": "a", "new_string": "b"});
    let allowed = answer(&call(&session, "approval_prompt", prompt("Edit", input.clone())).await);
    assert_eq!(allowed, json!({"behavior": "allow", "updatedInput": input}));
}

#[tokio::test]
async fn a_person_out_of_band_decides_and_an_edit_becomes_updated_input() {
    let setup = setup().await;
    let client = Client::eliciting([]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let input = json!({"command": "make deploy"});
    let pending = answer(&call(&session, "approval_prompt", prompt("Bash", input.clone())).await);
    assert_eq!(pending["behavior"], json!("deny"));
    let message = pending["message"].as_str().unwrap();
    assert!(message.contains("Approval pending") && message.contains("Asking again with the same input"), "{message}");
    assert!(client.asked().is_empty(), "the permission prompt is never asked by elicitation");
    let id = message.split("approval ").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    let edited = json!({"command": "make deploy DRY_RUN=1"});
    let voter = Voter::new(Some("alice".into()));
    let decision = Decision::Approve { edited_input: Some(edited.clone()) };
    cast(&*setup.store, &SystemClock, &id, &voter, decision, VoteOptions::default()).await.unwrap();
    let allowed = answer(&call(&session, "approval_prompt", prompt("Bash", input.clone())).await);
    assert_eq!(allowed, json!({"behavior": "allow", "updatedInput": edited}));
    // Claude Code runs the command on every `allow`: asked again, even within the retry window,
    // it is a new approval, not the same allow (attack 4 of the threat model).
    let again = answer(&call(&session, "approval_prompt", prompt("Bash", input)).await);
    assert_eq!(again["behavior"], json!("deny"), "{again}");
    let message = again["message"].as_str().unwrap();
    assert!(message.contains("Approval pending") && !message.contains(&id), "a new approval: {message}");
}

#[tokio::test]
async fn a_denial_out_of_band_answers_deny_with_its_reason() {
    let setup = setup().await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let input = json!({"url": "https://example.com"});
    let pending = answer(&call(&session, "approval_prompt", prompt("WebFetch", input.clone())).await);
    let message = pending["message"].as_str().unwrap();
    let id = message.split("approval ").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    let voter = Voter::new(Some("alice".into()));
    let decision = Decision::Deny { reason: Some("no network".into()) };
    cast(&*setup.store, &SystemClock, &id, &voter, decision, VoteOptions::default()).await.unwrap();
    let denied = answer(&call(&session, "approval_prompt", prompt("WebFetch", input)).await);
    assert_eq!(denied, json!({"behavior": "deny", "message": "denied by the user: no network"}));
}
