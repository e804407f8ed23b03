//! The test binary's allocator: the system allocator, recording the largest single allocation
//! made on a thread between [`start`] and [`stop`] (other tests in the binary run on other
//! threads and are not counted).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Tracking;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    // `try_with`: the thread-locals may be gone while a thread shuts down.
    let _ = ACTIVE.try_with(|a| {
        if a.get() {
            let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
        }
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Starts recording on this thread.
pub fn start() {
    PEAK.with(|p| p.set(0));
    ACTIVE.with(|a| a.set(true));
}

/// Stops recording; the largest allocation since [`start`].
pub fn stop() -> usize {
    ACTIVE.with(|a| a.set(false));
    PEAK.with(|p| p.get())
}
