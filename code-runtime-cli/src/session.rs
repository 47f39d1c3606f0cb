//! `code-runtime session list|show|drop` and `run --session`: the sessions of this user, kept as
//! signed files in a directory (docs/sessions.md), by default under the user's cache directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use code_runtime::{DirectorySessionStore, SessionId, SessionStore, Sessions, json};

use crate::Failure;
use crate::approvals::{self, Access};

/// `--session NAME [--session-dir DIR]`, `run`'s.
#[derive(Debug, clap::Args)]
pub(crate) struct SessionFlags {
    /// Run in session NAME: the definitions and values the session's previous run left are
    /// restored before the program, and what it leaves carries to the next run; the result says
    /// "session": {"name", "run", "restored", "kept", "dropped", "bytes", "expiresInMs"}
    #[arg(long, value_name = "NAME")]
    session: Option<String>,
    #[command(flatten)]
    dir: SessionDir,
}

/// `--session-dir DIR`.
#[derive(Debug, clap::Args)]
pub(crate) struct SessionDir {
    /// Where sessions are kept, as files signed with the checkpoint key [default: the user's
    /// cache directory's code-runtime/sessions]
    #[arg(long, value_name = "DIR")]
    session_dir: Option<PathBuf>,
}

/// `code-runtime session`'s commands.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// The sessions kept, most recently used first: one JSON array of {"name", "language", "run",
    /// "bytes", "names", "expiresInMs"}.
    List {
        #[command(flatten)]
        dir: SessionDir,
        /// The hex key the files are signed with [default: as run's]
        #[arg(long, value_name = "FILE")]
        checkpoint_key: Option<PathBuf>,
    },
    /// One session: {"name", "language", "run", "bytes", "kept": [{"name", "type", "bytes"}],
    /// "expiresInMs"}.
    Show {
        /// The session's name.
        name: String,
        #[command(flatten)]
        dir: SessionDir,
        /// The hex key the files are signed with [default: as run's]
        #[arg(long, value_name = "FILE")]
        checkpoint_key: Option<PathBuf>,
    },
    /// Forgets a session (a forged or damaged one too).
    Drop {
        /// The session's name.
        name: String,
        #[command(flatten)]
        dir: SessionDir,
        /// The hex key the files are signed with [default: as run's]
        #[arg(long, value_name = "FILE")]
        checkpoint_key: Option<PathBuf>,
    },
}

impl SessionFlags {
    /// The session a run names and where it is kept; `None` without `--session`.
    pub(crate) fn open(
        &self,
        key_file: Option<&Path>,
    ) -> Result<Option<(SessionId, Sessions)>, Failure> {
        let Some(name) = &self.session else {
            if self.dir.session_dir.is_some() {
                return Err(Failure::Misuse("--session-dir needs --session NAME".to_owned()));
            }
            return Ok(None);
        };
        self.dir.open(name, key_file).map(Some)
    }
}

impl SessionDir {
    /// Session `name` in this directory.
    pub(crate) fn open(
        &self,
        name: &str,
        key_file: Option<&Path>,
    ) -> Result<(SessionId, Sessions), Failure> {
        let store = store(self.session_dir.as_deref(), key_file)?;
        Ok((SessionId::new(name), Sessions::new(store)))
    }
}

/// The store in `dir` (default: the user's cache directory), signed with the checkpoint key.
fn store(dir: Option<&Path>, key_file: Option<&Path>) -> Result<DirectorySessionStore, Failure> {
    let dir = match dir {
        Some(dir) => {
            // Another user who may write the directory may remove or replace the sessions.
            if let Ok(metadata) = std::fs::metadata(dir) {
                approvals::closed_to_others(&metadata, Access::Write).map_err(|why| {
                    Failure::Misuse(format!("--session-dir {}: {why}", dir.display()))
                })?;
            }
            dir.to_owned()
        }
        None => code_runtime_sandbox::cache::user_dir()
            .ok_or_else(|| {
                Failure::Internal(
                    "no cache directory to keep sessions in: give --session-dir".into(),
                )
            })?
            .join("sessions"),
    };
    let key = approvals::checkpoint_key(key_file)?;
    DirectorySessionStore::open(&dir, key).map_err(|error| Failure::Misuse(error.to_string()))
}

pub(crate) fn main(args: Args) -> Result<ExitCode, Failure> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::Internal(format!("cannot start tokio: {error}")))?;
    let failed = |error: code_runtime::SessionError| Failure::Internal(error.to_string());
    match args.command {
        Command::List { dir, checkpoint_key } => {
            let store = store(dir.session_dir.as_deref(), checkpoint_key.as_deref())?;
            let sessions = tokio.block_on(store.list()).map_err(failed)?;
            let listed: Vec<_> = sessions
                .into_iter()
                .map(|session| {
                    json!({
                        "name": session.name,
                        "language": session.language,
                        "run": session.run,
                        "bytes": session.bytes,
                        "names": session.names,
                        "expiresInMs": session.expires_in_ms,
                    })
                })
                .collect();
            crate::print_stdout(&json::encode(&listed.into_iter().collect()));
        }
        Command::Show { name, dir, checkpoint_key } => {
            let store = store(dir.session_dir.as_deref(), checkpoint_key.as_deref())?;
            let id = SessionId::new(name.clone());
            // Looking does not consume an expired session, as a run would.
            let state = match store.peek(&id).map_err(failed)? {
                Some(state) if !state.expired_at(now_ms()) => state,
                Some(_) => return Err(Failure::Misuse(format!("session {name:?} expired"))),
                None => return Err(Failure::Misuse(format!("no session {name:?}"))),
            };
            let definitions = state.definitions.iter().flat_map(|definition| {
                definition.names.iter().map(|name| {
                    json!({"name": name, "type": definition.kind, "bytes": definition.source.len()})
                })
            });
            let values = state.values.iter().map(|value| {
                json!({"name": value.name, "type": value.type_name, "bytes": value.bytes.len()})
            });
            let shown = json!({
                "name": name,
                "language": state.language,
                "run": state.run,
                "bytes": state.bytes(),
                "kept": definitions.chain(values).collect::<json::JsonValue>(),
                "expiresInMs": state.expires_in_ms(now_ms()),
            });
            crate::print_stdout(&json::encode(&shown));
        }
        Command::Drop { name, dir, checkpoint_key } => {
            let store = store(dir.session_dir.as_deref(), checkpoint_key.as_deref())?;
            if !tokio.block_on(store.remove(&SessionId::new(name.clone()))).map_err(failed)? {
                return Err(Failure::Misuse(format!("no session {name:?}")));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}
