//! `toolgate approvals`: the approval inbox from the shell: `list`, `show`,
//! `approve`, `deny`, `withdraw` and `watch`.
//!
//! Two modes, chosen by the flags every subcommand shares ([`ModeArgs`]):
//!
//! - `--server URL`: through a running server's `/api/approvals` (bearer
//!   token from `TOOLGATE_TOKEN` when set); the server decides who the caller
//!   is ([`remote`]).
//! - otherwise on the store itself (`--store SPEC` / `--data-dir DIR`, opened
//!   as `toolgate audit` opens it), acting as `--as PRINCIPAL` (default: the
//!   OS user name) with the groups of `--group` and of `--config`'s
//!   `[groups]` ([`local`]). Votes go through the approval lifecycle
//!   (`toolgate::approval::lifecycle::cast`, marking the conversation due so
//!   a running server continues it), exactly as the server's inbox does.
//!
//! `approve ID --grant JSON` approves with a grant (a bounded approval: the
//! next calls like this one run without asking, `{"uses", "within", "input",
//! "scope"}`; `toolgate::approval::lifecycle::grant`), checked before the
//! vote and kept once it counted, on the server or in the store alike.
//!
//! Both modes print the same items (`toolgate_server::approval_item`): as
//! text (a table, or one item's fields) or as JSON lines ([`render`]).
//!
//! # `watch --decide`: a terminal approver
//!
//! Without `--decide`, `watch` prints the pending approvals one may decide,
//! then each one that appears or changes, until Ctrl-C. With it ([`decide`]),
//! each pending approval the acting principal may decide and has not voted
//! on is asked about once, one at a time, in arrival order (those pending
//! when the watch starts oldest first; arrivals queue while a prompt is
//! open, and one that stops pending before its turn is dropped with a note):
//! its card (tool, pretty-printed input, reason, conversation, requester,
//! who decides, the votes so far), then the keys of `toolgate chat`:
//!
//! - `y`: approve once; `n`: deny, then a reason (an empty line: none);
//! - `e`, offered where one approval decides (several approvers cannot
//!   approve different inputs): edit the input (in `$VISUAL`/`$EDITOR` at a
//!   terminal when set, else on one line pre-filled with it), then approve
//!   it as edited; an edit that is not JSON or not an object is refused with
//!   a note and the approval is asked again (as after an empty or unchanged
//!   edit);
//! - `a`, offered to the conversation's owner (or anyone where it has none):
//!   approve, and keep "always allow this tool in this chat", a sticky
//!   decision scoped to the approval's conversation, in the store or through
//!   the server's `POST /api/decisions`; like chat's, it is a grant without a
//!   use limit: it lifts the questions its author would be asked (the tool's
//!   own, an unrouted rule's), never a deny or a rule routed to others;
//! - `s`, or an empty answer (Enter): skip, leaving it pending.
//!
//! Votes go the way of `approve`/`deny`. A refusal (already decided, not an
//! approver, expired, ...) prints `error: CODE: MESSAGE` to stderr and the
//! watch goes on with the next approval; so does the answer to an approval
//! someone else decided while its prompt was open. A sticky decision that
//! cannot be kept after its vote counted is reported the same way. Other
//! failures (the store, the server) end the watch as any failure ends a
//! subcommand.
//!
//! Answers: at a terminal one key press answers, and Ctrl-C, Ctrl-D or Esc
//! at the prompt end the watch. Otherwise stdin gives one line an answer
//! (`y`; `n`, then the reason on the next line; `e`, then the edited JSON on
//! the next line), and its end ends the watch, at a prompt or as soon as no
//! approval waits to be asked and no answer is left (answers left over wait
//! for approvals to come). Either way the watch then exits with 0. Cards,
//! prompts and their notes go to stdout; with `--output jsonl` to stderr,
//! while stdout gets the JSON of each item asked about and of each item
//! after a vote. On a server, `--decide` first asks `GET /api/me` who it
//! takes the caller for.
//!
//! Exit status: 0 on success; 1 on a refusal (`not_an_approver`,
//! `already_voted`, `unknown_approval`, ...), printed to stderr as
//! `error: CODE: MESSAGE`; other failures (an unreachable server, a store
//! that does not open) go through the CLI's usual error handling (exit 1
//! with `toolgate: ...`), and bad flags through clap's (exit 2).

mod answers;
mod decide;
mod local;
mod remote;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;
use toolgate::approval::lifecycle::grant::GrantSpec;
use toolgate::ledger::StateFilter;

use crate::store::StoreArgs;
use render::{Output, Printer};

/// `toolgate approvals ...`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List the approvals you may see, newest first (pending ones unless `--state` says otherwise).
    List(ListArgs),
    /// Show one approval.
    Show(IdArgs),
    /// Vote to approve an approval.
    Approve(VoteArgs),
    /// Vote to deny an approval (one denial denies it).
    Deny(VoteArgs),
    /// Withdraw your own pending request (it resolves like a denial).
    Withdraw(IdArgs),
    /// Print the pending approvals you may decide, then each one that appears or changes, until Ctrl-C;
    /// with `--decide`, ask you to decide each one as it arrives.
    Watch(WatchArgs),
}

/// Where the inbox is and who acts: the flags of every `approvals` subcommand.
#[derive(Debug, Args)]
pub struct ModeArgs {
    /// Act through a running toolgate server (`http://HOST:PORT`) instead of on the store.
    /// `TOOLGATE_TOKEN`, if set, is sent as the bearer token; the server decides who you are.
    #[arg(long, value_name = "URL", conflicts_with_all = ["data_dir", "principal", "groups", "config"])]
    server: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
    /// On the store: who acts (lists what they may see, votes and withdraws as them).
    /// Default: the OS user name (`$USER`).
    #[arg(long = "as", value_name = "PRINCIPAL")]
    principal: Option<String>,
    /// On the store: a group of that principal, without `group:` (repeatable).
    #[arg(long = "group", value_name = "NAME")]
    groups: Vec<String>,
    /// On the store: a config file whose `[groups]` listing the principal apply too (and whose
    /// `admins` see every approval), as `toolgate serve` reads it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How items are printed: `text` (a table, or one item's fields) or `jsonl` (one item's JSON a line).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Which approvals `list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    /// Waiting for votes.
    Pending,
    /// Every state but pending.
    Decided,
    /// Every state.
    All,
}

impl StateArg {
    /// The name the server's `state` parameter takes.
    fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Decided => "decided",
            Self::All => "all",
        }
    }

    /// The store's filter.
    fn filter(self) -> StateFilter {
        match self {
            Self::Pending => StateFilter::Pending,
            Self::Decided => StateFilter::Decided,
            Self::All => StateFilter::All,
        }
    }
}

/// Arguments of `toolgate approvals list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    mode: ModeArgs,
    /// Which states.
    #[arg(long, value_enum, default_value_t = StateArg::Pending)]
    state: StateArg,
    /// Only this conversation's approvals (the chat or thread id, of your own conversations).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = toolgate_server::DEFAULT_APPROVALS_LIMIT, value_parser = parse_limit)]
    limit: usize,
}

/// Arguments of `show` and `withdraw`.
#[derive(Debug, Args)]
pub struct IdArgs {
    #[command(flatten)]
    mode: ModeArgs,
    /// The approval id.
    id: String,
}

/// Arguments of `approve` and `deny`.
#[derive(Debug, Args)]
pub struct VoteArgs {
    #[command(flatten)]
    mode: ModeArgs,
    /// The approval id.
    id: String,
    /// Why: a denial's reason, or a note with an approval (kept on the vote).
    #[arg(long)]
    reason: Option<String>,
    /// With `approve`: also let the next calls like this one run without asking, a bounded approval, as JSON:
    /// `{"uses": 5, "within": "1h", "input": {"/amount": {"le": 1000}}, "scope": "conversation"}` (every key
    /// optional; `scope` is `conversation`, the default, or `principal`).
    #[arg(long, value_parser = parse_grant)]
    grant: Option<GrantSpec>,
}

/// Arguments of `toolgate approvals watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    mode: ModeArgs,
    /// Decide each pending approval as it arrives, one at a time: `y` approve once, `n` deny (then a reason),
    /// `e` edit the input (as JSON) and approve it (where one approval decides), `a` approve and always allow
    /// the tool in that chat (its owner only), `s` or Enter skip. At a terminal one key answers; otherwise stdin
    /// gives one line per answer, and its end ends the watch.
    #[arg(long)]
    decide: bool,
}

/// What `list` asks for.
#[derive(Debug, Clone)]
pub struct Listing {
    /// Which states.
    pub state: StateArg,
    /// Only this conversation of the caller's.
    pub conversation: Option<String>,
    /// At most this many.
    pub limit: usize,
}

/// A vote.
#[derive(Debug, Clone)]
pub struct Ballot {
    /// Approve (else deny).
    pub approve: bool,
    /// Why, if said.
    pub reason: Option<String>,
    /// With an approval, the input to run instead of the model's.
    pub edited_input: Option<Value>,
    /// With an approval, a grant: the next calls like it run without asking.
    pub grant: Option<GrantSpec>,
}

/// The note of a sticky decision kept by `watch --decide`'s `a`.
pub const STICKY_NOTE: &str = "always allow, from toolgate approvals watch";

/// An inbox refusal: a stable code and its message (exit status 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `not_an_approver`, `already_voted`, `unknown_approval`, ...
    pub code: String,
    /// What happened, in words.
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Refusal {}

/// Where the inbox is.
enum Inbox {
    /// A running server.
    Remote(remote::Remote),
    /// The store, acting as one voter.
    Local(local::Local),
}

impl Inbox {
    /// The inbox the flags name.
    async fn open(mode: &ModeArgs) -> anyhow::Result<Self> {
        match &mode.server {
            Some(url) => {
                refuse_store_flag(mode);
                Ok(Self::Remote(remote::Remote::new(url)?))
            }
            None => {
                let voter = local::voter(mode.principal.clone(), &mode.groups, mode.config.as_deref())?;
                Ok(Self::Local(local::Local::open(&mode.store, voter).await?))
            }
        }
    }

    async fn list(&self, listing: &Listing) -> anyhow::Result<Vec<Value>> {
        match self {
            Self::Remote(remote) => remote.list(listing).await,
            Self::Local(local) => local.list(listing).await,
        }
    }

    async fn show(&self, id: &str) -> anyhow::Result<Value> {
        match self {
            Self::Remote(remote) => remote.show(id).await,
            Self::Local(local) => local.show(id).await,
        }
    }

    async fn vote(&self, id: &str, ballot: Ballot) -> anyhow::Result<Value> {
        match self {
            Self::Remote(remote) => remote.vote(id, &ballot).await,
            Self::Local(local) => local.vote(id, ballot).await,
        }
    }

    async fn withdraw(&self, id: &str) -> anyhow::Result<Value> {
        match self {
            Self::Remote(remote) => remote.withdraw(id).await,
            Self::Local(local) => local.withdraw(id).await,
        }
    }

    /// Who acts (on a server: who it takes the caller for).
    async fn principal(&self) -> anyhow::Result<Option<String>> {
        match self {
            Self::Remote(remote) => remote.principal().await,
            Self::Local(local) => Ok(local.principal()),
        }
    }

    /// Keeps "always allow `item`'s tool in its conversation"; the sticky decision's id.
    async fn always_allow(&self, item: &Value) -> anyhow::Result<String> {
        match self {
            Self::Remote(remote) => remote.always_allow(item).await,
            Self::Local(local) => local.always_allow(item["id"].as_str().unwrap_or_default()).await,
        }
    }

    /// Calls `each` with every item as it arrives, until the source ends or fails.
    async fn watch(&self, each: &mut dyn FnMut(&Value) -> anyhow::Result<()>) -> anyhow::Result<()> {
        match self {
            Self::Remote(remote) => remote.watch(each).await,
            Self::Local(local) => local.watch(each).await,
        }
    }
}

/// `--server` with `--store` on the command line is a usage error (clap cannot
/// tell it apart from `TOOLGATE_STORE` in the environment, which is ignored here).
fn refuse_store_flag(mode: &ModeArgs) {
    let from_env = std::env::var("TOOLGATE_STORE").ok();
    if mode.store.store.is_some() && mode.store.store != from_env {
        clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            "the argument '--server <URL>' cannot be used with '--store <STORE>'\n",
        )
        .exit();
    }
}

/// Runs one `toolgate approvals` subcommand.
pub async fn run(command: ApprovalsCommand) -> anyhow::Result<ExitCode> {
    match execute(command).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => match error.downcast_ref::<Refusal>() {
            Some(refusal) => {
                eprintln!("error: {}: {}", refusal.code, refusal.message);
                Ok(ExitCode::from(1))
            }
            None => Err(error),
        },
    }
}

/// Runs the subcommand; a refusal is an error holding a [`Refusal`].
async fn execute(command: ApprovalsCommand) -> anyhow::Result<()> {
    match command {
        ApprovalsCommand::List(args) => {
            let inbox = Inbox::open(&args.mode).await?;
            let listing = Listing { state: args.state, conversation: args.conversation, limit: args.limit };
            let items = inbox.list(&listing).await?;
            Printer::new(args.mode.output).list(&items)
        }
        ApprovalsCommand::Show(args) => {
            let item = Inbox::open(&args.mode).await?.show(&args.id).await?;
            Printer::new(args.mode.output).item(&item)
        }
        ApprovalsCommand::Approve(args) => vote(args, true).await,
        ApprovalsCommand::Deny(args) => vote(args, false).await,
        ApprovalsCommand::Withdraw(args) => {
            let item = Inbox::open(&args.mode).await?.withdraw(&args.id).await?;
            Printer::new(args.mode.output).item(&item)
        }
        ApprovalsCommand::Watch(args) => watch(args).await,
    }
}

/// `approve` or `deny`: the item as it is after the vote.
async fn vote(args: VoteArgs, approve: bool) -> anyhow::Result<()> {
    let inbox = Inbox::open(&args.mode).await?;
    let ballot = Ballot { approve, reason: args.reason, edited_input: None, grant: args.grant };
    let item = inbox.vote(&args.id, ballot).await?;
    Printer::new(args.mode.output).item(&item)
}

/// `watch`: one line per item as it arrives, or with `--decide` a prompt
/// per approval ([`decide`]), until Ctrl-C.
async fn watch(args: WatchArgs) -> anyhow::Result<()> {
    let inbox = Inbox::open(&args.mode).await?;
    let printer = Printer::new(args.mode.output);
    let mut each = |item: &Value| printer.line(item);
    let watching = async {
        match args.decide {
            true => decide::watch(&inbox, args.mode.output).await,
            false => inbox.watch(&mut each).await,
        }
    };
    tokio::select! {
        watched = watching => watched,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// A `--grant`: JSON of a grant, checked as every path checks one
/// ([`toolgate_policy::grants::check_spec`]).
fn parse_grant(text: &str) -> Result<GrantSpec, String> {
    let spec: GrantSpec = serde_json::from_str(text).map_err(|error| format!("not a grant: {error}"))?;
    toolgate_policy::grants::check_spec(&spec).map_err(|refusal| refusal.to_string())?;
    Ok(spec)
}

/// A listing size from 1 to the server's maximum.
fn parse_limit(text: &str) -> Result<usize, String> {
    let max = toolgate_server::MAX_APPROVALS_LIMIT;
    match text.parse::<usize>() {
        Ok(limit) if (1..=max).contains(&limit) => Ok(limit),
        _ => Err(format!("must be a number from 1 to {max}, got `{text}`")),
    }
}
