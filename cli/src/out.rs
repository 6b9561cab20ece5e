//! A command's output on stdout. Everything a command prints goes through
//! here (the crate denies `clippy::print_stdout`), so that a reader that
//! went away (`ctx log X | head -1`, `ctx materialize X | true`) ends the
//! command as it ends git: killed by SIGPIPE (status 141 in a shell),
//! quietly. The Rust runtime ignores SIGPIPE, so such a write fails with
//! EPIPE instead: `println!` panics on it, and a command's own write
//! reported it as an error. SIGPIPE stays ignored until then, so a write
//! to a socket whose server went away is an error, never the end.

use std::fmt;
use std::io::{self, Write as _};

use ctx_core::{Error, Result};

/// `println!` for a command's output (see the module).
macro_rules! outln {
    () => {
        $crate::out::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for a command's output (see the module).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::print(format_args!($($arg)*))
    };
}

/// Prints `args` on stdout, flushed. A closed pipe ends the process
/// ([`reader_gone`]); any other failure ends it with the message and the
/// exit code of an unavailable stdout, as a command's error would.
pub(crate) fn print(args: fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        let e = failed(e);
        eprintln!("ctx: {}: {}", e.kind, e.message);
        std::process::exit(crate::exit_code(e.kind).into());
    }
}

/// Writes `bytes` on stdout, flushed.
///
/// # Errors
/// `Unavailable` when stdout fails otherwise than by a closed pipe, which
/// ends the process ([`reader_gone`]).
pub(crate) fn write(bytes: &[u8]) -> Result<()> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(failed)
}

/// The error for a failed write to stdout; a closed pipe does not return.
fn failed(e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        reader_gone();
    }
    Error::unavailable(format!("cannot write to stdout: {e}"))
}

/// Ends the process as a write to a closed pipe ends it where SIGPIPE is
/// not ignored (git, cat): by that signal, with nothing said.
fn reader_gone() -> ! {
    // SAFETY: `signal` restores SIGPIPE's default action (no handler of
    // ours runs) and `raise` sends it to this thread, which ends the
    // process; nothing is shared with other threads.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Not reached; the shell's status for it, should the signal not end us.
    std::process::exit(128 + libc::SIGPIPE)
}
