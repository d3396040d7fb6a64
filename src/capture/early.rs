//! An export of a capture started before its key is known.
//!
//! The key of a report's export names the version of the nsys that made it, and the version
//! is known only once `nsys --version` has run (tens of milliseconds; then memoised on the
//! binary, see [`super::nsys`]). When it is not memoised yet — the first run with this nsys,
//! or an empty cache — a capture's archive needs the export anyway, unless the store already
//! holds every member it derives (a shared cache, a memo file lost): so the export is started
//! at once, beside the probe, and taken by the export node if it asks for this report with
//! this nsys; otherwise it is killed and its folder removed when dropped.
//!
//! A memoised version means the members may well be stored: then nothing starts early, and
//! nsys runs only if a member needs it.

use super::nsys::{self, Nsys};
use crate::engine::Engine;
use crate::formats::nsys_export;
use crate::tmpfiles::ScratchDir;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// A running `nsys export` of one report into a scratch folder of its own.
pub struct EarlyExport {
    // Fields drop in order: nsys is stopped before its folder is removed.
    running: nsys_export::Running,
    out: PathBuf,
    dir: ScratchDir,
}

impl EarlyExport {
    /// Starts exporting `report` with the nsys that `flag` (the `--nsys` option) selects, when
    /// that nsys's version is not memoised. None otherwise, and when nsys cannot be started
    /// now (the export node, started the usual way, then says why).
    pub fn start(engine: &Engine, flag: Option<&Path>, report: &Path) -> Option<EarlyExport> {
        let path = nsys::locate(flag).ok()?;
        if nsys::version_known(engine, &path) {
            return None;
        }
        let dir = ScratchDir::new("export").ok()?;
        let out = dir.path().join("tables");
        let running = nsys_export::start(&path, report, &out).ok()?;
        tracing::debug!("{}: export started early", report.display());
        Some(EarlyExport { running, out, dir })
    }

    /// Whether this is the export of `report` by `nsys`.
    pub fn is_for(&self, nsys: &Nsys, report: &Path) -> bool {
        self.running.nsys() == nsys.path && self.running.report() == report
    }

    /// Waits for the export: its scratch folder and the folder of tables in it.
    pub fn finish(self) -> Result<(ScratchDir, PathBuf)> {
        let EarlyExport { running, out, dir } = self;
        running.finish()?;
        Ok((dir, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An nsys that answers `--version` and exports by writing one file into `--output`, and
    /// a report beside it.
    fn nsys_and_report(dir: &Path) -> (PathBuf, PathBuf) {
        let script = r#"#!/bin/sh
if [ "$1" = --version ]; then echo 'NVIDIA Nsight Systems version 2025.1.1.110-251135427971v0'; exit 0; fi
while [ $# -gt 1 ]; do if [ "$1" = --output ]; then out="$2"; fi; shift; done
mkdir -p "$out" && echo "$1" > "$out/exported"
"#;
        let nsys = crate::testutil::write_program(&dir.join("nsys"), script);
        let report = dir.join("r.nsys-rep");
        std::fs::write(&report, b"report").unwrap();
        (std::fs::canonicalize(nsys).unwrap(), report)
    }

    #[test]
    fn starts_only_while_the_version_is_unknown_and_serves_its_own_report() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, report) = nsys_and_report(tmp.path());
        let engine = Engine::new(Some(&tmp.path().join("cache"))).unwrap();

        let early = EarlyExport::start(&engine, Some(&bin), &report).expect("started");
        let nsys = nsys::find(&engine, Some(&bin)).unwrap();
        assert!(early.is_for(&nsys, &report));
        assert!(!early.is_for(&nsys, &tmp.path().join("other.nsys-rep")));
        let (dir, out) = early.finish().unwrap();
        assert!(out.starts_with(dir.path()));
        let exported = std::fs::read_to_string(out.join("exported")).unwrap();
        assert_eq!(exported.trim(), report.to_str().unwrap());

        // The version is memoised now: nothing starts early any more.
        assert!(EarlyExport::start(&engine, Some(&bin), &report).is_none());
        // Nor with an nsys that is not there.
        let engine = Engine::new(None).unwrap();
        let missing = tmp.path().join("no-nsys");
        assert!(EarlyExport::start(&engine, Some(&missing), &report).is_none());
    }

    #[test]
    fn an_export_not_taken_leaves_no_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, report) = nsys_and_report(tmp.path());
        let engine = Engine::new(None).unwrap();
        let early = EarlyExport::start(&engine, Some(&bin), &report).expect("started");
        let folder = early.dir.path().to_path_buf();
        assert!(folder.is_dir());
        drop(early);
        assert!(!folder.exists());
    }
}
