//! `archive`: an Nsight Systems report and its XLA dump as an nsys-jax archive; also how
//! `run` writes its archive.

use super::pipeline::AnalysisRequest;
use super::run_analyses::{
    AnalysisResults, REPORT_MEMBER, analysis_entries, html_report, mark_import_problems,
    open_inputs, run_analyses,
};
use super::{CaptureOptions, Ui, graph_work, refuse_existing};
use crate::capture::import_check::{self, ImportDiagnostics};
use crate::engine::Engine;
use crate::graph;
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// What `archive` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct ArchiveRequest {
    /// The Nsight Systems report.
    pub report: PathBuf,
    /// The archive to write (`.zip` added when missing); None: the report's name with `.zip`.
    pub output: Option<PathBuf>,
    /// Replace an existing output.
    pub force: bool,
    pub capture: CaptureOptions,
    /// The analyses stored in the archive.
    pub analyses: Vec<AnalysisRequest>,
    /// Also write the HTML report here.
    pub html: Option<PathBuf>,
}

/// What `archive` did.
pub struct Archived {
    pub output: PathBuf,
    pub written: Written,
    pub record: crate::engine::RunRecord,
}

/// `archive`: write the archive of one report, with the requested analyses stored in it.
pub fn archive(engine: Engine, req: &ArchiveRequest, ui: &dyn Ui) -> Result<Archived> {
    if !crate::capture::is_report(&req.report) {
        bail!(
            "{}: not an Nsight Systems report (.nsys-rep)",
            req.report.display()
        );
    }
    let output = req.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "{}.zip",
            req.report
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "report".into())
        ))
    });
    let output = if output.extension().is_some_and(|e| e == "zip") {
        output
    } else {
        output.with_extension("zip")
    };
    refuse_existing(&output, req.force)?;
    let (db, run) = open_inputs(engine, std::slice::from_ref(&req.report), &req.capture, ui)?;
    let job = ArchiveJob {
        analyses: &req.analyses,
        output: &output,
        force: req.force,
        nsys_output: None,
        html: req.html.as_deref(),
    };
    let written = write_archive(&db, run, &job, ui)?;
    let record = db.ctx.engine.finish();
    // A command is the last thing its process does (see `analyze`).
    std::mem::forget(db);
    Ok(Archived {
        output,
        written,
        record,
    })
}

/// What writing an archive did.
pub struct Written {
    pub members: usize,
    pub texts: Vec<(String, String)>,
    /// Time to lay out the archive's members (export, projection, compression).
    pub contents: std::time::Duration,
    /// Time to run the analyses.
    pub analyses: std::time::Duration,
    /// An incomplete import, stored in the archive as `import-diagnostics.json`.
    pub import: Option<crate::capture::import_check::ImportDiagnostics>,
    /// With a shared cache, what computing the archive's own nodes there did.
    pub shared: Option<crate::engine::RunRecord>,
}

impl Written {
    /// The summary's words on the shared cache, if one was used.
    pub fn shared_note(&self) -> String {
        match &self.shared {
            Some(r) => format!(" · its nodes for analyze, shared: {}", graph_work(r)),
            None => String::new(),
        }
    }
}

/// How to write the archive of a capture.
pub(super) struct ArchiveJob<'a> {
    /// The analyses stored in it.
    pub analyses: &'a [AnalysisRequest],
    pub output: &'a Path,
    /// Replace an existing `output`.
    pub force: bool,
    /// What `nsys profile` printed, when the capture was just made.
    pub nsys_output: Option<&'a str>,
    /// Also write the HTML report here.
    pub html: Option<&'a Path>,
}

/// Lay out the archive of the run's only process (a capture), run the analyses, store their
/// outputs under `analysis/<name>/`, and write the zip `job.output` in one rename.
pub(super) fn write_archive(
    db: &graph::Db,
    run: graph::Run,
    job: &ArchiveJob,
    ui: &dyn Ui,
) -> Result<Written> {
    let p = run.processes(db)[0];
    let start = std::time::Instant::now();
    let contents = {
        let _step = ui.step(
            "writing the archive: nsys export, projection, compression",
            None,
        );
        crate::graph::capture::archive_contents(db, p, false)
    };
    let mut contents = contents?;
    for n in &contents.notes {
        ui.say(&format!("note: {n}"));
    }
    let contents_time = start.elapsed();
    // The import check reads the trace while the analyses run.
    let start = std::time::Instant::now();
    let (import, results) = {
        // Handles of the same database, one per side (a handle is not shared between
        // threads).
        let (check, analyse) = (db.clone(), db.clone());
        rayon::join(
            move || capture_import(&check, run, job.nsys_output),
            move || run_analyses(&analyse, run, job.analyses, ui),
        )
    };
    let import = import?;
    match &import {
        Some(d) if d.is_incomplete() => ui.warn(&d.warning()),
        Some(d) => ui.say(&format!(
            "nsys-jax-pipe: note: {}",
            d.note().unwrap_or_default()
        )),
        None => {}
    }
    let mut results = results?;
    let analyses = start.elapsed();
    if let Some(d) = &import {
        contents
            .entries
            .push(crate::formats::archive_writer::Entry::deflated(
                crate::capture::import_check::MEMBER,
                d.to_json(),
            ));
    }
    // Notices alone lose nothing: the member keeps them, the outputs are not marked.
    let import = import.filter(ImportDiagnostics::is_incomplete);
    mark_import_problems(&mut results.texts, import.as_slice());
    contents.entries.extend(analysis_entries(&results));
    contents
        .entries
        .extend(report_entry(db, run, &results, job.html)?);
    // The reader's way in: install.sh and the notebook (an input's own copies give way).
    let notebook = crate::formats::notebook::entries();
    contents
        .entries
        .retain(|e| !crate::formats::notebook::is_ours(&e.name));
    contents.entries.extend(notebook);
    let members = contents.entries.len();
    crate::formats::archive_writer::write_zip(contents.entries, job.output, job.force)?;
    let shared = share_where_it_ran(db, job.output, ui)?;
    Ok(Written {
        members,
        texts: results.texts,
        contents: contents_time,
        analyses,
        import,
        shared,
    })
}

/// With a shared cache: the per-process work of the default analyses on the archive just
/// written (`output`), stored there, so that `analyze` of this archive among the others of the
/// run, on any machine, finds this process's nodes computed where it ran (the archive's nodes
/// are keyed by its members, not by the capture it was made from). None without one.
fn share_where_it_ran(
    db: &graph::Db,
    output: &Path,
    ui: &dyn Ui,
) -> Result<Option<crate::engine::RunRecord>> {
    let Some(store) = db.engine().store() else {
        return Ok(None);
    };
    let Some(remote) = store.remote() else {
        return Ok(None);
    };
    let engine = Engine::tiered(Some(store.root()), Some(remote.url()))?;
    let input = graph::RunInput::Archive(output.to_path_buf());
    let (db, run) = graph::open_run(engine, &[input], db.ctx.nsys_flag.clone())?;
    let results = run_analyses(&db, run, &super::pipeline::default_pipeline(), ui)?;
    // `analyze` writes the page by default: its node is shared too.
    html_report(&db, run, &results)?;
    Ok(Some(db.ctx.engine.finish()))
}

/// The HTML report stored in an archive (`report.html`) when analyses ran or one is asked
/// for, also written to `html` when given.
pub(super) fn report_entry(
    db: &graph::Db,
    run: graph::Run,
    results: &AnalysisResults,
    html: Option<&Path>,
) -> Result<Option<crate::formats::archive_writer::Entry>> {
    if results.outputs.is_empty() && html.is_none() {
        return Ok(None);
    }
    let page = html_report(db, run, results)?;
    if let Some(path) = html {
        crate::tmpfiles::write_atomic(path, &page.0)?;
    }
    Ok(Some(crate::formats::archive_writer::Entry::deflated(
        REPORT_MEMBER,
        page.0.clone(),
    )))
}

/// What is known of an incomplete import of the capture of `run` (one process): what nsys
/// printed when it made the report (`nsys_output`, from `run`), else what the report records
/// (see [`crate::capture::import_check`]).
fn capture_import(
    db: &graph::Db,
    run: graph::Run,
    nsys_output: Option<&str>,
) -> Result<Option<ImportDiagnostics>> {
    let from_output = nsys_output
        .map(import_check::from_nsys_output)
        .unwrap_or_default();
    let found = if from_output.is_empty() {
        crate::graph::capture::import_diagnostics(db, run)?.pop()
    } else {
        let report = run.processes(db)[0].archive_ref(db).path.clone();
        Some(ImportDiagnostics::of(
            report
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            "nsys output",
            from_output,
        ))
    };
    Ok(found)
}
