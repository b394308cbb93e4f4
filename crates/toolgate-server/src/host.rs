//! Only the expected `Host`: the guard against DNS rebinding, and the
//! headers that keep the server's pages out of other sites' frames.
//!
//! A web page whose DNS name the attacker points at 127.0.0.1 is same-origin
//! with a server on loopback: it could read every conversation and approve
//! any call. Its requests carry the attacker's name in `Host`, so the server
//! answers only the names it serves ([`HostGuard`]):
//! - loopback names and addresses (`localhost`, `127.0.0.0/8`, `[::1]`), with
//!   no port or the server's own port;
//! - the address it is bound to, on its port (a specific address, not `0.0.0.0`);
//! - the host of `--public-url` (with its port, when it names one) and every
//!   `--allowed-host NAME` (`NAME` or `NAME:PORT`; a bare name on any port).
//!
//! Any other `Host`, or none, gets 421 `host_not_allowed` with a JSON error
//! that names the `Host` and the flag that would serve it. Every response
//! also carries `X-Frame-Options: DENY` and, unless the handler set its own
//! policy, `Content-Security-Policy: frame-ancestors 'none'`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{CONTENT_SECURITY_POLICY, HOST, X_FRAME_OPTIONS};
use axum::http::uri::Authority;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The names a server answers (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGuard {
    /// The address the server is bound to (its port is the server's port).
    bound: SocketAddr,
    /// Configured names, lowercase, each with the port it must carry (`None`: any).
    names: Vec<(String, Option<u16>)>,
}

impl HostGuard {
    /// A guard for a server bound to `bound` that also answers `allowed`
    /// (`--allowed-host` values and the `--public-url`'s host: `NAME` or `NAME:PORT`).
    pub fn new(bound: SocketAddr, allowed: &[String]) -> Result<Self, String> {
        let mut names = Vec::with_capacity(allowed.len());
        for name in allowed {
            let authority: Authority =
                name.parse().map_err(|error| format!("`{name}` is not a host name (NAME or NAME:PORT): {error}"))?;
            if authority.as_str().contains('@') || authority.host().is_empty() {
                return Err(format!("`{name}` is not a host name (NAME or NAME:PORT)"));
            }
            names.push((authority.host().to_ascii_lowercase(), authority.port_u16()));
        }
        Ok(Self { bound, names })
    }

    /// The names served, as the start-up log lists them.
    pub fn describe(&self) -> String {
        let port = self.bound.port();
        let mut served = vec![format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}")];
        if !self.bound.ip().is_unspecified() && !self.bound.ip().is_loopback() {
            served.push(self.bound.to_string());
        }
        served.extend(self.names.iter().map(|(name, port)| match port {
            Some(port) => format!("{name}:{port}"),
            None => name.clone(),
        }));
        served.join(", ")
    }

    /// Whether a request naming `host` (its `Host` header) is for this server.
    pub fn allows(&self, host: &str) -> bool {
        let Ok(authority) = host.parse::<Authority>() else { return false };
        if authority.as_str().contains('@') {
            return false;
        }
        let name = authority.host().to_ascii_lowercase();
        let port = authority.port_u16();
        let own_port = port.is_none_or(|port| port == self.bound.port());
        let address = name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok();
        let loopback = name == "localhost" || address.is_some_and(|ip| ip.to_canonical().is_loopback());
        if loopback && own_port {
            return true;
        }
        if address == Some(self.bound.ip()) && !self.bound.ip().is_unspecified() && own_port {
            return true;
        }
        self.names
            .iter()
            .any(|(allowed, allowed_port)| *allowed == name && allowed_port.is_none_or(|p| Some(p) == port))
    }
}

/// The middleware: refuses requests for other names, and keeps responses out of frames.
pub async fn guard(State(guard): State<Arc<HostGuard>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(HOST).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let host = host.or_else(|| request.uri().authority().map(|authority| authority.to_string()));
    let mut response = match host.as_deref() {
        Some(host) if guard.allows(host) => next.run(request).await,
        host => refusal(host).into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(CONTENT_SECURITY_POLICY) {
        headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static("frame-ancestors 'none'"));
    }
    response
}

/// 421 `host_not_allowed`, naming the `Host` and the flag that would serve it.
fn refusal(host: Option<&str>) -> ApiError {
    let message = match host {
        Some(host) => {
            let shown: String = host.chars().take(256).collect();
            format!(
                "this server does not answer for Host `{shown}`: if that is its name, start it with \
                 `--allowed-host {shown}` (or `--public-url` naming it); it answers loopback names and \
                 the names it was given, against DNS rebinding"
            )
        }
        None => "the request names no Host: this server answers only requests for its own names".to_owned(),
    };
    ApiError::new(StatusCode::MISDIRECTED_REQUEST, "host_not_allowed", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(bound: &str, allowed: &[&str]) -> HostGuard {
        let allowed: Vec<String> = allowed.iter().map(|name| (*name).to_owned()).collect();
        HostGuard::new(bound.parse().unwrap(), &allowed).unwrap()
    }

    #[test]
    fn loopback_names_on_the_port_and_configured_names_are_served() {
        let local = guard("127.0.0.1:3913", &["toolgate.example.com", "approvals.example:8443"]);
        for host in ["localhost", "localhost:3913", "127.0.0.1:3913", "127.8.0.1", "[::1]:3913", "LOCALHOST:3913"] {
            assert!(local.allows(host), "{host}");
        }
        for host in ["toolgate.example.com", "toolgate.example.com:443", "approvals.example:8443"] {
            assert!(local.allows(host), "{host}");
        }
        for host in [
            "rebind.attacker.example:3913",
            "localhost:3914",
            "approvals.example:3913",
            "approvals.example",
            "127.0.0.1:1@evil.example",
            "",
            "toolgate.example.com.attacker.example",
        ] {
            assert!(!local.allows(host), "{host}");
        }
    }

    #[test]
    fn the_bound_address_is_served_unless_unspecified() {
        assert!(guard("10.1.2.3:3913", &[]).allows("10.1.2.3:3913"));
        assert!(!guard("10.1.2.3:3913", &[]).allows("10.1.2.4:3913"));
        assert!(!guard("0.0.0.0:3913", &[]).allows("0.0.0.0:3913"));
        assert!(guard("0.0.0.0:3913", &["10.1.2.3"]).allows("10.1.2.3:3913"));
    }

    #[test]
    fn bad_names_are_refused_at_start() {
        assert!(HostGuard::new("127.0.0.1:1".parse().unwrap(), &["user@host".to_owned()]).is_err());
        assert!(HostGuard::new("127.0.0.1:1".parse().unwrap(), &["a b".to_owned()]).is_err());
    }
}
