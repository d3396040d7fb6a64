//! `analyze`: run analyses on the processes of a run and write their outputs to a folder.

use super::analysis::{AnalysisResults, mark_import_problems, open_inputs, run_analyses};
use super::args::AnalyzeArgs;
use super::output::{finish, graph_work};
use crate::engine::Engine;
use anyhow::{Result, bail};

/// `analyze`: compute everything first; write nothing unless all analyses succeeded.
pub(super) fn analyze(a: AnalyzeArgs, plan: &[(String, Vec<String>)]) -> Result<()> {
    let requests = a.analyses.requests(plan, true)?;
    if let Some(l) = &a.label {
        crate::labels::check(l)?;
        if a.cache.no_cache {
            bail!("--label records the run in the cache: it cannot go with --no-cache");
        }
    }
    let cache_dir = a.cache.dir();
    let engine = Engine::new(cache_dir.as_deref())?;
    let (db, run) = open_inputs(engine, &a.inputs, &a.capture)?;

    // Compute everything first; write nothing unless all analyses succeeded.
    let AnalysisResults {
        mut files,
        mut texts,
        ..
    } = run_analyses(&db, run, &requests)?;
    let import = crate::graph::capture::import_diagnostics(&db, run)?;
    crate::capture::import_check::warn(&import);
    mark_import_problems(&mut texts, &import);
    let record = db.ctx.engine.finish();
    files.push((
        "pipeline-run.json".into(),
        serde_json::to_vec_pretty(&record)?,
    ));
    if !import.is_empty() {
        files.push((
            crate::capture::import_check::MEMBER.into(),
            serde_json::to_vec_pretty(&import)?,
        ));
    }
    for (rel, bytes) in &files {
        crate::tmpfiles::write_atomic(&a.output.join(rel), bytes)?;
    }
    if let (Some(l), Some(dir)) = (&a.label, &cache_dir) {
        crate::labels::record(dir, l, &a.inputs, &a.capture.dumps)?;
    }
    // The import warnings were said when found, before any output was written.
    finish(
        &texts,
        a.quiet.quiet,
        a.explain.explain,
        &record,
        &[],
        &format!("wrote {} ({})", a.output.display(), graph_work(&record)),
    )?;
    // The process ends here: freeing the loaded profiles one allocation at a time would only
    // delay the exit.
    std::mem::forget(db);
    Ok(())
}
