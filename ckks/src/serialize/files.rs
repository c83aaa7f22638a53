//! Writing files safely: a temporary sibling renamed into place, with the
//! owner-only mode for secret material.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::format::io_error;
use crate::Result;

/// Who may read a file hemem writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileMode {
    /// Public material (evaluation and public keys, ciphertexts): the
    /// process's default mode.
    Shared,
    /// Secret material: readable and writable by the owner only (0600 on
    /// Unix), from the moment the file is created.
    OwnerOnly,
}

/// A temporary name beside `path`.
fn temporary(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Creates `path` through a temporary sibling that `write` fills and that is
/// renamed over `path` once complete, so `path` is never seen half written;
/// on failure the temporary file is removed.
///
/// # Errors
/// [`crate::SerializationError::Io`]; whatever `write` returns.
pub fn write_file(
    path: &Path,
    mode: FileMode,
    write: impl FnOnce(&mut File) -> Result<()>,
) -> Result<()> {
    let tmp = temporary(path);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if mode == FileMode::OwnerOnly {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(&tmp).map_err(|e| io_error(&e))?;
    // Not synced to disk: a crash can leave a damaged file, which loading
    // detects (checksums, end marker).
    let done =
        write(&mut file).and_then(|()| std::fs::rename(&tmp, path).map_err(|e| io_error(&e)));
    if done.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Opens a file for loading.
///
/// # Errors
/// [`crate::SerializationError::Io`].
pub fn open_file(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| io_error(&e))
}
