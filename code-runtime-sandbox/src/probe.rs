//! What this machine lets a process build, found once per process by starting trial cells that
//! stop right before `exec`, with fewer layers each time one fails; remembered on disk, when the
//! host gives a directory, for as long as nothing it depends on changes.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::cell;
use crate::cell_io::{CellExit, CellIo};
use crate::child::{MOUNT_STEPS, Stage};
use crate::landlock::{self, Ruleset};
use crate::mounts;
use crate::plan::{Namespaces, Plan, WorkerEnd};
use crate::{CellLimits, Containment, SandboxError, seccomp};

/// The layers this machine gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Machine {
    /// The host runs as root.
    pub(crate) root: bool,
    /// Cells get a user namespace (and the others with it).
    pub(crate) user_namespaces: bool,
    /// Without a user namespace, a root host still makes the others.
    pub(crate) root_namespaces: bool,
    /// A cell can mount its own `/proc` (a container that masks parts of the host's may forbid it).
    pub(crate) own_proc: bool,
    /// The Landlock ABI a cell enforces.
    pub(crate) landlock: Option<u8>,
    /// Seccomp filters install.
    pub(crate) seccomp: bool,
    /// The kernel runs x32 system calls, whose numbers the filter (made for x86-64 numbers) does
    /// not list: the filter is installed but does not hold.
    pub(crate) x32: bool,
    /// Why each layer that does not hold was dropped, in the order the trials found out.
    pub(crate) findings: Vec<String>,
}

static MACHINE: OnceLock<Machine> = OnceLock::new();

/// The machine, probed on first use (a trial cell or a few, milliseconds), or read from `cache`
/// where an earlier process remembered it.
pub(crate) fn machine(cache: Option<&Path>) -> &'static Machine {
    MACHINE.get_or_init(|| {
        let entry = cache.map(Entry::new);
        if let Some(machine) = entry.as_ref().and_then(Entry::read) {
            return machine;
        }
        let machine = probe();
        if let Some(entry) = entry {
            // A cache that cannot be written is only a slower next start.
            let _ = entry.write(&machine);
        }
        machine
    })
}

fn probe() -> Machine {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut machine = Machine {
        root,
        user_namespaces: true,
        root_namespaces: root,
        own_proc: true,
        landlock: landlock::kernel_abi(),
        // SAFETY: PR_GET_SECCOMP only reads; it fails where the kernel has no seccomp.
        seccomp: unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } >= 0,
        x32: x32_abi(),
        findings: Vec::new(),
    };
    if machine.x32 {
        machine.findings.push(
            "seccomp: the kernel runs x32 system calls (CONFIG_X86_X32_ABI), which the filter \
             does not cover"
                .to_owned(),
        );
    }
    if machine.landlock.is_none() {
        machine.findings.push("landlock: the kernel has none, or it is disabled".to_owned());
    }
    if !machine.seccomp {
        machine.findings.push("seccomp: the kernel has none".to_owned());
    }
    // Each failure takes one layer away; there are few layers, so this ends.
    for _ in 0..8 {
        let Some((failed, why)) = trial(&machine) else { return machine };
        let Some(layer) = degrade(&mut machine, failed) else { break };
        machine.findings.push(format!("{layer}: a trial cell failed at {why}"));
    }
    machine.user_namespaces = false;
    machine.root_namespaces = false;
    machine.own_proc = false;
    machine
}

/// Whether the kernel runs x32 system calls: `getpid` by its x32 number succeeds.
fn x32_abi() -> bool {
    /// `__X32_SYSCALL_BIT`.
    const X32: libc::c_long = 0x4000_0000;
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    // SAFETY: getpid has no arguments and no effect; an unknown number fails with ENOSYS.
    unsafe { libc::syscall(X32 | libc::SYS_getpid) >= 0 }
}

/// Drops the layer a trial failed at and names it; `None` when nothing is left to drop.
fn degrade(machine: &mut Machine, failed: u32) -> Option<&'static str> {
    let namespaced = machine.user_namespaces || machine.root_namespaces;
    if failed == Stage::Landlock as u32 && machine.landlock.is_some() {
        machine.landlock = None;
        Some("landlock")
    } else if failed == Stage::Seccomp as u32 && machine.seccomp {
        machine.seccomp = false;
        Some("seccomp")
    } else if failed >= MOUNT_STEPS && machine.own_proc && namespaced {
        // Most likely `/proc`; the trial without it tells.
        machine.own_proc = false;
        Some("own /proc")
    } else if machine.user_namespaces {
        machine.user_namespaces = false;
        machine.own_proc = true;
        Some("user namespace")
    } else if machine.root_namespaces {
        machine.root_namespaces = false;
        Some("namespaces")
    } else {
        None
    }
}

/// Starts a trial cell with `machine`'s layers; the stage it failed at and why, if it did.
fn trial(machine: &Machine) -> Option<(u32, String)> {
    let namespaces = if machine.user_namespaces {
        Some(Namespaces { user: true, hostname: c"cell".to_owned() })
    } else if machine.root_namespaces {
        Some(Namespaces { user: false, hostname: c"cell".to_owned() })
    } else {
        None
    };
    let limits = CellLimits::new(64 << 20, 2);
    let steps = match &namespaces {
        Some(_) => match mounts::plan(&[], machine.own_proc) {
            Ok(steps) => steps,
            Err(error) => return Some((MOUNT_STEPS, error.to_string())),
        },
        None => Vec::new(),
    };
    let landlock = machine.landlock.map(|abi| {
        let mut ruleset = Ruleset::new(abi);
        ruleset.allow_read(c"/".to_owned(), true);
        ruleset
    });
    let seccomp =
        if machine.seccomp { seccomp::programs(false).unwrap_or_default() } else { Vec::new() };
    let plan = Arc::new(Plan {
        namespaces,
        steps,
        landlock,
        seccomp,
        executable: CString::default(),
        argv: vec![c"probe".to_owned()],
        containment: Containment::default(),
        zygote: false,
    });
    let io = match null_io() {
        Ok(io) => io,
        Err(error) => return Some((Stage::Fork as u32, format!("opening /dev/null: {error}"))),
    };
    match cell::start(&plan, io, &limits, WorkerEnd::Exit, cell::next_outer_id()) {
        // A dry run ends on its own right after its last step.
        Ok(mut cell) => match cell.wait() {
            Ok(CellExit::Exited(0)) => None,
            Ok(exit) => Some((Stage::Exec as u32, format!("the end: it ended with {exit:?}"))),
            Err(error) => Some((Stage::Exec as u32, format!("waiting: {error}"))),
        },
        Err(SandboxError::Start { step, source }) => {
            Some((stage_of(step), format!("{step}: {source}")))
        }
        Err(error) => Some((Stage::Fork as u32, error.to_string())),
    }
}

/// The stage a start error names (mount steps all map to the first mount step).
fn stage_of(step: &str) -> u32 {
    Stage::ALL.iter().find(|stage| stage.doing() == step).map_or(MOUNT_STEPS, |&stage| stage as u32)
}

/// `/dev/null` four times.
fn null_io() -> std::io::Result<CellIo> {
    let open = || -> std::io::Result<OwnedFd> {
        std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").map(OwnedFd::from)
    };
    Ok(CellIo { stdin: open()?, stdout: open()?, stderr: open()?, channel: open()? })
}

/// A remembered probe: a file named by the hash of what the probe's outcome depends on (the
/// boot, so the kernel and its settings; this process's user and namespaces; the settings that
/// allow user namespaces; the Landlock ABI and seccomp), holding that key too, so a collision is
/// a miss.
struct Entry {
    path: PathBuf,
    key: String,
}

impl Entry {
    fn new(dir: &Path) -> Self {
        use std::hash::{Hash, Hasher};
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default().trim().to_owned();
        let namespace = |name: &str| {
            std::fs::metadata(format!("/proc/self/ns/{name}")).map_or(0, |meta| meta.ino())
        };
        // SAFETY: geteuid, getegid and prctl(PR_GET_SECCOMP) only read.
        let (uid, gid, seccomp) = unsafe {
            (libc::geteuid(), libc::getegid(), libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0))
        };
        let key = format!(
            "code-runtime-sandbox {}\nboot {}\nuser {uid} {gid}\nnamespaces {} {} {} {}\n\
             userns {} {} {}\nlandlock {:?}\nseccomp {seccomp}\n",
            env!("CARGO_PKG_VERSION"),
            read("/proc/sys/kernel/random/boot_id"),
            namespace("user"),
            namespace("mnt"),
            namespace("pid"),
            namespace("net"),
            read("/proc/sys/user/max_user_namespaces"),
            read("/proc/sys/kernel/unprivileged_userns_clone"),
            read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            landlock::kernel_abi(),
        );
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        Self { path: dir.join(format!("sandbox-machine-{:016x}", hasher.finish())), key }
    }

    fn read(&self) -> Option<Machine> {
        let text = String::from_utf8(crate::cache::read_private(&self.path)?).ok()?;
        let (key, rest) = text.split_at_checked(self.key.len())?;
        if key != self.key {
            return None;
        }
        let mut machine = Machine {
            root: false,
            user_namespaces: false,
            root_namespaces: false,
            own_proc: false,
            landlock: None,
            seccomp: false,
            x32: false,
            findings: Vec::new(),
        };
        for line in rest.lines() {
            let (name, value) = line.split_once(' ')?;
            let flag = value == "1";
            match name {
                "root" => machine.root = flag,
                "user_namespaces" => machine.user_namespaces = flag,
                "root_namespaces" => machine.root_namespaces = flag,
                "own_proc" => machine.own_proc = flag,
                "landlock" => machine.landlock = value.parse().ok(),
                "seccomp" => machine.seccomp = flag,
                "x32" => machine.x32 = flag,
                "finding" => machine.findings.push(value.to_owned()),
                _ => return None,
            }
        }
        Some(machine)
    }

    fn write(&self, machine: &Machine) -> std::io::Result<()> {
        let bit = |flag: bool| if flag { 1 } else { 0 };
        let mut text = self.key.clone();
        text.push_str(&format!(
            "root {}\nuser_namespaces {}\nroot_namespaces {}\nown_proc {}\nlandlock {}\nseccomp {}\n\
             x32 {}\n",
            bit(machine.root),
            bit(machine.user_namespaces),
            bit(machine.root_namespaces),
            bit(machine.own_proc),
            machine.landlock.map_or("none".to_owned(), |abi| abi.to_string()),
            bit(machine.seccomp),
            bit(machine.x32),
        ));
        for finding in &machine.findings {
            text.push_str(&format!("finding {}\n", finding.replace('\n', " ")));
        }
        crate::cache::write_private(&self.path, &[text.as_bytes()])
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_machine_reads_back_and_only_from_a_file_of_ours() {
        let dir = std::env::temp_dir().join(format!("sandbox-machine-test-{}", std::process::id()));
        let entry = Entry::new(&dir);
        let machine = Machine {
            root: true,
            user_namespaces: false,
            root_namespaces: true,
            own_proc: true,
            landlock: Some(5),
            seccomp: true,
            x32: false,
            findings: vec!["user namespace: a trial cell failed at writing the uid map".to_owned()],
        };
        entry.write(&machine).unwrap();
        assert_eq!(entry.read(), Some(machine.clone()));
        // Another key (another boot, user or setting) is another file.
        let other = Entry { path: entry.path.clone(), key: entry.key.replace("boot", "boot 2") };
        assert_eq!(other.read(), None, "a key that does not match is a miss");
        // Writable by others: not trusted.
        std::fs::set_permissions(&entry.path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        assert_eq!(entry.read(), None);
        let _ = std::fs::remove_dir_all(dir);
    }
}
