//! The built-in `demo` toolkit used by the CLI, the server and the examples.
//! Its outputs are exact and stable; nothing it does touches the machine.
//!
//! | tool | approval | output |
//! |---|---|---|
//! | `get_weather {city}` | never | `{"city", "temperatureC": 21, "condition": "sunny"}` |
//! | `delete_file {path}` | always | `{"deleted": path}` |
//! | `transfer_money {amount, to}` | when `amount > 1000` | `{"transferred": amount, "to": to}` |
//! | `ask_user {question}` | client-executed | (the client answers) |

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Number, Value, json};

use crate::{Tool, ToolError, Toolkit};

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
    /// How much to send; kept as written so outputs echo it exactly.
    #[schemars(with = "f64")]
    pub amount: Number,
    /// Who receives it.
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
            .description("Delete a file. Always asks a person first.")
            .needs_approval(true)
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

/// The demo toolkit.
pub fn toolkit() -> Toolkit {
    Toolkit::new(tools()).expect("the demo tools have unique names and handlers")
}
