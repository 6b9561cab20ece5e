//! Giving memory back after a large materialize.
//!
//! Translating a large context makes many small allocations (the canonical
//! model of every message, the encoded output, its re-decoding) that
//! glibc's allocator keeps in its arenas once they are freed: without this,
//! a process that translated a 50 MB session stayed near its peak RSS while
//! idle (docs/bench.md, "Memory of a large materialize"), and a warm Lambda
//! keeps what it grew. `malloc_trim` hands the free pages of every arena
//! back to the system. It walks the heap, so it runs only after results of
//! at least [`TRIM_AFTER_BYTES`], on a blocking thread, with nothing
//! waiting for it.

/// The smallest result after which the allocator is trimmed.
pub const TRIM_AFTER_BYTES: usize = 4 * 1024 * 1024;

/// Trims the allocator in the background when `built` bytes were just
/// built (and what building them needed is freed).
pub fn trim_after(built: usize) {
    if built < TRIM_AFTER_BYTES {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn_blocking(|| {
            // SAFETY: malloc_trim only returns free memory of glibc's
            // arenas to the system; it touches no allocation in use.
            unsafe { libc::malloc_trim(0) };
        });
    }
}
