//! `combine`: one archive from the per-process inputs of a run; `members` lays out the
//! combined archive's members.

pub mod members;

use super::pipeline::AnalysisRequest;
use super::run_analyses::{analysis_entries, open_inputs, run_analyses};
use super::{CaptureOptions, Ui, graph_work, refuse_existing};
use crate::engine::Engine;
use crate::graph;
use anyhow::{Result, bail};
use members::KeepReports;
use std::path::{Path, PathBuf};

/// What `combine` is asked to do.
#[derive(Debug, Clone)]
pub struct CombineRequest {
    /// The per-process archives or reports.
    pub inputs: Vec<PathBuf>,
    /// The combined archive (`.zip` added when missing).
    pub output: PathBuf,
    pub force: bool,
    /// Which `.nsys-rep` reports to keep.
    pub keep_reports: KeepReports,
    pub capture: CaptureOptions,
    /// The analyses stored in the archive.
    pub analyses: Vec<AnalysisRequest>,
    /// Also write the HTML report here.
    pub html: Option<PathBuf>,
}

/// What `combine` did.
pub struct Combined {
    pub output: PathBuf,
    /// The output was already, unchanged, what this would have written.
    pub unchanged: bool,
    pub members: usize,
    pub inputs: usize,
    pub texts: Vec<(String, String)>,
    pub record: crate::engine::RunRecord,
}

impl Combined {
    /// The command's last line.
    pub fn summary(&self) -> String {
        format!(
            "{} {} ({} from {}; {})",
            if self.unchanged {
                "unchanged:"
            } else {
                "wrote"
            },
            self.output.display(),
            crate::table::count(self.members, "member", "members"),
            crate::table::count(self.inputs, "input", "inputs"),
            graph_work(&self.record)
        )
    }
}

/// `combine`: one archive from the per-process inputs of a run (see [`members`]).
pub fn combine(engine: Engine, req: &CombineRequest, ui: &dyn Ui) -> Result<Combined> {
    let output = if req.output.extension().is_some_and(|e| e == "zip") {
        req.output.clone()
    } else {
        let mut o = req.output.clone().into_os_string();
        o.push(".zip");
        PathBuf::from(o)
    };
    refuse_existing(&output, req.force)?;
    let (db, run) = open_inputs(engine, &req.inputs, &req.capture, ui)?;
    let inputs = {
        let _step = ui.step("combining", None);
        combine_inputs(&db, run, &req.inputs, ui)
    };
    let combined = members::combine(inputs?, req.keep_reports)?;
    for w in &combined.warnings {
        ui.warn(w);
    }
    let mut entries = combined.entries;
    let results = run_analyses(&db, run, &req.analyses, ui)?;
    entries.extend(analysis_entries(&results));
    entries.extend(super::archive::report_entry(
        &db,
        run,
        &results,
        req.html.as_deref(),
    )?);
    // The reader's way in: install.sh and the notebook (the inputs' own copies give way).
    entries.retain(|e| !crate::formats::notebook::is_ours(&e.name));
    entries.extend(crate::formats::notebook::entries());
    let members = entries.len();
    // An existing output (with -f) that is, unchanged, what this would write stays as it is.
    let key = crate::formats::archive_writer::archive_key(&entries);
    let unchanged = db.ctx.engine.output_is(&output, key);
    if !unchanged {
        crate::formats::archive_writer::write_zip(entries, &output, req.force)?;
        db.ctx.engine.record_output(&output, key)?;
    }
    let record = db.ctx.engine.finish();
    // A command is the last thing its process does (see `analyze`).
    std::mem::forget(db);
    Ok(Combined {
        output,
        unchanged,
        members,
        inputs: req.inputs.len(),
        texts: results.texts,
        record,
    })
}

/// Every input's members: an archive's as they are, a capture's as `archive` lays them out.
fn combine_inputs(
    db: &graph::Db,
    run: graph::Run,
    paths: &[PathBuf],
    ui: &dyn Ui,
) -> Result<Vec<members::Input>> {
    use rayon::prelude::*;
    let processes = run.processes(db).clone();
    if processes.len() != paths.len() {
        bail!("combine takes per-process inputs; an input is already a combined archive");
    }
    let stem = |p: &Path| {
        let name = p
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        ["zip", "nsys-rep", "qdrep"]
            .iter()
            .find_map(|e| name.strip_suffix(&format!(".{e}")).map(str::to_string))
            .unwrap_or(name)
    };
    // Captures are laid out one after another (each fans out inside); archives are read in
    // parallel.
    let mut out = Vec::with_capacity(paths.len());
    for (p, path) in processes.iter().zip(paths) {
        let archive = p.archive_ref(db);
        let entries = if archive.is_capture() {
            let contents = crate::graph::capture::archive_contents(db, *p, false)?;
            for n in &contents.notes {
                ui.say(&format!("note: {n}"));
            }
            contents.entries
        } else if archive.is_zip() {
            // Copied from the input when written: a combined archive of many processes is
            // never in memory.
            let keys = graph::member_keys(db, p.archive(db))?;
            archive
                .members()
                .map(|m| {
                    Ok(crate::formats::archive_writer::Entry::in_zip(
                        m,
                        archive.clone(),
                        m,
                        keys.value.get(m)?.0,
                    ))
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            let members: Vec<String> = archive.members().map(str::to_string).collect();
            members
                .par_iter()
                .map(|m| {
                    Ok(crate::formats::archive_writer::Entry::by_name(
                        m.clone(),
                        archive.read(m)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?
        };
        out.push(members::Input {
            path: path.clone(),
            stem: stem(path),
            entries,
        });
    }
    Ok(out)
}
