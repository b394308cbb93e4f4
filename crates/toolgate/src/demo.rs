//! The built-in `demo` toolkit used by the CLI, the server and the examples.
//! Its outputs are exact and stable; nothing it does touches the machine.
//!
//! | tool | approval | output |
//! |---|---|---|
//! | `get_weather {city}` | never | `{"city", "temperatureC": 21, "condition": "sunny"}` |
//! | `delete_file {path}` | always; denied outside the working directory | `{"deleted": path}` |
//! | `transfer_money {amount, to}` | when `amount > 1000` | `{"transferred": amount, "to": to}` |
//! | `ask_user {question}` | client-executed | (the client answers) |
//!
//! The schemas say what an input is, and are enforced: a transfer has a
//! positive amount and a recipient that is not empty; a deletion names a
//! relative path without `..` (anything else is denied by the policy, so no
//! person is asked, and an edit to such a path is refused).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Number, Value, json};

use crate::{Tool, ToolError, Toolkit, Verdict};

/// Input of `get_weather`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WeatherInput {
    /// The city.
    pub city: String,
}

/// Input of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteFileInput {
    /// The file to delete.
    pub path: String,
}

/// Input of `transfer_money`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TransferInput {
    /// How much to send, more than zero; kept as written so outputs echo it exactly.
    #[schemars(with = "f64", extend("exclusiveMinimum" = 0))]
    pub amount: Number,
    /// Who receives it (not empty).
    #[schemars(length(min = 1))]
    pub to: String,
}

/// Input of `ask_user`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskUserInput {
    /// The question for the person.
    pub question: String,
}

/// Transfers above this amount need approval.
pub const TRANSFER_APPROVAL_THRESHOLD: f64 = 1000.0;

/// The demo tools.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::function::<WeatherInput>("get_weather").description("Get the current weather for a city.").handler(
            |input: WeatherInput, _| async move {
                Ok::<_, ToolError>(json!({"city": input.city, "temperatureC": 21, "condition": "sunny"}))
            },
        ),
        Tool::function::<DeleteFileInput>("delete_file")
            .description("Delete a file in the working directory. Always asks a person first.")
            .policy(|input: &DeleteFileInput, _| {
                if outside_working_directory(&input.path) {
                    let reason =
                        format!("delete_file only deletes files inside the working directory; `{}` is not", input.path);
                    Verdict::deny(reason)
                } else {
                    Verdict::ask()
                }
            })
            .handler(|input: DeleteFileInput, _| async move { Ok::<_, ToolError>(json!({"deleted": input.path})) }),
        Tool::function::<TransferInput>("transfer_money")
            .description("Transfer money to someone. Amounts over 1000 need a person's approval.")
            .approval_when(|input: &TransferInput, _| {
                input.amount.as_f64().is_none_or(|amount| amount > TRANSFER_APPROVAL_THRESHOLD)
            })
            .handler(|input: TransferInput, _| async move {
                Ok::<_, ToolError>(json!({"transferred": Value::Number(input.amount), "to": input.to}))
            }),
        Tool::function::<AskUserInput>("ask_user").description("Ask the person a question.").client_executed(),
    ]
}

/// True for paths that leave the working directory: absolute, or with a `..` component.
pub fn outside_working_directory(path: &str) -> bool {
    let path = std::path::Path::new(path);
    path.has_root()
        || path
            .components()
            .any(|component| matches!(component, std::path::Component::ParentDir | std::path::Component::Prefix(_)))
}

/// The demo toolkit.
pub fn toolkit() -> Toolkit {
    Toolkit::new(tools()).expect("the demo tools have unique names and handlers")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApprovalContext, GateAction};

    fn tool(name: &str) -> Tool {
        toolkit().get(name).cloned().expect("a demo tool")
    }

    #[test]
    fn a_transfer_is_a_positive_amount_to_someone() {
        let transfer = tool("transfer_money");
        assert!(transfer.validate_input(&json!({"amount": 50, "to": "Bob"})).is_ok());
        assert!(transfer.validate_input(&json!({"amount": 0.01, "to": "Bob"})).is_ok());
        for bad in [
            json!({"amount": -1_000_000, "to": "Eve"}),
            json!({"amount": 0, "to": "Eve"}),
            json!({"amount": 50, "to": ""}),
            json!({"amount": "50", "to": "Bob"}),
        ] {
            assert!(transfer.validate_input(&bad).is_err(), "{bad} must be refused");
        }
        let schema = transfer.input_schema();
        assert_eq!(schema["properties"]["amount"]["exclusiveMinimum"], json!(0));
        assert_eq!(schema["properties"]["to"]["minLength"], json!(1));
    }

    #[tokio::test]
    async fn deletions_outside_the_working_directory_are_denied_without_asking() {
        let delete = tool("delete_file");
        let decide = |path: &str| {
            let delete = delete.clone();
            let input = json!({ "path": path });
            async move { delete.decide(&input, ApprovalContext::new("c", Vec::new())).await }
        };
        assert_eq!(decide("notes.txt").await, Verdict::ask());
        assert_eq!(decide("logs/old.log").await, Verdict::ask());
        for path in ["/etc/passwd", "../secrets", "logs/../../x"] {
            let verdict = decide(path).await;
            assert_eq!(verdict.action, GateAction::Deny, "{path}");
            assert!(verdict.reason.is_some_and(|reason| reason.contains(path)), "{path}");
        }
    }
}
