//! The step as the GPU and the host spend it, per device (docs/whatif.md): what `whatif`
//! re-times.
//!
//! A device's steady state is a sequence of module executions (every execution in its steady
//! window, recompiled programs included) and the gaps between them. While a module runs, the
//! GPU's own work sets the pace: its thunks on the module's stream, the collectives it waits
//! in. In a gap the GPU waits for the host, and what the host did then is known where the
//! profile says: a compilation (`XlaCompile`), a range of the program's own without GPU work
//! (`load_batch`), else dispatch and synchronisation. The step's critical path is this
//! alternation; a scenario shortens some of its parts and the step shortens by what leaves
//! the path.

use std::collections::BTreeMap;

use anyhow::Result;
use arrow::array::Array;
use serde::{Deserialize, Serialize};

use crate::formats::hlo::HloModuleInfo;
use crate::formats::user_nvtx::{UserNvtx, label};
use crate::frames::views::{ModuleView, ThunkView};

/// A gap between module executions on a device: when the GPU waited for the host.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Gap {
    pub start_ns: i64,
    pub dur_ns: i64,
    /// Per range of the program's own without GPU work (index into the labels): how much of
    /// the gap it covers [ns].
    pub host: Vec<(u32, i64)>,
    /// How long before the gap the host had launched everything the GPU ran, while it
    /// launched nothing more until the GPU was done: the span from its last launch to the
    /// GPU's end [ns]. Less the host's work in it ([`StepTimeline::host_work`] and the
    /// compilations, taken off together in [`Window::all`]), the host waited for the GPU (a
    /// sync) that long, or worked outside any range.
    #[serde(default)]
    pub waited_ns: i64,
}

/// One device's steady window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeviceSteps {
    pub device: i32,
    /// From the first steady execution's start to the last one's end [ns].
    pub start_ns: i64,
    pub end_ns: i64,
    pub gaps: Vec<Gap>,
    /// Every steady execution, by start.
    #[serde(default)]
    pub execs: Vec<Exec>,
    /// What collectives running beside computation cost it: of the compute thunks that ran
    /// beside a collective, their time beyond the same thunk's median alone, and the time
    /// they overlapped a collective [ns].
    #[serde(default)]
    pub beside_extra_ns: i64,
    #[serde(default)]
    pub beside_overlap_ns: i64,
    /// The program's own step range, when it marks its steps: its label and the starts of
    /// its instances in the window [ns].
    #[serde(default)]
    pub step_range: Option<(String, Vec<i64>)>,
}

/// A steady module execution on a device, with its thunks' time.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Exec {
    pub program: String,
    #[serde(default)]
    pub execution: i32,
    pub start_ns: i64,
    /// When its first collective started: when the device arrived at the step's first
    /// exchange with the others [ns].
    #[serde(default)]
    pub arrival_ns: Option<i64>,
    /// The collectives' time not hidden under other work, and the other thunks' time [ns].
    pub collectives_ns: i64,
    pub compute_ns: i64,
    /// Of the collectives' time, what could hide it (`whatif_edges`).
    #[serde(default)]
    pub hideable_ns: i64,
    #[serde(default)]
    pub split_ns: i64,
    #[serde(default)]
    pub unknown_ns: i64,
    /// The same time by what ran ([`crate::formats::hlo::library::describe`]: `cuDNN fused
    /// attention`, `NCCL all-reduce`; `[no HLO]` without the module's HLO) [ns].
    #[serde(default)]
    pub kinds: Vec<(String, i64)>,
}

impl Exec {
    /// An execution with no thunk time yet.
    pub fn new(program: &str, execution: i32, start_ns: i64) -> Exec {
        Exec {
            program: program.to_string(),
            execution,
            start_ns,
            arrival_ns: None,
            collectives_ns: 0,
            compute_ns: 0,
            hideable_ns: 0,
            split_ns: 0,
            unknown_ns: 0,
            kinds: Vec::new(),
        }
    }

    fn add_kind(&mut self, kind: &str, ns: i64) {
        match self.kinds.iter_mut().find(|(k, _)| k == kind) {
            Some((_, v)) => *v += ns,
            None => self.kinds.push((kind.to_string(), ns)),
        }
    }
}

/// One process's devices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StepTimeline {
    /// The process, as notes and the compilations name it.
    pub process: String,
    pub devices: Vec<DeviceSteps>,
    /// The labels of the host ranges the gaps name.
    pub labels: Vec<String>,
    /// The steady programs without their HLO: their collectives are known only by name and
    /// their edges not at all.
    #[serde(default)]
    pub without_hlo: Vec<String>,
    /// Every range of the program's own without GPU work, merged: time the host worked,
    /// not waited.
    #[serde(default)]
    pub host_work: Vec<(i64, i64)>,
    /// The steady programs' matmuls (op class, [`crate::formats::hlo::library`]) and the
    /// casts their f32 matmuls cost ([`crate::formats::hlo::casts`]), as (program id, thunk).
    #[serde(default)]
    pub matmuls: Vec<(String, String)>,
    #[serde(default)]
    pub f32_casts: Vec<(String, String)>,
}

impl crate::engine::value::JsonValue for StepTimeline {}

/// Intervals merged: sorted, overlapping ones joined.
fn union(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    v.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// How much of `[a, b)` the merged intervals `u` cover.
fn covered(u: &[(i64, i64)], a: i64, b: i64) -> i64 {
    let from = u.partition_point(|&(_, e)| e <= a);
    u[from..]
        .iter()
        .take_while(|&&(s, _)| s < b)
        .map(|&(s, e)| (e.min(b) - s.max(a)).max(0))
        .sum()
}

/// Per device: how much longer compute thunks ran while a collective ran beside them than the
/// same op (program and JAX op name, else instruction) alone, summed over those that overlapped a collective
/// for at least half their time, and the time they overlapped it [ns]. A thunk without an
/// execution alone is not counted.
fn beside_collectives(t: &ThunkView) -> BTreeMap<i32, (i64, i64)> {
    let mut colls: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for i in 0..t.rows {
        if t.communication.value(i) {
            let a = t.start.value(i);
            colls
                .entry(t.device.value(i))
                .or_default()
                .push((a, a + t.dur.value(i)));
        }
    }
    let colls: BTreeMap<i32, Vec<(i64, i64)>> =
        colls.into_iter().map(|(d, v)| (d, union(v))).collect();
    // Per (device, program, thunk): durations alone, and (duration, overlap) beside one.
    type Runs = (Vec<i64>, Vec<(i64, i64)>);
    let mut by: BTreeMap<(i32, &str, &str), Runs> = BTreeMap::new();
    for i in 0..t.rows {
        let d = t.device.value(i);
        let Some(c) = colls.get(&d) else { continue };
        if t.communication.value(i) {
            continue;
        }
        let (a, dur) = (t.start.value(i), t.dur.value(i));
        let o = covered(c, a, a + dur);
        // The same op: its JAX op name (a layer's op repeated), else its instruction.
        let op = match t.op_name.value(i) {
            "" => t.name.value(i),
            n => n,
        };
        let e = by.entry((d, t.program_id.value(i), op)).or_default();
        if o == 0 {
            e.0.push(dur);
        } else if 2 * o >= dur {
            e.1.push((dur, o));
        }
    }
    let mut out: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    for ((d, ..), (mut alone, beside)) in by {
        if alone.is_empty() || beside.is_empty() {
            continue;
        }
        alone.sort_unstable();
        let typical = alone[alone.len() / 2];
        let e = out.entry(d).or_default();
        for (dur, o) in beside {
            e.0 += dur - typical;
            e.1 += o;
        }
    }
    out
}

/// The timeline of one process: its steady window per device (from the steady module frame),
/// every module execution in it (from the whole module frame) and the host ranges of the
/// program's own that launched no GPU work.
pub fn timeline<'m>(
    process: &str,
    steady: &crate::frames::warmup::Steady,
    modules: &arrow::array::RecordBatch,
    user: Option<&arrow::array::RecordBatch>,
    module_of: impl Fn(&str) -> Option<&'m HloModuleInfo>,
) -> Result<StepTimeline> {
    let s = ModuleView::of(&steady.module);
    let mut windows: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    let mut execs: BTreeMap<(i32, &str, i32), Exec> = BTreeMap::new();
    let mut without_hlo: std::collections::BTreeSet<String> = Default::default();
    for i in 0..s.rows {
        if module_of(s.program_id.value(i)).is_none() {
            without_hlo.insert(s.program_name.value(i).to_string());
        }
        let (a, b) = (s.start.value(i), s.start.value(i) + s.dur.value(i));
        let w = windows.entry(s.device.value(i)).or_insert((a, b));
        w.0 = w.0.min(a);
        w.1 = w.1.max(b);
        let key = (
            s.device.value(i),
            s.program_id.value(i),
            s.program_execution.value(i),
        );
        execs
            .entry(key)
            .or_insert_with(|| Exec::new(s.program_name.value(i), s.program_execution.value(i), a));
    }
    let m = ModuleView::of(modules);
    let mut runs: BTreeMap<i32, Vec<Run>> = BTreeMap::new();
    for i in 0..m.rows {
        let d = m.device.value(i);
        let (a, b) = (m.start.value(i), m.start.value(i) + m.dur.value(i));
        if let Some(&(w0, w1)) = windows.get(&d)
            && b > w0
            && a < w1
        {
            let host = (!m.orig_start.is_null(i) && !m.orig_dur.is_null(i)).then(|| {
                let h = m.orig_start.value(i);
                (h, h + m.orig_dur.value(i))
            });
            runs.entry(d).or_default().push(Run {
                gpu: (a.max(w0), b.min(w1)),
                host,
            });
        }
    }
    // Ranges without GPU work, merged per label (nested instances counted once).
    let mut labels: Vec<String> = Vec::new();
    let mut host: Vec<Vec<(i64, i64)>> = Vec::new();
    // Ranges with GPU work: the candidates for the program's own step.
    let mut working: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    if let Some(u) = user {
        let t = UserNvtx::of(u)?;
        let mut by: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        for i in 0..t.len() {
            if t.is_mark(i) || t.end.is_null(i) {
                continue;
            }
            let into = if t.gpu_ops.value(i) > 0 {
                &mut working
            } else {
                &mut by
            };
            into.entry(label(t.domain.value(i), t.name.value(i)))
                .or_default()
                .push((t.start.value(i), t.end.value(i)));
        }
        for (l, v) in by {
            labels.push(l);
            host.push(union(v));
        }
    }
    // Thunk time per execution: the collectives' exposed time, the others' whole time.
    let t = ThunkView::of(&steady.thunk);
    let mut ops = super::whatif_edges::OpSets::default();
    for i in 0..t.rows {
        let key = (
            t.device.value(i),
            t.program_id.value(i),
            t.program_execution.value(i),
        );
        if let Some(e) = execs.get_mut(&key) {
            let op = ops.of(key.1, t.name.value(i), &module_of);
            let ns = if super::whatif_edges::collective(&t, i, op.hlo) {
                let a = t.start.value(i);
                e.arrival_ns = Some(e.arrival_ns.map_or(a, |x| x.min(a)));
                let ns = (t.dur.value(i) - t.dur_hidden.value(i)).max(0);
                e.collectives_ns += ns;
                ns
            } else {
                e.compute_ns += t.dur.value(i);
                t.dur.value(i)
            };
            if ns > 0 {
                e.add_kind(ops.kind(op), ns);
            }
        }
    }
    for (key, o) in super::whatif_edges::overlaps(&t, &module_of) {
        if let Some(e) = execs.get_mut(&key) {
            e.hideable_ns = o.hideable_ns;
            e.split_ns = o.split_ns;
            e.unknown_ns = o.unknown_ns;
        }
    }
    let beside = beside_collectives(&t);
    let mut by_device: BTreeMap<i32, Vec<Exec>> = BTreeMap::new();
    for ((d, ..), e) in execs {
        by_device.entry(d).or_default().push(e);
    }
    let mut devices = Vec::new();
    for (device, (w0, w1)) in windows {
        let busy = busy_spans(runs.remove(&device).unwrap_or_default());
        let gaps = busy
            .windows(2)
            .filter(|p| p[1].gpu.0 > p[0].gpu.1)
            .map(|p| {
                let (a, b) = (p[0].gpu.1, p[1].gpu.0);
                Gap {
                    start_ns: a,
                    dur_ns: b - a,
                    host: host
                        .iter()
                        .enumerate()
                        .map(|(k, u)| (k as u32, covered(u, a, b)))
                        .filter(|&(_, ns)| ns > 0)
                        .collect(),
                    waited_ns: waited(&p[0], &p[1]),
                }
            })
            .collect();
        let mut execs = by_device.remove(&device).unwrap_or_default();
        execs.sort_by_key(|e| e.start_ns);
        let (beside_extra_ns, beside_overlap_ns) = beside.get(&device).copied().unwrap_or_default();
        devices.push(DeviceSteps {
            device,
            start_ns: w0,
            end_ns: w1,
            gaps,
            execs,
            beside_extra_ns,
            beside_overlap_ns,
            step_range: step_range(&working, w0, w1),
        });
    }
    let without_hlo = without_hlo.into_iter().collect();
    let (matmuls, f32_casts) = ops.finish(&module_of);
    Ok(StepTimeline {
        process: process.to_string(),
        devices,
        labels,
        without_hlo,
        host_work: union(host.into_iter().flatten().collect()),
        matmuls,
        f32_casts,
    })
}

/// A module execution's GPU span (projected) and the host's range that launched it, when
/// known; or a span of merged ones (the host's: its first start and last end).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Run {
    gpu: (i64, i64),
    host: Option<(i64, i64)>,
}

/// The GPU's busy spans: runs merged where they overlap, sorted. A span's host range is
/// known only when every run's is.
fn busy_spans(mut runs: Vec<Run>) -> Vec<Run> {
    runs.sort_unstable_by_key(|r| r.gpu);
    let mut out: Vec<Run> = Vec::with_capacity(runs.len());
    for r in runs {
        match out.last_mut() {
            Some(last) if r.gpu.0 <= last.gpu.1 => {
                last.gpu.1 = last.gpu.1.max(r.gpu.1);
                last.host = match (last.host, r.host) {
                    (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
                    _ => None,
                };
            }
            _ => out.push(r),
        }
    }
    out
}

/// Below this, the GPU finished about as soon as the host had launched its work (a launch's
/// latency and a short kernel): nothing to call a wait [ns].
const MIN_WAIT_NS: i64 = 10_000;

/// How long the host waited for the GPU before the gap between busy spans `before` and
/// `after`: from the end of its last launch of `before` to the GPU's end of it, when it
/// began launching `after` only once the GPU was done (else it was ahead, and nothing waited)
/// [ns]. 0 where a host range is unknown, and below [`MIN_WAIT_NS`].
fn waited(before: &Run, after: &Run) -> i64 {
    match (before.host, after.host) {
        (Some((_, launched)), Some((next, _))) if next >= before.gpu.1 => {
            Some(before.gpu.1 - launched)
                .filter(|&w| w >= MIN_WAIT_NS)
                .unwrap_or(0)
        }
        _ => 0,
    }
}

/// The range that marks the program's steps in a window [w0, w1): of the ranges with GPU
/// work and at least two instances starting in it, the one whose instances (not
/// overlapping each other) cover most of it, at least half; the starts of its instances.
fn step_range(
    working: &BTreeMap<String, Vec<(i64, i64)>>,
    w0: i64,
    w1: i64,
) -> Option<(String, Vec<i64>)> {
    let mut best: Option<(f64, &String, Vec<i64>)> = None;
    for (l, v) in working {
        let mut inside: Vec<(i64, i64)> = v
            .iter()
            .copied()
            .filter(|&(a, _)| a >= w0 && a < w1)
            .collect();
        inside.sort_unstable();
        let disjoint = inside.windows(2).all(|p| p[1].0 >= p[0].1);
        if inside.len() < 2 || !disjoint {
            continue;
        }
        let cover: i64 = inside.iter().map(|&(a, b)| b.min(w1) - a).sum();
        let share = cover as f64 / (w1 - w0).max(1) as f64;
        if share >= 0.5 && best.as_ref().is_none_or(|(s, ..)| share > *s) {
            best = Some((share, l, inside.iter().map(|p| p.0).collect()));
        }
    }
    best.map(|(_, l, starts)| (l.clone(), starts))
}

/// A device's steady state as the scenarios see it: its steps (from one start of the step's
/// program to the next), or the whole window as one when no step is known.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub process: usize,
    pub device: i32,
    /// How the steps were cut.
    pub stepped: Stepping,
    pub steps: Vec<StepWindow>,
    /// Compute thunks' time beyond their time alone while a collective ran beside them, and
    /// the time they overlapped one [ms].
    pub beside_extra_ms: f64,
    pub beside_overlap_ms: f64,
}

/// One step on a device [ms]: its wall time, the GPU's busy time and each gap with what the
/// host did in it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct StepWindow {
    /// The step program's execution that starts it (None: the steady window) and when the
    /// device arrived at its first collective [ms, the profile's clock].
    pub execution: Option<i32>,
    pub arrival_ms: Option<f64>,
    pub wall_ms: f64,
    pub busy_ms: f64,
    /// Of the busy time, the thunks' exposed time of the executions that start in the step:
    /// collectives, the rest.
    pub collectives_ms: f64,
    pub compute_ms: f64,
    /// Of the collectives' time: what independent computation could hide, what a split into
    /// two micro-batches could hide of the rest, and what has unknown edges.
    pub hideable_ms: f64,
    pub split_ms: f64,
    pub unknown_ms: f64,
    /// The module executions that start in it, the programs they run, and the most
    /// executions of one program.
    pub executions: usize,
    pub programs: usize,
    pub repeats: usize,
    /// In time order; the last one (when the step ends in a gap) is the one before the next
    /// step.
    pub gaps: Vec<GapMs>,
    /// The thunks' time (collectives exposed) by (module, what ran) [ms].
    pub kinds: Vec<(String, String, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GapMs {
    pub ms: f64,
    /// Of it, time the host compiled.
    pub compiling_ms: f64,
    /// Of it, time in each host range (by label).
    pub host: Vec<(String, f64)>,
    /// How long the host waited for the GPU before it ([`Gap::waited_ns`]).
    pub waited_ms: f64,
}

/// How a device's steady state is cut into steps.
#[derive(Clone, Debug, PartialEq)]
pub enum Stepping {
    /// At the starts of the step program's executions.
    Program,
    /// At the first execution in each instance of the program's own step range (its label).
    Range(String),
    /// Not: the steady window is one step.
    Whole,
}

/// A device's step boundaries: the starts of the step program's executions (the last start
/// ends no step), else the first GPU work of each instance of the program's step range,
/// else the steady window as one step. With the range, a cut is the first execution
/// starting after the instance does, so a gap is never cut in two.
fn bounds<'a>(
    d: &'a DeviceSteps,
    step: Option<&str>,
) -> (Stepping, Vec<(i64, i64, Option<&'a Exec>)>) {
    let starts: Vec<&Exec> = step.map_or(Vec::new(), |n| {
        d.execs.iter().filter(|e| e.program == n).collect()
    });
    if starts.len() >= 2 {
        let cuts = starts
            .windows(2)
            .map(|w| (w[0].start_ns, w[1].start_ns, Some(w[0])))
            .collect();
        return (Stepping::Program, cuts);
    }
    if let Some((l, marks)) = &d.step_range {
        let mut firsts: Vec<i64> = marks
            .iter()
            .filter_map(|&m| {
                // Executions are by start.
                let at = d.execs.partition_point(|e| e.start_ns < m);
                d.execs.get(at).map(|e| e.start_ns)
            })
            .collect();
        firsts.dedup();
        if firsts.len() >= 2 {
            let cuts = firsts.windows(2).map(|w| (w[0], w[1], None)).collect();
            return (Stepping::Range(l.clone()), cuts);
        }
    }
    (Stepping::Whole, vec![(d.start_ns, d.end_ns, None)])
}

impl Window {
    /// The windows of every process's devices, with the compilations of each process
    /// (process, start, end [ms] on the profile's clock) laid over the gaps, cut into the
    /// executions of the step program when it is known.
    pub fn all(
        parts: &[&StepTimeline],
        compiles: &[(String, f64, f64)],
        step: Option<&str>,
    ) -> Vec<Window> {
        let mut out = Vec::new();
        for (p, t) in parts.iter().enumerate() {
            let comp: Vec<(i64, i64)> = union(
                compiles
                    .iter()
                    .filter(|(q, ..)| *q == t.process)
                    .map(|&(_, a, b)| ((a * 1e6) as i64, (b * 1e6) as i64))
                    .collect(),
            );
            // The host's work of both kinds, compiling and its own ranges: what of a wait
            // was not one.
            let work = union(comp.iter().chain(&t.host_work).copied().collect());
            for d in &t.devices {
                let (stepped, cuts) = bounds(d, step);
                let steps = cuts
                    .into_iter()
                    .map(|(a, b, first)| {
                        // Gaps and executions are by start: each step reads its own.
                        let from = d.gaps.partition_point(|g| g.start_ns < a);
                        let inside: Vec<&Gap> = d.gaps[from..]
                            .iter()
                            .take_while(|g| g.start_ns < b)
                            .filter(|g| g.start_ns + g.dur_ns <= b)
                            .collect();
                        let idle: i64 = inside.iter().map(|g| g.dur_ns).sum();
                        let last = stepped == Stepping::Whole;
                        let mut sum = [0i64; 5];
                        let mut executions = 0;
                        let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
                        let mut kinds: BTreeMap<(&str, &str), i64> = BTreeMap::new();
                        let from_exec = d.execs.partition_point(|e| e.start_ns < a);
                        for e in d.execs[from_exec..]
                            .iter()
                            .take_while(|e| e.start_ns < b || last)
                        {
                            let v = [
                                e.collectives_ns,
                                e.compute_ns,
                                e.hideable_ns,
                                e.split_ns,
                                e.unknown_ns,
                            ];
                            for (s, x) in sum.iter_mut().zip(v) {
                                *s += x;
                            }
                            executions += 1;
                            *runs.entry(e.program.as_str()).or_default() += 1;
                            for (k, ns) in &e.kinds {
                                *kinds.entry((e.program.as_str(), k.as_str())).or_default() += ns;
                            }
                        }
                        let ms = |k: usize| sum[k] as f64 * 1e-6;
                        StepWindow {
                            execution: first.map(|e| e.execution),
                            arrival_ms: first.and_then(|e| e.arrival_ns).map(|x| x as f64 * 1e-6),
                            wall_ms: (b - a) as f64 * 1e-6,
                            busy_ms: (b - a - idle) as f64 * 1e-6,
                            collectives_ms: ms(0),
                            compute_ms: ms(1),
                            hideable_ms: ms(2),
                            split_ms: ms(3),
                            unknown_ms: ms(4),
                            executions,
                            programs: runs.len(),
                            repeats: runs.values().copied().max().unwrap_or(0),
                            kinds: kinds
                                .into_iter()
                                .map(|((m, k), ns)| {
                                    (m.to_string(), k.to_string(), ns as f64 * 1e-6)
                                })
                                .collect(),
                            gaps: inside
                                .into_iter()
                                .map(|g| GapMs {
                                    ms: g.dur_ns as f64 * 1e-6,
                                    compiling_ms: covered(&comp, g.start_ns, g.start_ns + g.dur_ns)
                                        as f64
                                        * 1e-6,
                                    host: g
                                        .host
                                        .iter()
                                        .map(|&(k, ns)| {
                                            (t.labels[k as usize].clone(), ns as f64 * 1e-6)
                                        })
                                        .collect(),
                                    waited_ms: (g.waited_ns
                                        - covered(&work, g.start_ns - g.waited_ns, g.start_ns))
                                        as f64
                                        * 1e-6,
                                })
                                .collect(),
                        }
                    })
                    .collect();
                out.push(Window {
                    process: p,
                    device: d.device,
                    stepped,
                    steps,
                    beside_extra_ms: d.beside_extra_ns as f64 * 1e-6,
                    beside_overlap_ms: d.beside_overlap_ns as f64 * 1e-6,
                });
            }
        }
        out
    }

    /// The median gap between two calls in which the host neither compiled nor worked in a
    /// range of its own: what a dispatch costs (None without such a gap). With steps, the
    /// gap before the next step (the loop's own host work) is not one.
    pub fn plain_gap_ms(&self) -> Option<f64> {
        let stepped = self.stepped != Stepping::Whole;
        let mut v: Vec<f64> = self
            .steps
            .iter()
            .flat_map(|s| &s.gaps[..s.gaps.len() - usize::from(stepped && !s.gaps.is_empty())])
            .filter(|g| g.compiling_ms <= 0.0 && g.host.is_empty())
            .map(|g| g.ms)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }
}

/// The `q`-quantile of `v` (linear between ranks); `v` not empty.
pub(super) fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let x = q * (v.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
}

/// The index of the median of `v`'s values (the lower one of an even count); `v` not empty.
pub(super) fn median_index(v: &[f64]) -> usize {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    idx[(idx.len() - 1) / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_each_instant_once() {
        let u = union(vec![(0, 10), (5, 20), (30, 40)]);
        assert_eq!(u, vec![(0, 20), (30, 40)]);
        assert_eq!(covered(&u, 15, 35), 5 + 5);
        assert_eq!(covered(&u, 20, 30), 0);
        assert_eq!(covered(&u, -5, 100), 30);
    }

    #[test]
    fn the_host_waited_when_it_launched_nothing_more_until_the_gpu_was_done() {
        // Times in µs.
        let us = |(a, b): (i64, i64)| (a * 1000, b * 1000);
        let run = |gpu: (i64, i64), host: (i64, i64)| Run {
            gpu: us(gpu),
            host: Some(us(host)),
        };
        // Launched by 10, ran until 50; the next launched at 60: the host waited 40.
        let spans = busy_spans(vec![run((70, 100), (60, 65)), run((5, 50), (0, 10))]);
        assert_eq!(spans[0].gpu, us((5, 50)));
        assert_eq!(waited(&spans[0], &spans[1]), 40_000);
        // The next launched at 30, before the GPU was done: the host was ahead.
        let ahead = run((70, 100), (30, 35));
        assert_eq!(waited(&spans[0], &ahead), 0);
        // Done 5 µs after the launch: no wait to speak of.
        assert_eq!(waited(&run((5, 15), (0, 10)), &run((20, 30), (16, 18))), 0);
        // Overlapping runs merge, their host ranges too; an unknown one leaves it unknown.
        let merged = busy_spans(vec![run((5, 50), (0, 10)), run((40, 60), (8, 20))]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].host, Some(us((0, 20))));
        assert_eq!(waited(&merged[0], &run((70, 80), (65, 66))), 40_000);
        let unknown = Run {
            gpu: us((40, 60)),
            host: None,
        };
        let merged = busy_spans(vec![run((5, 50), (0, 10)), unknown]);
        assert_eq!(waited(&merged[0], &run((70, 80), (65, 66))), 0);
    }

    #[test]
    fn a_wait_loses_the_host_work_in_it_once_whether_ranges_compilations_or_both() {
        // Times in ms. The GPU ran 0..10 and 20..30; the host launched the first by 2 and
        // the second at 20: its span from 2 to 10 is a wait, less its work then. Its own
        // range 3..6 and a compilation 5..8 overlap at 5..6, counted once: 8 - 5 = 3 ms.
        let ms = |x: f64| (x * 1e6) as i64;
        let gap = Gap {
            start_ns: ms(10.0),
            dur_ns: ms(10.0),
            host: Vec::new(),
            waited_ns: ms(8.0),
        };
        let t = StepTimeline {
            process: "p".into(),
            devices: vec![DeviceSteps {
                device: 0,
                start_ns: 0,
                end_ns: ms(30.0),
                gaps: vec![gap],
                execs: vec![Exec::new("a", 0, 0), Exec::new("a", 1, ms(20.0))],
                beside_extra_ns: 0,
                beside_overlap_ns: 0,
                step_range: None,
            }],
            labels: Vec::new(),
            without_hlo: Vec::new(),
            host_work: vec![(ms(3.0), ms(6.0))],
            ..Default::default()
        };
        let waited = |compiles: &[(String, f64, f64)]| {
            let w = Window::all(&[&t], compiles, None);
            w[0].steps[0].gaps[0].waited_ms
        };
        assert!((waited(&[]) - 5.0).abs() < 1e-9);
        assert!((waited(&[("p".into(), 5.0, 8.0)]) - 3.0).abs() < 1e-9);
        // Another process's compilation is not this host's work.
        assert!((waited(&[("q".into(), 5.0, 8.0)]) - 5.0).abs() < 1e-9);
    }

    #[test]
    fn the_plain_gap_leaves_out_compiling_and_host_ranges() {
        let g = |ms, c, h: &[(&str, f64)]| GapMs {
            ms,
            compiling_ms: c,
            host: h.iter().map(|(l, x)| (l.to_string(), *x)).collect(),
            waited_ms: 0.0,
        };
        let w = Window {
            process: 0,
            device: 0,
            stepped: Stepping::Whole,
            beside_extra_ms: 0.0,
            beside_overlap_ms: 0.0,
            steps: vec![StepWindow {
                execution: None,
                arrival_ms: None,
                wall_ms: 10.0,
                busy_ms: 1.0,
                collectives_ms: 0.0,
                compute_ms: 1.0,
                hideable_ms: 0.0,
                split_ms: 0.0,
                unknown_ms: 0.0,
                executions: 6,
                programs: 1,
                repeats: 6,
                kinds: Vec::new(),
                gaps: vec![
                    g(0.3, 0.0, &[]),
                    g(5.0, 4.0, &[]),
                    g(0.2, 0.0, &[]),
                    g(3.0, 0.0, &[("load", 2.9)]),
                    g(0.4, 0.0, &[]),
                ],
            }],
        };
        assert_eq!(w.plain_gap_ms(), Some(0.3));
        // Cut into steps, the gap that ends a step is the loop's, not a call's.
        let mut stepped = w.clone();
        stepped.stepped = Stepping::Range("step".into());
        stepped.steps[0].gaps.push(g(9.0, 0.0, &[]));
        stepped.steps[0].gaps.push(g(9.0, 0.0, &[]));
        assert_eq!(stepped.plain_gap_ms(), Some(0.4));
    }

    fn device(execs: &[(&str, i64)], marks: Option<Vec<i64>>) -> DeviceSteps {
        DeviceSteps {
            device: 0,
            start_ns: 0,
            end_ns: 1000,
            gaps: Vec::new(),
            execs: execs
                .iter()
                .map(|&(program, start_ns)| Exec::new(program, 0, start_ns))
                .collect(),
            beside_extra_ns: 0,
            beside_overlap_ns: 0,
            step_range: marks.map(|m| ("step".to_string(), m)),
        }
    }

    #[test]
    fn steps_are_cut_at_the_step_program_else_at_the_first_work_of_the_step_range() {
        let execs = [("a", 10), ("b", 20), ("a", 110), ("b", 120), ("a", 210)];
        let (d, r, w) = (
            device(&execs, None),
            device(&execs, Some(vec![5, 105, 205])),
            device(&execs, None),
        );
        let (how, cuts) = bounds(&d, Some("b"));
        assert_eq!(how, Stepping::Program);
        assert_eq!(
            cuts.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(),
            [(20, 120)]
        );
        // No step program: each range instance starts its step at the first execution after
        // it starts (the host's range opens before the GPU's work).
        let (how, cuts) = bounds(&r, None);
        assert_eq!(how, Stepping::Range("step".into()));
        assert_eq!(
            cuts.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(),
            [(10, 110), (110, 210)]
        );
        let (how, cuts) = bounds(&w, None);
        assert_eq!(how, Stepping::Whole);
        assert_eq!(cuts.len(), 1);
    }

    #[test]
    fn the_step_range_covers_half_the_window_and_its_instances_do_not_overlap() {
        let mut w: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        w.insert("step".into(), vec![(0, 45), (50, 95), (100, 145)]);
        // An outer range once: not a step; a short one: covers too little.
        w.insert("epoch".into(), vec![(0, 150)]);
        w.insert("log".into(), vec![(40, 45), (90, 95), (140, 145)]);
        w.insert("nested".into(), vec![(0, 100), (10, 20), (100, 150)]);
        let (l, starts) = step_range(&w, 0, 150).unwrap();
        assert_eq!((l.as_str(), starts), ("step", vec![0, 50, 100]));
        w.remove("step");
        assert_eq!(step_range(&w, 0, 150), None);
    }
}
