//! [`CellPlan`]: a kind of cell, planned once from a [`CellSpec`] and the layers this machine
//! gives, then started many times.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cell::{self, Cell, CellIo};
use crate::landlock::Ruleset;
use crate::mounts::{self, cstring};
use crate::plan::{CellLimits, Namespaces, Plan};
use crate::probe::{self, Machine};
use crate::{Containment, Options, SandboxError, seccomp};

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

/// A kind of cell, ready to start many: every path resolved, the seccomp filter compiled, the
/// Landlock rules made, and the layers that hold known. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CellPlan {
    pub(crate) plan: Arc<Plan>,
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
        crate::spawner::run(move || cell::start(&plan, io, &limits, false)).await
    }
}
