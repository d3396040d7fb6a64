//! The thunk share: one process's thunk and op-type durations per module execution, and the
//! thunks' achieved FLOP rates, the map step of `compare`'s `thunk`, `op` and `rate` metrics
//! (and of any analysis that wants them).

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::{ProcessView, Reads, Share};
use crate::formats::hlo::HloModuleInfo;
use crate::frames::views::{ModuleView, ThunkView};
use crate::frames::warmup::Steady;
use crate::stats::group_by;

/// The thunk share of one process: [`thunk_partial`] with the opcodes of its HLO.
pub struct ThunkShare;

impl Share for ThunkShare {
    const KIND: &'static str = "thunk-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = ThunkPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<ThunkPartial> {
        let Some(steady) = p.steady else {
            return Ok(ThunkPartial::default());
        };
        let programs = (p.programs)()?;
        let by_stable: BTreeMap<String, &HloModuleInfo> = programs
            .by_id
            .values()
            .map(|m| (programs.stable_id(Some(m.id), &m.name), m.as_ref()))
            .collect();
        Ok(thunk_partial(steady, |id| by_stable.get(id).copied()))
    }
}

/// One process's thunk and op-type durations per module execution (the map step of the
/// `thunk` and `op` comparisons).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ThunkPartial {
    /// (program id, module name, thunk name, durations [ns] per (execution, device)).
    pub thunks: Vec<(String, String, String, Vec<i64>)>,
    /// (program id, module name, opcode, durations [ns] per (execution, device)).
    pub ops: Vec<(String, String, String, Vec<i64>)>,
    /// (program id, module name, thunk name, achieved TFLOP/s per (execution, device)): its
    /// FLOPs (the HLO's cost model) over its time, for thunks that do floating-point work.
    #[serde(default)]
    pub rates: Vec<(String, String, String, Vec<f64>)>,
}

impl crate::engine::value::JsonValue for ThunkPartial {}

/// The opcode of a thunk: that of its HLO instruction when the dump has it, else the
/// instruction name's stem (XLA names instructions `<opcode>.<n>`).
fn opcode(module: Option<&HloModuleInfo>, thunk: &str) -> String {
    if let Some(i) = module.and_then(|m| m.instruction(thunk)) {
        return i.opcode().to_string();
    }
    thunk
        .split_once('.')
        .map_or(thunk, |(stem, _)| stem)
        .to_string()
}

/// The map step: one process's steady-state thunks summed per (module execution, device),
/// per thunk and per opcode. `module_of` finds a program's HLO by its stable id.
pub fn thunk_partial<'a>(
    steady: &Steady,
    module_of: impl Fn(&str) -> Option<&'a HloModuleInfo>,
) -> ThunkPartial {
    let m = ModuleView::of(&steady.module);
    let m_prog = &m.program_id;
    let m_name = m.program_name;
    let name_of: BTreeMap<&str, &str> = (0..m.rows)
        .map(|i| (m_prog.value(i), m_name.value(i)))
        .collect();
    let t = ThunkView::of(&steady.thunk);
    let prog = &t.program_id;
    let exec = t.program_execution;
    let dev = t.device;
    let name = &t.name;
    let dur = t.dur;
    let mut out = ThunkPartial::default();
    for (program, rows) in group_by(t.rows, |i| prog.value(i)) {
        let hlo = module_of(program);
        let module = name_of
            .get(program)
            .copied()
            .unwrap_or_default()
            .to_string();
        let codes: Vec<String> = rows.iter().map(|&i| opcode(hlo, name.value(i))).collect();
        // Per thunk name, then per opcode: sort by (key, execution, device) and sum runs.
        let at = |r: usize| (exec.value(rows[r]), dev.value(rows[r]));
        let d = |r: usize| dur.value(rows[r]);
        let by_thunk = sum_per_execution(rows.len(), |r| name.value(rows[r]), at, d);
        let by_code = sum_per_execution(rows.len(), |r| codes[r].as_str(), at, d);
        for (thunk, v) in by_thunk {
            out.thunks
                .push((program.to_string(), module.clone(), thunk, v));
        }
        for (code, v) in by_code {
            out.ops.push((program.to_string(), module.clone(), code, v));
        }
        let flops = |thunk: &str| -> Option<f64> {
            let c = hlo?.costs().ok()?.by_instruction.get(thunk)?;
            (c.flops > 0.0).then_some(c.flops)
        };
        let mut rates: Vec<(String, Vec<f64>)> = Vec::new();
        for ((thunk, _), idx) in group_by(rows.len(), |r| (name.value(rows[r]), at(r))) {
            let Some(f) = flops(thunk) else { continue };
            let ns: i64 = idx.iter().map(|&r| d(r)).sum();
            if ns <= 0 {
                continue;
            }
            let tflops = f * idx.len() as f64 / ns as f64 / 1e3;
            match rates.last_mut() {
                Some((last, v)) if last == thunk => v.push(tflops),
                _ => rates.push((thunk.to_string(), vec![tflops])),
            }
        }
        for (thunk, v) in rates {
            out.rates
                .push((program.to_string(), module.clone(), thunk, v));
        }
    }
    out
}

/// Per key, the sums of `dur` per (execution, device), in (execution, device) order.
fn sum_per_execution<'k>(
    n: usize,
    key: impl Fn(usize) -> &'k str,
    at: impl Fn(usize) -> (i32, i32),
    dur: impl Fn(usize) -> i64,
) -> Vec<(String, Vec<i64>)> {
    let mut out: Vec<(String, Vec<i64>)> = Vec::new();
    for ((k, _), idx) in group_by(n, |r| (key(r), at(r))) {
        let total: i64 = idx.iter().map(|&r| dur(r)).sum();
        match out.last_mut() {
            Some((last, v)) if last == k => v.push(total),
            _ => out.push((k.to_string(), vec![total])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_falls_back_to_the_name_stem() {
        assert_eq!(opcode(None, "all-gather-start.3"), "all-gather-start");
        assert_eq!(opcode(None, "custom"), "custom");
    }
}
