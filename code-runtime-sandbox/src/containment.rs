//! [`Containment`]: which layers of a cell hold on this machine, and [`Options`]: which a host
//! asks for.

use std::fmt;

/// The layers that hold for the cells of one [`CellPlan`](crate::CellPlan), as probed on this
/// machine. Each is either in force for every cell of the plan or for none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Containment {
    /// A user namespace: the program runs as an unprivileged uid with no capabilities, also when
    /// the host is root, and its uid and gid mean nothing outside the cell.
    pub user_namespace: bool,
    /// A PID namespace with an init of ours as PID 1: the program sees only the cell's
    /// processes, its own signals behave normally, and when the init dies the kernel ends every
    /// process of the cell.
    pub pid_namespace: bool,
    /// A mount namespace with a minimal read-only root (the program's files, shared libraries,
    /// `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`) and a private,
    /// size-limited tmpfs for `/tmp` (holding the work dir) and `/dev/shm`.
    pub mount_namespace: bool,
    /// The cell's own `/proc` (only its processes, no host files such as `/proc/meminfo`).
    /// Without it the cell has no `/proc` at all.
    pub own_proc: bool,
    /// A network namespace with no interface: no network at all.
    pub network_namespace: bool,
    /// An IPC namespace: no System V IPC or POSIX message queue of the host.
    pub ipc_namespace: bool,
    /// A UTS namespace: the host's name is not the cell's.
    pub uts_namespace: bool,
    /// The Landlock ABI in force (a second fence on files, TCP and, from ABI 6, signals and
    /// abstract sockets), or `None` when the kernel has no Landlock.
    pub landlock: Option<u8>,
    /// A seccomp filter: no ptrace, `process_vm_*`, mount, bpf, `perf_event_open`, keyctl,
    /// namespace creation, module or kexec calls, userfaultfd, io_uring, and no socket family but
    /// `AF_UNIX`.
    pub seccomp: bool,
    /// `no_new_privs` and every capability dropped in the program's processes.
    pub no_privileges: bool,
    /// Resource limits on every process of the cell: address space, CPU, file size, open files,
    /// core dumps off; and a process count for the whole cell (counted per user namespace, so it
    /// holds only with [`user_namespace`](Self::user_namespace), or as root, where each cell runs
    /// under a uid of its own).
    pub process_limit: bool,
    /// The cell is a fork of a zygote (a fork server started once, in a cell of its own, with
    /// the interpreter loaded): its user, mount, pid, ipc, uts and network namespaces are its
    /// own, nested in the zygote's, and every other layer above applies as to a cell started
    /// from scratch. Not a layer: how the cell starts. See `Zygote`.
    pub zygote: bool,
}

impl Containment {
    /// The names of the layers that do not hold, in the order of the fields.
    pub fn missing(&self) -> Vec<&'static str> {
        [
            (self.user_namespace, "user namespace"),
            (self.pid_namespace, "pid namespace"),
            (self.mount_namespace, "mount namespace"),
            (self.own_proc, "own /proc"),
            (self.network_namespace, "network namespace"),
            (self.ipc_namespace, "ipc namespace"),
            (self.uts_namespace, "uts namespace"),
            (self.landlock.is_some(), "landlock"),
            (self.seccomp, "seccomp"),
            (self.no_privileges, "no privileges"),
            (self.process_limit, "process limit"),
        ]
        .into_iter()
        .filter(|(holds, _)| !holds)
        .map(|(_, name)| name)
        .collect()
    }

    /// Whether every layer holds.
    pub fn is_complete(&self) -> bool {
        self.missing().is_empty()
    }
}

impl fmt::Display for Containment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let missing = self.missing();
        if missing.is_empty() {
            f.write_str("every layer")
        } else {
            write!(f, "every layer but {}", missing.join(", "))
        }
    }
}

/// Which layers a host asks for. The default asks for all of them; switching one off is for
/// measuring what it costs, or for a host that contains programs some other way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Options {
    /// Namespaces (user, pid, mount, network, ipc, uts). Without them a cell is a process tree
    /// under a subreaper of ours, fenced by Landlock, seccomp and rlimits.
    pub namespaces: bool,
    /// Landlock.
    pub landlock: bool,
    /// The seccomp filter.
    pub seccomp: bool,
    /// Refuse to make a plan when a layer asked for does not hold on this machine
    /// ([`SandboxError::Unavailable`](crate::SandboxError::Unavailable)).
    pub require: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { namespaces: true, landlock: true, seccomp: true, require: true }
    }
}
