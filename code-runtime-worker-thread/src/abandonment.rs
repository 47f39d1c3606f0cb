//! V8's fatal errors on a run's isolate thread in the host's process (`thread` isolation): the
//! run ends and its thread is abandoned, never the host.
//!
//! V8 meets some programs with an error it gives no way back from: an allocation it cannot make
//! even after the near-heap-limit callback's loan (`memory.rs`), or an internal size limit
//! (`"x".repeat(2 ** 28).split("")` asks for an array of 2^28 elements, past V8's 2^27). In a
//! cell that ends the cell. In the host's process V8 would abort the process with every other
//! run in it, so its handlers end the run instead: they send the run's ending to the host, mark
//! the run's [`Termination`] abandoned (the host then neither waits for the thread nor joins it)
//! and park the thread for good. Its isolate is never disposed: what it holds stays taken until
//! the process exits, so a process abandons at most [`MAX_ABANDONED`] isolates; past that, and
//! for every other fatal error (a failed check is a V8 bug, after which nothing in the isolate can
//! be trusted), V8 aborts the process as it would without us. The handlers are V8's own where it
//! calls one ([`fatal_error`], [`out_of_memory`]), and a `SIGTRAP` handler for its size limits,
//! which crash without calling any ([`install_trap`]).

use std::cell::RefCell;
use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use code_runtime::provider::{Ending, Event, StopReason};

use crate::memory::HeapGuard;
use crate::message::Outbox;
use crate::termination::Termination;

/// Isolates a process abandons before V8's fatal errors abort it again: each keeps its memory
/// (the run's budget, and what the loan let it take past it) until the process exits.
pub(crate) const MAX_ABANDONED: usize = 4;

static ABANDONED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The run this isolate thread is running, while it runs it.
    static WATCHED: RefCell<Option<Watched>> = const { RefCell::new(None) };
}

/// What the handlers need of the run on this thread.
struct Watched {
    host: Outbox,
    termination: Arc<Termination>,
    /// The isolate's, boxed by the isolate thread and alive until after the isolate: for as long
    /// as the thread runs the program, and for good once the thread is parked.
    guard: *const HeapGuard,
    max_memory_mb: u64,
}

/// While it lives, a fatal error of V8 on this thread ends the run `host` hears from instead of
/// the process.
pub(crate) struct Watch(());

impl Drop for Watch {
    fn drop(&mut self) {
        WATCHED.with(|watched| watched.borrow_mut().take());
    }
}

/// Watches the run on this thread: only one in the host's process (`Outbox::Thread`); a cell
/// has handlers of its own that end the cell.
pub(crate) fn watch(
    host: &Outbox,
    termination: &Arc<Termination>,
    guard: &HeapGuard,
    max_memory_mb: u64,
) -> Option<Watch> {
    let Outbox::Thread(_) = host else { return None };
    let watched =
        Watched { host: host.clone(), termination: termination.clone(), guard, max_memory_mb };
    WATCHED.with(|slot| *slot.borrow_mut() = Some(watched));
    Some(Watch(()))
}

/// V8's fatal-error handler in the host's process (`platform.rs` sets it for the process). Only
/// the errors V8 itself calls harmless to security (its `Fatal JavaScript` ones) end just the
/// run; any other (a failed check: a V8 bug) is let through to V8's abort, and the trap that
/// follows finds no run to end ([`on_trap`]).
pub(crate) fn fatal_error(_file: &str, _line: i32, message: &str) {
    if message.starts_with("Fatal JavaScript") {
        abandon(|_| Ending::Failed(format!("V8 fatal error: {}", message.trim())));
    }
    WATCHED.with(|watched| watched.borrow_mut().take());
}

/// What `SIGTRAP` did before [`install_trap`].
static PREVIOUS_TRAP: OnceLock<libc::sigaction> = OnceLock::new();

/// Catches V8's deliberate crash (`int3; ud2`, after its message) on a watched isolate thread.
///
/// Some of V8's fatal errors reach no handler: an internal size limit
/// (`"x".repeat(2 ** 28).split("")`, `JSON.parse` of an array of 2^27 elements) prints
/// `Fatal JavaScript invalid size error` and crashes at once. V8 calls them harmless to security;
/// they end the run here as the handled ones do. Every other fatal error of V8 passed
/// [`fatal_error`], which leaves no run to end, and other threads' traps are not ours: for them the
/// handler puts the previous disposition back and returns into the `ud2`, which ends the process.
pub(crate) fn install_trap() {
    // SAFETY: `sigaction` with a zeroed action filled below and an out-parameter we own; the
    // handler only touches this thread's state (see `on_trap`).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) = on_trap;
        action.sa_sigaction = handler as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTRAP, &action, &mut previous) == 0 {
            let _ = PREVIOUS_TRAP.set(previous);
        }
    }
}

/// See [`install_trap`]. The trap is synchronous, raised by V8 on purpose after printing its
/// message: the thread holds no lock of the allocator or of ours, so ending the run (a channel
/// send) is as safe here as in a handler V8 calls.
extern "C" fn on_trap(_signal: libc::c_int, _info: *mut libc::siginfo_t, _context: *mut c_void) {
    abandon(|_| {
        Ending::Failed(
            "V8 fatal error: an internal limit of V8 (its words are on the host's standard error)"
                .to_owned(),
        )
    });
    if let Some(previous) = PREVIOUS_TRAP.get() {
        // SAFETY: puts back the disposition `install_trap` saved, and raises the signal again:
        // blocked while this handler runs, it is delivered through that disposition as the
        // handler returns (whoever raised it, V8's `int3` or anyone's `raise`).
        unsafe {
            libc::sigaction(libc::SIGTRAP, previous, std::ptr::null_mut());
            libc::raise(libc::SIGTRAP);
        }
    }
}

/// V8's out-of-memory handler of an isolate in the host's process: the run ends as out of
/// memory. Returning, it lets V8 abort.
pub(crate) unsafe extern "C" fn out_of_memory(
    _location: *const libc::c_char,
    details: &v8::OomDetails,
) {
    let detail = if details.detail.is_null() {
        String::new()
    } else {
        // SAFETY: V8 passes null or a NUL-terminated string that outlives the call.
        unsafe { CStr::from_ptr(details.detail.cast()) }.to_string_lossy().into_owned()
    };
    abandon(|max_memory_mb| match details.is_heap_oom {
        true => Ending::Stopped(StopReason::OutOfMemory { max_memory_mb }),
        false => Ending::Failed(format!("V8 fatal error: out of memory ({detail})")),
    });
}

/// Ends the run on this thread with `ending` and parks the thread for good; returns only when
/// there is no such run or the process abandoned its share already.
fn abandon(ending: impl FnOnce(u64) -> Ending) {
    // `try_with`: a thread whose slot is gone (or never made) has no run to end.
    let Ok(Some(watched)) = WATCHED.try_with(|watched| watched.borrow_mut().take()) else { return };
    if ABANDONED.fetch_add(1, Ordering::AcqRel) >= MAX_ABANDONED {
        return;
    }
    // The loan is the process's: another run may need it. What this isolate took with it stays
    // held, bounded by `MAX_ABANDONED`.
    // SAFETY: the guard outlives the isolate, whose thread this is, inside `Prepared::run` (see
    // `Watched::guard`).
    unsafe { &*watched.guard }.give_back_loan();
    // Marked before the ending is sent: a host that hears the ending sees the mark.
    watched.termination.abandon();
    watched.host.send(Event::Ended(ending(watched.max_memory_mb)));
    // V8 must not go on with this isolate; the thread waits here until the process ends.
    loop {
        std::thread::park();
    }
}
