//! An axum app with toolgate mounted in it: `GET /hello` is the app's own,
//! `POST /api/chat`, `POST /ag-ui` and the approval page at `/` are toolgate's.
//!
//! `cargo run -p toolgate-example-axum-embed`, then open http://127.0.0.1:3001
//! and ask to delete a file, or `curl http://127.0.0.1:3001/hello`.
//! `ADDR` changes the address; `TOOLGATE_APPROVAL_SECRET` sets the signing
//! secret (else one is generated and kept in the temporary directory).

use std::net::SocketAddr;

use toolgate_example_axum_embed::{app, shared_scripted_model, toolgate_state};
use toolgate_server::ApprovalSecret;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::var("ADDR").as_deref().unwrap_or("127.0.0.1:3001").parse()?;
    let secret = ApprovalSecret::resolve(None, &std::env::temp_dir().join("toolgate-axum-embed"))?;
    let state = toolgate_state(addr, shared_scripted_model(), secret)?;
    let router = app(state);

    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // The peer's address tells toolgate whether a principal header may be believed.
    axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(toolgate_server::shutdown_signal())
        .await?;
    Ok(())
}
