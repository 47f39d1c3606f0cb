//! The file system plan's steps ([`Step`]) as a cell's child performs them: mounts, binds and
//! the pivot into the cell's root. Like everything in `child.rs`, they run between a `clone` and
//! an `exec` in a copy of a multi-threaded host: system calls on data prepared before the
//! clone, no allocation, no locks, no panics.

use std::ffi::CString;

use crate::mounts::Step;

fn errno() -> libc::c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// One step of the file system plan, with the detached tree the host opened for it (or -1); the
/// errno on failure.
pub(crate) unsafe fn mount_step(
    step: &Step,
    tree: libc::c_int,
    tmp_options: &CString,
) -> Result<(), libc::c_int> {
    let null = std::ptr::null::<libc::c_char>();
    let ok = |result: libc::c_int| if result == -1 { Err(errno()) } else { Ok(()) };
    // SAFETY: system calls on NUL-terminated strings prepared before the clone.
    unsafe {
        match step {
            Step::Private => ok(libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )),
            Step::Tmpfs { target, options } => ok(mount_tmpfs(target, options)),
            Step::CellTmp { target } => ok(mount_tmpfs(target, tmp_options)),
            Step::Dir { path, mode } => {
                if libc::mkdir(path.as_ptr(), *mode) == -1 && errno() != libc::EEXIST {
                    return Err(errno());
                }
                // The umask must not narrow a mode such as 1777.
                ok(libc::chmod(path.as_ptr(), *mode))
            }
            Step::File { path } => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                    0o644,
                );
                ok(fd)?;
                ok(libc::close(fd))
            }
            Step::Bind { source, target, flags, .. } => bind(source, target, *flags, tree),
            Step::Symlink { target, path } => ok(libc::symlink(target.as_ptr(), path.as_ptr())),
            Step::PivotRoot { new_root } => pivot_root(new_root),
            Step::Proc { target, options } => ok(libc::mount(
                c"proc".as_ptr(),
                target.as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                options.as_ptr().cast(),
            )),
            Step::ReadOnlyRoot => ok(libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                std::ptr::null(),
            )),
        }
    }
}

/// Mounts a tmpfs at `target` with `options` (its size and mode).
///
/// # Safety
///
/// Only in the cell's child, in its own mount namespace.
unsafe fn mount_tmpfs(target: &CString, options: &CString) -> libc::c_int {
    // SAFETY: NUL-terminated strings prepared before the clone.
    unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    }
}

/// Binds `source` at `target` with `flags` on every mount of the tree: by attaching the detached
/// `tree` the host opened for it (with its flags set), or, where the host could not open one
/// (`tree` is -1, an unprivileged host), by a recursive bind and the flags set on all of it.
///
/// # Safety
///
/// Only in the cell's child, in its own mount namespace.
unsafe fn bind(
    source: &CString,
    target: &CString,
    flags: libc::c_ulong,
    tree: libc::c_int,
) -> Result<(), libc::c_int> {
    let null = std::ptr::null::<libc::c_char>();
    let ok = |result: libc::c_int| if result == -1 { Err(errno()) } else { Ok(()) };
    // SAFETY: system calls on NUL-terminated strings prepared before the clone and on the
    // descriptor the host passed.
    unsafe {
        if tree >= 0 {
            return ok(libc::syscall(
                libc::SYS_move_mount,
                tree,
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                libc::MOVE_MOUNT_F_EMPTY_PATH,
            ) as libc::c_int);
        }
        ok(libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            null,
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ))?;
        // A remount changes the top mount only, and a host path may have mounts beneath it;
        // `mount_setattr` (Linux 5.12) sets the flags on each. Only where the kernel lacks it is
        // the top mount all that is remounted (Landlock, from 5.13, is then what keeps writes
        // out).
        let attr = crate::mounts::attributes(flags);
        let applied = libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_RECURSIVE,
            &attr as *const libc::mount_attr,
            size_of::<libc::mount_attr>(),
        );
        if applied == 0 {
            return Ok(());
        }
        if errno() != libc::ENOSYS {
            return Err(errno());
        }
        ok(libc::mount(
            null,
            target.as_ptr(),
            null,
            libc::MS_BIND | libc::MS_REMOUNT | flags,
            std::ptr::null(),
        ))
    }
}

/// Makes `new_root` the root and detaches the host's file system: `pivot_root(".", ".")` puts the
/// old root on top of the new one, and unmounting it lazily leaves only the new.
unsafe fn pivot_root(new_root: &CString) -> Result<(), libc::c_int> {
    let ok = |result: libc::c_long| if result == -1 { Err(errno()) } else { Ok(()) };
    // SAFETY: system calls on NUL-terminated strings prepared before the clone.
    unsafe {
        ok(libc::chdir(new_root.as_ptr()).into())?;
        ok(libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()))?;
        ok(libc::umount2(c".".as_ptr(), libc::MNT_DETACH).into())?;
        ok(libc::chdir(c"/".as_ptr()).into())
    }
}
