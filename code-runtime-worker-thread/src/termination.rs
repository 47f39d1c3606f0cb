//! [`Termination`]: the one way to stop an isolate from outside its thread, whoever asks first
//! (the host, or V8's near-heap-limit callback), recorded before `terminate_execution` so the
//! reason is never parsed back from an error string.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// Who stopped the isolate. The first one to ask wins; later ones are ignored.
#[derive(Debug, Default)]
pub(crate) struct Termination {
    cause: AtomicU8,
    /// The isolate's handle once it exists, so a stop can never fall between "no isolate yet"
    /// and "isolate running".
    handle: Mutex<Option<v8::IsolateHandle>>,
    /// Set when a fatal error of V8 parked the isolate's thread for good (`abandonment.rs`).
    abandoned: AtomicBool,
    /// The bytes its isolate was counted as holding once the host stopped waiting for it
    /// (`abandonment::let_go`); zero while it is not counted.
    out_of_hand: AtomicUsize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Cause {
    /// The host ended the run (a budget, cancellation, disposal, a dropped run).
    Host = 1,
    /// The heap reached the memory budget.
    OutOfMemory,
    /// The program's output outgrew the output budget while the isolate rendered it.
    OutputExceeded,
}

impl Termination {
    /// Records `cause` if none was recorded yet; returns whether it did.
    pub(crate) fn claim(&self, cause: Cause) -> bool {
        self.cause.compare_exchange(0, cause as u8, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Records `cause` (unless one was recorded first) and terminates the isolate if it exists;
    /// if it does not yet, `attach` terminates it as soon as it does. Returns whether this call
    /// recorded the cause.
    ///
    /// The isolate is terminated again even when the cause was recorded before: V8 may have
    /// spent an earlier termination (one requested inside a garbage collection, say) while the
    /// program went on, and a host deadline must not depend on it.
    pub(crate) fn stop(&self, cause: Cause) -> bool {
        let claimed = self.claim(cause);
        // Claim first, then look for the handle under the lock `attach` holds while it checks
        // the cause: one of the two always sees the other.
        if let Some(handle) = self.handle.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            handle.terminate_execution();
        }
        claimed
    }

    /// Called by the isolate thread once its isolate exists.
    pub(crate) fn attach(&self, handle: v8::IsolateHandle) {
        let mut slot = self.handle.lock().unwrap_or_else(PoisonError::into_inner);
        if self.cause().is_some() {
            handle.terminate_execution();
        }
        *slot = Some(handle);
    }

    /// Marks the isolate's thread as parked for good: nobody waits for it or joins it.
    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
    }

    /// Records the isolate as out of hand, holding up to `bytes` (at least one); whether it was
    /// not already.
    pub(crate) fn count_out(&self, bytes: usize) -> bool {
        let bytes = bytes.max(1);
        self.out_of_hand.compare_exchange(0, bytes, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes the isolate back in hand: what [`count_out`](Self::count_out) recorded, if anything.
    pub(crate) fn count_in(&self) -> Option<usize> {
        Some(self.out_of_hand.swap(0, Ordering::AcqRel)).filter(|bytes| *bytes > 0)
    }

    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    pub(crate) fn cause(&self) -> Option<Cause> {
        match self.cause.load(Ordering::Acquire) {
            1 => Some(Cause::Host),
            2 => Some(Cause::OutOfMemory),
            3 => Some(Cause::OutputExceeded),
            _ => None,
        }
    }
}
