//! One run on the host side: strip, start the isolate thread, serve binding calls, feed the
//! ledger, enforce the budgets, and join the thread.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use code_runtime::json::{self, JsonValue};
use code_runtime::{
    Admission, BindingError, CodeRunFailure, CodeRunRequest, CodeRunResult, Outcome, RunPermit,
};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bridge::{Finished, FromIsolate, ToIsolate};
use crate::config::WorkerThreadConfig;
use crate::isolate::{NamespaceSetup, Setup};
use crate::termination::{MemoryBudget, Reason, Termination};
use crate::{platform, strip};

/// What every run of one runtime shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: WorkerThreadConfig,
    /// The gate's disposal token (see `code_runtime::RunGate`).
    pub(crate) disposed: CancellationToken,
}

/// Runs a validated request to its end.
pub(crate) async fn run(
    shared: &Shared,
    request: CodeRunRequest,
    permit: RunPermit,
) -> CodeRunResult {
    let limits = shared.config.limits;
    let mut ledger = limits.ledger();
    let start = Instant::now();

    let mut parameters = vec!["console"];
    parameters.extend(request.bindings.iter().map(|namespace| namespace.global.as_str()));
    parameters.extend(
        request
            .bindings
            .iter()
            .filter_map(|namespace| namespace.error_class.as_ref())
            .map(|class| class.name.as_str()),
    );
    let wrapped = match strip::strip_and_wrap(&request.program, &parameters) {
        Ok(wrapped) => wrapped,
        // Nothing is started for a program that does not strip.
        Err(message) => return ledger.settle(Outcome::Failed(CodeRunFailure::exception(message))),
    };

    let memory_bytes =
        usize::try_from(limits.max_memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let termination = Arc::new(Termination::default());
    let setup = Setup {
        source: wrapped.source,
        column_offset: wrapped.column_offset,
        namespaces: request
            .bindings
            .iter()
            .map(|namespace| NamespaceSetup {
                names: namespace.functions.keys().cloned().collect(),
                error_class: namespace
                    .error_class
                    .as_ref()
                    .map(|class| (class.name.clone(), class.member_name_property.clone())),
            })
            .collect(),
        memory_bytes,
        allow_eval: shared.config.allow_eval,
        allow_wasm: shared.config.allow_wasm,
        budget: Arc::new(MemoryBudget::new(memory_bytes)),
        termination: termination.clone(),
    };
    let functions: Vec<_> = request
        .bindings
        .iter()
        .flat_map(|namespace| {
            namespace.functions.iter().map(move |(name, function)| {
                (format!("{}.{name}", namespace.global), function.clone())
            })
        })
        .collect();

    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (inbox, inbox_rx) = std_mpsc::channel();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("code-runtime-v8-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let thread = match platform::spawn_isolate_thread(name, move || {
        crate::isolate::run(setup, events_tx, inbox_rx)
    }) {
        Ok(thread) => thread,
        Err(error) => {
            return ledger.settle(Outcome::Failed(CodeRunFailure::worker_error(format!(
                "cannot start the isolate thread: {error}"
            ))));
        }
    };
    let mut guard = ThreadGuard {
        thread: Some(thread),
        inbox: inbox.clone(),
        termination: termination.clone(),
        permit: Some(permit),
    };

    let wall = tokio::time::sleep_until(start + Duration::from_millis(limits.max_wall_ms));
    tokio::pin!(wall);
    let compute = Duration::from_millis(limits.compute_ms);
    let cpu_check = tokio::time::sleep(Duration::from_millis(1));
    tokio::pin!(cpu_check);
    let mut cpu_clock = None;
    let cancelled = request.cancelled();
    tokio::pin!(cancelled);
    let mut calls: FuturesUnordered<PendingCall> = FuturesUnordered::new();
    let stop = |guard: &ThreadGuard, reason: Reason| {
        if guard.termination.stop(reason) {
            let _ = guard.inbox.send(ToIsolate::Stop);
        }
    };

    let finished = loop {
        tokio::select! {
            biased;
            () = &mut cancelled, if termination.reason().is_none() => stop(&guard, Reason::Cancelled),
            () = shared.disposed.cancelled(), if termination.reason().is_none() => stop(&guard, Reason::Disposed),
            () = &mut wall, if termination.reason().is_none() => stop(&guard, Reason::WallClock),
            () = &mut cpu_check, if cpu_clock.is_some() && termination.reason().is_none() => {
                let used = cpu_used(cpu_clock);
                if used >= compute {
                    stop(&guard, Reason::Compute);
                } else {
                    // The thread cannot use CPU faster than wall time: sleep until the rest of
                    // the budget could be spent at the earliest.
                    cpu_check.as_mut().reset(Instant::now() + (compute - used).max(Duration::from_millis(1)));
                }
            }
            event = events.recv() => match event {
                Some(FromIsolate::Started { cpu_clock: clock }) => cpu_clock = clock,
                Some(FromIsolate::Log(line)) => {
                    if ledger.admit_log(line) == Admission::Exceeded {
                        stop(&guard, Reason::OutputExceeded);
                    }
                }
                Some(FromIsolate::Call { call, member, args }) => {
                    let (label, function) = functions[member].clone();
                    let future = AssertUnwindSafe(function.call(args)).catch_unwind();
                    calls.push(Box::pin(async move { (call, label, future.await) }));
                }
                Some(FromIsolate::Finished(finished)) => break finished,
                // The thread ended without a word: it panicked.
                None => break Finished::Terminated,
            },
            Some((call, label, outcome)) = calls.next(), if !calls.is_empty() => {
                let outcome = match outcome {
                    Ok(Ok(value)) if json::validate(&value).is_ok() => Ok(value),
                    Ok(Ok(value)) => {
                        json::drop_value(value);
                        Err("binding resolution must be lossless JSON".to_owned())
                    }
                    Ok(Err(error)) => Err(error.message().to_owned()),
                    Err(_panic) => Err(format!("binding {} panicked", json::quote(&label))),
                };
                let _ = guard.inbox.send(ToIsolate::Settle { call, outcome });
            }
        }
    };
    guard.join();

    let outcome = match (finished, termination.reason()) {
        (_, Some(Reason::Cancelled)) => Outcome::Failed(CodeRunFailure::cancelled()),
        (_, Some(Reason::Disposed)) => Outcome::Failed(CodeRunFailure::runtime_disposed()),
        (_, Some(Reason::WallClock)) => {
            Outcome::Failed(CodeRunFailure::wall_clock_reached(limits.max_wall_ms))
        }
        (_, Some(Reason::Compute)) => {
            Outcome::Failed(CodeRunFailure::compute_budget_exhausted(limits.compute_ms))
        }
        (_, Some(Reason::OutOfMemory)) => Outcome::Failed(CodeRunFailure::worker_error(format!(
            "out of memory: the program exceeded its {} MB heap",
            limits.max_memory_mb
        ))),
        (_, Some(Reason::OutputExceeded)) => {
            ledger.exceed();
            Outcome::Completed(None)
        }
        (_, Some(Reason::Abandoned)) | (Finished::Terminated, None) => {
            Outcome::Failed(CodeRunFailure::worker_error("the isolate thread stopped unexpectedly"))
        }
        (Finished::Completed(value), None) => Outcome::Completed(value),
        (Finished::Threw(message), None) => Outcome::Failed(CodeRunFailure::exception(message)),
        (Finished::InvalidOutput, None) => Outcome::Failed(CodeRunFailure::invalid_output()),
    };
    ledger.settle(outcome)
}

type CallOutcome = std::thread::Result<Result<JsonValue, BindingError>>;

/// A binding call in flight: the isolate's call id, `global.name` for diagnostics, and how it ended.
type PendingCall = Pin<Box<dyn Future<Output = (u64, String, CallOutcome)> + Send>>;

fn cpu_used(clock: Option<libc::clockid_t>) -> Duration {
    let Some(clock) = clock else { return Duration::ZERO };
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own; a clock of a finished thread fails.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Owns the isolate thread until it is joined. Dropped early (the run future was dropped), it
/// terminates the isolate and joins the thread in the background, holding the run's permit until then so `dispose` still waits for it.
struct ThreadGuard {
    thread: Option<JoinHandle<()>>,
    inbox: std_mpsc::Sender<ToIsolate>,
    termination: Arc<Termination>,
    permit: Option<RunPermit>,
}

impl ThreadGuard {
    /// Joins the thread. It has disposed its isolate and sent `Finished` as its last act, so the
    /// join waits only for the thread to return: microseconds, cheaper in place than a hop to
    /// tokio's blocking pool.
    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        self.termination.stop(Reason::Abandoned);
        let _ = self.inbox.send(ToIsolate::Stop);
        let permit = self.permit.take();
        // The thread may still be starting its isolate; once it has, it sees the recorded reason
        // and stops. Join it off this thread.
        let join = move || {
            let _ = thread.join();
            drop(permit);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(join)),
            Err(_) => join(),
        }
    }
}
