//! [`Bell`]: a waker that makes an event loop's selector see a wake (an eventfd), for a future
//! polled by a loop that is not a Rust executor (`driver.rs`), and [`Spins`]: whether a poll
//! waits for it by looking rather than sleeping. Kept free of Python so a test binary can
//! include it (`tests/bell.rs`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::Wake;
use std::time::{Duration, Instant};

/// An eventfd that makes the loop poll the run. `rung` keeps it to one write per poll.
pub(crate) struct Bell {
    pub(crate) fd: OwnedFd,
    rung: AtomicBool,
}

impl Bell {
    pub(crate) fn new() -> std::io::Result<Self> {
        // SAFETY: eventfd(2) with valid flags; it returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        Ok(Self { fd: unsafe { OwnedFd::from_raw_fd(fd) }, rung: AtomicBool::new(false) })
    }

    /// Resets the bell before a poll: a wake from here on rings again.
    ///
    /// Drains first, then clears `rung`. The other order is a lost wake-up: a wake between the
    /// clear and the drain sets `rung` and writes, the drain eats its write, and the bell is
    /// left rung with nothing to read, deaf to every later wake (the loop never polls the run
    /// again). In this order a wake between the two finds `rung` still set and does not write,
    /// which loses nothing: the poll that follows the reset sees what it woke for.
    pub(crate) fn reset(&self) {
        let mut count = 0u64;
        // SAFETY: an 8-byte read into a live u64 from the eventfd this bell owns; non-blocking,
        // so an unrung bell returns EAGAIN at once.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&raw mut count).cast(), 8) };
        self.rung.store(false, Ordering::SeqCst);
    }
}

impl Bell {
    /// Whether the bell rang since its last [`reset`](Self::reset).
    pub(crate) fn rung(&self) -> bool {
        self.rung.load(Ordering::SeqCst)
    }

    /// Whether it rings within `spin`, looked at without sleeping. Between looks the core goes
    /// to any other thread that wants it: early in a run, the isolate's compiler threads (in a
    /// cell or in this process) do, and on two cores a look that kept the core made the first
    /// few hundred calls about twice as slow as from a host that sleeps.
    pub(crate) fn rings_within(&self, spin: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < spin {
            if self.rung() {
                return true;
            }
            std::thread::yield_now();
        }
        self.rung()
    }
}

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.rung.swap(true, Ordering::SeqCst) {
            let one = 1u64;
            // SAFETY: an 8-byte write from a live u64 to the eventfd this bell owns. It cannot
            // block (the counter is far from its limit: one write per poll).
            let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }
}

/// Whether a run's waits for its bell are worth looking for ([`Bell::rings_within`]). A look
/// that found nothing kept a core busy for nothing: a program that computes between its calls,
/// or an isolate still compiling early in a run, answers later than a look lasts. So after a
/// miss the next looks are skipped, twice as many after each miss in a row, until a look finds
/// the bell. Atomics only for `Sync`: a run is polled on one thread.
#[derive(Default)]
pub(crate) struct Spins {
    /// Looks left to skip.
    skip: AtomicU32,
    /// Misses in a row.
    misses: AtomicU32,
}

impl Spins {
    /// Whether to look this time (a skipped look counts down the skips).
    pub(crate) fn worth_it(&self) -> bool {
        let skip = self.skip.load(Ordering::Relaxed);
        if skip == 0 {
            return true;
        }
        self.skip.store(skip - 1, Ordering::Relaxed);
        false
    }

    /// What a look found.
    pub(crate) fn record(&self, rung: bool) {
        if rung {
            self.misses.store(0, Ordering::Relaxed);
        } else {
            // At most 64 looks skipped in a row: a run that has warmed up (its isolate compiled
            // its loop) is back to looking within a few dozen calls.
            let misses = self.misses.load(Ordering::Relaxed).min(6);
            self.skip.store(1 << misses, Ordering::Relaxed);
            self.misses.store(misses + 1, Ordering::Relaxed);
        }
    }
}
