//! The one registry of what this process leaves on disk while it works, for
//! a process that ends on a signal: the staged output files' temporaries
//! ([`crate::staged`]), a reference DRAM engine's temporary work directory,
//! the command traces it writes into a run's directory, Ramulator's link to
//! that directory. Their owners register them while they exist and remove
//! them themselves when done; [`remove_all`] removes what is registered when
//! the process is about to end instead.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to remove at a registered path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// A directory and everything in it.
    Dir,
    /// The `.cmdtrace` files in a directory (a run's engine directory, whose
    /// other files stay).
    CommandTraces,
    /// One file or symbolic link.
    File,
}

static LIVE: Mutex<Vec<(u64, PathBuf, Leftover)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

fn live() -> std::sync::MutexGuard<'static, Vec<(u64, PathBuf, Leftover)>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A registration: dropping it forgets the path (the owner has removed it,
/// or keeps it).
#[derive(Debug)]
pub struct Registered(u64);

impl Registered {
    /// Runs `f` with the registry locked, then forgets the path: for an owner
    /// that moves or removes it (`f`), so that [`remove_all`] sees it either
    /// before or not at all. Once `remove_all` has run, the call waits for
    /// the process to end and `f` never runs.
    pub fn finish<T>(self, f: impl FnOnce() -> T) -> T {
        let mut live = live();
        let out = f();
        live.retain(|(id, _, _)| *id != self.0);
        drop(live);
        std::mem::forget(self);
        out
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        live().retain(|(id, _, _)| *id != self.0);
    }
}

/// Registers `path` to be removed as `what` if the process ends on a signal
/// while the returned value lives.
pub fn register(path: &Path, what: Leftover) -> Registered {
    make(path, what, || ()).1
}

/// Makes `path` with `make` and registers it as `what`, in one step as far
/// as [`remove_all`] is concerned: what `make` made before `remove_all` runs
/// is removed by it, and once `remove_all` has run, `make` never runs (the
/// call waits for the process to end). Registering after making would leave
/// what a signal caught in between; registering before would leave what
/// `make` made after `remove_all` had looked.
pub fn make<T>(path: &Path, what: Leftover, make: impl FnOnce() -> T) -> (T, Registered) {
    let mut live = live();
    let made = make();
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    live.push((id, path.to_path_buf(), what));
    (made, Registered(id))
}

/// Removes everything registered, for a process about to end: the registry
/// stays locked, so nothing registered later is left unremoved unnoticed (a
/// thread registering from now on waits for the end). Returns how many
/// paths were there.
pub fn remove_all() -> usize {
    let live = live();
    for (_, path, what) in live.iter() {
        match what {
            Leftover::Dir => {
                let _ = fs::remove_dir_all(path);
            }
            Leftover::CommandTraces => {
                if let Ok(rd) = fs::read_dir(path) {
                    for e in rd.flatten() {
                        if e.path().extension().is_some_and(|x| x == "cmdtrace") {
                            let _ = fs::remove_file(e.path());
                        }
                    }
                }
            }
            Leftover::File => {
                let _ = fs::remove_file(path);
            }
        }
    }
    let n = live.len();
    // Never unlocked (see above).
    std::mem::forget(live);
    n
}
