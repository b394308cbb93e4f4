//! Which store to open, as a command line or environment variable names it.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::OpenError;

/// The file name of the default SQLite store inside the data directory.
pub const DEFAULT_SQLITE_FILE: &str = "toolgate.db";

/// The forms [`StoreSpec::parse`] accepts (shown in errors and help text).
pub const ACCEPTED_FORMS: &str = "none, memory, sqlite (DATA_DIR/toolgate.db), sqlite://PATH, sqlite:PATH, \
     a path ending in .db, .sqlite or .sqlite3, or postgres://USER[:PASSWORD]@HOST[:PORT]/DB (or postgresql://)";

/// When a commit is durable (`--store-sync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreSync {
    /// A committed write survives a crash of the process. On SQLite (WAL,
    /// `synchronous = NORMAL`) a power loss or an operating-system crash may
    /// roll back the last commits since the log was last synced, never
    /// corrupt the file; on Postgres the server's own `synchronous_commit`
    /// applies (`on` unless its operator changed it).
    #[default]
    Normal,
    /// A committed write survives a power loss as well: SQLite syncs the log
    /// on every commit (`synchronous = FULL`); Postgres sessions run with
    /// `synchronous_commit = on` whatever the server's default.
    Full,
}

impl StoreSync {
    /// Reads `normal` or `full`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "normal" => Ok(Self::Normal),
            "full" => Ok(Self::Full),
            _ => Err(format!("`{text}` is not a store sync mode: use normal or full")),
        }
    }
}

/// Where approvals are kept.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// No ledger: approvals are not recorded.
    None,
    /// In process memory ([`toolgate::ledger::MemoryStore`]), lost on exit.
    Memory,
    /// A SQLite file (created if missing).
    Sqlite(PathBuf),
    /// A Postgres database URL.
    Postgres(String),
}

impl StoreSpec {
    /// Reads a store spec: `none`, `memory`, `sqlite` (the file
    /// `toolgate.db` in `data_dir`), `sqlite://PATH`, `sqlite:PATH`, a path
    /// ending in `.db`, `.sqlite` or `.sqlite3`, or a `postgres://` or
    /// `postgresql://` URL.
    pub fn parse(text: &str, data_dir: &Path) -> Result<Self, OpenError> {
        let trimmed = text.trim();
        let invalid = || OpenError::InvalidSpec { text: text.to_owned() };
        if trimmed.eq_ignore_ascii_case("none") {
            return Ok(Self::None);
        }
        if trimmed.eq_ignore_ascii_case("memory") {
            return Ok(Self::Memory);
        }
        if trimmed.eq_ignore_ascii_case("sqlite") {
            return Ok(Self::default_for(data_dir));
        }
        if starts_with_ignore_case(trimmed, "postgres://") || starts_with_ignore_case(trimmed, "postgresql://") {
            return Ok(Self::Postgres(trimmed.to_owned()));
        }
        if let Some(rest) = strip_prefix_ignore_case(trimmed, "sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(invalid());
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        let extension = Path::new(trimmed).extension().and_then(|extension| extension.to_str());
        if extension.is_some_and(|extension| {
            ["db", "sqlite", "sqlite3"].iter().any(|known| extension.eq_ignore_ascii_case(known))
        }) {
            return Ok(Self::Sqlite(PathBuf::from(trimmed)));
        }
        Err(invalid())
    }

    /// The default store: the SQLite file `toolgate.db` in `data_dir`.
    pub fn default_for(data_dir: &Path) -> Self {
        Self::Sqlite(data_dir.join(DEFAULT_SQLITE_FILE))
    }
}

/// Shows the spec with any password in a URL replaced by `***`.
impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Memory => f.write_str("memory"),
            Self::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            Self::Postgres(url) => f.write_str(&redact_url(url)),
        }
    }
}

/// Like [`fmt::Display`]: never shows a password.
impl fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Memory => f.write_str("Memory"),
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres(url) => f.debug_tuple("Postgres").field(&redact_url(url)).finish(),
        }
    }
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    strip_prefix_ignore_case(text, prefix).is_some()
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// A database URL with the password of its user info and any `password`
/// query parameter replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let (before_query, query) = match url.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (url, None),
    };
    let mut shown = match before_query.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((user_info, host)) => match user_info.split_once(':') {
                    Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
                    None => before_query.to_owned(),
                },
                None => before_query.to_owned(),
            }
        }
        None => before_query.to_owned(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StoreSpec, OpenError> {
        StoreSpec::parse(text, Path::new("/var/lib/toolgate"))
    }

    #[test]
    fn accepted_forms() {
        let sqlite = |path: &str| StoreSpec::Sqlite(PathBuf::from(path));
        assert_eq!(parse("none").unwrap(), StoreSpec::None);
        assert_eq!(parse(" Memory ").unwrap(), StoreSpec::Memory);
        assert_eq!(parse("sqlite").unwrap(), sqlite("/var/lib/toolgate/toolgate.db"));
        assert_eq!(parse("sqlite:///tmp/a.db").unwrap(), sqlite("/tmp/a.db"));
        assert_eq!(parse("sqlite://rel/a.db").unwrap(), sqlite("rel/a.db"));
        assert_eq!(parse("sqlite:ledger").unwrap(), sqlite("ledger"));
        assert_eq!(parse("data/ledger.sqlite3").unwrap(), sqlite("data/ledger.sqlite3"));
        assert_eq!(parse("x.SQLITE").unwrap(), sqlite("x.SQLITE"));
        assert_eq!(parse("postgres://u@h/db").unwrap(), StoreSpec::Postgres("postgres://u@h/db".into()));
        assert_eq!(parse("postgresql://h/db").unwrap(), StoreSpec::Postgres("postgresql://h/db".into()));
        assert_eq!(StoreSpec::default_for(Path::new("d")), sqlite("d/toolgate.db"));
    }

    #[test]
    fn rejected_forms_name_the_text_and_the_accepted_forms() {
        for text in ["", "sqlite:", "sqlite://", "mysql://h/db", "ledger.txt", "memoryy"] {
            let error = parse(text).unwrap_err();
            assert!(matches!(&error, OpenError::InvalidSpec { text: named } if named == text), "{text}");
            let message = error.to_string();
            assert!(message.contains(&format!("`{text}`")) && message.contains("postgres://"), "{message}");
        }
    }

    #[test]
    fn passwords_are_never_shown() {
        let url = "postgres://alice:s3cret@db.example:5432/ledger?sslmode=disable&password=other";
        let shown = redact_url(url);
        assert_eq!(shown, "postgres://alice:***@db.example:5432/ledger?sslmode=disable&password=***");
        let spec = StoreSpec::Postgres(url.to_owned());
        for text in [spec.to_string(), format!("{spec:?}")] {
            assert!(!text.contains("s3cret") && !text.contains("other"), "{text}");
        }
        assert_eq!(redact_url("postgres://bob@h/db"), "postgres://bob@h/db");
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
    }
}
