//! Memory accounting of one run: [`MemoryBudget`], shared by V8's heap (its size sampled by the
//! isolate thread) and the program's ArrayBuffer backing stores (counted exactly by
//! [`allocator`]), and the near-heap-limit callback.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use crate::termination::{Cause, Termination};

/// Bytes of the run's budget the host holds ([`MemoryBudget::charge_host`]), given back when
/// dropped.
#[derive(Debug)]
pub(crate) struct HostCharge {
    budget: Arc<MemoryBudget>,
    len: usize,
}

impl Drop for HostCharge {
    fn drop(&mut self) {
        self.budget.release_host(self.len);
    }
}

/// One run's memory, against one limit.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    limit: usize,
    /// ArrayBuffer backing stores and the host's copies of program data.
    array_buffers: AtomicUsize,
    heap: AtomicUsize,
    /// Set when the allocator refuses a backing store: V8 then collects all garbage, which calls
    /// the near-heap-limit callback although the heap is not full (see [`near_heap_limit`]).
    refused: AtomicBool,
}

impl MemoryBudget {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            array_buffers: AtomicUsize::new(0),
            heap: AtomicUsize::new(0),
            refused: AtomicBool::new(false),
        }
    }

    /// Records the heap's current size, so backing stores see what is left.
    pub(crate) fn set_heap(&self, bytes: usize) {
        self.heap.store(bytes, Ordering::Relaxed);
    }

    /// The budget, in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `len` bytes for a host-side copy of program data (a pending call's argument);
    /// `false` when the budget cannot hold them.
    pub(crate) fn reserve_host(&self, len: usize) -> bool {
        self.take(len)
    }

    /// Gives back what [`reserve_host`](Self::reserve_host) took.
    pub(crate) fn release_host(&self, len: usize) {
        self.release(len);
    }

    /// [`reserve_host`](Self::reserve_host) for as long as the returned charge lives: for what
    /// the host keeps of the program's outside V8's heap (a timer's handles), which V8's own
    /// limit does not see. `None` when the budget cannot hold it.
    pub(crate) fn charge_host(self: &Arc<Self>, len: usize) -> Option<HostCharge> {
        self.take(len).then(|| HostCharge { budget: self.clone(), len })
    }

    fn reserve(&self, len: usize) -> bool {
        let taken = self.take(len);
        if !taken {
            self.refused.store(true, Ordering::Release);
        }
        taken
    }

    fn take(&self, len: usize) -> bool {
        let heap = self.heap.load(Ordering::Relaxed);
        let mut used = self.array_buffers.load(Ordering::Relaxed);
        loop {
            if used.saturating_add(len).saturating_add(heap) > self.limit {
                return false;
            }
            match self.array_buffers.compare_exchange_weak(
                used,
                used + len,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    fn release(&self, len: usize) {
        self.array_buffers.fetch_sub(len, Ordering::AcqRel);
    }
}

/// An ArrayBuffer allocator that refuses what the budget cannot hold: V8 turns the refusal into a
/// `RangeError` the program may catch, never the host an out-of-memory abort.
pub(crate) fn allocator(budget: &Arc<MemoryBudget>) -> v8::UniqueRef<v8::Allocator> {
    static VTABLE: v8::RustAllocatorVtable<MemoryBudget> =
        v8::RustAllocatorVtable { allocate, allocate_uninitialized, free, drop: drop_budget };
    // SAFETY: the handle is a strong `Arc` reference, released exactly once by `drop_budget`
    // when V8 drops the allocator; the vtable functions only use it as `&MemoryBudget`.
    unsafe { v8::new_rust_allocator(Arc::into_raw(budget.clone()), &VTABLE) }
}

unsafe extern "C" fn allocate(budget: &MemoryBudget, len: usize) -> *mut c_void {
    if !budget.reserve(len) {
        return std::ptr::null_mut();
    }
    // SAFETY: calloc with a size; a null result is handed to V8 as a failed allocation.
    let data = unsafe { libc::calloc(len.max(1), 1) };
    if data.is_null() {
        budget.release(len);
    }
    data
}

unsafe extern "C" fn allocate_uninitialized(budget: &MemoryBudget, len: usize) -> *mut c_void {
    if !budget.reserve(len) {
        return std::ptr::null_mut();
    }
    // SAFETY: malloc with a size; a null result is handed to V8 as a failed allocation.
    let data = unsafe { libc::malloc(len.max(1)) };
    if data.is_null() {
        budget.release(len);
    }
    data
}

unsafe extern "C" fn free(budget: &MemoryBudget, data: *mut c_void, len: usize) {
    // SAFETY: V8 frees only what `allocate*` returned, with the length it asked for.
    unsafe { libc::free(data) };
    budget.release(len);
}

unsafe extern "C" fn drop_budget(budget: *const MemoryBudget) {
    // SAFETY: the pointer came from `Arc::into_raw` in `allocator`, and V8 drops it once.
    drop(unsafe { Arc::from_raw(budget) });
}

/// What the near-heap-limit callback needs; lives until the isolate is gone.
pub(crate) struct HeapGuard {
    pub(crate) termination: Arc<Termination>,
    pub(crate) handle: v8::IsolateHandle,
    pub(crate) budget: Arc<MemoryBudget>,
    /// Refused backing stores answered without terminating, so far.
    pub(crate) refusals: AtomicU32,
    /// Extensions granted to unwind a terminated program, so far.
    pub(crate) unwinds: AtomicU32,
    /// How much room a terminated program gets to unwind.
    pub(crate) unwinding: Unwinding,
}

/// How the near-heap-limit callback lets a terminated program unwind: half the limit again,
/// once, at least [`MIN_UNWIND_BYTES`] and, in the host's process, at most
/// [`MAX_HOST_UNWIND_BYTES`].
///
/// Termination stops a program at its next interrupt check, but a builtin under way
/// (`Array.prototype.fill`, `String.prototype.split`, `"x".repeat`, an array spread) first makes
/// the one allocation it is in, whatever the limit. An allocation V8 cannot make even then is its
/// fatal out-of-memory error: in a cell it ends the cell (its host hears why); in the host's
/// process it ends the run and abandons its isolate (`abandonment.rs`), whose memory the process
/// then keeps. So the room is a bounded part of the run's own budget: what the host holds for a
/// run is its budget and that slack, never more, and a builtin that needs more is abandoned
/// rather than fed.
pub(crate) enum Unwinding {
    /// In a cell, whose address space is bounded anyway.
    Cell,
    /// In the host's process, shared with every other run.
    Host,
}

impl Unwinding {
    /// The room past `current` granted to unwind.
    fn room(&self, current: usize) -> usize {
        let half = (current / 2).max(MIN_UNWIND_BYTES);
        match self {
            Unwinding::Cell => half,
            Unwinding::Host => half.min(MAX_HOST_UNWIND_BYTES),
        }
    }
}

/// The least room to unwind: enough for the exception and the stack of a small run.
const MIN_UNWIND_BYTES: usize = 16 << 20;

/// The most room to unwind a run in the host's process is given (see [`Unwinding`]).
pub(crate) const MAX_HOST_UNWIND_BYTES: usize = 256 << 20;

/// What the host may hold for one run in its own process: its budget, grown by the room given
/// for refused backing stores and then to unwind. (What V8 keeps outside its heap meanwhile,
/// handles and parser and compiler zones, is bounded by the heap it refers to.)
pub(crate) fn host_bytes(limit: usize) -> usize {
    // Refused backing stores may each have grown the limit by a sixteenth (or a mebibyte) first:
    // (17/16)^4 is under 1.3.
    let grown = limit.saturating_add(limit / 10 * 3).saturating_add((MAX_REFUSALS as usize) << 20);
    grown.saturating_add(Unwinding::Host.room(grown))
}

/// Refused backing stores that stay a `RangeError` the program can catch; a program that keeps
/// asking ends as out of memory.
const MAX_REFUSALS: u32 = 4;
/// Extensions of the heap limit granted to unwind a terminated program: one. A program whose
/// builtin under way outgrows even that meets V8's fatal out-of-memory error; granting more each
/// time would let the heap grow without bound.
const MAX_UNWINDS: u32 = 1;

/// V8 is about to run out of heap.
///
/// V8 also calls this when the allocator refused a backing store (an `ArrayBuffer` the budget
/// cannot hold): it collects all garbage before giving up, and that calls the callback. Then the
/// program gets its catchable `RangeError`: the callback grants a little room (so a flag that is
/// stale by the time the heap itself fills costs one small extension, never a fatal error) and
/// does not terminate. Otherwise it records why, terminates, and grants room to unwind
/// ([`Unwinding`]), once.
///
/// # Safety
///
/// `data` must point to a live [`HeapGuard`] (see `isolate::run_isolate`).
pub(crate) unsafe extern "C" fn near_heap_limit(
    data: *mut c_void,
    current: usize,
    _initial: usize,
) -> usize {
    // SAFETY: `data` is the `HeapGuard` boxed by the isolate thread, alive until after the isolate.
    let guard = unsafe { &*(data as *const HeapGuard) };
    if guard.budget.refused.swap(false, Ordering::AcqRel)
        && guard.refusals.fetch_add(1, Ordering::AcqRel) < MAX_REFUSALS
    {
        return current.saturating_add((current / 16).max(1 << 20));
    }
    guard.termination.claim(Cause::OutOfMemory);
    guard.handle.terminate_execution();
    if guard.unwinds.fetch_add(1, Ordering::AcqRel) >= MAX_UNWINDS {
        return current;
    }
    current.saturating_add(guard.unwinding.room(current))
}
