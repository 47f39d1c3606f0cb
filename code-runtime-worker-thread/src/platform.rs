//! V8 is initialised once per process, on a long-lived launcher thread that also starts every
//! isolate thread, so each isolate thread descends from the thread that initialised V8 (V8's
//! per-thread memory-protection keys are inherited from the creating thread). A cell, which makes
//! one isolate, has no launcher: its isolate thread initialises V8 itself, single-threaded
//! ([`spawn_cell_thread`]).

use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// An isolate thread's stack. V8 limits JavaScript recursion itself (about 1 MB of frames); the
/// rest is headroom for V8's own native frames and our callbacks, which never recurse on program
/// values.
const ISOLATE_STACK_BYTES: usize = 8 << 20;

type Job = Box<dyn FnOnce() + Send>;
type Request = (String, Job, SyncSender<std::io::Result<JoinHandle<()>>>);

/// The launcher's queue, or why it could not be started (the process is out of threads).
static LAUNCHER: OnceLock<Result<std::sync::Mutex<SyncSender<Request>>, String>> = OnceLock::new();

/// The threads of V8's worker pool, as a host configured them (`0`: V8 chooses).
static WORKER_THREADS: std::sync::Mutex<u32> = std::sync::Mutex::new(0);

/// The process's V8 platform, for pumping an isolate's foreground tasks (asynchronous WebAssembly
/// compilation, for one, finishes through them).
static PLATFORM: OnceLock<v8::SharedRef<v8::Platform>> = OnceLock::new();

/// Foreground tasks run per turn of a run's event loop, at most: a task may post another as it
/// ends (V8's sweeper does, slice by slice; one never finished after a run past its memory), and
/// the loop must get back to the host's messages and the program's ending.
const TASKS_PER_PUMP: usize = 64;

/// Runs the foreground tasks V8's worker threads posted for `isolate`, a bounded number of them
/// ([`TASKS_PER_PUMP`]; the rest wait for the next turn).
pub(crate) fn pump(isolate: &mut v8::Isolate) {
    if let Some(platform) = PLATFORM.get() {
        for _ in 0..TASKS_PER_PUMP {
            if !v8::Platform::pump_message_loop(platform, isolate, false) {
                break;
            }
        }
    }
}

/// Starts `job` on a new isolate thread named `name`, initialising V8 first unless
/// [`initialize`] did.
pub(crate) fn spawn_isolate_thread(
    name: String,
    job: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    let launcher = LAUNCHER
        .get_or_init(start_launcher)
        .as_ref()
        .map_err(|why| std::io::Error::other(why.clone()))?;
    let (reply, answer) = sync_channel(1);
    let requests = launcher.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    requests
        .send((name, Box::new(job), reply))
        .map_err(|_| std::io::Error::other("the V8 launcher thread is gone"))?;
    answer.recv().map_err(|_| std::io::Error::other("the V8 launcher thread is gone"))?
}

fn start_launcher() -> Result<std::sync::Mutex<SyncSender<Request>>, String> {
    let (requests, incoming) = sync_channel::<Request>(16);
    // The launcher lives as long as the process, like V8's own platform threads.
    std::thread::Builder::new()
        .name("code-runtime-v8-launcher".to_owned())
        .spawn(move || launcher(incoming))
        .map_err(|error| format!("cannot start the V8 launcher thread: {error}"))?;
    Ok(std::sync::Mutex::new(requests))
}

/// Starts a cell's isolate thread, which initialises V8 before it runs `job`.
///
/// A cell runs one program and its compute budget counts every thread it has: V8 there runs
/// single-threaded (`--single-threaded`: garbage collection and compilation on the isolate's
/// thread, no worker pool), so a cell has two threads whatever the machine: this one and the
/// process's main thread, which waits for it. A pool of V8's own choosing would be one thread per
/// processor but one, each with its stack and V8's per-thread state: memory every waiting run
/// holds, and more of it the larger the host.
pub(crate) fn spawn_cell_thread(
    name: String,
    job: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).stack_size(ISOLATE_STACK_BYTES).spawn(move || {
        // Before V8 starts: the flag sets what the platform below cannot (V8 posts no work to
        // worker threads it does not have).
        v8::V8::set_flags_from_string("--single-threaded");
        let platform = v8::new_single_threaded_default_platform(false).make_shared();
        let _ = PLATFORM.set(platform.clone());
        start_v8(platform);
        job();
    })
}

/// Initialises V8 with `platform`, this process's handlers first: a fatal error can come with
/// the first isolate. A cell puts its own fatal-error handler in this one's place before it makes
/// its isolate (`cell.rs`); the trap handler finds no run to end there and lets the crash through.
fn start_v8(platform: v8::SharedRef<v8::Platform>) {
    v8::V8::set_fatal_error_handler(crate::abandonment::fatal_error);
    crate::abandonment::install_trap();
    v8::V8::initialize_platform(platform);
    v8::V8::initialize();
}

/// Sets the threads of this process's V8 worker pool (background compilation and garbage
/// collection), before V8 starts: `0` lets V8 choose from the processors online.
pub(crate) fn configure(worker_threads: u32) -> Result<(), code_runtime::ConfigError> {
    let mut configured = WORKER_THREADS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if LAUNCHER.get().is_some() {
        return Err(code_runtime::ConfigError::new(
            "v8_worker_threads",
            "must be set before V8 starts (the first run in `thread` isolation)",
            worker_threads,
        ));
    }
    *configured = worker_threads;
    Ok(())
}

fn launcher(incoming: Receiver<Request>) {
    let threads = *WORKER_THREADS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let platform = v8::new_default_platform(threads, false).make_shared();
    let _ = PLATFORM.set(platform.clone());
    start_v8(platform);
    for (name, job, reply) in incoming {
        let spawned =
            std::thread::Builder::new().name(name).stack_size(ISOLATE_STACK_BYTES).spawn(job);
        let _ = reply.send(spawned);
    }
}

#[cfg(test)]
mod tests {
    /// The names of this process's threads.
    fn threads() -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .map(|name| name.trim().to_owned())
            .collect()
    }

    #[test]
    fn isolate_threads_start_after_v8_is_initialised_with_the_pool_configured() {
        // The only test of this binary that starts V8.
        super::configure(3).unwrap();
        let thread = super::spawn_isolate_thread("platform-check".to_owned(), || {
            let isolate = v8::Isolate::new(v8::CreateParams::default());
            drop(isolate);
        })
        .unwrap();
        thread.join().unwrap();
        assert!(super::PLATFORM.get().is_some());
        // A worker names itself once it runs, which may be after V8's initialisation returned:
        // until then it carries the launcher's name.
        let workers = || threads().iter().filter(|name| name.starts_with("V8 DefaultWork")).count();
        let named = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while workers() < 3 && std::time::Instant::now() < named {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(workers(), 3, "{:?}", threads());
        assert!(super::configure(1).is_err(), "too late once V8 started");
    }
}
