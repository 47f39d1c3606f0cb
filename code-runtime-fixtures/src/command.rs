//! `command` bindings: a host tool run once per call, with the call's argument as JSON on stdin and
//! its resolution as JSON on stdout.
//!
//! The tool is the host's (trusted, with the host's filesystem and network), but a program
//! decides how often it runs and with what, so each run is bounded: its own process group, one
//! timeout over the whole exchange (writing stdin included), a cap on what it may print and on the
//! value that makes, and every process of its group killed when the call ends, however it ends.
//! How many run at once is bounded too, host-wide: a program's `Promise.all` over a thousand
//! calls queues for [`max_concurrent_commands`] slots instead of starting a thousand processes.

use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use code_runtime::BindingError;
use code_runtime::json::{self, JsonValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// How long one call of a command may take, from spawn to exit, unless its behaviour says.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// The most a command may print on stdout: far beyond a tool's JSON answer, far below what would
/// hurt the host.
const MAX_STDOUT_BYTES: u64 = 16 << 20;
/// The most of its stderr kept for a rejection's message.
const MAX_STDERR_BYTES: u64 = 64 << 10;
/// How long a command's pipes are read after it exited, when something it started holds them.
const DRAIN: Duration = Duration::from_millis(100);
/// The most host memory the value a command prints may hold ([`json::parse_within`]): 16 MiB of
/// `0,` would make a 256 MiB value.
const MAX_VALUE_BYTES: usize = 128 << 20;

/// How many command processes run at once in this process, whatever the runs and programs that
/// call them: the CPU count times four. Calls past it wait their turn (their run's wall clock
/// still runs).
pub fn max_concurrent_commands() -> usize {
    slots().1
}

fn slots() -> &'static (Arc<tokio::sync::Semaphore>, usize) {
    static SLOTS: OnceLock<(Arc<tokio::sync::Semaphore>, usize)> = OnceLock::new();
    SLOTS.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let slots = cpus.saturating_mul(4);
        (Arc::new(tokio::sync::Semaphore::new(slots)), slots)
    })
}

/// Runs `argv` for one call. The command starts with an empty environment (bar `PATH`) so it sees
/// no secret of the host's.
pub(crate) async fn run_command(
    argv: &[String],
    args: &JsonValue,
    timeout: Duration,
) -> Result<JsonValue, BindingError> {
    let name = &argv[0];
    // The semaphore is never closed, so this waits for a slot and only then fails if ever closed.
    let _slot = slots()
        .0
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| BindingError::new(format!("cannot start {name}: no command slot")))?;
    let mut child = command(argv)
        .spawn()
        .map_err(|error| BindingError::new(format!("cannot start {name}: {error}")))?;
    // Whatever happens next, the group goes with the call: a background grandchild included.
    let _group = child.id().map(ProcessGroup);
    let input = json::encode(args);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exchange = async {
        let write = async {
            if let Some(mut stdin) = stdin {
                // A command that does not read its input may close stdin early; its business.
                let _ = stdin.write_all(input.as_bytes()).await;
            }
            Ok::<(), BindingError>(())
        };
        let read_out = read_capped(stdout, &mut out, MAX_STDOUT_BYTES, name, Overflow::Fail);
        let read_err = read_capped(stderr, &mut err, MAX_STDERR_BYTES, name, Overflow::Discard);
        let pipes = async { tokio::try_join!(write, read_out, read_err).map(|_| ()) };
        tokio::pin!(pipes);
        let exited = tokio::select! {
            read = &mut pipes => {
                read?;
                child.wait().await
            }
            // The command exited while something it started still holds its pipes: what it wrote
            // is read for a moment more, and the call ends without waiting for the rest.
            exited = child.wait() => {
                if let Ok(read) = tokio::time::timeout(DRAIN, &mut pipes).await {
                    read?;
                }
                exited
            }
        };
        exited.map_err(|error| BindingError::new(format!("{name} failed: {error}")))
    };
    let status = match tokio::time::timeout(timeout, exchange).await {
        Ok(status) => status?,
        Err(_) => {
            return Err(BindingError::new(format!(
                "{name} timed out after {} ms",
                timeout.as_millis()
            )));
        }
    };
    if !status.success() {
        let stderr = String::from_utf8_lossy(&err).trim().to_owned();
        return Err(BindingError::new(if stderr.is_empty() {
            format!("{name} exited with {status}")
        } else {
            stderr
        }));
    }
    let stdout = String::from_utf8_lossy(&out);
    json::parse_within(stdout.trim(), MAX_VALUE_BYTES)
        .map_err(|error| BindingError::new(format!("{name} printed no lossless JSON: {error}")))
}

/// The command of `argv`, with an empty environment bar `PATH`, its pipes, and a process group
/// of its own.
fn command(argv: &[String]) -> tokio::process::Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "a user-declared binding command, not a Python child"
    )]
    let mut command = tokio::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}

/// What happens to output past a pipe's cap.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// The call fails (stdout: the resolution would be cut).
    Fail,
    /// It is read and dropped, so the command never blocks on it (stderr).
    Discard,
}

/// Reads `pipe` into `bytes` until its end, at most `cap` bytes.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    bytes: &mut Vec<u8>,
    cap: u64,
    name: &str,
    overflow: Overflow,
) -> Result<(), BindingError> {
    let Some(mut pipe) = pipe else { return Ok(()) };
    let mut chunk = [0u8; 8192];
    loop {
        let read = pipe
            .read(&mut chunk)
            .await
            .map_err(|error| BindingError::new(format!("{name}: {error}")))?;
        if read == 0 {
            return Ok(());
        }
        let room = usize::try_from(cap).unwrap_or(usize::MAX).saturating_sub(bytes.len());
        if read > room && overflow == Overflow::Fail {
            return Err(BindingError::new(format!("{name} printed more than {} MiB", cap >> 20)));
        }
        bytes.extend_from_slice(&chunk[..read.min(room)]);
    }
}

/// Kills a process group when dropped.
struct ProcessGroup(u32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Ok(group) = libc::pid_t::try_from(self.0) {
            // SAFETY: kill has no memory effects; the group is the command's own (it leads it,
            // and its pid is not reused before tokio reaps it, which happens after this).
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
    }
}
