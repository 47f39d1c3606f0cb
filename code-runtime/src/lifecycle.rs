//! [`RunGate`]: the disposal rule every provider follows, in one place: runs enter through the
//! gate, `dispose` closes it, fails the runs in flight and waits until each has torn its substrate
//! down.

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::error::ContractError;

/// Admits runs until disposal, and tells running ones when disposal began.
///
/// A provider holds one gate. Each run calls [`RunGate::enter`] first and keeps the returned
/// [`RunPermit`] until its substrate is gone (a permit may move to a background task that reaps a
/// dropped run's substrate). [`RunGate::dispose`] completes once every permit is dropped.
#[derive(Debug, Default)]
pub struct RunGate {
    tracker: TaskTracker,
    disposed: CancellationToken,
}

/// Proof that a run was admitted; disposal waits for it to be dropped.
#[derive(Debug)]
pub struct RunPermit(#[allow(dead_code, reason = "held for its Drop")] TaskTrackerToken);

impl RunGate {
    /// A gate that admits runs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Admits one run.
    ///
    /// # Errors
    ///
    /// [`ContractError::Disposed`] once [`dispose`](RunGate::dispose) has begun.
    pub fn enter(&self) -> Result<RunPermit, ContractError> {
        // Take the permit before checking: a `dispose` that closes the tracker after this point
        // waits for this run, one that closed it before is seen here.
        let permit = RunPermit(self.tracker.token());
        if self.tracker.is_closed() {
            return Err(ContractError::Disposed);
        }
        Ok(permit)
    }

    /// Cancelled when disposal begins: a running run stops and resolves as `abort`
    /// (`runtime disposed`).
    pub fn disposed(&self) -> &CancellationToken {
        &self.disposed
    }

    /// Closes the gate, fails the runs in flight, and completes once every permit is dropped.
    /// Idempotent.
    pub async fn dispose(&self) {
        self.tracker.close();
        self.disposed.cancel();
        self.tracker.wait().await;
    }
}
