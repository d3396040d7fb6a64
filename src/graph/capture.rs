//! Captures through the graph: the archive a capture makes (its members keyed and its HLO
//! decoded by the graph), and the import diagnostics of a run's processes.

use crate::capture::import_check::{self, ImportDiagnostics};
use crate::capture::{self, ArchiveContents};
use crate::engine::Key;
use anyhow::Result;
use std::path::PathBuf;

use super::hlo::source_file_names;
use super::members::member_keys;
use super::{Db, Process, Run};

/// The members of the nsys-jax archive of capture `p` (see [`capture::archive_contents`]);
/// `serial` inside a graph query.
pub fn archive_contents(db: &Db, p: Process, serial: bool) -> Result<ArchiveContents> {
    let archive = p.archive_ref(db);
    let mut early = None;
    if !serial && archive.is_capture() {
        // The export starts now if nsys's version (part of its key) is not known yet, and the
        // version is probed while the dump is keyed.
        early = capture::early::EarlyExport::start(
            db.engine(),
            db.ctx.nsys_flag.as_deref(),
            &archive.path,
        );
        let ctx = db.ctx.clone();
        rayon::spawn(move || {
            let _ = ctx.nsys();
        });
    }
    let keys = member_keys(db, p.archive(db))?;
    let dumps: Vec<(String, PathBuf, Key)> = archive
        .members_under("dump")
        .map(|m| {
            let file = archive.member_file(m).expect("dump members are files");
            Ok((m.to_string(), file, keys.value.get(m)?))
        })
        .collect::<Result<_>>()?;
    let names: capture::SourceNames = if serial {
        // Inside a query: the caller's database, now.
        let names = source_file_names(db, p);
        Box::new(move || Ok(names?.value.as_ref().clone()))
    } else {
        let db = db.clone();
        Box::new(move || Ok(source_file_names(&db, p)?.value.as_ref().clone()))
    };
    let nsys = db.ctx.nsys()?;
    capture::archive_contents(db.engine(), nsys, &archive, dumps, names, serial, early)
}

/// What is known of an incomplete import of each process of `run` (see
/// [`import_check::of_processes`]).
pub fn import_diagnostics(db: &Db, run: Run) -> Result<Vec<ImportDiagnostics>> {
    let processes: Vec<_> = run
        .processes(db)
        .iter()
        .map(|&p| (p.archive_ref(db), p.stem(db).clone()))
        .collect();
    import_check::of_processes(db.engine(), &|| db.ctx.nsys().cloned(), &processes)
}
