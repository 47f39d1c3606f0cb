//! V8 is initialised once per process, on a long-lived launcher thread that also starts every
//! isolate thread, so each isolate thread descends from the thread that initialised V8 (V8's
//! per-thread memory-protection keys are inherited from the creating thread).

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

/// The process's V8 platform, for pumping an isolate's foreground tasks (asynchronous WebAssembly
/// compilation, for one, finishes through them).
static PLATFORM: OnceLock<v8::SharedRef<v8::Platform>> = OnceLock::new();

/// Runs the foreground tasks V8's worker threads posted for `isolate`.
pub(crate) fn pump(isolate: &mut v8::Isolate) {
    if let Some(platform) = PLATFORM.get() {
        while v8::Platform::pump_message_loop(platform, isolate, false) {}
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

/// Starts initialising V8 now, in the background (a cell does, before it knows its program).
/// A launcher that cannot start is reported by the first isolate thread asked for.
pub(crate) fn initialize() {
    LAUNCHER.get_or_init(start_launcher);
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

fn launcher(incoming: Receiver<Request>) {
    let platform = v8::new_default_platform(0, false).make_shared();
    let _ = PLATFORM.set(platform.clone());
    v8::V8::initialize_platform(platform);
    v8::V8::initialize();
    for (name, job, reply) in incoming {
        let spawned =
            std::thread::Builder::new().name(name).stack_size(ISOLATE_STACK_BYTES).spawn(job);
        let _ = reply.send(spawned);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn isolate_threads_start_after_v8_is_initialised() {
        let thread = super::spawn_isolate_thread("platform-check".to_owned(), || {
            let isolate = v8::Isolate::new(v8::CreateParams::default());
            drop(isolate);
        })
        .unwrap();
        thread.join().unwrap();
        assert!(super::PLATFORM.get().is_some());
    }
}
