//! The cell side of `process` isolation: what an executable does when the provider starts it in
//! a sandbox cell to run one program (see [`serve_cell_if_asked`]).
//!
//! The cell initialises V8 and makes its isolate and context at once (the host's first frame
//! says with what budget), then waits for a run's program on descriptor 3, runs it exactly as
//! `thread` isolation does, sends the ending and exits. When V8 gives up (an allocation past every limit, an internal size limit, a failed
//! check), the handlers below send a `fatal` frame with V8's words before the process ends, so
//! the host can say why the run ended as `worker-exit`.

use std::ffi::{CStr, OsStr};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use crate::isolate::{self, Setup};
use crate::message::{self, FrameReader, Inbox, Outbox};
use crate::shedding::SoleThread;
use crate::{platform, wire};

/// The argument that makes an executable a V8 cell (its only one).
pub(crate) const CELL_ARG: &str = "--code-runtime-v8-cell";

/// The argument that makes it the spawner process of a provider's cells (its only one).
pub(crate) const SPAWNER_ARG: &str = "--code-runtime-cell-spawner";

/// The cell's descriptor to the host (`code_runtime_sandbox::CellIo::channel`).
const CHANNEL_FD: libc::c_int = 3;

/// Set once [`serve_cell_if_asked`] ran in this process: its executable serves cells, so a
/// provider whose cells run it need not try one at construction.
static CALLED: AtomicBool = AtomicBool::new(false);

/// Whether this process's `main` called [`serve_cell_if_asked`].
pub(crate) fn serves_cells() -> bool {
    CALLED.load(Ordering::Relaxed)
}

/// Exit codes: the run ended (its ending was sent); the cell could not follow its host; V8
/// reported a fatal error (`EX_SOFTWARE`).
const EXIT_DONE: libc::c_int = 0;
const EXIT_MISUSE: libc::c_int = 2;
const EXIT_FATAL: libc::c_int = 70;

/// Serves one run as a V8 cell and exits, when this process was started as one; returns at once
/// otherwise.
///
/// A host that runs TypeScript with `Isolation::Process` and the default cell executable (its
/// own) calls this first thing in `main`, before it starts threads or reads its arguments: the
/// provider starts the host's own executable in each cell with one argument,
/// `--code-runtime-v8-cell`, and once, outside any cell, as the spawner process that starts the
/// cells (`WorkerThreadConfig::spawner_process`), with `--code-runtime-cell-spawner`; the
/// spawner's cells are copies of it that serve their run without executing anything, which is
/// why this must come before anything starts V8 or a thread. A host that cannot (a test
/// harness, a program in another language's process) names an executable that does, such as
/// the `code-runtime-v8-cell` binary of this crate, in
/// [`WorkerThreadConfig::cell_executable`](crate::WorkerThreadConfig::cell_executable).
///
/// ```no_run
/// // First thing in the host's `main`:
/// code_runtime_worker_thread::serve_cell_if_asked();
/// // The host's own work follows.
/// ```
pub fn serve_cell_if_asked() {
    CALLED.store(true, Ordering::Relaxed);
    let mut args = std::env::args_os().skip(1);
    let first = args.next();
    if args.next().is_some() {
        return;
    }
    if first.as_deref() == Some(OsStr::new(SPAWNER_ARG)) {
        // The provider's spawner process, which starts its cells (see `process.rs`) as copies
        // of itself that serve a run each: no `exec`, so they share its relocated pages.
        code_runtime_sandbox::serve_spawner_process_calling(serve);
    }
    if first.as_deref() != Some(OsStr::new(CELL_ARG)) {
        return;
    }
    let code = serve();
    // SAFETY: `_exit` ends the process without running destructors: V8's platform threads and
    // static state need no orderly end in a process that is about to vanish, and the ending was
    // written to the host with a blocking write before this.
    unsafe { libc::_exit(code) }
}

fn serve() -> libc::c_int {
    // SAFETY: fstat on a descriptor number, with a buffer it fills.
    let is_socket = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstat(CHANNEL_FD, &mut stat) == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFSOCK
    };
    if !is_socket {
        let mut stderr = std::io::stderr();
        let _ =
            writeln!(stderr, "{CELL_ARG}: descriptor 3 is not the channel of a code-runtime cell");
        return EXIT_MISUSE;
    }
    // SAFETY: a cell's program gets its channel to the host as descriptor 3, checked above to be
    // a socket; nothing else in this process uses or closes it.
    let channel = Arc::new(unsafe { UnixStream::from_raw_fd(CHANNEL_FD) });
    std::panic::set_hook(Box::new(|info| last_words(&format!("panic: {info}"))));
    // One C allocator arena for the whole cell: the isolate's thread would otherwise get one of
    // its own beside the main thread's (measured: 75 kB more a waiting cell), where the main
    // thread's has room the spawner process left free.
    // SAFETY: mallopt before this process starts a thread; it only sets a parameter.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    let code = Arc::new(AtomicI32::new(EXIT_DONE));
    let thread = platform::spawn_cell_thread("code-runtime-v8".to_owned(), {
        let code = code.clone();
        move || code.store(serve_run(channel), Ordering::Relaxed)
    });
    match thread.map(std::thread::JoinHandle::join) {
        Ok(Ok(())) => code.load(Ordering::Relaxed),
        // The panic hook sent its words.
        Ok(Err(_)) => EXIT_FATAL,
        Err(error) => {
            last_words(&format!("cannot start the isolate thread: {error}"));
            EXIT_FATAL
        }
    }
}

/// The isolate thread of the cell: makes the isolate as soon as the host says how (at once, when
/// the cell starts), then waits for the run's program, runs it and reports its ending.
fn serve_run(channel: Arc<UnixStream>) -> libc::c_int {
    // V8 is initialised (this thread's launcher did it first) with the host process's handler,
    // which would end just a run: in a cell, V8's fatal errors end the cell, reported to the host.
    v8::V8::set_fatal_error_handler(fatal_error);
    let reader = FrameReader::new(channel.clone());
    let Some(wire::ToCell::Prepare(shape)) = next(&reader) else { return EXIT_MISUSE };
    // SAFETY: this is the isolate thread of a cell, where V8 runs single-threaded
    // (`platform::spawn_cell_thread`) and the only other thread, the process's main one, waits to
    // join this one (`serve`): nothing but this thread writes memory in the process. `new`
    // checks the count of threads too.
    let sole = unsafe { SoleThread::new() };
    let mut prepared = isolate::prepare(Setup {
        out_of_memory: Some(out_of_memory),
        shed_when_idle: sole,
        ..Setup::new(shape)
    });
    // What making the isolate left goes back to the system while the cell waits for a run
    // (about a millisecond of its CPU; measured: memory per waiting run 2.00 -> 1.98 MB), unless
    // the run is here already: a cell made ahead waits, one made as its run starts does not.
    if !reader.has_begun() {
        prepared.shed_while_waiting();
    }
    // The host sends the setup when a run takes this cell.
    let Some(wire::ToCell::Setup(program)) = next(&reader) else { return EXIT_MISUSE };
    prepared.run(program, Outbox::cell(channel), Inbox::Cell(reader));
    EXIT_DONE
}

/// The host's next frame, however long it takes; `None` (after saying why, unless the host is
/// gone) when there is none or it is malformed.
fn next(reader: &FrameReader) -> Option<wire::ToCell> {
    // A host that goes away before it sends anything just discarded this cell.
    let payload = loop {
        match reader.next(Duration::from_secs(3600)) {
            Ok(payload) => break payload,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    };
    wire::to_cell(&payload)
        .map_err(|why| last_words(&format!("the host's frame is malformed: {why}")))
        .ok()
}

/// Sends a `fatal` frame; the process ends right after.
fn last_words(text: &str) {
    message::write_frame_to(CHANNEL_FD, &wire::fatal(text));
}

/// V8's handler for failed checks and fatal errors outside an isolate's out-of-memory path.
fn fatal_error(file: &str, line: i32, message: &str) {
    last_words(&format!("V8 fatal error: {message} ({file}:{line})"));
    // SAFETY: ends the process at once; V8 must not go on after a fatal error.
    unsafe { libc::_exit(EXIT_FATAL) }
}

/// V8's out-of-memory handler: the heap or an internal size limit was hit past every budget.
unsafe extern "C" fn out_of_memory(location: *const libc::c_char, details: &v8::OomDetails) {
    let text = |pointer: *const libc::c_char| {
        if pointer.is_null() {
            return String::new();
        }
        // SAFETY: V8 passes null or a NUL-terminated string that outlives the call.
        unsafe { CStr::from_ptr(pointer) }.to_string_lossy().into_owned()
    };
    let what = if details.is_heap_oom { "JavaScript heap out of memory" } else { "out of memory" };
    let location = text(location);
    let detail = text(details.detail.cast());
    let detail = if detail.is_empty() { String::new() } else { format!(": {detail}") };
    last_words(&format!("V8 fatal error: {what} ({location}{detail})"));
    // SAFETY: as in `fatal_error`: V8 aborts if this handler returns.
    unsafe { libc::_exit(EXIT_FATAL) }
}
