//! [`HostMemory`]: what the host holds in its own memory because of one run, charged to that
//! run's memory budget before it is allocated.
//!
//! A program decides what the host holds on its behalf: the frame being read from its cell, the
//! values parsed out of it, the arguments of the calls it makes (while they wait and while they
//! run), the answers queued for it, the lines it printed. None of that is the program's own memory
//! (its isolate's heap, its cell's pages), so none of it is seen by the budgets inside the
//! substrate. Each piece is charged here first; a charge over the budget is refused, and the run
//! ends as out of memory, its pieces released as they drop.
//!
//! The budget is the run's memory budget again, on the host's side: a run holds at most that
//! much in its substrate and at most that much in the host.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the host keeps per log line beyond its text: the `String` in the ledger's `Vec` (24
/// bytes, twice that while the `Vec` has grown by doubling) and the allocator's rounding of its
/// buffer. 22 million empty lines fit a 64 MiB output budget (three bytes each in the JSON of the
/// logs) and would take a gigabyte of host memory unless each is charged this.
pub const LOG_LINE_BYTES: usize = 64;

/// One run's account of host memory: cheap to clone, every clone the same account.
#[derive(Clone, Debug)]
pub struct HostMemory {
    account: Arc<Account>,
}

#[derive(Debug)]
struct Account {
    limit: usize,
    held: AtomicUsize,
}

/// A charge held until it is dropped: a frame, a value, a queued answer.
#[derive(Debug)]
#[must_use = "dropping the charge releases it at once"]
pub struct Held {
    account: Arc<Account>,
    bytes: usize,
}

/// A charge [`HostMemory`] refused: the run is over its budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the host would hold more than {limit} bytes for this run")]
pub struct OverBudget {
    /// The budget.
    pub limit: usize,
}

impl HostMemory {
    /// An account with a budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self { account: Arc::new(Account { limit, held: AtomicUsize::new(0) }) }
    }

    /// An account without a budget, for what a host reads that no run sent.
    pub fn unlimited() -> Self {
        Self::new(usize::MAX)
    }

    /// The budget.
    pub fn limit(&self) -> usize {
        self.account.limit
    }

    /// What is held now.
    pub fn held(&self) -> usize {
        self.account.held.load(Ordering::Relaxed)
    }

    /// What may still be charged.
    pub fn room(&self) -> usize {
        self.account.limit.saturating_sub(self.held())
    }

    /// Charges `bytes` until the returned [`Held`] drops.
    ///
    /// # Errors
    ///
    /// [`OverBudget`], charging nothing, when they do not fit.
    pub fn hold(&self, bytes: usize) -> Result<Held, OverBudget> {
        self.charge(bytes)?;
        Ok(Held { account: self.account.clone(), bytes })
    }

    /// Charges `bytes` for the rest of the run (the account is dropped with it): what the run's
    /// result will hold, such as its log lines.
    ///
    /// # Errors
    ///
    /// [`OverBudget`], charging nothing, when they do not fit.
    pub fn keep(&self, bytes: usize) -> Result<(), OverBudget> {
        self.charge(bytes)
    }

    fn charge(&self, bytes: usize) -> Result<(), OverBudget> {
        let limit = self.account.limit;
        // Every charge checks against what every other holder holds now: no two can pass the
        // budget together.
        self.account
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|total| *total <= limit)
            })
            .map(|_| ())
            .map_err(|_| OverBudget { limit })
    }
}

impl Held {
    /// How many bytes this holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.account.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}
