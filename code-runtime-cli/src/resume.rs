//! `code-runtime resume`: a paused run's checkpoint, continued with the decisions on its pending
//! calls (docs/cli.md "Turn 3").

use std::path::PathBuf;
use std::process::ExitCode;

use code_runtime::{Checkpoint, CodeRunRequest, Decisions, Language, MAX_CHECKPOINT_BYTES};

use crate::Failure;
use crate::run::{Options, execute};

/// `code-runtime resume`'s options.
#[derive(Debug, clap::Args)]
#[command(after_help = "The checkpoint's program runs again from its start: its recorded calls \
are answered from the checkpoint, the decisions apply to its pending calls, and the run goes on \
live. Give the bindings it was paused with. Exit codes as for run; an unsigned, edited or foreign \
checkpoint is misuse (2).")]
pub(crate) struct Args {
    /// The checkpoint file a paused run wrote (--checkpoint); a run that pauses again writes its
    /// new checkpoint there unless --checkpoint says otherwise.
    #[arg(value_name = "CHECKPOINT")]
    checkpoint_file: Option<PathBuf>,
    /// Pending calls to allow, by id: --allow 2,5
    #[arg(long, value_name = "ID,..", value_delimiter = ',', value_parser = crate::count)]
    allow: Vec<u64>,
    /// Pending calls to deny, by id, each with an optional reason: --deny 3:too risky,4
    #[arg(long, value_name = "ID[:REASON],..", value_delimiter = ',')]
    deny: Vec<String>,
    /// Where the session of a run that paused in one is kept (as run's --session-dir)
    #[command(flatten)]
    session_dir: crate::session::SessionDir,
    #[command(flatten)]
    options: Options,
}

pub(crate) fn main(mut args: Args) -> Result<ExitCode, Failure> {
    let path =
        args.checkpoint_file.clone().ok_or("missing CHECKPOINT (the file a paused run wrote)")?;
    let text = code_runtime_fixtures::read_text_within(&path, MAX_CHECKPOINT_BYTES as u64)?;
    let checkpoint = Checkpoint::from_json(&text)
        .map_err(|error| Failure::Misuse(format!("{}: {error}", path.display())))?;
    let language: Language =
        checkpoint.language().and_then(|language| language.parse().ok()).ok_or_else(|| {
            Failure::Misuse(format!("{}: not a checkpoint of a known language", path.display()))
        })?;
    let decisions = decisions(&args.allow, &args.deny)?;
    let mode = args.options.approvals.unwrap_or_default();
    // A run that pauses again writes where the first one did, unless told otherwise.
    if args.options.checkpoint.is_none() {
        args.options.checkpoint = Some(path);
    }
    crate::approvals::check_mode(mode, args.options.checkpoint.as_deref(), false)?;
    // A run that paused in a session resumes in it, from the state it began with.
    let session = match checkpoint.session() {
        Some(name) => Some(args.session_dir.open(name, args.options.checkpoint_key.as_deref())?),
        None => None,
    };
    let mut request = CodeRunRequest::resuming(checkpoint, decisions);
    if let Some((id, sessions)) = session {
        request = request.session(id).sessions(sessions);
    }
    execute(language, request, &args.options)
}

/// `--allow` and `--deny` as decisions; a call decided twice is misuse.
fn decisions(allow: &[u64], deny: &[String]) -> Result<Decisions, Failure> {
    let mut decisions = Decisions::new();
    let mut seen = std::collections::HashSet::new();
    let mut once = |id: u64| {
        if seen.insert(id) {
            Ok(())
        } else {
            Err(Failure::Misuse(format!("call {id} is decided twice")))
        }
    };
    for &id in allow {
        once(id)?;
        decisions = decisions.allow(id);
    }
    for entry in deny {
        let (id, reason) = entry.split_once(':').unwrap_or((entry, "denied on resume"));
        let id = crate::count(id.trim()).map_err(|why| Failure::Misuse(format!("--deny {why}")))?;
        once(id)?;
        decisions = decisions.deny(id, reason);
    }
    Ok(decisions)
}
