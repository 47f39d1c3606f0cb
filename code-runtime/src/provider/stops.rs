//! [`Stops`]: what stops a run from outside (its token, disposal, the wall clock), and
//! [`ComputeCheck`]: when the host loop looks at the compute budget next.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::limits::Limits;
use crate::provider::{StopReason, reactor};

/// What stops a run from outside: the request's token, disposal, the wall clock. Each future is
/// made once per run: the host loop polls them on every turn.
pub(super) struct Stops {
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    disposed: Pin<Box<WaitForCancellationFutureOwned>>,
    wall: Pin<Box<Sleep>>,
    pub(super) limits: Limits,
    /// Since when the wall clock stands still: calls wait for a decision.
    held_since: Option<Instant>,
}

impl Stops {
    /// The stops of a run that started at `started` under `limits`; `Err` when the reactor that
    /// keeps the wall clock cannot start.
    pub(super) fn new(
        signal: CancellationToken,
        disposed: CancellationToken,
        started: Instant,
        limits: Limits,
    ) -> Result<Self, &'static str> {
        let deadline = started + Duration::from_millis(limits.max_wall_ms);
        let reactor = reactor::handle()?;
        let wall = {
            let _context = reactor.enter();
            Box::pin(tokio::time::sleep_until(deadline))
        };
        Ok(Self {
            cancelled: Box::pin(signal.cancelled_owned()),
            disposed: Box::pin(disposed.cancelled_owned()),
            wall,
            limits,
            held_since: None,
        })
    }

    /// Runs `work` until it completes (`None`) or a stop comes first (`Some(reason)`).
    pub(super) async fn first(&mut self, work: impl Future<Output = ()>) -> Option<StopReason> {
        let wall_runs = self.held_since.is_none();
        tokio::select! {
            biased;
            () = self.cancelled.as_mut() => Some(StopReason::Cancelled),
            () = self.disposed.as_mut() => Some(StopReason::Disposed),
            () = self.wall.as_mut(), if wall_runs => Some(StopReason::WallClock { max_wall_ms: self.limits.max_wall_ms }),
            () = work => None,
        }
    }

    /// Stops the wall clock while a call waits for a decision.
    pub(super) fn hold(&mut self) {
        self.held_since.get_or_insert_with(Instant::now);
    }

    /// Starts the wall clock again, its deadline moved by the time it stood still.
    pub(super) fn release(&mut self) {
        if let Some(since) = self.held_since.take() {
            let deadline = self.wall.deadline() + since.elapsed();
            self.wall.as_mut().reset(deadline);
        }
    }
}

/// The compute budget's poll: CPU time cannot grow faster than wall time times the cores, so the
/// next look is when the rest of the budget could be spent at the earliest, not on a fixed tick.
pub(super) struct ComputeCheck {
    budget: Duration,
    compute_ms: u64,
    cores: u32,
    next: Pin<Box<Sleep>>,
}

impl ComputeCheck {
    pub(super) fn new(limits: &Limits) -> Self {
        // Looked up once: `available_parallelism` reads the cgroup's files each time, a cost
        // every run would pay at its start.
        static CORES: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        let cores = *CORES.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            u32::try_from(cores).unwrap_or(u32::MAX)
        });
        let budget = Duration::from_millis(limits.compute_ms);
        let first = (budget / cores).max(Duration::from_millis(1));
        let next = reactor::enter(|| Box::pin(tokio::time::sleep(first)));
        Self { budget, compute_ms: limits.compute_ms, cores, next }
    }

    pub(super) async fn due(&mut self) {
        self.next.as_mut().await;
    }

    /// `Some` when `used` is over the budget; otherwise schedules the next look.
    pub(super) fn check(&mut self, used: Duration) -> Option<StopReason> {
        if used >= self.budget {
            return Some(StopReason::Compute { compute_ms: self.compute_ms });
        }
        let wait = ((self.budget - used) / self.cores).max(Duration::from_millis(1));
        self.next.as_mut().reset(Instant::now() + wait);
        None
    }
}
