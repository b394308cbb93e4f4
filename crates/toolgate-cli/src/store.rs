//! The store flags shared by `serve`, `run` and `audit`, and the data directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use toolgate::ledger::{LedgerConfig, LedgerStore};
use toolgate::receipt::{ReceiptKey, ReceiptStore};
use toolgate_server::receipts::Sealer;
use toolgate_store::{SqlStore, StoreSpec, StoreSync, open_store_synced};

/// Where approvals, their audit log and conversations are kept.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The approval store: `sqlite` (DATA_DIR/toolgate.db), `sqlite://PATH`, `postgres://USER@HOST/DB`
    /// (several servers may share one; `?pool_max_conns=N` sets its connections), `memory`, or `none`
    /// (stateless signed approvals, no replay protection).
    #[arg(long, env = "TOOLGATE_STORE")]
    pub store: Option<String>,
    /// Where the generated approval secret and the default SQLite store are kept
    /// (default: `$XDG_DATA_HOME/toolgate`, else `~/.local/share/toolgate`).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// When a commit is durable: `normal` (survives a crash of the process; on SQLite a power loss may
    /// roll back the last commits) or `full` (survives a power loss: SQLite syncs every commit, Postgres
    /// sessions use `synchronous_commit = on`).
    #[arg(long, env = "TOOLGATE_STORE_SYNC", value_parser = StoreSync::parse, default_value = "normal")]
    pub store_sync: StoreSync,
}

impl StoreArgs {
    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(default_data_dir)
    }

    /// Opens the store named by `--store` (or `TOOLGATE_STORE`), else the default SQLite file; `None` for `none`.
    pub async fn open(&self) -> anyhow::Result<Option<Arc<dyn LedgerStore>>> {
        open(self.store.as_deref().unwrap_or("sqlite"), &self.data_dir(), self.store_sync).await
    }
}

impl StoreArgs {
    /// [`Self::open`], and for a SQL store the same store signing receipts
    /// with the key in `key` (default: `receipt-key.jwk` in the data
    /// directory, created `0600` on first use): the ledger, and the receipts.
    pub async fn open_signed(&self, key: Option<&Path>) -> anyhow::Result<(Option<Arc<dyn LedgerStore>>, Receipts)> {
        let spec = StoreSpec::parse(self.store.as_deref().unwrap_or("sqlite"), &self.data_dir()).context("--store")?;
        if !matches!(spec, StoreSpec::Sqlite(_) | StoreSpec::Postgres(_)) {
            return Ok((
                open_store_synced(&spec, self.store_sync).await.context("cannot open the approval store")?,
                None,
            ));
        }
        let path = key.map_or_else(|| self.data_dir().join(RECEIPT_KEY_FILE), Path::to_path_buf);
        if key.is_none() {
            std::fs::create_dir_all(self.data_dir()).context("cannot create the data directory")?;
        }
        let key = ReceiptKey::load_or_create(&path).context("--receipt-key")?;
        tracing::info!(kid = key.kid(), file = %path.display(), "signing receipts");
        let store = SqlStore::open_synced(&spec, self.store_sync).await.context("cannot open the approval store")?;
        let store = Arc::new(store.sign_with(key).await.context("cannot register the receipt key")?);
        tracing::info!(store = %spec, "approval store open");
        Ok((Some(store.clone()), Some(store)))
    }

    /// [`Self::open_signed`] with the data directory's key, and for a SQL
    /// store the receipts worker started on it, for a process that writes
    /// audit events without serving (`toolgate chat`, `toolgate
    /// mcp-gateway`): call [`Sealer::finish`] when it ends.
    pub async fn open_sealed(&self) -> anyhow::Result<(Option<Arc<dyn LedgerStore>>, Option<Sealer>)> {
        let (store, receipts) = self.open_signed(None).await?;
        let clock: Arc<dyn toolgate::ledger::Clock> = Arc::new(toolgate::ledger::SystemClock);
        Ok((store, receipts.map(|receipts| Sealer::start(receipts, clock))))
    }

    /// The store's audit chain, to read (`toolgate audit keys`, `export`, `verify --store`).
    pub async fn open_receipts(&self) -> anyhow::Result<Arc<dyn ReceiptStore>> {
        open_receipts(self.store.as_deref().unwrap_or("sqlite"), &self.data_dir()).await
    }
}

/// The audit chain of the SQL store a `--store` value names, to read.
pub async fn open_receipts(text: &str, data_dir: &Path) -> anyhow::Result<Arc<dyn ReceiptStore>> {
    let spec = StoreSpec::parse(text, data_dir).context("--store")?;
    anyhow::ensure!(
        matches!(spec, StoreSpec::Sqlite(_) | StoreSpec::Postgres(_)),
        "receipts and the audit chain are kept by SQL stores (sqlite, postgres), not `{spec}`"
    );
    Ok(Arc::new(SqlStore::open(&spec).await.context("cannot open the approval store")?))
}

/// The receipt key's file in the data directory.
pub const RECEIPT_KEY_FILE: &str = "receipt-key.jwk";

/// A store's audit chain, when it signs receipts.
pub type Receipts = Option<Arc<dyn ReceiptStore>>;

/// Opens the store a `--store` value names, its commits as durable as `sync` says; `None` for `none`.
pub async fn open(text: &str, data_dir: &Path, sync: StoreSync) -> anyhow::Result<Option<Arc<dyn LedgerStore>>> {
    let spec = StoreSpec::parse(text, data_dir).context("--store")?;
    let store = open_store_synced(&spec, sync).await.context("cannot open the approval store")?;
    if store.is_some() {
        tracing::info!(store = %spec, "approval store open");
    }
    Ok(store)
}

/// The settings of approvals with a store.
#[derive(Debug, Args)]
pub struct LedgerArgs {
    /// How long an approval request stays answerable, e.g. `90s`, `15m`, `24h` (tools may set their own).
    #[arg(long, value_parser = parse_ttl, default_value = "24h")]
    pub approval_ttl: Duration,
}

impl LedgerArgs {
    /// The ledger over `store` with these settings.
    pub fn config(&self, store: Arc<dyn LedgerStore>) -> LedgerConfig {
        LedgerConfig::new(store).ttl(self.approval_ttl)
    }
}

/// A human duration of at least one second.
fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = crate::duration::parse_duration(text)?;
    if ttl < Duration::from_secs(1) {
        return Err(format!("`{text}` is shorter than one second"));
    }
    Ok(ttl)
}

/// The default data directory: `$XDG_DATA_HOME/toolgate`, else `~/.local/share/toolgate`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("toolgate");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/toolgate")
}

/// The OS user name: `$USER`, else `$LOGNAME`, else `$USERNAME`.
pub fn os_user() -> anyhow::Result<String> {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|name| !name.is_empty()))
        .context("cannot tell who you are ($USER is not set): pass --as PRINCIPAL")
}
