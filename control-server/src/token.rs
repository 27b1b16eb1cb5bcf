//! Where the bearer token comes from: `SHEAFALLOC_CONTROL_TOKEN`, or a file
//! named by `SHEAFALLOC_CONTROL_TOKEN_FILE` (never both), and whether reads
//! need it too (`SHEAFALLOC_CONTROL_TOKEN_READS`).
//!
//! # The token file
//!
//! A token in the environment is visible to anything that can read the
//! process's environment (`/proc/<pid>/environ` for the same user, crash
//! reports, child processes). A file can be kept from everyone but its
//! owner, so the file is refused unless it is a regular file whose mode
//! gives nothing to group or others (`0600`, `0400`). The mode is read from
//! the opened file, not from the path, so the file checked is the file read.
//! Surrounding whitespace (the final newline an editor adds) is not part of
//! the token; an empty token is refused.
//!
//! Nothing here is checked again after start: replacing the file takes
//! effect at the next start.

use std::io::Read;
use std::path::Path;

use crate::config::{ConfigError, TOKEN_ENV, TOKEN_FILE_ENV, TOKEN_READS_ENV};

/// Largest token file read (a token is a few dozen bytes).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The token from the environment, if one is set: the variable or the file.
pub(crate) fn token_from_env() -> Result<Option<String>, ConfigError> {
    let variable = std::env::var_os(TOKEN_ENV).filter(|value| !value.is_empty());
    let file = std::env::var_os(TOKEN_FILE_ENV).filter(|value| !value.is_empty());
    match (variable, file) {
        (Some(_), Some(_)) => Err(ConfigError::TwoTokens),
        (Some(token), None) => Ok(Some(token.to_string_lossy().into_owned())),
        (None, Some(path)) => read_token_file(Path::new(&path)).map(Some),
        (None, None) => Ok(None),
    }
}

/// Whether `SHEAFALLOC_CONTROL_TOKEN_READS` asks for the token on reads.
pub(crate) fn reads_need_token_from_env() -> Result<bool, ConfigError> {
    let Some(value) = std::env::var_os(TOKEN_READS_ENV) else {
        return Ok(false);
    };
    let value = value.to_string_lossy();
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" => Ok(false),
        "1" | "true" | "yes" | "on" => Ok(true),
        _ => Err(ConfigError::BadValue {
            variable: TOKEN_READS_ENV,
            value: value.into_owned(),
            expected: "1, true, yes, on (protect reads) or 0, false, no, off",
        }),
    }
}

/// Reads and checks a token file (see the module docs).
pub fn read_token_file(path: &Path) -> Result<String, ConfigError> {
    let refuse = |reason: String| ConfigError::TokenFile {
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|error| refuse(error.to_string()))?;
    let metadata = file.metadata().map_err(|error| refuse(error.to_string()))?;
    if !metadata.is_file() {
        return Err(refuse("not a regular file".to_owned()));
    }
    check_mode(path, &metadata)?;
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| refuse(format!("cannot read it as text: {error}")))?;
    if text.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(refuse(format!(
            "larger than {MAX_TOKEN_FILE_BYTES} bytes; it should hold only the token"
        )));
    }
    let token = text.trim();
    if token.is_empty() {
        return Err(refuse("the file is empty".to_owned()));
    }
    Ok(token.to_owned())
}

#[cfg(unix)]
fn check_mode(path: &Path, metadata: &std::fs::Metadata) -> Result<(), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(ConfigError::TokenFileReadableByOthers {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_mode(_path: &Path, _metadata: &std::fs::Metadata) -> Result<(), ConfigError> {
    // No owner-only mode bits to check here.
    Ok(())
}

/// Whether a client can send `token` in `Authorization: Bearer <token>`:
/// visible ASCII only.
pub(crate) fn is_sendable(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|byte| byte.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A file in a fresh directory of its own, removed at drop.
    struct TempFile {
        dir: std::path::PathBuf,
        path: std::path::PathBuf,
    }

    impl TempFile {
        fn new(name: &str, contents: &str, mode: u32) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("sheafalloc-token-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("token");
            std::fs::write(&path, contents).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            Self { dir, path }
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn an_owner_only_file_gives_its_trimmed_token() {
        let file = TempFile::new("ok", "s3cret-token\n", 0o600);
        assert_eq!(read_token_file(&file.path).unwrap(), "s3cret-token");
        let read_only = TempFile::new("ro", "  t0k  \r\n", 0o400);
        assert_eq!(read_token_file(&read_only.path).unwrap(), "t0k");
    }

    #[test]
    fn a_file_others_may_read_is_refused() {
        for mode in [0o640, 0o604, 0o644, 0o660, 0o666, 0o620] {
            let file = TempFile::new(&format!("mode{mode:o}"), "s3cret\n", mode);
            let error = read_token_file(&file.path).unwrap_err();
            assert_eq!(
                error,
                ConfigError::TokenFileReadableByOthers {
                    path: file.path.clone(),
                    mode
                }
            );
            let message = error.to_string();
            assert!(message.contains("chmod 600"), "{message}");
            assert!(message.contains(&format!("{mode:04o}")), "{message}");
        }
    }

    #[test]
    fn missing_empty_and_odd_files_are_refused_with_the_reason() {
        let missing = std::path::Path::new("/nonexistent/sheafalloc/token");
        let error = read_token_file(missing).unwrap_err();
        assert!(
            matches!(&error, ConfigError::TokenFile { path, .. } if path == missing),
            "{error}"
        );
        assert!(error.to_string().contains(TOKEN_FILE_ENV), "{error}");
        let empty = TempFile::new("empty", " \n", 0o600);
        assert!(read_token_file(&empty.path)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let directory = TempFile::new("dir", "x", 0o600);
        let error = read_token_file(&directory.dir).unwrap_err();
        assert!(error.to_string().contains("regular file"), "{error}");
        let huge = TempFile::new("huge", &"x".repeat(5000), 0o600);
        assert!(read_token_file(&huge.path)
            .unwrap_err()
            .to_string()
            .contains("larger"));
    }

    #[test]
    fn sendable_tokens_are_visible_ascii() {
        assert!(is_sendable("abc-DEF_123.~+/="));
        assert!(!is_sendable(""));
        assert!(!is_sendable("a b"));
        assert!(!is_sendable("a\u{e9}"));
        assert!(!is_sendable("a\n"));
    }
}
