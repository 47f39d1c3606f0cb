//! Where a server's tokens are kept between starts ([`TokenFile`]): a file per server and client
//! under the user's cache directory, readable by the user alone and written whole, so a crash
//! mid-write leaves the old tokens rather than half of new ones.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

use crate::authorization::oauth::Client;

/// The file that keeps one server's tokens: `code-runtime/oauth/<key>.json` under
/// `$XDG_CACHE_HOME` (else `~/.cache`), in a directory only the user may enter (0700), written
/// whole (a temporary file renamed over it) with mode 0600. It names the server's URL, and is
/// taken only for that URL.
pub(super) struct TokenFile {
    pub(super) path: PathBuf,
    pub(super) url: String,
}

impl TokenFile {
    /// Where the tokens of `client` at `url` are kept; `None` without a cache directory.
    pub(super) fn path(url: &str, client: &Client) -> Option<PathBuf> {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .filter(|dir| Path::new(dir).is_absolute())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|dir| Path::new(dir).is_absolute())
                    .map(|home| Path::new(&home).join(".cache"))
            })?;
        let who = match client {
            Client::Dynamic { metadata_url } => metadata_url.as_deref().unwrap_or(""),
            Client::Registered { id, .. }
            | Client::SecretCredentials { id, .. }
            | Client::KeyCredentials { id, .. } => id,
        };
        let key = fnv1a(format!("{url}\n{who}").as_bytes());
        Some(cache.join("code-runtime").join("oauth").join(format!("{key:016x}.json")))
    }

    fn failed(&self, what: &str, error: impl std::fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!("{what} {}: {error}", self.path.display()))
    }
}

/// FNV-1a, 64 bits: a stable name for a file, not a secret (the file names its URL inside).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(self.failed("cannot read", error)),
        };
        let kept: serde_json::Value =
            serde_json::from_slice(&text).map_err(|error| self.failed("cannot parse", error))?;
        if kept.get("url").and_then(serde_json::Value::as_str) != Some(self.url.as_str()) {
            return Ok(None);
        }
        let credentials = kept
            .get("credentials")
            .cloned()
            .map(serde_json::from_value::<StoredCredentials>)
            .transpose()
            .map_err(|error| self.failed("cannot parse", error))?;
        Ok(credentials)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let dir = self.path.parent().expect("a token file is in a directory");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| self.failed("cannot create the directory of", error))?;
        let text = serde_json::to_vec_pretty(
            &serde_json::json!({ "url": self.url, "credentials": credentials }),
        )
        .map_err(|error| self.failed("cannot write", error))?;
        let temporary = self.path.with_extension(format!("{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| file.write_all(&text).and_then(|()| file.sync_all()))
            .and_then(|()| std::fs::rename(&temporary, &self.path));
        written.map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            self.failed("cannot write", error)
        })
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(self.failed("cannot remove", error))
            }
            _ => Ok(()),
        }
    }
}
