//! V8's fatal errors on a run's isolate thread in the host's process (`thread` isolation): the
//! run ends and its thread is abandoned, never the host; and the account of every isolate the
//! process holds but no longer waits for ([`out_of_service`]).
//!
//! V8 meets some programs with an error it gives no way back from: an allocation it cannot make
//! even after the near-heap-limit callback's room to unwind (`memory.rs`), or an internal size
//! limit (`"x".repeat(2 ** 28).split("")` asks for an array of 2^28 elements, past V8's 2^27). In
//! a cell that ends the cell. In the host's process V8 would abort the process with every other
//! run in it, so its handlers end the run instead: they send the run's ending to the host, mark
//! the run's [`Termination`] abandoned (the host then neither waits for the thread nor joins it)
//! and park the thread for good. Its isolate is never disposed: what it holds (at most its budget
//! and its room to unwind, `memory::host_bytes`) stays taken until the process exits.
//!
//! Those isolates, and isolates still running a builtin past their run's end (`substrate.rs`
//! lets them go after a bound, terminating them again all the while), are *out of hand*:
//! counted here, in number and in bytes. Once they hold too much ([`MAX_OUT_OF_HAND`],
//! [`MAX_OUT_OF_HAND_BYTES`]), new `thread` runs are refused with a clear error until they are
//! back (a lingering one ended) or the process restarts: the process never aborts for a
//! program, and never holds more than that bound, one isolate's more, and its runs in flight. Every other fatal error (a failed check is a V8 bug, after which nothing in
//! the isolate can be trusted) aborts the process as V8 would without us. The handlers are V8's
//! own where it calls one ([`fatal_error`], [`out_of_memory`]), and a `SIGTRAP` handler for its
//! size limits, which crash without calling any ([`install_trap`]).

use std::cell::RefCell;
use std::ffi::{CStr, c_void};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use code_runtime::provider::{Ending, Event, StopReason};

use crate::memory::HeapGuard;
use crate::message::Outbox;
use crate::termination::Termination;

/// Isolates out of hand past which `thread` runs are refused.
pub(crate) const MAX_OUT_OF_HAND: usize = 16;

/// Bytes isolates out of hand may hold (`memory::host_bytes` of each) past which `thread` runs
/// are refused.
pub(crate) const MAX_OUT_OF_HAND_BYTES: usize = 2 << 30;

/// Isolates out of hand, and the bytes they may hold.
static OUT_OF_HAND: Mutex<(usize, usize)> = Mutex::new((0, 0));

/// Counts `termination`'s isolate out of hand, holding up to `bytes`, unless it is already.
pub(crate) fn let_go(termination: &Termination, bytes: usize) {
    if termination.count_out(bytes) {
        let mut out = OUT_OF_HAND.lock().unwrap_or_else(PoisonError::into_inner);
        out.0 += 1;
        out.1 = out.1.saturating_add(bytes);
    }
}

/// `termination`'s isolate, if it was out of hand, is gone: its thread ended and was joined.
pub(crate) fn taken_back(termination: &Termination) {
    if let Some(bytes) = termination.count_in() {
        let mut out = OUT_OF_HAND.lock().unwrap_or_else(PoisonError::into_inner);
        out.0 = out.0.saturating_sub(1);
        out.1 = out.1.saturating_sub(bytes);
    }
}

/// Why a new `thread` run is refused, if it is: the isolates out of hand hold too much already.
/// (What the process holds is then at most these bounds, and one isolate's more, plus its runs
/// in flight.)
pub(crate) fn out_of_service() -> Option<String> {
    let (count, held) = *OUT_OF_HAND.lock().unwrap_or_else(PoisonError::into_inner);
    let full = count >= MAX_OUT_OF_HAND || held >= MAX_OUT_OF_HAND_BYTES;
    full.then(|| {
        format!(
            "thread isolation is out of service in this process: {count} isolates that V8's fatal \
             errors stopped, or that still run past their run's end, hold up to {} MiB; use \
             process isolation, or restart the host",
            held >> 20
        )
    })
}

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
/// they end the run here as the handled ones do. Only a breakpoint trap (`si_code` `SI_KERNEL`,
/// what `int3` raises) on a thread running a watched program is ours: every other `SIGTRAP` (one
/// sent by `kill` or `raise`, a debugger's, another thread's, or one after [`fatal_error`] left
/// no run to end) goes to the disposition that was there before ([`chain`]).
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

/// See [`install_trap`]. The handler allocates nothing, takes no lock and sends nothing: for
/// V8's trap on a watched thread it only moves the thread, as it returns, to [`after_trap`],
/// which ends the run outside the signal's context. There the thread holds no lock of the
/// allocator or of ours: V8 raised the trap on purpose, after printing its message.
extern "C" fn on_trap(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
    let breakpoint = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    // `try_with` and `try_borrow`: no initialisation and no panic here; a thread busy with its
    // slot (setting or clearing its watch) is not running a program.
    let watched = WATCHED
        .try_with(|watched| watched.try_borrow().is_ok_and(|watched| watched.is_some()))
        .unwrap_or(false);
    // SAFETY: `context` is the `ucontext_t` of this synchronous trap, given to this handler.
    if breakpoint && watched && unsafe { resume_in(context, after_trap) } {
        return;
    }
    chain(signal, info, context);
}

/// Where a watched thread goes from V8's trap: the run ends and the thread parks for good.
extern "C" fn after_trap() -> ! {
    abandon(|_| {
        Ending::Failed(
            "V8 fatal error: an internal limit of V8 (its words are on the host's standard error)"
                .to_owned(),
        )
    });
    // The run was gone meanwhile: there is nothing to return to.
    std::process::abort()
}

/// Makes the interrupted thread resume at `target`, as if called, on its own stack below the
/// frame it was in (which is never returned to). x86-64 only: elsewhere no trap is taken over.
///
/// # Safety
///
/// `context` must be the `ucontext_t` of a synchronous signal delivered to this thread.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn resume_in(context: *mut c_void, target: extern "C" fn() -> !) -> bool {
    if context.is_null() {
        return false;
    }
    // SAFETY: the caller's promise; these are the interrupted thread's registers, which the
    // kernel restores as the handler returns.
    let registers = unsafe { &mut (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs };
    let Ok(stack) = usize::try_from(registers[libc::REG_RSP as usize]) else { return false };
    // Past the red zone, aligned as the ABI has it at a function's entry (a return address
    // pushed from a 16-byte boundary).
    let entry = (stack.saturating_sub(256) & !15).saturating_sub(8);
    let (Ok(entry), Ok(target)) = (i64::try_from(entry), i64::try_from(target as usize)) else {
        return false;
    };
    registers[libc::REG_RSP as usize] = entry;
    registers[libc::REG_RIP as usize] = target;
    true
}

/// See the x86-64 version.
///
/// # Safety
///
/// None needed: it does nothing.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
unsafe fn resume_in(_context: *mut c_void, _target: extern "C" fn() -> !) -> bool {
    false
}

/// Hands a trap that is not ours to the disposition there before [`install_trap`]: its handler,
/// or the default put back and the signal raised again (delivered as this handler returns, being
/// blocked meanwhile), which ends the process as it would without us.
fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let Some(previous) = PREVIOUS_TRAP.get() else { return };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_IGN {
        return;
    }
    if handler == libc::SIG_DFL {
        // SAFETY: puts back the saved disposition and raises: async-signal-safe calls only.
        unsafe {
            libc::sigaction(libc::SIGTRAP, previous, std::ptr::null_mut());
            libc::raise(libc::SIGTRAP);
        }
        return;
    }
    if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with `SA_SIGINFO`, so it has this type.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(handler) };
        handler(signal, info, context);
    } else {
        // SAFETY: the previous handler was installed without `SA_SIGINFO`: a plain handler.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        handler(signal);
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
/// there is no such run.
fn abandon(ending: impl FnOnce(u64) -> Ending) {
    // `try_with`: a thread whose slot is gone (or never made) has no run to end.
    let Ok(Some(watched)) = WATCHED.try_with(|watched| watched.borrow_mut().take()) else { return };
    // SAFETY: the guard outlives the isolate, whose thread this is, inside `Prepared::run` (see
    // `Watched::guard`).
    let guard = unsafe { &*watched.guard };
    let_go(&watched.termination, crate::memory::host_bytes(guard.budget.limit()));
    // Marked before the ending is sent: a host that hears the ending sees the mark.
    watched.termination.abandon();
    watched.host.send(Event::Ended(ending(watched.max_memory_mb)));
    // V8 must not go on with this isolate; the thread waits here until the process ends.
    loop {
        std::thread::park();
    }
}
