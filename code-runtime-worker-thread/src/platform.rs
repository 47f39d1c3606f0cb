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

static LAUNCHER: OnceLock<std::sync::Mutex<SyncSender<Request>>> = OnceLock::new();

/// The process's V8 platform, for pumping an isolate's foreground tasks (asynchronous WebAssembly
/// compilation, for one, finishes through them).
static PLATFORM: OnceLock<v8::SharedRef<v8::Platform>> = OnceLock::new();

/// The in-isolate bootstrap, baked into the startup snapshot: the factory of the declared error
/// classes (real `Error` subclasses), parked on the global object until `isolate::install` takes
/// it off. Console and timers are native functions bound to each run's state, created per run.
pub(crate) const BOOTSTRAP_SOURCE: &str = "Object.defineProperty(globalThis, '__code_runtime_bootstrap__', {\n\
    configurable: true,\n\
    value: function (Base, name) {\n\
      const C = class extends Base {};\n\
      Object.defineProperty(C, 'name', { value: name });\n\
      Object.defineProperty(C.prototype, 'name', { value: name, writable: true, configurable: true });\n\
      return C;\n\
    },\n\
  });";

/// Where [`BOOTSTRAP_SOURCE`] parks the factory.
pub(crate) const BOOTSTRAP_GLOBAL: &str = "__code_runtime_bootstrap__";

/// The startup snapshot every isolate is created from, made once on the launcher thread.
static SNAPSHOT: OnceLock<Option<&'static [u8]>> = OnceLock::new();

/// The snapshot, or `None` if V8 could not make one (isolates then run the bootstrap themselves).
pub(crate) fn snapshot() -> Option<&'static [u8]> {
    SNAPSHOT.get().copied().flatten()
}

fn make_snapshot() -> Option<&'static [u8]> {
    let mut creator = v8::Isolate::snapshot_creator(None, None);
    {
        v8::scope!(let scope, &mut creator);
        let context = v8::Context::new(scope, Default::default());
        let scope = &mut v8::ContextScope::new(scope, context);
        let source = v8::String::new(scope, BOOTSTRAP_SOURCE)?;
        v8::Script::compile(scope, source, None)?.run(scope)?;
        scope.set_default_context(context);
    }
    let blob = creator.create_blob(v8::FunctionCodeHandling::Keep)?;
    // Made once per process and used by every isolate until the process ends.
    Some(Box::leak(blob.to_vec().into_boxed_slice()))
}

/// Runs the foreground tasks V8's worker threads posted for `isolate`.
pub(crate) fn pump(isolate: &mut v8::Isolate) {
    if let Some(platform) = PLATFORM.get() {
        while v8::Platform::pump_message_loop(platform, isolate, false) {}
    }
}

/// Starts `job` on a new isolate thread named `name`.
pub(crate) fn spawn_isolate_thread(
    name: String,
    job: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    let launcher = LAUNCHER.get_or_init(|| {
        let (requests, incoming) = sync_channel::<Request>(16);
        // The launcher lives as long as the process, like V8's own platform threads.
        std::thread::Builder::new()
            .name("code-runtime-v8-launcher".to_owned())
            .spawn(move || launcher(incoming))
            .expect("cannot start the V8 launcher thread");
        std::sync::Mutex::new(requests)
    });
    let (reply, answer) = sync_channel(1);
    let requests = launcher.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    requests
        .send((name, Box::new(job), reply))
        .map_err(|_| std::io::Error::other("the V8 launcher thread is gone"))?;
    answer.recv().map_err(|_| std::io::Error::other("the V8 launcher thread is gone"))?
}

fn launcher(incoming: Receiver<Request>) {
    let platform = v8::new_default_platform(0, false).make_shared();
    let _ = PLATFORM.set(platform.clone());
    v8::V8::initialize_platform(platform);
    v8::V8::initialize();
    let _ = SNAPSHOT.set(make_snapshot());
    for (name, job, reply) in incoming {
        let spawned =
            std::thread::Builder::new().name(name).stack_size(ISOLATE_STACK_BYTES).spawn(job);
        let _ = reply.send(spawned);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn isolates_start_from_the_startup_snapshot() {
        let thread = super::spawn_isolate_thread("snapshot-check".to_owned(), || {}).unwrap();
        thread.join().unwrap();
        let snapshot = super::snapshot().expect("the launcher made a startup snapshot");
        assert!(!snapshot.is_empty());
    }
}
