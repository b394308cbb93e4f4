//! `toolgate` without `--model`: the default local model, or a message that says how to get it.

#![cfg(feature = "local")]

use std::path::Path;
use std::process::Command;

fn toolgate(args: &[&str], cache: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("TOOLGATE_APPROVAL_SECRET")
        .output()
        .unwrap()
}

#[test]
fn a_missing_default_model_says_how_to_get_it() {
    let cache = std::env::temp_dir().join(format!("toolgate-cli-empty-cache-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    let messages = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/request-approval/messages.json");
    for args in [&["run", "--messages", messages][..], &["serve", "--addr", "127.0.0.1:0"][..]] {
        let output = toolgate(args, &cache);
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("toolgate model pull"), "{args:?}: {stderr}");
        assert!(stderr.contains(&cache.join("toolgate/models").display().to_string()), "{stderr}");
    }
    let output = toolgate(&["model", "path"], &cache);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        cache.join("toolgate/models/SmolLM2-135M-Instruct.Q4_1.gguf").display().to_string()
    );
    std::fs::remove_dir_all(&cache).unwrap();
}
