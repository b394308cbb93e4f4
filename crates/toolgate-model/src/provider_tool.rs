//! A tool the model provider hosts and runs (e.g. OpenAI's `openai.mcp`).

use serde_json::Value;

/// A provider-hosted tool as a provider crate describes it: the name the
/// model calls it by, the provider's tool id, and its arguments. The engine
/// turns it into a tool for a toolkit (`toolgate::Tool::from`); toolgate never
/// runs it, and the approvals it asks for come from the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderTool {
    name: String,
    id: String,
    args: Value,
}

impl ProviderTool {
    /// A provider tool called `name`, of the provider's kind `id`, with `args`.
    pub fn new(name: impl Into<String>, id: impl Into<String>, args: Value) -> Self {
        Self { name: name.into(), id: id.into(), args }
    }

    /// The name the model calls it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The provider's tool id (e.g. `openai.mcp`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its arguments, as the provider reads them.
    pub fn args(&self) -> &Value {
        &self.args
    }

    /// The name, id and arguments.
    pub fn into_parts(self) -> (String, String, Value) {
        (self.name, self.id, self.args)
    }
}
