//! [`CpuClock`]: the compute budget's clock, the CPU time of a thread or of a process.

use std::time::Duration;

/// A kernel CPU-time clock (`clockid_t`), read with `clock_gettime`.
///
/// A thread's clock counts only that thread (the V8 isolate thread); a process's counts all its
/// threads. Reading a clock whose thread or process is gone fails and reads as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// The calling thread's clock.
    pub fn current_thread() -> Option<Self> {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_getcpuclockid writes one clockid_t for the calling thread.
        let status = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
        (status == 0).then_some(Self(clock))
    }

    /// The clock of process `pid` (all its threads).
    pub fn process(pid: libc::pid_t) -> Option<Self> {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: clock_getcpuclockid writes one clockid_t we own.
        let status = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
        (status == 0).then_some(Self(clock))
    }

    /// CPU time used so far; zero once the thread or process is gone.
    pub fn used(self) -> Duration {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec we own; a stale clock id fails with EINVAL.
        if unsafe { libc::clock_gettime(self.0, &mut now) } != 0 {
            return Duration::ZERO;
        }
        Duration::new(
            u64::try_from(now.tv_sec).unwrap_or(0),
            u32::try_from(now.tv_nsec).unwrap_or(0),
        )
    }
}
