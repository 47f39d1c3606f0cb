//! [`CellPlan`]: a kind of cell, planned once from a [`CellSpec`] and the layers this machine
//! gives, then started many times.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cell::{self, Cell};
use crate::cell_io::CellIo;
use crate::cell_spec::CellSpec;
use crate::landlock::Ruleset;
use crate::mounts::{self, cstring};
use crate::plan::{CellLimits, Namespaces, Plan, WorkerEnd};
use crate::probe::{self, Machine};
use crate::spawner_process::SpawnerProcess;
use crate::{Containment, Options, SandboxError, seccomp};

/// A kind of cell, ready to start many: every path resolved, the seccomp filter compiled, the
/// Landlock rules made, and the layers that hold known. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CellPlan {
    pub(crate) plan: Arc<Plan>,
    spec: Arc<CellSpec>,
    /// Where cells start when not in the host itself (see [`CellPlan::with_spawner_process`]).
    spawner: Option<Arc<SpawnerProcess>>,
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
            if options.seccomp && machine.seccomp { seccomp::programs(false)? } else { Vec::new() };
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
            zygote: false,
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
            zygote: false,
        };
        Ok(Self { plan: Arc::new(plan), spec: Arc::new(spec.clone()), spawner: None })
    }

    /// Starts this plan's cells from a spawner process: the plan's executable, executed once
    /// with `args` as its argument vector (`argv[0]` first), which must then call
    /// [`serve_spawner_process`](crate::serve_spawner_process) before it starts a thread.
    ///
    /// A cell is a copy of the process that starts it until its program runs: started from a
    /// host with a large memory (an interpreter with this library loaded, a server's heap), it
    /// costs that host milliseconds of CPU in page-table copies and copy-on-write faults; from
    /// the spawner process, a small one, it costs almost nothing. The cells are the same, and
    /// the host holds them as it holds its own ([`Cell::pidfd`], [`Cell::kill`],
    /// [`Cell::usage`]).
    ///
    /// The spawner process is started with the first cell, in the background (cells start in
    /// the host until it says it is ready, having planned the same layers from the same spec;
    /// one that plans others is not used), and again when it dies (three failures in a row give
    /// it up: cells then start in the host). Plans without namespaces start every cell in the
    /// host: their work directory is the host's to make and remove.
    #[must_use]
    pub fn with_spawner_process(mut self, args: Vec<OsString>) -> Self {
        if self.plan.namespaces.is_some() && !args.is_empty() {
            self.spawner = Some(Arc::new(SpawnerProcess::new((*self.spec).clone(), args)));
        }
        self
    }

    /// Ends the spawner process of this plan, if it has one, with every cell it started, and
    /// waits until it is reaped; cells of this plan start in the host from then on. A provider
    /// calls it as it is disposed.
    pub async fn close(&self) {
        let Some(spawner) = self.spawner.clone() else { return };
        let closed = crate::spawner::run(move || {
            spawner.close();
            Ok(())
        });
        if closed.await.is_err() {
            // No spawner thread (shut down): its spawner process ended with it.
            if let Some(spawner) = &self.spawner {
                spawner.close();
            }
        }
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

impl CellPlan {
    /// Starts one cell of this plan with `io` as its program's descriptors and `limits`, on the
    /// spawner thread
    /// (the parent-death signal of a cell follows the thread that started it, so that thread
    /// lives as long as the process).
    ///
    /// # Errors
    ///
    /// [`SandboxError::Start`] with the step that failed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the cell is handed over kills and reaps it on the spawner
    /// thread.
    pub async fn start(&self, io: CellIo, limits: CellLimits) -> Result<Cell, SandboxError> {
        let plan = self.plan.clone();
        let spawner = self.spawner.clone();
        crate::spawner::run(move || {
            if let Some(spawner) = spawner {
                if let Some(cell) = spawner.start(&plan, &io, &limits)? {
                    return Ok(cell);
                }
            }
            cell::start(&plan, io, &limits, WorkerEnd::Execute, cell::next_outer_id())
        })
        .await
    }
}
