//! Why a run's execution was terminated, recorded before `terminate_execution` is called and
//! never parsed back from an error string; and the memory budget V8's heap and the program's
//! ArrayBuffers share.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The first reason to end a run wins; later ones are ignored. Holds the isolate's handle once the
/// isolate exists, so a stop can never fall between "no isolate yet" and "isolate running".
#[derive(Debug, Default)]
pub(crate) struct Termination {
    reason: AtomicU8,
    handle: Mutex<Option<v8::IsolateHandle>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Reason {
    Compute = 1,
    WallClock,
    Cancelled,
    Disposed,
    OutOfMemory,
    OutputExceeded,
    /// The host stopped waiting (the run future was dropped, or the host side failed).
    Abandoned,
}

impl Termination {
    /// Records `reason` if no reason was recorded yet; returns whether it did.
    pub(crate) fn claim(&self, reason: Reason) -> bool {
        self.reason.compare_exchange(0, reason as u8, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Records `reason` and terminates the isolate if it exists; if it does not yet, `attach`
    /// terminates it as soon as it does. Returns whether this call recorded the reason.
    pub(crate) fn stop(&self, reason: Reason) -> bool {
        if !self.claim(reason) {
            return false;
        }
        // Claim first, then look for the handle under the lock `attach` holds while it checks
        // the reason: one of the two always sees the other.
        if let Some(handle) = self.handle.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            handle.terminate_execution();
        }
        true
    }

    /// Called by the isolate thread once its isolate exists.
    pub(crate) fn attach(&self, handle: v8::IsolateHandle) {
        let mut slot = self.handle.lock().unwrap_or_else(PoisonError::into_inner);
        if self.reason().is_some() {
            handle.terminate_execution();
        }
        *slot = Some(handle);
    }

    pub(crate) fn reason(&self) -> Option<Reason> {
        Some(match self.reason.load(Ordering::Acquire) {
            1 => Reason::Compute,
            2 => Reason::WallClock,
            3 => Reason::Cancelled,
            4 => Reason::Disposed,
            5 => Reason::OutOfMemory,
            6 => Reason::OutputExceeded,
            7 => Reason::Abandoned,
            _ => return None,
        })
    }
}

/// One run's memory: V8's heap (its size sampled by the isolate thread) plus ArrayBuffer backing
/// stores (counted exactly by [`allocator`]), against one limit.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    limit: usize,
    array_buffers: AtomicUsize,
    heap: AtomicUsize,
}

impl MemoryBudget {
    pub(crate) fn new(limit: usize) -> Self {
        Self { limit, array_buffers: AtomicUsize::new(0), heap: AtomicUsize::new(0) }
    }

    /// Records the heap's current size, so backing stores see what is left.
    pub(crate) fn set_heap(&self, bytes: usize) {
        self.heap.store(bytes, Ordering::Relaxed);
    }

    fn reserve(&self, len: usize) -> bool {
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

/// An ArrayBuffer allocator that refuses what the budget cannot hold: the program gets a
/// `RangeError` (an exception it may catch), never the host an out-of-memory abort.
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
