//! The workspace's crate-level architecture, enforced: data flows one way.
//!
//! Every crate of the workspace has a layer ([`LAYERS`]); a crate's normal and
//! build dependencies on other workspace crates may only point to a lower
//! layer (dev-dependencies are free: a test may drive the whole stack). A few
//! invariants are stricter than the layers: providers stand beside the engine
//! and never depend on it, and the crates that do no IO name no IO library.
//! A crate missing from [`LAYERS`] fails the test until it is placed.
//! `docs/src/architecture.md` describes the same picture.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// Each workspace crate's layer: 0 wire types, 1 the model contract, 2 the
/// engine and the providers' HTTP, 3 providers and adapters, 4 the edge, 5
/// the binary; 9 for tools that may use anything (benchmarks, the book's
/// examples, test support, examples).
const LAYERS: &[(&str, u8)] = &[
    ("toolgate-protocol", 0),
    ("toolgate-notify", 0),
    ("toolgate-model", 1),
    ("toolgate", 2),
    ("toolgate-http", 2),
    ("toolgate-openai", 3),
    ("toolgate-anthropic", 3),
    ("toolgate-local", 3),
    ("toolgate-ui", 3),
    ("toolgate-agui", 3),
    ("toolgate-store", 3),
    ("toolgate-policy", 3),
    ("toolgate-mcp", 3),
    ("toolgate-auth", 3),
    ("toolgate-server", 4),
    ("toolgate-gateway", 4),
    ("toolgate-client", 4),
    ("toolgate-cli", 5),
    ("toolgate-bench", 9),
    ("toolgate-book", 9),
    ("toolgate-testkit", 9),
    ("toolgate-example-axum-embed", 9),
];

/// Providers stand beside the engine: the workspace crates they may depend on.
const PROVIDERS: &[(&str, &[&str])] = &[
    ("toolgate-http", &["toolgate-protocol", "toolgate-model"]),
    ("toolgate-openai", &["toolgate-protocol", "toolgate-model", "toolgate-http"]),
    ("toolgate-anthropic", &["toolgate-protocol", "toolgate-model", "toolgate-http"]),
    ("toolgate-local", &["toolgate-protocol", "toolgate-model"]),
];

/// Crates that do no IO, and the libraries that would mean they do.
const NO_IO: &[&str] = &["toolgate-protocol", "toolgate-model", "toolgate-ui", "toolgate-agui"];
const IO_LIBRARIES: &[&str] = &["tokio", "reqwest", "hyper", "axum", "sqlx", "rusqlite", "lettre", "rmcp"];

/// Each workspace package's name and its normal and build dependencies (and
/// its dev-dependencies too with `dev`), by name.
fn packages_with(dev: bool) -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let mut packages = BTreeMap::new();
    for package in metadata["packages"].as_array().expect("a package list") {
        let dependencies = package["dependencies"]
            .as_array()
            .expect("a dependency list")
            .iter()
            .filter(|dependency| dev || dependency["kind"].as_str() != Some("dev"))
            .map(|dependency| dependency["name"].as_str().expect("a dependency name").to_owned())
            .collect();
        packages.insert(package["name"].as_str().expect("a package name").to_owned(), dependencies);
    }
    packages
}

/// Each workspace package's normal and build dependencies.
fn packages() -> BTreeMap<String, Vec<String>> {
    packages_with(false)
}

/// The layer of a workspace crate.
fn layer_of(name: &str) -> Option<u8> {
    LAYERS.iter().find(|(crate_name, _)| *crate_name == name).map(|(_, layer)| *layer)
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let packages = packages();
    let mut wrong = Vec::new();
    for (name, dependencies) in &packages {
        let Some(layer) = layer_of(name) else {
            wrong.push(format!("{name} has no layer in tests/layers.rs"));
            continue;
        };
        for dependency in dependencies.iter().filter(|dependency| packages.contains_key(*dependency)) {
            let below = layer_of(dependency).is_some_and(|theirs| theirs < layer || layer == 9 && theirs < 9);
            if !below {
                wrong.push(format!("{name} (layer {layer}) depends on {dependency} ({:?})", layer_of(dependency)));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn providers_stand_beside_the_engine() {
    let packages = packages();
    for (provider, allowed) in PROVIDERS {
        let dependencies = packages.get(*provider).unwrap_or_else(|| panic!("{provider} is in the workspace"));
        let own: Vec<&String> = dependencies.iter().filter(|dependency| packages.contains_key(*dependency)).collect();
        let extra: Vec<&&String> = own.iter().filter(|dependency| !allowed.contains(&dependency.as_str())).collect();
        assert!(extra.is_empty(), "{provider} may depend on {allowed:?} only, not {extra:?}");
    }
}

#[test]
fn the_crates_that_do_no_io_name_no_io_library() {
    let packages = packages();
    for name in NO_IO {
        let dependencies = packages.get(*name).unwrap_or_else(|| panic!("{name} is in the workspace"));
        let io: Vec<&String> =
            dependencies.iter().filter(|dependency| IO_LIBRARIES.contains(&dependency.as_str())).collect();
        assert!(io.is_empty(), "{name} does no IO, yet depends on {io:?}");
    }
}

/// The gateway serves agents over MCP with the auth crate's sign-in; the web
/// server is not part of it, not even in its tests.
#[test]
fn the_gateway_does_not_depend_on_the_server() {
    let packages = packages_with(true);
    let gateway = packages.get("toolgate-gateway").expect("the gateway is in the workspace");
    assert!(!gateway.iter().any(|dependency| dependency == "toolgate-server"), "{gateway:?}");
}
