//! OS containment for code-runtime: *cells*, process trees started by the host whose view of the
//! machine is empty unless granted (docs/design.md §10, docs/security.md).
//!
//! A provider describes the program once ([`CellSpec`]: the executable, its arguments, the host
//! paths it may read, the layers asked for) and gets a [`CellPlan`]; each run then starts a fresh
//! [`Cell`] of that plan with four descriptors ([`CellIo`]: stdin, stdout, stderr, and the channel
//! that becomes the program's fd 3) and its [`CellLimits`]. The cell ends when its init does,
//! taking every process of the cell with it.
//!
//! ```text
//! host ── spawner thread ──clone3(new user, pid, mount, net, ipc, uts namespaces)──▶ init (PID 1)
//!                                   builds the minimal root and /proc, pivots
//!                                   └──clone──▶ worker: the cell's user, no capabilities,
//!                                               no_new_privs, rlimits, Landlock, seccomp, exec
//! ```
//!
//! A plan whose executable can serve as one may start its cells from a *spawner process*
//! ([`CellPlan::with_spawner_process`]): that executable, executed once outside any cell, which
//! clones each cell as the host would have. A cell is a copy of whatever starts it until its
//! program runs; a copy of a small process costs almost nothing, one of a host with a large
//! memory milliseconds. A spawner process that serves with
//! [`serve_spawner_process_calling`] goes further: each cell's worker, once every layer is on,
//! calls the program's entry in its copy of the spawner instead of executing the program, so
//! the pages the dynamic loader wrote (a V8 executable's relocations, a megabyte and a half)
//! are shared with the spawner rather than written again in every cell.
//!
//! A [`Zygote`] is the other way to make cells of a plan: a fork server (a language's program,
//! which has done its expensive start once) in a cell of its own, whose forks enter namespaces of
//! their own and apply the plan's layers themselves, from a recipe the host computes; each fork
//! is a [`Cell`] like any other ([`Containment::zygote`] says it was forked).
//!
//! ## Layers
//!
//! Each layer is either in force for every cell of a plan or for none, and [`Containment`] says
//! which hold; [`Options::require`] (the default) makes a missing one an error at
//! [`CellPlan::new`]. What a machine gives is probed once per process by starting trial cells.
//!
//! 1. A separate process: a fatal fault inside ends the cell, never the host.
//! 2. Namespaces: user (the program runs as uid 1000 of its own namespace, with no capability,
//!    also when the host is root; a root host maps it to a uid of the cell's own), pid (the init
//!    is PID 1; the program's own signals behave normally), mount (a minimal read-only root: the
//!    program's files, shared libraries, a few device nodes, and a private tmpfs `/tmp` the size of
//!    the memory budget holding the work directory, whose name is unpredictable, and `/dev/shm`),
//!    network (no interface), ipc, uts.
//! 3. Landlock, with whatever ABI the kernel has: files (read-only but for `/tmp`), TCP (none),
//!    signals and abstract sockets (the cell's own).
//! 4. seccomp (compiled by `seccompiler`): no ptrace, `process_vm_*`, mount, bpf,
//!    `perf_event_open`, keyctl, namespace creation, module or kexec calls, userfaultfd, io_uring,
//!    and no socket family but `AF_UNIX`.
//! 5. `no_new_privs`, every capability dropped; the init is not dumpable.
//! 6. rlimits on every process (address space, CPU, file size, open files, no core dumps) and a
//!    process count for the whole cell; [`Cell::usage`] gives the host the CPU time and memory of
//!    every process of the cell, for budgets that count the whole cell.
//! 7. Lifetime: killing the init ends the cell; the init dies with the host (its parent-death
//!    signal follows the spawner thread, which lives as long as the process).
//!
//! Without user namespaces (some distributions restrict them), a root host still makes the
//! others; an unprivileged one gets a cell without namespaces: a subreaper init that kills what
//! the program leaves, Landlock limiting files to the program's paths and a host work directory,
//! seccomp and rlimits.
//!
//! ## What a host must know
//!
//! - Cells are cloned from one thread of this crate (the *spawner*), or by a plan's spawner
//!   process, which that thread starts; nothing here runs in the host's threads but the planning.
//! - A root host opens what a cell may read itself (`open_tree`) and hands it to the cell, so a
//!   granted path under a directory only root may enter works; an unprivileged host's cells bind
//!   by path, with the host's rights.
//! - A cell's processes are children of the host process (or of its spawner process, itself a
//!   child of the host): code of the host that reaps *any* child (`waitpid(-1)`) would steal
//!   their exit statuses.
#![warn(missing_docs)]

pub mod cache;
mod cell;
mod cell_io;
mod cell_plan;
mod cell_server;
mod cell_spec;
mod child;
mod child_mounts;
mod containment;
mod error;
mod landlock;
mod message;
mod mounts;
mod plan;
mod probe;
mod reseed;
mod run_init;
mod seccomp;
mod spawner;
mod spawner_process;
mod spawner_server;
mod threads;
mod usage;
mod watch;
mod zygote;

pub use crate::cell::{Cell, cells_alive};
pub use crate::cell_io::{CellExit, CellIo, pipe};
pub use crate::cell_plan::CellPlan;
pub use crate::cell_spec::CellSpec;
pub use crate::containment::{Containment, Options};
pub use crate::error::SandboxError;
pub use crate::plan::{CellLimits, DEFAULT_PROCESSES};
pub use crate::spawner::shutdown;
pub use crate::spawner_server::{
    serve as serve_spawner_process, serve_calling as serve_spawner_process_calling,
};
pub use crate::threads::threads_in_this_process;
pub use crate::usage::Usage;
pub use crate::watch::WatchedCell;
pub use crate::zygote::Zygote;
