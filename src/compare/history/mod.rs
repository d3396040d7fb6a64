//! `history`: labelled runs in the cache, in the order they were recorded, as one series per
//! metric (module step time, time waiting in collectives, compile time, collective bandwidth,
//! MFU), each point with its samples; change points found with E-Divisive means and Welch's
//! t-test (`stats::changepoint`; docs/compare.md, "History"), each with the commits on either
//! side and `compare`'s explanation of the runs across it. Only the runs' stored per-process
//! shares are read: a history of cached runs re-analyses nothing.

pub mod points;
pub mod record;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, bail};

use crate::compare::explain::ModuleWhy;
use crate::graph::{Db, Run};
use crate::stats::changepoint::{self, ChangePoint, Params, Recent};
use crate::stats::quantile_sorted;
use points::PointData;
pub use record::{Change, History, MetricSeries, Point, Possible, RunInfo};

/// Ops of the explanation kept per change point.
const OPS: usize = 5;

fn point_of(run: usize, samples: &[f64]) -> Point {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    Point {
        run,
        median: quantile_sorted(&s, 0.5),
        q1: quantile_sorted(&s, 0.25),
        q3: quantile_sorted(&s, 0.75),
        samples: samples.to_vec(),
    }
}

/// Whether metric `m` is among those asked for.
fn wanted(m: &str, asked: &[String]) -> bool {
    asked.is_empty() || asked.iter().any(|a| a == m || a == points::family(m))
}

/// Runs whose modules share nothing with the modules most runs execute: not the same program.
fn strangers(labels: &[String], data: &[PointData]) -> Vec<String> {
    let mut count: BTreeMap<&String, usize> = BTreeMap::new();
    for d in data {
        for m in &d.modules {
            *count.entry(m).or_default() += 1;
        }
    }
    let common: BTreeSet<&String> = count
        .iter()
        .filter(|(_, n)| **n * 2 > data.len())
        .map(|(m, _)| *m)
        .collect();
    if common.is_empty() {
        return Vec::new();
    }
    labels
        .iter()
        .zip(data)
        .filter(|(_, d)| !d.modules.is_empty() && d.modules.iter().all(|m| !common.contains(m)))
        .map(|(l, _)| l.clone())
        .collect()
}

/// The series and change points of the runs' measurements.
pub fn series(
    labels: &[String],
    data: &[PointData],
    asked: &[String],
    params: &Params,
) -> Vec<MetricSeries> {
    let metrics: BTreeSet<&String> = data.iter().flat_map(|d| d.samples.keys()).collect();
    let mut out = Vec::new();
    for m in metrics.into_iter().filter(|m| wanted(m, asked)) {
        let fam = points::family(m);
        let pts: Vec<Point> = data
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.samples.get(m).map(|s| point_of(i, s)))
            .collect();
        let mut note = None;
        let least = params.min_size.max(2).saturating_mul(2);
        let values: Vec<f64> = pts.iter().map(|p| p.median).collect();
        let mut found = if pts.len() < least {
            note = Some(format!(
                "{}: too few for change points (at least {least}: --min-size on each side; \
                 a step in the newest runs is looked for from {} on)",
                crate::table::count(pts.len(), "point", "points"),
                params.min_size.max(2) + 1
            ));
            Vec::new()
        } else {
            changepoint::change_points(&values, params)
        };
        let cuts: Vec<usize> = found.iter().map(|c| c.index).collect();
        let mut possible = None;
        match changepoint::recent(&values, &cuts, params) {
            Some(Recent::Confirmed(c)) => {
                // The search's own cut within `min_size` of this one is this step, placed
                // where the search could place it.
                let near = params.min_size.max(2);
                found.retain(|f| f.index + near <= c.index);
                found.push(c)
            }
            Some(Recent::Possible { point, more }) => possible = Some((point, more)),
            None => {}
        }
        let change = |c: ChangePoint| {
            let (b, a) = (pts[c.index - 1].run, pts[c.index].run);
            let up = c.mean_after > c.mean_before;
            let worse = up != points::higher_is_better(fam);
            Change {
                before: labels[b].clone(),
                after: labels[a].clone(),
                commit_before: data[b].commit.clone(),
                commit_after: data[a].commit.clone(),
                regression: worse,
                at: ChangePoint { index: a, ..c },
                ops: Vec::new(),
                hlo: None,
            }
        };
        let changes: Vec<Change> = found.into_iter().map(change).collect();
        let possible = possible.map(|(c, more)| Possible {
            change: change(c),
            more,
        });
        out.push(MetricSeries {
            metric: m.clone(),
            unit: points::unit(fam).to_string(),
            higher_is_better: points::higher_is_better(fam),
            points: pts,
            changes,
            possible,
            note,
        });
    }
    out
}

/// `compare`'s explanation of a module's change between two runs.
fn explain_change(
    db: &Db,
    runs: &[Run],
    labels: &[String],
    c: &mut Change,
    module: &str,
) -> Result<()> {
    // The run before is the series' previous point (a run without the metric is skipped).
    let before = labels
        .iter()
        .position(|l| *l == c.before)
        .unwrap_or(c.at.index - 1);
    let (b, a) = (runs[before], runs[c.at.index]);
    let (out, _) = crate::compare::families_of(db, b, a)?;
    let s = crate::compare::Settings::default();
    let why = crate::compare::explain::explain(db, b, a, &out, &s)?;
    // The explanation keys by the module's change at the two runs; a step that the module
    // level of the two runs alone does not show still gets its HLO diff when recompiled.
    if let Some(m) = why.modules.iter().find(|m: &&ModuleWhy| m.module == module) {
        c.ops = m.ops.iter().take(OPS).cloned().collect();
        c.hlo = m.hlo.as_ref().map(|h| h.line());
    }
    Ok(())
}

/// The history of `runs` (labelled `labels`, in order): one series per metric asked for
/// (all when `metrics` is empty), change points explained by `compare`.
pub fn build(
    db: &Db,
    runs: &[Run],
    labels: &[String],
    asked: &[String],
    params: &Params,
) -> Result<History> {
    let data: Vec<PointData> = runs
        .iter()
        .map(|&r| points::point(db, r))
        .collect::<Result<_>>()?;
    let odd = strangers(labels, &data);
    if !odd.is_empty() {
        bail!(
            "{}: no XLA module in common with most of the other runs (runs of different programs cannot make one history)",
            odd.join(", ")
        );
    }
    let mut notes = Vec::new();
    let least = params.min_size.max(2).saturating_mul(2);
    if labels.len() < least {
        notes.push(format!(
            "{}: change points need at least {least} (--min-size on each side)",
            crate::table::count(labels.len(), "run", "runs")
        ));
    }
    let mut metrics = series(labels, &data, asked, params);
    if metrics.is_empty() {
        bail!(
            "the runs have none of the metrics asked for ({})",
            asked.join(", ")
        );
    }
    for m in &mut metrics {
        if let Some(module) = m.metric.strip_prefix("module:").map(str::to_string) {
            for c in &mut m.changes {
                explain_change(db, runs, labels, c, &module)?;
            }
        }
    }
    Ok(History {
        runs: labels
            .iter()
            .zip(&data)
            .map(|(l, d)| RunInfo {
                label: l.clone(),
                commit: d.commit.clone(),
                started_unix_s: d.started_unix_s,
            })
            .collect(),
        params: params.clone(),
        metrics,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(values: &[f64], module: &str) -> PointData {
        PointData {
            samples: [(format!("module:{module}"), values.to_vec())].into(),
            modules: [module.to_string()].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_step_is_named_by_its_runs() {
        let labels: Vec<String> = (0..12).map(|i| format!("c{i:02}")).collect();
        let d: Vec<PointData> = (0..12)
            .map(|i| {
                let level = if i < 6 { 1.0 } else { 1.1 };
                let wobble = 0.002 * ((i * 7 % 5) as f64 - 2.0);
                data(&[level + wobble, level + wobble + 0.001], "jit_step")
            })
            .collect();
        let s = series(&labels, &d, &[], &Params::default());
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].changes.len(), 1, "{:?}", s[0].changes);
        let c = &s[0].changes[0];
        assert_eq!((c.before.as_str(), c.after.as_str()), ("c05", "c06"));
        assert!(c.regression);
        // Filtered out by the metric asked for.
        assert!(series(&labels, &d, &["compile".into()], &Params::default()).is_empty());
    }

    #[test]
    fn runs_of_another_program_are_named() {
        let labels: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let d = vec![
            data(&[1.0], "jit_step"),
            data(&[1.0], "jit_step"),
            data(&[1.0], "jit_other"),
        ];
        assert_eq!(strangers(&labels, &d), vec!["c".to_string()]);
        let few = series(&labels[..2], &d[..2], &[], &Params::default());
        assert!(few[0].note.as_deref().unwrap().contains("too few"));
    }
}
