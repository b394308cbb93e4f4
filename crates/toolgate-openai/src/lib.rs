//! OpenAI model providers for toolgate.
//!
//! - [`OpenAiChatModel`]: Chat Completions, for OpenAI and for any
//!   OpenAI-compatible server (llama.cpp, Ollama, vLLM) via
//!   [`OpenAiConfig::compatible`]. Approvals are toolgate's.
//! - [`OpenAiResponsesModel`]: the Responses API, including hosted MCP tools
//!   whose approvals OpenAI asks for (`mcp_approval_request`), mapped to
//!   provider-executed tool calls and `tool-approval-request`s.
//!
//! Both use [`toolgate_http`]: retries before the first byte, typed errors,
//! SSE decoding. Wire types live in `chat::wire` and `responses::wire`.

pub mod chat;
mod config;
pub mod convert;
pub mod responses;

pub use chat::OpenAiChatModel;
pub use config::{DEFAULT_BASE_URL, IdGenerator, OpenAiConfig};
pub use responses::{McpServer, OpenAiResponsesModel};
pub use toolgate_http::{HttpOptions, RetryPolicy};
