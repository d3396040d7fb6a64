//! Each command's arguments turned into its request, the command run, its result printed.

use super::args::{
    AnalyzeArgs, ArchiveArgs, CombineArgs, CompareArgs, HistoryArgs, RunArgs, WhatIfArgs,
};
use super::output::{columns, finish, fitted};
use super::terminal::Terminal;
use crate::commands::{self, analyze::AnalyzeRequest};
use anyhow::{Context, Result, bail};
use std::io::Write;

/// The report's file name in an output folder.
const REPORT_PAGE: &str = "report.html";

/// The analyses `--analysis`/`--pipeline` ask for, as (name, arguments) in order.

pub(super) fn analyze(a: AnalyzeArgs) -> Result<i32> {
    let analyses = if a.no_analysis {
        if a.frames.is_none() && a.html.path(None).is_none() && a.label.is_none() {
            bail!("--no-analysis leaves nothing to do: add --frames DIR, --html FILE or --label");
        }
        vec![]
    } else {
        a.analyses.requests(true)?
    };
    if let Some(l) = &a.label {
        commands::labels::check(l)?;
        if a.cache.no_cache {
            bail!("--label records the run in the cache: it cannot go with --no-cache");
        }
    }
    let req = AnalyzeRequest {
        inputs: a.inputs.clone(),
        capture: a.capture.options(),
        analyses,
        output: (!a.no_analysis).then(|| a.output.clone()),
        html: a
            .html
            .path((!a.no_analysis).then(|| a.output.join(REPORT_PAGE))),
        frames: a.frames.clone(),
        label: a.label.clone(),
        cache_dir: a.cache.dir(),
    };
    if a.watch {
        commands::watch::check(&req)?;
    }
    let engine = a.cache.engine()?;
    let (quiet, explain) = (a.quiet.quiet, a.explain.explain);
    if a.watch {
        commands::watch::watch(engine, &req, &Terminal, &mut |u| match u.done {
            Ok(done) => finish(
                &done.texts,
                quiet,
                explain,
                &done.record,
                &[],
                &format!(
                    "update {}: {} · {}",
                    u.number,
                    crate::table::count(u.inputs, "input", "inputs"),
                    done.summary()
                ),
            ),
            Err(e) => {
                eprintln!(
                    "nsys-jax-pipe: error: update {}: {}; waiting for changes",
                    u.number,
                    crate::error::one_line(&e)
                );
                Ok(())
            }
        })?;
        return Ok(0);
    }
    analyze_once(engine, &req, quiet, explain)
}

/// One analysis of `req`'s inputs, printed (`analyze` without `--watch`, and `what-if`).
fn analyze_once(
    engine: crate::engine::Engine,
    req: &AnalyzeRequest,
    quiet: bool,
    explain: bool,
) -> Result<i32> {
    let done = commands::analyze::analyze(engine, req, &Terminal)?;
    finish(
        &done.texts,
        quiet,
        explain,
        &done.record,
        &[],
        &done.summary(),
    )?;
    Ok(0)
}

pub(super) fn what_if(a: WhatIfArgs) -> Result<i32> {
    use crate::analyses::{Analysis, whatif::WhatIfAnalysis, whatif_user::UserScenario};
    for s in &a.scenarios {
        UserScenario::parse(s).map_err(|e| anyhow::anyhow!("--scenario: {e}"))?;
        if s.contains(';') {
            bail!("--scenario {s}: one scenario per --scenario (no `;`)");
        }
    }
    let args = if a.scenarios.is_empty() {
        vec![]
    } else {
        vec![format!("scenario={}", a.scenarios.join(";"))]
    };
    let req = AnalyzeRequest {
        inputs: a.inputs.clone(),
        capture: a.capture.options(),
        analyses: vec![commands::pipeline::AnalysisRequest::from_command_line(
            WhatIfAnalysis::NAME,
            args,
        )?],
        output: Some(a.output.clone()),
        html: a.html.path(Some(a.output.join(REPORT_PAGE))),
        frames: None,
        label: None,
        cache_dir: a.cache.dir(),
    };
    analyze_once(a.cache.engine()?, &req, a.quiet.quiet, a.explain.explain)
}

pub(super) fn archive(a: ArchiveArgs) -> Result<i32> {
    let req = commands::archive::ArchiveRequest {
        report: a.report.clone(),
        output: a.output.clone(),
        force: a.force,
        capture: a.capture.options(),
        analyses: a.analyses.requests(false)?,
        html: a.html.html.clone(),
    };
    let engine = a.cache.engine()?;
    let done = commands::archive::archive(engine, &req, &Terminal)?;
    finish(
        &done.written.texts,
        a.quiet.quiet,
        a.explain.explain,
        &done.record,
        done.written.import.as_slice(),
        &format!(
            "wrote {} ({}; {}){}",
            done.output.display(),
            crate::table::count(done.written.members, "member", "members"),
            commands::graph_work(&done.record),
            done.written.shared_note()
        ),
    )?;
    Ok(0)
}

pub(super) fn run(a: RunArgs) -> Result<i32> {
    let req = commands::run::RunRequest {
        program: a.program.clone(),
        nsys_args: {
            let mut n = a.nsys_args.clone();
            if a.memory && !n.iter().any(|t| t.starts_with("--cuda-memory-usage")) {
                n.push("--cuda-memory-usage=true".into());
            }
            n
        },
        nvtx_workaround: !a.no_nvtx_workaround,
        output: a.output.clone(),
        force: a.force,
        condition: a.condition.clone(),
        analyses: if a.no_analysis {
            vec![]
        } else {
            a.analyses.requests(!a.nsys_jax)?
        },
        label: a.label.clone(),
        cache_url: a.cache_url.cache_url.clone(),
        html: a.html.html.clone(),
        nsys: a.nsys.path.clone(),
    };
    let ran = commands::run::run(&req, &Terminal)?;
    if let Some(done) = &ran.archive {
        finish(
            &done.written.texts,
            a.quiet.quiet,
            a.explain.explain,
            &done.record,
            done.written.import.as_slice(),
            &done.summary(),
        )?;
    }
    Ok(ran.exit_code)
}

pub(super) fn combine(a: CombineArgs) -> Result<i32> {
    let req = commands::combine::CombineRequest {
        inputs: a.inputs.clone(),
        output: a.output.clone(),
        force: a.force,
        keep_reports: a.keep_nsys_rep,
        capture: a.capture.options(),
        analyses: a.analyses.requests(false)?,
        html: a.html.html.clone(),
    };
    let engine = a.cache.engine()?;
    let done = commands::combine::combine(engine, &req, &Terminal)?;
    finish(
        &done.texts,
        a.quiet.quiet,
        a.explain.explain,
        &done.record,
        &[],
        &done.summary(),
    )?;
    Ok(0)
}

pub(super) fn compare(a: CompareArgs) -> Result<i32> {
    use crate::compare::{Settings, SettingsFile};
    let (base, head) = match (a.sides.len(), a.base.is_empty(), a.head.is_empty()) {
        (2, true, true) => (vec![a.sides[0].clone()], vec![a.sides[1].clone()]),
        (0, false, false) => (a.base.clone(), a.head.clone()),
        _ => bail!(
            "give BASE and HEAD, or --base and --head (each repeatable for runs of several processes)"
        ),
    };
    let mut settings = Settings::default();
    if let Some(p) = &a.pipeline.pipeline
        && let Some(f) = commands::pipeline::compare_settings(p)?
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
    let req = commands::compare::CompareRequest {
        base,
        head,
        base_rerun: a.base_rerun.clone(),
        settings,
        output: a.output.clone(),
        html: a.html.path(Some(a.output.join(REPORT_PAGE))),
        nsys: a.nsys.path.clone(),
    };
    let engine = a.cache.engine()?;
    let done = commands::compare::compare(engine, &req, &Terminal)?;
    let mut stdout = std::io::stdout().lock();
    if a.quiet.quiet {
        writeln!(
            stdout,
            "{}",
            fitted(&crate::compare::report::headline(&done.report))
        )?;
    } else {
        let text = crate::compare::report::terminal(&done.report, columns());
        write!(stdout, "{}", fitted(&text))?;
    }
    drop(stdout);
    // The import warnings were said first, before the comparison.
    finish(
        &[],
        true,
        a.explain.explain,
        &done.record,
        &[],
        &done.summary(),
    )?;
    Ok(done.report.exit_code)
}

pub(super) fn history(a: HistoryArgs) -> Result<i32> {
    let mut params = crate::stats::changepoint::Params::default();
    if let Some(p) = a.max_p {
        if !(p > 0.0 && p < 1.0) {
            bail!("--max-p must be between 0 and 1 (got {p})");
        }
        params.max_p = p;
    }
    if let Some(c) = a.min_change {
        if !(c.is_finite() && c >= 0.0) {
            bail!("--min-change is a percentage >= 0 (got {c})");
        }
        params.min_change = c / 100.0;
    }
    if let Some(n) = a.min_size {
        if n < 2 {
            bail!("--min-size must be at least 2 (got {n})");
        }
        params.min_size = n;
    }
    if let Some(e) = a.min_effect {
        if !(e.is_finite() && e >= 0.0) {
            bail!("--min-effect must be a number >= 0 (got {e})");
        }
        params.min_effect = e;
    }
    if a.labels.is_empty() && a.label_prefix.is_none() {
        bail!("give the runs' labels, or --label-prefix PREFIX");
    }
    let req = commands::history::HistoryRequest {
        labels: a.labels.clone(),
        prefix: a.label_prefix.clone(),
        metrics: a.metrics.clone(),
        params,
        output: a.output.clone(),
        html: a.html.path(Some(a.output.join(REPORT_PAGE))),
        nsys: a.nsys.path.clone(),
    };
    let engine = a.cache.engine()?;
    let done = commands::history::history(engine, &req, &Terminal)?;
    let text = crate::compare::history::render::terminal(&done.history);
    let mut stdout = std::io::stdout().lock();
    if a.quiet.quiet {
        writeln!(stdout, "{}", fitted(text.lines().next().unwrap_or("")))?;
    } else {
        write!(stdout, "{}", fitted(&text))?;
    }
    drop(stdout);
    crate::tmpfiles::write_atomic(
        &done.output.join("pipeline-run.json"),
        &serde_json::to_vec_pretty(&done.record)?,
    )?;
    finish(
        &[],
        true,
        a.explain.explain,
        &done.record,
        &[],
        &done.summary(),
    )?;
    Ok(0)
}
