//! The child processes of a sweep: started, read, waited for, and stopped
//! together when the sweep must stop.

use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The child processes of the runs under way, and whether the sweep stops:
/// a fatal error ends them (SIGTERM: a run ended so is not recorded, and
/// runs again) rather than waiting for them.
#[derive(Default)]
pub(crate) struct Inflight {
    stop: AtomicBool,
    pids: Mutex<Vec<u32>>,
}

impl Inflight {
    fn pids(&self) -> MutexGuard<'_, Vec<u32>> {
        self.pids.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the sweep is stopping: no run starts.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Stops the sweep: no run starts, and those under way get SIGTERM.
    pub(crate) fn stop_all(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for &pid in self.pids().iter() {
            terminate(pid);
        }
    }
}

#[cfg(unix)]
fn terminate(pid: u32) {
    // SAFETY: a signal to a child this process started and has not reaped
    // (its pid leaves the list before `wait` returns it).
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
}

#[cfg(not(unix))]
fn terminate(_pid: u32) {}

/// What a finished child left: how it ended, its stdout and its stderr.
pub(crate) struct Ended {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `cmd` (its streams piped) to its end, its pid in `inflight`
/// meanwhile. `None` when the sweep is stopping: the command did not start.
pub(crate) fn run(cmd: &mut Command, inflight: &Inflight) -> std::io::Result<Option<Ended>> {
    use std::io::Read;
    let mut child = {
        let mut pids = inflight.pids();
        if inflight.stopping() {
            return Ok(None);
        }
        let child = cmd.spawn()?;
        pids.push(child.id());
        child
    };
    let pid = child.id();
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    // Both pipes are read at once, so that neither fills and stalls the child.
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut v);
        }
        v
    });
    let mut stdout = Vec::new();
    if let Some(o) = out.as_mut() {
        let _ = o.read_to_end(&mut stdout);
    }
    let stderr = err_reader.join().unwrap_or_default();
    // Wait without reaping, take the pid out of the list, then reap: a
    // SIGTERM from `stop_all` never reaches a recycled pid.
    #[cfg(unix)]
    {
        // SAFETY: siginfo_t is plain data, valid zeroed; waitid waits for our
        // own child, leaving it waitable (WNOWAIT) for `wait` below.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            );
        }
    }
    inflight.pids().retain(|&p| p != pid);
    let status = child.wait()?;
    Ok(Some(Ended {
        status,
        stdout,
        stderr,
    }))
}

/// A process that ended on SIGINT or SIGTERM, by the signal or, having
/// handled it, with 128 + the signal (130 and 143).
#[cfg(unix)]
pub(crate) fn interrupted(s: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(s.code(), Some(130 | 143)) || matches!(s.signal(), Some(libc::SIGINT | libc::SIGTERM))
}

#[cfg(not(unix))]
pub(crate) fn interrupted(s: ExitStatus) -> bool {
    matches!(s.code(), Some(130 | 143))
}

/// A run must not outlive the sweep: when the sweep is killed, its children
/// get SIGKILL too, so a resumed sweep never races an orphan for a directory.
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The sweep may have died between fork and prctl.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_cmd: &mut Command) {}
