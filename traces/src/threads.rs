//! Work on a rayon pool of its own.

/// `f` on a new rayon pool of `threads` threads (as the checks that a
/// result does not depend on the thread count run it).
pub fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a rayon thread pool")
        .install(f)
}
