//! The command line's approvals (docs/cli.md "Turn 3"): `--approvals ask|deny|allow|pause`, the
//! terminal's approver, the checkpoint key, and the checkpoint file of a paused run.

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use code_runtime::provider::async_trait;
use code_runtime::{
    ApprovalRequest, Approvals, Approver, CheckpointKey, CodeRunResult, Decision, json,
};

use crate::Failure;

/// Who decides the calls of functions marked `"approval"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// Ask on the terminal, one line per call (stdin must be a terminal).
    Ask,
    /// Deny every such call; the program sees the denial and may catch it.
    #[default]
    Deny,
    /// Allow every such call.
    Allow,
    /// Pause the run at the first such call: its checkpoint goes to --checkpoint, and
    /// `code-runtime resume` continues it.
    Pause,
}

/// The environment variable a checkpoint key may come from, in hexadecimal.
pub(crate) const KEY_VARIABLE: &str = code_runtime_mcp::CHECKPOINT_KEY_VARIABLE;

/// The file a key made for this user is kept in, in the user's cache directory.
const KEY_FILE: &str = "checkpoint.key";

/// What a denial on the command line says.
const DENIED: &str = "denied on the command line (--approvals deny)";

/// The request's approvals under `mode`; `key` lets the run pause.
pub(crate) fn approvals(mode: Mode, key: Option<CheckpointKey>) -> Approvals {
    let can_pause = key.is_some();
    let approvals = match mode {
        Mode::Ask => Approvals::new(Terminal { can_pause, ..Terminal::default() }),
        Mode::Deny => Approvals::new(Decision::deny(DENIED)),
        Mode::Allow => Approvals::new(Decision::Allow),
        Mode::Pause => Approvals::new(Decision::Pause),
    };
    match key {
        Some(key) => with_key(approvals, key),
        None => approvals,
    }
}

/// `approvals` signing and checking checkpoints with `key`, each resumed once by any command
/// of this user ([`spent_checkpoints`]).
pub(crate) fn with_key(approvals: Approvals, key: CheckpointKey) -> Approvals {
    let approvals = approvals.checkpoint_key(key);
    match spent_checkpoints() {
        Some(spent) => approvals.spent_checkpoints(spent),
        None => approvals,
    }
}

/// The directory under the user's cache directory where each resumed checkpoint leaves an empty
/// file named by its signature.
const SPENT_DIR: &str = "spent-checkpoints";

/// The checkpoints this user's commands resumed: one empty file each, made with `O_EXCL`, so
/// two resumes of one checkpoint (one after the other, or at once, from any process of this
/// user) cannot both proceed. `None` without a cache directory: then only this process
/// remembers (the library's default).
pub(crate) fn spent_checkpoints() -> Option<Arc<dyn code_runtime::SpentCheckpoints>> {
    let dir = code_runtime_sandbox::cache::user_dir()?.join(SPENT_DIR);
    Some(Arc::new(SpentFiles(dir)))
}

/// The checkpoints resumed by every process that names `dir`: replicas of the gateway give one
/// directory on a volume they share, so a checkpoint resumes once across them (`O_EXCL` holds
/// on local file systems and on NFS from version 3).
pub(crate) fn spent_checkpoints_in(dir: PathBuf) -> Arc<dyn code_runtime::SpentCheckpoints> {
    Arc::new(SpentFiles(dir))
}

struct SpentFiles(PathBuf);

impl code_runtime::SpentCheckpoints for SpentFiles {
    fn spend(&self, signature: &str) -> Result<bool, String> {
        use std::os::unix::fs::DirBuilderExt as _;
        let failed = |error: std::io::Error| format!("{}: {error}", self.0.display());
        // A signature is 64 hexadecimal digits: a file name, never a path.
        if signature.is_empty() || !signature.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(format!("{signature:?} is not a checkpoint signature"));
        }
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.0).map_err(failed)?;
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(self.0.join(signature));
        match made {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(failed(error)),
        }
    }
}

/// Checks `mode` against the rest of the command line before anything runs.
pub(crate) fn check_mode(
    mode: Mode,
    checkpoint: Option<&Path>,
    program_on_stdin: bool,
) -> Result<(), Failure> {
    use std::io::IsTerminal as _;
    match mode {
        Mode::Pause if checkpoint.is_none() => {
            Err(Failure::Misuse("--approvals pause needs --checkpoint FILE".to_owned()))
        }
        Mode::Ask if program_on_stdin => Err(Failure::Misuse(
            "--approvals ask reads the answers on stdin: the program cannot come from it"
                .to_owned(),
        )),
        Mode::Ask if !std::io::stdin().is_terminal() => Err(Failure::Misuse(
            "--approvals ask needs a terminal on stdin (use allow, deny or pause otherwise)"
                .to_owned(),
        )),
        _ => Ok(()),
    }
}

/// The key checkpoints are signed with: `--checkpoint-key FILE`, else
/// `$CODE_RUNTIME_CHECKPOINT_KEY`, else the key made once for this user and kept in its cache
/// directory (mode 0600).
pub(crate) fn checkpoint_key(file: Option<&Path>) -> Result<CheckpointKey, Failure> {
    if let Some(path) = file {
        // A key others can read lets them sign checkpoints this host resumes.
        if let Ok(metadata) = std::fs::metadata(path) {
            closed_to_others(&metadata, Access::Read).map_err(|why| {
                Failure::Misuse(format!("--checkpoint-key {}: {why}", path.display()))
            })?;
        }
        let text = code_runtime_fixtures::read_text(path)?;
        return CheckpointKey::from_hex(&text)
            .map_err(|error| Failure::Misuse(format!("{}: {error}", path.display())));
    }
    if let Some(text) = std::env::var_os(KEY_VARIABLE) {
        let text = text.to_string_lossy();
        return CheckpointKey::from_hex(&text)
            .map_err(|error| Failure::Misuse(format!("${KEY_VARIABLE}: {error}")));
    }
    let dir = code_runtime_sandbox::cache::user_dir().ok_or_else(|| {
        Failure::Internal(format!(
            "no cache directory to keep a checkpoint key in: give --checkpoint-key or ${KEY_VARIABLE}"
        ))
    })?;
    kept_key(&dir.join(KEY_FILE))
}

/// What another user must not be able to do with a file or directory given by flag.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    /// Read it: a key.
    Read,
    /// Write it: the spent checkpoints, where deleting a marker resumes a checkpoint again.
    Write,
}

/// Refuses `metadata` unless it belongs to this user (or root) and `access` is open to no other
/// user: not to every user, and not to a group that is not this user's own (a volume mounted for
/// a pod's `fsGroup`, the pod's own group, is fine).
pub(crate) fn closed_to_others(metadata: &std::fs::Metadata, access: Access) -> Result<(), String> {
    let (other, group, verb, letter) = match access {
        Access::Read => (0o004, 0o040, "readable", 'r'),
        Access::Write => (0o002, 0o020, "writable", 'w'),
    };
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let (owner, mode) = (metadata.uid(), metadata.mode() & 0o7777);
    if owner != uid && owner != 0 {
        return Err(format!("owned by uid {owner}, neither this user (uid {uid}) nor root"));
    }
    if mode & other != 0 {
        return Err(format!("{verb} by every user (mode {mode:o}): chmod o-{letter} it"));
    }
    if mode & group != 0 && metadata.gid() != gid && !in_group(metadata.gid()) {
        return Err(format!(
            "{verb} by group {}, which is not this user's own (gid {gid}): chmod g-{letter} it",
            metadata.gid()
        ));
    }
    Ok(())
}

/// Whether this process is in group `gid` besides its effective one (a pod's `fsGroup`, say).
fn in_group(gid: libc::gid_t) -> bool {
    let mut groups = [0 as libc::gid_t; 256];
    // SAFETY: getgroups writes at most the buffer's length of group ids into the buffer we own.
    let count = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    usize::try_from(count).is_ok_and(|count| groups[..count.min(groups.len())].contains(&gid))
}

/// The key in `path`, made there (readable by this user only) if there is none.
fn kept_key(path: &Path) -> Result<CheckpointKey, Failure> {
    let unusable = |why: String| Failure::Internal(format!("{}: {why}", path.display()));
    match std::fs::symlink_metadata(path) {
        Ok(metadata) => {
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            if !metadata.is_file() || metadata.uid() != uid || metadata.mode() & 0o077 != 0 {
                return Err(unusable(
                    "not a key file of this user that only this user can read".to_owned(),
                ));
            }
            let text = code_runtime_fixtures::read_text(path)?;
            CheckpointKey::from_hex(&text).map_err(|error| unusable(error.to_string()))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let key = CheckpointKey::generate().map_err(|error| unusable(error.to_string()))?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|error| unusable(error.to_string()))?;
            }
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|error| unusable(error.to_string()))?;
            writeln!(file, "{}", key.to_hex()).map_err(|error| unusable(error.to_string()))?;
            Ok(key)
        }
        Err(error) => Err(unusable(error.to_string())),
    }
}

/// Where a paused run's checkpoint goes. A file beside it is made (readable by this user only)
/// before the program starts, as every output path is opened first; a run that pauses writes
/// its checkpoint there and renames it over the path, so the path (the checkpoint a resume
/// read, say) is never left empty or half written, whatever happens before.
pub(crate) struct CheckpointFile {
    path: PathBuf,
    partial: PathBuf,
    file: Option<std::fs::File>,
}

impl CheckpointFile {
    /// Makes the file beside `path`.
    pub(crate) fn create(path: &Path) -> Result<Self, Failure> {
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned());
        let name = name.ok_or_else(|| format!("--checkpoint {} is not a file", path.display()))?;
        let partial = path.with_file_name(format!(".{name}.{}.partial", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        Ok(Self { path: path.to_owned(), partial, file: Some(file) })
    }

    /// Writes the checkpoint of a paused `result` to the path, and makes the result the command
    /// line's `{"logs", "paused": {"checkpoint": FILE, "pending"}}`; `None` for a run that did
    /// not pause.
    pub(crate) fn settle(mut self, result: &mut CodeRunResult) -> Result<Option<String>, Failure> {
        let Some(paused) = result.take_paused() else { return Ok(None) };
        let cannot = |error: std::io::Error| {
            Failure::Internal(format!("cannot write {}: {error}", self.path.display()))
        };
        let mut file = self.file.take().ok_or_else(|| Failure::Internal("no file".to_owned()))?;
        file.write_all(paused.checkpoint.to_json().as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .and_then(|()| file.sync_all())
            .map_err(cannot)?;
        std::fs::rename(&self.partial, &self.path).map_err(cannot)?;
        let pending: Vec<_> = paused
            .pending
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "namespace": call.namespace,
                    "function": call.function,
                    "args": call.args.clone(),
                })
            })
            .collect();
        let printed = json!({
            "logs": result.logs(),
            "paused": { "checkpoint": self.path.display().to_string(), "pending": pending },
        });
        Ok(Some(json::encode(&printed)))
    }
}

impl Drop for CheckpointFile {
    fn drop(&mut self) {
        // Renamed already when the run paused; otherwise nothing of it is left.
        let _ = std::fs::remove_file(&self.partial);
    }
}

/// Asks the person at the terminal about each call, one line at a time: `y` allows, `a` allows
/// this call and every later one of the run, `p` pauses (offered only with --checkpoint),
/// anything else denies.
#[derive(Default)]
struct Terminal {
    /// One question at a time.
    turn: tokio::sync::Mutex<()>,
    allow_rest: AtomicBool,
    /// Whether the run may pause: only then is pausing offered.
    can_pause: bool,
}

#[async_trait]
impl Approver for Terminal {
    async fn decide(&self, request: &ApprovalRequest) -> Decision {
        if self.allow_rest.load(Ordering::Relaxed) {
            return Decision::Allow;
        }
        let _turn = self.turn.lock().await;
        if self.allow_rest.load(Ordering::Relaxed) {
            return Decision::Allow;
        }
        let pause = if self.can_pause { ", [p]ause" } else { "" };
        let question = format!(
            "code-runtime: call {} {}: allow? [y]es, [n]o, [a]ll of this run{pause}: ",
            request.call, request.summary
        );
        // The read waits on a blocking thread, which looks up every 100 ms whether the run still
        // wants the answer (a run that ended, or an approval timeout, drops this future).
        let asking = Asking::default();
        let cancelled = asking.0.clone();
        let answer =
            tokio::task::spawn_blocking(move || ask(&question, &cancelled)).await.ok().flatten();
        drop(asking);
        match answer.as_deref().map(str::trim) {
            Some("y" | "yes") => Decision::Allow,
            Some("a" | "all") => {
                self.allow_rest.store(true, Ordering::Relaxed);
                Decision::Allow
            }
            Some("p" | "pause") if self.can_pause => Decision::Pause,
            _ => Decision::deny("declined on the terminal"),
        }
    }

    fn name(&self) -> &str {
        "terminal"
    }
}

/// Set when the question is no longer wanted.
#[derive(Default)]
struct Asking(Arc<AtomicBool>);

impl Drop for Asking {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Writes `question` to stderr and reads one line from stdin; `None` at the end of input or
/// once `cancelled` is set.
fn ask(question: &str, cancelled: &AtomicBool) -> Option<String> {
    crate::print_stderr_inline(question);
    let stdin = std::io::stdin();
    let fd = stdin.as_raw_fd();
    let mut line = Vec::new();
    while !cancelled.load(Ordering::Relaxed) {
        let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, 100) };
        if ready <= 0 {
            continue;
        }
        let mut byte = [0u8; 1];
        // SAFETY: reads at most one byte into a live one-byte buffer.
        let read = unsafe { libc::read(fd, byte.as_mut_ptr().cast(), 1) };
        match read {
            1 if byte[0] == b'\n' => return Some(String::from_utf8_lossy(&line).into_owned()),
            1 if line.len() < 1024 => line.push(byte[0]),
            1 => {}
            _ => return None,
        }
    }
    None
}
