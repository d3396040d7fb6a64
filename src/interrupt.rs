//! Interrupts (Ctrl-C, `kill`, a scheduler ending the job) without half-written outputs.
//!
//! A thread waits for SIGINT, SIGTERM and SIGHUP. While a profiled program runs, the signal
//! is noted and Nsight Systems, which stops the program and closes the capture when it gets
//! one, must get exactly one: a second makes it abort on the spot, leaving the program
//! running and its raw data behind. A Ctrl-C from the terminal already reaches every process
//! of the foreground group, so it is not passed on. A signal another process sent (`kill`,
//! a batch scheduler) may have been sent to this process alone or to the whole group or job;
//! it is passed on (as SIGTERM) only when, after a grace period, none of the processes under
//! nsys has ended, i.e. nsys did not get it itself. A second interrupt is always passed on.
//! Outside
//! that window the helper processes registered with [`stop_on_interrupt`] (`nsys export`)
//! are stopped, the files registered with [`remove_on_interrupt`] (temporary folders,
//! archives being written) removed, and the process exits with 128 + the signal number.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::low_level::siginfo::Cause;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
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

/// Start handling interrupts (once per process). Errors are ignored: without handlers the
/// default action (termination) applies, as for any program.
pub fn install() {
    INSTALLED.get_or_init(|| {
        let Ok(mut signals) = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("interrupts".into())
            .spawn(move || {
                for origin in signals.forever() {
                    on_signal(origin.signal, matches!(origin.cause, Cause::Sent(_)));
                }
            });
    });
}

/// How long nsys has to show that it got a signal itself.
const GRACE: std::time::Duration = std::time::Duration::from_secs(2);

fn on_signal(signal: i32, sent_by_a_process: bool) {
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        let repeated = RECEIVED.swap(signal, Ordering::SeqCst) != 0;
        if repeated {
            terminate(child);
        } else if sent_by_a_process {
            // The processes under nsys just before the signal (taken now, some may already
            // have ended on the same signal).
            let before = SNAPSHOT.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let _ = std::thread::Builder::new()
                .name("interrupt-grace".into())
                .spawn(move || {
                    let start = std::time::Instant::now();
                    while start.elapsed() < GRACE {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        if CHILD.load(Ordering::SeqCst) != child {
                            return;
                        }
                        let now = descendants(child);
                        if before.iter().any(|p| !now.contains(p)) {
                            return;
                        }
                    }
                    terminate(child);
                });
        }
        return;
    }
    remove_pending();
    eprintln!(
        "nsys-jax-pipe: interrupted ({}); nothing was written",
        signal_name(signal)
    );
    std::process::exit(128 + signal);
}

/// SIGTERM to nsys, if it is still the child being waited for.
fn terminate(child: i32) {
    if CHILD.load(Ordering::SeqCst) == child {
        // SAFETY: kill(2) on the process id of a child that has not been reaped yet.
        unsafe {
            libc::kill(child, libc::SIGTERM);
        }
    }
}

/// The processes under `pid` (Linux: /proc/PID/task/TID/children).
fn descendants(pid: i32) -> std::collections::BTreeSet<i32> {
    let mut out = std::collections::BTreeSet::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(t.path().join("children")) else {
                continue;
            };
            for c in text
                .split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if out.insert(c) {
                    todo.push(c);
                }
            }
        }
    }
    out
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

/// Send SIGTERM to the child process `pid` if the process is interrupted while the guard
/// lives (the guard is dropped as soon as the child has been waited for).
pub fn stop_on_interrupt(pid: u32) -> Guard {
    register(Pending::Process(pid as i32))
}

/// The processes under the child, as last seen.
static SNAPSHOT: Mutex<std::collections::BTreeSet<i32>> =
    Mutex::new(std::collections::BTreeSet::new());

/// While the returned guard lives, interrupts go to `pid` (see the module documentation).
pub fn forward_to(pid: u32) -> ChildGuard {
    let pid = pid as i32;
    RECEIVED.store(0, Ordering::SeqCst);
    CHILD.store(pid, Ordering::SeqCst);
    let _ = std::thread::Builder::new()
        .name("child-watch".into())
        .spawn(move || {
            while CHILD.load(Ordering::SeqCst) == pid && RECEIVED.load(Ordering::SeqCst) == 0 {
                let now = descendants(pid);
                *SNAPSHOT.lock().unwrap_or_else(|e| e.into_inner()) = now;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
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
        s => format!("signal {s}"),
    }
}
