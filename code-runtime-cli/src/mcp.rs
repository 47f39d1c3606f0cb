//! `code-runtime mcp`: the gateway of `code_runtime_mcp` (docs/design.md §12) on the command line:
//! its flags, its providers (warm: a server runs many programs), and the signals that end it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use code_runtime_mcp::{Control, Error, McpConfig, Options, Transport};

use crate::Failure;

/// `code-runtime mcp`'s options (docs/cli.md).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// JSON {"servers": {"ns": {"command": [..], "env": {..}} | {"url": "..", "headers": {..}}},
    /// "mcpServers": {as MCP clients write it}, "bindings", "languages", "limits",
    /// "approvalFallback"}: each upstream MCP server's tools become the namespace "ns"; ${VAR}
    /// in env and headers comes from the environment; a server may add "approval": "none" |
    /// "destructive" (the default) | "all" | [names or globs], the tools whose calls the
    /// client's user approves.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (a loopback address such as
    /// 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR", value_parser = address)]
    http: Option<SocketAddr>,
    /// One JSON line per binding call, as for `run`.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// The record file's bound [default: 1073741824]; a full file is renamed FILE.1 (replacing
    /// the one there) and a fresh FILE started, once per run: a run that would make it rotate
    /// twice (erasing other runs' lines) ends as output-limit.
    #[arg(long, value_name = "N", value_parser = crate::count, allow_hyphen_values = true)]
    record_max_bytes: Option<u64>,
    /// With --http: a request to /mcp or /metrics without `Authorization: Bearer <the file's
    /// token>` is refused 401 (/healthz stays open).
    #[arg(long, value_name = "FILE")]
    auth_token_file: Option<PathBuf>,
    /// The key paused runs' checkpoints are signed with (hex, as for `run`; readable by no other
    /// user), for a config with "approvalFallback": "pause" [default:
    /// $CODE_RUNTIME_CHECKPOINT_KEY, else this user's kept key]. Replicas share one key; it
    /// needs --spent-checkpoints.
    #[arg(long, value_name = "FILE")]
    checkpoint_key: Option<PathBuf>,
    /// Where resumed checkpoints are marked spent, so each resumes once [default: this user's
    /// cache directory]. Replicas share one directory (a shared volume), writable by no other
    /// user.
    #[arg(long, value_name = "DIR")]
    spent_checkpoints: Option<PathBuf>,
    /// At most N runs at once; more wait their turn [default: no cap].
    #[arg(long, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    max_concurrent_runs: Option<usize>,
}

/// Where, in `--spent-checkpoints`' directory, paused runs' checkpoints too large to send back
/// are kept (`code_runtime_mcp::KeptFiles`); not a signature, so never a spent mark's name.
const KEPT_DIR: &str = "kept";

/// `--spent-checkpoints`' directory, made (for this user alone) if it is not there, refused
/// now if it cannot be written rather than at the first resume.
fn usable_dir(dir: PathBuf) -> Result<PathBuf, Failure> {
    use std::os::unix::fs::DirBuilderExt as _;
    let unusable =
        |why: String| Failure::Misuse(format!("--spent-checkpoints {}: {why}", dir.display()));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|error| unusable(error.to_string()))?;
    // Another user who can write it can delete a marker, and an approved call runs again.
    let metadata = std::fs::metadata(&dir).map_err(|error| unusable(error.to_string()))?;
    crate::approvals::closed_to_others(&metadata, crate::approvals::Access::Write)
        .map_err(unusable)?;
    // Made and removed at once: the directory takes a new file, as a resume needs.
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(|error| unusable(format!("not writable: {error}")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(dir)
}

/// What the gateway keeps of paused runs: the key that signs their checkpoints, where resumed
/// ones are marked spent, and where those too large to send back are kept.
type Checkpoints = (
    Option<code_runtime::CheckpointKey>,
    Option<Arc<dyn code_runtime::SpentCheckpoints>>,
    Option<Arc<dyn code_runtime_mcp::KeptCheckpoints>>,
);

/// [`Checkpoints`] from the command line and the environment, each refused now if unusable.
fn checkpoints(args: &Args, config: &McpConfig) -> Result<Checkpoints, Failure> {
    // A server that pauses runs signs their checkpoints; any replica with the same key
    // (`$CODE_RUNTIME_CHECKPOINT_KEY`) resumes them.
    // The key file is read (and refused if unusable) whether or not the config pauses, so a
    // replica's mistake shows at its start, not at the first paused run of another config.
    let key_file = args.checkpoint_key.as_deref();
    let checkpoint_key = if config.pauses() || key_file.is_some() {
        Some(crate::approvals::checkpoint_key(key_file)?)
    } else {
        None
    };
    // A key given by file or by the environment is one that replicas share: a checkpoint signed
    // with it resumes on any of them, and once across them only if they share where it is
    // marked spent. (The kept key is this user's, beside this user's spent checkpoints.)
    let shared_key = match key_file {
        Some(_) => Some("--checkpoint-key"),
        None if config.pauses() && std::env::var_os(crate::approvals::KEY_VARIABLE).is_some() => {
            Some("$CODE_RUNTIME_CHECKPOINT_KEY")
        }
        None => None,
    };
    if let (Some(given), None) = (shared_key, &args.spent_checkpoints) {
        return Err(Failure::Misuse(format!(
            "{given} needs --spent-checkpoints DIR: replicas that share a key must share where \
             checkpoints are marked spent, or each would resume a checkpoint once"
        )));
    }
    // Checkpoints too large to send back are kept beside the spent ones: where replicas share
    // them, they share these.
    let (spent_checkpoints, kept) = match args.spent_checkpoints.clone() {
        Some(dir) => {
            let dir = usable_dir(dir)?;
            (Some(crate::approvals::spent_checkpoints_in(dir.clone())), Some(dir.join(KEPT_DIR)))
        }
        None => (
            crate::approvals::spent_checkpoints(),
            code_runtime_sandbox::cache::user_dir().map(|dir| dir.join("kept-checkpoints")),
        ),
    };
    let kept_checkpoints = kept.map(|dir| {
        Arc::new(code_runtime_mcp::KeptFiles::new(dir))
            as Arc<dyn code_runtime_mcp::KeptCheckpoints>
    });
    Ok((checkpoint_key, spent_checkpoints, kept_checkpoints))
}

/// `--max-concurrent-runs`' value.
fn positive(text: &str) -> Result<usize, String> {
    text.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("needs a positive integer, got {text}"))
}

/// `--http`'s value.
fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| format!("needs an address such as 127.0.0.1:8080, got {text}"))
}

/// The token of `--auth-token-file`: the file's text without surrounding whitespace.
fn auth_token(path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read --auth-token-file {}: {error}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Failure::Misuse(format!("--auth-token-file {} is empty", path.display())));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Failure::Misuse(format!(
            "--auth-token-file {}: a token is one word (no spaces or control characters)",
            path.display()
        )));
    }
    Ok(token.to_owned())
}

pub(crate) fn main(args: Args) -> Result<ExitCode, Failure> {
    let path = args.config.clone().ok_or("mcp needs --config FILE")?;
    let config = McpConfig::load(&path)?;
    if args.auth_token_file.is_some() && args.http.is_none() {
        return Err(Failure::Misuse(
            "--auth-token-file needs --http ADDR (over stdio the client started the server)".into(),
        ));
    }
    let token = args.auth_token_file.as_deref().map(auth_token).transpose()?;
    let transport = match args.http {
        Some(address) => Transport::Http { address, token },
        None => Transport::Stdio,
    };
    // Every run of every client shares the record: a full file is moved aside, never left full.
    let rotation = code_runtime_fixtures::Rotation::Rotate;
    let recorder = crate::run::recorder(args.record.as_deref(), args.record_max_bytes, rotation)?;
    let (checkpoint_key, spent_checkpoints, kept_checkpoints) = checkpoints(&args, &config)?;
    let options = Options {
        recorder,
        max_concurrent_runs: args.max_concurrent_runs,
        checkpoint_key,
        spent_checkpoints,
        kept_checkpoints,
    };
    let mut providers = Vec::new();
    for spec in config.provider_specs() {
        match crate::run::build(&spec) {
            Ok(built) => providers.push(built),
            Err(failure) => {
                dispose(providers);
                return Err(failure);
            }
        }
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::Internal(format!("cannot start tokio: {error}")))?;
    let control = Control::new();
    let served = tokio.block_on(async {
        let signals = tokio::spawn(on_signals(control.clone()));
        let served = code_runtime_mcp::serve(config, providers, options, transport, control).await;
        signals.abort();
        served
    });
    match served {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(Error::Invalid(why)) => Err(Failure::Misuse(why)),
        Err(error) => Err(Failure::Internal(error.to_string())),
    }
}

/// Disposes providers built before one failed to build.
fn dispose(providers: Vec<code_runtime_providers::Built>) {
    if let Ok(tokio) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
        tokio.block_on(async {
            for built in providers {
                built.runtime.dispose().await;
            }
        });
    }
}

/// SIGINT stops at once (runs in flight end as `abort`). SIGTERM drains (over HTTP: no new
/// runs, `/healthz` says 503, the runs in flight end as they would, then the server stops); a
/// second signal stops at once.
async fn on_signals(control: Control) {
    use tokio::signal::unix::{SignalKind, signal as unix_signal};
    let (Ok(mut interrupt), Ok(mut terminate)) =
        (unix_signal(SignalKind::interrupt()), unix_signal(SignalKind::terminate()))
    else {
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => return control.stop(),
        _ = terminate.recv() => control.drain(),
    }
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    control.stop();
}
