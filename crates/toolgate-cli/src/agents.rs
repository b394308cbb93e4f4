//! `[[agent]]` tables: sub-agents offered to the root model as tools.
//!
//! ```toml
//! [[agent]]
//! name = "researcher"
//! description = "Looks things up"
//! model = "openai:gpt-4o-mini"          # a --model spec
//! instructions = "You research. Answer in two sentences."
//! tools = ["get_weather", "files__delete"] # tools, MCP tools (`server__tool`) or other agents
//! max_steps = 5                          # optional (default 10)
//!
//! [[agent.rule]]                         # optional: rules added to the file's for this agent's calls
//! tool = "get_weather"
//! action = "ask"
//! ```
//!
//! Checked when the file loads: names are unique and name no other agent,
//! rules compile, and agents that call each other in a circle are an error
//! naming the circle (`a -> b -> a`). When the toolkit is built, every name
//! in `tools` must be a tool there or an agent, and models are built from
//! their specs once, when the command starts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::Context;
use serde::Deserialize;
use toolgate::{Agent, SharedModel, Tool, Toolkit};
use toolgate_policy::{Policy, RuleConfig};

/// One `[[agent]]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The tool name the root model calls it by.
    pub name: String,
    /// What it does, as the calling model reads it.
    #[serde(default)]
    pub description: Option<String>,
    /// Its model, as a `--model` spec.
    pub model: String,
    /// Its system prompt.
    #[serde(default)]
    pub instructions: Option<String>,
    /// The tools it may call: tools of the toolkit, MCP tools or other agents.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Model steps at most per run.
    #[serde(default)]
    pub max_steps: Option<usize>,
    /// Rules added to the file's for its calls.
    #[serde(default)]
    pub rule: Vec<RuleConfig>,
}

/// A checked `[[agent]]` table: its rules compiled.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    /// The table.
    pub config: AgentConfig,
    /// Its own rules (none when it adds none).
    pub policy: Option<Arc<Policy>>,
}

/// Checks the `[[agent]]` tables (see the module docs); returns them in an
/// order where every agent comes after the agents it calls.
pub fn check(agents: Vec<AgentConfig>) -> anyhow::Result<Vec<AgentSpec>> {
    let mut by_name: BTreeMap<String, AgentConfig> = BTreeMap::new();
    for agent in agents {
        anyhow::ensure!(
            !agent.name.is_empty() && agent.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "[[agent]] `{}`: a name is letters, digits, `_` and `-`",
            agent.name
        );
        anyhow::ensure!(agent.max_steps != Some(0), "[[agent]] `{}`: max_steps must be at least 1", agent.name);
        anyhow::ensure!(!agent.model.is_empty(), "[[agent]] `{}`: model is empty", agent.name);
        if let Some(first) = by_name.insert(agent.name.clone(), agent) {
            anyhow::bail!("two [[agent]] tables are named `{}`", first.name);
        }
    }
    let order = call_order(&by_name)?;
    order
        .into_iter()
        .map(|name| {
            let config = by_name.remove(&name).expect("ordered names are the tables'");
            let policy = match config.rule.is_empty() {
                true => None,
                false => Some(Arc::new(
                    Policy::from_rules(config.rule.clone())
                        .with_context(|| format!("[[agent]] `{}`: [[agent.rule]]", config.name))?,
                )),
            };
            Ok(AgentSpec { config, policy })
        })
        .collect()
}

/// The agents in an order where each comes after those it calls, or the first circle found.
fn call_order(agents: &BTreeMap<String, AgentConfig>) -> anyhow::Result<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        name: &str,
        agents: &BTreeMap<String, AgentConfig>,
        marks: &mut HashMap<String, Mark>,
        path: &mut Vec<String>,
        order: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        match marks.get(name) {
            Some(Mark::Done) => return Ok(()),
            Some(Mark::Open) => {
                let start = path.iter().position(|step| step == name).unwrap_or(0);
                let mut circle = path[start..].to_vec();
                circle.push(name.to_owned());
                anyhow::bail!("[[agent]] tables call each other in a circle: {}", circle.join(" -> "));
            }
            None => {}
        }
        marks.insert(name.to_owned(), Mark::Open);
        path.push(name.to_owned());
        for tool in &agents[name].tools {
            if agents.contains_key(tool) {
                visit(tool, agents, marks, path, order)?;
            }
        }
        path.pop();
        marks.insert(name.to_owned(), Mark::Done);
        order.push(name.to_owned());
        Ok(())
    }
    let mut marks = HashMap::new();
    let mut order = Vec::with_capacity(agents.len());
    for name in agents.keys() {
        visit(name, agents, &mut marks, &mut Vec::new(), &mut order)?;
    }
    Ok(order)
}

/// The agents with their models, built once when a command starts.
#[derive(Clone, Default)]
pub struct Agents {
    built: Vec<(AgentSpec, SharedModel)>,
}

impl Agents {
    /// Builds each agent's model from its spec with `model_of`.
    pub fn new(specs: &[AgentSpec], model_of: impl Fn(&str) -> anyhow::Result<SharedModel>) -> anyhow::Result<Self> {
        let built = specs
            .iter()
            .map(|spec| {
                let model = model_of(&spec.config.model)
                    .with_context(|| format!("[[agent]] `{}`: model `{}`", spec.config.name, spec.config.model))?;
                Ok((spec.clone(), model))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self { built })
    }

    /// True when no agent is configured.
    pub fn is_empty(&self) -> bool {
        self.built.is_empty()
    }

    /// The agents as tools over `tools` (the toolkit's other tools, MCP tools among them).
    pub fn tools(&self, tools: &[Tool]) -> anyhow::Result<Vec<Tool>> {
        let mut available: HashMap<&str, Tool> = tools.iter().map(|tool| (tool.name(), tool.clone())).collect();
        let mut agents = Vec::with_capacity(self.built.len());
        for (spec, model) in &self.built {
            let config = &spec.config;
            anyhow::ensure!(
                !tools.iter().any(|tool| tool.name() == config.name),
                "[[agent]] `{}`: a tool of the toolkit has this name",
                config.name
            );
            let own = config
                .tools
                .iter()
                .map(|name| {
                    available.get(name.as_str()).cloned().with_context(|| {
                        format!("[[agent]] `{}`: `tools` names `{name}`, which is no tool and no agent", config.name)
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut agent = Agent::shared(Arc::clone(model));
            if !own.is_empty() {
                agent = agent.toolkit(Toolkit::new(own).with_context(|| format!("[[agent]] `{}`", config.name))?);
            }
            if let Some(instructions) = &config.instructions {
                agent = agent.instructions(instructions.clone());
            }
            if let Some(description) = &config.description {
                agent = agent.description(description.clone());
            }
            if let Some(max_steps) = config.max_steps {
                agent = agent.max_steps(max_steps);
            }
            if let Some(policy) = &spec.policy {
                agent = agent.gate(Arc::clone(policy) as Arc<dyn toolgate::CallGate>);
            }
            let tool = Tool::agent(config.name.clone(), agent);
            available.insert(config.name.as_str(), tool.clone());
            agents.push(tool);
        }
        Ok(agents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(text: &str) -> Vec<AgentConfig> {
        #[derive(Deserialize)]
        struct File {
            agent: Vec<AgentConfig>,
        }
        toml::from_str::<File>(text).unwrap().agent
    }

    #[test]
    fn agents_are_ordered_after_the_agents_they_call() {
        let specs = check(tables(
            r#"
            [[agent]]
            name = "boss"
            model = "script:x.json"
            tools = ["helper", "get_weather"]
            [[agent]]
            name = "helper"
            model = "script:x.json"
            tools = ["get_weather"]
            [[agent.rule]]
            tool = "get_weather"
            action = "ask"
            "#,
        ))
        .unwrap();
        let names: Vec<&str> = specs.iter().map(|spec| spec.config.name.as_str()).collect();
        assert_eq!(names, ["helper", "boss"]);
        assert!(specs[0].policy.is_some() && specs[1].policy.is_none());
    }

    #[test]
    fn a_circle_of_agents_is_an_error_naming_it() {
        let error = check(tables(
            r#"
            [[agent]]
            name = "a"
            model = "script:x.json"
            tools = ["b"]
            [[agent]]
            name = "b"
            model = "script:x.json"
            tools = ["c"]
            [[agent]]
            name = "c"
            model = "script:x.json"
            tools = ["a"]
            "#,
        ))
        .unwrap_err();
        assert_eq!(error.to_string(), "[[agent]] tables call each other in a circle: a -> b -> c -> a");
        let own = check(tables("[[agent]]\nname = \"self\"\nmodel = \"script:x\"\ntools = [\"self\"]\n")).unwrap_err();
        assert_eq!(own.to_string(), "[[agent]] tables call each other in a circle: self -> self");
    }

    #[test]
    fn bad_tables_are_named() {
        let twice =
            check(tables("[[agent]]\nname = \"a\"\nmodel = \"m:x\"\n[[agent]]\nname = \"a\"\nmodel = \"m:x\"\n"));
        assert_eq!(twice.unwrap_err().to_string(), "two [[agent]] tables are named `a`");
        let zero = check(tables("[[agent]]\nname = \"a\"\nmodel = \"m:x\"\nmax_steps = 0\n"));
        assert_eq!(zero.unwrap_err().to_string(), "[[agent]] `a`: max_steps must be at least 1");
        let unknown = toml::from_str::<toml::Value>("[[agent]]\nname = \"a\"\nmodel = \"m:x\"\nmodle = 1\n")
            .map(|value| value["agent"].clone().try_into::<Vec<AgentConfig>>());
        assert!(unknown.unwrap().unwrap_err().to_string().contains("unknown field `modle`"));
    }

    #[test]
    fn an_unknown_tool_name_is_named_when_the_toolkit_is_built() {
        let specs = check(tables("[[agent]]\nname = \"a\"\nmodel = \"m:x\"\ntools = [\"nope\"]\n")).unwrap();
        let model: SharedModel = Arc::new(toolgate::ScriptedModel::from_json(r#"{"turns": [[]]}"#).unwrap());
        let agents = Agents::new(&specs, |_| Ok(Arc::clone(&model))).unwrap();
        let error = agents.tools(toolgate::demo::toolkit().tools()).unwrap_err();
        assert_eq!(error.to_string(), "[[agent]] `a`: `tools` names `nope`, which is no tool and no agent");
        let specs = check(tables("[[agent]]\nname = \"b\"\nmodel = \"m:x\"\ntools = [\"get_weather\"]\n")).unwrap();
        let agents = Agents::new(&specs, |_| Ok(Arc::clone(&model))).unwrap();
        let tools = agents.tools(toolgate::demo::toolkit().tools()).unwrap();
        assert!(tools[0].is_agent() && tools[0].name() == "b");
    }
}
