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
//!
//! Why a poll may look at the bell a little before it returns ([`Waiting`]): when the run waits
//! for its isolate and nothing else (no binding call or approver in Python, no other run), the
//! isolate's answer typically comes within microseconds; going back to the loop would put its
//! thread to sleep in `epoll_wait`, and waking a sleeping thread costs tens of microseconds on
//! a virtual machine, more than the answer took. Only while such looks pay, though: see
//! [`Spins`].

use std::future::Future;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use code_runtime::{CodeRunResult, ContractError};
use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::bell::{Bell, Spins};
use crate::outcome::outcome_tuple;

/// How long a poll looks at the bell before it returns (see the module's doc): the isolate's
/// own wait for the host spins as long (`code-runtime-worker-thread/src/message.rs`).
const SPIN: Duration = Duration::from_micros(50);

/// How many times one poll polls the run again after its bell rang: a bound on how long the loop
/// waits for its thread. A binding call's task starts eagerly (`_namespace.py`), so a binding
/// that answers at once answers inside the poll, and a whole round trip is one more poll.
const MAX_SPINS: usize = 8;

/// What the runs of this process wait for in Python: the runs not ended, and the binding calls
/// and approvals handed to Python and not answered. A poll looks at its bell before it returns
/// only when it is the one run and nothing is in Python: otherwise the loop has work to do.
pub(crate) struct Waiting;

static RUNS: AtomicUsize = AtomicUsize::new(0);
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);

impl Waiting {
    /// Counts one piece of work in Python until the returned guard is dropped.
    pub(crate) fn in_python() -> InPython {
        IN_PYTHON.fetch_add(1, Ordering::SeqCst);
        InPython
    }

    fn alone() -> bool {
        RUNS.load(Ordering::SeqCst) == 1 && IN_PYTHON.load(Ordering::SeqCst) == 0
    }
}

/// A binding call or an approval in Python (see [`Waiting`]).
pub(crate) struct InPython;

impl Drop for InPython {
    fn drop(&mut self) {
        IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    }
}

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
    /// Whether a poll holds `run`: a binding that answers inside that poll (its task started
    /// eagerly) sees it without releasing the GIL to try the lock.
    polling: AtomicBool,
    /// How this run's waits for its bell have gone.
    spins: Spins,
    token: CancellationToken,
}

impl RunDriver {
    pub(crate) fn new(
        future: RunFuture,
        done: Py<PyAny>,
        token: CancellationToken,
    ) -> std::io::Result<Self> {
        let bell = Arc::new(Bell::new()?);
        RUNS.fetch_add(1, Ordering::SeqCst);
        Ok(Self {
            bell,
            run: Mutex::new(Some((future, done))),
            finished: AtomicBool::new(false),
            polling: AtomicBool::new(false),
            spins: Spins::default(),
            token,
        })
    }
}

impl RunDriver {
    /// Marks the run ended (once: it no longer counts among the runs that wait).
    fn finish(&self) {
        if !self.finished.swap(true, Ordering::SeqCst) {
            RUNS.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether the bell rings within [`SPIN`], looked at without sleeping, unless recent looks
    /// found nothing (see [`Spins`]).
    fn waited_for_bell(&self) -> bool {
        if !self.spins.worth_it() {
            return false;
        }
        let rung = self.bell.rings_within(SPIN);
        self.spins.record(rung);
        rung
    }
}

impl Drop for RunDriver {
    fn drop(&mut self) {
        self.finish();
    }
}

/// How a poll takes the run's lock.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lock {
    /// Waits for it (the loop's poll; only a disposal holds it otherwise, briefly).
    Wait,
    /// Only if nobody holds it: the holder may be this thread, further up the stack.
    IfFree,
}

impl RunDriver {
    /// Polls the run; `None` when `lock` is [`Lock::IfFree`] and the run is held.
    fn polled(&self, py: Python<'_>, lock: Lock) -> PyResult<Option<bool>> {
        if lock == Lock::IfFree && self.polling.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let waker = Waker::from(self.bell.clone());
        let ended = py.detach(|| {
            let mut slot = match self.run.try_lock() {
                Ok(slot) => slot,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) if lock == Lock::IfFree => return Polled::Busy,
                Err(TryLockError::WouldBlock) => {
                    self.run.lock().unwrap_or_else(PoisonError::into_inner)
                }
            };
            // Declared after `slot`, so dropped before it: cleared while the lock is held.
            let _polling = Flag::raise(&self.polling);
            // Reset with the lock held, before the poll: a wake from here on rings again, and
            // this poll sees whatever rang before.
            self.bell.reset();
            let Some((future, _)) = slot.as_mut() else { return Polled::Gone };
            let mut context = Context::from_waker(&waker);
            let mut polled = future.as_mut().poll(&mut context);
            // A few times per poll at most, so the loop gets its thread back whatever the run
            // does.
            for _ in 0..MAX_SPINS {
                // Rung already (a binding answered inside this poll, as an eagerly started
                // call does): polled again at once, whatever else waits. Not rung: waited for
                // only when nothing else can have work for the loop.
                let again = polled.is_pending()
                    && (self.bell.rung() || (Waiting::alone() && self.waited_for_bell()));
                if !again {
                    break;
                }
                self.bell.reset();
                polled = future.as_mut().poll(&mut context);
            }
            match polled {
                Poll::Pending => Polled::Pending,
                Poll::Ready(outcome) => {
                    self.finish();
                    match slot.take() {
                        Some((_, done)) => Polled::Ended(outcome, done),
                        None => Polled::Gone,
                    }
                }
            }
        });
        match ended {
            Polled::Busy => Ok(None),
            Polled::Gone => Ok(Some(true)),
            Polled::Pending => Ok(Some(false)),
            Polled::Ended(outcome, done) => {
                done.call1(py, (outcome_tuple(py, outcome)?,))?;
                Ok(Some(true))
            }
        }
    }
}

/// Set for as long as it lives.
struct Flag<'a>(&'a AtomicBool);

impl<'a> Flag<'a> {
    fn raise(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::SeqCst);
        Self(flag)
    }
}

impl Drop for Flag<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// What one poll found.
enum Polled {
    /// The run is held by another poll.
    Busy,
    /// It ended before, or was abandoned.
    Gone,
    Pending,
    /// It has just ended: its outcome, and the callable that gets it.
    Ended(Result<CodeRunResult, ContractError>, Py<PyAny>),
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
        Ok(self.polled(py, Lock::Wait)?.unwrap_or(true))
    }

    /// [`poll`](Self::poll), from the task of a binding call that has just answered, on the
    /// loop's thread: the run takes the answer now rather than at the loop's next turn (which
    /// would first ask the selector for the bell the answer rang). `None` when the run is being
    /// polled already (the call answered inside that poll, as an eagerly started task does):
    /// that poll sees the answer.
    fn poll_now(&self, py: Python<'_>) -> PyResult<Option<bool>> {
        self.polled(py, Lock::IfFree)
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
            self.finish();
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
