//! The reactor: one tokio runtime per process, on a thread of its own, that owns every timer,
//! socket, child-process watch and teardown task of every run.
//!
//! A provider's `run` future is polled by whatever executor the host uses: a tokio runtime with or
//! without its time and IO drivers, or `futures::executor::block_on`. Timers and sockets are tied
//! to the runtime they were created in, and tasks spawned on a runtime die with it; so the host
//! loop creates its timers here, providers register their sockets here, and a dropped run's
//! teardown is spawned here. Shutting down the host's runtime then neither panics a run nor leaks
//! its substrate.
//!
//! It starts lazily, with the first run (or the first provider that keeps substrates ahead of
//! runs). A host may name its thread first ([`configure`]) and stop it last ([`shutdown`]: every
//! runtime disposed, the thread joined).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};

use tokio::runtime::Handle;

use crate::error::ConfigError;

/// How the reactor's thread is made. The default names it `code-runtime-reactor`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReactorConfig {
    /// The thread's name (at most 15 bytes show in `/proc/<pid>/task/*/comm`).
    pub thread_name: String,
}

impl Default for ReactorConfig {
    fn default() -> Self {
        Self { thread_name: "code-runtime-reactor".to_owned() }
    }
}

impl ReactorConfig {
    /// The default, with its thread named `name`.
    pub fn named(name: impl Into<String>) -> Self {
        Self { thread_name: name.into() }
    }
}

static CONFIG: Mutex<Option<ReactorConfig>> = Mutex::new(None);

static REACTOR: OnceLock<Result<Reactor, String>> = OnceLock::new();

/// The reactor: its runtime's handle, and what stops and joins its thread.
struct Reactor {
    handle: Handle,
    stopped: AtomicBool,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Sets how the reactor's thread is made, before it starts (it starts with the first run, or
/// the first provider that keeps substrates ahead of runs). Without a call, the default is used.
///
/// # Errors
///
/// The reactor is running already.
pub fn configure(config: ReactorConfig) -> Result<(), ConfigError> {
    let mut slot = CONFIG.lock().unwrap_or_else(PoisonError::into_inner);
    if REACTOR.get().is_some() {
        return Err(ConfigError::new(
            "reactor",
            "must be configured before the first provider starts it",
            config.thread_name,
        ));
    }
    *slot = Some(config);
    Ok(())
}

/// Stops the reactor and joins its thread, for a host's last act (or a test's): every runtime
/// disposed first, so no teardown is left to run. Its tasks are dropped, its timers and sockets
/// closed; a later run fails (`worker-exit`, the reactor was shut down). Blocks until the thread
/// is gone (at once, from the reactor's own thread: it ends when the call returns). Idempotent.
pub fn shutdown() {
    let Some(Ok(reactor)) = REACTOR.get() else { return };
    reactor.stopped.store(true, Ordering::SeqCst);
    if let Some(stop) = reactor.stop.lock().unwrap_or_else(PoisonError::into_inner).take() {
        let _ = stop.send(());
    }
    let thread = reactor.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(thread) = thread {
        if thread.thread().id() != std::thread::current().id() {
            let _ = thread.join();
        }
    }
}

/// The reactor's runtime handle, started on first use.
///
/// # Errors
///
/// When the reactor thread cannot be started (the process is out of threads or memory), or was
/// shut down; the text says why.
pub fn handle() -> Result<&'static Handle, &'static str> {
    match REACTOR.get_or_init(start) {
        Ok(reactor) if !reactor.stopped.load(Ordering::SeqCst) => Ok(&reactor.handle),
        Ok(_) => Err("the reactor was shut down"),
        Err(why) => Err(why),
    }
}

fn start() -> Result<Reactor, String> {
    let config = CONFIG.lock().unwrap_or_else(PoisonError::into_inner).clone().unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name(&config.thread_name)
        .build()
        .map_err(|error| format!("cannot build the reactor runtime: {error}"))?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // The reactor lives until `shutdown`: it drives the runtime, so its timers fire and its
    // tasks run whatever the host's executors do.
    let thread = std::thread::Builder::new()
        .name(config.thread_name)
        .spawn(move || {
            let _ = runtime.block_on(stopped);
            // Dropped here, off any async context: its tasks are dropped with it.
            drop(runtime);
        })
        .map_err(|error| format!("cannot start the reactor thread: {error}"))?;
    Ok(Reactor {
        handle,
        stopped: AtomicBool::new(false),
        stop: Mutex::new(Some(stop)),
        thread: Mutex::new(Some(thread)),
    })
}

/// Runs `f` inside the reactor's runtime context (so the tokio resources it creates belong to the
/// reactor), or outside any when the reactor cannot start.
pub fn enter<T>(f: impl FnOnce() -> T) -> T {
    match handle() {
        Ok(handle) => {
            let _context = handle.enter();
            f()
        }
        Err(_) => f(),
    }
}

/// Spawns `task` on the reactor, detached; runs it to completion on the calling thread when the
/// reactor cannot start (only teardown tasks are spawned, and they are short).
pub fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    match handle() {
        Ok(handle) => drop(handle.spawn(task)),
        Err(_) => futures::executor::block_on(task),
    }
}

/// Polls `future` in the caller's tokio context when there is one, and inside the reactor's when
/// there is none, so a binding closure that uses tokio works under any executor.
pub fn in_some_runtime<F: Future>(future: F) -> InSomeRuntime<F> {
    InSomeRuntime { future }
}

pin_project_lite::pin_project! {
    /// The future of [`in_some_runtime`].
    #[derive(Debug)]
    pub struct InSomeRuntime<F> {
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for InSomeRuntime<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let future = self.project().future;
        if Handle::try_current().is_ok() {
            return future.poll(cx);
        }
        match handle() {
            Ok(reactor) => {
                let _context = reactor.enter();
                future.poll(cx)
            }
            Err(_) => future.poll(cx),
        }
    }
}
