//! Tells the tests whether the local model is there: sets `cfg(toolgate_local_model)`
//! when the GGUF the real-model tests load exists, so without it they are listed
//! as ignored, with the reason, instead of passing silently.
//!
//! The lookup is the one `pull::default_model_path` makes (kept in step by the
//! `the_build_script_looks_where_the_crate_looks` test): `TOOLGATE_LOCAL_MODEL`,
//! else `$XDG_CACHE_HOME/toolgate/models/<file>`, else `~/.cache/...`.

use std::path::PathBuf;

const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from)
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(toolgate_local_model)");
    for name in ["TOOLGATE_LOCAL_MODEL", "XDG_CACHE_HOME", "HOME"] {
        println!("cargo::rerun-if-env-changed={name}");
    }
    let path = env("TOOLGATE_LOCAL_MODEL").unwrap_or_else(|| {
        let cache =
            env("XDG_CACHE_HOME").unwrap_or_else(|| env("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache"));
        cache.join("toolgate").join("models").join(DEFAULT_MODEL_FILE)
    });
    // A path that does not exist makes cargo run this script again on every build,
    // so a model pulled later is found; one that exists reruns it when it changes.
    println!("cargo::rerun-if-changed={}", path.display());
    println!("cargo::rustc-env=TOOLGATE_LOCAL_MODEL_AT_BUILD={}", path.display());
    if path.is_file() {
        println!("cargo::rustc-cfg=toolgate_local_model");
    }
}
