//! One MCP server as a config file describes it: a `[[mcp]]` table.
//!
//! ```toml
//! [[mcp]]
//! name = "fs"                       # tool names become `fs__<tool>`
//! command = "npx"                   # a stdio server: a command, its args and env
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
//! env = { LOG_LEVEL = "warn" }
//! trusted = true                    # believe readOnlyHint (see the crate docs)
//! timeout = "30s"                   # per call (default 60s)
//! startup_timeout = "20s"           # connect + list tools (default 30s)
//!
//! [[mcp]]
//! name = "search"
//! url = "https://mcp.example.com/mcp"   # a streamable HTTP server
//! headers = { Authorization = "Bearer …" }
//! ```
//!
//! The table is deserialized on its own ([`McpServerConfig`]); whoever owns
//! the whole file (the CLI, with its `[[rule]]` sections) collects the tables
//! and calls [`McpServerConfig::validate`] (which
//! [`McpTools::connect`](crate::McpTools::connect) also does).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The per-call timeout when the config names none.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The connect-and-list timeout when the config names none.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest server name: it prefixes every tool name, and providers cap
/// tool names at 64 characters (see [`crate::naming`]).
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// Header names the streamable HTTP transport sets itself.
const RESERVED_HEADERS: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// One MCP server: how to reach it and how far to believe it. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's name, the prefix of its tools' names (`<name>__<tool>`).
    /// Letters, digits, `_` and `-`, at most 32 characters, no `__`.
    pub name: String,
    /// The program of a stdio server (exactly one of `command` and `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The stdio server's arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables added to the stdio server's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable HTTP server (exactly one of `command` and `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request to a streamable HTTP server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Whether the server's tool annotations are believed enough to skip
    /// approval for read-only tools (default `false`; see the crate docs).
    #[serde(default)]
    pub trusted: bool,
    /// How long one tool call may take, as a humantime string (`"30s"`, `"2m"`); default 60s.
    #[serde(default, with = "duration_text", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// How long connecting and listing the tools may take; default 30s.
    #[serde(default, with = "duration_text", skip_serializing_if = "Option::is_none")]
    pub startup_timeout: Option<Duration>,
    /// Offer only these of the server's tools (their MCP names); `None`: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// How a server is reached, from a validated config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// A child process speaking MCP on stdin/stdout.
    Stdio,
    /// A streamable HTTP endpoint.
    Http,
}

/// A server config that cannot be used. Every variant names the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The name is empty, too long, has characters outside `[A-Za-z0-9_-]` or contains `__`.
    #[error("MCP server name `{name}` is invalid: {reason}")]
    InvalidName {
        /// The name as configured.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Neither `command` nor `url` is set.
    #[error("MCP server `{server}` needs either `command` (stdio) or `url` (streamable HTTP)")]
    MissingTransport {
        /// The server.
        server: String,
    },
    /// Both `command` and `url` are set.
    #[error("MCP server `{server}` sets both `command` and `url`; choose one")]
    ConflictingTransports {
        /// The server.
        server: String,
    },
    /// A field that belongs to the other transport (`args`/`env` with `url`, `headers` with `command`).
    #[error("MCP server `{server}`: `{field}` only applies to {applies_to} servers")]
    MisplacedField {
        /// The server.
        server: String,
        /// The field.
        field: &'static str,
        /// `stdio` or `streamable HTTP`.
        applies_to: &'static str,
    },
    /// The command is empty.
    #[error("MCP server `{server}` has an empty `command`")]
    EmptyCommand {
        /// The server.
        server: String,
    },
    /// The URL is not an `http://` or `https://` URL.
    #[error("MCP server `{server}` has an invalid `url` `{url}`: {reason}")]
    InvalidUrl {
        /// The server.
        server: String,
        /// The URL as configured.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value cannot be sent.
    #[error("MCP server `{server}` has an invalid header `{header}`: {reason}")]
    InvalidHeader {
        /// The server.
        server: String,
        /// The header name as configured.
        header: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A timeout of zero.
    #[error("MCP server `{server}`: `{field}` must be longer than zero")]
    ZeroTimeout {
        /// The server.
        server: String,
        /// `timeout` or `startup_timeout`.
        field: &'static str,
    },
    /// Two servers share a name.
    #[error("two MCP servers are named `{name}`")]
    DuplicateName {
        /// The name.
        name: String,
    },
}

impl McpServerConfig {
    /// A stdio server config (`trusted = false`, default timeouts).
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            command: Some(command.into()),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            trusted: false,
            timeout: None,
            startup_timeout: None,
            tools: None,
        }
    }

    /// A streamable HTTP server config (`trusted = false`, default timeouts).
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: Some(url.into()),
            headers: BTreeMap::new(),
            trusted: false,
            timeout: None,
            startup_timeout: None,
            tools: None,
        }
    }

    /// Sets `trusted`.
    pub fn trusted(mut self, trusted: bool) -> Self {
        self.trusted = trusted;
        self
    }

    /// Offers only these of the server's tools (their MCP names).
    pub fn only_tools(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Whether the server's tool `mcp_name` is offered.
    pub fn offers(&self, mcp_name: &str) -> bool {
        self.tools.as_ref().is_none_or(|tools| tools.iter().any(|tool| tool == mcp_name))
    }

    /// Sets the per-call timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the connect-and-list timeout.
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = Some(timeout);
        self
    }

    /// The per-call timeout (`timeout`, default 60s).
    pub fn call_timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT)
    }

    /// The connect-and-list timeout (`startup_timeout`, default 30s).
    pub fn connect_timeout(&self) -> Duration {
        self.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT)
    }

    /// Checks the config and tells how the server is reached.
    pub fn validate(&self) -> Result<TransportKind, ConfigError> {
        validate_name(&self.name)?;
        let server = || self.name.clone();
        for (field, timeout) in [("timeout", self.timeout), ("startup_timeout", self.startup_timeout)] {
            if timeout.is_some_and(|timeout| timeout.is_zero()) {
                return Err(ConfigError::ZeroTimeout { server: server(), field });
            }
        }
        match (&self.command, &self.url) {
            (None, None) => Err(ConfigError::MissingTransport { server: server() }),
            (Some(_), Some(_)) => Err(ConfigError::ConflictingTransports { server: server() }),
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(ConfigError::EmptyCommand { server: server() });
                }
                if !self.headers.is_empty() {
                    return Err(ConfigError::MisplacedField {
                        server: server(),
                        field: "headers",
                        applies_to: "streamable HTTP",
                    });
                }
                Ok(TransportKind::Stdio)
            }
            (None, Some(url)) => {
                for (field, set) in [("args", !self.args.is_empty()), ("env", !self.env.is_empty())] {
                    if set {
                        return Err(ConfigError::MisplacedField { server: server(), field, applies_to: "stdio" });
                    }
                }
                validate_url(&self.name, url)?;
                self.header_map()?;
                Ok(TransportKind::Http)
            }
        }
    }

    /// The configured headers, parsed.
    pub(crate) fn header_map(
        &self,
    ) -> Result<std::collections::HashMap<http::HeaderName, http::HeaderValue>, ConfigError> {
        let invalid = |header: &str, reason: String| ConfigError::InvalidHeader {
            server: self.name.clone(),
            header: header.to_owned(),
            reason,
        };
        let mut map = std::collections::HashMap::new();
        for (name, value) in &self.headers {
            let parsed = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(name, e.to_string()))?;
            if RESERVED_HEADERS.contains(&parsed.as_str()) {
                return Err(invalid(name, "the MCP transport sets this header itself".into()));
            }
            let value = http::HeaderValue::from_str(value).map_err(|e| invalid(name, e.to_string()))?;
            map.insert(parsed, value);
        }
        Ok(map)
    }
}

fn validate_name(name: &str) -> Result<(), ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidName { name: name.to_owned(), reason: reason.to_owned() };
    if name.is_empty() {
        return Err(invalid("it is empty"));
    }
    if name.len() > MAX_SERVER_NAME_LEN {
        return Err(invalid("it is longer than 32 characters"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(invalid("only letters, digits, `_` and `-` are allowed"));
    }
    if name.contains("__") {
        return Err(invalid("it must not contain `__`, which separates the server from the tool name"));
    }
    Ok(())
}

fn validate_url(server: &str, url: &str) -> Result<(), ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidUrl {
        server: server.to_owned(),
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(invalid("it must start with http:// or https://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("it has no host"));
    }
    Ok(())
}

/// Checks a set of configs together: each one, and that names are unique.
pub(crate) fn validate_all(configs: &[McpServerConfig]) -> Result<(), ConfigError> {
    let mut seen = std::collections::HashSet::new();
    for config in configs {
        config.validate()?;
        if !seen.insert(config.name.as_str()) {
            return Err(ConfigError::DuplicateName { name: config.name.clone() });
        }
    }
    Ok(())
}

/// `Option<Duration>` as a humantime string (`"30s"`, `"1m 30s"`).
mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_str(&humantime::format_duration(*duration).to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text)
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("`{text}` is not a duration like \"30s\": {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpServerConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn a_stdio_table_parses_with_defaults() {
        let config = parse("name = \"fs\"\ncommand = \"npx\"\nargs = [\"-y\", \"pkg\"]\nenv = { A = \"1\" }").unwrap();
        assert_eq!(config.validate(), Ok(TransportKind::Stdio));
        assert!(!config.trusted);
        assert_eq!(config.call_timeout(), DEFAULT_CALL_TIMEOUT);
        assert_eq!(config.connect_timeout(), DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(config.env.get("A").map(String::as_str), Some("1"));
    }

    #[test]
    fn an_http_table_parses_with_timeouts() {
        let config = parse(
            "name = \"web\"\nurl = \"https://example.invalid/mcp\"\nheaders = { Authorization = \"Bearer x\" }\n\
             trusted = true\ntimeout = \"1m 30s\"\nstartup_timeout = \"5s\"",
        )
        .unwrap();
        assert_eq!(config.validate(), Ok(TransportKind::Http));
        assert_eq!(config.call_timeout(), Duration::from_secs(90));
        assert_eq!(config.connect_timeout(), Duration::from_secs(5));
        let back: McpServerConfig = toml::from_str(&toml::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config, "serializes back to the same table");
    }

    #[test]
    fn unknown_fields_and_bad_durations_are_refused() {
        assert!(parse("name = \"a\"\ncommand = \"x\"\ncwd = \"/\"").unwrap_err().to_string().contains("cwd"));
        assert!(parse("name = \"a\"\ncommand = \"x\"\ntimeout = \"soon\"").unwrap_err().to_string().contains("soon"));
    }

    #[test]
    fn invalid_configs_name_the_server() {
        let bad = |text: &str| parse(text).unwrap().validate().unwrap_err();
        assert!(matches!(bad("name = \"a__b\"\ncommand = \"x\""), ConfigError::InvalidName { .. }));
        assert!(matches!(bad("name = \"a.b\"\ncommand = \"x\""), ConfigError::InvalidName { .. }));
        assert!(matches!(bad("name = \"\"\ncommand = \"x\""), ConfigError::InvalidName { .. }));
        assert!(matches!(
            bad(&format!("name = \"{}\"\ncommand = \"x\"", "a".repeat(33))),
            ConfigError::InvalidName { .. }
        ));
        assert_eq!(bad("name = \"a\""), ConfigError::MissingTransport { server: "a".into() });
        assert_eq!(
            bad("name = \"a\"\ncommand = \"x\"\nurl = \"http://h/\""),
            ConfigError::ConflictingTransports { server: "a".into() }
        );
        assert!(matches!(
            bad("name = \"a\"\nurl = \"http://h/\"\nargs = [\"x\"]"),
            ConfigError::MisplacedField { field: "args", .. }
        ));
        assert!(matches!(
            bad("name = \"a\"\ncommand = \"x\"\nheaders = { A = \"b\" }"),
            ConfigError::MisplacedField { field: "headers", .. }
        ));
        assert!(matches!(bad("name = \"a\"\nurl = \"ftp://h/\""), ConfigError::InvalidUrl { .. }));
        assert!(matches!(
            bad("name = \"a\"\nurl = \"http://h/\"\nheaders = { \"bad name\" = \"b\" }"),
            ConfigError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad("name = \"a\"\nurl = \"http://h/\"\nheaders = { Accept = \"b\" }"),
            ConfigError::InvalidHeader { .. }
        ));
        assert!(matches!(
            bad("name = \"a\"\ncommand = \"x\"\ntimeout = \"0s\""),
            ConfigError::ZeroTimeout { field: "timeout", .. }
        ));
        assert!(bad("name = \"a\"").to_string().contains("`a`"));
    }

    #[test]
    fn duplicate_names_are_refused() {
        let configs = [McpServerConfig::stdio("a", "x", ["y"]), McpServerConfig::stdio("a", "z", Vec::<String>::new())];
        assert_eq!(validate_all(&configs), Err(ConfigError::DuplicateName { name: "a".into() }));
    }
}
