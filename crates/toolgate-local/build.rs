//! Tells the tests whether the local model is there: sets `cfg(toolgate_local_model)`
//! when the GGUF the real-model tests load exists, so without it they are listed
//! as ignored, with the reason, instead of passing silently.
//!
//! The lookup is the one `pull::default_model_path` makes (kept in step by the
//! `the_build_script_looks_where_the_crate_looks` test): `TOOLGATE_LOCAL_MODEL`,
//! else `$XDG_CACHE_HOME/toolgate/models/<file>`, else `~/.cache/...`.
//!
//! Cargo must run this script again once the model is pulled, and only then.
//! Watching the missing file would do neither: a `rerun-if-changed` path that
//! does not exist reruns the script on every build (recompiling this crate and
//! the crates using it), and once there, a file moved in with an old
//! modification time (a rename, `cp -p`, a restored cache) counts as unchanged.
//! So while the default model is missing, the nearest directory on its way that
//! exists is watched (`models/`, else `toolgate/`, else the cache directory;
//! cargo takes the newest modification under it), and the directory gets a new
//! one when the file is moved in. A cache directory that does not exist yet is
//! watched as well: every build reruns the script until it is created.

use std::path::PathBuf;

const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from)
}

/// The model the tests load, and the path whose change means it may have appeared or gone.
fn model_and_watched_path() -> (PathBuf, PathBuf) {
    if let Some(path) = env("TOOLGATE_LOCAL_MODEL") {
        // A path given on purpose: watched as is (its directory may be anything, a workspace too).
        return (path.clone(), path);
    }
    let cache =
        env("XDG_CACHE_HOME").unwrap_or_else(|| env("HOME").unwrap_or_else(|| PathBuf::from(".")).join(".cache"));
    let toolgate = cache.join("toolgate");
    let models = toolgate.join("models");
    let path = models.join(DEFAULT_MODEL_FILE);
    let watched = [path.as_path(), &models, &toolgate].into_iter().find(|candidate| candidate.exists());
    let watched = watched.unwrap_or(&cache).to_path_buf();
    (path, watched)
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(toolgate_local_model)");
    for name in ["TOOLGATE_LOCAL_MODEL", "XDG_CACHE_HOME", "HOME"] {
        println!("cargo::rerun-if-env-changed={name}");
    }
    let (path, watched) = model_and_watched_path();
    println!("cargo::rerun-if-changed={}", watched.display());
    println!("cargo::rustc-env=TOOLGATE_LOCAL_MODEL_AT_BUILD={}", path.display());
    if path.is_file() {
        println!("cargo::rustc-cfg=toolgate_local_model");
    }
}
