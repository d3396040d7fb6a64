//! `roofline`: how close each op of the steady state runs to what the GPU can do — its FLOPs
//! and bytes from the HLO's cost model, its achieved TFLOP/s and GB/s, the roof at its
//! arithmetic intensity and the share of it reached, compute- or memory-bound — and the model
//! and hardware FLOPs utilisation of each module and of the steady state (docs/design.md,
//! "Roofline").
//!
//! Output contract (`roofline.json`): `{"peaks":{device, tflops:{math: TFLOP/s}, memory_gb_s,
//! source, overridden:[..]} | null, "steady":{time_ms, steps, step_ms, flops, matmul_flops,
//! model_flops, math, tflops, mfu_percent, hfu_percent}, "modules":[{program_id, module,
//! executions, time_ms, flops, matmul_flops, recomputed_flops, beyond_model, math, tflops, mfu_percent,
//! hfu_percent, costed_percent}], "ops":[{program_id, module, thunk, opcode,
//! executions, time_ms, percent, flops, bytes, intensity, tflops, gb_s, math, roof_tflops,
//! roof_percent, bound, flops_unknown}], "uncosted":{communication_ms, command_buffer_ms, without_hlo_ms,
//! not_costed_ms}, "notes":[..]}`. FLOPs and bytes of an op are per execution; of a module
//! or the steady state, over all its executions on every device.
//!
//! This file computes it (the map and reduce steps and their types); `super::roofline` is the
//! analysis (its share, terminal text and report section).
//!
//! Map: per process, per (program, thunk) its executions and whole time (exposed and hidden:
//! the kernel's own time) with the instruction's cost; per program its steady module time;
//! per device the first start and last end of the steady state; the device metadata. Reduce:
//! the peaks (the devices' or `--peak`'s), then the op, module and steady-state rows.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::roofline_flops::{Flops, flops_notes, utilisation};
pub use super::roofline_flops::{PositiveFlops, Utilisation};
use crate::formats::gpus::{DeviceFacts, PeakOverride, PeaksUsed, math_name, peaks_used};
use crate::formats::hlo::cost::{Beyond, Cost};
use crate::frames::command_buffers::is_command_buffer;
use crate::frames::gpu::Programs;
use crate::frames::program_ids::short_id;
use crate::frames::views::{ModuleView, ThunkView};
use crate::frames::warmup::Steady;
use crate::stats::group_by;
use crate::units::duration_ms;

/// One (program, thunk) of one process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OpPart {
    pub program_id: String,
    pub thunk: String,
    pub opcode: String,
    pub communication: bool,
    /// Executions, over the process's devices.
    pub executions: u64,
    /// Their whole time [ns] (exposed and hidden).
    pub time_ns: i64,
    /// The instruction's cost per execution (None: not costed; `missing` says why).
    pub cost: Option<Cost>,
    /// Why it has no cost: "command buffer", "no instruction", "not costed".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub missing: String,
    /// Recomputed work (XLA's rematerialisation, `jax.checkpoint`): not model FLOPs.
    pub recomputed: bool,
}

/// One program of one process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModulePart {
    pub program_id: String,
    pub name: String,
    /// Steady executions, over the process's devices, and their time [ns].
    pub executions: u64,
    pub time_ns: i64,
    /// The devices it ran on.
    pub devices: u64,
    /// Whether the dump holds its HLO with costs.
    pub costed: bool,
    /// Per device, the starts of its executions [ns], in order (the step period).
    pub starts: Vec<(i32, Vec<i64>)>,
}

/// One process's share of `roofline`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RooflinePartial {
    pub devices: Vec<DeviceFacts>,
    pub modules: Vec<ModulePart>,
    /// Per device: first start and last end of the steady state [ns].
    pub spans: Vec<(i32, i64, i64)>,
    pub ops: Vec<OpPart>,
    pub notes: Vec<String>,
}

impl crate::engine::value::JsonValue for RooflinePartial {}

/// Whether an instruction is recomputed work: XLA's rematerialisation names its copies
/// `<name>.remat[N]`; JAX names what `jax.checkpoint` recomputes `rematted_computation`.
fn recomputed(thunk: &str, op_name: &str) -> bool {
    thunk
        .rsplit_once('.')
        .is_some_and(|(_, s)| s.starts_with("remat"))
        || op_name.contains("rematted_computation")
}

/// The map step.
pub fn partial(steady: &Steady, programs: &Programs) -> RooflinePartial {
    let by_program = programs.by_program();
    let mut out = RooflinePartial::default();
    let m = ModuleView::of(&steady.module);
    let prog = &m.program_id;
    let name = m.program_name;
    let dev = m.device;
    let start = m.start;
    let dur = m.dur;
    for (p, rows) in group_by(m.rows, |i| prog.value(i)) {
        let modules = by_program.get(p);
        let costed = modules.is_some_and(|ms| ms.iter().any(|m| m.costs().is_ok()));
        let module_name = name.value(rows[0]);
        for hm in modules.into_iter().flatten() {
            match hm.costs() {
                Err(e) => out.notes.push(format!(
                    "module {module_name}: the cost model cannot read its dump: {e}"
                )),
                Ok(c) if !c.notes.is_empty() => out.notes.push(format!(
                    "module {module_name}: {} instruction(s) not costed (a shape absent or \
                     damaged in the dump), e.g. {}",
                    c.notes.len(),
                    c.notes[0]
                )),
                Ok(_) => {}
            }
        }
        out.modules.push(ModulePart {
            program_id: p.to_string(),
            name: module_name.to_string(),
            executions: rows.len() as u64,
            time_ns: rows.iter().map(|&i| dur.value(i)).sum(),
            devices: rows
                .iter()
                .map(|&i| dev.value(i))
                .collect::<BTreeSet<_>>()
                .len() as u64,
            costed,
            starts: group_by(rows.len(), |k| dev.value(rows[k]))
                .into_iter()
                .map(|(d, ks)| {
                    let mut st: Vec<i64> = ks.iter().map(|&k| start.value(rows[k])).collect();
                    st.sort_unstable();
                    (d, st)
                })
                .collect(),
        });
    }
    for (d, rows) in group_by(m.rows, |i| dev.value(i)) {
        let first = rows.iter().map(|&i| start.value(i)).min().unwrap_or(0);
        let last = rows
            .iter()
            .map(|&i| start.value(i) + dur.value(i))
            .max()
            .unwrap_or(0);
        out.spans.push((d, first, last));
    }
    let t = ThunkView::of(&steady.thunk);
    let prog = &t.program_id;
    let thunk = &t.name;
    let op_name = &t.op_name;
    let comm = t.communication;
    let in_buffer = &t.command_buffer;
    let dur = t.dur;
    let hidden = t.dur_hidden;
    // One pass, hashed: (program, thunk) -> first row, executions, whole time.
    let mut groups: std::collections::HashMap<(&str, &str), (usize, u64, i64)> =
        std::collections::HashMap::new();
    for i in 0..t.rows {
        let g = groups
            .entry((prog.value(i), thunk.value(i)))
            .or_insert((i, 0, 0));
        g.1 += 1;
        g.2 += dur.value(i) + hidden.value(i);
    }
    let mut groups: Vec<((&str, &str), (usize, u64, i64))> = groups.into_iter().collect();
    groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for ((p, th), (first, executions, time_ns)) in groups {
        let modules = by_program.get(p);
        let instr = modules.and_then(|ms| ms.iter().find_map(|m| m.instruction(th)));
        let cost = modules.and_then(|ms| {
            ms.iter()
                .find_map(|m| m.costs().ok().and_then(|c| c.by_instruction.get(th)))
        });
        let unattributed = is_command_buffer(th)
            && (!in_buffer.is_valid(first) || in_buffer.value(first) == th)
            && instr.is_none();
        let missing = match (cost, instr) {
            (Some(_), _) => "",
            _ if unattributed => "command buffer",
            (None, None) => "no instruction",
            (None, Some(_)) => "not costed",
        };
        let op_name_text = match instr {
            Some(i) => i.op_name(),
            None if op_name.is_valid(first) => op_name.value(first),
            None => "",
        };
        out.ops.push(OpPart {
            program_id: p.to_string(),
            thunk: th.to_string(),
            opcode: instr.map(|i| i.opcode().to_string()).unwrap_or_default(),
            recomputed: recomputed(th, op_name_text),
            communication: comm.value(first),
            executions,
            time_ns,
            cost: cost.cloned(),
            missing: missing.to_string(),
        });
    }
    out
}

#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RooflineParams {
    #[serde(default)]
    pub peak: PeakOverride,
    /// The model FLOPs of one step over all devices, where the HLO executes work the model
    /// does not count and cannot say so (pipeline bubbles, capacity-padded expert slots):
    /// the step's MFU divides these instead of the HLO's count.
    #[serde(default)]
    pub model_flops: Option<PositiveFlops>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OpRow {
    pub program_id: String,
    pub module: String,
    pub thunk: String,
    pub opcode: String,
    pub executions: u64,
    pub time_ms: f64,
    /// Of the costed ops' time.
    pub percent: f64,
    /// Per execution.
    pub flops: f64,
    pub bytes: f64,
    /// FLOP per byte (None without bytes).
    pub intensity: Option<f64>,
    pub tflops: f64,
    pub gb_s: f64,
    /// The unit its FLOPs run on: a matmul's math, `vector` else.
    pub math: String,
    pub roof_tflops: Option<f64>,
    /// Of the roof at its intensity (of the memory bandwidth for an op without FLOPs).
    pub roof_percent: Option<f64>,
    /// `compute` or `memory` (None without peaks, or when its FLOPs are unknown).
    pub bound: Option<String>,
    /// A custom kernel whose FLOPs the HLO does not say: `flops` is 0, not a count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flops_unknown: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ModuleRow {
    pub program_id: String,
    pub module: String,
    pub executions: u64,
    #[serde(flatten)]
    pub use_: Utilisation,
    pub recomputed_flops: f64,
    /// Of its ops' time (communication left out), the share with a cost.
    pub costed_percent: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct SteadyRow {
    /// Over the steady state: per device, its first start to its last end.
    #[serde(flatten)]
    pub use_: Utilisation,
    pub devices: u64,
}

/// The training step: the program doing most of the matmul FLOPs (with the programs of its
/// name), one execution of it per device and the work of the steady state shared out over them, over the median time
/// between two of its starts on a device.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StepRow {
    pub module: String,
    pub program_id: String,
    /// Its executions per device.
    pub steps: f64,
    /// Median time from one start to the next on a device.
    pub period_ms: f64,
    /// Per step and device, over `period_ms`.
    #[serde(flatten)]
    pub use_: Utilisation,
}

/// The ops kept in the result: the longest, until this share of the costed time…
pub const OPS_KEPT_FRACTION: f64 = 0.999;
/// …and at most this many.
pub const OPS_KEPT: usize = 1000;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct LeftOut {
    pub ops: usize,
    pub time_ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Uncosted {
    pub communication_ms: f64,
    pub command_buffer_ms: f64,
    pub without_hlo_ms: f64,
    pub not_costed_ms: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Roofline {
    pub peaks: Option<PeaksUsed>,
    pub steady: SteadyRow,
    /// None when no program with matmuls ran at least twice on a device.
    pub step: Option<StepRow>,
    pub modules: Vec<ModuleRow>,
    pub ops: Vec<OpRow>,
    pub uncosted: Uncosted,
    /// The ops left out of `ops`: those after the longest ones that make up
    /// [`OPS_KEPT_FRACTION`] of the costed time (at most [`OPS_KEPT`]).
    pub ops_left_out: LeftOut,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

const MS: f64 = 1e-6;

/// The op row of merged (program, thunk) parts with a cost.
fn op_row(o: &OpPart, module: &str, cost: &Cost, peaks: Option<&PeaksUsed>) -> OpRow {
    let secs = o.time_ns as f64 * 1e-9;
    let n = o.executions as f64;
    let rate = |x: f64| if secs > 0.0 { x * n / secs } else { 0.0 };
    let tflops = rate(cost.flops) / 1e12;
    let gb_s = rate(cost.bytes) / 1e9;
    let intensity = (cost.bytes > 0.0).then(|| cost.flops / cost.bytes);
    let math = if cost.matmul_flops > 0.0 {
        cost.math
    } else {
        None
    };
    let (mut roof, mut percent, mut bound) = (None, None, None);
    if let Some(p) = peaks.filter(|_| !cost.flops_unknown) {
        let compute = p.compute(math);
        let memory = p.memory_gb_s;
        if cost.flops > 0.0 {
            let mem_roof = match (intensity, memory) {
                (Some(i), Some(bw)) => Some(i * bw / 1e3),
                _ => None,
            };
            let r = match (compute, mem_roof) {
                (Some(c), Some(m)) => Some(c.min(m)),
                (c, m) => c.or(m),
            };
            bound = match (compute, mem_roof) {
                (Some(c), Some(m)) => Some(if m < c { "memory" } else { "compute" }),
                (Some(_), None) => Some("compute"),
                (None, Some(_)) => Some("memory"),
                _ => None,
            };
            roof = r;
            percent = r.filter(|r| *r > 0.0).map(|r| 100.0 * tflops / r);
        } else if let Some(bw) = memory.filter(|_| cost.bytes > 0.0) {
            bound = Some("memory");
            percent = Some(100.0 * gb_s / bw);
        }
    }
    OpRow {
        program_id: o.program_id.clone(),
        module: module.to_string(),
        thunk: o.thunk.clone(),
        opcode: o.opcode.clone(),
        executions: o.executions,
        time_ms: o.time_ns as f64 * MS,
        percent: 0.0,
        flops: cost.flops,
        bytes: cost.bytes,
        intensity,
        tflops,
        gb_s,
        math: math_name(math).to_string(),
        roof_tflops: roof,
        roof_percent: percent,
        bound: bound.map(str::to_string),
        flops_unknown: cost.flops_unknown,
    }
}

/// The step row (see [`StepRow`]): `programs` are (id, name, matmul FLOPs).
fn step_row(
    parts: &[&RooflinePartial],
    programs: &[(String, String, f64)],
    all: &Flops,
    peaks: Option<&PeaksUsed>,
    model_flops: Option<f64>,
    notes: &mut Vec<String>,
) -> Option<StepRow> {
    let (id, name, _) = programs
        .iter()
        .filter(|p| p.2 > 0.0)
        .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)))?;
    // Programs of the same name are the same step compiled on other ranks (their
    // fingerprints can differ) or again (a new input shape): on a device, the starts of all
    // of them make its steps.
    let mut starts: BTreeMap<(usize, i32), Vec<i64>> = BTreeMap::new();
    for (k, p) in parts.iter().enumerate() {
        for m in p.modules.iter().filter(|m| &m.name == name) {
            for (d, s) in &m.starts {
                starts.entry((k, *d)).or_default().extend(s);
            }
        }
    }
    let mut gaps: Vec<f64> = Vec::new();
    let mut executions = 0usize;
    let devices = starts.len();
    for s in starts.values_mut() {
        s.sort_unstable();
        executions += s.len();
        gaps.extend(s.windows(2).map(|w| (w[1] - w[0]) as f64));
    }
    let period = crate::stats::median(&gaps)?;
    let per_step = executions.max(1) as f64;
    let mut use_ = utilisation(&all.scaled(1.0 / per_step), period, peaks);
    if let Some(given) = model_flops {
        // Per device, as the row is; MFU is proportional to the model FLOPs.
        let model = given / devices.max(1) as f64;
        notes.push(format!(
            "the step's model FLOPs are the {given:.4e} given (over {devices} device(s)), not \
             the {:.4e} the HLO counts",
            use_.model_flops * devices.max(1) as f64
        ));
        use_.mfu_percent = use_
            .mfu_percent
            .filter(|_| use_.model_flops > 0.0)
            .map(|m| m * model / use_.model_flops);
        use_.model_flops = model;
    }
    Some(StepRow {
        module: name.clone(),
        program_id: id.clone(),
        steps: executions as f64 / devices.max(1) as f64,
        period_ms: period * MS,
        use_,
    })
}

/// The reduce step.
pub fn reduce(parts: &[&RooflinePartial], params: &RooflineParams) -> Roofline {
    let mut notes: Vec<String> = Vec::new();
    for p in parts {
        for n in &p.notes {
            if !notes.contains(n) {
                notes.push(n.clone());
            }
        }
    }
    let peaks = peaks_used(
        parts.iter().flat_map(|p| &p.devices),
        parts.iter().any(|p| !p.ops.is_empty()),
        &params.peak,
        &mut notes,
    );
    // Programs: name, executions, time, devices, costed.
    let mut modules: BTreeMap<&str, (String, u64, i64, u64, bool)> = BTreeMap::new();
    for m in parts.iter().flat_map(|p| &p.modules) {
        let e = modules
            .entry(&m.program_id)
            .or_insert_with(|| (m.name.clone(), 0, 0, 0, m.costed));
        e.1 += m.executions;
        e.2 += m.time_ns;
        e.3 += m.devices;
        e.4 |= m.costed;
    }
    // Ops merged over processes.
    let mut ops: BTreeMap<(&str, &str), OpPart> = BTreeMap::new();
    for o in parts.iter().flat_map(|p| &p.ops) {
        ops.entry((&o.program_id, &o.thunk))
            .and_modify(|m| {
                m.executions += o.executions;
                m.time_ns += o.time_ns;
                if m.cost.is_none() && o.cost.is_some() {
                    m.cost = o.cost.clone();
                    m.missing.clear();
                }
            })
            .or_insert_with(|| o.clone());
    }
    #[derive(Default)]
    struct Sums {
        flops: Flops,
        costed_ns: i64,
        compute_ns: i64,
    }
    let mut per_module: BTreeMap<&str, Sums> = BTreeMap::new();
    let mut uncosted = Uncosted::default();
    let mut rows = Vec::new();
    for o in ops.values() {
        let (name, _, _, _, costed) = modules
            .get(o.program_id.as_str())
            .cloned()
            .unwrap_or_default();
        let s = per_module.entry(&o.program_id).or_default();
        let ms = o.time_ns as f64 * MS;
        if o.communication {
            uncosted.communication_ms += ms;
            continue;
        }
        s.compute_ns += o.time_ns;
        let Some(cost) = &o.cost else {
            match o.missing.as_str() {
                "command buffer" => uncosted.command_buffer_ms += ms,
                _ if !costed => uncosted.without_hlo_ms += ms,
                _ => uncosted.not_costed_ms += ms,
            }
            continue;
        };
        s.costed_ns += o.time_ns;
        let n = o.executions as f64;
        match cost.math.filter(|_| cost.matmul_flops > 0.0) {
            Some(m) => {
                let e = s.flops.by_math.entry(m).or_default();
                e.0 += cost.matmul_flops * n;
                // Recomputed: the whole op (rematerialised), or what it executes beyond the
                // model's work (a flash attention backward's scores).
                let (why, beyond) = match (o.recomputed, cost.beyond) {
                    (true, _) => (Some(Beyond::Rematerialised), cost.matmul_flops * n),
                    (false, Some(Beyond::UnknownGroups)) => (cost.beyond, cost.matmul_flops * n),
                    (false, why) => (why, cost.recomputed_flops * n),
                };
                if why != Some(Beyond::UnknownGroups) {
                    e.1 += beyond;
                }
                if let Some(why) = why.filter(|_| beyond > 0.0) {
                    *s.flops.beyond.entry(why).or_default() += beyond;
                }
                s.flops.vector += (cost.flops - cost.matmul_flops).max(0.0) * n;
            }
            None => s.flops.vector += cost.flops * n,
        }
        rows.push(op_row(o, &name, cost, peaks.as_ref()));
    }
    let costed_total: f64 = rows.iter().map(|r| r.time_ms).sum();
    for r in &mut rows {
        r.percent = if costed_total > 0.0 {
            100.0 * r.time_ms / costed_total
        } else {
            0.0
        };
    }
    rows.sort_by(|a, b| b.time_ms.total_cmp(&a.time_ms).then(a.thunk.cmp(&b.thunk)));
    let mut seen = 0.0;
    let keep = rows
        .iter()
        .take_while(|r| {
            let before = seen;
            seen += r.time_ms;
            before < OPS_KEPT_FRACTION * costed_total
        })
        .count()
        .min(OPS_KEPT);
    let ops_left_out = LeftOut {
        ops: rows.len() - keep,
        time_ms: rows[keep..].iter().map(|r| r.time_ms).sum(),
    };
    let above: Vec<&OpRow> = rows
        .iter()
        .filter(|r| r.roof_percent.is_some_and(|p| p > 105.0))
        .collect();
    if !above.is_empty() {
        let ms: f64 = above.iter().map(|r| r.time_ms).sum();
        notes.push(format!(
            "{} op(s) ({} of the costed time, e.g. {}) run above their roof: the memory roof is \
             the HBM's bandwidth, and data an op finds in the L2 cache (or reads less than \
             once) is not bound by it",
            above.len(),
            crate::units::percent(ms / costed_total.max(f64::MIN_POSITIVE)),
            above[0].thunk
        ));
    }

    let mut module_rows = Vec::new();
    let mut per_program: Vec<(String, String, f64)> = Vec::new();
    let mut all = Flops::default();
    for (id, (name, executions, time_ns, _, costed)) in &modules {
        if !costed {
            notes.push(format!(
                "module {name} ({}): no HLO with costs in the dump: its {} are not costed",
                short_id(id),
                duration_ms(*time_ns as f64 * MS)
            ));
        }
        let s = per_module.remove(id).unwrap_or_default();
        per_program.push((id.to_string(), name.clone(), s.flops.matmul()));
        module_rows.push(ModuleRow {
            program_id: id.to_string(),
            module: name.clone(),
            executions: *executions,
            use_: utilisation(&s.flops, *time_ns as f64, peaks.as_ref()),
            recomputed_flops: s.flops.by_math.values().map(|v| v.1).sum(),
            costed_percent: if s.compute_ns > 0 {
                100.0 * s.costed_ns as f64 / s.compute_ns as f64
            } else {
                0.0
            },
        });
        all.add(&s.flops);
    }
    module_rows.sort_by(|a, b| {
        b.use_
            .time_ms
            .total_cmp(&a.use_.time_ms)
            .then(a.module.cmp(&b.module))
    });
    // The steady state: per device first start to last end, summed over devices.
    let wall: i64 = parts
        .iter()
        .flat_map(|p| &p.spans)
        .map(|(_, s, e)| e - s)
        .sum();
    let devices = parts.iter().map(|p| p.spans.len()).sum::<usize>().max(1) as u64;
    let step = step_row(
        parts,
        &per_program,
        &all,
        peaks.as_ref(),
        params.model_flops.map(|f| f.0),
        &mut notes,
    );
    let steady = utilisation(&all, wall as f64, peaks.as_ref());
    let unknown: Vec<(&str, f64)> = rows
        .iter()
        .filter(|r| r.flops_unknown)
        .map(|r| (r.thunk.as_str(), r.time_ms))
        .collect();
    notes.extend(flops_notes(
        step.as_ref().map_or(&steady, |s| &s.use_),
        &unknown,
        costed_total,
    ));
    Roofline {
        steady: SteadyRow {
            use_: steady,
            devices,
        },
        step,
        peaks,
        modules: module_rows,
        ops: {
            rows.truncate(keep);
            rows
        },
        ops_left_out,
        uncosted,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::hlo::cost::Math;

    fn h100() -> DeviceFacts {
        DeviceFacts {
            name: "NVIDIA H100 80GB HBM3".into(),
            sms: Some(132),
            capability: Some((9, 0)),
            memory_bandwidth: Some(3.352e12),
            memory_bytes: Some(80e9),
        }
    }

    fn op(thunk: &str, n: u64, ms: f64, cost: Option<Cost>) -> OpPart {
        OpPart {
            program_id: "p".into(),
            thunk: thunk.into(),
            opcode: "custom-call".into(),
            communication: false,
            executions: n,
            time_ns: (ms * 1e6) as i64,
            missing: if cost.is_some() { "" } else { "not costed" }.into(),
            cost,
            recomputed: recomputed(thunk, ""),
        }
    }

    fn matmul(flops: f64, bytes: f64, math: Math) -> Option<Cost> {
        Some(Cost {
            flops,
            matmul_flops: flops,
            transcendentals: 0.0,
            recomputed_flops: 0.0,
            bytes,
            math: Some(math),
            ..Default::default()
        })
    }

    fn vector(flops: f64, bytes: f64) -> Option<Cost> {
        Some(Cost {
            flops,
            bytes,
            ..Default::default()
        })
    }

    fn part(devices: Vec<DeviceFacts>, ops: Vec<OpPart>, module_ms: f64) -> RooflinePartial {
        RooflinePartial {
            devices,
            modules: vec![ModulePart {
                program_id: "p".into(),
                name: "jit_step".into(),
                executions: 10,
                time_ns: (module_ms * 1e6) as i64,
                devices: 1,
                costed: true,
                starts: vec![(0, (0..10).map(|i| i * 3_000_000).collect())],
            }],
            spans: vec![(0, 0, 30_000_000)],
            ops,
            notes: vec![],
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1e-30)
    }

    /// A bf16 GEMM at half the bf16 peak, an elementwise op at 3 TB/s, a copy, an all-gather
    /// and a recomputed GEMM: each op's roof and bound, and the module's MFU (model FLOPs at
    /// the bf16 peak over the module time) and HFU (every FLOP, the vector ones at the f32
    /// peak).
    #[test]
    fn rates_roofs_and_utilisation() {
        let bf16 = 132.0 * 4096.0 * 1830e6 / 1e12;
        // 10 × 1 TFLOP in 20 ms: 500 TFLOP/s.
        let gemm = op("custom-call.1", 10, 20.0, matmul(1e12, 1e8, Math::Bf16));
        // 10 × 1 GFLOP, 4 GB each, in 13.3 ms: 3 TB/s at 0.25 FLOP/B.
        let ew = op("loop_add_fusion", 10, 40.0 / 3.0, vector(1e9, 4e9));
        let copy = op("copy.1", 10, 10.0, vector(0.0, 1e9));
        let remat = op(
            "custom-call.2.remat",
            10,
            2.0,
            matmul(1e11, 1e8, Math::Bf16),
        );
        let mut ag = op("all-gather.1", 10, 5.0, None);
        ag.communication = true;
        let lost = op("fusion.9", 10, 1.0, None);
        let r = reduce(
            &[&part(
                vec![h100()],
                vec![gemm, ew, copy, remat, ag, lost],
                25.0,
            )],
            &RooflineParams::default(),
        );
        let row = |t: &str| r.ops.iter().find(|o| o.thunk == t).unwrap();
        let g = row("custom-call.1");
        assert!(close(g.tflops, 500.0), "{g:?}");
        assert_eq!(g.bound.as_deref(), Some("compute"));
        assert!(close(g.roof_tflops.unwrap(), bf16));
        assert!(close(g.roof_percent.unwrap(), 100.0 * 500.0 / bf16));
        assert_eq!(g.math, "bf16");
        let e = row("loop_add_fusion");
        assert!(close(e.gb_s, 3000.0), "{e:?}");
        assert_eq!(e.bound.as_deref(), Some("memory"));
        assert!(close(e.roof_tflops.unwrap(), 0.25 * 3352.0 / 1e3));
        assert!(close(e.roof_percent.unwrap(), 100.0 * 3000.0 / 3352.0));
        assert_eq!(e.math, "vector");
        let c = row("copy.1");
        assert_eq!(c.intensity, Some(0.0));
        assert_eq!(c.bound.as_deref(), Some("memory"));
        assert!(close(c.roof_percent.unwrap(), 100.0 * 1000.0 / 3352.0));
        assert!(
            r.ops
                .iter()
                .all(|o| o.thunk != "all-gather.1" && o.thunk != "fusion.9")
        );
        assert!(close(r.uncosted.communication_ms, 5.0));
        assert!(close(r.uncosted.not_costed_ms, 1.0));
        // Sorted by time.
        assert_eq!(r.ops[0].thunk, "custom-call.1");

        let m = &r.modules[0];
        assert!(close(m.recomputed_flops, 1e12));
        assert!(close(m.use_.model_flops, 1e13));
        assert!(close(m.use_.matmul_flops, 1.1e13));
        let secs = 25e-3;
        let mfu = 100.0 * 1e13 / (secs * bf16 * 1e12);
        assert!(close(m.use_.mfu_percent.unwrap(), mfu), "{m:?}");
        let f32 = 132.0 * 256.0 * 1830e6 / 1e12;
        let hfu = 100.0 * (1.1e13 / (bf16 * 1e12) + 1e10 / (f32 * 1e12)) / secs;
        assert!(close(m.use_.hfu_percent.unwrap(), hfu), "{m:?}");
        assert_eq!(m.use_.math.as_deref(), Some("bf16"));
        // The module's compute ops' time is costed but fusion.9's 1 ms.
        let compute_ms = 20.0 + 40.0 / 3.0 + 10.0 + 2.0 + 1.0;
        assert!((m.costed_percent - 100.0 * (compute_ms - 1.0) / compute_ms).abs() < 1e-3);
        // The step: one program, every 3 ms; the steady state: 30 ms.
        let step = r.step.as_ref().unwrap();
        assert!(close(step.period_ms, 3.0));
        assert!(close(step.steps, 10.0));
        assert!(close(step.use_.model_flops, 1e12));
        assert!(close(r.steady.use_.time_ms, 30.0));
    }

    /// A step compiled again at every call (a new input shape each time): five programs of
    /// one name, each run once, 3 ms apart, are five steps of 3 ms, not none.
    #[test]
    fn a_step_compiled_again_at_every_call_is_still_the_step() {
        let mut gemm = op("custom-call.1", 1, 2.0, matmul(1e12, 1e8, Math::Bf16));
        gemm.program_id = "p0".into();
        let mut p = part(vec![h100()], vec![gemm], 10.0);
        let one = p.modules.pop().unwrap();
        p.modules = (0..5)
            .map(|i| ModulePart {
                program_id: format!("p{i}"),
                executions: 1,
                starts: vec![(0, vec![i * 3_000_000])],
                ..one.clone()
            })
            .collect();
        let r = reduce(&[&p], &RooflineParams::default());
        let step = r.step.as_ref().expect("a step");
        assert!(close(step.period_ms, 3.0), "{step:?}");
        assert!(close(step.steps, 5.0), "{step:?}");
        assert_eq!(step.module, "jit_step");
    }

    /// MFU divides by the bf16 peak whatever units the matmuls ran on (tf32 work could have
    /// run on bf16 tensor cores): one TFLOP of bf16 and one of tf32 in 10 ms.
    #[test]
    fn several_math_units_are_measured_against_the_bf16_peak() {
        let ops = vec![
            op("custom-call.1", 1, 3.0, matmul(1e12, 1e8, Math::Bf16)),
            op("custom-call.2", 1, 7.0, matmul(1e12, 1e8, Math::Tf32)),
        ];
        let r = reduce(
            &[&part(vec![h100()], ops, 10.0)],
            &RooflineParams::default(),
        );
        let bf16 = 132.0 * 4096.0 * 1830e6;
        let want = 100.0 * 2e12 / bf16 / 10e-3;
        let m = &r.modules[0];
        assert!(close(m.use_.mfu_percent.unwrap(), want), "{m:?}");
        assert!(m.use_.mfu_percent.unwrap() < 100.0);
        assert_eq!(m.use_.math.as_deref(), Some("bf16+tf32"));
        assert_eq!(m.use_.mfu_math.as_deref(), Some("bf16"));
        // fp8 work is measured against the fp8 peak.
        let fp8 = vec![op("custom-call.1", 1, 3.0, matmul(1e12, 1e8, Math::Fp8))];
        let r = reduce(
            &[&part(vec![h100()], fp8, 10.0)],
            &RooflineParams::default(),
        );
        assert_eq!(r.modules[0].use_.mfu_math.as_deref(), Some("fp8"));
    }

    /// `--peak` wins over the table; a GPU the table lacks gets achieved rates and a note,
    /// or the peaks given.
    #[test]
    fn peaks_given_win_and_unknown_gpus_get_none() {
        let ops = || vec![op("custom-call.1", 10, 20.0, matmul(1e12, 1e8, Math::Bf16))];
        let mut params = RooflineParams::default();
        params.peak.set("bf16=1000").unwrap();
        params.peak.set("hbm=2000").unwrap();
        let r = reduce(&[&part(vec![h100()], ops(), 25.0)], &params);
        let p = r.peaks.as_ref().unwrap();
        assert_eq!(p.tflops[&Math::Bf16], 1000.0);
        assert_eq!(p.memory_gb_s, Some(2000.0));
        assert_eq!(p.overridden, ["bf16=1000", "hbm=2000"]);
        assert!(close(r.ops[0].roof_percent.unwrap(), 50.0));
        assert!(close(r.modules[0].use_.mfu_percent.unwrap(), 40.0));

        let t4 = DeviceFacts {
            name: "Tesla T4".into(),
            ..Default::default()
        };
        let r = reduce(
            &[&part(vec![t4.clone()], ops(), 25.0)],
            &RooflineParams::default(),
        );
        assert!(r.peaks.is_none());
        assert!(
            r.notes.iter().any(|n| n.contains("no peaks for Tesla T4")),
            "{:?}",
            r.notes
        );
        assert!(close(r.ops[0].tflops, 500.0));
        assert_eq!(r.ops[0].roof_percent, None);
        assert_eq!(r.modules[0].use_.mfu_percent, None);
        let r = reduce(&[&part(vec![t4], ops(), 25.0)], &params);
        assert_eq!(r.peaks.as_ref().unwrap().source, "--peak");
        assert!(close(r.ops[0].roof_percent.unwrap(), 50.0));

        let r = reduce(&[&part(vec![], ops(), 25.0)], &RooflineParams::default());
        assert!(
            r.notes.iter().any(|n| n.contains("no device metadata")),
            "{:?}",
            r.notes
        );

        for bad in ["bf16", "bf16=", "bf16=-1", "bf16=inf", "tpu=3", "hbm=x"] {
            let e = RooflineParams::default()
                .peak
                .set(bad)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("--peak {bad}: ")), "{e}");
        }
    }

    /// A program the dump lacks is named in a note, its time left out; two GPU models are
    /// said.
    #[test]
    fn programs_without_costs_are_named() {
        let mut p = part(vec![h100()], vec![op("fusion.1", 10, 1.0, None)], 2.0);
        p.modules[0].costed = false;
        let mut a100 = h100();
        a100.name = "NVIDIA A100-SXM4-80GB".into();
        let mut q = part(vec![a100], vec![], 1.0);
        q.modules[0].program_id = "q".into();
        let r = reduce(&[&p, &q], &RooflineParams::default());
        assert!(close(r.uncosted.without_hlo_ms, 1.0));
        assert!(
            r.notes
                .iter()
                .any(|n| n.starts_with("module jit_step (p): no HLO")),
            "{:?}",
            r.notes
        );
        assert!(
            r.notes.iter().any(|n| n.contains("GPUs differ")),
            "{:?}",
            r.notes
        );
        assert!(r.ops.is_empty());
    }

    #[test]
    fn recomputed_work_is_recognised() {
        assert!(recomputed("fusion.12.remat", ""));
        assert!(recomputed("fusion.12.remat2", ""));
        assert!(recomputed(
            "custom-call.3",
            "jit(step)/transpose(jvp(f))/rematted_computation/dot_general"
        ));
        assert!(!recomputed("fusion.12", "jit(step)/dot_general"));
        assert!(!recomputed("remat_fusion", ""));
    }
}
