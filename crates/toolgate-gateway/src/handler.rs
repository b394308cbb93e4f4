//! The gateway as an MCP server ([`GatewayHandler`], rmcp's `ServerHandler`):
//! tools of the upstream servers under their toolgate names, every call
//! through the gate (the crate's `call` module), `approval_prompt` when configured
//! ([`crate::prompt_tool`]), resources and prompts of the upstream servers
//! passed through unchanged, and `notifications/tools/list_changed` when
//! the upstream tools change.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use toolgate::ledger::{NameError, check_client_name};

use crate::gateway::{Gateway, Identity, Session};
use crate::hold::Request;
use crate::{call, prompt_tool};

/// The client name approvals are filed under when the client sends none.
const UNNAMED_CLIENT: &str = "unnamed-client";

/// One client connection to the gateway.
#[derive(Clone)]
pub struct GatewayHandler {
    gateway: Arc<Gateway>,
    /// The identity of every call on this connection (stdio), unless a
    /// request carries its own (HTTP with a principal source).
    identity: Identity,
}

impl std::fmt::Debug for GatewayHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayHandler").field("identity", &self.identity).finish_non_exhaustive()
    }
}

impl GatewayHandler {
    /// A connection whose calls come from `identity` unless a request says otherwise.
    pub fn new(gateway: Arc<Gateway>, identity: Identity) -> Self {
        Self { gateway, identity }
    }

    /// The session of one request: its identity (the HTTP request's verified
    /// principal, else the connection's) and the client's name, which must be
    /// a valid name ([`check_client_name`]): approvals are filed under it.
    fn session(&self, context: &RequestContext<RoleServer>) -> Result<Session, McpError> {
        let from_request = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Identity>())
            .cloned();
        let client = self
            .gateway
            .options()
            .client_name
            .clone()
            .or_else(|| context.client_info().map(|info| info.name))
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| UNNAMED_CLIENT.to_owned());
        check_client_name(&client).map_err(refused_name)?;
        Ok(Session { identity: from_request.unwrap_or_else(|| self.identity.clone()), client })
    }

    /// Sends `notifications/tools/list_changed` to this client whenever the upstream tools change.
    fn follow_tool_changes(&self, peer: rmcp::Peer<RoleServer>) {
        let mut versions = self.gateway.mcp().subscribe();
        tokio::spawn(async move {
            while versions.changed().await.is_ok() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }
}

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_prompts()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("toolgate-gateway", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools of other MCP servers behind toolgate: risky calls wait for a person's approval. A result that says the approval is pending has not run: call the same tool again with the same arguments later to get its outcome.",
            )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if self.gateway.options().client_name.is_none() && !request.client_info.name.is_empty() {
            check_client_name(&request.client_info.name).map_err(refused_name)?;
        }
        context.peer.set_peer_info(request.clone());
        self.follow_tool_changes(context.peer.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools: Vec<rmcp::model::Tool> =
            self.gateway.mcp().relayed_tools().into_iter().map(|relayed| relayed.listed).collect();
        if self.gateway.options().permission_prompt_tool {
            tools.push(prompt_tool::definition());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let session = self.session(&context)?;
        let (form, url) = elicitation(&context);
        let held = Request {
            peer: &context.peer,
            progress: context.meta.get_progress_token(),
            cancel: &context.ct,
            form,
            url,
            answered: request.input_responses.is_some(),
        };
        let arguments = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        let options = self.gateway.options();
        if options.permission_prompt_tool && name == prompt_tool::NAME {
            return Ok(prompt_tool::call(&self.gateway, &session, &held, &arguments).await.into());
        }
        let Some(tool) = self.gateway.tool(name) else {
            return Err(McpError::invalid_params(format!("unknown tool `{name}`"), None));
        };
        Ok(call::call(&self.gateway, &session, &held, &tool, Value::Object(arguments)).await)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut all = Vec::new();
        for peer in self.upstream(|caps| caps.resources.is_some()) {
            all.extend(peer.list_all_resources().await.map_err(upstream_error)?);
        }
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut all = Vec::new();
        for peer in self.upstream(|caps| caps.resources.is_some()) {
            all.extend(peer.list_all_resource_templates().await.map_err(upstream_error)?);
        }
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let mut last = McpError::resource_not_found(format!("no upstream server has `{}`", request.uri), None);
        for peer in self.upstream(|caps| caps.resources.is_some()) {
            match peer.read_resource(request.clone()).await {
                Ok(result) => return Ok(ReadResourceResponse::Complete(result)),
                Err(error) => last = upstream_error(error),
            }
        }
        Err(last)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut all = Vec::new();
        for peer in self.upstream(|caps| caps.prompts.is_some()) {
            all.extend(peer.list_all_prompts().await.map_err(upstream_error)?);
        }
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        for peer in self.upstream(|caps| caps.prompts.is_some()) {
            let listed = peer.list_all_prompts().await.map_err(upstream_error)?;
            if listed.iter().any(|prompt| prompt.name == request.name) {
                return peer.get_prompt(request).await.map(GetPromptResponse::Complete).map_err(upstream_error);
            }
        }
        Err(McpError::invalid_params(format!("no upstream server has the prompt `{}`", request.name), None))
    }
}

impl GatewayHandler {
    /// The connected upstream servers whose capabilities pass `offers`, in config order.
    fn upstream(
        &self,
        offers: impl Fn(&rmcp::model::ServerCapabilities) -> bool,
    ) -> Vec<rmcp::Peer<rmcp::service::RoleClient>> {
        let mcp = self.gateway.mcp();
        mcp.server_names()
            .iter()
            .filter_map(|name| mcp.peer(name).ok())
            .filter(|peer| peer.peer_info().is_some_and(|info| offers(&info.capabilities)))
            .collect()
    }
}

/// How the client of this request may be asked: by a form now (it declared
/// form elicitation, and its protocol lets a server send requests), and by
/// an `input_required` URL elicitation (the stateless 2026-07-28 protocol,
/// URL elicitation declared).
fn elicitation(context: &RequestContext<RoleServer>) -> (bool, bool) {
    let stateless = context.protocol_version().is_some_and(|version| !version.has_initialize());
    let Some(declared) = context.client_capabilities().and_then(|capabilities| capabilities.elicitation) else {
        return (false, false);
    };
    // A capability that names no mode means form (the first elicitation spec).
    let form = declared.form.is_some() || declared.url.is_none();
    (form && !stateless, stateless && declared.url.is_some())
}

/// A client name that cannot be filed under, as the client's error.
fn refused_name(error: NameError) -> McpError {
    McpError::invalid_params(format!("the client's name is refused: {error}"), None)
}

/// An upstream failure as the client's error (the upstream's own JSON-RPC error when it sent one).
fn upstream_error(error: rmcp::ServiceError) -> McpError {
    match error {
        rmcp::ServiceError::McpError(error) => error,
        other => McpError::internal_error(format!("upstream MCP server: {other}"), None),
    }
}
