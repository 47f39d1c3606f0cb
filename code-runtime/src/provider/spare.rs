//! [`Spare`]: one substrate started ahead of the next run (a cell whose interpreter or V8 is
//! loaded and waiting), so a run does not wait for it to start.
//!
//! A spare is fresh: no program has run in it, and it serves one run; taking it asks for the next.
//! Starting happens on the [`reactor`](crate::provider::reactor), so a spare keeps getting ready
//! whatever the host's executor does between runs.

use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::provider::reactor;

type Starter<T> = Box<dyn Fn() -> BoxFuture<'static, Option<T>> + Send + Sync>;

/// Keeps one spare `T` started ahead of need.
pub struct Spare<T> {
    start: Starter<T>,
    discard: fn(T) -> BoxFuture<'static, ()>,
    slot: Mutex<Slot<T>>,
}

enum Slot<T> {
    /// Keeps no spare.
    Off,
    /// Taken; the next one is not asked for yet.
    Empty,
    /// Being started, or started and waiting (`None` if starting failed).
    Starting(oneshot::Receiver<Option<T>>),
    /// Closed: no more.
    Closed,
}

impl<T> std::fmt::Debug for Spare<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = match &*self.slot.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Off => "off",
            Slot::Empty => "empty",
            Slot::Starting(_) => "starting",
            Slot::Closed => "closed",
        };
        f.debug_struct("Spare").field("slot", &slot).finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Spare<T> {
    /// Keeps a spare made by `start` when `enabled` (starting the first now), ended by `discard`
    /// when nobody takes it. `None` from `start` means it could not be made; a run then makes its
    /// own, and reports why.
    pub fn new(
        enabled: bool,
        start: impl Fn() -> BoxFuture<'static, Option<T>> + Send + Sync + 'static,
        discard: fn(T) -> BoxFuture<'static, ()>,
    ) -> Self {
        let slot = if enabled { Slot::Empty } else { Slot::Off };
        let spare = Self { start: Box::new(start), discard, slot: Mutex::new(slot) };
        spare.refill();
        spare
    }

    /// The spare (waiting for it if it is still starting), or `None` when there is none; asks
    /// for the next either way.
    ///
    /// Cancel safety: dropping the future while it waits drops the spare, which must end it
    /// (a cell is killed when dropped).
    pub async fn take(&self) -> Option<T> {
        let waiting = {
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            match std::mem::replace(&mut *slot, Slot::Empty) {
                Slot::Starting(receiver) => Some(receiver),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        self.refill();
        waiting?.await.ok().flatten()
    }

    /// Starts the next spare if the slot is empty.
    pub fn refill(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(*slot, Slot::Empty) {
            return;
        }
        let (sender, receiver) = oneshot::channel();
        *slot = Slot::Starting(receiver);
        let starting = (self.start)();
        let discard = self.discard;
        reactor::spawn(async move {
            let spare = starting.await;
            // Nobody will take it (the taker was dropped, or the slot closed): end it.
            if let Err(Some(spare)) = sender.send(spare) {
                discard(spare).await;
            }
        });
    }

    /// No more spares; the one there is (or being started) is discarded before this returns.
    pub async fn close(&self) {
        let waiting = {
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            match std::mem::replace(&mut *slot, Slot::Closed) {
                Slot::Starting(receiver) => Some(receiver),
                Slot::Off | Slot::Empty | Slot::Closed => None,
            }
        };
        if let Some(Ok(Some(spare))) = match waiting {
            Some(receiver) => Some(receiver.await),
            None => None,
        } {
            (self.discard)(spare).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    static DISCARDED: AtomicUsize = AtomicUsize::new(0);

    fn counting(started: &Arc<AtomicUsize>) -> Spare<usize> {
        let started = started.clone();
        Spare::new(
            true,
            move || {
                let number = started.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move { Some(number) })
            },
            |_| {
                Box::pin(async {
                    DISCARDED.fetch_add(1, Ordering::SeqCst);
                })
            },
        )
    }

    #[test]
    fn each_take_gets_a_fresh_spare_and_closing_discards_the_next() {
        let started = Arc::new(AtomicUsize::new(0));
        let spare = counting(&started);
        assert_eq!(futures::executor::block_on(spare.take()), Some(0));
        assert_eq!(futures::executor::block_on(spare.take()), Some(1));
        let discarded = DISCARDED.load(Ordering::SeqCst);
        futures::executor::block_on(spare.close());
        // The third, started when the second was taken, is discarded, and before `close` returns.
        assert_eq!(started.load(Ordering::SeqCst), 3);
        assert_eq!(DISCARDED.load(Ordering::SeqCst), discarded + 1);
        assert_eq!(futures::executor::block_on(spare.take()), None, "closed");
        assert_eq!(started.load(Ordering::SeqCst), 3, "nothing started after closing");
    }

    #[test]
    fn a_disabled_spare_starts_nothing() {
        let started = Arc::new(AtomicUsize::new(0));
        let start = started.clone();
        let spare: Spare<usize> = Spare::new(
            false,
            move || {
                start.fetch_add(1, Ordering::SeqCst);
                Box::pin(async { Some(0) })
            },
            |_| Box::pin(async {}),
        );
        assert_eq!(futures::executor::block_on(spare.take()), None);
        assert_eq!(started.load(Ordering::SeqCst), 0);
    }
}
