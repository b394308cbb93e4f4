//! Helpers for provider tests (feature `test-util`): fixture files, SSE
//! framing, and a server whose stream breaks off mid-way.
//!
//! Each provider crate keeps its own fixtures in `tests/fixtures` (written for
//! this project in the providers' documented wire formats; see the README
//! there). Nothing is read from outside the crate.

use std::net::SocketAddr;
use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A crate's fixture folder, `<manifest_dir>/tests/fixtures`; pass the calling
/// crate's `env!("CARGO_MANIFEST_DIR")`. Panics with a clear message when missing.
pub fn fixtures_dir(manifest_dir: &str) -> PathBuf {
    let dir = PathBuf::from(manifest_dir).join("tests").join("fixtures");
    assert!(
        dir.is_dir(),
        "the test fixtures are missing: expected the folder {} (each provider crate keeps its fixtures in tests/fixtures)",
        dir.display()
    );
    dir
}

/// The text of one file of a crate's `tests/fixtures`. Panics with a clear
/// message when it is missing or unreadable.
pub fn read_fixture(manifest_dir: &str, name: &str) -> String {
    let path = fixtures_dir(manifest_dir).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!("cannot read the fixture {} (in the crate's tests/fixtures): {error}", path.display())
    })
}

/// Frames each non-empty line of a `*.chunks.txt` fixture as `data: <line>\n\n`,
/// then `data: [DONE]\n\n` when `done` is set (Chat Completions).
pub fn sse_from_chunks(chunks: &str, done: bool) -> String {
    let mut body = String::new();
    for line in chunks.lines().filter(|line| !line.trim().is_empty()) {
        body.push_str("data: ");
        body.push_str(line);
        body.push_str("\n\n");
    }
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

/// Serves one HTTP response on a loopback port: status 200, `text/event-stream`,
/// chunked, with `prefix` as its only chunk, then drops the connection without
/// ending the body, as a connection cut mid-stream looks. Returns the base URL.
pub async fn serve_cut_stream(prefix: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let address: SocketAddr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let mut request = Vec::new();
        let mut buffer = [0u8; 8192];
        // Read the request head and body (Content-Length) before answering.
        loop {
            let Ok(read) = socket.read(&mut buffer).await else { return };
            if read == 0 {
                return;
            }
            request.extend_from_slice(&buffer[..read]);
            if let Some(head_end) = find(&request, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    break;
                }
            }
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{:x}\r\n{prefix}\r\n", prefix.len());
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(chunk.as_bytes()).await;
        let _ = socket.flush().await;
        // Dropping the socket here ends the connection without the final chunk.
    });
    format!("http://{address}")
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}
