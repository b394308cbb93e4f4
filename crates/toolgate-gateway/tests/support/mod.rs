//! A counting upstream MCP server (in process, streamable HTTP on loopback),
//! a gateway in front of it on a memory store, and a scripted MCP client
//! connected to the gateway over an in-memory pipe.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ElicitRequestParams,
    ElicitResult, Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ClientHandler, ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, LedgerStore, MemoryStore};
use toolgate_gateway::{Gateway, GatewayHandler, GatewayOptions, Identity};
use toolgate_mcp::{McpServerConfig, McpTools};
use toolgate_policy::{Policy, PolicyHandle};

/// The upstream server: `bump` (no annotations: asks) counts its calls; `peek` (read-only) does not.
#[derive(Clone, Default)]
pub struct Counter {
    pub bumps: Arc<AtomicUsize>,
    /// Set by a `bump` labelled `grow`: the server then lists a third tool and says so.
    pub grown: Arc<std::sync::atomic::AtomicBool>,
}

impl Counter {
    pub fn count(&self) -> usize {
        self.bumps.load(Ordering::SeqCst)
    }
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(serde_json::from_value(value).unwrap())
}

impl ServerHandler for Counter {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_resources().enable_prompts().build())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Ok(serde_json::from_value(json!({"resources": [{"uri": "count://total", "name": "total"}]})).unwrap())
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        if request.uri != "count://total" {
            return Err(ErrorData::resource_not_found(format!("no {}", request.uri), None));
        }
        let text = self.count().to_string();
        let result = serde_json::from_value(json!({"contents": [{"uri": "count://total", "text": text}]})).unwrap();
        Ok(rmcp::model::ReadResourceResponse::Complete(result))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"prompts": [{"name": "summarize", "description": "Sum it up"}]})).unwrap())
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        let text = format!("Summarize as {}", request.name);
        let result = json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]});
        Ok(rmcp::model::GetPromptResponse::Complete(serde_json::from_value(result).unwrap()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let input =
            schema(json!({"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}));
        let bump = Tool::new("bump", "Counts a call", Arc::clone(&input));
        let mut peek = Tool::new("peek", "Reads the count", schema(json!({"type": "object"})));
        peek.annotations = Some(ToolAnnotations::new().read_only(true).destructive(false).open_world(false));
        let mut tools = vec![bump, peek];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(Tool::new("grow", "Adds a tool", schema(json!({"type": "object"}))));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let label = request.arguments.as_ref().and_then(|a| a.get("label")).and_then(Value::as_str).unwrap_or("");
        if label == "grow" {
            self.grown.store(true, Ordering::SeqCst);
            let _ = context.peer.notify_tool_list_changed().await;
        }
        let label = request.arguments.as_ref().and_then(|a| a.get("label")).and_then(Value::as_str).unwrap_or("");
        let text = match request.name.as_ref() {
            "bump" => format!("bumped {label} #{}", self.bumps.fetch_add(1, Ordering::SeqCst) + 1),
            _ => format!("count {}", self.count()),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serves the counter over streamable HTTP on a free loopback port; its URL.
pub async fn upstream(counter: Counter) -> String {
    let service = StreamableHttpService::new(
        move || Ok(counter.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/mcp")
}

/// A gateway over a memory store with these rules, in front of a fresh counter.
pub struct Setup {
    pub counter: Counter,
    pub store: Arc<MemoryStore>,
    pub gateway: Arc<Gateway>,
    pub mcp: Arc<McpTools>,
}

impl Setup {
    pub async fn new(rules: &str, tune: impl FnOnce(&mut GatewayOptions)) -> Self {
        let store = Arc::new(MemoryStore::default());
        let (counter, gateway, mcp) = Self::on(Arc::clone(&store) as Arc<dyn LedgerStore>, rules, tune).await;
        Self { counter, store, gateway, mcp }
    }

    /// A gateway over `store` with these rules, in front of a fresh counter.
    pub async fn on(
        store: Arc<dyn LedgerStore>,
        rules: &str,
        tune: impl FnOnce(&mut GatewayOptions),
    ) -> (Counter, Arc<Gateway>, Arc<McpTools>) {
        let counter = Counter::default();
        let url = upstream(counter.clone()).await;
        let mcp = Arc::new(McpTools::connect(vec![McpServerConfig::http("count", url).trusted(true)]).await.unwrap());
        let gateway = Self::gateway(&mcp, store, rules, tune);
        (counter, gateway, mcp)
    }

    /// Another gateway on the same store and upstream (a restarted process).
    pub fn restarted(&self, rules: &str, tune: impl FnOnce(&mut GatewayOptions)) -> Arc<Gateway> {
        Self::gateway(&self.mcp, Arc::clone(&self.store) as Arc<dyn LedgerStore>, rules, tune)
    }

    /// A gateway over `store` in front of the upstream `mcp` reaches (another replica).
    pub fn gateway(
        mcp: &Arc<McpTools>,
        store: Arc<dyn LedgerStore>,
        rules: &str,
        tune: impl FnOnce(&mut GatewayOptions),
    ) -> Arc<Gateway> {
        let policy = PolicyHandle::new(Policy::from_toml_str(rules).unwrap());
        let ledger = LedgerConfig::new(store);
        let mut options = GatewayOptions::new("alice");
        options.hold = Duration::from_millis(400);
        options.poll = Duration::from_millis(20);
        tune(&mut options);
        Gateway::new(Arc::clone(mcp), policy, ledger, options)
    }
}

/// What the scripted client answers to an elicitation.
pub type Answer = Value;

/// An MCP client that answers elicitations from a script and records them.
#[derive(Clone, Default)]
pub struct Client {
    pub elicit: bool,
    /// Speak the stateless protocol (2026-07-28) and declare URL elicitation.
    pub stateless: bool,
    pub answers: Arc<Mutex<VecDeque<Answer>>>,
    pub asked: Arc<Mutex<Vec<Value>>>,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    pub list_changes: Arc<AtomicUsize>,
    /// The `clientInfo.name` sent (`test-client` when unset).
    pub name: Option<String>,
    /// When set, each elicitation is answered only once a permit is added
    /// here (the form stays open until the test lets the person answer).
    pub release: Option<Arc<tokio::sync::Semaphore>>,
}

impl Client {
    pub fn eliciting(answers: impl IntoIterator<Item = Answer>) -> Self {
        Self { elicit: true, answers: Arc::new(Mutex::new(answers.into_iter().collect())), ..Self::default() }
    }

    pub fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap().clone()
    }

    /// Like [`Client::eliciting`], but each form stays open until [`Client::answer`] lets it be answered.
    pub fn eliciting_later(answers: impl IntoIterator<Item = Answer>) -> Self {
        Self { release: Some(Arc::new(tokio::sync::Semaphore::new(0))), ..Self::eliciting(answers) }
    }

    /// Waits until `forms` elicitations have been asked (at most ten seconds).
    pub async fn wait_asked(&self, forms: usize) {
        for _ in 0..1000 {
            if self.asked().len() >= forms {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{} forms asked, not {forms}", self.asked().len());
    }

    /// Lets the next `forms` open elicitations be answered.
    pub fn answer(&self, forms: usize) {
        self.release.as_ref().expect("a client that answers later").add_permits(forms);
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> InitializeRequestParams {
        let capabilities: ClientCapabilities = match (self.elicit, self.stateless) {
            (_, true) => serde_json::from_value(json!({"elicitation": {"url": {}}})).unwrap(),
            (true, false) => serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap(),
            (false, false) => ClientCapabilities::default(),
        };
        let name = self.name.clone().unwrap_or_else(|| "test-client".to_owned());
        let info = InitializeRequestParams::new(capabilities, Implementation::new(name, "1.0"));
        match self.stateless {
            true => info.with_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28),
            false => info,
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.lock().unwrap().push(serde_json::to_value(&request).unwrap());
        if let Some(release) = &self.release {
            release.acquire().await.unwrap().forget();
        }
        let answer = self.answers.lock().unwrap().pop_front().unwrap_or(json!({"action": "cancel"}));
        Ok(serde_json::from_value(answer).unwrap())
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changes.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }
}

/// Connects a client to the gateway as `principal` over an in-memory pipe.
pub async fn connect(gateway: &Arc<Gateway>, client: Client, principal: &str) -> RunningService<RoleClient, Client> {
    try_connect(gateway, client, principal).await.unwrap()
}

/// [`connect`], or why the client could not (a refused `initialize`).
pub async fn try_connect(
    gateway: &Arc<Gateway>,
    client: Client,
    principal: &str,
) -> Result<RunningService<RoleClient, Client>, rmcp::service::ClientInitializeError> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let handler = GatewayHandler::new(Arc::clone(gateway), Identity { principal: principal.into(), groups: vec![] });
    tokio::spawn(async move {
        if let Ok(service) = handler.serve(server_io).await {
            let _ = service.waiting().await;
        }
    });
    if client.stateless {
        let lifecycle = rmcp::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        };
        return rmcp::ClientServiceExt::serve_with_lifecycle(client, client_io, lifecycle).await;
    }
    client.serve(client_io).await
}

/// Calls a tool; its result as JSON.
pub async fn call(client: &RunningService<RoleClient, Client>, tool: &str, arguments: Value) -> Value {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(serde_json::from_value(arguments).unwrap());
    serde_json::to_value(client.peer().call_tool(params).await.unwrap()).unwrap()
}

/// The first text block of a result.
pub fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}
