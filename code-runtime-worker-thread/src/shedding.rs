//! What a cell gives back once its run waits on the host (or, made ahead, waits for its run): a
//! cell holds only what it uses while its program waits, which is what most of a cell's life is.
//!
//! Four things go, in this order: what the program's start left on V8's heap (a full collection
//! of a small heap), the C allocator's free pages, the isolate thread's stack below the loop that
//! waits, and the pages of the C heap that hold nothing but zeros. The last needs the process to
//! itself ([`SoleThread`]).

use std::ffi::c_void;
use std::io::Read;
use std::ops::Range;

/// The heap under which a waiting cell's run is collected in full: what starting a program
/// leaves is a few hundred kilobytes, collected in about a millisecond; a larger heap is the
/// program's own, which V8 collects as it sees fit, and whose full collection would cost the
/// run's compute budget more the larger it is.
const COLLECT_UNDER_BYTES: usize = 4 << 20;

/// How much of its C heap, resident, a waiting cell reads for pages of zeros at most: a waiting
/// cell's is about 1 MB, and reading this much takes about a quarter of a millisecond (measured,
/// every page read to its end); a larger one holds the program's data, beside which the pages V8
/// zeroed weigh little, while reading it costs the run's compute budget more the larger it is.
/// What counts is what is resident: a copy of the spawner process inherits its heap's address
/// range, most of it free and not resident.
const ZEROS_UNDER_BYTES: usize = 4 << 20;

/// Below the frame that releases its thread's stack, what stays: the calls it makes from there.
const STACK_IN_USE_BELOW: usize = 4 << 10;

/// Says that the isolate's thread is the only thread of its process that writes memory while it
/// sheds: a cell's, where the main thread only waits to join it and V8 runs single-threaded
/// (`platform::spawn_cell_thread`). What holds a `SoleThread` may release the process's pages of
/// zeros ([`release_zero_pages`]), which a write from another thread between a page's check and
/// its release would lose.
pub(crate) struct SoleThread(());

impl SoleThread {
    /// `None` when the process has more than two threads (this one and one that only waits):
    /// the promise below is then checked to be false.
    ///
    /// # Safety
    ///
    /// Whenever the thread that holds the result sheds ([`shed`]), no other thread of this
    /// process may run code that writes memory.
    pub(crate) unsafe fn new() -> Option<Self> {
        at_most_two_threads().then_some(Self(()))
    }
}

/// Whether this process has at most two threads: the isolate's, and the main one that waits to
/// join it. Checked again before each release of pages of zeros, since a thread started later
/// (by a library, say) would break [`SoleThread`]'s promise.
fn at_most_two_threads() -> bool {
    code_runtime_sandbox::threads_in_this_process().is_some_and(|threads| threads <= 2)
}

/// Gives back what the run no longer uses: see the module's text.
pub(crate) fn shed(isolate: &mut v8::Isolate, sole: &SoleThread) {
    // What starting the program allocated and dropped goes, and the young generation's page with
    // it (measured: 33 kB of a waiting cell's own 1.9 MB, for about a millisecond of its CPU).
    if isolate.get_heap_statistics().used_heap_size() <= COLLECT_UNDER_BYTES {
        isolate.low_memory_notification();
    }
    // What compiling and starting the program freed (V8's zones, mostly).
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
    release_stack_below_here();
    release_heap_zeros(sole);
}

/// Gives the pages of this thread's stack below the frames it runs in now back to the system:
/// V8's initialisation, its deserialiser and the program's compilation ran deeper than the loop
/// that waits, and their pages would stay the cell's while it waits. Should the thread go that
/// deep again, the kernel gives it zeroed pages.
#[inline(never)]
fn release_stack_below_here() {
    let mut attributes = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: fills `attributes` for the calling thread; destroyed below once read.
    if unsafe { libc::pthread_getattr_np(libc::pthread_self(), attributes.as_mut_ptr()) } != 0 {
        return;
    }
    let (mut lowest, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: `attributes` was initialised by pthread_getattr_np, and is destroyed once.
    let read = unsafe {
        let read = libc::pthread_attr_getstack(attributes.as_ptr(), &mut lowest, &mut size);
        libc::pthread_attr_destroy(attributes.as_mut_ptr());
        read
    };
    let page = page_size();
    // An address in this frame: the stack grows down, so what lies below it (less a margin for
    // the calls made from here) holds no live frame.
    let here = attributes.as_ptr() as usize;
    let start = (lowest as usize).next_multiple_of(page);
    let end = here.saturating_sub(STACK_IN_USE_BELOW) / page * page;
    if read != 0 || end <= start || here > lowest as usize + size {
        return;
    }
    // SAFETY: [start, end) lies within this thread's stack (checked above), below every live
    // frame of it; MADV_DONTNEED on private anonymous memory leaves it mapped, zero-filled on
    // next touch. A failure (a filter that refuses madvise) leaves the pages where they were.
    unsafe { libc::madvise(start as *mut c_void, end - start, libc::MADV_DONTNEED) };
}

/// Releases the pages of the C heap (`[heap]` in the process's map, which a cell's one allocator
/// arena grows) that hold only zeros. Making an isolate fills tables and caches with zeros, and a
/// cell copied from the spawner process makes them on pages it copied from the spawner's heap:
/// measured, 45 pages of a waiting cell's own (180 kB of its 1.87 MB) held nothing else.
fn release_heap_zeros(_sole: &SoleThread) {
    if !at_most_two_threads() {
        return;
    }
    // Room for a cell's map (about 80 lines) at once: `/proc` files say no size, and reading one
    // in growing steps takes ten reads.
    let mut maps = String::with_capacity(16 << 10);
    let read =
        std::fs::File::open("/proc/self/maps").and_then(|mut file| file.read_to_string(&mut maps));
    // A cell without its own `/proc` sees the host's, where `self` is still this process; one
    // whose map cannot be read keeps its pages.
    if read.is_err() {
        return;
    }
    // `maps` and `heap` live to the end: freed, either could give the heap's top back.
    let heap = heap_ranges(&maps);
    let mut unread = ZEROS_UNDER_BYTES;
    for range in heap {
        // SAFETY: `[heap]` is private anonymous memory (the C heap's `brk` area), mapped while
        // this runs: nothing in this process unmaps it but the allocator, which no other thread
        // runs (`SoleThread`) and this one does not call until the loop ends (the callee
        // allocates nothing). Nor does any other thread write to it (`SoleThread`), and this one
        // writes nothing there between a page's check and its release (see the callee).
        unsafe { release_zero_pages(range, &mut unread) };
    }
}

/// The C heap's ranges in a `/proc/<pid>/maps` text: more than one where the heap grew past
/// what a copy of the spawner process inherited (the kernel keeps the two apart).
fn heap_ranges(maps: &str) -> Vec<Range<usize>> {
    maps.lines()
        .filter_map(|line| {
            // start-end perms offset device inode path
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let private_writable = fields.next()? == "rw-p";
            (private_writable && fields.nth(3) == Some("[heap]")).then_some(())?;
            Some(usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?)
        })
        .collect()
}

/// Pages whose residency one `mincore` asks, into a buffer on the stack.
const RESIDENCY_CHUNK: usize = 256;

/// Gives back to the system the resident pages of `range` that hold only zeros; returns how many
/// bytes. A private anonymous page released with `MADV_DONTNEED` reads as zeros when next
/// touched, so nothing that reads the range can tell; a write gets a fresh page. Reads nothing
/// when more of the range is resident than `unread` bytes, and takes what it reads from them.
///
/// It allocates nothing: a free could give the C heap's top back to the system (its end moves
/// down) under a range of that heap.
///
/// # Safety
///
/// `range` is mapped private and anonymous while this runs, and no other thread writes to it:
/// a write between a page's check and its release would be lost.
pub(crate) unsafe fn release_zero_pages(range: Range<usize>, unread: &mut usize) -> usize {
    let page = page_size();
    let start = range.start.next_multiple_of(page);
    let end = (range.end / page * page).max(start);
    let chunks = || {
        (start..end)
            .step_by(RESIDENCY_CHUNK * page)
            .map(move |from| from..(from + RESIDENCY_CHUNK * page).min(end))
    };
    // Only resident pages are read: reading one that is not would map the zero page for it.
    let mut buffer = [0u8; RESIDENCY_CHUNK];
    let mut to_read = 0;
    for chunk in chunks() {
        // SAFETY: the chunk is within the caller's mapped range.
        let Some(resident) = (unsafe { residency(chunk, page, &mut buffer) }) else { return 0 };
        to_read += resident.iter().filter(|flags| *flags & 1 != 0).count() * page;
    }
    if to_read > *unread {
        return 0;
    }
    *unread -= to_read;
    let mut released = 0;
    // Released as soon as its zeros end: nothing has written to a run of pages since they were
    // read (the caller's promise, and this loop writes only its own locals, on its stack).
    let mut release = |pages: Range<usize>| {
        // SAFETY: whole pages of the caller's private anonymous range, each read as zeros just
        // now; MADV_DONTNEED zero-fills them on next touch. A failure (a filter that refuses
        // madvise) leaves them where they were.
        if unsafe { libc::madvise(pages.start as *mut c_void, pages.len(), libc::MADV_DONTNEED) }
            == 0
        {
            released += pages.len();
        }
    };
    let mut zeros_from = None;
    let mut read_to = start;
    for chunk in chunks() {
        // SAFETY: as above.
        let Some(resident) = (unsafe { residency(chunk.clone(), page, &mut buffer) }) else {
            break;
        };
        for (index, flags) in resident.iter().enumerate() {
            let address = chunk.start + index * page;
            // SAFETY: a resident page of the range, readable (the caller's mapping is).
            let zero = flags & 1 != 0 && unsafe { holds_zeros(address, page) };
            match (zero, zeros_from) {
                (true, None) => zeros_from = Some(address),
                (false, Some(from)) => {
                    zeros_from = None;
                    release(from..address);
                }
                _ => {}
            }
        }
        read_to = chunk.end;
    }
    if let Some(from) = zeros_from {
        release(from..read_to);
    }
    released
}

/// The residency of `chunk`'s pages (`mincore`'s bytes, resident when the lowest bit is set), in
/// `buffer`; `None` when the kernel does not say (a page not mapped).
///
/// # Safety
///
/// `chunk` is page-aligned and at most `buffer.len()` pages of `page` bytes.
unsafe fn residency(chunk: Range<usize>, page: usize, buffer: &mut [u8]) -> Option<&[u8]> {
    let pages = chunk.len() / page;
    // SAFETY: mincore on a page-aligned range, into a buffer of one byte per page (the caller's
    // promise: it has that many).
    let asked =
        unsafe { libc::mincore(chunk.start as *mut c_void, chunk.len(), buffer.as_mut_ptr()) };
    (asked == 0).then_some(&buffer[..pages])
}

/// Whether the `len` bytes at `address` are all zero.
///
/// # Safety
///
/// The bytes are mapped and readable.
unsafe fn holds_zeros(address: usize, len: usize) -> bool {
    static ZEROS: [u8; 4096] = [0; 4096];
    // The C library's comparison reads memory that is not Rust's (V8's, the allocator's) as the
    // bytes it holds, whatever Rust would make of it.
    (address..address + len).step_by(ZEROS.len()).all(|chunk| {
        let n = ZEROS.len().min(address + len - chunk);
        // SAFETY: `n` readable bytes at `chunk` (the caller's promise) against as many zeros.
        unsafe { libc::memcmp(chunk as *const c_void, ZEROS.as_ptr().cast(), n) == 0 }
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The promise of a sole thread is checked: in a process with threads of its own (this
    /// test's and two more), none is made.
    #[test]
    fn no_sole_thread_in_a_process_of_many_threads() {
        let (stop, waiting) = std::sync::mpsc::channel::<()>();
        let waiting = std::sync::Arc::new(std::sync::Mutex::new(waiting));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let waiting = waiting.clone();
                std::thread::spawn(move || drop(waiting.lock().map(|waiting| waiting.recv())))
            })
            .collect();
        // SAFETY: refused here, so nothing is released.
        assert!(unsafe { SoleThread::new() }.is_none());
        drop(stop);
        for thread in threads {
            thread.join().expect("the thread");
        }
    }

    /// Pages of a private anonymous mapping of a test's own, unmapped on drop.
    struct Mapping(Range<usize>);

    impl Mapping {
        fn new(pages: usize) -> Self {
            let len = pages * page_size();
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
            let protection = libc::PROT_READ | libc::PROT_WRITE;
            // SAFETY: a fresh mapping at an address of the kernel's choosing.
            let base = unsafe { libc::mmap(std::ptr::null_mut(), len, protection, flags, -1, 0) };
            assert_ne!(base, libc::MAP_FAILED);
            Self(base as usize..base as usize + len)
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: the mapping `new` made, unmapped once; nothing refers to it any more.
            unsafe { libc::munmap(self.0.start as *mut c_void, self.0.len()) };
        }
    }

    #[test]
    fn the_heap_is_found_in_a_map() {
        let maps = "55d0a000-55d0b000 r--p 00000000 08:01 42 /usr/bin/x\n\
                    55d0c000-55d0f000 rw-p 00000000 00:00 0                  [heap]\n\
                    7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n";
        let heap = 0x55d0c000..0x55d0f000;
        assert_eq!(heap_ranges(maps), [heap]);
        let grown = "55d0c000-55d0f000 rw-p 00000000 00:00 0 [heap]\n\
                     55d0f000-55d1f000 rw-p 00000000 00:00 0 [heap]\n";
        assert_eq!(heap_ranges(grown), [0x55d0c000..0x55d0f000, 0x55d0f000..0x55d1f000]);
        assert!(heap_ranges("55d0c000-55d0f000 r--p 00000000 00:00 0 [heap]\n").is_empty());
        assert!(heap_ranges("55d0c000-55d0f000 rw-p 00000000 00:00 0 /tmp/[heap]\n").is_empty());
        assert!(heap_ranges("").is_empty());
    }

    /// Pages of zeros go, and what every page of the range holds reads the same after.
    #[test]
    fn pages_of_zeros_go_back_and_every_page_reads_as_it_did() {
        const PAGES: usize = 12;
        let page = page_size();
        let mapping = Mapping::new(PAGES);
        let base = mapping.0.start;
        // Per page: never touched, touched and left zero, or holding a byte (first, middle or
        // last of the page).
        let layout: [Option<usize>; PAGES] = [
            None,
            Some(0),
            Some(page - 1),
            None,
            None,
            Some(page / 2),
            None,
            Some(0),
            Some(1),
            None,
            None,
            Some(page - 1),
        ];
        let mut unread = usize::MAX;
        let touched_zero =
            [false, false, false, true, true, false, true, false, false, true, false, false];
        for (index, byte) in layout.iter().enumerate() {
            let at = base + index * page;
            // SAFETY: within the mapping above.
            unsafe {
                if touched_zero[index] {
                    std::ptr::write_volatile(at as *mut u8, 9);
                    std::ptr::write_volatile(at as *mut u8, 0);
                }
                if let Some(offset) = byte {
                    std::ptr::write_volatile((at + offset) as *mut u8, 7);
                }
            }
        }
        let resident = |index: usize| {
            let mut flag = 0u8;
            let address = (base + index * page) as *mut c_void;
            // SAFETY: mincore of one page of the mapping into one byte.
            assert_eq!(unsafe { libc::mincore(address, page, &mut flag) }, 0);
            flag & 1 != 0
        };
        // SAFETY: the mapping is private, anonymous, and this thread's alone.
        let released = unsafe { release_zero_pages(base..base + PAGES * page, &mut unread) };
        assert_eq!(released, touched_zero.iter().filter(|zero| **zero).count() * page);
        for (index, byte) in layout.iter().enumerate() {
            assert_eq!(resident(index), byte.is_some(), "page {index}");
            // SAFETY: within the mapping above; every page of it readable.
            let bytes =
                unsafe { std::slice::from_raw_parts((base + index * page) as *const u8, page) };
            for (offset, value) in bytes.iter().enumerate() {
                let expected = if Some(offset) == *byte { 7 } else { 0 };
                assert_eq!(*value, expected, "page {index}, byte {offset}");
            }
        }
        // A released page takes writes again.
        // SAFETY: within the mapping.
        unsafe { std::ptr::write_volatile((base + 3 * page + 5) as *mut u8, 1) };
        assert!(resident(3));
        // A range that is not whole pages: only the pages wholly within it count. Pages 4 and 6
        // (released above) hold zeros again, written; page 5 between them holds a byte.
        for index in [4, 6] {
            // SAFETY: within the mapping.
            unsafe { std::ptr::write_volatile((base + index * page) as *mut u8, 0) };
        }
        // SAFETY: as above.
        let released =
            unsafe { release_zero_pages(base + 4 * page + 1..base + 7 * page - 1, &mut unread) };
        assert_eq!(released, 0, "only page 5 lies wholly within");
        assert!(resident(4) && resident(6));
        // SAFETY: as above.
        let released = unsafe { release_zero_pages(base + 4 * page..base + 7 * page, &mut unread) };
        assert_eq!(released, 2 * page);
        assert!(!resident(4) && resident(5) && !resident(6));
    }

    /// More resident than it may read: nothing is read or released, and nothing is taken from
    /// what it may read; enough: what is resident is taken.
    #[test]
    fn a_range_with_more_resident_than_it_may_read_is_left_as_it_is() {
        let page = page_size();
        let mapping = Mapping::new(4);
        let base = mapping.0.start;
        // Three pages touched and zero, one never touched.
        for index in 0..3 {
            // SAFETY: within the mapping.
            unsafe { std::ptr::write_volatile((base + index * page) as *mut u8, 0) };
        }
        let mut unread = 3 * page - 1;
        // SAFETY: the mapping is private, anonymous, and this thread's alone.
        assert_eq!(unsafe { release_zero_pages(base..base + 4 * page, &mut unread) }, 0);
        assert_eq!(unread, 3 * page - 1);
        let mut unread = 3 * page + 1;
        // SAFETY: as above.
        assert_eq!(unsafe { release_zero_pages(base..base + 4 * page, &mut unread) }, 3 * page);
        assert_eq!(unread, 1);
    }

    /// Runs of zeros across the chunks residency is asked in, and one that ends the range.
    #[test]
    fn runs_of_zeros_go_whole_across_chunks_and_at_the_end() {
        const PAGES: usize = 2 * RESIDENCY_CHUNK + 88;
        let page = page_size();
        let mapping = Mapping::new(PAGES);
        let base = mapping.0.start;
        let zeroed = (RESIDENCY_CHUNK - 6..=RESIDENCY_CHUNK + 4).chain(PAGES - 10..PAGES);
        for index in zeroed.clone() {
            // SAFETY: within the mapping.
            unsafe { std::ptr::write_volatile((base + index * page) as *mut u8, 0) };
        }
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile((base + (RESIDENCY_CHUNK + 5) * page) as *mut u8, 3) };
        let mut unread = usize::MAX;
        // SAFETY: the mapping is private, anonymous, and this thread's alone.
        let released = unsafe { release_zero_pages(base..base + PAGES * page, &mut unread) };
        assert_eq!(released, zeroed.count() * page);
        assert_eq!(usize::MAX - unread, (11 + 1 + 10) * page, "what was resident was read");
        // SAFETY: as above.
        assert_eq!(unsafe { *((base + (RESIDENCY_CHUNK + 5) * page) as *const u8) }, 3);
    }
}
