//! Reloading the policy file: new valid text takes effect, invalid text keeps
//! the previous policy. Waits poll against a generous deadline; nothing here
//! asserts how fast a reload is.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::tool::{GateAction, GateCall};
use toolgate_policy::{Policy, PolicyHandle, WatchError, watch_file};

const DEADLINE: Duration = Duration::from_secs(20);

fn rules(action: &str) -> String {
    format!("[[mcp]]\nname = \"x\"\n\n[[rule]]\nname = \"{action}-all\"\naction = \"{action}\"\n")
}

fn decision(handle: &PolicyHandle) -> Option<GateAction> {
    let input = json!({});
    let call = GateCall {
        tool_name: "t",
        input: &input,
        tool_call_id: "c",
        conversation_id: None,
        principal: None,
        groups: &[],
    };
    handle.current().decide(&call).map(|verdict| verdict.action)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Saves like an editor that writes a new file and renames it over the old one.
fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("toml.swp");
    fs::write(&temporary, text).unwrap();
    fs::rename(&temporary, path).unwrap();
}

#[test]
fn reloads_on_change_and_keeps_the_previous_policy_on_errors() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("toolgate.toml");
    fs::write(&path, rules("allow")).unwrap();
    let handle = PolicyHandle::new(Policy::from_toml_str(&fs::read_to_string(&path).unwrap()).unwrap());
    let watcher = watch_file(&path, handle.clone(), Policy::from_toml_str).unwrap();
    assert_eq!(watcher.path(), path);
    assert_eq!(decision(&handle), Some(GateAction::Allow));

    // Written in place.
    fs::write(&path, rules("deny")).unwrap();
    wait_until("the deny rule is loaded", || decision(&handle) == Some(GateAction::Deny));
    wait_until("the reload is counted", || watcher.status().reloads >= 1);

    // Invalid text: the deny rule stays.
    let failures = watcher.status().failures;
    replace(&path, "[[rule]]\nname = \"broken\"\naction = \"nope\"\n");
    wait_until("the invalid file is seen", || watcher.status().failures > failures);
    assert_eq!(decision(&handle), Some(GateAction::Deny), "a broken file keeps the previous policy");
    let error = watcher.status().last_error.unwrap();
    assert!(error.contains("rule `broken` (line 1): unknown action `nope`"), "{error}");

    // Replaced through a rename, as editors save.
    replace(&path, &rules("ask"));
    wait_until("the ask rule is loaded", || decision(&handle) == Some(GateAction::Ask));
    wait_until("the error is cleared", || watcher.status().last_error.is_none());

    // Deleting the file keeps the policy too.
    let failures = watcher.status().failures;
    fs::remove_file(&path).unwrap();
    wait_until("the deletion is seen", || watcher.status().failures > failures);
    assert_eq!(decision(&handle), Some(GateAction::Ask));

    // The file comes back; a file next to it is not the policy.
    let reloads = watcher.status().reloads;
    fs::write(directory.path().join("other.toml"), rules("deny")).unwrap();
    fs::write(&path, rules("allow")).unwrap();
    wait_until("the file is back", || decision(&handle) == Some(GateAction::Allow));
    assert!(watcher.status().reloads > reloads);
    drop(watcher);
}

#[test]
fn a_path_without_a_file_name_is_refused() {
    let error = watch_file("/", PolicyHandle::default(), Policy::from_toml_str).unwrap_err();
    assert!(matches!(error, WatchError::NoFileName(_)), "{error}");
    let missing = tempfile::tempdir().unwrap().path().join("gone/toolgate.toml");
    let error = watch_file(missing, PolicyHandle::default(), Policy::from_toml_str).unwrap_err();
    assert!(matches!(error, WatchError::Notify { .. }), "{error}");
}
