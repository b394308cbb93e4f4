//! Parsing `--model` values into models.

use anyhow::{Context, bail};
use toolgate::{ScriptedModel, SharedModel};

/// Builds the model a `--model` value names. Supported: `script:FILE`.
pub fn model_from_spec(spec: &str) -> anyhow::Result<SharedModel> {
    let Some((provider, rest)) = spec.split_once(':') else {
        bail!(
            "--model must look like PROVIDER:MODEL (for example script:examples/request-approval/script.json), got `{spec}`"
        );
    };
    match provider {
        "script" => {
            let model = ScriptedModel::from_file(rest).with_context(|| format!("--model {spec}"))?;
            Ok(std::sync::Arc::new(model))
        }
        other => bail!("unknown model provider `{other}` in --model {spec}; supported: script"),
    }
}
