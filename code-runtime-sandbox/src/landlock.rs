//! The Landlock layer: which accesses a cell's program keeps, computed with the `landlock` crate
//! for the kernel's ABI before the fork, and the three system calls that enforce it, made in the
//! forked child (which may not allocate, so the crate's builder cannot run there).

use std::ffi::CString;

use landlock::{ABI, Access, AccessFs, AccessNet, Scope};

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask the kernel for its ABI instead of creating a ruleset.
const CREATE_RULESET_VERSION: libc::c_uint = 1;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// The ABI the kernel offers, or `None` without Landlock (or with it disabled).
pub(crate) fn kernel_abi() -> Option<u8> {
    // SAFETY: the documented version query: a null attribute, size 0.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u8::try_from(version).ok().filter(|version| *version > 0)
}

/// `struct landlock_ruleset_attr`, the version with every field; trailing zeros are accepted by
/// kernels that know fewer fields.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr`, packed as the kernel declares it.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// One path and what may be done beneath it.
pub(crate) struct Rule {
    pub(crate) path: CString,
    pub(crate) access: u64,
}

/// The ruleset of a cell's program: everything the ABI can deny is denied, except the rules.
pub(crate) struct Ruleset {
    handled_fs: u64,
    handled_net: u64,
    scoped: u64,
    pub(crate) rules: Vec<Rule>,
    /// Reading, listing and executing.
    read: u64,
    /// Everything on files and directories.
    write: u64,
    /// What applies to a file (a device node): reading and writing it.
    device: u64,
    /// The rights that apply to a file at all; a rule on a file with others is `EINVAL`.
    file: u64,
}

impl Ruleset {
    /// The ruleset for `abi`: TCP denied entirely (ABI 4), signals and abstract sockets scoped to
    /// the cell's own processes (ABI 6).
    pub(crate) fn new(abi: u8) -> Self {
        let abi = ABI::from(i32::from(abi));
        let all = AccessFs::from_all(abi);
        let read = AccessFs::from_read(abi);
        let file = AccessFs::from_file(abi);
        Self {
            handled_fs: all.bits(),
            handled_net: AccessNet::from_all(abi).bits(),
            scoped: Scope::from_all(abi).bits(),
            rules: Vec::new(),
            read: read.bits(),
            write: all.bits(),
            device: (file & (AccessFs::ReadFile | AccessFs::WriteFile)).bits(),
            file: file.bits(),
        }
    }

    /// The access rights it handles: on files, on the network, and its scopes.
    pub(crate) fn handled(&self) -> (u64, u64, u64) {
        (self.handled_fs, self.handled_net, self.scoped)
    }

    /// `path` and everything beneath it may be read and executed. `is_dir` says whether it is a
    /// directory (a file's rule may only hold file rights).
    pub(crate) fn allow_read(&mut self, path: CString, is_dir: bool) {
        let access = if is_dir { self.read } else { self.read & self.file };
        self.rules.push(Rule { path, access });
    }

    /// `path` and everything beneath it may be read and written.
    pub(crate) fn allow_write(&mut self, path: CString) {
        let access = self.write;
        self.rules.push(Rule { path, access });
    }

    /// The device node `path` may be read and written.
    pub(crate) fn allow_device(&mut self, path: CString) {
        let access = self.device;
        self.rules.push(Rule { path, access });
    }

    /// Restricts the calling thread and its future children, with `extra` writable too (a work
    /// directory known only per cell). Runs in the forked child: system calls only. Returns the
    /// failing step's errno.
    ///
    /// # Safety
    ///
    /// Only between fork and exec, in the process that will exec the program.
    pub(crate) unsafe fn enforce(&self, extra: Option<&CString>) -> Result<(), libc::c_int> {
        let attr = RulesetAttr {
            handled_access_fs: self.handled_fs,
            handled_access_net: self.handled_net,
            scoped: self.scoped,
        };
        // SAFETY: a valid attribute of the size given; the kernel copies it.
        let ruleset = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if ruleset < 0 {
            return Err(errno());
        }
        let ruleset = ruleset as libc::c_int;
        let extra = extra.map(|path| (path, self.write));
        for (path, access) in self.rules.iter().map(|rule| (&rule.path, rule.access)).chain(extra) {
            // SAFETY: a NUL-terminated path prepared before the fork.
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
            if fd < 0 {
                // A path that does not exist in this cell grants nothing.
                continue;
            }
            let beneath = PathBeneathAttr { allowed_access: access, parent_fd: fd };
            // SAFETY: a valid rule attribute; the kernel copies it.
            let added = unsafe {
                libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset,
                    RULE_PATH_BENEATH,
                    &beneath as *const PathBeneathAttr,
                    0u32,
                )
            };
            let failed = (added < 0).then(errno);
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(fd) };
            if let Some(errno) = failed {
                // SAFETY: closing the ruleset created above.
                unsafe { libc::close(ruleset) };
                return Err(errno);
            }
        }
        // SAFETY: restricting ourselves with the ruleset built above.
        let restricted = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
        let failed = (restricted < 0).then(errno);
        // SAFETY: the ruleset is no longer needed once enforced.
        unsafe { libc::close(ruleset) };
        failed.map_or(Ok(()), Err)
    }
}

fn errno() -> libc::c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}
