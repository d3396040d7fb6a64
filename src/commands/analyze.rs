//! `analyze`: run analyses on the processes of a run and write their outputs to a folder.

use super::pipeline::AnalysisRequest;
use super::run_analyses::{
    AnalysisResults, OutputFile, html_report, mark_import_problems, open_inputs, run_analyses,
};
use super::{CaptureOptions, Ui};
use crate::engine::Engine;
use anyhow::Result;
use std::path::PathBuf;

/// The run record in the output folder.
const RUN_RECORD: &str = "pipeline-run.json";

/// The files an earlier run recorded writing in `out` (relative paths without `..`; nothing
/// when there is no readable record).
fn earlier_outputs(out: &std::path::Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(out.join(RUN_RECORD)) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Vec::new();
    };
    v["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o.as_str())
        .filter(|r| crate::formats::archive::check_member_name(r).is_ok())
        .map(str::to_string)
        .collect()
}

/// What `analyze` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeRequest {
    /// The processes' archives and reports (or folders of them, with `--watch`).
    pub inputs: Vec<PathBuf>,
    pub capture: CaptureOptions,
    pub analyses: Vec<AnalysisRequest>,
    /// The output folder of the analyses; None: analyses write no folder (`--no-analysis`).
    pub output: Option<PathBuf>,
    /// The HTML report's path.
    pub html: Option<PathBuf>,
    /// The folder of the frames for pandas.
    pub frames: Option<PathBuf>,
    /// A name for this run in the cache folder `cache_dir`.
    pub label: Option<String>,
    pub cache_dir: Option<PathBuf>,
}

/// `analyze`: compute everything first; write nothing unless all analyses succeeded. The
/// import warnings are said when found, before any output is written.
pub fn analyze(engine: Engine, req: &AnalyzeRequest, ui: &dyn Ui) -> Result<Done> {
    let (db, run) = open_inputs(engine, &req.inputs, &req.capture, ui)?;
    let done = update(&db, run, req, &req.inputs, ui)?;
    if let (Some(l), Some(dir)) = (&req.label, &req.cache_dir) {
        match db.ctx.engine.store() {
            Some(store) => {
                super::labels::record(dir, store.remote(), l, &req.inputs, &req.capture.dumps)?
            }
            // The cache could not be used (said once when it was opened).
            None => ui.warn(&format!(
                "label {l} not recorded: the cache {} cannot be used",
                dir.display()
            )),
        }
    }
    // A command is the last thing its process does: freeing the loaded profiles one
    // allocation at a time would only delay the exit.
    std::mem::forget(db);
    Ok(done)
}

/// What one analysis of the inputs did.
pub struct Done {
    pub texts: Vec<(String, String)>,
    pub record: crate::engine::RunRecord,
    /// What was written, for the summary line.
    pub wrote: Vec<String>,
    /// The HTML report written, named on the last line.
    pub page: Option<PathBuf>,
}

impl Done {
    pub fn summary(&self) -> String {
        super::wrote_line(
            &self.wrote.join(" and "),
            &self.record,
            self.page.as_deref(),
        )
    }
}

/// Analyse `run` (whose inputs are `inputs`) and write the outputs `req` asks for, each
/// replaced atomically.
pub(super) fn update(
    db: &crate::graph::Db,
    run: crate::graph::Run,
    req: &AnalyzeRequest,
    inputs: &[PathBuf],
    ui: &dyn Ui,
) -> Result<Done> {
    // Compute everything first; write nothing unless all analyses succeeded.
    let results = run_analyses(db, run, &req.analyses, ui)?;
    let html = match &req.html {
        Some(_) => Some(html_report(db, run, &results)?),
        None => None,
    };
    let frames = match &req.frames {
        Some(_) => Some(crate::graph::pandas_frames(db, run)?),
        None => None,
    };
    let AnalysisResults {
        mut files,
        mut texts,
        ..
    } = results;
    let import = crate::graph::capture::import_diagnostics(db, run)?;
    for d in &import {
        ui.warn(&d.warning());
    }
    mark_import_problems(&mut texts, &import);
    let mut record = db.ctx.engine.finish();
    if !import.is_empty() {
        files.push(OutputFile::of_bytes(
            crate::capture::import_check::MEMBER.into(),
            serde_json::to_vec_pretty(&import)?,
        ));
    }
    record.inputs = inputs.iter().map(|p| p.display().to_string()).collect();
    record.outputs = files
        .iter()
        .map(|f| f.rel.to_string_lossy().replace('\\', "/"))
        .chain([RUN_RECORD.to_string()])
        .collect();
    let engine = &db.ctx.engine;
    if let Some(out) = &req.output {
        write_output_folder(engine, out, files, &record)?;
    }
    if let (Some(page), Some(path)) = (&html, &req.html) {
        write_unless_in_place(engine, path, &page.0)?;
    }
    if let (Some(frames), Some(dir)) = (&frames, &req.frames) {
        for (name, bytes) in &frames.value.0 {
            write_unless_in_place(engine, &dir.join(name), bytes)?;
        }
    }
    engine.save_memo();
    let wrote: Vec<String> = [
        req.output.as_ref().map(|p| p.display().to_string()),
        req.frames
            .as_ref()
            .map(|d| format!("frames to {}", d.display())),
    ]
    .into_iter()
    .flatten()
    .collect();
    Ok(Done {
        texts,
        record,
        wrote,
        page: req.html.clone(),
    })
}

/// Writes `bytes` to `path` (atomically) unless the file there is, unchanged since this cache
/// recorded writing it, these very bytes: a warm re-run into the same folder rewrites nothing.
/// The check is the file's size, modification time and inode against the memo, and the
/// bytes' hash against the one recorded.
fn write_unless_in_place(
    engine: &crate::engine::Engine,
    path: &std::path::Path,
    bytes: &[u8],
) -> Result<()> {
    write_keyed(engine, path, bytes, crate::engine::Key::of_bytes(bytes))
}

/// [`write_unless_in_place`] of bytes whose content key is `key`.
fn write_keyed(
    engine: &crate::engine::Engine,
    path: &std::path::Path,
    bytes: &[u8],
    key: crate::engine::Key,
) -> Result<()> {
    if engine.output_is(path, key) {
        return Ok(());
    }
    crate::tmpfiles::write_atomic(path, bytes)?;
    engine.record_output(path, key)
}

/// The analyses' files and the run record in `out`, committed together: every file that
/// changes is first written to a temporary file beside its destination, and only when all are
/// written are they renamed into place, the run record last. A failure while writing (a full
/// disk, a file size limit, a read-only folder) removes the temporary files and leaves the
/// folder as the earlier run left it, which the error says. What an earlier run wrote there
/// and this one did not is stale and removed once the new files are in place.
fn write_output_folder(
    engine: &crate::engine::Engine,
    out: &std::path::Path,
    mut files: Vec<OutputFile>,
    record: &crate::engine::RunRecord,
) -> Result<()> {
    use std::io::Write;
    let earlier = earlier_outputs(out);
    files.push(OutputFile::of_bytes(
        RUN_RECORD.into(),
        serde_json::to_vec_pretty(record)?,
    ));
    let mut staged = Vec::new();
    for f in &files {
        let dest = out.join(&f.rel);
        if engine.output_is(&dest, f.key) {
            continue;
        }
        let dir = dest.parent().unwrap_or(out);
        let written = crate::tmpfiles::TempFile::new_in(dir, crate::tmpfiles::SUFFIX)
            .and_then(|mut t| t.write_all(&f.bytes).map(|()| t));
        match written {
            Ok(t) => staged.push((t, dest, f.key)),
            Err(e) => {
                // Dropped, the staged files are removed.
                drop(staged);
                anyhow::bail!(
                    "{}: cannot write ({}); no output was changed: {} holds the earlier run's outputs",
                    dest.display(),
                    io_reason(&e),
                    out.display()
                );
            }
        }
    }
    for (t, dest, key) in staged {
        t.commit(&dest, true)
            .map_err(|e| anyhow::anyhow!("{}: cannot write ({})", dest.display(), io_reason(&e)))?;
        engine.record_output(&dest, key)?;
    }
    for rel in earlier.iter().filter(|r| !record.outputs.contains(r)) {
        let path = out.join(rel);
        if std::fs::remove_file(&path).is_ok()
            && let Some(dir) = path.parent().filter(|d| *d != out)
        {
            // Only when emptied.
            let _ = std::fs::remove_dir(dir);
        }
    }
    Ok(())
}

/// An I/O error's reason without its `(os error N)`.
fn io_reason(e: &std::io::Error) -> String {
    crate::error::without_os_code(crate::formats::archive::io_reason(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::Recorded;

    /// The command as a function: the shipped example analysed into a folder, what it wrote
    /// named in its result and in the run record, nothing printed; a second call writes the
    /// same files and executes no node.
    #[test]
    fn analyze_is_a_function_of_its_request() {
        let tmp = tempfile::tempdir().unwrap();
        let example =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
        let req = AnalyzeRequest {
            inputs: vec![example],
            analyses: super::super::pipeline::default_pipeline(),
            output: Some(tmp.path().join("out")),
            ..Default::default()
        };
        let cache = tmp.path().join("cache");
        let ui = Recorded::default();
        let done = analyze(Engine::new(Some(&cache)).unwrap(), &req, &ui).unwrap();
        let names: Vec<&str> = done.texts.iter().map(|(n, _)| n.as_str()).collect();
        // In the pipeline's order, but for the findings, which lead.
        let mut expected: Vec<&str> = req.analyses.iter().map(|r| r.name.as_str()).collect();
        expected.retain(|n| *n != "diagnose");
        expected.insert(0, "diagnose");
        // The headline before everything.
        expected.insert(0, "headline");
        assert_eq!(names, expected);
        assert!(done.record.executed > 0);
        assert_eq!(
            done.wrote,
            vec![tmp.path().join("out").display().to_string()]
        );
        for rel in &done.record.outputs {
            assert!(
                tmp.path().join("out").join(rel).is_file(),
                "{rel} not written"
            );
        }
        let first = std::fs::read(tmp.path().join("out/summary.json")).unwrap();
        assert!(ui.lines.lock().unwrap().is_empty(), "{:?}", ui.lines);
        let again = analyze(Engine::new(Some(&cache)).unwrap(), &req, &ui).unwrap();
        assert_eq!(again.record.executed, 0);
        assert_eq!(
            std::fs::read(tmp.path().join("out/summary.json")).unwrap(),
            first
        );
    }
}
