//! Standard output whose write errors are errors, not panics.
//!
//! `println!` panics when stdout cannot be written (a full disk, `> /dev/full`),
//! which ends the process with a backtrace and status 101. Every command
//! prints through `out!` and `outln!` instead (`#[macro_use]` in `main`):
//! they return a [`StdoutError`] that `?` carries up to `main`, which reports
//! `error: cannot write to standard output: ...` and exits 1. (A panic hook
//! matching std's panic message would do it too, but would depend on the
//! wording of that message and leave the panic machinery in the path.) A
//! broken pipe never gets this far: `main` restores the default SIGPIPE
//! disposition, so `nmpsim ... | head` ends quietly, as Unix tools do.

use std::io::Write;

/// Standard output could not be written.
#[derive(Debug)]
pub struct StdoutError(pub std::io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write to standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

/// Writes `args` to stdout (line-buffered: a complete line is written at once).
pub fn write_fmt(args: std::fmt::Arguments<'_>) -> Result<(), StdoutError> {
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(StdoutError)
}

/// Writes out what stdout still buffers (a last line without a newline).
pub fn flush() -> Result<(), StdoutError> {
    std::io::stdout().lock().flush().map_err(StdoutError)
}

/// Stdout as a [`Write`] for code that streams into one: a write error is
/// kept, so that what the code makes of it (an error naming some output)
/// can be reported as the [`StdoutError`] it was.
#[derive(Default)]
pub struct Writer {
    error: Option<std::io::Error>,
}

impl Writer {
    /// The first write error, if there was one.
    pub fn into_error(self) -> Option<StdoutError> {
        self.error.map(StdoutError)
    }

    fn keep(&mut self, e: std::io::Error) -> std::io::Error {
        let passed = std::io::Error::new(e.kind(), e.to_string());
        self.error.get_or_insert(e);
        passed
    }
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stdout()
            .lock()
            .write(buf)
            .map_err(|e| self.keep(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().lock().flush().map_err(|e| self.keep(e))
    }
}

/// `print!` that returns a `Result<(), StdoutError>` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write_fmt(format_args!($($arg)*))
    };
}

/// `println!` that returns a `Result<(), StdoutError>` instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes `args` to stderr, ignoring a failure: a message that cannot be
/// shown must not end the run that it is about (std's `eprintln!` panics
/// when stderr cannot be written, e.g. `2> /dev/full` or a log on a full
/// disk, which would lose the run).
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// `eprintln!` that never panics ([`write_err`]). Defined here, ahead of
/// every other module of the binary, it takes the place of std's macro of
/// the same name throughout the crate.
macro_rules! eprintln {
    () => {
        $crate::out::write_err(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics ([`write_err`]).
#[allow(unused_macros)]
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::out::write_err(format_args!($($arg)*))
    };
}
