//! Tool names as the model sees them: `<server>__<tool>`.
//!
//! Providers accept tool names of `[A-Za-z0-9_-]` and at most 64 characters,
//! while MCP servers may name tools anything. A name is built so:
//!
//! 1. every character of the MCP tool name outside `[A-Za-z0-9_-]` becomes
//!    `_` (`files.read/v2` → `files_read_v2`);
//! 2. it is prefixed with the server name and `__` (`fs__files_read_v2`);
//! 3. when that is longer than [`MAX_TOOL_NAME_LEN`] (64), it keeps its first
//!    55 characters followed by `_` and 8 hex digits of a hash (FNV-1a) of
//!    the full MCP tool name, so long names that share a beginning stay
//!    distinct and the same MCP name always gets the same model name;
//! 4. a name already taken (by an earlier tool of the same listing or of a
//!    server configured earlier) gets `_2`, `_3`, … (shortening the name
//!    before the suffix to stay within 64).
//!
//! Server names are at most 32 characters (see
//! [`MAX_SERVER_NAME_LEN`](crate::config::MAX_SERVER_NAME_LEN)), so the
//! server prefix always survives in full.

use std::collections::HashSet;

/// The longest tool name providers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// The separator between the server and the tool name.
pub const SEPARATOR: &str = "__";

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// The model-facing name of `tool` on `server`, before uniqueness (steps 1 to 3 of the module docs).
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("{server}{SEPARATOR}{}", sanitize(tool));
    if full.len() <= MAX_TOOL_NAME_LEN {
        return full;
    }
    let hash = format!("_{:08x}", fnv1a(tool.as_bytes()));
    // `full` is ASCII, so byte indices are character indices.
    format!("{}{hash}", &full[..MAX_TOOL_NAME_LEN - hash.len()])
}

/// The name of `tool` on `server`, unique among `taken`, which it joins (all steps of the module docs).
pub fn unique_tool_name(server: &str, tool: &str, taken: &mut HashSet<String>) -> String {
    let base = tool_name(server, tool);
    let mut candidate = base.clone();
    let mut n = 2u32;
    while taken.contains(&candidate) {
        let suffix = format!("_{n}");
        let keep = base.len().min(MAX_TOOL_NAME_LEN - suffix.len());
        candidate = format!("{}{suffix}", &base[..keep]);
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// 32-bit FNV-1a: small, stable across releases and platforms.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, &byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_sanitized() {
        assert_eq!(tool_name("fs", "read_text_file"), "fs__read_text_file");
        assert_eq!(tool_name("fs", "files.read/v2 ü"), "fs__files_read_v2__");
        assert_eq!(tool_name("e", "get-sum"), "e__get-sum");
    }

    #[test]
    fn long_names_are_capped_with_a_stable_hash() {
        let long_a = format!("{}a", "x".repeat(80));
        let long_b = format!("{}b", "x".repeat(80));
        let a = tool_name("server", &long_a);
        let b = tool_name("server", &long_b);
        assert_eq!(a.len(), MAX_TOOL_NAME_LEN);
        assert_eq!(b.len(), MAX_TOOL_NAME_LEN);
        assert_ne!(a, b);
        assert!(a.starts_with("server__xxx"));
        assert_eq!(a, tool_name("server", &long_a), "stable");
        let exactly = "y".repeat(MAX_TOOL_NAME_LEN - "s__".len());
        assert_eq!(tool_name("s", &exactly), format!("s__{exactly}"), "64 characters are kept as is");
    }

    #[test]
    fn collisions_get_numbered_suffixes_within_the_cap() {
        let mut taken = HashSet::new();
        assert_eq!(unique_tool_name("s", "a.b", &mut taken), "s__a_b");
        assert_eq!(unique_tool_name("s", "a/b", &mut taken), "s__a_b_2");
        assert_eq!(unique_tool_name("s", "a b", &mut taken), "s__a_b_3");
        let long = "z".repeat(61);
        let first = unique_tool_name("s", &long, &mut taken);
        assert_eq!(first.len(), 64);
        let second = unique_tool_name("s", &long, &mut taken);
        assert_eq!(second.len(), 64);
        assert!(second.ends_with("_2"));
        assert_ne!(first, second);
    }
}
