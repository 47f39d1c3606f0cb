//! [`RunDriver`]: a run polled on the caller's event loop thread.
//!
//! Why there: a run's binding calls are Python coroutines on that loop. Polled on another thread,
//! each call would cross threads twice more (to the loop to start the call, back with its answer)
//! and contend for the GIL each time. Polled on the loop, a call starts where it runs and its
//! answer wakes the run on the same thread.
//!
//! How: the run's waker is a [`Bell`], an eventfd the loop watches (`loop.add_reader`). Any
//! thread may ring it (the reactor, a V8 thread, a cell's socket); ringing is a `write(2)`, no
//! GIL. The loop then calls [`RunDriver::poll`], which polls the run with the GIL released (the
//! host loop's own work needs no Python; binding calls take it back on this same thread).

use std::future::Future;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use code_runtime::{CodeRunResult, ContractError};
use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::bell::Bell;
use crate::outcome::outcome_tuple;

pub(crate) type RunFuture =
    Pin<Box<dyn Future<Output = Result<CodeRunResult, ContractError>> + Send>>;

/// One run, with the callable that gets its outcome.
#[pyclass(frozen, module = "code_runtime._native")]
pub(crate) struct RunDriver {
    bell: Arc<Bell>,
    /// Locked by the loop's poll for as long as the run is polled, with the GIL released: so
    /// anyone else takes it with the GIL released too (a binding call inside the poll takes the
    /// GIL back, and a thread that held the GIL while waiting for this lock would deadlock it).
    run: Mutex<Option<(RunFuture, Py<PyAny>)>>,
    /// Whether `run` is empty, readable without its lock.
    finished: AtomicBool,
    token: CancellationToken,
}

impl RunDriver {
    pub(crate) fn new(
        future: RunFuture,
        done: Py<PyAny>,
        token: CancellationToken,
    ) -> std::io::Result<Self> {
        Ok(Self {
            bell: Arc::new(Bell::new()?),
            run: Mutex::new(Some((future, done))),
            finished: AtomicBool::new(false),
            token,
        })
    }
}

#[pymethods]
impl RunDriver {
    /// The descriptor the loop watches; readable when the run wants a poll.
    #[getter]
    fn fd(&self) -> i32 {
        self.bell.fd.as_raw_fd()
    }

    /// Polls the run (on its loop's thread); when it ends, calls `done(outcome)` and returns
    /// `True`. Idempotent after the end.
    fn poll(&self, py: Python<'_>) -> PyResult<bool> {
        self.bell.reset();
        let waker = Waker::from(self.bell.clone());
        let ended = py.detach(|| {
            let mut slot = self.run.lock().unwrap_or_else(PoisonError::into_inner);
            let (future, _) = slot.as_mut()?;
            match future.as_mut().poll(&mut Context::from_waker(&waker)) {
                Poll::Pending => Some(None),
                Poll::Ready(outcome) => {
                    self.finished.store(true, Ordering::SeqCst);
                    slot.take().map(|(_, done)| Some((outcome, done)))
                }
            }
        });
        match ended {
            // Ended before, or abandoned.
            None => Ok(true),
            Some(None) => Ok(false),
            Some(Some((outcome, done))) => {
                done.call1(py, (outcome_tuple(py, outcome)?,))?;
                Ok(true)
            }
        }
    }

    /// Cancels the run (idempotent): it ends as `abort` at its next poll.
    fn cancel(&self) {
        self.token.cancel();
    }

    /// Drops the run without waiting for its end, for a loop that will not poll it again: its
    /// substrate is torn down on the reactor, and `done` is never called.
    fn abandon(&self, py: Python<'_>) {
        self.token.cancel();
        let run = py.detach(|| {
            let run = self.run.lock().unwrap_or_else(PoisonError::into_inner).take();
            self.finished.store(true, Ordering::SeqCst);
            run
        });
        // Dropped attached: the binding calls it cancels take the GIL on this thread.
        drop(run);
    }

    /// Whether the run has ended (or was abandoned).
    #[getter]
    fn finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }
}
