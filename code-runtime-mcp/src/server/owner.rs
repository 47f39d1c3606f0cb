//! Whose a session is: `run_code`'s `session` names a session of the client that calls it, so
//! another client naming the same session gets a fresh, separate one (docs/sessions.md).

use std::sync::OnceLock;

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use sha2::{Digest, Sha256};

/// The owner of the sessions a client's `run_code` names: over HTTP, its MCP session id and
/// bearer token (hashed: the owner is stored beside the session); over stdio, this process (a
/// random number of its own) and the client's session number in it.
pub(super) fn owner(context: &RequestContext<RoleServer>, session: u64) -> String {
    let mut hash = Sha256::new();
    hash.update(process_nonce());
    hash.update(session.to_be_bytes());
    if let Some(parts) = context.extensions.get::<http::request::Parts>() {
        for name in ["mcp-session-id", "authorization"] {
            let value = parts.headers.get(name).map_or(&[][..], |value| value.as_bytes());
            hash.update((value.len() as u64).to_be_bytes());
            hash.update(value);
        }
    }
    let digest = hash.finalize();
    format!("mcp:{}", digest[..16].iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

/// A random number of this process's, so two gateways (replicas sharing a session directory)
/// never give two clients one owner.
fn process_nonce() -> &'static [u8; 16] {
    static NONCE: OnceLock<[u8; 16]> = OnceLock::new();
    NONCE.get_or_init(|| {
        let mut nonce = [0u8; 16];
        if getrandom::fill(&mut nonce).is_err() {
            // No random source: the process id and the clock still set this process apart.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos());
            nonce[..8].copy_from_slice(&u64::from(std::process::id()).to_be_bytes());
            nonce[8..].copy_from_slice(&(now as u64).to_be_bytes());
        }
        nonce
    })
}
