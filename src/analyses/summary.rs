//! `summary`: GPU time per XLA module in steady state, wait time in collectives across
//! devices, and compile time per range (DESIGN §8.6).
//!
//! Output contract (`summary.json`):
//! `{"modules":[{program_id, name, executions, thunks_mean, thunks_std, duration_ms_sum,
//! duration_ms_mean, duration_ms_std, duration_percent, wait_ms_mean, wait_ms_std,
//! wait_percent}], "compilation":{total_ms, ranges:[{name, non_child_ms, child_ms, percent}],
//! high_level:[{name, non_child_ms, percent}], passes:[{name, non_child_ms, percent}]}}`

use crate::analyses::compilation::CompilationTables;
use crate::frames::gpu::{
    NAME, NUM_THUNKS, PROGRAM_EXECUTION, PROGRAM_ID, PROGRAM_NAME, PROJ_DUR, THUNK_EXECUTION,
};
use crate::frames::warmup::Steady;
use crate::stats::{group_by, mean, std};
use crate::table::{Table, mean_std, round_sig};
use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Int32Type, Int64Type};
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
}

impl crate::engine::value::JsonValue for Summary {}

/// Per-module statistics over steady-state executions.
pub fn module_rows(steady: &Steady) -> Vec<ModuleRow> {
    let m = &steady.module;
    let prog = m.column_by_name(PROGRAM_ID).unwrap().as_string::<i32>();
    let name = m.column_by_name(PROGRAM_NAME).unwrap().as_string::<i32>();
    let thunks = m
        .column_by_name(NUM_THUNKS)
        .unwrap()
        .as_primitive::<Int32Type>();
    let dur = m
        .column_by_name(PROJ_DUR)
        .unwrap()
        .as_primitive::<Int64Type>();
    let waits = wait_times(&steady.communication);
    let mut rows: Vec<ModuleRow> = group_by(m.num_rows(), |i| prog.value(i))
        .into_iter()
        .map(|(p, idx)| {
            let th: Vec<f64> = idx.iter().map(|&i| thunks.value(i) as f64).collect();
            let d: Vec<f64> = idx.iter().map(|&i| dur.value(i) as f64 * 1e-6).collect();
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
                name: name.value(idx[0]).to_string(),
                executions: idx.len() as u64,
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

/// Wait time per module execution: for each collective instance (program, execution, thunk
/// name, thunk execution), the spread (max − min) of its exposed duration across devices,
/// summed over the module execution. None when the profile has no communication.
fn wait_times(comm: &RecordBatch) -> Option<BTreeMap<String, Vec<f64>>> {
    if comm.num_rows() == 0 {
        return None;
    }
    let prog = comm.column_by_name(PROGRAM_ID).unwrap().as_string::<i32>();
    let exec = comm
        .column_by_name(PROGRAM_EXECUTION)
        .unwrap()
        .as_primitive::<Int32Type>();
    let name = comm.column_by_name(NAME).unwrap().as_string::<i32>();
    let texec = comm
        .column_by_name(THUNK_EXECUTION)
        .unwrap()
        .as_primitive::<Int32Type>();
    let dur = comm
        .column_by_name(PROJ_DUR)
        .unwrap()
        .as_primitive::<Int64Type>();
    let mut per_exec: BTreeMap<(&str, i32), f64> = BTreeMap::new();
    for ((p, e, _, _), idx) in group_by(comm.num_rows(), |i| {
        (prog.value(i), exec.value(i), name.value(i), texec.value(i))
    }) {
        let lo = idx.iter().map(|&i| dur.value(i)).min().unwrap();
        let hi = idx.iter().map(|&i| dur.value(i)).max().unwrap();
        *per_exec.entry((p, e)).or_default() += (hi - lo) as f64 * 1e-6;
    }
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for ((p, _), w) in per_exec {
        out.entry(p.to_string()).or_default().push(w);
    }
    Some(out)
}

/// The terminal rendering.
pub fn render(s: &Summary) -> String {
    let mut out = String::new();
    if s.modules.is_empty() {
        out.push_str(
            "No GPU module executions in the profile (NVTX-only capture?): no module table.\n",
        );
    } else {
        let have_wait = s.modules.iter().any(|m| m.wait_ms_mean.is_some());
        let mut header = vec![
            "program",
            "name",
            "#execs",
            "thunks",
            "duration [ms]",
            "duration [%]",
        ];
        if have_wait {
            header.extend(["wait [ms]", "wait [%]"]);
        }
        let mut t = Table::new(&header);
        t.align_right(&[2, 3, 4, 5, 6, 7][..header.len() - 2]);
        for m in &s.modules {
            let mut row = vec![
                short_id(&m.program_id),
                m.name.clone(),
                m.executions.to_string(),
                mean_std(Some(m.thunks_mean), m.thunks_std),
                mean_std(Some(m.duration_ms_mean), m.duration_ms_std),
                format!("{:.3}", m.duration_percent),
            ];
            if have_wait {
                row.push(mean_std(m.wait_ms_mean, m.wait_ms_std));
                row.push(
                    m.wait_percent
                        .map(|w| format!("{w:.3}"))
                        .unwrap_or_else(|| "—".into()),
                );
            }
            t.row(row);
        }
        out.push_str("== Module execution summary (steady state) ==\n");
        out.push_str(&t.render());
    }
    let c = &s.compilation;
    if c.ranges.is_empty() {
        out.push_str("\nNo compilation in the profile.\n");
    } else {
        out.push_str(&format!(
            "\n== Compilation: {} ms in total ==\n",
            round_sig(c.total_ms)
        ));
        let top = |title: &str, pct: &str, rows: &mut dyn Iterator<Item = (&str, f64, f64)>| {
            let mut t = Table::new(&[title, "non-child [ms]", pct]);
            t.align_right(&[1, 2]);
            for (name, ms, percent) in rows.take(10) {
                t.row(vec![
                    name.to_string(),
                    round_sig(ms),
                    format!("{percent:.2}"),
                ]);
            }
            t.render()
        };
        out.push_str(&top(
            "top ranges",
            "%",
            &mut c
                .ranges
                .iter()
                .map(|r| (r.name.as_str(), r.non_child_ms, r.percent)),
        ));
        out.push('\n');
        out.push_str(&top(
            "without pass detail",
            "%",
            &mut c
                .high_level
                .iter()
                .map(|r| (r.name.as_str(), r.non_child_ms, r.percent)),
        ));
        if !c.passes.is_empty() {
            out.push('\n');
            out.push_str(&top(
                "top XLA passes",
                "% of passes",
                &mut c
                    .passes
                    .iter()
                    .map(|r| (r.name.as_str(), r.non_child_ms, r.percent)),
            ));
        }
    }
    out
}

/// Fingerprints are long; tables show their first 12 characters.
pub fn short_id(id: &str) -> String {
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        id[..12].to_string()
    } else {
        id.to_string()
    }
}
