//! `toolgate policy explain`: what the rules of a config file decide for one
//! call, and why, exactly as the engine would decide it; `toolgate policy
//! report`: how often each rule in shadow mode would have fired.
//!
//! Prints the decision (`allow`, `ask` or `deny`) on the first line, then
//! `because: …` (the rule, or the tool's own policy) and the rules that
//! matched. The tool's own policy comes from `--tools` and, when no rule
//! decides and the tool is one of the file's MCP servers', from that server
//! (it is started for this). An invalid file exits with status 2. With
//! `--store`, rules' history terms are judged on the calls that store
//! recorded, as the server judges them; without it they are unknown.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::Value;
use std::sync::Arc;

use toolgate::ledger::{AuditKind, AuditQuery, AuditView, Clock, SystemClock, conversation_key};
use toolgate::tool::{ApprovalContext, CallGate, Caller, GateAction, GateCall, Verdict, decide_call};
use toolgate::{Tool, Toolkit};
use toolgate_policy::{Explanation, PolicyGate, StoredGate};
use toolgate_store::StoreSync;

use crate::config::Config;
use crate::tools::Tools;

/// `toolgate policy …`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print the decision (allow, ask or deny) for one call and the rule that made it.
    Explain(ExplainArgs),
    /// Per rule in shadow mode: how often it would have fired, from the store's `shadowed` events.
    Report(ReportArgs),
    /// Run a policy's table tests: each case a call, the calls before it, and the expected decision.
    Test(TestArgs),
}

/// Arguments of `toolgate policy test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Test files (each names its config: `config = "payments.toml"`).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Arguments of `toolgate policy report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    store: crate::store::StoreArgs,
    /// From how long ago (`7d`, `24h`) or since when (milliseconds since the epoch or RFC 3339).
    #[arg(long, default_value = "7d")]
    since: String,
}

/// Arguments of `toolgate policy explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The config file with the `[[rule]]` tables (required unless `--server`).
    #[arg(long, value_name = "FILE", required_unless_present = "server")]
    config: Option<PathBuf>,
    /// The tool's name, e.g. `fs__write_file`.
    #[arg(long)]
    tool: String,
    /// The call's input as JSON.
    #[arg(long, default_value = "{}")]
    input: String,
    /// Who asks (for rules with `principal`).
    #[arg(long)]
    principal: Option<String>,
    /// A group the principal belongs to (for rules with `principal = "group:NAME"`; repeatable).
    #[arg(long = "group", value_name = "NAME")]
    groups: Vec<String>,
    /// The toolkit whose own policies decide when no rule does.
    #[arg(long, value_enum, default_value_t = Tools::Demo)]
    tools: Tools,
    /// Judge history terms on the calls this store recorded (`sqlite`, `sqlite://PATH`,
    /// `postgres://…`); without it a history term is unknown, and its rule asks where it would deny or ask.
    #[arg(long, value_name = "SPEC")]
    store: Option<String>,
    /// Ask a running server (`http://HOST:PORT`) instead: its rules, its store's history, its tools, and
    /// who it takes you for (`TOOLGATE_TOKEN`, if set, is sent as the bearer token).
    #[arg(long, value_name = "URL", conflicts_with_all = ["store", "config", "principal", "groups"])]
    server: Option<String>,
    /// The data directory of a `--store sqlite` (default: the server's).
    #[arg(long, requires = "store")]
    data_dir: Option<PathBuf>,
    /// The conversation the call is in, as its owner named it (for `scope = "conversation"`).
    #[arg(long)]
    conversation: Option<String>,
}

/// Runs a `policy` command.
pub async fn run(command: PolicyCommand) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::Explain(args) => explain(args).await,
        PolicyCommand::Report(args) => report(args).await,
        PolicyCommand::Test(args) => test(args).await,
    }
}

async fn explain(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    if let Some(server) = &args.server {
        return explain_remote(server, &args).await;
    }
    let Some(path) = &args.config else { anyhow::bail!("--config FILE is required without --server") };
    let config = match Config::load(path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("toolgate: {error:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let input: Value = serde_json::from_str(&args.input).context("--input is not JSON")?;
    let call = GateCall {
        tool_name: &args.tool,
        input: &input,
        tool_call_id: "explain",
        conversation_id: None,
        principal: args.principal.as_deref(),
        groups: &args.groups,
    };
    let policy = Arc::new(config.policy.clone());
    let key = args.conversation.as_deref().map(|id| conversation_key(args.principal.as_deref(), id));
    let call = GateCall { conversation_id: key.as_deref(), ..call };
    let plain = PolicyGate::new(policy.clone(), Vec::new(), 0);
    let stored = match &args.store {
        None => None,
        Some(spec) => {
            let data_dir = args.data_dir.clone().unwrap_or_else(crate::store::default_data_dir);
            let Some(store) = crate::store::open(spec, &data_dir, StoreSync::default()).await? else {
                anyhow::bail!("--store none keeps no history to judge history terms on");
            };
            let (principal, now) = (args.principal.clone(), SystemClock.now());
            let gate = StoredGate::new(policy.clone(), Arc::clone(&store), key.clone(), principal, now)
                .with_history(store, Arc::new(config.groups.clone()));
            Some(gate)
        }
    };
    let (gate, explanation): (&dyn CallGate, Explanation) = match &stored {
        Some(stored) => (stored, stored.explain(&call).await.context("cannot read the store")?),
        None => (&plain, config.policy.explain(&call)),
    };
    let ruled = explanation.verdict();
    let tool = match ruled {
        Some(ref verdict) if verdict.action == GateAction::Deny => None,
        _ => own_tool(&config, args.tools, &args.tool).await?,
    };
    let (word, because) = match (&tool, ruled) {
        (Some(tool), _) => {
            let caller = Caller {
                gate: Some(gate),
                conversation_id: None,
                principal: args.principal.as_deref(),
                groups: &args.groups,
            };
            let context = ApprovalContext::new("explain", Vec::new());
            let Verdict { action, reason, route } = decide_call(caller, tool, &input, context).await;
            match action {
                GateAction::Deny => ("deny", reason.unwrap_or_default()),
                GateAction::Ask => {
                    let mut reason = reason.unwrap_or_default();
                    if let Some(route) = route {
                        // Who decides, when the rule named approvers.
                        let approvers = route.approvers.join(", ");
                        reason.push_str(&format!(" (approvers: {approvers}; quorum {})", route.quorum));
                    }
                    ("ask", reason)
                }
                GateAction::Allow => match explanation.verdict().and_then(|verdict| verdict.reason) {
                    Some(reason) => ("allow", reason),
                    None => ("allow", format!("no rule matched and tool `{}` needs no approval", tool.name())),
                },
            }
        }
        (None, Some(verdict)) => (verdict.action.as_str(), verdict.reason.unwrap_or_default()),
        (None, None) => {
            ("allow", format!("no rule matched and no tool `{}` is known: the default is allow", args.tool))
        }
    };
    println!("{word}");
    println!("because: {because}");
    for matched in &explanation.matches {
        println!("matched: {} {}: {}", matched.action.as_str(), matched.source.name(), matched.reason);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the test files' cases: `ok` or `FAILED` with what was expected and
/// what the rules decided; exit 1 on a failed case, 2 on a file that does not run.
async fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    let (mut passed, mut failed) = (0, 0);
    for file in &args.files {
        let results = match toolgate_policy::cases::run_file(file).await {
            Ok(results) => results,
            Err(error) => {
                eprintln!("toolgate: {error}");
                return Ok(ExitCode::from(2));
            }
        };
        for result in results {
            if result.passed() {
                passed += 1;
                println!("ok      {}: {}", file.display(), result.name);
                continue;
            }
            failed += 1;
            let shown = |(decision, rule): (&str, Option<&str>)| match rule {
                Some(rule) => format!("{decision} by `{rule}`"),
                None => decision.to_owned(),
            };
            println!("FAILED  {}: {}", file.display(), result.name);
            println!("  - expected: {}", shown((&result.expected.0, result.expected.1.as_deref())));
            println!("  + got:      {}", shown((&result.got.0, result.got.1.as_deref())));
            if let Some(reason) = &result.got.2 {
                println!("    because:  {reason}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Prints, per shadow rule, how often it matched since `--since`, by what it would have decided.
async fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let Some(store) = args.store.open().await? else {
        anyhow::bail!("`toolgate policy report` needs a store; --store none keeps no audit log");
    };
    let since = match humantime::parse_duration(&args.since) {
        Ok(ago) => SystemClock.now().saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX)),
        Err(_) => toolgate_server::parse_time(&args.since).map_err(|error| anyhow::anyhow!("--since: {error}"))?,
    };
    let mut query =
        AuditQuery { since: Some(since), limit: Some(10_000), view: AuditView::All, ..AuditQuery::default() };
    let mut rules: std::collections::BTreeMap<String, [u64; 4]> = std::collections::BTreeMap::new();
    loop {
        let events = store.audit(&query).await.context("cannot read the audit log")?;
        for event in events.iter().filter(|event| event.kind == AuditKind::Shadowed) {
            let rule = event.data["rule"].as_str().unwrap_or("?").to_owned();
            let counts = rules.entry(rule).or_default();
            counts[0] += 1;
            match event.data["action"].as_str() {
                Some("deny") => counts[1] += 1,
                Some("ask") => counts[2] += 1,
                _ => counts[3] += 1,
            }
        }
        match events.last() {
            Some(last) if events.len() == 10_000 => query.after_seq = Some(last.seq),
            _ => break,
        }
    }
    println!("{:<32} {:>8} {:>10} {:>9} {:>11}", "rule", "fired", "would-deny", "would-ask", "would-allow");
    for (rule, [fired, deny, ask, allow]) in &rules {
        println!("{rule:<32} {fired:>8} {deny:>10} {ask:>9} {allow:>11}");
    }
    if rules.is_empty() {
        println!("(no rule in shadow mode fired since then)");
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks a running server's `POST /api/policy/explain` and prints its answer as a local explain would.
async fn explain_remote(server: &str, args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let input: Value = serde_json::from_str(&args.input).context("--input is not JSON")?;
    let url = reqwest::Url::parse(server.trim())
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
        .with_context(|| format!("--server must be an http:// or https:// URL, got `{server}`"))?;
    let url = url.join("api/policy/explain").context("--server")?;
    let mut body = serde_json::json!({"tool": args.tool, "input": input});
    if let Some(conversation) = &args.conversation {
        body["conversation"] = Value::String(conversation.clone());
    }
    let mut request = reqwest::Client::new().post(url).json(&body);
    if let Ok(token) = std::env::var("TOOLGATE_TOKEN")
        && !token.is_empty()
    {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.context("cannot reach the server")?;
    let status = response.status();
    let answer: Value = response.json().await.context("the server's answer is not JSON")?;
    if !status.is_success() {
        anyhow::bail!("the server refused ({status}): {}", answer["error"]["message"].as_str().unwrap_or_default());
    }
    println!("{}", answer["decision"].as_str().unwrap_or_default());
    println!("because: {}", answer["reason"].as_str().unwrap_or_default());
    for matched in answer["matches"].as_array().into_iter().flatten() {
        let field = |name: &str| matched[name].as_str().unwrap_or_default().to_owned();
        println!("matched: {} {}: {}", field("action"), field("source"), field("reason"));
    }
    Ok(ExitCode::SUCCESS)
}

/// The tool from `--tools`, or from the config's MCP server its name points at.
async fn own_tool(config: &Config, tools: Tools, name: &str) -> anyhow::Result<Option<Tool>> {
    if let Some(tool) = tools.toolkit().as_ref().and_then(|toolkit| toolkit.get(name)) {
        return Ok(Some(tool.clone()));
    }
    let Some(server) = config.mcp.iter().find(|server| name.starts_with(&format!("{}__", server.name))) else {
        return Ok(None);
    };
    let mcp = toolgate_mcp::McpTools::connect(vec![server.clone()])
        .await
        .with_context(|| format!("cannot start MCP server `{}` to read its tools", server.name))?;
    let toolkit = Toolkit::new(mcp.tools()).context("the MCP server's tools do not make a toolkit")?;
    let tool = toolkit.get(name).cloned();
    mcp.shutdown().await;
    Ok(tool)
}
