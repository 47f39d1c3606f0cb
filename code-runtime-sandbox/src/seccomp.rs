//! The seccomp layer: the system calls a cell's program may not make, compiled to BPF with
//! `seccompiler` before the fork, and installed in the forked child just before `exec`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::SandboxError;

/// Calls refused with `EPERM`, whatever their arguments: what could reach outside the cell or
/// attack the kernel from inside it (debugging other processes, mounting, kernel programs and
/// keys, new namespaces, kernel modules, io_uring, which bypasses this filter, and the rest), and
/// what holds memory no process maps: a `memfd` written and never mapped, a System V shared
/// memory segment detached again, message queues. Their pages are in no process's resident set,
/// so no budget over the cell's processes would see them (2.5 GB under a 64 MB budget, tried).
/// Files in the cell's `/tmp` are the place for such data: a tmpfs the budget counts.
const DENIED: &[libc::c_long] = &[
    libc::SYS_memfd_create,
    libc::SYS_memfd_secret,
    libc::SYS_shmget,
    libc::SYS_msgget,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
    libc::SYS_quotactl,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_vhangup,
    libc::SYS_fanotify_init,
    libc::SYS_iopl,
    libc::SYS_ioperm,
];

/// The namespace flags of `clone` (the new-namespace ones): a program may start processes, not
/// namespaces.
const CLONE_NAMESPACES: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    0x80, // CLONE_NEWTIME
];

/// What a zygote may do that its children's programs may not, besides `clone` into new
/// namespaces (each run's init is one): mount their `/tmp`, `/dev/shm` and `/proc`. The children
/// install the full filter on top of the zygote's (filters stack; the strictest answer wins).
const ZYGOTE_ALLOWED: &[libc::c_long] = &[libc::SYS_mount];

/// The filters to install, in order: the calls refused with `EPERM`, then `clone3` refused with
/// `ENOSYS` (its flags live in memory a filter cannot read; `ENOSYS` makes the C library fall back
/// to `clone`, whose flags the first filter checks). A zygote's (`zygote`) allows
/// [`ZYGOTE_ALLOWED`] and `clone` into new namespaces.
pub(crate) fn programs(zygote: bool) -> Result<Vec<BpfProgram>, SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|error| SandboxError::Seccomp(format!("{error:?}")))?;
    let condition = |arg, op, value| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
            .map_err(|error| SandboxError::Seccomp(format!("{error:?}")))
    };
    let rule = |conditions| {
        SeccompRule::new(conditions).map_err(|error| SandboxError::Seccomp(format!("{error:?}")))
    };
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .filter(|call| !(zygote && ZYGOTE_ALLOWED.contains(call)))
        .map(|call| (*call, Vec::new()))
        .collect();
    // Sockets and socket pairs only of the Unix family.
    let unix = libc::AF_UNIX as u64;
    for call in [libc::SYS_socket, libc::SYS_socketpair] {
        denied.insert(call, vec![rule(vec![condition(0, SeccompCmpOp::Ne, unix)?])?]);
    }
    // A zygote's clones are its children's inits, each in namespaces of its own.
    if !zygote {
        let clone_rules = CLONE_NAMESPACES
            .iter()
            .map(|flag| {
                let flag = *flag as u64;
                rule(vec![condition(0, SeccompCmpOp::MaskedEq(flag), flag)?])
            })
            .collect::<Result<Vec<_>, _>>()?;
        denied.insert(libc::SYS_clone, clone_rules);
    }
    let mut programs = Vec::new();
    for (rules, errno) in
        [(denied, libc::EPERM), (BTreeMap::from([(libc::SYS_clone3, Vec::new())]), libc::ENOSYS)]
    {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(|error| SandboxError::Seccomp(format!("{error:?}")))?;
        let program = BpfProgram::try_from(filter)
            .map_err(|error| SandboxError::Seccomp(format!("{error:?}")))?;
        programs.push(program);
    }
    Ok(programs)
}

/// `program` as the bytes of its `struct sock_filter` array, in the machine's byte order: what a
/// zygote's child installs (see `zygote.rs`).
pub(crate) fn bytes(program: &BpfProgram) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    bytes
}

/// Installs one filter on the calling thread. Runs in the forked child: a system call on a
/// program built before the fork.
///
/// # Safety
///
/// Only between fork and exec, after `no_new_privs` is set.
pub(crate) unsafe fn install(program: &BpfProgram) -> Result<(), libc::c_int> {
    let filter = libc::sock_fprog {
        len: program.len() as libc::c_ushort,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: a valid filter program; the kernel copies it.
    let installed = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &filter as *const libc::sock_fprog,
        )
    };
    if installed == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }
}
