//! Running `nsys export`: in the foreground ([`export`]) or in the background, started before
//! its result is asked for ([`start`], then [`Running::finish`]).

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use anyhow::{Context, Result, bail};

use super::TABLES;

/// Runs `nsys export --type arrowdir` on `report` (Arrow IPC: faster to write and to read
/// than parquetdir, which [`super::read_export_dir`] reads too), writing the tables to
/// `out_dir` (which nsys creates; an existing folder is reused, and the files of [`TABLES`] in
/// it are removed first so that a table this report lacks cannot be read from an earlier
/// export). Only [`TABLES`] are exported (`--tables`, Nsight Systems 2023.4 and newer). nsys's
/// output is captured; on failure the error carries nsys's own message.
pub fn export(nsys: &Path, report: &Path, out_dir: &Path) -> Result<()> {
    start(nsys, report, out_dir)?.finish()
}

/// An `nsys export` running in the background ([`start`]). [`Running::finish`] waits for it;
/// dropped unfinished, it is killed and reaped (its output folder is the caller's to remove).
pub struct Running {
    child: Child,
    /// nsys's standard output and error: unnamed temporary files, so that a long run with
    /// nobody reading its output can never block on a full pipe.
    stdout: File,
    stderr: File,
    report: PathBuf,
    out_dir: PathBuf,
    nsys: PathBuf,
    /// Stops the child on an interrupt while it may still run; dropped once it is reaped.
    stop: Option<crate::interrupt::Guard>,
}

/// Starts [`export`] without waiting for it.
pub fn start(nsys: &Path, report: &Path, out_dir: &Path) -> Result<Running> {
    if !report.is_file() {
        bail!("{}: no such report file", report.display());
    }
    if out_dir.is_dir() {
        for table in TABLES {
            for ext in ["arrow", "parquet"] {
                let stale = out_dir.join(format!("{table}.{ext}"));
                if stale.exists() {
                    std::fs::remove_file(&stale)
                        .with_context(|| format!("cannot remove {}", stale.display()))?;
                }
            }
        }
    }
    let cannot_run = || format!("cannot run {}", nsys.display());
    let stdout = tempfile::tempfile().with_context(cannot_run)?;
    let stderr = tempfile::tempfile().with_context(cannot_run)?;
    let child = crate::interrupt::spawn(
        Command::new(nsys)
            .args([
                "export",
                "--type",
                "arrowdir",
                "--force-overwrite",
                "true",
                "--quiet",
                "true",
                // nsys matches each pattern against the whole table name, ignoring case.
                &format!("--tables={}", TABLES.join(",")),
            ])
            .arg("--output")
            .arg(out_dir)
            .arg(report)
            .stdin(Stdio::null())
            .stdout(stdout.try_clone().with_context(cannot_run)?)
            .stderr(stderr.try_clone().with_context(cannot_run)?),
    )
    .with_context(cannot_run)?;
    let stop = Some(crate::interrupt::stop_on_interrupt(child.id()));
    Ok(Running {
        child,
        stdout,
        stderr,
        report: report.to_path_buf(),
        out_dir: out_dir.to_path_buf(),
        nsys: nsys.to_path_buf(),
        stop,
    })
}

impl Running {
    /// The report being exported.
    pub fn report(&self) -> &Path {
        &self.report
    }

    /// The nsys exporting it.
    pub fn nsys(&self) -> &Path {
        &self.nsys
    }

    /// Waits for the export; an error carries nsys's own message.
    pub fn finish(mut self) -> Result<()> {
        let status = self
            .wait()
            .with_context(|| format!("cannot run {}", self.nsys.display()))?;
        let mut message = || nsys_message(&read_all(&mut self.stderr), &read_all(&mut self.stdout));
        if !status.success() {
            let message = message();
            bail!(
                "nsys export of {} failed ({status}): {}",
                self.report.display(),
                if message.is_empty() {
                    "no message"
                } else {
                    &message
                }
            );
        }
        if !self.out_dir.is_dir() {
            let message = message();
            bail!(
                "nsys export of {} wrote nothing to {}{}",
                self.report.display(),
                self.out_dir.display(),
                if message.is_empty() {
                    String::new()
                } else {
                    format!(": {message}")
                }
            );
        }
        Ok(())
    }

    /// Reaps the child, then stops forwarding interrupts to its (now free) process id.
    fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait();
        self.stop = None;
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.stop.is_some() {
            // Not reaped yet, so the id is still this child's.
            let _ = self.child.kill();
            let _ = self.wait();
        }
    }
}

/// What a file holds from its start (empty if it cannot be read).
fn read_all(f: &mut File) -> Vec<u8> {
    let mut out = Vec::new();
    if f.rewind().is_ok() {
        let _ = f.take(1 << 20).read_to_end(&mut out);
    }
    out
}

/// nsys's own words from its output: stderr, else stdout, without progress bars, last lines
/// only, on one line.
fn nsys_message(stderr: &[u8], stdout: &[u8]) -> String {
    let clean = |bytes: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(bytes)
            .lines()
            // A progress bar redraws itself with carriage returns; keep what follows the last.
            .map(|l| l.rsplit('\r').next().unwrap_or("").trim().to_string())
            .filter(|l| !l.is_empty() && !l.starts_with("Processing "))
            .collect()
    };
    let mut lines = clean(stderr);
    if lines.is_empty() {
        lines = clean(stdout);
    }
    let keep = lines.len().saturating_sub(8);
    lines[keep..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::write_program;

    /// A temporary folder holding a (dummy) report.
    fn report_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("r.nsys-rep");
        std::fs::write(&report, b"x").unwrap();
        (dir, report)
    }

    #[test]
    fn a_running_export_dropped_unfinished_is_killed_and_reaped() {
        // A stand-in for nsys that would run for a minute: dropping the handle must not wait.
        let (dir, report) = report_dir();
        let fake = write_program(&dir.path().join("nsys"), "#!/bin/sh\nexec sleep 60\n");
        let running = start(&fake, &report, &dir.path().join("out")).unwrap();
        let pid = running.child.id() as i32;
        let t = std::time::Instant::now();
        drop(running);
        assert!(t.elapsed() < std::time::Duration::from_secs(30));
        // Reaped: no such process (not even a zombie of ours).
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1);
    }

    #[test]
    fn a_failed_export_says_what_nsys_said() {
        let (dir, report) = report_dir();
        let fake = write_program(
            &dir.path().join("nsys"),
            "#!/bin/sh\necho 'Processing [====]' \necho 'ERROR: the report is damaged' >&2\nexit 3\n",
        );
        let e = export(&fake, &report, &dir.path().join("out"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("failed") && e.contains("the report is damaged"),
            "{e}"
        );
        assert!(!e.contains("Processing"), "{e}");
    }
}
