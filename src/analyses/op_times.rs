//! The op-time share: per process, per program its steady module time and, per device, its
//! first start and last end; per (program, thunk) the count, sum and spread of the thunk's
//! exposed time, with its opcode, op_name and Python line from the HLO ([`OpsShare`]); and
//! what several analyses make of the shares of a run (the top programs, the totals, the
//! thunks merged over processes). `ops` and `sources` read it; it is no analysis itself.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::{ProcessView, Reads, Share};
use crate::formats::hlo::HloModuleInfo;
use crate::frames::command_buffers::{self, is_command_buffer};
use crate::frames::gpu::Programs;
use crate::frames::views::{ModuleView, ThunkView};
use crate::frames::warmup::Steady;
use crate::stats::group_by;

/// The share of the module time that the top modules make up (as nsys-jax's notebook).
pub const TOP_FRACTION: f64 = 0.99;

/// The opcode of what a command-buffer thunk ran that is not attributed to an instruction.
pub const COMMAND_BUFFER_OPCODE: &str = "[command buffer]";

pub use crate::stats::Moments;

/// One (program, thunk) of one process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ThunkTime {
    pub program_id: String,
    pub module: String,
    pub thunk: String,
    /// The opcode of the thunk's HLO instruction ("" when the dump lacks it).
    pub opcode: String,
    /// The instruction's `op_name` metadata.
    pub op_name: String,
    pub communication: bool,
    /// Exposed time per thunk execution (per device), ns.
    pub time: Moments,
    /// The command buffer (CUDA graph) it ran in, with its whole time there [ns] (hidden
    /// time included).
    #[serde(default)]
    pub command_buffer: Option<(String, i64)>,
    /// The Python line of its instruction (`file:line`; "" when the dump says none).
    #[serde(default)]
    pub source: String,
}

/// One process's share of `ops`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct OpsPartial {
    /// Per program: name and steady module time [ns].
    pub modules: Vec<(String, String, i64)>,
    /// Per (device, program): first start and last end of its steady module executions [ns].
    pub spans: Vec<(i32, String, i64, i64)>,
    pub thunks: Vec<ThunkTime>,
    /// Thunks whose instruction the dump lacks (counted, with one example).
    pub missing: (u64, String),
    /// What building the frames said about command buffers.
    #[serde(default)]
    pub command_buffer_notes: Vec<String>,
    /// The copies between modules (None: the archive does not say).
    #[serde(default)]
    pub transfers: Option<super::steady_copies::TransfersPartial>,
}

impl crate::engine::value::JsonValue for OpsPartial {}

/// The innermost Python line of an instruction (`file:line`): its stack's last frame, else
/// its metadata's source file and line; "" without either.
fn source_line(m: &HloModuleInfo, i: &crate::formats::hlo::HloInstructionInfo) -> String {
    match m.innermost(i.stack_frame_id) {
        Some((file, line)) => format!("{file}:{line}"),
        None if !i.source_file().is_empty() => format!("{}:{}", i.source_file(), i.source_line),
        None => String::new(),
    }
}

/// The map step.
pub fn partial(steady: &Steady, programs: &Programs) -> OpsPartial {
    let by_program = programs.by_program();
    let m = ModuleView::of(&steady.module);
    let (prog, name, dev, start, dur) = (&m.program_id, m.program_name, m.device, m.start, m.dur);
    let mut out = OpsPartial::default();
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for (p, rows) in group_by(m.rows, |i| prog.value(i)) {
        names.insert(p, name.value(rows[0]));
        let total: i64 = rows.iter().map(|&i| dur.value(i)).sum();
        out.modules
            .push((p.to_string(), name.value(rows[0]).to_string(), total));
    }
    for ((d, p), rows) in group_by(m.rows, |i| (dev.value(i), prog.value(i))) {
        let first = rows.iter().map(|&i| start.value(i)).min().unwrap_or(0);
        let last = rows
            .iter()
            .map(|&i| start.value(i) + dur.value(i))
            .max()
            .unwrap_or(0);
        out.spans.push((d, p.to_string(), first, last));
    }
    let t = ThunkView::of(&steady.thunk);
    let (prog, thunk, op_name, comm) = (&t.program_id, &t.name, &t.op_name, t.communication);
    let (in_buffer, dur, hidden) = (&t.command_buffer, t.dur, t.dur_hidden);
    for ((p, th), rows) in group_by(t.rows, |i| (prog.value(i), thunk.value(i))) {
        let found = by_program
            .get(p)
            .and_then(|ms| ms.iter().find_map(|m| m.instruction(th).map(|i| (*m, i))));
        let instr = found.map(|(_, i)| i);
        if instr.is_none() && !is_command_buffer(th) {
            out.missing.0 += 1;
            if out.missing.1.is_empty() {
                out.missing.1 = format!("{th} in {}", names.get(p).copied().unwrap_or(p));
            }
        }
        let first = rows[0];
        out.thunks.push(ThunkTime {
            program_id: p.to_string(),
            module: names.get(p).copied().unwrap_or_default().to_string(),
            thunk: th.to_string(),
            opcode: match instr {
                Some(i) => i.opcode().to_string(),
                None if is_command_buffer(th) => COMMAND_BUFFER_OPCODE.to_string(),
                None => String::new(),
            },
            // The instruction's own metadata (the frame's OpName may be a fusion's common
            // prefix); the frame's when the dump lacks the instruction.
            op_name: match instr {
                Some(i) => i.op_name().to_string(),
                None if op_name.is_valid(first) => op_name.value(first).to_string(),
                None => String::new(),
            },
            communication: comm.value(first),
            source: found.map(|(m, i)| source_line(m, i)).unwrap_or_default(),
            time: Moments::of(rows.iter().map(|&i| dur.value(i))),
            command_buffer: in_buffer.is_valid(first).then(|| {
                let whole = rows.iter().map(|&i| dur.value(i) + hidden.value(i)).sum();
                (in_buffer.value(first).to_string(), whole)
            }),
        });
    }
    out
}

/// The steady module time of every program over the run, and the top programs: sorted by
/// time (descending), each taken while the share of the time before it is below
/// [`TOP_FRACTION`] (so the one that crosses it is in).
pub fn top_programs(parts: &[&OpsPartial]) -> (i64, Vec<String>) {
    let mut time: BTreeMap<&str, i64> = BTreeMap::new();
    for p in parts {
        for (id, _, ns) in &p.modules {
            *time.entry(id).or_default() += ns;
        }
    }
    let total: i64 = time.values().sum();
    let mut sorted: Vec<(&str, i64)> = time.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut seen = 0.0;
    let mut top = Vec::new();
    for (id, ns) in sorted {
        if seen < TOP_FRACTION {
            top.push(id.to_string());
        }
        seen += ns as f64 / total.max(1) as f64;
    }
    (total, top)
}

/// The notebook's three totals over the top programs [ns]: exposed thunk time, module time,
/// and per device first start to last end, summed over devices.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    pub thunks: i64,
    pub modules: i64,
    pub wall: i64,
}

pub fn totals(parts: &[&OpsPartial], top: &[String]) -> Totals {
    let is_top = |id: &str| top.iter().any(|t| t == id);
    let mut t = Totals::default();
    let mut spans: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for p in parts {
        t.modules += p
            .modules
            .iter()
            .filter(|m| is_top(&m.0))
            .map(|m| m.2)
            .sum::<i64>();
        t.thunks += p
            .thunks
            .iter()
            .filter(|x| is_top(&x.program_id))
            .map(|x| x.time.sum)
            .sum::<i64>();
        for (d, id, s, e) in &p.spans {
            if is_top(id) {
                let span = spans.entry(*d).or_insert((*s, *e));
                span.0 = span.0.min(*s);
                span.1 = span.1.max(*e);
            }
        }
    }
    t.wall = spans.values().map(|(s, e)| e - s).sum();
    t
}

/// Every (program, thunk) over the run, merged across processes, in program then thunk order.
pub fn merged_thunks(parts: &[&OpsPartial]) -> Vec<ThunkTime> {
    let mut by_key: BTreeMap<(&str, &str), ThunkTime> = BTreeMap::new();
    for p in parts {
        for t in &p.thunks {
            by_key
                .entry((&t.program_id, &t.thunk))
                .and_modify(|m| {
                    m.time = m.time.merge(t.time);
                    m.command_buffer = match (m.command_buffer.take(), &t.command_buffer) {
                        (Some((name, a)), Some((_, b))) => Some((name, a + b)),
                        (a, b) => a.or_else(|| b.clone()),
                    };
                    if m.opcode.is_empty() {
                        m.opcode = t.opcode.clone();
                    }
                })
                .or_insert_with(|| t.clone());
        }
    }
    by_key.into_values().collect()
}

/// `ops`' share: [`partial`] of one process.
pub struct OpsShare;

impl Share for OpsShare {
    const KIND: &'static str = "ops-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = OpsPartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<OpsPartial> {
        if p.steady.is_none() {
            return Ok(OpsPartial::default());
        }
        let mut part = p.with_programs(partial)?;
        if let (Some(steady), Some(t)) = (p.steady, p.transfers) {
            part.transfers = Some(super::steady_copies::partial(&steady.module, t));
        }
        part.command_buffer_notes = p
            .frame_notes
            .iter()
            .filter(|n| n.contains(command_buffers::NOTE))
            .cloned()
            .collect();
        Ok(part)
    }
}
