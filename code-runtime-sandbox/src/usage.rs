//! What a cell uses: CPU time and memory of every process under its init, read from `/proc`.
//! One walk of the process tree ([`processes_under`]) serves both readings: the cheap one
//! ([`of_processes_under`], from `stat` and `statm`) and the exact one
//! ([`memory_of_processes_under`], from `smaps_rollup`).

use std::time::Duration;

/// What a cell uses right now, all its processes together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// CPU time of every process of the cell, living or reaped.
    pub cpu: Duration,
    /// Resident memory of every process (file pages included: an upper bound of
    /// [`memory_bytes`](Usage::memory_bytes), cheap to read), plus the files in the cell's `/tmp`.
    pub resident_bytes: u64,
    /// Private resident memory of every process, plus the files in the cell's `/tmp`. Counts
    /// nothing of shared memory: [`Cell::memory`](crate::Cell::memory) does.
    pub memory_bytes: u64,
    /// Processes in the cell (its init excluded).
    pub processes: usize,
}

/// The processes under `pid` (not `pid` itself), each once, found through every thread's
/// `children`. At most 4096: a fork bomb is bounded by the cell's process limit, and this bound
/// guards the host anyway.
fn processes_under(pid: libc::pid_t) -> impl Iterator<Item = libc::pid_t> {
    let mut pending = children(pid);
    std::iter::from_fn(move || {
        let next = pending.pop()?;
        pending.extend(children(next));
        Some(next)
    })
    .take(4096)
}

/// CPU time, private and whole resident memory of the processes under `pid`, with the CPU time
/// of those `pid` reaped: orphans are re-parented to the init, which reaps them.
pub(crate) fn of_processes_under(pid: libc::pid_t) -> Usage {
    let mut usage = Usage::default();
    for process in processes_under(pid) {
        if let Some((cpu, memory, resident)) = process_usage(process) {
            usage.cpu += cpu;
            usage.memory_bytes += memory;
            usage.resident_bytes += resident;
            usage.processes += 1;
        }
    }
    usage.cpu += reaped_children_cpu(pid).unwrap_or_default();
    usage
}

/// The memory the processes under `pid` hold (see [`Cell::memory`](crate::Cell::memory)).
pub(crate) fn memory_of_processes_under(pid: libc::pid_t) -> u64 {
    processes_under(pid)
        .map(|process| match proportional_memory(process) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => process_usage(process).map_or(0, |(_, private, _)| private),
            Err(_) => process_usage(process).map_or(0, |(_, _, resident)| resident),
        })
        .fold(0u64, u64::saturating_add)
}

/// The children of every thread of `pid`.
pub(crate) fn children(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace().filter_map(|pid| pid.parse().ok()).collect::<Vec<_>>()
        })
        .collect()
}

/// `Pss_Anon` plus `Pss_Shmem` of `pid`, in bytes: what it holds of anonymous and shared memory;
/// `None` where the kernel does not tell them apart.
fn proportional_memory(pid: libc::pid_t) -> std::io::Result<Option<u64>> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
    let field = |name: &str| -> Option<u64> {
        let line = rollup.lines().find_map(|line| line.strip_prefix(name))?;
        line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
    };
    Ok(field("Pss_Anon:")
        .zip(field("Pss_Shmem:"))
        .map(|(anon, shmem)| anon.saturating_add(shmem).saturating_mul(1024)))
}

/// CPU time (its own and its reaped children's), private resident memory, and resident memory
/// of `pid`.
fn process_usage(pid: libc::pid_t) -> Option<(Duration, u64, u64)> {
    // The process's own time from its CPU clock (nanoseconds; `/proc`'s ticks are 10 ms), what
    // it reaped from `/proc` (cutime, cstime).
    let own = process_clock(pid).or_else(|| cpu_fields(pid, 11..13))?;
    let cpu = own + cpu_fields(pid, 13..15)?;
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: Vec<u64> = statm.split_whitespace().filter_map(|field| field.parse().ok()).collect();
    let resident = *pages.get(1)?;
    let private = resident.saturating_sub(*pages.get(2)?);
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    Some((cpu, private.saturating_mul(page), resident.saturating_mul(page)))
}

/// The CPU time of every thread of `pid`, read from its process CPU clock.
fn process_clock(pid: libc::pid_t) -> Option<Duration> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes one clockid_t we own.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own; a stale clock id fails.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return None;
    }
    Some(Duration::new(u64::try_from(now.tv_sec).ok()?, u32::try_from(now.tv_nsec).ok()?))
}

/// CPU time of the children `pid` has reaped.
fn reaped_children_cpu(pid: libc::pid_t) -> Option<Duration> {
    // cutime, cstime.
    cpu_fields(pid, 13..15)
}

/// The sum of the clock-tick fields `range` of `/proc/<pid>/stat`, counted from the first field
/// after the command name (which may hold spaces and parentheses): utime, the 14th field, is 11.
fn cpu_fields(pid: libc::pid_t, range: std::ops::Range<usize>) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(range)?.iter().filter_map(|field| field.parse::<u64>().ok()).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100).max(1);
    Some(Duration::from_millis(ticks.saturating_mul(1000) / hz))
}
