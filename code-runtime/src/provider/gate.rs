//! [`RunGate`]: the disposal rule and the cap on runs in flight, in one place. Runs enter through
//! the gate and wait there for a slot; `dispose` closes it, fails the runs in flight and waits until
//! each has torn its substrate down.

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

/// Admits runs until disposal, at most `max_concurrent_runs` at a time, and tells running ones when
/// disposal began.
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
    /// [`ContractError::Disposed`] once [`dispose`](RunGate::dispose) has begun.
    pub fn enter(&self) -> Result<RunPermit, ContractError> {
        // Take the token before checking: a `dispose` that closes the tracker after this point
        // waits for this run, one that closed it before is seen here.
        let permit = RunPermit { _admitted: self.tracker.token(), slot: None };
        if self.tracker.is_closed() {
            return Err(ContractError::Disposed);
        }
        Ok(permit)
    }

    /// Waits for a free slot and records it in `permit`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a run dropped while queued takes no slot and keeps its place in nothing (the
    /// semaphore is fair, so the runs behind it move up).
    pub async fn slot(&self, permit: &mut RunPermit) {
        if permit.slot.is_some() {
            return;
        }
        // The semaphore is never closed, so acquiring cannot fail.
        if let Ok(slot) = self.slots.clone().acquire_owned().await {
            permit.slot = Some(slot);
        }
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
