//! `compare`: two profiled runs compared with statistics; fails on a significant regression.

use super::args::CompareArgs;
use super::output::{finish, graph_work, loading_bar};
use crate::engine::Engine;
use crate::graph;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::PathBuf;

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
            Some(dir) => crate::labels::find(dir, remote, arg)?,
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

pub(super) fn compare(a: CompareArgs) -> Result<i32> {
    use crate::compare::{self, Settings, SettingsFile};
    let (base, head) = match (a.sides.len(), a.base.is_empty(), a.head.is_empty()) {
        (2, true, true) => (vec![a.sides[0].clone()], vec![a.sides[1].clone()]),
        (0, false, false) => (a.base.clone(), a.head.clone()),
        _ => bail!(
            "give BASE and HEAD, or --base and --head (each repeatable for runs of several processes)"
        ),
    };
    let mut settings = Settings::default();
    if let Some(p) = &a.pipeline.pipeline
        && let Some(f) = crate::pipeline::compare_settings(p)?
    {
        f.apply(&mut settings)
            .with_context(|| format!("{}: [compare]", p.display()))?;
    }
    let mut thresholds = std::collections::BTreeMap::new();
    for t in &a.threshold_for {
        let Some((m, v)) = t.split_once('=') else {
            bail!("--threshold-for {t}: expected METRIC=PERCENT");
        };
        let v: f64 = v
            .trim()
            .parse()
            .with_context(|| format!("--threshold-for {t}: not a number"))?;
        thresholds.insert(m.trim().to_string(), v);
    }
    SettingsFile {
        threshold_percent: a.threshold,
        thresholds_percent: thresholds,
        alpha: a.alpha,
        min_samples: a.min_samples,
        gate: a.gate.clone(),
        resamples: a.resamples,
    }
    .apply(&mut settings)?;

    let engine = a.cache.engine()?;
    let (base_inputs, base_shown) = compare_side(&base, &engine)?;
    let (head_inputs, head_shown) = compare_side(&head, &engine)?;
    let (rerun_inputs, rerun_shown) = compare_side(&a.base_rerun, &engine)?;
    for i in base_inputs.iter().chain(&head_inputs).chain(&rerun_inputs) {
        if let graph::RunInput::Capture(c) = i {
            eprintln!("{}", c.dump_note);
        }
    }
    let with_rerun = !rerun_inputs.is_empty();
    let mut sides = vec![base_inputs, head_inputs];
    if with_rerun {
        sides.push(rerun_inputs);
    }
    let (db, runs) = graph::open_runs(engine, &sides, a.nsys.path.clone())?;
    let (base_run, head_run, rerun) = (runs[0], runs[1], runs.get(2).copied());
    for &run in &runs {
        graph::prepare_archives(&db, run)?;
    }
    // The per-process shares, in parallel, unless they are all stored.
    let needs = compare::needs();
    let mut all_stored = true;
    for &run in &runs {
        all_stored &= graph::shares_stored(&db, run, &needs)?;
    }
    if !all_stored {
        let n = runs.iter().map(|r| r.processes(&db).len()).sum::<usize>() as u64;
        let bar = loading_bar(n);
        let result = runs
            .iter()
            .try_for_each(|&run| graph::prepare_processes(&db, run, &needs, &|| bar.inc(1)));
        bar.finish_and_clear();
        result?;
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
    crate::capture::import_check::warn(&import);
    let report = compare::compare(&db, base_run, head_run, rerun, &settings, sides)?;
    let html = match &a.html.html {
        Some(_) => Some(compare::html::page(&db, &report)?),
        None => None,
    };
    let record = db.ctx.engine.finish();
    crate::tmpfiles::write_atomic(
        &a.output.join("compare.json"),
        &serde_json::to_vec_pretty(&report)?,
    )?;
    let mut md = String::new();
    for d in &import {
        md.push_str(&format!("> **Warning:** {}\n\n", d.warning()));
    }
    md.push_str(&compare::report::markdown(&report));
    crate::tmpfiles::write_atomic(&a.output.join("compare.md"), md.as_bytes())?;
    if let (Some(path), Some(page)) = (&a.html.html, &html) {
        crate::tmpfiles::write_atomic(path, &page.0)?;
    }
    crate::tmpfiles::write_atomic(
        &a.output.join("pipeline-run.json"),
        &serde_json::to_vec_pretty(&record)?,
    )?;
    let mut stdout = std::io::stdout().lock();
    if a.quiet.quiet {
        writeln!(stdout, "{}", compare::report::headline(&report))?;
    } else {
        write!(stdout, "{}", compare::report::terminal(&report))?;
    }
    drop(stdout);
    // The import warnings were said first, before the comparison.
    finish(
        &[],
        true,
        a.explain.explain,
        &record,
        &[],
        &format!("wrote {} ({})", a.output.display(), graph_work(&record)),
    )?;
    Ok(report.exit_code)
}
