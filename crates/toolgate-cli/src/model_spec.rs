//! Parsing `--model` values into models.
//!
//! | spec | model | environment |
//! |---|---|---|
//! | `script:FILE` | a [`ScriptedModel`] script | |
//! | `openai:MODEL` | OpenAI Chat Completions | `OPENAI_API_KEY` (required), `OPENAI_BASE_URL`, `OPENAI_ORGANIZATION`, `OPENAI_PROJECT` |
//! | `openai-responses:MODEL` | OpenAI Responses API (hosted MCP approvals) | as `openai:` |
//! | `anthropic:MODEL` | Anthropic Messages | `ANTHROPIC_API_KEY` (required), `ANTHROPIC_BASE_URL` |
//! | `openai-compatible:URL#MODEL` | an OpenAI-compatible server (llama.cpp, Ollama, vLLM) at `URL` | `OPENAI_COMPATIBLE_API_KEY` (optional) |
//! | `local:PATH` | a GGUF file run in this process on the CPU (the `local` feature) | |
//!
//! Without `--model`, the default local model (`toolgate model pull`) is used.

use std::sync::Arc;

use anyhow::{Context, bail};
use toolgate::{ScriptedModel, SharedModel};
use toolgate_anthropic::{AnthropicConfig, AnthropicModel};
use toolgate_openai::{OpenAiChatModel, OpenAiConfig, OpenAiResponsesModel};

const SUPPORTED: &str = "script, openai, openai-responses, anthropic, openai-compatible, local";

/// The model of `--model`, or the default local model when it is not given.
pub fn model_or_default(spec: Option<&str>) -> anyhow::Result<SharedModel> {
    match spec {
        Some(spec) => model_from_spec(spec),
        None => default_model(),
    }
}

/// The default local model, or an error that says how to get it.
#[cfg(feature = "local")]
fn default_model() -> anyhow::Result<SharedModel> {
    let path = toolgate_local::pull::default_model_path();
    if !path.is_file() {
        bail!("{}", toolgate_local::pull::missing_model_help());
    }
    Ok(Arc::new(toolgate_local::LocalModel::load(&path).with_context(|| format!("default model {}", path.display()))?))
}

#[cfg(not(feature = "local"))]
fn default_model() -> anyhow::Result<SharedModel> {
    bail!("--model is required: this toolgate was built without the `local` feature, so it has no default model")
}

/// Builds the model a `--model` value names (see the module docs), reading
/// keys from the environment.
pub fn model_from_spec(spec: &str) -> anyhow::Result<SharedModel> {
    model_from_spec_with(spec, |name| std::env::var(name).ok())
}

/// [`model_from_spec`] with a custom environment lookup.
pub fn model_from_spec_with(spec: &str, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<SharedModel> {
    let Some((provider, rest)) = spec.split_once(':') else {
        bail!(
            "--model must look like PROVIDER:MODEL (for example openai:gpt-4o-mini or \
             script:examples/request-approval/script.json), got `{spec}`; supported providers: {SUPPORTED}"
        );
    };
    let context = || format!("--model {spec}");
    let model_name = || -> anyhow::Result<&str> {
        if rest.trim().is_empty() {
            bail!("--model {spec} names no model; write {provider}:MODEL");
        }
        Ok(rest)
    };
    Ok(match provider {
        "script" => Arc::new(ScriptedModel::from_file(rest).with_context(context)?),
        "openai" => {
            let config = OpenAiConfig::from_lookup(&env).with_context(context)?;
            Arc::new(OpenAiChatModel::new(config, model_name()?).with_context(context)?)
        }
        "openai-responses" => {
            let config = OpenAiConfig::from_lookup(&env).with_context(context)?;
            Arc::new(OpenAiResponsesModel::new(config, model_name()?).with_context(context)?)
        }
        "anthropic" => {
            let config = AnthropicConfig::from_lookup(&env).with_context(context)?;
            Arc::new(AnthropicModel::new(config, model_name()?).with_context(context)?)
        }
        "openai-compatible" => {
            let Some((url, model)) = rest.rsplit_once('#').filter(|(url, model)| !url.is_empty() && !model.is_empty())
            else {
                bail!(
                    "--model {spec}: write openai-compatible:URL#MODEL, e.g. openai-compatible:http://127.0.0.1:8080/v1#qwen2.5"
                );
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("--model {spec}: the server URL must start with http:// or https://, got `{url}`");
            }
            let mut config = OpenAiConfig::compatible(url);
            if let Some(key) = env("OPENAI_COMPATIBLE_API_KEY").filter(|key| !key.is_empty()) {
                config = config.api_key(key);
            }
            Arc::new(OpenAiChatModel::new(config, model).with_context(context)?)
        }
        #[cfg(feature = "local")]
        "local" => Arc::new(toolgate_local::LocalModel::load(model_name()?).with_context(context)?),
        #[cfg(not(feature = "local"))]
        "local" => bail!("--model {spec}: this toolgate was built without the `local` feature"),
        other => bail!("unknown model provider `{other}` in --model {spec}; supported: {SUPPORTED}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
    }

    fn error(spec: &str, pairs: &'static [(&'static str, &'static str)]) -> String {
        format!("{:#}", model_from_spec_with(spec, env(pairs)).err().expect("the spec is rejected"))
    }

    #[test]
    fn providers_are_built_from_their_specs() {
        let keys = &[("OPENAI_API_KEY", "sk-test"), ("ANTHROPIC_API_KEY", "sk-ant-test")];
        let cases = [
            ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
            ("openai-responses:gpt-5-mini", "openai", "gpt-5-mini"),
            ("anthropic:claude-haiku-4-5", "anthropic", "claude-haiku-4-5"),
            ("openai-compatible:http://127.0.0.1:8080/v1#qwen2.5:0.5b", "openai-compatible", "qwen2.5:0.5b"),
        ];
        for (spec, provider, model_id) in cases {
            let model = model_from_spec_with(spec, env(keys)).unwrap();
            assert_eq!((model.provider(), model.model_id()), (provider, model_id), "{spec}");
        }
        let local = model_from_spec_with("openai-compatible:https://vllm.internal/v1#m", env(&[])).unwrap();
        assert_eq!(local.provider(), "openai-compatible");
    }

    #[test]
    fn missing_keys_name_the_variable() {
        assert!(error("openai:gpt-4o-mini", &[]).contains("OPENAI_API_KEY"));
        assert!(error("openai-responses:gpt-5-mini", &[]).contains("OPENAI_API_KEY"));
        assert!(error("anthropic:claude-haiku-4-5", &[]).contains("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn malformed_specs_say_what_to_write() {
        assert!(error("gpt-4o-mini", &[]).contains("PROVIDER:MODEL"));
        assert!(error("mistral:large", &[]).contains("unknown model provider `mistral`"));
        assert!(error("openai:", &[("OPENAI_API_KEY", "k")]).contains("names no model"));
        assert!(error("openai-compatible:http://127.0.0.1:8080/v1", &[]).contains("URL#MODEL"));
        assert!(error("openai-compatible:127.0.0.1:8080#m", &[]).contains("http://"));
        assert!(error("script:does/not/exist.json", &[]).contains("--model script:does/not/exist.json"));
        assert!(error("local:", &[]).contains("names no model"));
        #[cfg(feature = "local")]
        assert!(error("local:does/not/exist.gguf", &[]).contains("no model file at does/not/exist.gguf"));
    }

    #[test]
    fn scripts_still_load() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/request-approval/script.json");
        let model = model_from_spec_with(&format!("script:{path}"), env(&[])).unwrap();
        assert_eq!(model.provider(), "script");
    }
}
