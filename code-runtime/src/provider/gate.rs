//! [`RunGate`]: the disposal rule, the drain and the cap on runs in flight, in one place (a
//! provider's runs and a gateway's pass the same gate). Runs enter through the gate and wait
//! there for a slot; `dispose` closes it, fails the runs in flight and waits until each has torn
//! its substrate down; `drain` closes it and lets the runs in flight finish.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::error::{ConfigError, ContractError};

/// The default cap on runs in flight per provider. Runs mostly wait on bindings, so the cap is well
/// above the core count; what it bounds is the substrates alive at once (isolate threads with their
/// stacks, child processes).
pub const DEFAULT_MAX_CONCURRENT_RUNS: usize = 64;

/// Admits runs until disposal or a drain, at most `max_concurrent_runs` at a time, and tells
/// running ones when disposal began.
///
/// A provider holds one gate. Each run calls [`RunGate::enter`] first, then waits for a slot with
/// [`RunGate::slot`], and keeps the [`RunPermit`] until its substrate is gone (a permit may move
/// to a background task that reaps a dropped run's substrate). [`RunGate::dispose`] completes once
/// every permit is dropped.
#[derive(Debug)]
pub struct RunGate {
    tracker: TaskTracker,
    disposed: CancellationToken,
    slots: Arc<Semaphore>,
}

/// Proof that a run was admitted (disposal waits for it to be dropped), and, once granted, its
/// slot.
#[derive(Debug)]
pub struct RunPermit {
    _admitted: TaskTrackerToken,
    slot: Option<OwnedSemaphorePermit>,
}

impl RunGate {
    /// A gate that admits at most `max_concurrent_runs` runs at a time.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for zero, or for more than a semaphore can count.
    pub fn new(max_concurrent_runs: usize) -> Result<Self, ConfigError> {
        Self::validate(max_concurrent_runs)?;
        Ok(Self {
            tracker: TaskTracker::new(),
            disposed: CancellationToken::new(),
            slots: Arc::new(Semaphore::new(max_concurrent_runs)),
        })
    }

    /// A gate with no cap: every run admitted gets its slot at once.
    pub fn unbounded() -> Self {
        Self {
            tracker: TaskTracker::new(),
            disposed: CancellationToken::new(),
            slots: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
        }
    }

    /// Whether `max_concurrent_runs` is a cap a gate can have: a provider's configuration checks
    /// it before the provider's slow start-up does anything.
    ///
    /// # Errors
    ///
    /// Zero, or more than the semaphore can count.
    pub fn validate(max_concurrent_runs: usize) -> Result<(), ConfigError> {
        if max_concurrent_runs == 0 || max_concurrent_runs > Semaphore::MAX_PERMITS {
            return Err(ConfigError::new(
                "max_concurrent_runs",
                "must be a positive number",
                max_concurrent_runs,
            ));
        }
        Ok(())
    }

    /// Admits one run.
    ///
    /// # Errors
    ///
    /// [`ContractError::Disposed`] once [`dispose`](RunGate::dispose) or
    /// [`drain`](RunGate::drain) has begun.
    pub fn enter(&self) -> Result<RunPermit, ContractError> {
        // Take the token before checking: a `dispose` that closes the tracker after this point
        // waits for this run, one that closed it before is seen here.
        let permit = RunPermit { _admitted: self.tracker.token(), slot: None };
        if self.tracker.is_closed() {
            return Err(ContractError::Disposed);
        }
        Ok(permit)
    }

    /// Waits for a free slot and records it in `permit`: `false` when a drain refused the run
    /// instead (it was still queued when [`drain`](RunGate::drain) began).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a run dropped while queued takes no slot and keeps its place in nothing (the
    /// semaphore is fair, so the runs behind it move up).
    pub async fn slot(&self, permit: &mut RunPermit) -> bool {
        if permit.slot.is_some() {
            return true;
        }
        // Only a drain closes the semaphore.
        match self.slots.clone().acquire_owned().await {
            Ok(slot) => {
                permit.slot = Some(slot);
                true
            }
            Err(_) => false,
        }
    }

    /// Takes no new run from now on and refuses the runs still queued for a slot; the runs in
    /// flight go on ([`drained`](RunGate::drained) waits for them). Idempotent.
    pub fn drain(&self) {
        self.tracker.close();
        self.slots.close();
    }

    /// Whether a drain or disposal has begun: no new run enters.
    pub fn is_closed(&self) -> bool {
        self.tracker.is_closed()
    }

    /// The runs admitted and not yet gone (queued or running, and a dropped run's substrate
    /// still being reaped).
    pub fn admitted(&self) -> usize {
        self.tracker.len()
    }

    /// Completes once the gate is closed ([`drain`](RunGate::drain),
    /// [`dispose`](RunGate::dispose)) and every permit is dropped.
    pub async fn drained(&self) {
        self.tracker.wait().await;
    }

    /// Cancelled when disposal begins: a running run stops and resolves as `abort`
    /// (`runtime disposed`).
    pub fn disposed(&self) -> &CancellationToken {
        &self.disposed
    }

    /// Closes the gate, fails the runs in flight and queued, and completes once every permit is
    /// dropped. Idempotent.
    pub async fn dispose(&self) {
        self.tracker.close();
        self.disposed.cancel();
        self.tracker.wait().await;
    }
}

impl RunPermit {
    /// Whether the run has its slot ([`RunGate::slot`]).
    pub fn has_slot(&self) -> bool {
        self.slot.is_some()
    }
}
