//! Running a command as the benchmarks measure it.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};

/// Runs `cmd` to its end: wall time (s), the child's peak RSS (MiB, from `wait4`) and its
/// standard output; a failure is an error with its standard error.
pub fn timed(mut cmd: Command) -> Result<(f64, f64, String)> {
    let t0 = Instant::now();
    let tmp = tempfile::NamedTempFile::new()?;
    cmd.stdout(tmp.reopen()?);
    cmd.stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().context("starting nsys-jax-pipe")?;
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr)?;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child and fills `usage`.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    ensure!(pid > 0, "wait4 failed");
    let wall = t0.elapsed().as_secs_f64();
    let status = std::process::ExitStatus::from_raw(status);
    ensure!(status.success(), "{cmd:?} failed ({status}):\n{stderr}");
    let stdout = std::fs::read_to_string(tmp.path())?;
    Ok((wall, usage.ru_maxrss as f64 / 1024.0, stdout))
}
