//! [`Plan`]: everything about a kind of cell decided once, before any starts, as the child reads
//! it: what the program sees and the layers that hold; and [`Spawn`], what one cell adds (its
//! descriptors, its limits, its work directory, its user).

use std::ffi::CString;

use seccompiler::BpfProgram;

use crate::Containment;
use crate::landlock::Ruleset;
use crate::mounts::Step;

/// The uid and gid a cell's program has inside its user namespace.
pub(crate) const CELL_ID: u32 = 1000;

/// The resource limits of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CellLimits {
    /// The address space of each process (`RLIMIT_AS`), and the size of the cell's `/tmp`
    /// (which holds the work directory and `/dev/shm`), in bytes.
    pub memory_bytes: u64,
    /// CPU seconds of each process (`RLIMIT_CPU`; `SIGXCPU` then, a second later, `SIGKILL`).
    /// A backstop: the host counts the whole cell's CPU time far more precisely.
    pub cpu_seconds: u64,
    /// Processes and threads of the whole cell (`RLIMIT_NPROC`, see
    /// [`Containment::process_limit`]).
    pub processes: u64,
    /// Open descriptors of each process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// The largest file a process may write (`RLIMIT_FSIZE`).
    pub file_bytes: u64,
}

/// Processes and threads of a cell unless its host says otherwise (docs/design.md §10).
pub const DEFAULT_PROCESSES: u32 = 64;

impl CellLimits {
    /// Limits for a program with `memory_bytes` of memory and `cpu_seconds` of CPU time: at most
    /// [`DEFAULT_PROCESSES`] processes and threads, 256 open descriptors, files up to the memory
    /// budget.
    pub fn new(memory_bytes: u64, cpu_seconds: u64) -> Self {
        Self {
            memory_bytes,
            cpu_seconds,
            processes: u64::from(DEFAULT_PROCESSES),
            open_files: 256,
            file_bytes: memory_bytes,
        }
    }
}

/// The data the child reads (see `child.rs`): owned here, read-only once built.
pub(crate) struct Plan {
    pub(crate) namespaces: Option<Namespaces>,
    pub(crate) steps: Vec<Step>,
    pub(crate) landlock: Option<Ruleset>,
    pub(crate) seccomp: Vec<BpfProgram>,
    pub(crate) executable: CString,
    pub(crate) argv: Vec<CString>,
    pub(crate) containment: Containment,
    /// The plan of a zygote (see `zygote.rs`): its worker keeps the host's resource limits but
    /// core dumps and locked memory, which its children lower to theirs.
    pub(crate) zygote: bool,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("executable", &self.executable)
            .field("containment", &self.containment)
            .finish_non_exhaustive()
    }
}

/// The namespaces of a cell.
pub(crate) struct Namespaces {
    /// With a user namespace (else the host is root and makes the others without one).
    pub(crate) user: bool,
    pub(crate) hostname: CString,
}

impl Namespaces {
    pub(crate) fn clone_flags(&self) -> u64 {
        let mut flags = libc::CLONE_NEWPID
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
        if self.user {
            flags |= libc::CLONE_NEWUSER;
        }
        flags as u64
    }
}

/// What one cell adds to its plan, prepared by the host before the clone.
pub(crate) struct Spawn {
    pub(crate) fds: Fds,
    /// The worker's resource limits: resource, soft, hard.
    pub(crate) rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    /// The options of the cell's `/tmp` (its size).
    pub(crate) tmp_options: CString,
    /// For each mount step, the detached tree it attaches, or -1.
    pub(crate) trees: Vec<libc::c_int>,
    /// The same descriptors, sorted, without the -1s.
    pub(crate) held_trees: Vec<libc::c_int>,
    /// The init image (`run_init.rs`) the init executes once its worker runs, where the cell has
    /// a pid namespace of its own (else the init sweeps its orphans itself), or -1.
    pub(crate) init_image: libc::c_int,
    /// Every descriptor the init holds besides the cell's own: `held_trees` and `init_image`,
    /// sorted.
    pub(crate) kept: Vec<libc::c_int>,
    /// Maps the child writes itself (an unprivileged host).
    pub(crate) self_maps: Option<Maps>,
    /// The uid and gid the worker switches to.
    pub(crate) identity: Option<(libc::uid_t, libc::gid_t)>,
    /// The uid and gid the init switches to once mapped (with a user namespace).
    pub(crate) init_identity: Option<(libc::uid_t, libc::gid_t)>,
    pub(crate) work_dir: CString,
    /// Whether the worker makes the work directory (in the cell's `/tmp`); otherwise the host did.
    pub(crate) make_work_dir: bool,
    /// Null-terminated pointers into the plan's argument vector.
    pub(crate) argv: Vec<*const libc::c_char>,
    /// `HOME=` the work directory: the program's whole environment. Held here for `envp`,
    /// which points into it.
    pub(crate) _home: CString,
    /// The program's environment: `home`, then null.
    pub(crate) envp: [*const libc::c_char; 2],
    /// Where the host's command line and environment lie in its memory, which the init (a copy
    /// of the host) overwrites first, so `/proc/1/cmdline` shows nothing of the host.
    pub(crate) host_strings: Option<HostStrings>,
    /// What the worker does once every layer is on.
    pub(crate) end: WorkerEnd,
}

/// What a cell's worker does once every layer is on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WorkerEnd {
    /// Executes the plan's executable: every cell but those below.
    Execute,
    /// Exits (the probe's dry run, which stops right before `exec`).
    Exit,
    /// Calls the function and exits with what it returns: the cells of a spawner process that
    /// serves them in copies of itself (`spawner_server::serve_calling`).
    Call(fn() -> libc::c_int),
}

/// The address ranges of a process's command line and environment strings (`/proc/self/stat`
/// fields 48 to 51): what `/proc/<pid>/cmdline` and `environ` read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostStrings {
    pub(crate) args: (usize, usize),
    pub(crate) env: (usize, usize),
}

impl HostStrings {
    /// This process's, read once.
    pub(crate) fn of_this_process() -> Option<HostStrings> {
        static STRINGS: std::sync::OnceLock<Option<HostStrings>> = std::sync::OnceLock::new();
        *STRINGS.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
            // The command name (field 2) may hold spaces and parentheses: count from its end.
            let fields: Vec<usize> = stat
                .get(stat.rfind(')')? + 2..)?
                .split_whitespace()
                .map(|field| field.parse().unwrap_or(0))
                .collect();
            // Field 3 is the first after the name: fields 48..=51 are at 45..=48 here.
            let field = |n: usize| fields.get(n - 3).copied();
            let strings =
                HostStrings { args: (field(48)?, field(49)?), env: (field(50)?, field(51)?) };
            let sane = |(start, end): (usize, usize)| start > 0 && start <= end;
            (sane(strings.args) && sane(strings.env)).then_some(strings)
        })
    }
}

/// The contents of `/proc/<pid>/uid_map` and `gid_map`.
pub(crate) struct Maps {
    pub(crate) uid: Vec<u8>,
    pub(crate) gid: Vec<u8>,
}

impl Maps {
    /// The cell's user ([`CELL_ID`]) as the host's `uid` and `gid`.
    pub(crate) fn of_cell_user(uid: libc::uid_t, gid: libc::gid_t) -> Self {
        Self {
            uid: format!("{CELL_ID} {uid} 1").into_bytes(),
            gid: format!("{CELL_ID} {gid} 1").into_bytes(),
        }
    }
}

/// The descriptors a cell's init holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fds {
    pub(crate) stdin: libc::c_int,
    pub(crate) stdout: libc::c_int,
    pub(crate) stderr: libc::c_int,
    pub(crate) channel: libc::c_int,
    pub(crate) report: libc::c_int,
    pub(crate) sync: libc::c_int,
}

impl Plan {
    /// The worker's resource limits under `limits`. A zygote's has none it could not lower for
    /// a child (a hard limit is raised only with a capability of the host's user namespace,
    /// which no child has) but core dumps and locked memory.
    pub(crate) fn rlimits(
        &self,
        limits: &CellLimits,
    ) -> Vec<(libc::__rlimit_resource_t, u64, u64)> {
        if self.zygote {
            return vec![
                (libc::RLIMIT_CORE, 0, 0),
                (libc::RLIMIT_MEMLOCK, 0, 0),
                (libc::RLIMIT_MSGQUEUE, 0, 0),
            ];
        }
        rlimits(limits, self.containment.process_limit)
    }
}

/// Every limit but the process count applies to each process; the process count only means
/// something where it counts the cell alone.
pub(crate) fn rlimits(
    limits: &CellLimits,
    per_cell_processes: bool,
) -> Vec<(libc::__rlimit_resource_t, u64, u64)> {
    let mut out = vec![
        (libc::RLIMIT_CORE, 0, 0),
        (libc::RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
        (libc::RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds.saturating_add(1)),
        (libc::RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
        (libc::RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (libc::RLIMIT_MEMLOCK, 0, 0),
        (libc::RLIMIT_MSGQUEUE, 0, 0),
    ];
    if per_cell_processes {
        out.push((libc::RLIMIT_NPROC, limits.processes, limits.processes));
    }
    out
}
