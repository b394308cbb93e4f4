//! A checked set of tools, looked up by name.

use std::collections::HashMap;
use std::sync::Arc;

use toolgate_protocol::ToolSpec;

use super::{Execution, Tool};

/// A tool set that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolkitError {
    /// Two tools share a name.
    #[error("two tools are named `{name}`")]
    DuplicateTool {
        /// The name.
        name: String,
    },
    /// A tool has an empty name.
    #[error("a tool has an empty name")]
    EmptyName,
    /// A tool has no handler and is not declared client-executed or provider-executed.
    #[error("tool `{name}` has no handler; give it one or declare it client_executed()")]
    MissingHandler {
        /// The tool's name.
        name: String,
    },
    /// A dynamic tool's JSON Schema does not compile.
    #[error("tool `{name}` has an invalid input schema: {detail}")]
    InvalidSchema {
        /// The tool's name.
        name: String,
        /// What the schema compiler said.
        detail: String,
    },
}

/// The tools of a call, checked at build time. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Toolkit {
    tools: Arc<[Tool]>,
    by_name: Arc<HashMap<String, usize>>,
}

impl Toolkit {
    /// Checks and collects tools: names must be unique and non-empty, schemas
    /// must compile, and every tool must have a runner.
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Result<Self, ToolkitError> {
        let tools: Vec<Tool> = tools.into_iter().collect();
        let mut by_name = HashMap::with_capacity(tools.len());
        for (index, tool) in tools.iter().enumerate() {
            if tool.def.name.is_empty() {
                return Err(ToolkitError::EmptyName);
            }
            if let Err(detail) = &tool.def.validator {
                return Err(ToolkitError::InvalidSchema { name: tool.def.name.clone(), detail: detail.clone() });
            }
            if matches!(tool.def.execution, Execution::Unset) {
                return Err(ToolkitError::MissingHandler { name: tool.def.name.clone() });
            }
            if by_name.insert(tool.def.name.clone(), index).is_some() {
                return Err(ToolkitError::DuplicateTool { name: tool.def.name.clone() });
            }
        }
        Ok(Self { tools: tools.into(), by_name: Arc::new(by_name) })
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// All tools, in the order given.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tool names, in the order given.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|tool| tool.def.name.clone()).collect()
    }

    /// How the model sees these tools.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(Tool::spec).collect()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}
