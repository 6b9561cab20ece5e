//! Giving memory back after decoding a large context.
//!
//! Translating a large context makes many small allocations (the canonical
//! model of every message, the encoded output, its re-decoding), and so does
//! validating a large delta at its checkpoint; glibc's allocator keeps them
//! in its arenas once they are freed: without this,
//! a process that translated a 51 MB session stayed near its peak RSS while
//! idle (docs/bench.md, "Memory of a large materialize"), and a warm Lambda
//! keeps what it grew. `malloc_trim` hands the free pages of every arena
//! back to the system. It walks the heap, so it runs only after decoding
//! at least [`TRIM_AFTER_BYTES`] of input, on the blocking thread that
//! decoded. A native join needs none: its few large buffers are mapped and
//! unmapped whole.

/// The least input of a translation or a validation after which the
/// allocator is trimmed (and below which a validation stays on the async
/// thread).
pub const TRIM_AFTER_BYTES: usize = 4 * 1024 * 1024;

/// Trims the allocator when decoding `input` bytes (a translation and the
/// count of its result, or a validation) has just finished and what it
/// needed is freed. Call it off the async threads.
pub fn after_decoding(input: usize) {
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
