//! The cell's file system, planned before the fork as a list of [`Step`]s that the forked child
//! carries out with plain system calls: a tmpfs root assembled at a staging directory, the
//! program's files and the shared libraries bound read-only at their own paths, a few device
//! nodes, a private tmpfs for `/tmp` and `/dev/shm`, `/proc`, then `pivot_root`, and the root made
//! read-only.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::SandboxError;

/// One thing the child does to build the cell's file system. Paths are absolute; those of the new
/// root are prefixed with the staging directory until `PivotRoot`.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Makes every mount private, so nothing done here propagates to the host.
    Private,
    /// A tmpfs at `target`.
    Tmpfs { target: CString, options: CString },
    /// The cell's `/tmp`: a tmpfs at `target` whose options (its size, the memory budget) each
    /// cell gives.
    CellTmp { target: CString },
    /// A directory.
    Dir { path: CString, mode: libc::mode_t },
    /// An empty file, to bind a file or a device node over.
    File { path: CString },
    /// `source` bound at `target`, then remounted with `flags` (read-only, and the flags the
    /// kernel locks on the source mount, which a remount must keep). With `host`, `source` is a
    /// path of the host's, which the host opens as a detached tree when it may (see
    /// [`detached_trees`]); the child attaches that instead.
    Bind { source: CString, target: CString, flags: libc::c_ulong, host: bool },
    /// A symbolic link at `path` to `target`.
    Symlink { target: CString, path: CString },
    /// `pivot_root` into the staging directory, and the host's file system detached.
    PivotRoot { new_root: CString },
    /// The cell's own `/proc` at `target`. It comes before `PivotRoot`: in a user namespace the
    /// kernel mounts a proc only while a fully visible one is in the mount namespace, and the
    /// host's goes with the old root.
    Proc { target: CString, options: CString },
    /// The root tmpfs made read-only.
    ReadOnlyRoot,
}

/// The device nodes every cell has.
pub(crate) const DEVICES: [&str; 5] =
    ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Directories where shared libraries live on Linux systems; those present are bound.
pub(crate) const LIBRARY_DIRS: [&str; 7] =
    ["/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib"];

/// Files of the system every program may read: the dynamic loader's cache and time zones.
pub(crate) const SYSTEM_FILES: [&str; 3] =
    ["/etc/ld.so.cache", "/etc/localtime", "/usr/share/zoneinfo"];

/// Host directories that can hold the staging root, in order of preference: it must exist and
/// must not contain a path bound into the cell (the staging tmpfs would hide it).
const STAGING: [&str; 5] = ["/mnt", "/media", "/srv", "/opt", "/tmp"];

/// Builds the steps for a cell that sees `read_only` (plus the libraries and system files).
pub(crate) fn plan(read_only: &[PathBuf], own_proc: bool) -> Result<Vec<Step>, SandboxError> {
    let mut wanted: Vec<PathBuf> = read_only.to_vec();
    wanted.extend(
        LIBRARY_DIRS
            .iter()
            .chain(&SYSTEM_FILES)
            .map(PathBuf::from)
            .filter(|path| path.symlink_metadata().is_ok()),
    );
    let staging = staging(&wanted)?;
    let mut tree = Tree {
        staging: staging.clone(),
        steps: vec![Step::Private],
        dirs: BTreeSet::new(),
        bound: Vec::new(),
    };
    tree.steps
        .push(Step::Tmpfs { target: cstring(&staging)?, options: cstring("size=4m,mode=0755")? });
    for dir in ["/proc", "/dev", "/tmp"] {
        tree.dir(Path::new(dir), 0o755)?;
    }
    tree.steps.push(Step::CellTmp { target: tree.inside(Path::new("/tmp"))? });
    tree.dir(Path::new("/tmp/.shm"), 0o1777)?;
    tree.dir(Path::new("/dev/shm"), 0o755)?;
    tree.steps.push(Step::Bind {
        source: tree.inside(Path::new("/tmp/.shm"))?,
        target: tree.inside(Path::new("/dev/shm"))?,
        flags: libc::MS_NOSUID | libc::MS_NODEV,
        host: false,
    });
    for device in DEVICES {
        tree.bind(Path::new(device), Access::ReadWrite, libc::MS_NOSUID | libc::MS_NOEXEC)?;
    }
    for (link, target) in [
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        tree.steps
            .push(Step::Symlink { target: cstring(target)?, path: tree.inside(Path::new(link))? });
    }
    let mut sorted = wanted;
    sorted.sort();
    sorted.dedup();
    for path in &sorted {
        tree.add(path, 0)?;
    }
    if own_proc {
        tree.steps.push(Step::Proc {
            target: tree.inside(Path::new("/proc"))?,
            options: cstring("subset=pid")?,
        });
    }
    tree.steps.push(Step::PivotRoot { new_root: cstring(&staging)? });
    tree.steps.push(Step::ReadOnlyRoot);
    Ok(tree.steps)
}

/// The staging directory for `wanted`: the first of [`STAGING`] that exists and holds none of it.
fn staging(wanted: &[PathBuf]) -> Result<PathBuf, SandboxError> {
    STAGING
        .iter()
        .map(PathBuf::from)
        .find(|candidate| {
            candidate.is_dir() && !wanted.iter().any(|path| path.starts_with(candidate))
        })
        .ok_or_else(|| SandboxError::Path {
            path: STAGING.join(", "),
            why: "none of these directories exists apart from the paths bound into the cell"
                .to_owned(),
        })
}

/// Whether a bind is writable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadOnly,
    ReadWrite,
}

/// The steps so far, and what is already in the tree.
struct Tree {
    staging: PathBuf,
    steps: Vec<Step>,
    dirs: BTreeSet<PathBuf>,
    /// Paths bound so far: anything beneath one is already visible.
    bound: Vec<PathBuf>,
}

impl Tree {
    /// `path` of the cell, as the child sees it before `pivot_root`.
    fn inside(&self, path: &Path) -> Result<CString, SandboxError> {
        let relative = path.strip_prefix("/").unwrap_or(path);
        cstring(self.staging.join(relative))
    }

    /// The directory `path` and its parents.
    fn dir(&mut self, path: &Path, mode: libc::mode_t) -> Result<(), SandboxError> {
        let mut current = PathBuf::from("/");
        for component in path.components().skip(1) {
            current.push(component);
            if self.dirs.insert(current.clone()) {
                let mode = if current == path { mode } else { 0o755 };
                self.steps.push(Step::Dir { path: self.inside(&current)?, mode });
            }
        }
        Ok(())
    }

    /// `path` of the host, read-only at the same path in the cell: its parents as directories or,
    /// where the host has a symbolic link, as the same link, followed to what it names.
    fn add(&mut self, path: &Path, depth: usize) -> Result<(), SandboxError> {
        // Symbolic links can loop; the kernel gives up at 40 as well.
        if depth > 40 {
            return Err(path_error(path, "too many levels of symbolic links"));
        }
        if self.bound.iter().any(|bound| path.starts_with(bound)) {
            return Ok(());
        }
        let mut current = PathBuf::from("/");
        let components: Vec<Component<'_>> = path.components().skip(1).collect();
        for (index, component) in components.iter().enumerate() {
            let next = current.join(component);
            let metadata =
                next.symlink_metadata().map_err(|error| path_error(&next, &error.to_string()))?;
            if metadata.file_type().is_symlink() {
                let target = std::fs::read_link(&next)
                    .map_err(|error| path_error(&next, &error.to_string()))?;
                if !self.dirs.contains(&next)
                    && !self.bound.iter().any(|bound| next.starts_with(bound))
                {
                    self.dirs.insert(next.clone());
                    self.steps.push(Step::Symlink {
                        target: cstring(&target)?,
                        path: self.inside(&next)?,
                    });
                }
                let rest: PathBuf = components[index + 1..].iter().collect();
                let resolved = normalize(&current.join(&target).join(rest));
                return self.add(&resolved, depth + 1);
            }
            if index + 1 == components.len() {
                return self.bind(&next, Access::ReadOnly, libc::MS_NOSUID | libc::MS_NODEV);
            }
            if self.dirs.insert(next.clone()) {
                self.steps.push(Step::Dir { path: self.inside(&next)?, mode: 0o755 });
            }
            current = next;
        }
        Ok(())
    }

    /// Binds the host's `path` (a directory, a file or a device node) at the same path, with
    /// `flags` added to those the source mount locks.
    fn bind(
        &mut self,
        path: &Path,
        access: Access,
        flags: libc::c_ulong,
    ) -> Result<(), SandboxError> {
        let metadata = path.metadata().map_err(|error| path_error(path, &error.to_string()))?;
        let parent = path.parent().unwrap_or(Path::new("/"));
        self.dir(parent, 0o755)?;
        if metadata.is_dir() {
            self.dir(path, 0o755)?;
        } else {
            self.steps.push(Step::File { path: self.inside(path)? });
        }
        let read_only = if access == Access::ReadOnly { libc::MS_RDONLY } else { 0 };
        let flags = flags | read_only | locked_flags(path)?;
        self.steps.push(Step::Bind {
            source: cstring(path)?,
            target: self.inside(path)?,
            flags,
            host: true,
        });
        self.bound.push(path.to_owned());
        Ok(())
    }
}

/// For each step, the detached copy of the host's tree it binds, opened by the host (`open_tree`)
/// with the step's flags set (`mount_setattr`). A cell's init may lack the right to reach a host
/// path (a root host's interpreter under `/root`, say, which the cell's user cannot search); a
/// detached tree needs none. `None` for every step where the host cannot open trees (an
/// unprivileged host: the init then binds by path, with the same rights as the host).
pub(crate) fn detached_trees(steps: &[Step]) -> Vec<Option<OwnedFd>> {
    let mut trees = Vec::with_capacity(steps.len());
    for step in steps {
        let Step::Bind { source, flags, host: true, .. } = step else {
            trees.push(None);
            continue;
        };
        match detach(source, *flags) {
            Ok(tree) => trees.push(Some(tree)),
            Err(_) => return steps.iter().map(|_| None).collect(),
        }
    }
    trees
}

/// A detached recursive copy of the mount tree at `path`, with `flags` applied to all of it.
fn detach(path: &CString, flags: libc::c_ulong) -> std::io::Result<OwnedFd> {
    // SAFETY: open_tree on a NUL-terminated path; it returns a new descriptor we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::OPEN_TREE_CLONE
                | libc::OPEN_TREE_CLOEXEC as libc::c_uint
                | libc::AT_RECURSIVE as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    let attr = attributes(flags);
    // SAFETY: mount_setattr on the tree we own, with an attribute of the size given.
    let applied = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            &attr as *const libc::mount_attr,
            size_of::<libc::mount_attr>(),
        )
    };
    if applied < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(tree)
}

/// The mount flags among `flags` (`MS_RDONLY`, `MS_NOSUID`, `MS_NODEV`, `MS_NOEXEC`) as the
/// attributes `mount_setattr` sets. No allocation: the cell's child calls it too.
pub(crate) fn attributes(flags: libc::c_ulong) -> libc::mount_attr {
    let mut set = 0;
    for (ms, attr) in [
        (libc::MS_RDONLY, libc::MOUNT_ATTR_RDONLY),
        (libc::MS_NOSUID, libc::MOUNT_ATTR_NOSUID),
        (libc::MS_NODEV, libc::MOUNT_ATTR_NODEV),
        (libc::MS_NOEXEC, libc::MOUNT_ATTR_NOEXEC),
    ] {
        if flags & ms != 0 {
            set |= attr;
        }
    }
    libc::mount_attr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: 0 }
}

/// The options of a cell's `/tmp` for a memory budget of `memory_bytes`.
pub(crate) fn tmp_options(memory_bytes: u64) -> Result<CString, SandboxError> {
    // A tmpfs of less than a megabyte is not worth mounting; a budget that small fails anyway.
    cstring(format!("size={},mode=1777", memory_bytes.max(1 << 20)))
}

/// The flags of the mount `path` is on that a remount of a bind of it must keep: in a user
/// namespace the kernel locks them.
fn locked_flags(path: &Path) -> Result<libc::c_ulong, SandboxError> {
    let name = cstring(path)?;
    // SAFETY: statvfs writes one struct we own.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a struct to fill.
    if unsafe { libc::statvfs(name.as_ptr(), &mut stat) } != 0 {
        return Err(path_error(path, &std::io::Error::last_os_error().to_string()));
    }
    let mut flags = 0;
    for (st, ms) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if stat.f_flag & st != 0 {
            flags |= ms;
        }
    }
    Ok(flags)
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

pub(crate) fn cstring(path: impl AsRef<std::ffi::OsStr>) -> Result<CString, SandboxError> {
    let bytes = path.as_ref().as_bytes();
    CString::new(bytes).map_err(|_| SandboxError::Path {
        path: String::from_utf8_lossy(bytes).into_owned(),
        why: "contains a NUL byte".to_owned(),
    })
}

fn path_error(path: &Path, why: &str) -> SandboxError {
    SandboxError::Path { path: path.display().to_string(), why: why.to_owned() }
}
