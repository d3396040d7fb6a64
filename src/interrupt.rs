//! Interrupts (Ctrl-C, `kill`, a scheduler ending the job) without half-written outputs.
//!
//! A thread waits for SIGINT, SIGTERM and SIGHUP. While a profiled program runs, the signal
//! is noted and passed on to Nsight Systems, which then stops the program and closes the
//! capture. nsys runs in a process group of its own (and starts the program in a session of
//! its own), so that it gets each signal once, from here, whether the signal came from the
//! terminal (Ctrl-C), `kill PID`, or a job scheduler signalling this process's group: nsys
//! aborts on the spot on a second signal, leaving the program running and its raw data
//! behind, so a signal from here must not come on top of one from elsewhere. Outside
//! that window the helper processes registered with [`stop_on_interrupt`] (`nsys export`)
//! are stopped, the files registered with [`remove_on_interrupt`] (temporary folders,
//! archives being written) removed, and the process exits with 128 + the signal number.
//!
//! Files reach their destination by a rename through [`commit`], under a process-wide lock
//! that the signal thread takes (after raising [`INTERRUPTED`]) and holds until the process
//! has exited. So either a rename completed before the interrupt, and the message names what
//! was written, or it never happens: a rename after an interrupt is refused, and the thread
//! that wanted it waits for the exit. The normal exit ([`exit`]) takes the same lock, so the
//! exit code and message always agree with what was written.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

/// What to undo on an interrupt.
enum Pending {
    Path(PathBuf),
    Process(i32),
}

/// What to undo on an interrupt, by registration id.
static PENDING: Mutex<Vec<(u64, Pending)>> = Mutex::new(Vec::new());
static NEXT_ID: Mutex<u64> = Mutex::new(0);
/// The process id of the child being waited for (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);
/// The signal received while a child ran (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
static INSTALLED: OnceLock<()> = OnceLock::new();
/// Held around each final rename, and by the signal thread from an interrupt to the exit.
static COMMIT: Mutex<()> = Mutex::new(());
/// Raised by the signal thread before it takes [`COMMIT`]: no rename may follow.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The outputs renamed into place so far (named in the message of a later interrupt).
static WRITTEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set while a long-lived command waits between two pieces of work: an interrupt then ends
/// the process with this message and exit code 0 (nothing is half-done).
static IDLE: Mutex<Option<String>> = Mutex::new(None);

/// Start handling interrupts (once per process). Errors are ignored: without handlers the
/// default action (termination) applies, as for any program.
pub fn install() {
    INSTALLED.get_or_init(|| {
        let Ok(mut signals) = Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("interrupts".into())
            .spawn(move || {
                for signal in signals.forever() {
                    on_signal(signal);
                }
            });
    });
}

fn on_signal(signal: i32) {
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        RECEIVED.store(signal, Ordering::SeqCst);
        // SAFETY: kill(2) on the process id of a child that has not been reaped yet.
        unsafe {
            libc::kill(child, signal);
        }
        return;
    }
    INTERRUPTED.store(true, Ordering::SeqCst);
    // Held until the process is gone: no rename after this point.
    let _commit = COMMIT.lock().unwrap_or_else(|e| e.into_inner());
    remove_pending();
    if let Some(message) = IDLE.lock().unwrap_or_else(|e| e.into_inner()).take() {
        eprintln!("nsys-jax-pipe: {} ({})", message, signal_name(signal));
        std::process::exit(0);
    }
    let written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    eprintln!("nsys-jax-pipe: {}", interrupted_message(signal, &written));
    std::process::exit(128 + signal);
}

fn interrupted_message(signal: i32, written: &[PathBuf]) -> String {
    if written.is_empty() {
        format!("interrupted ({}); nothing was written", signal_name(signal))
    } else {
        let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
        format!(
            "interrupted ({}) after writing {}; nothing else was written",
            signal_name(signal),
            names.join(", ")
        )
    }
}

/// Wait for the signal thread, which is ending the process.
fn wait_for_exit() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// Move a finished file to `dest` by `rename`, unless the process is being interrupted (then
/// this never returns: the signal thread removes the temporary files and exits). `report`:
/// `dest` is an output, named in the message of a later interrupt. A file once in place is
/// never removed by an interrupt (a registration of `dest` itself is dropped).
pub fn commit(
    dest: &Path,
    report: bool,
    rename: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<()> {
    let guard = COMMIT.lock().unwrap_or_else(|e| e.into_inner());
    if INTERRUPTED.load(Ordering::SeqCst) {
        drop(guard);
        wait_for_exit();
    }
    rename()?;
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(_, p)| !matches!(p, Pending::Path(p) if p == dest));
    if report {
        WRITTEN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dest.to_path_buf());
    }
    Ok(())
}

/// Between two pieces of work of a long-lived command (`Some`: what to say when an interrupt
/// ends it there, with exit code 0), or in one (`None`: an interrupt ends it as any other
/// command). The outputs written so far are not named again in a later interrupt's message.
pub fn idle(message: Option<String>) {
    let _commit = COMMIT.lock().unwrap_or_else(|e| e.into_inner());
    WRITTEN.lock().unwrap_or_else(|e| e.into_inner()).clear();
    *IDLE.lock().unwrap_or_else(|e| e.into_inner()) = message;
}

/// End the process with `code`, unless an interrupt is ending it already (then its code and
/// message stand).
pub fn exit(code: i32) -> ! {
    let guard = COMMIT.lock().unwrap_or_else(|e| e.into_inner());
    if INTERRUPTED.load(Ordering::SeqCst) {
        drop(guard);
        wait_for_exit();
    }
    std::process::exit(code)
}

fn remove_pending() {
    let mut pending = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    // Processes first, so that none writes into a folder being removed.
    pending.sort_by_key(|(_, p)| matches!(p, Pending::Path(_)));
    for (_, p) in pending {
        match p {
            Pending::Process(pid) => {
                // SAFETY: kill(2) on a child process that is still being waited for.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
            Pending::Path(p) if p.is_dir() => {
                let _ = std::fs::remove_dir_all(&p);
            }
            Pending::Path(p) => {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
}

/// Removes its path from the interrupt list when dropped (the path itself is left alone).
#[must_use = "the path leaves the list when the guard is dropped"]
pub struct Guard(u64);

impl Drop for Guard {
    fn drop(&mut self) {
        let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|(id, _)| *id != self.0);
    }
}

fn register(item: Pending) -> Guard {
    let id = {
        let mut n = NEXT_ID.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        *n
    };
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, item));
    Guard(id)
}

/// Remove `path` (a file or a folder) if the process is interrupted while the guard lives.
pub fn remove_on_interrupt(path: &Path) -> Guard {
    register(Pending::Path(path.to_path_buf()))
}

/// Create a file or folder by `create` (which returns it and its path) and register its path
/// as [`remove_on_interrupt`] does, with no interrupt in between (one that came before waits
/// for the exit instead).
pub fn create_removed_on_interrupt<T>(
    create: impl FnOnce() -> std::io::Result<(T, PathBuf)>,
) -> std::io::Result<(T, Guard)> {
    let guard = COMMIT.lock().unwrap_or_else(|e| e.into_inner());
    if INTERRUPTED.load(Ordering::SeqCst) {
        drop(guard);
        wait_for_exit();
    }
    let (t, path) = create()?;
    Ok((t, register(Pending::Path(path))))
}

/// Starts `cmd`. A program file still open for writing somewhere cannot be executed
/// (ETXTBSY): one written just before, whose writer — or a process forked while it was open
/// — has not closed it yet. That is transient, so the start is retried for about a second.
pub fn spawn(cmd: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    let mut delay = std::time::Duration::from_millis(5);
    for _ in 0..8 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(delay);
                delay *= 2;
            }
            started => return started,
        }
    }
    cmd.spawn()
}

/// Send SIGTERM to the child process `pid` if the process is interrupted while the guard
/// lives (the guard is dropped as soon as the child has been waited for).
pub fn stop_on_interrupt(pid: u32) -> Guard {
    register(Pending::Process(pid as i32))
}

/// While the returned guard lives, interrupts go to `pid`, which must lead a process group
/// of its own (see the module documentation).
pub fn forward_to(pid: u32) -> ChildGuard {
    RECEIVED.store(0, Ordering::SeqCst);
    CHILD.store(pid as i32, Ordering::SeqCst);
    ChildGuard
}

/// Ends forwarding when dropped.
pub struct ChildGuard;

impl Drop for ChildGuard {
    fn drop(&mut self) {
        CHILD.store(0, Ordering::SeqCst);
    }
}

/// The signal received while the last child ran, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

pub fn signal_name(signal: i32) -> String {
    match signal {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        libc::SIGKILL => "SIGKILL".into(),
        s => format!("signal {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_what_was_written() {
        assert_eq!(
            interrupted_message(SIGTERM, &[]),
            "interrupted (SIGTERM); nothing was written"
        );
        assert_eq!(
            interrupted_message(SIGINT, &[PathBuf::from("a.zip"), PathBuf::from("o/b.json")]),
            "interrupted (SIGINT) after writing a.zip, o/b.json; nothing else was written"
        );
    }

    #[test]
    fn a_committed_file_leaves_the_interrupt_list() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        let tmp = dir.path().join("tmp");
        std::fs::write(&tmp, b"x").unwrap();
        let _reserved = remove_on_interrupt(&dest);
        commit(&dest, false, || std::fs::rename(&tmp, &dest)).unwrap();
        let pending = PENDING.lock().unwrap();
        assert!(
            !pending
                .iter()
                .any(|(_, p)| matches!(p, Pending::Path(p) if *p == dest))
        );
        assert!(dest.is_file());
    }

    #[test]
    fn a_program_still_open_for_writing_is_started_once_closed() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("program");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"#!/bin/sh\nexit 7\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Busy while the file is open for writing.
        let e = std::process::Command::new(&path).spawn().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ETXTBSY), "{e}");
        let closer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            drop(f);
        });
        let status = super::spawn(&mut std::process::Command::new(&path))
            .unwrap()
            .wait()
            .unwrap();
        closer.join().unwrap();
        assert_eq!(status.code(), Some(7));
    }
}
