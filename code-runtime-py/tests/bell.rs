//! The run's [`Bell`] against a waker that rings from another thread while the loop resets it:
//! every wake after a reset must leave the eventfd readable, or the loop never polls the run
//! again (a run that hangs with its answer waiting). And [`Spins`], which decides when a poll
//! looks for it.
//!
//! The extension itself is tested from Python; this file includes the one module of it that has
//! no Python in it.

#[path = "../src/bell.rs"]
#[allow(dead_code, reason = "the module's crate uses what this test does not")]
mod bell;

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Waker;

use bell::{Bell, Spins};

/// Whether `bell`'s eventfd turns readable within a second.
fn rings(bell: &Bell) -> bool {
    let mut poll = libc::pollfd { fd: bell.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one live pollfd, for the length given.
    let ready = unsafe { libc::poll(&raw mut poll, 1, 1_000) };
    ready == 1 && poll.revents & libc::POLLIN != 0
}

#[test]
fn a_wake_racing_a_reset_is_never_lost() {
    let bell = Arc::new(Bell::new().expect("an eventfd"));
    let stop = Arc::new(AtomicBool::new(false));
    let waker = Waker::from(bell.clone());
    // Wakes as fast as it can, as a reactor thread does under load: so some wake lands between
    // any two steps of a reset.
    let ringer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                waker.wake_by_ref();
            }
        })
    };
    let mut deaf = None;
    for round in 0..200_000 {
        bell.reset();
        if !rings(&bell) {
            deaf = Some(round);
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    ringer.join().expect("the ringer thread");
    assert_eq!(deaf, None, "the bell stopped ringing after a reset, at that round");
}

/// How many looks `spins` skips before it looks again (the look is taken, not recorded).
fn skipped(spins: &Spins) -> usize {
    (0..1_000).take_while(|_| !spins.worth_it()).count()
}

#[test]
fn looks_that_miss_are_skipped_twice_as_long_each_time_until_one_finds_the_bell() {
    let spins = Spins::default();
    assert_eq!(skipped(&spins), 0, "a run starts by looking");
    spins.record(true);
    assert_eq!(skipped(&spins), 0);
    let mut backoff = Vec::new();
    for _ in 0..9 {
        spins.record(false);
        backoff.push(skipped(&spins));
    }
    assert_eq!(backoff, [1, 2, 4, 8, 16, 32, 64, 64, 64], "doubling, up to 64");
    spins.record(true);
    assert_eq!(skipped(&spins), 0, "a look that finds the bell ends the backoff");
    spins.record(false);
    assert_eq!(skipped(&spins), 1, "and the next miss starts it over");
}
