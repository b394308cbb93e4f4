//! The API reference: `GET /openapi.json` is valid OpenAPI 3.1 (checked
//! against the official schema, vendored in `fixtures/`), documents every
//! route of the router and nothing else, lists each error response's codes
//! with their meanings, and describes what the server really answers (live
//! responses are checked against their documented schemas); `GET /api-docs`
//! serves Swagger UI from the binary under a strict Content-Security-Policy.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate_server::route_table;

const OPENAPI_31_SCHEMA: &str = include_str!("fixtures/openapi-3.1-schema.json");

/// The document a running server serves.
async fn document(server: &Server) -> Value {
    let reply = get(server, "/openapi.json").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    reply.json()
}

/// Every string a `$ref` holds, anywhere in `value`.
fn refs(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            if let Some(Value::String(reference)) = object.get("$ref") {
                found.push(reference.clone());
            }
            object.values().for_each(|value| refs(value, found));
        }
        Value::Array(items) => items.iter().for_each(|value| refs(value, found)),
        _ => {}
    }
}

/// Every operation of the document: (method, path, operation).
fn operations(document: &Value) -> Vec<(String, String, Value)> {
    let paths = document["paths"].as_object().expect("paths");
    let mut found = Vec::new();
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            found.push((method.clone(), path.clone(), operation.clone()));
        }
    }
    found
}

#[tokio::test]
async fn the_document_is_valid_openapi_3_1() {
    let server = start(None).await;
    let document = document(&server).await;
    assert_eq!(document["openapi"], "3.1.0");
    let schema: Value = serde_json::from_str(OPENAPI_31_SCHEMA).unwrap();
    assert_eq!(schema["$id"], "https://spec.openapis.org/oas/3.1/schema/2022-10-07");
    let validator = jsonschema::draft202012::new(&schema).expect("the official schema compiles");
    let errors: Vec<String> =
        validator.iter_errors(&document).map(|error| format!("{} at {}", error, error.instance_path())).collect();
    assert!(errors.is_empty(), "not valid OpenAPI 3.1:\n{}", errors.join("\n"));
    // The check has teeth: a document without `info`, or with an operation without responses, is not valid.
    let mut broken = document.clone();
    broken.as_object_mut().unwrap().remove("info");
    assert!(!validator.is_valid(&broken));
    let mut broken = document.clone();
    broken["paths"]["/api/chat"]["post"]["responses"] = json!("none");
    assert!(!validator.is_valid(&broken));

    // Operation ids are unique.
    let mut ids: Vec<String> = operations(&document)
        .iter()
        .map(|(method, path, operation)| {
            operation["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path}: no operationId")).to_owned()
        })
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "operation ids are unique: {ids:?}");

    // Every reference resolves inside the document.
    let mut found = Vec::new();
    refs(&document, &mut found);
    assert!(!found.is_empty());
    for reference in found {
        let pointer = reference.strip_prefix('#').unwrap_or_else(|| panic!("an outside reference: {reference}"));
        assert!(document.pointer(pointer).is_some(), "`{reference}` resolves to nothing");
    }
}

#[tokio::test]
async fn every_route_of_the_router_is_documented_and_nothing_else() {
    let server = start(None).await;
    let document = document(&server).await;
    let routes: Vec<(String, String)> =
        route_table().into_iter().map(|(method, path)| (method.as_str().to_lowercase(), path.to_owned())).collect();
    for expected in [("post", "/api/chat"), ("post", "/ag-ui"), ("get", "/openapi.json"), ("get", "/api-docs")] {
        assert!(routes.contains(&(expected.0.to_owned(), expected.1.to_owned())), "{expected:?} is a route");
    }
    let mut missing = Vec::new();
    for (method, path) in &routes {
        let operation = &document["paths"][path][method];
        if !operation.is_object() {
            missing.push(format!("{} {path}", method.to_uppercase()));
            continue;
        }
        assert!(operation["responses"].as_object().is_some_and(|r| !r.is_empty()), "{method} {path}: no responses");
        assert!(operation["tags"].as_array().is_some_and(|t| !t.is_empty()), "{method} {path}: no tag");
        let summary = operation["summary"].as_str().unwrap_or_else(|| panic!("{method} {path}: no summary"));
        assert!(!summary.contains('\n'), "{method} {path}: the summary is one line: {summary}");
    }
    assert!(missing.is_empty(), "routes without an operation in /openapi.json: {missing:#?}");
    let stale: Vec<String> = operations(&document)
        .into_iter()
        .filter(|(method, path, _)| !routes.contains(&(method.clone(), path.clone())))
        .map(|(method, path, _)| format!("{} {path}", method.to_uppercase()))
        .collect();
    assert!(stale.is_empty(), "operations of no route: {stale:#?}");
}

#[tokio::test]
async fn every_error_response_lists_its_codes_with_their_meanings() {
    let server = start(None).await;
    let document = document(&server).await;
    let mut codes = std::collections::BTreeSet::new();
    for (method, path, operation) in operations(&document) {
        for (status, response) in operation["responses"].as_object().unwrap() {
            let json_error = response["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .is_some_and(|schema| schema.ends_with("/ErrorBody"));
            if !json_error {
                continue;
            }
            assert!(status.starts_with('4') || status.starts_with('5'), "{method} {path} {status}");
            let listed = response["x-error-codes"].as_object();
            let listed = listed.unwrap_or_else(|| panic!("{method} {path} {status}: no x-error-codes"));
            assert!(!listed.is_empty(), "{method} {path} {status}: no codes");
            let description = response["description"].as_str().unwrap();
            for (code, meaning) in listed {
                let meaning = meaning.as_str().unwrap_or_else(|| panic!("{method} {path}: `{code}` has no meaning"));
                assert!(!meaning.is_empty());
                assert!(description.contains(&format!("`{code}`: {meaning}")), "{method} {path} {status}: {code}");
                codes.insert(code.clone());
            }
        }
    }
    for code in ["history_mismatch", "approval_already_decided", "not_an_approver", "unknown_approval", "unauthorized"]
    {
        assert!(codes.contains(code), "`{code}` is documented");
    }
    // The 4xx of JSON bodies and credentials are listed wherever they apply.
    let chat = &document["paths"]["/api/chat"]["post"]["responses"];
    for (status, code) in [
        ("400", "unreadable_body"),
        ("401", "unauthorized"),
        ("413", "body_too_large"),
        ("415", "unsupported_media_type"),
        ("403", "cross_origin_request"),
    ] {
        assert!(chat[status]["x-error-codes"][code].is_string(), "POST /api/chat {status} lists {code}");
    }
    let run_errors = &document["paths"]["/ag-ui"]["post"]["responses"]["200"]["x-run-error-codes"];
    assert!(run_errors["history_mismatch"].is_string(), "{run_errors}");
    assert!(run_errors.as_object().unwrap().values().all(Value::is_string), "{run_errors}");
}

#[tokio::test]
async fn the_api_reference_page_serves_swagger_ui_from_the_binary_under_a_strict_policy() {
    let server = start(None).await;
    let page = get(&server, "/api-docs").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    let policy = page.header("content-security-policy").expect("a content security policy");
    assert!(policy.contains("default-src 'none'") && policy.contains("script-src 'self'"), "{policy}");
    assert!(!policy.contains("unsafe-"), "nothing inline, no eval: {policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert!(!page.body.contains("<script>") && !page.body.contains("https://"), "no inline or outside scripts");
    for (path, content_type, holds) in [
        ("/api-docs/swagger-ui-bundle.js", "text/javascript; charset=utf-8", "SwaggerUIBundle"),
        ("/api-docs/swagger-ui.css", "text/css; charset=utf-8", ".swagger-ui"),
        ("/api-docs/api-docs.js", "text/javascript; charset=utf-8", "openapi.json"),
    ] {
        let relative = path.trim_start_matches('/');
        assert!(page.body.contains(&format!("\"{relative}\"")), "the page loads {relative}");
        let asset = get(&server, path).await;
        assert_eq!(asset.status, 200, "{path}");
        assert_eq!(asset.header("content-type"), Some(content_type), "{path}");
        assert!(asset.body.contains(holds), "{path}");
    }
}

/// The schema an operation documents for a response, as a validator over the whole document.
fn documented(document: &Value, method: &str, path: &str, status: u16, content_type: &str) -> jsonschema::Validator {
    let pointer = format!(
        "/paths/{}/{method}/responses/{status}/content/{}/schema",
        path.replace('~', "~0").replace('/', "~1"),
        content_type.replace('/', "~1")
    );
    let schema = document.pointer(&pointer).unwrap_or_else(|| panic!("no schema at {pointer}")).clone();
    let root = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "allOf": [schema],
        "components": document["components"]});
    jsonschema::options().should_validate_formats(true).build(&root).expect("the schema compiles")
}

/// Checks a live reply against what its operation documents.
fn check(document: &Value, method: &str, path: &str, reply: &Reply) {
    let content_type = reply.header("content-type").unwrap_or_default().to_owned();
    let validator = documented(document, method, path, reply.status, &content_type);
    let bodies: Vec<Value> = if content_type == "application/x-ndjson" {
        reply.body.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    } else {
        vec![reply.json()]
    };
    assert!(!bodies.is_empty(), "{method} {path}: an empty reply");
    for body in bodies {
        let errors: Vec<String> = validator.iter_errors(&body).map(|error| error.to_string()).collect();
        assert!(errors.is_empty(), "{method} {path} {}: {errors:#?}\n{body:#}", reply.status);
    }
}

#[tokio::test]
async fn what_the_server_answers_matches_the_documented_schemas() {
    let server = start_configured(default_script(), |config| {
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    })
    .await;
    let document = document(&server).await;
    let json = [("content-type", "application/json")];
    let call = |method: &'static str, path: String, body: Value| {
        let server = &server;
        async move { send(server, method, &path, &json, body.to_string().as_bytes()).await }
    };
    let ask = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let asked = call("POST", "/api/chat".into(), ask).await;
    let request = asked.chunks().into_iter().find(|c| c["type"] == "tool-approval-request").expect("an approval");
    let id = request["approvalId"].as_str().unwrap().to_owned();

    let me = get(&server, "/api/me").await;
    check(&document, "get", "/api/me", &me);
    let validator = documented(&document, "get", "/api/me", 200, "application/json");
    assert!(!validator.is_valid(&json!({"principal": null, "groups": [], "signIn": "maybe"})), "the check has teeth");
    check(&document, "get", "/api/approvals", &get(&server, "/api/approvals").await);
    check(&document, "get", "/api/approvals/{id}", &get(&server, &format!("/api/approvals/{id}")).await);
    check(&document, "get", "/api/chats/{id}", &get(&server, "/api/chats/chat-1").await);
    check(&document, "get", "/api/audit", &get(&server, "/api/audit").await);
    let decision = json!({"action": "allow", "tool": "delete_file", "scope": "conversation",
        "conversationId": "chat-1", "ttl": "1h", "note": "fine"});
    let added = call("POST", "/api/decisions".into(), decision).await;
    assert_eq!(added.status, 201, "{}", added.body);
    check(&document, "post", "/api/decisions", &added);
    check(&document, "get", "/api/decisions", &get(&server, "/api/decisions?conversation=chat-1").await);
    let voted = call("POST", format!("/api/approvals/{id}"), json!({"decision": "deny", "reason": "no"})).await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    check(&document, "post", "/api/approvals/{id}", &voted);

    // Errors, as documented, with a code the response lists.
    for (method, path, route, body) in [
        ("post", "/api/approvals/nope", "/api/approvals/{id}", json!({"decision": "approve"})),
        ("post", "/api/decisions", "/api/decisions", json!({"action": "allow", "tool": "nope", "scope": "global"})),
        ("post", "/api/chat", "/api/chat", json!({"id": "ag-ui:x", "messages": []})),
        ("get", "/api/chats/nope", "/api/chats/{id}", Value::Null),
        ("get", "/api/audit?bad=1", "/api/audit", Value::Null),
    ] {
        let reply = call(if method == "get" { "GET" } else { "POST" }, path.into(), body).await;
        check(&document, method, route, &reply);
        let code = reply.json()["error"]["code"].as_str().unwrap().to_owned();
        let listed = &document["paths"][route][method]["responses"][reply.status.to_string()]["x-error-codes"];
        assert!(listed[&code].is_string(), "{method} {path}: `{code}` ({}) is listed: {listed}", reply.status);
    }
}

#[tokio::test]
async fn the_call_gating_api_answers_as_documented() {
    let server = start_configured(default_script(), |config| {
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
        config.policy = toolgate_policy::PolicyHandle::new(
            toolgate_policy::Policy::from_toml_str(
                "[[rule]]\nname = \"reads\"\naction = \"allow\"\ntool = \"read_file\"\n\n\
                 [[rule]]\nname = \"drops\"\naction = \"deny\"\ntool = \"drop\"\nreason = \"never\"\n",
            )
            .unwrap(),
        );
    })
    .await;
    let document = document(&server).await;
    let json = [("content-type", "application/json")];
    let call = |method: &'static str, path: String, body: Value| {
        let server = &server;
        async move { send(server, method, &path, &json, body.to_string().as_bytes()).await }
    };
    let allowed = call("POST", "/api/calls".into(), json!({"tool": "read_file", "input": {"path": "a"}})).await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    check(&document, "post", "/api/calls", &allowed);
    let denied = call("POST", "/api/calls".into(), json!({"tool": "drop", "input": {}})).await;
    check(&document, "post", "/api/calls", &denied);
    let pending = call("POST", "/api/calls".into(), json!({"tool": "mail", "input": {}, "description": "sends"})).await;
    assert_eq!(pending.status, 202, "{}", pending.body);
    check(&document, "post", "/api/calls", &pending);
    let validator = documented(&document, "post", "/api/calls", 202, "application/json");
    assert!(!validator.is_valid(&json!({"callId": "x", "decision": "allow"})), "the check has teeth");
    let id = allowed.json()["callId"].as_str().unwrap().to_owned();
    check(&document, "get", "/api/calls/{id}", &get(&server, &format!("/api/calls/{id}")).await);
    let started = call("POST", format!("/api/calls/{id}/start"), json!({"lease": "5m"})).await;
    assert_eq!(started.status, 200, "{}", started.body);
    check(&document, "post", "/api/calls/{id}/start", &started);
    let finished = call("POST", format!("/api/calls/{id}/finish"), json!({"output": {"ok": true}})).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    check(&document, "post", "/api/calls/{id}/finish", &finished);
    check(&document, "get", "/api/calls/{id}", &get(&server, &format!("/api/calls/{id}")).await);
    for (method, path, route, body) in [
        ("post", "/api/calls/nope/start".to_owned(), "/api/calls/{id}/start", json!({})),
        ("post", format!("/api/calls/{id}/start"), "/api/calls/{id}/start", json!({})),
        ("post", format!("/api/calls/{id}/start"), "/api/calls/{id}/start", json!({"lease": "2d"})),
        ("post", format!("/api/calls/{id}/finish"), "/api/calls/{id}/finish", json!({"output": 1})),
        ("post", "/api/calls".to_owned(), "/api/calls", json!({"tool": "", "input": {}})),
        ("get", format!("/api/calls/{id}?wait=2m"), "/api/calls/{id}", Value::Null),
    ] {
        let reply = call(if method == "get" { "GET" } else { "POST" }, path.clone(), body).await;
        check(&document, method, route, &reply);
        let code =
            reply.json()["error"]["code"].as_str().unwrap_or_else(|| panic!("{path}: {}", reply.body)).to_owned();
        let listed = &document["paths"][route][method]["responses"][reply.status.to_string()]["x-error-codes"];
        assert!(listed[&code].is_string(), "{method} {path}: `{code}` ({}) is listed: {listed}", reply.status);
    }
}
