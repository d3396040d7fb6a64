//! `compare`: two profiled runs compared with statistics; fails on a significant regression.

use crate::commands::Ui;
use crate::compare::{self as domain, Report, Settings};
use crate::engine::Engine;
use crate::graph;
use anyhow::{Result, bail};
use std::path::PathBuf;

/// What `compare` is asked to do. Each side is paths (a run's processes) or labels.
#[derive(Debug, Clone, Default)]
pub struct CompareRequest {
    pub base: Vec<String>,
    pub head: Vec<String>,
    /// Another profile of the base, made the same way (for the run-to-run noise).
    pub base_rerun: Vec<String>,
    pub settings: Settings,
    /// The folder for `compare.json`, `compare.md` and the run record.
    pub output: PathBuf,
    /// Also write the HTML page here.
    pub html: Option<PathBuf>,
    /// The Nsight Systems CLI (else found).
    pub nsys: Option<PathBuf>,
}

/// What `compare` did.
pub struct Compared {
    pub report: Report,
    pub record: crate::engine::RunRecord,
    pub output: PathBuf,
    /// The HTML page written.
    pub page: Option<PathBuf>,
}

impl Compared {
    /// The command's last lines.
    pub fn summary(&self) -> String {
        super::wrote_line(
            &self.output.display().to_string(),
            &self.record,
            self.page.as_deref(),
        )
    }
}

/// One side of a comparison: its arguments (paths or labels) resolved to inputs.
fn compare_side(args: &[String], engine: &Engine) -> Result<(Vec<graph::RunInput>, Vec<String>)> {
    let cache = engine.store().map(|s| s.root());
    let remote = engine.store().and_then(|s| s.remote());
    let mut paths = Vec::new();
    let mut dumps = Vec::new();
    for arg in args {
        let p = PathBuf::from(arg);
        if p.exists() {
            paths.push(p);
            continue;
        }
        let label = match cache {
            Some(dir) => crate::commands::labels::find(dir, remote, arg)?,
            None => None,
        };
        match label {
            Some(l) => {
                paths.extend(l.inputs);
                dumps.extend(l.dumps);
            }
            None => bail!(
                "{arg}: no such file, and no run labelled {arg:?} in the cache (label runs with `analyze --label NAME`)"
            ),
        }
    }
    let shown = paths.iter().map(|p| p.display().to_string()).collect();
    Ok((graph::classify_inputs(&paths, &dumps)?, shown))
}

/// `compare`: the comparison of `req.base` and `req.head`, written to `req.output`.
pub fn compare(engine: Engine, req: &CompareRequest, ui: &dyn Ui) -> Result<Compared> {
    use domain as compare;
    let (base, head) = (&req.base, &req.head);
    let settings = &req.settings;
    let (base_inputs, base_shown) = compare_side(base, &engine)?;
    let (head_inputs, head_shown) = compare_side(head, &engine)?;
    let (rerun_inputs, rerun_shown) = compare_side(&req.base_rerun, &engine)?;
    for side in [&base_inputs, &head_inputs, &rerun_inputs] {
        crate::commands::say_dump_notes(side, ui);
    }
    let with_rerun = !rerun_inputs.is_empty();
    let mut sides = vec![base_inputs, head_inputs];
    if with_rerun {
        sides.push(rerun_inputs);
    }
    let (db, runs) = graph::open_runs(engine, &sides, req.nsys.clone())?;
    let (base_run, head_run, rerun) = (runs[0], runs[1], runs.get(2).copied());
    for &run in &runs {
        graph::prepare_archives(&db, run)?;
    }
    // The per-process shares, in parallel, unless they are all stored.
    let needs = compare::needs(compare::findings::shares()?);
    let mut all_stored = true;
    for &run in &runs {
        all_stored &= graph::shares_stored(&db, run, &needs)?;
    }
    if !all_stored {
        let n = runs.iter().map(|r| r.processes(&db).len()).sum::<usize>() as u64;
        let bar = ui.step("loading profiles", Some(n));
        runs.iter()
            .try_for_each(|&run| graph::prepare_processes(&db, run, &needs, &|| bar.advance()))?;
    }
    let sides = (
        compare::SideInfo {
            inputs: base_shown,
            processes: base_run.processes(&db).len(),
        },
        compare::SideInfo {
            inputs: head_shown,
            processes: head_run.processes(&db).len(),
        },
        rerun.map(|r| compare::SideInfo {
            inputs: rerun_shown,
            processes: r.processes(&db).len(),
        }),
    );
    // Said first: a capture without its GPU work may well have nothing to compare.
    let mut import = Vec::new();
    for &run in &runs {
        import.extend(crate::graph::capture::import_diagnostics(&db, run)?);
    }
    for d in &import {
        ui.warn(&d.warning());
    }
    let report = compare::compare(&db, base_run, head_run, rerun, settings, sides)?;
    let html = match &req.html {
        Some(_) => Some(compare::html::page(&db, &report)?),
        None => None,
    };
    let record = db.ctx.engine.finish();
    crate::tmpfiles::write_atomic(
        &req.output.join("compare.json"),
        &serde_json::to_vec_pretty(&report)?,
    )?;
    let mut md = String::new();
    for d in &import {
        md.push_str(&format!("> **Warning:** {}\n\n", d.warning()));
    }
    md.push_str(&compare::report::markdown(&report));
    crate::tmpfiles::write_atomic(&req.output.join("compare.md"), md.as_bytes())?;
    if let (Some(path), Some(page)) = (&req.html, &html) {
        crate::tmpfiles::write_atomic(path, &page.0)?;
    }
    crate::tmpfiles::write_atomic(
        &req.output.join("pipeline-run.json"),
        &serde_json::to_vec_pretty(&record)?,
    )?;
    Ok(Compared {
        report,
        record,
        output: req.output.clone(),
        page: req.html.clone(),
    })
}
