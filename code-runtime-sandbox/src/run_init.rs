//! A cell's init once its worker runs, as an executable: 173 bytes of x86-64 code (`run_init.S`)
//! in a 349-byte ELF image, which the host writes to a sealed, execute-only `memfd`, hands every
//! zygote with its recipe and leaves open for the inits it clones itself.
//!
//! A cell's first process (PID 1 of its namespaces) is a clone of the process that started it:
//! the host, the spawner process or a zygote. It starts the worker (PID 2) and is then left to
//! reap and report. Still the copy it was cloned from, it would hold its own copy of every page
//! it or its original writes as it goes on (a Python run's init: 390 kB per waiting run; a
//! TypeScript cell's: 70 kB). Executing this image instead drops all of it: what is left is a
//! page of stack. The image cannot be read, only executed, so the `exec` itself makes the init
//! undumpable (`would_dump`: no process of the cell may read its memory, as of the clone before),
//! before its first instruction. The image exits with the worker's status, as the init did; it
//! also writes it to descriptor 3, where a zygote's run has its report socket (a cell of the
//! host's has nothing there).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// `run_init.S`'s text, as `as` assembles it (checked by the test below).
#[cfg(target_arch = "x86_64")]
const CODE: [u8; 173] = [
    0xb8, 0x9d, 0x00, 0x00, 0x00, 0xbf, 0x0f, 0x00, 0x00, 0x00, 0x48, 0x8d, 0x35, 0x97, 0x00, 0x00,
    0x00, 0x0f, 0x05, 0x48, 0x83, 0xec, 0x20, 0xc7, 0x04, 0x24, 0x00, 0x00, 0x00, 0x00, 0xb8, 0x3d,
    0x00, 0x00, 0x00, 0x48, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff, 0x48, 0x89, 0xe6, 0x31, 0xd2, 0x45,
    0x31, 0xd2, 0x0f, 0x05, 0x48, 0x83, 0xf8, 0xfc, 0x74, 0xe4, 0x48, 0x85, 0xc0, 0x78, 0x06, 0x48,
    0x83, 0xf8, 0x02, 0x75, 0xd9, 0x8b, 0x04, 0x24, 0x89, 0xc1, 0x83, 0xe1, 0x7f, 0x74, 0x08, 0x8d,
    0x81, 0x80, 0x00, 0x00, 0x00, 0xeb, 0x08, 0xc1, 0xe8, 0x08, 0x25, 0xff, 0x00, 0x00, 0x00, 0x41,
    0x89, 0xc0, 0x48, 0x8d, 0x74, 0x24, 0x20, 0xb9, 0x0a, 0x00, 0x00, 0x00, 0x31, 0xd2, 0xf7, 0xf1,
    0x80, 0xc2, 0x30, 0x48, 0xff, 0xce, 0x88, 0x16, 0x85, 0xc0, 0x75, 0xf0, 0x48, 0x83, 0xee, 0x05,
    0xc7, 0x06, 0x65, 0x78, 0x69, 0x74, 0xc6, 0x46, 0x04, 0x20, 0x48, 0x8d, 0x54, 0x24, 0x20, 0x48,
    0x29, 0xf2, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xbf, 0x03, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xb8, 0xe7,
    0x00, 0x00, 0x00, 0x44, 0x89, 0xc7, 0x0f, 0x05, 0x63, 0x65, 0x6c, 0x6c, 0x00,
];

/// Where the image is loaded; any address would do (the code is position-independent).
#[cfg(target_arch = "x86_64")]
const BASE: u64 = 0x40_0000;

/// The ELF header's and the two program headers' sizes: the code follows them.
#[cfg(target_arch = "x86_64")]
const HEADERS: usize = 64 + 2 * 56;

/// The image: an ELF header, a program header loading the whole file read-and-execute, one
/// declaring the stack not executable, then the code, where execution starts.
#[cfg(target_arch = "x86_64")]
fn image() -> Vec<u8> {
    let size = (HEADERS + CODE.len()) as u64;
    let mut out = Vec::with_capacity(HEADERS + CODE.len());
    // e_ident: ELF, 64-bit, little-endian, version 1, System V ABI; then ET_EXEC, x86-64,
    // version 1, the entry, program headers right after this header, no section headers.
    out.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&62u16.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&(BASE + HEADERS as u64).to_le_bytes());
    out.extend_from_slice(&64u64.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    // Header sizes: this one, a program header (two of them), a section header (none).
    for half in [64u16, 56, 2, 64, 0, 0] {
        out.extend_from_slice(&half.to_le_bytes());
    }
    // PT_LOAD, read and execute: the whole file at BASE.
    program_header(&mut out, 1, 5, BASE, size, 0x1000);
    // PT_GNU_STACK, read and write.
    program_header(&mut out, 0x6474_e551, 6, 0, 0, 16);
    out.extend_from_slice(&CODE);
    out
}

#[cfg(target_arch = "x86_64")]
fn program_header(out: &mut Vec<u8>, kind: u32, flags: u32, address: u64, size: u64, align: u64) {
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // p_offset
    out.extend_from_slice(&address.to_le_bytes()); // p_vaddr
    out.extend_from_slice(&address.to_le_bytes()); // p_paddr
    out.extend_from_slice(&size.to_le_bytes()); // p_filesz
    out.extend_from_slice(&size.to_le_bytes()); // p_memsz
    out.extend_from_slice(&align.to_le_bytes());
}

/// This process's image, made the first time a cell needs it (before any clone: never in a
/// child) and held for the process's life (close-on-exec): the descriptor every cell's init this
/// process clones inherits, and every zygote is handed. `None` as for [`executable`].
pub(crate) fn shared() -> Option<libc::c_int> {
    static IMAGE: OnceLock<Option<OwnedFd>> = OnceLock::new();
    IMAGE.get_or_init(executable).as_ref().map(AsRawFd::as_raw_fd)
}

/// The image in a sealed `memfd` that may be executed and not read (mode `0111`): `None` where
/// there is no image for this machine or the kernel makes no executable `memfd`
/// (`vm.memfd_noexec`); the cells' inits then stay what they were.
fn executable() -> Option<OwnedFd> {
    #[cfg(target_arch = "x86_64")]
    {
        memfd(&image()).ok()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

fn memfd(image: &[u8]) -> io::Result<OwnedFd> {
    const MFD_EXEC: libc::c_uint = 0x10;
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: a NUL-terminated name and flags.
    let mut fd = unsafe { libc::memfd_create(c"cell".as_ptr(), flags | MFD_EXEC) };
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // A kernel before 6.3 knows no MFD_EXEC; its memfds are executable.
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(c"cell".as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just made, owned by nothing else.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    std::io::Write::write_all(&mut &file, image)?;
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o111))?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file.into())
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::io::Read;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_code_is_what_as_makes_of_run_init_s() {
        let dir =
            std::env::temp_dir().join(format!("code-runtime-run-init-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let object = dir.join("run_init.o");
        let code = dir.join("code.bin");
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/src/run_init.S");
        #[expect(clippy::disallowed_methods, reason = "binutils, run by a test")]
        let assembled = std::process::Command::new("as")
            .args(["--64", "-o"])
            .arg(&object)
            .arg(source)
            .status()
            .expect("binutils' `as`");
        assert!(assembled.success());
        #[expect(clippy::disallowed_methods, reason = "binutils, run by a test")]
        let copied = std::process::Command::new("objcopy")
            .args(["-O", "binary", "-j", ".text"])
            .arg(&object)
            .arg(&code)
            .status()
            .expect("binutils' `objcopy`");
        assert!(copied.success());
        let bytes = std::fs::read(&code).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(bytes, super::CODE, "run_init.rs's CODE is not run_init.S: assemble it again");
    }

    #[test]
    fn the_image_runs_and_reports_on_descriptor_3() {
        // Without a pid namespace it has no PID 2 to wait for: it reaps until no child is left
        // (none) and reports the status it started with, 0.
        let image = super::executable().expect("an executable memfd");
        let mut pipe = [0; 2];
        // SAFETY: pipe2 fills the array.
        assert_eq!(unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: an all-zero stat is valid; fstat fills it.
        let mut mode: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on our descriptor.
        assert_eq!(unsafe { libc::fstat(image.as_raw_fd(), &mut mode) }, 0);
        assert_eq!(mode.st_mode & 0o777, 0o111, "executable, not readable");
        // Out of descriptor 3's way, which the child makes the pipe's end.
        // SAFETY: fcntl duplicates a descriptor we own.
        let executable = unsafe { libc::fcntl(image.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
        assert!(executable >= 10);
        let argv = [c"cell".as_ptr(), std::ptr::null()];
        let envp: [*const libc::c_char; 1] = [std::ptr::null()];
        // SAFETY: the child only calls async-signal-safe functions (dup2, execveat, _exit).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                // Descriptor 3 open across the exec, also when the pipe's end already is 3.
                libc::dup2(pipe[1], 3);
                libc::fcntl(3, libc::F_SETFD, 0);
                libc::syscall(
                    libc::SYS_execveat,
                    executable,
                    c"".as_ptr(),
                    argv.as_ptr(),
                    envp.as_ptr(),
                    libc::AT_EMPTY_PATH,
                );
                libc::_exit(127);
            }
        }
        // SAFETY: closing our copies of the write end and of the image.
        unsafe {
            libc::close(pipe[1]);
            libc::close(executable);
        }
        // SAFETY: a descriptor we own.
        let mut read = std::fs::File::from(unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pipe[0])
        });
        let mut said = String::new();
        read.read_to_string(&mut said).unwrap();
        let mut status = 0;
        // SAFETY: waiting for our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{status:#x}");
        assert_eq!(said, "exit 0");
    }
}
