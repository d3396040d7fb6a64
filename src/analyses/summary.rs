//! `summary`: GPU time per XLA module in steady state, wait time in collectives across
//! devices, and compile time per range (docs/design.md, "Formulas").
//!
//! Output contract (`summary.json`):
//! `{"modules":[{program_id, name, executions, thunks_mean, thunks_std, duration_ms_sum,
//! duration_ms_mean, duration_ms_std, duration_percent, wait_ms_mean, wait_ms_std,
//! wait_percent}], "compilation":{total_ms, ranges:[{name, non_child_ms, child_ms, percent}],
//! high_level:[{name, non_child_ms, percent}], passes:[{name, non_child_ms, percent}]}}`

use crate::analyses::range_sums::{CompilationTables, RangeSums, RangeSumsShare, reduce_summary};
use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::frames::views::{ModuleView, ThunkView};
use crate::frames::warmup::Steady;
use crate::report::{Cell, HtmlTable, Section};
use crate::stats::{group_by, mean, std};
use crate::table::Table;
use crate::units::{duration_ms, fit, ms_pm, pct, percent, sig3};
use anyhow::Result;
use arrow::array::RecordBatch;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleRow {
    pub program_id: String,
    pub name: String,
    pub executions: u64,
    pub thunks_mean: f64,
    pub thunks_std: Option<f64>,
    pub duration_ms_sum: f64,
    pub duration_ms_mean: f64,
    pub duration_ms_std: Option<f64>,
    pub duration_percent: f64,
    pub wait_ms_mean: Option<f64>,
    pub wait_ms_std: Option<f64>,
    pub wait_percent: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Summary {
    pub modules: Vec<ModuleRow>,
    pub compilation: CompilationTables,
    /// Per process with a steady state: when it ran (what happened on the host then, a
    /// compilation say, cost the steady state).
    #[serde(default)]
    pub steady: Vec<SteadyWindow>,
}

/// A process's steady state: from the start of its first steady module execution to the end
/// of its last, on the profile's clock [ms].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SteadyWindow {
    pub process: String,
    pub start_ms: f64,
    pub end_ms: f64,
}

impl crate::engine::value::JsonValue for Summary {}

/// One process's share of the summary (the map step; [`module_rows`] is the reduce): the
/// samples of every module and the duration spread of every collective instance on its
/// devices. Reducing the shares of all processes in process order gives exactly the numbers
/// of the whole run's frames.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SummaryPartial {
    /// Per program (in id order): its name and the durations [ns] and thunk counts of its
    /// steady executions, in row order.
    pub modules: Vec<ModuleSamples>,
    /// Per collective instance: the shortest and longest exposed duration over this
    /// process's devices; None when the process has no communication.
    pub instances: Option<Vec<InstanceSpread>>,
    /// Remarks, prefixed with the process.
    pub notes: Vec<String>,
    #[serde(default)]
    pub window: Option<SteadyWindow>,
}

impl crate::engine::value::JsonValue for SummaryPartial {}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleSamples {
    pub program_id: String,
    pub name: String,
    pub durations_ns: Vec<i64>,
    pub thunks: Vec<i32>,
}

/// A collective instance: (program, execution, thunk name, thunk execution), with its
/// shortest and longest exposed duration [ns].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct InstanceSpread {
    pub program_id: String,
    pub execution: i32,
    pub thunk: String,
    pub thunk_execution: i32,
    pub min_ns: i64,
    pub max_ns: i64,
}

/// The map step: one process's steady-state frames → its [`SummaryPartial`].
pub fn partial(steady: &Steady) -> SummaryPartial {
    let m = ModuleView::of(&steady.module);
    let prog = &m.program_id;
    let name = m.program_name;
    let thunks = m.num_thunks;
    let dur = m.dur;
    let start = m.start;
    let first = start.values().iter().min();
    let last = (0..m.rows).map(|i| start.value(i) + dur.value(i)).max();
    let window = first.zip(last).map(|(&a, b)| SteadyWindow {
        process: String::new(),
        start_ms: a as f64 * 1e-6,
        end_ms: b as f64 * 1e-6,
    });
    let modules = group_by(m.rows, |i| prog.value(i))
        .into_iter()
        .map(|(p, idx)| ModuleSamples {
            program_id: p.to_string(),
            name: name.value(idx[0]).to_string(),
            durations_ns: idx.iter().map(|&i| dur.value(i)).collect(),
            thunks: idx.iter().map(|&i| thunks.value(i)).collect(),
        })
        .collect();
    SummaryPartial {
        modules,
        instances: instance_spreads(&steady.communication),
        notes: steady.notes.clone(),
        window,
    }
}

/// The reduce step: per-module statistics over the steady-state executions of every process.
pub fn module_rows(partials: &[SummaryPartial]) -> Vec<ModuleRow> {
    let mut samples: BTreeMap<&str, (&str, Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for part in partials {
        for m in &part.modules {
            let e = samples
                .entry(m.program_id.as_str())
                .or_insert_with(|| (m.name.as_str(), Vec::new(), Vec::new()));
            e.1.extend(m.durations_ns.iter().map(|&d| d as f64 * 1e-6));
            e.2.extend(m.thunks.iter().map(|&t| t as f64));
        }
    }
    let waits = wait_times(partials);
    let mut rows: Vec<ModuleRow> = samples
        .into_iter()
        .map(|(p, (name, d, th))| {
            let dm = mean(&d).unwrap_or(0.0);
            let w = waits
                .as_ref()
                .map(|w| w.get(p).cloned().unwrap_or_default());
            let (wm, ws) = match &w {
                Some(w) => (mean(w), std(w)),
                None => (None, None),
            };
            ModuleRow {
                program_id: p.to_string(),
                name: name.to_string(),
                executions: d.len() as u64,
                thunks_mean: mean(&th).unwrap_or(0.0),
                thunks_std: std(&th),
                duration_ms_sum: d.iter().sum(),
                duration_ms_mean: dm,
                duration_ms_std: std(&d),
                duration_percent: 0.0,
                wait_ms_mean: wm,
                wait_ms_std: ws,
                wait_percent: wm.map(|w| 100.0 * w / dm),
            }
        })
        .collect();
    let total: f64 = rows.iter().map(|r| r.duration_ms_sum).sum();
    for r in &mut rows {
        r.duration_percent = if total > 0.0 {
            100.0 * r.duration_ms_sum / total
        } else {
            0.0
        };
    }
    rows.sort_by(|a, b| {
        b.duration_ms_sum
            .total_cmp(&a.duration_ms_sum)
            .then_with(|| a.program_id.cmp(&b.program_id))
    });
    rows
}

/// The duration spread of every collective instance (program, execution, thunk name, thunk
/// execution) over one process's devices. None without communication.
fn instance_spreads(comm: &RecordBatch) -> Option<Vec<InstanceSpread>> {
    if comm.num_rows() == 0 {
        return None;
    }
    let c = ThunkView::of(comm);
    let (prog, exec, name, texec, dur) = (
        &c.program_id,
        c.program_execution,
        &c.name,
        c.thunk_execution,
        c.dur,
    );
    Some(
        group_by(comm.num_rows(), |i| {
            (prog.value(i), exec.value(i), name.value(i), texec.value(i))
        })
        .into_iter()
        .map(|((p, e, n, t), idx)| InstanceSpread {
            program_id: p.to_string(),
            execution: e,
            thunk: n.to_string(),
            thunk_execution: t,
            min_ns: idx.iter().map(|&i| dur.value(i)).min().unwrap(),
            max_ns: idx.iter().map(|&i| dur.value(i)).max().unwrap(),
        })
        .collect(),
    )
}

/// Wait time per module execution: for each collective instance, the spread (max − min) of
/// its exposed duration across the devices of every process, summed over the module
/// execution. None when no process has communication.
pub fn wait_times<'a>(
    partials: impl IntoIterator<Item = &'a SummaryPartial>,
) -> Option<BTreeMap<String, Vec<f64>>> {
    let mut spread: BTreeMap<(&str, i32, &str, i32), (i64, i64)> = BTreeMap::new();
    let mut any = false;
    for part in partials {
        let Some(instances) = &part.instances else {
            continue;
        };
        any = true;
        for x in instances {
            let e = spread
                .entry((&x.program_id, x.execution, &x.thunk, x.thunk_execution))
                .or_insert((x.min_ns, x.max_ns));
            e.0 = e.0.min(x.min_ns);
            e.1 = e.1.max(x.max_ns);
        }
    }
    if !any {
        return None;
    }
    let mut per_exec: BTreeMap<(&str, i32), f64> = BTreeMap::new();
    for ((p, e, _, _), (lo, hi)) in spread {
        *per_exec.entry((p, e)).or_default() += (hi - lo) as f64 * 1e-6;
    }
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for ((p, _), w) in per_exec {
        out.entry(p.to_string()).or_default().push(w);
    }
    Some(out)
}

/// What the terminal rendering says when there is no module execution.
pub const NO_MODULES: &str =
    "No GPU module executions in the profile (NVTX-only capture?): no module table.";

/// What it says instead when Nsight Systems could not import the capture's GPU work.
pub const NO_MODULES_IMPORT: &str = "No GPU module executions in the profile: Nsight Systems could not import the capture's GPU work (see the warning); no module table.";

/// Rows of each compile-time table the terminal shows.
const TOP_ROWS: usize = 10;

/// What the module table's columns mean (printed under it).
pub const MODULE_COLUMNS: &str = "\
execs: steady-state executions, summed over devices. duration: mean ± std of one execution;
[%]: of the time in all modules. wait: per execution, the sum over its collectives of the
spread (longest − shortest) of their exposed time across devices, as nsys-jax's summary
computes it; wait% = wait ÷ duration, so above 100 when devices differ by more than the
module's own time (a straggler). The stragglers analysis measures waiting from arrival times.";

/// The terminal rendering.
pub fn render(s: &Summary) -> String {
    let mut out = String::new();
    if s.modules.is_empty() {
        out.push_str(NO_MODULES);
        out.push('\n');
    } else {
        let have_wait = s.modules.iter().any(|m| m.wait_ms_mean.is_some());
        let mut header = vec!["program", "name", "execs", "thunks", "duration", "[%]"];
        if have_wait {
            header.extend(["wait", "wait%"]);
        }
        let mut t = Table::new(&header);
        t.align_right(&[2, 3, 4, 5, 6, 7][..header.len() - 2]);
        for m in &s.modules {
            let mut row = vec![
                crate::frames::program_ids::tiny_id(&m.program_id),
                fit(&m.name, 22),
                m.executions.to_string(),
                sig3(m.thunks_mean),
                ms_pm(m.duration_ms_mean, m.duration_ms_std),
                pct(m.duration_percent),
            ];
            if have_wait {
                row.push(match m.wait_ms_mean {
                    Some(w) => ms_pm(w, m.wait_ms_std),
                    None => "—".into(),
                });
                row.push(m.wait_percent.map(pct).unwrap_or_else(|| "—".into()));
            }
            t.row(row);
        }
        out.push_str("== Module execution summary (steady state) ==\n");
        out.push_str(&t.render());
        out.push_str(MODULE_COLUMNS);
        out.push('\n');
    }
    let c = &s.compilation;
    if c.ranges.is_empty() {
        out.push_str("\nNo compilation in the profile.\n");
    } else {
        out.push_str(&format!(
            "\n== Compilation: {} in total ==\n",
            duration_ms(c.total_ms)
        ));
        let top = |title: &str, share: &str, rows: Vec<(String, f64, f64)>| {
            let mut t = Table::new(&[title, "self time", share]);
            t.align_right(&[1, 2]);
            for (name, ms, percent) in rows.iter().take(TOP_ROWS) {
                t.row(vec![fit(name, 64), duration_ms(*ms), pct(*percent)]);
            }
            let mut text = t.render();
            if rows.len() > TOP_ROWS {
                text.push_str(&format!("… and {} more\n", rows.len() - TOP_ROWS));
            }
            text
        };
        let label = crate::analyses::range_sums::range_label;
        out.push_str(&top(
            "top ranges",
            "[%]",
            c.ranges
                .iter()
                .map(|r| (label(&r.name), r.non_child_ms, r.percent))
                .collect(),
        ));
        out.push('\n');
        out.push_str(&top(
            "by stage (passes together)",
            "[%]",
            c.high_level
                .iter()
                .map(|r| (label(&r.name), r.non_child_ms, r.percent))
                .collect(),
        ));
        if !c.passes.is_empty() {
            out.push('\n');
            out.push_str(&top(
                "XLA passes (over all programs)",
                "% of passes",
                crate::analyses::range_sums::passes_by_name(&c.passes),
            ));
        }
    }
    out
}

// ---------------------------------------------------------------- the analysis

/// `summary`'s share: [`partial`] of one process, with the remarks made building its frames.
pub struct SummaryShare;

impl Share for SummaryShare {
    const KIND: &'static str = "summary-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = SummaryPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<SummaryPartial> {
        let Some(steady) = p.steady else {
            return Ok(SummaryPartial {
                notes: vec![format!(
                    "{}: no GPU projection (an NVTX-only capture?): no GPU tables, compile-time results only",
                    p.label
                )],
                ..Default::default()
            });
        };
        let mut part = partial(steady);
        if let Some(w) = &mut part.window {
            w.process = p.label.to_string();
        }
        let mut notes = p.frame_notes.to_vec();
        notes.append(&mut part.notes);
        part.notes = notes;
        Ok(part)
    }
}

/// The `summary` analysis.
pub struct SummaryAnalysis;

impl Analysis for SummaryAnalysis {
    const NAME: &'static str = "summary";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Summary;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![
            ShareUse::of(&SummaryShare, &()),
            ShareUse::of(&RangeSumsShare, &()),
        ]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Summary>> {
        let partials: Vec<SummaryPartial> = run.values(&SummaryShare, &())?;
        let compile: Vec<RangeSums> = run
            .sums(&RangeSumsShare)?
            .iter()
            .map(|s| s.as_ref().clone())
            .collect();
        Ok(Reduced {
            notes: partials.iter().flat_map(|p| p.notes.clone()).collect(),
            result: Summary {
                modules: module_rows(&partials),
                compilation: reduce_summary(&compile),
                steady: partials.iter().filter_map(|p| p.window.clone()).collect(),
            },
        })
    }

    fn render(&self, s: &Summary) -> String {
        render(s)
    }

    fn sections(&self, s: &Summary) -> Result<Vec<Section>> {
        Ok(vec![modules_section(s)])
    }
}

/// The report's module table: every module's steady-state time, sortable.
fn modules_section(s: &Summary) -> Section {
    let mut sec = Section::new("modules", "XLA modules");
    if s.modules.is_empty() {
        sec.para(NO_MODULES);
        return sec;
    }
    sec.para(
        "Steady state (the first execution of each module left out). Duration: mean ± standard \
         deviation of one execution; share: of the time in all modules. Wait: time in \
         collectives spent waiting for the other devices, per execution. Click a header to sort.",
    );
    let ms_pm = |m: f64, s: Option<f64>| match s {
        Some(s) if s > 0.0 => format!("{} ± {}", duration_ms(m), duration_ms(s)),
        _ => duration_ms(m),
    };
    let mut t = HtmlTable::new(&[
        "module",
        "program",
        "executions",
        "thunks",
        "duration",
        "total",
        "share",
        "wait",
        "wait share",
    ])
    .limit(200, Some("summary.json"));
    for m in &s.modules {
        t.row(vec![
            Cell::text(&m.name),
            Cell::text(crate::frames::program_ids::short_id(&m.program_id)),
            Cell::count(m.executions),
            Cell::num(sig3(m.thunks_mean), m.thunks_mean),
            Cell::num(
                ms_pm(m.duration_ms_mean, m.duration_ms_std),
                m.duration_ms_mean,
            ),
            Cell::ms(m.duration_ms_sum),
            Cell::num(percent(m.duration_percent / 100.0), m.duration_percent),
            Cell::opt(m.wait_ms_mean, |w| ms_pm(w, m.wait_ms_std)),
            Cell::opt(m.wait_percent, |w| percent(w / 100.0)),
        ]);
    }
    sec.table(&t);
    sec
}
