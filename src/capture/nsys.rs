//! Finding the Nsight Systems CLI and knowing its version.
//!
//! The only external program this project needs is `nsys`, for `nsys export`. It is looked
//! for, in order: the `--nsys` flag, `$NSYS`, `nsys` on `PATH`, then the usual install
//! locations (`/opt/nvidia/nsight-systems*/bin`, `/usr/local/cuda*/bin`, the folder that
//! `scripts/install-nsys.sh` fills in a checkout: `.nsys/target-linux-x64`). Its version is
//! part of every export's key, so a report exported by one nsys is not confused with the same
//! report exported by another. Probing the version runs `nsys --version`; the answer is
//! memoised on the binary's identity (path, size, mtime, inode) in the cache, so a run whose
//! results are all cached never starts nsys.

use crate::engine::{Engine, Key};
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The oldest Nsight Systems whose `nsys export` this project knows to work
/// (`--type parquetdir`, `--tables`).
pub const MIN_VERSION: (u32, u32) = (2023, 4);

/// How to get a working nsys, for error messages.
pub const INSTALL_HINT: &str = "install Nsight Systems (https://developer.nvidia.com/nsight-systems) or run scripts/install-nsys.sh DIR (no root needed), then pass --nsys PATH or set NSYS";

/// A usable nsys: its path and the key of its version string.
#[derive(Clone, Debug)]
pub struct Nsys {
    pub path: PathBuf,
    /// blake3 of `nsys --version`'s output.
    pub version_key: Key,
}

/// Where to look for nsys, most specific first.
pub fn candidates(flag: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(f) = flag {
        out.push(f.to_path_buf());
        return out;
    }
    if let Some(p) = std::env::var_os("NSYS").filter(|p| !p.is_empty()) {
        out.push(PathBuf::from(p));
        return out;
    }
    if let Some(path) = std::env::var_os("PATH") {
        out.extend(std::env::split_paths(&path).map(|d| d.join("nsys")));
    }
    let mut globbed = Vec::new();
    for (root, prefix, sub) in [
        ("/opt/nvidia", "nsight-systems", "bin/nsys"),
        ("/usr/local", "cuda", "bin/nsys"),
    ] {
        if let Ok(entries) = std::fs::read_dir(root) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(prefix) {
                    globbed.push(e.path().join(sub));
                }
            }
        }
    }
    // Newest install first (names carry the version).
    globbed.sort();
    globbed.reverse();
    out.extend(globbed);
    out.push(PathBuf::from("/usr/local/bin/nsys"));
    out.push(Path::new(env!("CARGO_MANIFEST_DIR")).join(".nsys/target-linux-x64/nsys"));
    out
}

/// Find nsys and its version (see the module notes). `flag` is the `--nsys` option.
pub fn find(engine: &Engine, flag: Option<&Path>) -> Result<Nsys> {
    let path = locate(flag)?;
    let version_key = engine.file_derived(&path, VERSION_TAG, || {
        let v = probe_version(&path)?;
        Ok(Key::of_bytes(v.as_bytes()))
    })?;
    Ok(Nsys { path, version_key })
}

/// Under this tag the file memo keeps the key of an nsys binary's version.
const VERSION_TAG: &str = "nsys-version";

/// Whether the version of the nsys at `path` (as [`locate`] gives it) is memoised, so that
/// [`find`] will not run it.
pub fn version_known(engine: &Engine, path: &Path) -> bool {
    engine.file_derived_known(path, VERSION_TAG)
}

/// The nsys that [`find`] uses (canonical path), without probing its version.
pub fn locate(flag: Option<&Path>) -> Result<PathBuf> {
    let explicit = flag.is_some() || std::env::var_os("NSYS").is_some_and(|p| !p.is_empty());
    let cands = candidates(flag);
    let Some(path) = cands.iter().find(|p| p.is_file()) else {
        if explicit {
            bail!(
                "{}: no such nsys executable ({INSTALL_HINT})",
                cands[0].display()
            );
        }
        bail!("Nsight Systems (nsys) not found on PATH or in the usual places: {INSTALL_HINT}");
    };
    Ok(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()))
}

/// Run `nsys --version`, check it is recent enough and return its output.
pub fn probe_version(path: &Path) -> Result<String> {
    let cannot_run =
        |e: std::io::Error| anyhow::anyhow!("{}: cannot run ({e}); {INSTALL_HINT}", path.display());
    let out = crate::interrupt::spawn(
        Command::new(path)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    )
    .and_then(|c| c.wait_with_output())
    .map_err(cannot_run)?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || text.is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{}: `nsys --version` failed ({}){}; {INSTALL_HINT}",
            path.display(),
            out.status,
            err.lines()
                .last()
                .map(|l| format!(": {}", l.trim()))
                .unwrap_or_default()
        );
    }
    match parse_version(&text) {
        Some(v) if v >= MIN_VERSION => Ok(text),
        Some((y, m)) => bail!(
            "{}: Nsight Systems {y}.{m} is too old (need {}.{} or newer for `nsys export --type parquetdir --tables`); {INSTALL_HINT}",
            path.display(),
            MIN_VERSION.0,
            MIN_VERSION.1
        ),
        None => bail!(
            "{}: not Nsight Systems? `--version` printed {text:?}; {INSTALL_HINT}",
            path.display()
        ),
    }
}

/// `(year, minor)` from `NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0`.
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let rest = text.split("version").nth(1)?.trim();
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let year: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    (year >= 2000).then_some((year, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("NVIDIA Nsight Systems version 2023.4.4.54-234433681190v0"),
            Some((2023, 4))
        );
        assert_eq!(
            parse_version("NVIDIA Nsight Systems version 2025.1.1.110-251135427971v0"),
            Some((2025, 1))
        );
        assert_eq!(parse_version("something else"), None);
        assert!((2023, 4) >= MIN_VERSION && (2022, 5) < MIN_VERSION);
    }

    fn fake_nsys(dir: &Path, version_line: &str, exit: i32) -> PathBuf {
        crate::testutil::write_program(
            &dir.join("nsys"),
            &format!(
                "#!/bin/sh\necho '{version_line}'\necho probed >> '{}/calls'\nexit {exit}\n",
                dir.display()
            ),
        )
    }

    #[test]
    fn finds_checks_and_memoises_the_version() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let nsys = fake_nsys(
            &bin,
            "NVIDIA Nsight Systems version 2024.6.1.90-246160830v0",
            0,
        );
        let engine = Engine::new(Some(&cache)).unwrap();
        let found = find(&engine, Some(&nsys)).unwrap();
        assert_eq!(found.path, std::fs::canonicalize(&nsys).unwrap());
        engine.finish();
        // A second process finds the version in the memo and does not run nsys again.
        let engine = Engine::new(Some(&cache)).unwrap();
        let again = find(&engine, Some(&nsys)).unwrap();
        assert_eq!(again.version_key, found.version_key);
        let calls = std::fs::read_to_string(bin.join("calls")).unwrap();
        assert_eq!(calls.lines().count(), 1, "{calls}");

        let old = tempfile::tempdir().unwrap();
        let nsys = fake_nsys(
            old.path(),
            "NVIDIA Nsight Systems version 2022.1.3.3-1c7b5f7",
            0,
        );
        let e = find(&engine, Some(&nsys)).unwrap_err().to_string();
        assert!(
            e.contains("too old") && e.contains("install-nsys.sh"),
            "{e}"
        );

        let bad = tempfile::tempdir().unwrap();
        let nsys = fake_nsys(bad.path(), "oops", 3);
        let e = find(&engine, Some(&nsys)).unwrap_err().to_string();
        assert!(e.contains("--version") && e.contains("failed"), "{e}");

        let e = find(&engine, Some(&tmp.path().join("nope")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope") && e.contains("no such nsys"), "{e}");
    }
}
