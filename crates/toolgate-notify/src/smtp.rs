//! E-mail delivery over SMTP with lettre.
//!
//! Each e-mail channel gets one pooled async transport: STARTTLS (required,
//! never downgraded), implicit TLS or, for loopback servers only, plain text;
//! the configured credentials; the notifier's timeout per SMTP command. A
//! delivery sends one message to its one recipient. Outcomes: the server
//! accepted it → delivered; a 4xx reply, a connection, network, TLS or
//! timeout error → retried; a 5xx reply or a client-side problem (such as
//! STARTTLS not offered, or no usable login mechanism) → failed.

use std::time::Duration;

use lettre::transport::smtp::PoolConfig;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use crate::config::{Email, SmtpTls};
use crate::delivery::{Delivery, Outcome, error_chain};
use crate::email::{compose, render_email_content};

/// The pooled transport of one e-mail channel.
pub(crate) type Transport = AsyncSmtpTransport<Tokio1Executor>;

/// How long a pooled connection may sit idle before it is closed.
const POOL_IDLE: Duration = Duration::from_secs(60);

/// Builds the transport for `email` (spawns the pool's cleanup task, so it
/// must run inside a tokio runtime).
pub(crate) fn transport(email: &Email, timeout: Duration) -> Result<Transport, String> {
    let server = &email.server;
    let tls = match server.tls {
        SmtpTls::StartTls => Tls::Required(tls_parameters(&server.host)?),
        SmtpTls::Implicit => Tls::Wrapper(tls_parameters(&server.host)?),
        SmtpTls::None => Tls::None,
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(server.host.as_str())
        .port(server.port)
        .tls(tls)
        .timeout(Some(timeout))
        .pool_config(PoolConfig::new().max_size(4).idle_timeout(POOL_IDLE));
    if let Some((user, password)) = server.credentials() {
        builder = builder.credentials(Credentials::new(user.to_owned(), password.to_owned()));
    }
    Ok(builder.build())
}

fn tls_parameters(host: &str) -> Result<TlsParameters, String> {
    TlsParameters::new(host.to_owned()).map_err(|e| format!("TLS setup for {host} failed: {}", error_chain(&e)))
}

/// Sends one delivery to its recipient.
pub(crate) async fn send(transport: &Transport, email: &Email, delivery: &Delivery) -> Outcome {
    let Some(to) = delivery.recipient.as_deref() else {
        return Outcome::Failed { error: "an e-mail delivery needs a recipient address".into() };
    };
    let content = render_email_content(&delivery.event);
    let message = match compose(&content, email.from.clone(), to, delivery.event.kind, Some(&delivery.delivery_id)) {
        Ok(message) => message,
        Err(error) => return Outcome::Failed { error: error.to_string() },
    };
    match transport.send(message).await {
        Ok(response) => {
            let text: Vec<&str> = response.message().collect();
            Outcome::Delivered { detail: format!("SMTP {} {}", response.code(), text.join(" ")).trim_end().to_owned() }
        }
        Err(error) => classify(&error),
    }
}

fn classify(error: &lettre::transport::smtp::Error) -> Outcome {
    let text = format!("SMTP: {}", error_chain(error));
    if error.is_permanent() || error.is_client() {
        Outcome::Failed { error: text }
    } else {
        Outcome::Retry { error: text, after: None }
    }
}
