//! [`Admission`]: which runs `code-runtime mcp` takes, and when it has none left. At most
//! `--max-concurrent-runs` run at once (the rest wait their turn, in order); once draining
//! (SIGTERM), new runs are refused and [`Admission::drained`] tells when the accepted ones ended.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{Notify, Semaphore, SemaphorePermit};

pub(crate) struct Admission {
    /// `None`: no cap.
    slots: Option<Semaphore>,
    draining: AtomicBool,
    /// Runs accepted and not yet ended, queued or running.
    accepted: AtomicUsize,
    /// Woken when `accepted` falls to zero.
    idle: Notify,
}

/// One accepted run: its slot (with a cap), and its place in [`Admission::drained`]'s count.
pub(crate) struct Ticket<'a> {
    admission: &'a Admission,
    _slot: Option<SemaphorePermit<'a>>,
}

/// Why a run was not admitted.
pub(crate) const DRAINING: &str =
    "the server is shutting down and takes no new runs: run the program again (on another replica)";

impl Admission {
    /// At most `cap` runs at once (`None`: any number).
    pub(crate) fn new(cap: Option<usize>) -> Self {
        Self {
            slots: cap.map(Semaphore::new),
            draining: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            idle: Notify::new(),
        }
    }

    /// Waits for a slot. Refused ([`DRAINING`]) once draining, also while it waits.
    pub(crate) async fn enter(&self) -> Result<Ticket<'_>, &'static str> {
        // Counted first: a drain that starts while this run waits for its slot waits for it too.
        self.accepted.fetch_add(1, Ordering::SeqCst);
        let mut ticket = Ticket { admission: self, _slot: None };
        if self.draining.load(Ordering::SeqCst) {
            return Err(DRAINING);
        }
        if let Some(slots) = &self.slots {
            // Closed only by `drain`: a run still queued then is refused, not run.
            ticket._slot = Some(slots.acquire().await.map_err(|_| DRAINING)?);
        }
        Ok(ticket)
    }

    /// Takes no new runs from now on; runs still waiting for a slot are refused.
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        if let Some(slots) = &self.slots {
            slots.close();
        }
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Runs accepted and not ended.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Returns once no accepted run is left.
    pub(crate) async fn drained(&self) {
        loop {
            // Registered before the check, so a run ending between the two still wakes it.
            let idle = self.idle.notified();
            if self.accepted.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.admission.accepted.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.admission.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_cap_queues_and_a_drain_refuses_new_runs_and_waits_for_the_rest() {
        let admission = Admission::new(Some(1));
        let first = admission.enter().await.expect("a free slot");
        // The second waits for the first's slot.
        let second = admission.enter();
        tokio::pin!(second);
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut second).await.is_err());
        assert_eq!(admission.accepted(), 2);
        admission.drain();
        // Queued when the drain began: refused, and no longer counted.
        assert_eq!(second.await.err(), Some(DRAINING));
        assert_eq!(admission.accepted(), 1);
        assert_eq!(admission.enter().await.err(), Some(DRAINING));
        // The running one is waited for.
        let drained = admission.drained();
        tokio::pin!(drained);
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut drained).await.is_err());
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), drained).await.expect("drained");
        assert_eq!(admission.accepted(), 0);
    }

    #[tokio::test]
    async fn without_a_cap_every_run_enters_at_once() {
        let admission = Admission::new(None);
        let tickets: Vec<_> = futures::future::join_all((0..100).map(|_| admission.enter())).await;
        assert!(tickets.iter().all(Result::is_ok));
        assert_eq!(admission.accepted(), 100);
        drop(tickets);
        admission.drained().await;
    }
}
