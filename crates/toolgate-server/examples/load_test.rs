//! Load test of the approval round trip over loopback: for each conversation,
//! turn 1 (the model asks to delete a file, the server answers with a signed
//! approval request) and the approved continuation (the tool runs, the model
//! answers). Reports requests/s and p50/p99 latency, and checks that every
//! approved call ran exactly once and no request failed.
//!
//! `cargo run --release -p toolgate-server --example load_test -- [CONVERSATIONS] [CONCURRENCY] [STORE]`
//!
//! STORE is a `--store` value (`none`, the default; `memory`; `sqlite` for a
//! fresh file in a temporary directory; `postgres://…`): with a store every
//! approval goes through the ledger and the conversation is kept server-side.
//! `TOOLGATE_STORE_SYNC=full` opens it as `toolgate serve --store-sync full` does.
//!
//! Traces are exported as `toolgate serve` exports them when an `OTEL_*`
//! variable is set (`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`, with
//! `toolgate-bench`'s `otlp_sink` there), and `TOOLGATE_BENCH_SCRAPE=1` reads
//! `GET /metrics` every second as a Prometheus would (`scripts/bench-traces.sh`).
//!
//! Bounded: a fixed number of conversations, only 127.0.0.1, and a timeout on
//! every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::model::{ModelError, ModelStream};
use toolgate::protocol::{
    FinishReason, ModelContent, ModelMessage, ModelRequest, ModelResponse, ModelStreamPart, ModelToolCall, Usage,
    UserContent, UserPart,
};
use toolgate::{LanguageModel, Tool, ToolError, Toolkit};
use toolgate_server::{AppState, ApprovalSecret, ServerConfig, serve_listener};

/// The allocator the `toolgate` binary ships with, so the server measured here is the one people run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Asks to delete the file the user names; once a tool result is in the prompt, says it is done.
struct EchoModel;

impl EchoModel {
    fn answer(request: &ModelRequest) -> ModelResponse {
        let asked = request.prompt.iter().any(|m| matches!(m, ModelMessage::Assistant(_)));
        let content = if asked {
            vec![ModelContent::Text { text: "Done.".into() }]
        } else {
            let path = request
                .prompt
                .iter()
                .rev()
                .find_map(|message| match message {
                    ModelMessage::User(user) => match &user.content {
                        UserContent::Text(text) => Some(text.clone()),
                        UserContent::Parts(parts) => parts.iter().find_map(|part| match part {
                            UserPart::Text(text) => Some(text.text.clone()),
                            _ => None,
                        }),
                    },
                    _ => None,
                })
                .unwrap_or_default();
            vec![ModelContent::ToolCall(ModelToolCall {
                tool_call_id: "call-1".into(),
                tool_name: "delete_file".into(),
                input: json!({ "path": path }).to_string(),
                provider_executed: None,
                provider_metadata: None,
            })]
        };
        let finish_reason = if asked { FinishReason::Stop } else { FinishReason::ToolCalls };
        ModelResponse { content, finish_reason, usage: Usage::default(), provider_metadata: None }
    }
}

impl LanguageModel for EchoModel {
    fn provider(&self) -> &str {
        "load-test"
    }

    fn model_id(&self) -> &str {
        "echo"
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(Self::answer(&request))
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let response = Self::answer(&request);
        let mut parts = Vec::new();
        for content in response.content {
            match content {
                ModelContent::Text { text } => {
                    parts.push(ModelStreamPart::TextStart { id: "t".into() });
                    parts.push(ModelStreamPart::TextDelta { id: "t".into(), delta: text });
                    parts.push(ModelStreamPart::TextEnd { id: "t".into() });
                }
                ModelContent::ToolCall(call) => parts.push(ModelStreamPart::ToolCall(call)),
                ModelContent::Reasoning { .. }
                | ModelContent::ToolApprovalRequest { .. }
                | ModelContent::ToolResult(_) => {}
            }
        }
        parts.push(ModelStreamPart::Finish {
            finish_reason: response.finish_reason,
            usage: Usage::default(),
            provider_metadata: None,
        });
        Ok(Box::pin(futures::stream::iter(parts.into_iter().map(Ok))))
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct DeleteFile {
    path: String,
}

fn sse_chunks(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Reads `url` every second, as a Prometheus scraper would, until the process ends.
async fn scrape(url: String) {
    let client = reqwest::Client::new();
    loop {
        match client.get(&url).send().await {
            Ok(response) if response.status().is_success() => {
                let _ = response.text().await;
            }
            Ok(response) => eprintln!("GET /metrics: HTTP {}", response.status()),
            Err(error) => eprintln!("GET /metrics: {error}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let conversations: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let concurrency: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(32);
    let store_text = args.next().unwrap_or_else(|| "none".into());

    let executions: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let counter = Arc::clone(&executions);
    let tool = Tool::function::<DeleteFile>("delete_file").needs_approval(true).handler(move |input: DeleteFile, _| {
        *counter.lock().unwrap().entry(input.path.clone()).or_default() += 1;
        async move { Ok::<_, ToolError>(json!({ "deleted": input.path })) }
    });
    let dir = std::env::temp_dir().join(format!("toolgate-load-{}", std::process::id()));
    let secret = ApprovalSecret::resolve(Some("load-test-secret"), &dir)?;
    let mut config = ServerConfig::new("127.0.0.1:0".parse()?, Toolkit::new([tool])?, secret);
    let spec = toolgate_store::StoreSpec::parse(&store_text, &dir)?;
    let sync = toolgate_store::StoreSync::parse(&std::env::var("TOOLGATE_STORE_SYNC").unwrap_or("normal".into()))?;
    config.ledger = toolgate_store::open_store_synced(&spec, sync).await?.map(toolgate::ledger::LedgerConfig::new);
    let telemetry = toolgate_server::telemetry::Telemetry::from_env()?;
    if let Some(telemetry) = &telemetry {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        tracing_subscriber::registry().with(telemetry.layer(false)).init();
    }
    let state = AppState::new(config, Arc::new(EchoModel))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let url = format!("http://{addr}/api/chat");
    tokio::spawn(serve_listener(listener, state, std::future::pending()));
    if std::env::var("TOOLGATE_BENCH_SCRAPE").as_deref() == Ok("1") {
        tokio::spawn(scrape(format!("http://{addr}/metrics")));
    }

    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let post = |body: Value| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let started = Instant::now();
            let response = client.post(&url).json(&body).send().await.map_err(|e| e.to_string())?;
            let status = response.status();
            let text = response.text().await.map_err(|e| e.to_string())?;
            if !status.is_success() {
                return Err(format!("HTTP {status}: {text}"));
            }
            Ok::<_, String>((started.elapsed(), sse_chunks(&text)))
        }
    };

    // Chat ids unique to this run: a store may already hold earlier runs' conversations.
    let run = uuid::Uuid::now_v7().simple().to_string();
    let run = run.as_str();
    let started = Instant::now();
    let results: Vec<Result<[Duration; 2], String>> = futures::stream::iter(0..conversations)
        .map(|n| async move {
            let path = format!("file-{n}.txt");
            let user = json!({"id": "u", "role": "user", "parts": [{"type": "text", "text": path}]});
            let chat_id = format!("chat-{run}-{n}");
            let (first, chunks) = post(json!({"id": chat_id, "messages": [user]})).await?;
            let message_id = chunks.first().and_then(|c| c["messageId"].as_str()).unwrap_or("a").to_owned();
            let approval_id = chunks
                .iter()
                .find(|c| c["type"] == "tool-approval-request")
                .and_then(|c| c["approvalId"].as_str())
                .ok_or("no approval request")?
                .to_owned();
            let assistant = json!({"id": message_id, "role": "assistant", "parts": [{"type": "step-start"},
                    {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
                     "input": {"path": path}, "approval": {"id": approval_id, "approved": true}}]});
            let (second, chunks) = post(json!({"id": chat_id, "messages": [user, assistant]})).await?;
            let ran = chunks.iter().any(|c| c["type"] == "tool-output-available" && c["output"]["deleted"] == path);
            if !ran {
                return Err(format!("conversation {n}: no tool output"));
            }
            Ok([first, second])
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let elapsed = started.elapsed();
    // The spans still in the batch, sent after the measured interval.
    if let Some(telemetry) = telemetry {
        tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    }

    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let mut latencies: Vec<Duration> = results.iter().filter_map(|r| r.as_ref().ok()).flatten().copied().collect();
    latencies.sort();
    let executions = executions.lock().unwrap();
    let duplicated = executions.values().filter(|&&count| count != 1).count();
    let requests = latencies.len();
    println!("store: {spec}, conversations: {conversations}, concurrency: {concurrency}, requests: {requests}");
    println!(
        "elapsed: {:.2} s, throughput: {:.0} requests/s",
        elapsed.as_secs_f64(),
        requests as f64 / elapsed.as_secs_f64()
    );
    if !latencies.is_empty() {
        println!(
            "latency p50: {:.2} ms, p99: {:.2} ms, max: {:.2} ms",
            percentile(&latencies, 0.50).as_secs_f64() * 1e3,
            percentile(&latencies, 0.99).as_secs_f64() * 1e3,
            latencies[latencies.len() - 1].as_secs_f64() * 1e3
        );
    }
    println!("errors: {}, tools run: {}, run more or less than once: {duplicated}", errors.len(), executions.len());
    if let Some(error) = errors.first() {
        println!("first error: {error}");
    }
    std::fs::remove_dir_all(&dir).ok();
    if errors.is_empty() && duplicated == 0 && executions.len() == conversations {
        Ok(())
    } else {
        Err("the load test found errors or duplicated executions".into())
    }
}
