//! The reactor: one tokio runtime per process, on a thread of its own, that owns every timer,
//! socket, child-process watch and teardown task of every run.
//!
//! A provider's `run` future is polled by whatever executor the host uses: a tokio runtime with or
//! without its time and IO drivers, or `futures::executor::block_on`. Timers and sockets are tied
//! to the runtime they were created in, and tasks spawned on a runtime die with it; so the host
//! loop creates its timers here, providers register their sockets here, and a dropped run's
//! teardown is spawned here. Shutting down the host's runtime then neither panics a run nor leaks
//! its substrate.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::runtime::Handle;

static REACTOR: OnceLock<Result<Handle, String>> = OnceLock::new();

/// The reactor's runtime handle, started on first use.
///
/// # Errors
///
/// When the reactor thread cannot be started (the process is out of threads or memory); the text
/// says why.
pub fn handle() -> Result<&'static Handle, &'static str> {
    REACTOR.get_or_init(start).as_ref().map_err(String::as_str)
}

fn start() -> Result<Handle, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("code-runtime-reactor")
        .build()
        .map_err(|error| format!("cannot build the reactor runtime: {error}"))?;
    let handle = runtime.handle().clone();
    // The reactor lives as long as the process: it drives the runtime forever, so its timers
    // fire and its tasks run whatever the host's executors do.
    std::thread::Builder::new()
        .name("code-runtime-reactor".to_owned())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(|error| format!("cannot start the reactor thread: {error}"))?;
    Ok(handle)
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
