//! [`Spare`]: substrates started ahead of the next runs (cells whose interpreter or V8 is loaded
//! and waiting), so a run does not wait for one to start.
//!
//! A spare is fresh: no program has run in it, and it serves one run; taking one asks for the
//! next. Starting happens on the [`reactor`](crate::provider::reactor), so spares keep getting
//! ready whatever the host's executor does between runs.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::provider::reactor;

type Starter<T> = Box<dyn Fn() -> BoxFuture<'static, Option<T>> + Send + Sync>;

/// Keeps up to a number of spare `T`s started ahead of need.
pub struct Spare<T> {
    start: Starter<T>,
    discard: fn(T) -> BoxFuture<'static, ()>,
    capacity: usize,
    slots: Mutex<Slots<T>>,
}

struct Slots<T> {
    /// Each being started, or started and waiting (`None` if starting failed), oldest first.
    starting: VecDeque<oneshot::Receiver<Option<T>>>,
    /// No more spares.
    closed: bool,
}

impl<T> std::fmt::Debug for Spare<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Spare")
            .field("capacity", &self.capacity)
            .field("starting", &slots.starting.len())
            .field("closed", &slots.closed)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Spare<T> {
    /// Keeps `capacity` spares made by `start` (starting them now; zero keeps none), each ended
    /// by `discard` when nobody takes it. `None` from `start` means one could not be made; a run
    /// then makes its own, and reports why.
    pub fn new(
        capacity: usize,
        start: impl Fn() -> BoxFuture<'static, Option<T>> + Send + Sync + 'static,
        discard: fn(T) -> BoxFuture<'static, ()>,
    ) -> Self {
        let slots = Slots { starting: VecDeque::with_capacity(capacity), closed: false };
        let spare = Self { start: Box::new(start), discard, capacity, slots: Mutex::new(slots) };
        spare.refill();
        spare
    }

    /// A spare: one that is ready if there is one, else the oldest (waiting for it), or `None`
    /// when there is none; asks for the next either way.
    ///
    /// Cancel safety: dropping the future while it waits drops the spare, which must end it
    /// (a cell is killed when dropped).
    pub async fn take(&self) -> Option<T> {
        let waiting = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            // A started one holds its value (`is_empty` is false) until it is awaited.
            let ready = slots.starting.iter().position(|receiver| !receiver.is_empty());
            match ready {
                Some(index) => slots.starting.remove(index),
                None => slots.starting.pop_front(),
            }
        };
        self.refill();
        waiting?.await.ok().flatten()
    }

    /// Starts spares until `capacity` are there or being started.
    pub fn refill(&self) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        while !slots.closed && slots.starting.len() < self.capacity {
            let (sender, receiver) = oneshot::channel();
            slots.starting.push_back(receiver);
            let starting = (self.start)();
            let discard = self.discard;
            reactor::spawn(async move {
                let spare = starting.await;
                // Nobody will take it (the taker was dropped, or the spare closed): end it.
                if let Err(Some(spare)) = sender.send(spare) {
                    discard(spare).await;
                }
            });
        }
    }

    /// No more spares; those there are (or being started) are discarded before this returns.
    pub async fn close(&self) {
        let waiting = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.closed = true;
            std::mem::take(&mut slots.starting)
        };
        for receiver in waiting {
            if let Ok(Some(spare)) = receiver.await {
                (self.discard)(spare).await;
            }
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
            1,
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
            0,
            move || {
                start.fetch_add(1, Ordering::SeqCst);
                Box::pin(async { Some(0) })
            },
            |_| Box::pin(async {}),
        );
        assert_eq!(futures::executor::block_on(spare.take()), None);
        assert_eq!(started.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_spare_of_two_keeps_two_started_and_hands_out_ready_ones() {
        let started = Arc::new(AtomicUsize::new(0));
        let counter = started.clone();
        let spare: Spare<usize> = Spare::new(
            2,
            move || {
                let number = counter.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move { Some(number) })
            },
            |_| Box::pin(async {}),
        );
        assert_eq!(started.load(Ordering::SeqCst), 2, "both started at once");
        let first = futures::executor::block_on(spare.take());
        let second = futures::executor::block_on(spare.take());
        assert_eq!((first, second), (Some(0), Some(1)));
        assert_eq!(started.load(Ordering::SeqCst), 4, "each taken one replaced");
        futures::executor::block_on(spare.close());
    }
}
