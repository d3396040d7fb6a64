//! What `run` records of a run (`formats::run_metadata`; docs/design.md, "Provenance"): asked
//! of the machine around the program (git, the host, `nvidia-smi`, `nsys --version`) and of
//! the program's own Python processes (their records, written by the Python hook).
//!
//! Everything here is best effort: a fact that cannot be had (no git, no `nvidia-smi`) is left
//! out, and a tool that does not answer within [`ASK_WITHIN`] is given up on with a note.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::formats::run_metadata::{FORMAT, Git, Gpu, RunMetadata};

/// How long a tool asked for a fact is waited for.
pub const ASK_WITHIN: Duration = Duration::from_secs(10);

/// The standard output of `cmd` when it succeeds within `within` (None otherwise; a tool still
/// running then is killed).
fn ask(mut cmd: Command, within: Duration) -> Option<String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut s).ok()?;
        Some(s)
    });
    let until = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let bytes = reader.join().ok()??;
                return status
                    .success()
                    .then(|| String::from_utf8_lossy(&bytes).into_owned());
            }
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// The commit of the repository holding `dir`, its branch and whether tracked files changed.
pub fn git(dir: &Path) -> Option<Git> {
    let run = |args: &[&str]| {
        let mut c = Command::new("git");
        c.arg("-C").arg(dir).args(args);
        ask(c, ASK_WITHIN)
    };
    let commit = run(&["rev-parse", "HEAD"])?.trim().to_string();
    if commit.is_empty() {
        return None;
    }
    let branch = run(&["symbolic-ref", "--short", "-q", "HEAD"])
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty());
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.trim().is_empty());
    Some(Git {
        commit,
        branch,
        dirty,
    })
}

fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// The GPUs `nvidia-smi --query-gpu` lists (`name, driver, memory [MiB]` lines).
pub fn parse_gpus(csv: &str) -> Vec<Gpu> {
    csv.lines()
        .filter_map(|line| {
            let mut f = line.split(',').map(str::trim);
            let name = f.next().filter(|n| !n.is_empty())?.to_string();
            let driver = f.next().filter(|d| !d.is_empty()).map(str::to_string);
            let memory_mib = f.next().and_then(|m| m.parse().ok());
            Some(Gpu {
                name,
                driver,
                memory_mib,
            })
        })
        .collect()
}

/// The CUDA version in `nvidia-smi`'s banner (`CUDA Version: 13.0`).
pub fn parse_cuda_version(banner: &str) -> Option<String> {
    let at = banner.find("CUDA Version:")? + "CUDA Version:".len();
    let v: String = banner[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!v.is_empty()).then_some(v)
}

/// The version line of `nsys --version` (`NVIDIA Nsight Systems version 2023.4.4...`).
pub fn parse_nsys_version(out: &str) -> Option<String> {
    let line = out.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(
        line.strip_prefix("NVIDIA Nsight Systems version ")
            .unwrap_or(line)
            .to_string(),
    )
}

/// What `run` knows of the run it profiled.
pub struct Known<'a> {
    pub program: &'a [OsString],
    pub environment: BTreeMap<String, String>,
    pub started_unix_s: u64,
    pub nsys: &'a Path,
    /// The folder the program's Python processes wrote their records into.
    pub python_records: Option<&'a Path>,
}

/// The record of a run.
pub fn record(k: Known) -> RunMetadata {
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut notes = Vec::new();
    let (python, more) = match k.python_records {
        Some(dir) => super::python_hook::read_records(dir),
        None => (Vec::new(), Vec::new()),
    };
    notes.extend(more);
    if python.is_empty() {
        notes.push(
            "no Python process of the program recorded itself (not a Python program, or run's Python hook was shadowed)"
                .to_string(),
        );
    }
    let smi = |args: &[&str]| {
        let mut c = Command::new("nvidia-smi");
        c.args(args);
        ask(c, ASK_WITHIN)
    };
    let gpus = smi(&[
        "--query-gpu=name,driver_version,memory.total",
        "--format=csv,noheader,nounits",
    ])
    .map(|s| parse_gpus(&s))
    .unwrap_or_default();
    let cuda_driver = if gpus.is_empty() {
        None
    } else {
        smi(&[]).and_then(|s| parse_cuda_version(&s))
    };
    let mut c = Command::new(k.nsys);
    c.arg("--version");
    let nsys_version = ask(c, ASK_WITHIN).and_then(|s| parse_nsys_version(&s));
    RunMetadata {
        format: FORMAT,
        tool: format!("nsys-jax-pipe {}", env!("CARGO_PKG_VERSION")),
        started_unix_s: k.started_unix_s,
        command: k
            .program
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: cwd.display().to_string(),
        hostname: hostname(),
        git: git(&cwd),
        environment: k.environment,
        python,
        gpus,
        cuda_driver,
        nsys_version,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_answers_are_read() {
        let g = parse_gpus("NVIDIA H200, 580.95.05, 143771\nNVIDIA H200, 580.95.05, 143771\n");
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].name, "NVIDIA H200");
        assert_eq!(g[0].driver.as_deref(), Some("580.95.05"));
        assert_eq!(g[0].memory_mib, Some(143771));
        assert!(parse_gpus("\n").is_empty());
        assert_eq!(
            parse_cuda_version(
                "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0     |"
            )
            .as_deref(),
            Some("13.0")
        );
        assert_eq!(parse_cuda_version("no gpu"), None);
        assert_eq!(
            parse_nsys_version("NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0\n")
                .as_deref(),
            Some("2023.4.4.54-234433681190v0")
        );
    }

    #[test]
    fn a_repository_is_recorded_and_a_plain_folder_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(git(tmp.path()).is_none());
        let sh = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(tmp.path())
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            assert!(ok, "git {args:?}");
        };
        sh(&["init", "-q", "-b", "trunk"]);
        std::fs::write(tmp.path().join("a"), "1").unwrap();
        sh(&["add", "a"]);
        sh(&["commit", "-q", "-m", "one"]);
        let g = git(tmp.path()).unwrap();
        assert_eq!(g.commit.len(), 40);
        assert_eq!(g.branch.as_deref(), Some("trunk"));
        assert!(!g.dirty);
        std::fs::write(tmp.path().join("a"), "2").unwrap();
        assert!(git(tmp.path()).unwrap().dirty);
    }

    #[test]
    fn a_tool_that_does_not_answer_is_given_up_on() {
        let mut c = Command::new("sleep");
        c.arg("5");
        let t = Instant::now();
        assert_eq!(ask(c, Duration::from_millis(200)), None);
        assert!(t.elapsed() < Duration::from_secs(4));
    }
}
