//! [`CellPlan`]: everything about a kind of cell decided once, before any starts: what the
//! program sees and the layers that hold; and [`Spawn`], what one cell adds (its descriptors,
//! its limits, its work directory, its user).

use std::ffi::{CString, OsString};
use std::path::PathBuf;
use std::sync::Arc;

use seccompiler::BpfProgram;

use crate::landlock::Ruleset;
use crate::mounts::{self, Step, cstring};
use crate::probe::{self, Machine};
use crate::{Containment, Options, SandboxError, seccomp};

/// The uid and gid a cell's program has inside its user namespace.
pub(crate) const CELL_ID: u32 = 1000;

/// What a kind of cell runs and may use.
#[derive(Clone, Debug)]
pub struct CellSpec {
    /// The program: an absolute path, which must be among (or beneath) `read_only`.
    pub executable: PathBuf,
    /// Its argument vector, `argv[0]` first.
    pub args: Vec<OsString>,
    /// Host paths the program may read, visible at the same paths in the cell. The system's
    /// shared-library directories, the dynamic loader's cache and the time zones are added.
    pub read_only: Vec<PathBuf>,
    /// The layers asked for.
    pub options: Options,
    /// A directory where what this machine gives is remembered between processes (see
    /// [`CellPlan::new`]); `None` probes in every process.
    pub machine_cache: Option<PathBuf>,
}

/// The resource limits of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// Processes and threads of a cell unless its host says otherwise (DESIGN.md §10).
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

/// A kind of cell, ready to start many: every path resolved, the seccomp filter compiled, the
/// Landlock rules made, and the layers that hold known. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CellPlan {
    pub(crate) plan: Arc<Plan>,
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
    /// Stop right before `exec` (the probe).
    pub(crate) dry_run: bool,
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

impl CellPlan {
    /// Plans cells for `spec` with the layers this machine gives. The first plan of a process
    /// learns them by starting trial cells (a few milliseconds), or reads them from
    /// `spec.machine_cache` where an earlier process remembered them; the entry is keyed by the
    /// boot, the user, the namespaces the process is in and the kernel's settings for user
    /// namespaces, so a change of any makes a new probe.
    ///
    /// # Errors
    ///
    /// [`SandboxError::Unavailable`] when `spec.options.require` is set and a layer asked for does
    /// not hold; [`SandboxError::Path`] for a path that cannot be bound; [`SandboxError::Seccomp`].
    pub fn new(spec: &CellSpec) -> Result<Self, SandboxError> {
        let machine = probe::machine(spec.machine_cache.as_deref());
        let options = spec.options;
        let namespaces = options
            .namespaces
            .then(|| machine.namespaces())
            .flatten()
            .map(|user| Namespaces { user, hostname: c"cell".to_owned() });
        let own_proc = namespaces.is_some() && machine.own_proc;
        let steps = match &namespaces {
            Some(_) => mounts::plan(&spec.read_only, own_proc)?,
            None => Vec::new(),
        };
        let landlock = match machine.landlock {
            Some(abi) if options.landlock => {
                Some(ruleset(abi, namespaces.is_some(), &spec.read_only)?)
            }
            _ => None,
        };
        let seccomp =
            if options.seccomp && machine.seccomp { seccomp::programs()? } else { Vec::new() };
        let containment = Containment {
            user_namespace: namespaces.as_ref().is_some_and(|n| n.user),
            pid_namespace: namespaces.is_some(),
            mount_namespace: namespaces.is_some(),
            own_proc,
            network_namespace: namespaces.is_some(),
            ipc_namespace: namespaces.is_some(),
            uts_namespace: namespaces.is_some(),
            landlock: landlock.as_ref().and(machine.landlock),
            seccomp: !seccomp.is_empty() && !machine.x32,
            no_privileges: true,
            process_limit: namespaces.as_ref().is_some_and(|n| n.user) || machine.root,
        };
        if options.require {
            require(&containment, options, machine)?;
        }
        let plan = Plan {
            namespaces,
            steps,
            landlock,
            seccomp,
            executable: cstring(&spec.executable)?,
            argv: spec.args.iter().map(cstring).collect::<Result<_, _>>()?,
            containment,
        };
        Ok(Self { plan: Arc::new(plan) })
    }

    /// The layers that hold for cells of this plan.
    pub fn containment(&self) -> Containment {
        self.plan.containment
    }
}

/// Refuses a containment that lacks a layer `options` asked for.
fn require(
    containment: &Containment,
    options: Options,
    machine: &Machine,
) -> Result<(), SandboxError> {
    let missing: Vec<&str> = containment
        .missing()
        .into_iter()
        .filter(|layer| match *layer {
            "landlock" => options.landlock,
            "seccomp" => options.seccomp,
            "no privileges" => true,
            _ => options.namespaces,
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(SandboxError::Unavailable {
        missing: missing.join(", "),
        findings: if machine.findings.is_empty() {
            "nothing failed; the options switched these off".to_owned()
        } else {
            machine.findings.join("; ")
        },
        hint: "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or \
               kernel.apparmor_restrict_unprivileged_userns=0), run on a kernel with Landlock and \
               seccomp, or accept weaker containment with `require: false`",
    })
}

/// The Landlock rules: with namespaces, the whole (minimal) root readable and `/tmp` writable
/// (`/dev/shm` too: it is a bind of a directory of `/tmp`, and Landlock follows paths, not
/// inodes); without, only the program's paths and the libraries readable (the work directory is added per
/// cell).
fn ruleset(abi: u8, namespaced: bool, read_only: &[PathBuf]) -> Result<Ruleset, SandboxError> {
    let mut ruleset = Ruleset::new(abi);
    if namespaced {
        ruleset.allow_read(c"/".to_owned(), true);
        ruleset.allow_write(c"/tmp".to_owned());
        ruleset.allow_write(c"/dev/shm".to_owned());
    } else {
        for path in read_only.iter().map(PathBuf::as_path).chain(
            mounts::LIBRARY_DIRS.iter().chain(&mounts::SYSTEM_FILES).map(std::path::Path::new),
        ) {
            ruleset.allow_read(cstring(path)?, path.is_dir());
        }
    }
    for device in mounts::DEVICES {
        ruleset.allow_device(cstring(device)?);
    }
    Ok(ruleset)
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
        (libc::RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
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

impl Machine {
    /// Whether cells get namespaces: `Some(true)` with a user namespace, `Some(false)` without
    /// one (a root host that cannot make user namespaces), `None` without namespaces.
    pub(crate) fn namespaces(&self) -> Option<bool> {
        if self.user_namespaces {
            Some(true)
        } else if self.root_namespaces {
            Some(false)
        } else {
            None
        }
    }
}
