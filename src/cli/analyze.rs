//! `analyze`: run analyses on the processes of a run and write their outputs to a folder.

use super::analysis::{
    AnalysisResults, html_report, mark_import_problems, open_inputs, run_analyses,
};
use super::args::AnalyzeArgs;
use super::output::{finish, graph_work};
use anyhow::{Result, bail};

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

/// `analyze`: compute everything first; write nothing unless all analyses succeeded.
pub(super) fn analyze(a: AnalyzeArgs, plan: &[(String, Vec<String>)]) -> Result<()> {
    let requests = if a.no_analysis {
        if a.frames.is_none() && a.html.html.is_none() && a.label.is_none() {
            bail!("--no-analysis leaves nothing to do: add --frames DIR, --html FILE or --label");
        }
        vec![]
    } else {
        a.analyses.requests(plan, true)?
    };
    if let Some(l) = &a.label {
        crate::labels::check(l)?;
        if a.cache.no_cache {
            bail!("--label records the run in the cache: it cannot go with --no-cache");
        }
    }
    super::watch::check(&a)?;
    let engine = a.cache.engine()?;
    if a.watch {
        return super::watch::watch(engine, &a, &requests);
    }
    let (db, run) = open_inputs(engine, &a.inputs, &a.capture)?;
    let done = update(&db, run, &a, &requests, &a.inputs)?;
    if let (Some(l), Some(dir)) = (&a.label, &a.cache.dir()) {
        let remote = db.ctx.engine.store().and_then(|s| s.remote());
        crate::labels::record(dir, remote, l, &a.inputs, &a.capture.dumps)?;
    }
    // The import warnings were said when found, before any output was written.
    finish(
        &done.texts,
        a.quiet.quiet,
        a.explain.explain,
        &done.record,
        &[],
        &done.summary(),
    )?;
    // The process ends here: freeing the loaded profiles one allocation at a time would only
    // delay the exit.
    std::mem::forget(db);
    Ok(())
}

/// What one analysis of the inputs did.
pub(super) struct Done {
    pub texts: Vec<(String, String)>,
    pub record: crate::engine::RunRecord,
    /// What was written, for the summary line.
    pub wrote: Vec<String>,
}

impl Done {
    pub fn summary(&self) -> String {
        format!(
            "wrote {} ({})",
            self.wrote.join(" and "),
            graph_work(&self.record)
        )
    }
}

/// Analyse `run` (whose inputs are `inputs`) and write the outputs `a` asks for, each
/// replaced atomically.
pub(super) fn update(
    db: &crate::graph::Db,
    run: crate::graph::Run,
    a: &AnalyzeArgs,
    requests: &[crate::pipeline::AnalysisRequest],
    inputs: &[std::path::PathBuf],
) -> Result<Done> {
    // Compute everything first; write nothing unless all analyses succeeded.
    let results = run_analyses(db, run, requests)?;
    let html = match &a.html.html {
        Some(_) => Some(html_report(db, run, &results)?),
        None => None,
    };
    let frames = match &a.frames {
        Some(_) => Some(crate::graph::pandas_frames(db, run)?),
        None => None,
    };
    let AnalysisResults {
        mut files,
        mut texts,
        ..
    } = results;
    let import = crate::graph::capture::import_diagnostics(db, run)?;
    crate::capture::import_check::warn(&import);
    mark_import_problems(&mut texts, &import);
    let mut record = db.ctx.engine.finish();
    if !import.is_empty() {
        files.push((
            crate::capture::import_check::MEMBER.into(),
            serde_json::to_vec_pretty(&import)?,
        ));
    }
    record.inputs = inputs.iter().map(|p| p.display().to_string()).collect();
    record.outputs = files
        .iter()
        .map(|(rel, _)| rel.to_string_lossy().replace('\\', "/"))
        .chain([RUN_RECORD.to_string()])
        .collect();
    let engine = &db.ctx.engine;
    if !a.no_analysis {
        write_output_folder(engine, &a.output, files, &record)?;
    }
    if let (Some(page), Some(path)) = (&html, &a.html.html) {
        write_unless_in_place(engine, path, &page.0)?;
    }
    if let (Some(frames), Some(dir)) = (&frames, &a.frames) {
        for (name, bytes) in &frames.value.0 {
            write_unless_in_place(engine, &dir.join(name), bytes)?;
        }
    }
    engine.save_memo();
    let wrote: Vec<String> = [
        (!a.no_analysis).then(|| a.output.display().to_string()),
        a.html.html.as_ref().map(|p| p.display().to_string()),
        a.frames
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
    let key = crate::engine::Key::of_bytes(bytes);
    if engine.output_is(path, key) {
        return Ok(());
    }
    crate::tmpfiles::write_atomic(path, bytes)?;
    engine.record_output(path, key)
}

/// The analyses' files and the run record in `out`; what an earlier run wrote there and this
/// one did not is stale and removed.
fn write_output_folder(
    engine: &crate::engine::Engine,
    out: &std::path::Path,
    mut files: Vec<(std::path::PathBuf, Vec<u8>)>,
    record: &crate::engine::RunRecord,
) -> Result<()> {
    let earlier = earlier_outputs(out);
    files.push((RUN_RECORD.into(), serde_json::to_vec_pretty(record)?));
    for (rel, bytes) in &files {
        write_unless_in_place(engine, &out.join(rel), bytes)?;
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
