//! SIGINT and SIGTERM: a process ending on one removes its temporary files
//! (staged outputs, the DRAM engines' work directories and command traces)
//! first and exits with 128 + the signal (130, 143).
//!
//! [`install`] registers both with `signal-hook`, whose handler only hands
//! them on to a thread of their own (child processes get the default actions
//! again). The clean-up then runs as ordinary code, not in a signal handler,
//! so it may lock, allocate and write files. A command can ask for something
//! else:
//! [`stop_on_sigint`] turns SIGINT into a flag it checks (train stops after
//! the current iteration), and [`before_exit`] runs a last step before the
//! process ends (sweep writes its results.csv).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

type Hook = Box<dyn FnOnce() + Send>;

static STOP_ON_SIGINT: Mutex<Option<&'static AtomicBool>> = Mutex::new(None);
/// Set once a signal that ends the process is being handled.
static ENDING: AtomicBool = AtomicBool::new(false);
static BEFORE_EXIT: Mutex<Option<Hook>> = Mutex::new(None);

/// Takes SIGINT and SIGTERM from now on. Call first thing in `main`.
pub fn install() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGINT, SIGTERM};
        // The handlers are registered on the thread that takes the signals,
        // and `install` returns once they are: without that thread (or the
        // handlers), the default actions stay, as they would without us.
        let (registered, done) = std::sync::mpsc::channel();
        let waiter = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]);
                let _ = registered.send(());
                if let Ok(mut signals) = signals {
                    for sig in signals.forever() {
                        on_signal(sig);
                    }
                }
            });
        if waiter.is_ok() {
            let _ = done.recv();
        }
    }
}

#[cfg(unix)]
fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGINT {
        let stop = *STOP_ON_SIGINT.lock().unwrap_or_else(|e| e.into_inner());
        // The first Ctrl-C asks the command to stop; a second one ends it.
        if let Some(flag) = stop
            && !flag.swap(true, Ordering::SeqCst)
        {
            eprintln!("stopping after the current iteration (Ctrl-C again to stop at once)");
            return;
        }
    }
    ENDING.store(true, Ordering::SeqCst);
    let hook = BEFORE_EXIT.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(hook) = hook {
        hook();
    }
    // Staged files' temporaries, the DRAM engines' temporary directories,
    // command traces and links.
    nmpsim_traces::cleanup::remove_all();
    crate::rundir::note_kept_runs();
    // _exit, not exit: the other threads are still running, and exit's
    // clean-up (atexit handlers, the C++ engines' static destructors) would
    // run under them.
    // SAFETY: ends the process; nothing after it runs.
    unsafe { libc::_exit(128 + sig) }
}

/// From now on SIGINT sets `flag` instead of ending the process; SIGTERM
/// still ends it.
pub fn stop_on_sigint(flag: &'static AtomicBool) {
    *STOP_ON_SIGINT.lock().unwrap_or_else(|e| e.into_inner()) = Some(flag);
}

/// Runs `hook` when a signal ends the process, before its temporary files
/// are removed. (One hook: a later call replaces it.)
pub fn before_exit(hook: impl FnOnce() + Send + 'static) {
    *BEFORE_EXIT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(hook));
}

/// Waits up to `grace` for a SIGINT or SIGTERM that ends the process, and
/// if one comes (or came), never returns: the signal's own thread ends the
/// process with 128 + the signal after its [`before_exit`] step. For a
/// command that found its children killed: a signal sent to the whole
/// process group (Ctrl-C, a batch system's cancel) can reach a child before
/// it reaches us, and the child's end must not be reported as a failure
/// with its own exit status while ours is on its way.
pub fn settle(grace: std::time::Duration) {
    let t0 = std::time::Instant::now();
    loop {
        if ENDING.load(Ordering::SeqCst) {
            loop {
                std::thread::park();
            }
        }
        if t0.elapsed() >= grace {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
