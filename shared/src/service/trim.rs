//! Giving memory back after a large translation.
//!
//! Translating a large context makes many small allocations (the canonical
//! model of every message, the encoded output, its re-decoding) that
//! glibc's allocator keeps in its arenas once they are freed: without this,
//! a process that translated a 51 MB session stayed near its peak RSS while
//! idle (docs/bench.md, "Memory of a large materialize"), and a warm Lambda
//! keeps what it grew. `malloc_trim` hands the free pages of every arena
//! back to the system. It walks the heap, so it runs only after
//! translating at least [`TRIM_AFTER_BYTES`] of input, on the blocking
//! thread that translated. A native join needs none: its few large
//! buffers are mapped and unmapped whole.

/// The least input of a translation after which the allocator is trimmed.
pub const TRIM_AFTER_BYTES: usize = 4 * 1024 * 1024;

/// Trims the allocator when a translation of `input` bytes, and the count
/// of its result, have just finished (and what they needed is freed). Call
/// it off the async threads.
pub fn after_translating(input: usize) {
    if input < TRIM_AFTER_BYTES {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's arenas to
    // the system; it touches no allocation in use.
    unsafe {
        libc::malloc_trim(0);
    }
}
