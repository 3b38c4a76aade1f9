//! Allocator tuning for a process that handles large, short-lived buffers.

/// Keeps big buffers (uploads, page bitmaps, images) in the heap for reuse. By default glibc
/// maps each one fresh from the kernel and unmaps it when freed, so every request paid page
/// faults and zeroing again (perf on the front: the largest cost after hashing). Above 64 MiB a
/// buffer is still mapped on its own, and the heap is trimmed past 128 MiB free, so a rare huge
/// page does not stay resident. Measured against mimalloc: the same CPU per page, about half
/// the peak RSS. Call first thing in `main`, before any thread exists.
pub fn tune() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; the caller runs it single-threaded.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}
