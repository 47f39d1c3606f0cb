//! The executor of what a provider does outside any run (disposal): a tokio runtime of this
//! module's own, with one worker thread, started on first use. Runs themselves are polled on the
//! caller's event loop (`driver.rs`).
//!
//! Why not the reactor ([`code_runtime::provider::reactor`]): `done` callbacks take the GIL, and
//! a reactor thread waiting for the GIL would hold up every run's timers and sockets.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

static EXECUTOR: Mutex<Option<Runtime>> = Mutex::new(None);

/// How long [`shutdown`] gives the disposals still going to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A handle to the executor, started on first use (again after [`shutdown`]).
pub(crate) fn handle() -> std::io::Result<Handle> {
    let mut slot = EXECUTOR.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(runtime) = slot.as_ref() {
        return Ok(runtime.handle().clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("code-runtime-py")
        .enable_all()
        .build()?;
    let handle = runtime.handle().clone();
    *slot = Some(runtime);
    Ok(handle)
}

/// Stops the executor (joining its threads) and then the reactor.
pub(crate) fn shutdown() {
    let runtime = EXECUTOR.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(runtime) = runtime {
        runtime.shutdown_timeout(SHUTDOWN_GRACE);
    }
    code_runtime::provider::reactor::shutdown();
}
