//! Shows what tool choice `auto` does with each prompt given on the command line, with the demo tools
//! (`get_weather`, `delete_file`, `transfer_money`, `ask_user`): the call it makes, or the start of its text.
//! Useful to tune `TOOLGATE_LOCAL_AUTO_CALL_THRESHOLD` for a model; `RUST_LOG=toolgate_local=debug` prints
//! each request's call score.
//!
//! `cargo run --release -p toolgate-local --example auto_choice -- "Delete old.log" "Hello!"`
//! (`TOOLGATE_MODEL=PATH` for another GGUF file than the pulled default model).

use toolgate::protocol::{ModelContent, ModelRequest};
use toolgate::{LanguageModel, ModelMessage, ToolChoice};
use toolgate_local::{LocalModel, pull};

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let path = std::env::var_os("TOOLGATE_MODEL").map(Into::into).unwrap_or_else(pull::default_model_path);
    let model = LocalModel::load(&path).unwrap_or_else(|error| panic!("{error}; {}", pull::missing_model_help()));
    let tools = toolgate::demo::toolkit().specs();
    for prompt in std::env::args().skip(1) {
        let request = ModelRequest {
            prompt: vec![ModelMessage::user(prompt.as_str())].into(),
            tools: tools.clone(),
            tool_choice: ToolChoice::Auto,
            max_output_tokens: Some(48),
            ..ModelRequest::default()
        };
        let answer = match model.generate(request).await {
            Ok(response) => response
                .content
                .iter()
                .map(|content| match content {
                    ModelContent::ToolCall(call) => format!("call {} {}", call.tool_name, call.input),
                    ModelContent::Text { text } => format!("text {:?}", text.chars().take(60).collect::<String>()),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join(" + "),
            Err(error) => format!("error: {error}"),
        };
        println!("{prompt:?} -> {answer}");
    }
}
