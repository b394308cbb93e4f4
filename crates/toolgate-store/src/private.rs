//! The SQLite file and its directory are private to the user running the server.
//!
//! The store holds every conversation and the audit log. Its directory is
//! created mode 0700 and the database file 0600 before SQLite opens it;
//! SQLite gives the `-wal` and `-shm` files it creates the mode of the
//! database file, so they are 0600 too. A directory or file that already
//! exists keeps its mode (the operator may have chosen it), but one that
//! other users can read is reported with a warning that names it and the fix.

use std::path::Path;

use crate::OpenError;

/// Creates `path`'s directory (0700, with any missing parents) and the empty
/// file (0600) when missing, and warns about what other users can read.
pub(crate) fn prepare(path: &Path) -> Result<(), OpenError> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        create_dir(dir).map_err(|source| OpenError::CreateDir { path: dir.to_path_buf(), source })?;
        warn_if_readable(dir, "the data directory", "700");
    }
    create_file(path).map_err(|source| OpenError::CreateFile { path: path.to_path_buf(), source })?;
    warn_if_readable(path, "the store file", "600");
    for companion in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(companion);
        warn_if_readable(Path::new(&name), "the store file", "600");
    }
    Ok(())
}

#[cfg(unix)]
fn create_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn create_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(not(unix))]
fn create_file(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Warns when `path` exists and its group or other users may read it.
#[cfg(unix)]
fn warn_if_readable(path: &Path, what: &str, mode: &str) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else { return };
    if meta.permissions().mode() & 0o044 != 0 {
        tracing::warn!(
            path = %path.display(),
            "{what} {} can be read by other users of this machine (mode {:o}): run `chmod {mode} {}`",
            path.display(),
            meta.permissions().mode() & 0o777,
            path.display(),
        );
    }
}

#[cfg(not(unix))]
fn warn_if_readable(_path: &Path, _what: &str, _mode: &str) {}
