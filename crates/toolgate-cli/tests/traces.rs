//! OpenTelemetry traces of `toolgate serve`, received over OTLP/HTTP by a
//! small collector in the test on a loopback port: alice asks (her request
//! carries a W3C `traceparent`), an `ask` rule routes the call to bob, bob
//! approves in the inbox, and the server continues the run. The spans, their
//! GenAI and approval attributes, the continuation's link to the trace that
//! asked, and tool inputs and outputs only with `--trace-content`.
//!
//! The exporter is configured by environment variables, so the server is a
//! child process (this file is a test binary of its own). Its batches wait
//! a minute (`OTEL_BSP_SCHEDULE_DELAY`): every span arrives because the
//! server flushes them when it shuts down.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};
use support::{Served, examples};

/// The trace id alice's client sends in `traceparent`.
const ASKING_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const RULE: &str = "[[rule]]\nname = \"bob-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\napprovers = [\"bob\"]\n\
                    reason = \"bob signs off deletions\"\n";

/// Spans received, with the service name of their resource.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/HTTP receiver on a loopback port: `POST /v1/traces` decoded and kept.
async fn collector() -> (String, Received) {
    let received = Received::default();
    let kept = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|resource| &resource.attributes)
                        .find(|attribute| attribute.key == "service.name")
                        .and_then(|attribute| json_of(attribute.value.as_ref()?))
                        .map(|name| name.as_str().unwrap_or_default().to_owned())
                        .unwrap_or_default();
                    let spans = resource.scope_spans.into_iter().flat_map(|scope| scope.spans);
                    kept.lock().unwrap().extend(spans.map(|span| (service.clone(), span)));
                }
                ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

fn json_of(value: &opentelemetry_proto::tonic::common::v1::AnyValue) -> Option<Value> {
    Some(match value.value.as_ref()? {
        any_value::Value::StringValue(text) => json!(text),
        any_value::Value::BoolValue(flag) => json!(flag),
        any_value::Value::IntValue(number) => json!(number),
        any_value::Value::DoubleValue(number) => json!(number),
        any_value::Value::ArrayValue(array) => Value::Array(array.values.iter().filter_map(json_of).collect()),
        _ => return None,
    })
}

/// A span's attributes as JSON values.
fn attributes(span: &Span) -> HashMap<String, Value> {
    span.attributes
        .iter()
        .filter_map(|attribute| Some((attribute.key.clone(), json_of(attribute.value.as_ref()?)?)))
        .collect()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|span| span.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    assert_eq!(found.len(), 1, "one `{name}` span among {names:?}");
    found[0]
}

/// What one scripted day exported, and the approval it was about.
struct Day {
    spans: Vec<Span>,
    approval: String,
}

/// Alice asks, bob approves, the server continues; then it shuts down and
/// every span it exported is returned.
async fn scripted_day(extra: &[&str]) -> Day {
    let (collector, received) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    std::fs::write(&tokens, r#"{"tok-alice": "alice", "tok-bob": "bob"}"#).unwrap();
    let config = dir.path().join("toolgate.toml");
    std::fs::write(&config, RULE).unwrap();
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let (tokens, config, data_dir) =
        (tokens.display().to_string(), config.display().to_string(), dir.path().display().to_string());
    let mut args = vec!["--model", &script, "--data-dir", &data_dir, "--tokens-file", &tokens, "--config", &config];
    args.extend_from_slice(extra);
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_SERVICE_NAME", "toolgate-test"),
        ("OTEL_BSP_SCHEDULE_DELAY", "60000"),
    ];
    let served = tokio::task::block_in_place(|| Served::start_with_env(&args, &env));
    let client = reqwest::Client::new();

    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let asked = client
        .post(served.chat_endpoint())
        .bearer_auth("tok-alice")
        .header("traceparent", format!("00-{ASKING_TRACE}-00f067aa0ba902b7-01"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 200);
    let stream = asked.text().await.unwrap();
    let approval = stream
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line.strip_prefix("data: ")?).ok())
        .find(|chunk| chunk["type"] == "tool-approval-request")
        .and_then(|chunk| chunk["approvalId"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("an approval request in {stream}"));

    let voted = client
        .post(format!("{}/api/approvals/{approval}", served.url))
        .bearer_auth("tok-bob")
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(voted.status(), 200, "{}", voted.text().await.unwrap());
    wait_for_continuation(&client, &served).await;
    tokio::task::block_in_place(|| served.stop());

    let spans: Vec<Span> = received
        .lock()
        .unwrap()
        .drain(..)
        .map(|(service, span)| {
            assert_eq!(service, "toolgate-test");
            span
        })
        .collect();
    Day { spans, approval }
}

/// Waits until alice's stored chat holds the continued run's answer.
async fn wait_for_continuation(client: &reqwest::Client, served: &Served) {
    for _ in 0..200 {
        let chat = client.get(format!("{}/api/chats/chat-1", served.url)).bearer_auth("tok-alice").send().await;
        if let Ok(chat) = chat
            && chat.text().await.unwrap_or_default().contains("Done: notes.txt is gone.")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not continue the conversation within 10 s");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_decided_out_of_band_is_one_story_in_the_traces() {
    let Day { spans, approval } = scripted_day(&[]).await;

    // Alice's request: a child of her client's trace, by route template.
    let asking = one(&spans, "POST /api/chat");
    assert_eq!(hex(&asking.trace_id), ASKING_TRACE);
    assert_eq!(hex(&asking.parent_span_id), "00f067aa0ba902b7");
    let http = attributes(asking);
    assert_eq!((&http["http.route"], &http["http.response.status_code"]), (&json!("/api/chat"), &json!(200)));
    assert_eq!(http["http.request.method"], json!("POST"));

    // Two model calls: the one that asked (in alice's trace), the continued one.
    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 2, "{:?}", spans.iter().map(|span| &span.name).collect::<Vec<_>>());
    let first = chats.iter().find(|span| hex(&span.trace_id) == ASKING_TRACE).expect("the asking model call");
    let model = attributes(first);
    assert_eq!(model["gen_ai.operation.name"], json!("chat"));
    assert_eq!(
        (&model["gen_ai.provider.name"], &model["gen_ai.request.model"]),
        (&json!("script"), &json!("scripted"))
    );
    assert_eq!((&model["gen_ai.usage.input_tokens"], &model["gen_ai.usage.output_tokens"]), (&json!(42), &json!(18)));
    assert_eq!(model["gen_ai.response.finish_reasons"], json!("tool-calls"));

    // The approval, asked in alice's trace.
    let requested = one(&spans, "approval requested");
    assert_eq!(hex(&requested.trace_id), ASKING_TRACE);
    let asked = attributes(requested);
    assert_eq!(asked["toolgate.approval.id"], json!(approval));
    assert_eq!(asked["toolgate.approval.decision"], json!("pending"));
    assert_eq!(asked["toolgate.approval.approvers"], json!(["bob"]));
    assert!(asked["toolgate.rule"].as_str().unwrap().contains("bob-deletes"), "{asked:?}");
    assert_eq!((&asked["gen_ai.tool.name"], &asked["gen_ai.tool.call.id"]), (&json!("delete_file"), &json!("call-1")));

    // Bob's decision, in the trace of his inbox request.
    let vote = one(&spans, "POST /api/approvals/{id}");
    let approved = one(&spans, "approval approved");
    assert_eq!(
        (approved.trace_id.clone(), approved.parent_span_id.clone()),
        (vote.trace_id.clone(), vote.span_id.clone())
    );
    let decided = attributes(approved);
    assert_eq!(decided["toolgate.approval.id"], json!(approval));
    assert_eq!(decided["toolgate.approval.decision"], json!("approved"));
    assert_eq!(decided["toolgate.approval.approvers"], json!(["bob"]));

    // The continuation: its own trace, linked to the span that asked.
    let continued = one(&spans, "continue_conversation");
    assert_eq!(attributes(continued)["toolgate.conversation.id"], json!("chat-1"));
    assert_ne!(hex(&continued.trace_id), ASKING_TRACE);
    let links: Vec<(String, String)> =
        continued.links.iter().map(|link| (hex(&link.trace_id), hex(&link.span_id))).collect();
    assert_eq!(links, vec![(ASKING_TRACE.to_owned(), hex(&requested.span_id))]);
    assert_eq!(attributes(continued)["toolgate.approval.id"], json!([approval]));

    // The tool ran in the continuation, without its input or output on record.
    let tool = one(&spans, "execute_tool delete_file");
    assert_eq!(tool.trace_id, continued.trace_id);
    let ran = attributes(tool);
    assert_eq!(ran["gen_ai.operation.name"], json!("execute_tool"));
    assert_eq!((&ran["gen_ai.tool.name"], &ran["gen_ai.tool.call.id"]), (&json!("delete_file"), &json!("call-1")));
    assert!(!ran.contains_key("gen_ai.tool.call.arguments") && !ran.contains_key("gen_ai.tool.call.result"), "{ran:?}");
    assert!(chats.iter().any(|span| span.trace_id == continued.trace_id), "the continued model call");
    let everything = format!("{spans:?}");
    assert!(!everything.contains("notes.txt"), "a tool input leaked into the spans: {everything}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_content_records_the_tool_input_and_output() {
    let Day { spans, .. } = scripted_day(&["--trace-content"]).await;
    let ran = attributes(one(&spans, "execute_tool delete_file"));
    let arguments: Value = serde_json::from_str(ran["gen_ai.tool.call.arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"path": "notes.txt"}));
    let result: Value = serde_json::from_str(ran["gen_ai.tool.call.result"].as_str().unwrap()).unwrap();
    assert_eq!(result, json!({"deleted": "notes.txt"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_is_an_exporter_too_and_a_server_without_its_collector_still_serves() {
    // Nothing listens there: the spans are lost, the requests are not.
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "500"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let script = format!("script:{}", examples().join("request-approval/script.json").display());
    let data_dir = dir.path().display().to_string();
    let args = ["--model", &script, "--data-dir", &data_dir];
    let served = tokio::task::block_in_place(|| Served::start_with_env(&args, &env));
    let health = reqwest::get(format!("{}/healthz", served.url)).await.unwrap();
    assert_eq!(health.status(), 200);
    tokio::task::block_in_place(|| served.stop());
}

#[test]
fn a_protocol_toolgate_does_not_export_with_is_refused_by_name() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--addr", "127.0.0.1:0", "--model", "script:/dev/null"])
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL is `http/json`") && stderr.contains("`grpc`"), "{stderr}");
}
