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

/// Removes directory `path` and what is in it, again while it is still
/// there: an engine still running (the process is ending under it) may
/// create a file in it after `remove_dir_all` has listed it, and then the
/// directory cannot go; the next attempt takes the new file. Up to 50
/// attempts 2 ms apart.
fn remove_dir_settled(path: &Path) {
    for _ in 0..50 {
        let _ = fs::remove_dir_all(path);
        if fs::symlink_metadata(path).is_err() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Removes everything registered, for a process about to end: the registry
/// stays locked, so nothing registered later is left unremoved unnoticed (a
/// thread registering from now on waits for the end). Returns how many
/// paths were there.
pub fn remove_all() -> usize {
    let live = live();
    for (_, path, what) in live.iter() {
        match what {
            Leftover::Dir => remove_dir_settled(path),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer still making files in the directory while it is removed:
    /// the directory goes all the same once the writer stops.
    #[test]
    fn a_directory_written_into_while_it_is_removed_still_goes() {
        let dir = std::env::temp_dir().join(format!("nmpsim-cleanup-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let d = dir.clone();
        // A tight loop of new files for 10 ms: one removal pass alone would
        // almost surely meet a file made after it listed the directory.
        let writer = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut i = 0u64;
            while started.elapsed() < std::time::Duration::from_millis(10) {
                let _ = fs::write(d.join(format!("f{i}")), b"x");
                i += 1;
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(1));
        remove_dir_settled(&dir);
        writer.join().unwrap();
        // (Once gone the directory stays gone: a file cannot be written
        // into a directory that is not there.)
        assert!(
            fs::symlink_metadata(&dir).is_err(),
            "{} is left",
            dir.display()
        );
    }
}
