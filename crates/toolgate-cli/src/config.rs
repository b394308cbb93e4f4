//! `--config FILE`: MCP servers (`[[mcp]]`), sub-agents (`[[agent]]`, see [`crate::agents`]), approval rules
//! (`[[rule]]`), groups (`[groups]`), the MCP gateway's settings (`[gateway]`), the call-gating API's
//! (`[calls]`), notifications (`[[notify]]`, `[emails]`) and
//! the server's admins (`admins = ["..."]`, who see every owner's audit
//! events) in one TOML file, taken by `run`, `serve`, `chat` and `policy explain`.
//!
//! The whole file is checked when it loads: an unknown top-level key, an
//! unknown key in a table, a server or rule that does not validate, or two
//! servers with one name is an error naming it. `serve` reloads the rules
//! when the file changes (see [`crate::tools`]); servers are read once.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use toolgate::ledger::{check_group, check_principal};
use toolgate_gateway::GatewaySection;
use toolgate_mcp::McpServerConfig;
use toolgate_notify::{Channels, NotifyConfig};
use toolgate_policy::{Policy, RuleConfig};

use crate::agents::{AgentConfig, AgentSpec};

/// The `--config` flag.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// A TOML file with `[[mcp]]` servers (their tools join the toolkit as `<server>__<tool>`) and `[[rule]]`
    /// approval rules (deny > ask > allow > the tool's own policy).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    mcp: Vec<McpServerConfig>,
    #[serde(default)]
    rule: Vec<RuleConfig>,
    #[serde(default)]
    admins: Vec<String>,
    #[serde(default)]
    groups: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    notify: Vec<NotifyConfig>,
    #[serde(default)]
    emails: BTreeMap<String, String>,
    #[serde(default)]
    gateway: GatewaySection,
    #[serde(default)]
    calls: CallsSection,
    #[serde(default)]
    agent: Vec<AgentConfig>,
}

/// The `[calls]` table: the call-gating API's settings.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallsSection {
    /// What decides a call that no rule or sticky decision names: `ask` (the default), `allow` or `deny`.
    #[serde(default)]
    pub default: toolgate_server::CallsDefault,
}

/// A checked config file.
#[derive(Debug)]
pub struct Config {
    /// Where it was read from.
    pub path: PathBuf,
    /// The MCP servers, in file order.
    pub mcp: Vec<McpServerConfig>,
    /// The compiled rules.
    pub policy: Policy,
    /// Principals who see every owner's audit events on `serve`.
    pub admins: Vec<String>,
    /// Groups and their members (rules name them `group:NAME`).
    pub groups: BTreeMap<String, Vec<String>>,
    /// The notification channels (`[[notify]]`) and addresses (`[emails]`), their secrets read.
    pub notify: Channels,
    /// The `[gateway]` table (`toolgate mcp-gateway`).
    pub gateway: GatewaySection,
    /// The `[calls]` table (`serve`'s call-gating API).
    pub calls: CallsSection,
    /// The `[[agent]]` tables, each after the agents it calls.
    pub agents: Vec<AgentSpec>,
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read --config {}", path.display()))?;
        let Parsed { mcp, policy, admins, groups, notify, gateway, calls, agents } =
            parse(&text).with_context(|| format!("invalid --config {}", path.display()))?;
        Ok(Self { path: path.to_owned(), mcp, policy, admins, groups, notify, gateway, calls, agents })
    }
}

/// What a config file's text holds, checked.
#[derive(Debug)]
pub struct Parsed {
    /// The MCP servers, in file order.
    pub mcp: Vec<McpServerConfig>,
    /// The compiled rules.
    pub policy: Policy,
    /// The admins.
    pub admins: Vec<String>,
    /// The groups.
    pub groups: BTreeMap<String, Vec<String>>,
    /// The notification channels.
    pub notify: Channels,
    /// The `[gateway]` table.
    pub gateway: GatewaySection,
    /// The `[calls]` table.
    pub calls: CallsSection,
    /// The `[[agent]]` tables, checked.
    pub agents: Vec<AgentSpec>,
}

/// Checks the text of a config file: its servers, its compiled rules and its admins.
pub fn parse(text: &str) -> anyhow::Result<Parsed> {
    let file: ConfigFile = toml::from_str(text)?;
    let mut names = HashSet::new();
    for server in &file.mcp {
        server.validate().with_context(|| format!("[[mcp]] `{}`", server.name))?;
        anyhow::ensure!(names.insert(server.name.as_str()), "two [[mcp]] servers are named `{}`", server.name);
    }
    for admin in &file.admins {
        check_principal(admin).with_context(|| "`admins` holds a name that cannot be a principal")?;
    }
    for (group, members) in &file.groups {
        anyhow::ensure!(!group.is_empty() && !group.contains(':'), "[groups]: `{group}` is not a group name");
        check_group(group).with_context(|| "[groups]: a group name")?;
        for member in members {
            check_principal(member)
                .with_context(|| format!("[groups] `{group}` holds a name that cannot be a principal"))?;
        }
    }
    let policy = Policy::from_rules(file.rule)?;
    check_approvers(&policy, &file.groups)?;
    let agents = crate::agents::check(file.agent)?;
    for agent in &agents {
        if let Some(policy) = &agent.policy {
            check_approvers(policy, &file.groups).with_context(|| format!("[[agent]] `{}`", agent.config.name))?;
        }
    }
    let notify = Channels::from_config(&file.notify, &file.emails, |name| std::env::var(name).ok())?;
    Ok(Parsed {
        mcp: file.mcp,
        policy,
        admins: file.admins,
        groups: file.groups,
        notify,
        gateway: file.gateway,
        calls: file.calls,
        agents,
    })
}

/// Every rule's approvers must be able to decide: a configured group they
/// name has members, and the quorum does not exceed the approvers there can
/// be (a group the file does not configure comes from sign-in, e.g. a JWT
/// groups claim, and is not counted).
fn check_approvers(policy: &Policy, groups: &BTreeMap<String, Vec<String>>) -> anyhow::Result<()> {
    use toolgate_policy::GROUP_PREFIX;
    for rule in policy.rules() {
        let Some(route) = rule.route() else { continue };
        let mut members: HashSet<&str> = HashSet::new();
        let mut open = false;
        for approver in &route.approvers {
            match approver.strip_prefix(GROUP_PREFIX) {
                Some(group) => match groups.get(group) {
                    Some(listed) if listed.is_empty() => {
                        anyhow::bail!("rule `{}`: approvers group `{group}` has no members in [groups]", rule.name())
                    }
                    Some(listed) => members.extend(listed.iter().map(String::as_str)),
                    None => open = true,
                },
                None => {
                    members.insert(approver);
                }
            }
        }
        anyhow::ensure!(
            open || members.len() >= route.quorum as usize,
            "rule `{}`: a quorum of {} needs at least {} approvers, its approvers name {}",
            rule.name(),
            route.quorum,
            route.quorum,
            members.len()
        );
    }
    Ok(())
}

/// The rules of a config file's text (for reloading: its servers are checked but not kept).
pub fn parse_policy(text: &str) -> Result<Policy, String> {
    parse(text).map(|parsed| parsed.policy).map_err(|error| format!("{error:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sections_load_and_unknown_keys_are_named() {
        let Parsed { mcp, policy, admins, groups, .. } = parse(
            r#"
            admins = ["root"]

            [groups]
            finance = ["bob", "carol"]

            [[mcp]]
            name = "fs"
            command = "mcp-server-filesystem"
            args = ["/tmp"]
            tools = ["read_text_file"]

            [[rule]]
            name = "ask-writes"
            action = "ask"
            tool = "fs__write_*"
            "#,
        )
        .unwrap();
        assert_eq!(mcp[0].name, "fs");
        assert!(mcp[0].offers("read_text_file") && !mcp[0].offers("write_file"));
        assert_eq!(policy.rules().len(), 1);
        assert_eq!(admins, ["root"]);
        assert_eq!(groups["finance"], ["bob", "carol"]);
        let routed = |members: &str, quorum: u32| {
            format!(
                "[groups]\nfinance = [{members}]\n[[rule]]\nname = \"big\"\naction = \"ask\"\n\
                 approvers = [\"group:finance\"]\nquorum = {quorum}\n"
            )
        };
        assert!(parse(&routed("\"bob\", \"carol\"", 2)).is_ok());
        let empty = format!("{:#}", parse(&routed("", 1)).unwrap_err());
        assert!(empty.contains("rule `big`") && empty.contains("no members"), "{empty}");
        let short = format!("{:#}", parse(&routed("\"bob\"", 2)).unwrap_err());
        assert!(short.contains("rule `big`") && short.contains("quorum of 2"), "{short}");
        assert!(format!("{:#}", parse("[groups]\n\"a:b\" = []\n").unwrap_err()).contains("not a group name"));
        assert!(format!("{:#}", parse("admins = [\"\"]\n").unwrap_err()).contains("principal is empty"));
        let reserved = format!("{:#}", parse("[groups]\nfinance = [\"group:ops\"]\n").unwrap_err());
        assert!(reserved.contains("`finance`") && reserved.contains("a group"), "{reserved}");
        assert!(parse("admins = [\"link:mail\"]\n").is_err());
        assert!(parse("[groups]\nfinance = [\"bo\\u001fb\"]\n").is_err(), "a control character");

        let error = format!("{:#}", parse("[[rules]]\naction = \"ask\"\n").unwrap_err());
        assert!(error.contains("rules"), "{error}");
        let error = format!("{:#}", parse("[[rule]]\naction = \"maybe\"\n").unwrap_err());
        assert!(error.contains("maybe"), "{error}");
        let error = format!("{:#}", parse("[[mcp]]\nname = \"a\"\ncommand = \"x\"\ncolour = 1\n").unwrap_err());
        assert!(error.contains("colour"), "{error}");
    }

    #[test]
    fn the_calls_table_names_the_default_of_a_tool_no_rule_names() {
        assert_eq!(parse("").unwrap().calls.default, toolgate_server::CallsDefault::Ask);
        assert_eq!(parse("[calls]\ndefault = \"deny\"\n").unwrap().calls.default, toolgate_server::CallsDefault::Deny);
        assert_eq!(
            parse("[calls]\ndefault = \"allow\"\n").unwrap().calls.default,
            toolgate_server::CallsDefault::Allow
        );
        let error = format!("{:#}", parse("[calls]\ndefault = \"maybe\"\n").unwrap_err());
        assert!(error.contains("maybe"), "{error}");
        let error = format!("{:#}", parse("[calls]\nwait = \"1s\"\n").unwrap_err());
        assert!(error.contains("wait"), "{error}");
    }

    #[test]
    fn servers_must_have_distinct_valid_names() {
        let twice = "[[mcp]]\nname = \"fs\"\ncommand = \"a\"\n[[mcp]]\nname = \"fs\"\ncommand = \"b\"\n";
        assert!(format!("{:#}", parse(twice).unwrap_err()).contains("two [[mcp]] servers are named `fs`"));
        let both = "[[mcp]]\nname = \"fs\"\ncommand = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n";
        assert!(parse(both).is_err());
    }

    #[test]
    fn notification_channels_and_escalation_are_checked_with_the_file() {
        let slack = "[emails]\nbob = \"bob@example.com\"\n[[notify]]\nname = \"chat\"\n\
                     webhook = \"https://hooks.example.com/x\"\nformat = \"slack\"\n";
        let parsed = parse(slack).unwrap();
        assert_eq!(parsed.notify.channels[0].name, "chat");
        assert_eq!(parsed.notify.emails["bob"], "bob@example.com");
        let unset = "[[notify]]\nname = \"hook\"\nwebhook = \"https://hooks.example.com/x\"\n\
                     secret_env = \"TOOLGATE_TEST_SURELY_UNSET_SECRET\"\n";
        let error = format!("{:#}", parse(unset).unwrap_err());
        assert!(error.contains("hook") && error.contains("TOOLGATE_TEST_SURELY_UNSET_SECRET"), "{error}");
        let plain = "[[notify]]\nname = \"mail\"\nsmtp = \"smtp://mail.example.com:25\"\ntls = \"none\"\n\
                     from = \"a@example.com\"\nto = [\"approvers\"]\n";
        assert!(format!("{:#}", parse(plain).unwrap_err()).contains("mail"), "plain text to a remote host");
        let escalate = "[[rule]]\nname = \"big\"\naction = \"ask\"\napprovers = [\"bob\"]\n\
                        escalate = [{ after = \"1h\", action = \"deny\" }, { after = \"2h\", to = [\"carol\"] }]\n";
        let error = format!("{:#}", parse(escalate).unwrap_err());
        assert!(error.contains("big") && error.contains("never runs"), "{error}");
    }
}
