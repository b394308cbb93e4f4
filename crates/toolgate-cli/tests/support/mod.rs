//! Running the `toolgate` binary from tests: one-shot commands and a `serve` on a free port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The repository's `examples/` folder.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Runs `toolgate ARGS` without the environment's secret and store.
pub fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .env_remove("TOOLGATE_APPROVAL_SECRET")
        .env_remove("TOOLGATE_STORE")
        .output()
        .unwrap()
}

/// A `toolgate serve` child on a free loopback port; killed on drop.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Served {
    /// Starts `toolgate serve --addr 127.0.0.1:0 ARGS` and waits until it logs its address.
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .env("TOOLGATE_LOG", "info")
            .env_remove("TOOLGATE_STORE")
            .env_remove("TOOLGATE_APPROVAL_SECRET")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines.next().expect("the server logs its address").unwrap();
            if let Some(at) = line.find("serving on http://") {
                let rest = &line[at + "serving on ".len()..];
                let end = rest.find(|c: char| c.is_whitespace() || c == '\u{1b}').unwrap_or(rest.len());
                break rest[..end].to_owned();
            }
        };
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, url }
    }

    /// The chat endpoint.
    pub fn chat_endpoint(&self) -> String {
        format!("{}/api/chat", self.url)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
