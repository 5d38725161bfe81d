//! The `kandev` binary's allocator, mimalloc, and the one setting it runs with: freed memory
//! goes back to the OS at once (issue 38 item 4).
//!
//! mimalloc keeps memory freed in whole pages for a purge delay (1 s by default) and returns
//! it only when a later allocation or free comes by after the delay. A server that goes
//! quiet after a burst (R4's hostile requests and YAML bombs: 4 MiB bodies, a reader thread
//! that needs ~50 MB for a 240 KB flow mapping) then keeps what the burst used: R4's RSS went
//! from 24 MB to 95–114 MB and stayed there. With no delay the pages are decommitted as they
//! are freed (41 MB after the same run). A setting the process reads at load
//! (`MIMALLOC_PURGE_DELAY`) would need the environment of whoever starts the server, so the
//! binary sets it itself, first thing in `main`.
//!
//! The bundled SQLite allocates with the C library's `malloc`, not mimalloc, on each
//! connection's thread. glibc raises its trim threshold after a large block is freed (up to
//! 64 MiB), so what a burst of writes used stays in its per-thread arenas: R8's 20 MiB
//! stream alone, with no reader, left the server at 83 MB from 30 MB idle. A fixed
//! threshold of 0 gives the top of each arena back as it is freed (46 MB after the same
//! stream, measured with `GLIBC_TUNABLES=glibc.malloc.trim_threshold=0`).

/// The allocator; `crates/kandev/src/main.rs` makes it the global one.
pub use mimalloc::MiMalloc;

/// How long freed pages are kept before they go back to the OS, in milliseconds.
pub const PURGE_DELAY_MS: std::ffi::c_long = 0;

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_t` (libmimalloc-sys names only some of
/// the options). The test below fails if this is not the option that returns freed memory.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// glibc's `M_TRIM_THRESHOLD` for the C allocator under SQLite: free memory at the top of an
/// arena beyond this goes back to the OS (a fixed value also stops glibc raising it).
pub const C_TRIM_THRESHOLD: std::ffi::c_int = 0;

/// Applies the settings. Call it first in `main`: what was freed before it follows the
/// defaults.
pub fn configure() {
    // SAFETY: `mallopt` sets a number among glibc's malloc parameters, under its own lock;
    // it takes no pointer.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, C_TRIM_THRESHOLD);
    }
    // SAFETY: `mi_option_set` stores a number in mimalloc's table of options; it takes no
    // pointer. It is not synchronized, which is why it runs first in `main`, before the
    // runtime starts any other thread.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOCATOR: MiMalloc = MiMalloc;

    /// The tests read the process's RSS: one at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Issue 38 item 4: 64 MiB written and freed by a thread that then does nothing more are
    /// back with the OS at once: with mimalloc's default 1 s purge delay they stay until a
    /// later allocation comes by after the delay, which a quiet server never makes.
    #[test]
    #[cfg(target_os = "linux")]
    fn i38_4_memory_freed_after_a_burst_goes_back_to_the_os_at_once() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        configure();
        let before = rss_kib();
        let burst = std::thread::spawn(|| {
            let blocks: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 1 << 20]).collect();
            let touched: u64 = blocks.iter().map(|b| u64::from(b[b.len() - 1])).sum();
            drop(blocks);
            touched
        });
        assert_eq!(burst.join().unwrap(), 64);
        let after = rss_kib();
        assert!(
            after < before + 16 * 1024,
            "RSS went from {before} to {after} KiB: the freed 64 MiB were kept"
        );
    }

    /// Issue 38 item 4, the C allocator under SQLite: once a large block was freed (glibc
    /// then raises its thresholds to its size), 32 MiB allocated on a thread in 256 KiB
    /// blocks and freed go back to the OS instead of staying in the thread's arena.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    fn i38_4_memory_the_c_allocator_freed_goes_back_to_the_os() {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        configure();
        let before = rss_kib();
        let burst = std::thread::spawn(|| {
            // SAFETY: each block is allocated, written within its size and freed once.
            unsafe {
                let big = libc::malloc(16 << 20).cast::<u8>();
                big.write_bytes(1, 16 << 20);
                libc::free(big.cast());
                let blocks: Vec<*mut u8> =
                    (0..128).map(|_| libc::malloc(256 << 10).cast::<u8>()).collect();
                for block in &blocks {
                    block.write_bytes(1, 256 << 10);
                }
                for block in blocks.into_iter().rev() {
                    libc::free(block.cast());
                }
            }
        });
        burst.join().unwrap();
        let after = rss_kib();
        assert!(
            after < before + 8 * 1024,
            "RSS went from {before} to {after} KiB: the C allocator kept the freed 32 MiB"
        );
    }
}
