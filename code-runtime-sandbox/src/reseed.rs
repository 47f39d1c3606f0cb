//! What a copy of the spawner process draws anew before it runs its program ([`reseed`]): the
//! secrets the C library drew once at the spawner's start, which every copy would otherwise
//! share with the spawner and with each other.
//!
//! A copy made by `fork` keeps its parent's memory, so every TypeScript cell of one spawner had
//! the same `AT_RANDOM` bytes, and with them the same stack-protector canary and the same glibc
//! pointer guard: an information leak in one cell (or the spawner) would then defeat both
//! mitigations in every later cell. Each copy writes fresh ones before anything of its program
//! runs:
//!
//! - the canary (`%fs:0x28`, its low byte zero as the C library makes it), which every frame
//!   entered from then on checks; no frame entered before returns (the copy ends with `_exit`),
//!   and threads the program starts copy it from this one;
//! - the pointer guard (`%fs:0x30`), which mangles the pointers the C library stores (`setjmp`
//!   buffers, exit and thread-exit handlers). Pointers mangled before with the old guard are the
//!   spawner's exit handlers, which a copy never runs (it ends with `_exit`);
//! - the 16 `AT_RANDOM` bytes themselves, which nothing reads after the start but a leak would
//!   give away.
//!
//! What stays shared is the layout the kernel chose at the spawner's `exec`: where the
//! executable, the libraries, the stack and the C heap (`[heap]`, moved only by `exec`) are.
//! V8 draws its own reservations (its heap, its code) at random addresses in each copy, after
//! the fork. docs/security.md says so.

/// Whether [`reseed`] draws anything on this target.
pub(crate) const SUPPORTED: bool =
    cfg!(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"));

/// Draws the copy's secrets anew (x86-64 Linux; elsewhere nothing): see the module's text.
/// Returns whether it did.
///
/// # Safety
///
/// Only in a copy of a single-threaded process, before its program runs, from a frame that
/// never returns into frames entered before the call (their saved canaries are the old one).
pub(crate) unsafe fn reseed() -> bool {
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    {
        let mut fresh = [0u8; 32];
        // SAFETY: getrandom fills the buffer we own; a short or failed read leaves the old
        // secrets, which is what the copy had before.
        let read =
            unsafe { libc::syscall(libc::SYS_getrandom, fresh.as_mut_ptr(), fresh.len(), 0) };
        if read != fresh.len() as libc::c_long {
            return false;
        }
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&fresh[at..at + 8]);
            u64::from_ne_bytes(bytes)
        };
        // The C library zeroes the canary's low byte, so that a string overflow cannot write it.
        let canary = word(0) & !0xff;
        let guard = word(8);
        // SAFETY: `%fs` is this thread's thread control block, whose words at 0x28 and 0x30 are
        // the C library's canary and pointer guard (glibc's `tcbhead_t` on x86-64, fixed by its
        // ABI with the compilers); the caller's promise covers what reads them.
        unsafe {
            std::arch::asm!(
                "mov qword ptr fs:[0x28], {canary}",
                "mov qword ptr fs:[0x30], {guard}",
                canary = in(reg) canary,
                guard = in(reg) guard,
                options(nostack, preserves_flags),
            );
        }
        // SAFETY: getauxval has no preconditions; AT_RANDOM points at 16 bytes on this
        // process's stack, which are its own.
        let random = unsafe { libc::getauxval(libc::AT_RANDOM) } as *mut u8;
        if !random.is_null() {
            // SAFETY: as above: 16 writable bytes.
            unsafe { std::ptr::copy_nonoverlapping(fresh[16..].as_ptr(), random, 16) };
        }
        true
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]
    false
}
