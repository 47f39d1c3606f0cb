//! [`WatchedCell`]: a started cell as an asynchronous host sees it: its end as a readable pidfd on
//! a tokio runtime, its CPU time remembered past its end, and a reap that never blocks the
//! runtime's threads.

use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::runtime::Handle;
use tokio::time::Sleep;

use crate::cell::Cell;
use crate::cell_io::CellExit;

/// How often [`WatchedCell::poll_over_memory`] compares the cell's memory with a budget. Each
/// look reads a few `/proc` files per process of the cell (tens of microseconds); a burst
/// between looks is still bounded by each process's address-space limit.
const MEMORY_INTERVAL: Duration = Duration::from_millis(10);

/// How long [`WatchedCell::reap`] waits for the cell's init to exit before it kills it, and then
/// again before it gives up.
const REAP_WITHIN: Duration = Duration::from_secs(10);

/// A started cell, watched on the tokio runtime it was made in.
#[derive(Debug)]
pub struct WatchedCell {
    cell: Cell,
    /// The cell's pidfd on the runtime: readable once its init exits.
    exited: AsyncFd<OwnedFd>,
    runtime: Handle,
    /// The cell's CPU time at the last look, in microseconds (what ended processes used is gone
    /// with the cell).
    last_cpu_us: AtomicU64,
    /// How the cell's init ended, once it is reaped.
    reaped: Option<CellExit>,
    /// The next look at the cell's memory, once [`poll_over_memory`](Self::poll_over_memory)
    /// was first called.
    memory_check: Option<Pin<Box<Sleep>>>,
}

impl WatchedCell {
    /// Watches `cell` on the current tokio runtime, which needs its I/O and time drivers.
    ///
    /// # Errors
    ///
    /// No runtime in this context, or the pidfd cannot be registered.
    pub fn new(cell: Cell) -> io::Result<Self> {
        let runtime = Handle::try_current().map_err(io::Error::other)?;
        let pidfd = cell.pidfd().try_clone_to_owned()?;
        // SAFETY: the `OwnedFd` moves into the `AsyncFd`, which owns it (and only it) until it
        // is dropped, so it is never closed while registered.
        let exited =
            unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }?;
        Ok(Self {
            cell,
            exited,
            runtime,
            last_cpu_us: AtomicU64::new(0),
            reaped: None,
            memory_check: None,
        })
    }

    /// The cell.
    pub fn cell(&self) -> &Cell {
        &self.cell
    }

    /// Whether the cell's init is still there (nothing ended it, nobody reaped it).
    pub fn is_alive(&mut self) -> bool {
        self.reaped.is_none() && matches!(self.cell.try_wait(), Ok(None))
    }

    /// CPU time every process of the cell has used; the last reading once it is gone.
    pub fn cpu_used(&self) -> Duration {
        if self.reaped.is_none() {
            let now = self.cell.usage().cpu;
            let micros = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
            self.last_cpu_us.fetch_max(micros, Ordering::Relaxed);
        }
        self.last_cpu()
    }

    /// The CPU time at the last look.
    pub fn last_cpu(&self) -> Duration {
        Duration::from_micros(self.last_cpu_us.load(Ordering::Relaxed))
    }

    /// The memory the cell holds ([`Cell::memory`]: anonymous and shared memory, proportionally,
    /// and its `/tmp`); zero once it is reaped.
    pub fn memory_used(&self) -> u64 {
        if self.reaped.is_some() {
            return 0;
        }
        self.cell.memory()
    }

    /// Whether the cell holds more than `budget`, and what it holds if so: its resident memory
    /// first (cheap, and never less than what it holds), its exact share only when that is over.
    pub fn over_memory(&self, budget: u64) -> Option<u64> {
        if self.reaped.is_some() || self.cell.usage().resident_bytes <= budget {
            return None;
        }
        let used = self.cell.memory();
        (used > budget).then_some(used)
    }

    /// Every 10 ms, compares the cell's memory ([`over_memory`](Self::over_memory)) with
    /// `budget`: `Ready` with what it uses once that is more, `Pending` until then (the waker is
    /// registered for the next look). The first look is 10 ms after the first call.
    pub fn poll_over_memory(&mut self, cx: &mut Context<'_>, budget: u64) -> Poll<u64> {
        let mut check = self.memory_check.take().unwrap_or_else(|| {
            let _runtime = self.runtime.enter();
            Box::pin(tokio::time::sleep(MEMORY_INTERVAL))
        });
        let looked = if check.as_mut().poll(cx).is_pending() {
            Poll::Pending
        } else if let Some(used) = self.over_memory(budget) {
            Poll::Ready(used)
        } else {
            check.as_mut().reset(tokio::time::Instant::now() + MEMORY_INTERVAL);
            // Registers the new deadline with the waker.
            let _ = check.as_mut().poll(cx);
            Poll::Pending
        };
        self.memory_check = Some(check);
        looked
    }

    /// Kills the cell (its CPU time is read first). Idempotent.
    pub fn kill(&mut self) {
        if self.reaped.is_some() {
            return;
        }
        let _ = self.cpu_used();
        self.cell.kill();
    }

    /// Whether the cell's init exited within `within`.
    pub async fn wait_exit(&self, within: Duration) -> bool {
        let readable = {
            let _runtime = self.runtime.enter();
            tokio::time::timeout(within, self.exited.readable())
        };
        matches!(readable.await, Ok(Ok(_)))
    }

    /// Waits for the cell's init to exit (it does once the program and all it started are gone;
    /// a killed init takes the cell with it), reaps it and removes a host work directory it
    /// left. The init never blocks for long once the program is gone; if it does, it is killed.
    pub async fn reap(&mut self) -> Option<CellExit> {
        if let Some(exit) = self.reaped {
            return Some(exit);
        }
        if !self.wait_exit(REAP_WITHIN).await {
            self.cell.kill();
            self.wait_exit(REAP_WITHIN).await;
        }
        // Without namespaces the work directory is the host's: removed off the runtime's
        // threads, as a program can leave many files behind.
        let work_dir = self.cell.take_host_work_dir();
        let exit = self.cell.try_wait().ok().flatten();
        self.reaped = exit;
        if let Some(dir) = work_dir {
            let _ = self.runtime.spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
        }
        exit
    }
}
