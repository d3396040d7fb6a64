//! The scenarios of `whatif` (docs/whatif.md): each device's steady window as the parts of its
//! critical path, and per problem a change of those parts; the step is predicted from the
//! device that finishes last.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;

use super::diagnose::Diagnosis;
use super::whatif_model::{Stepping, Window, median_index, quantile};
pub(super) use super::whatif_path::{Kind, Path, on_time};
use super::whatif_path::{op_shares, parts_of, path};
use crate::formats::hlo::cost::Math;
use crate::units::{duration_ms, pct};

pub use super::whatif_result::{FindingSaving, Part, PathRow, Scenario, WhatIf};

/// The share of the dense bf16 peak a large bf16 GEMM reaches when the profile has none of
/// its own to measure: 73 % measured on H200 (4096³ bf16 GEMMs, `bf16_gemm` capture), taken
/// as 70 %.
pub const BF16_GEMM_FRACTION: f64 = 0.7;
/// How much longer computation runs per millisecond of a collective beside it, when the
/// profile has no overlapped computation to measure it on: 0.31 measured on H200
/// (`overlapped_allreduce`: 8192 × 4096 × 4096 bf16 GEMMs beside 64 MiB all-reduces on two
/// GPUs), taken as 0.3. NCCL's kernels take SMs the GEMMs would use.
pub const BESIDE_SLOWDOWN: f64 = 0.3;

/// What the host takes to dispatch a compiled jitted call, when the profile has no gap
/// between two calls of a step to measure it on [ms]: 0.13 ms measured on H200
/// (`fixed_shapes`: two calls per step, the gap between them 0.12–0.16 ms).
pub const DISPATCH_MS: f64 = 0.13;

/// What an iteration of an XLA while loop costs the GPU beyond its kernels [ms]: about 14 µs
/// on H200 (30 iterations of one tiny fusion under `lax.fori_loop` leave the GPU idle 0.43 ms
/// between the module's kernels, docs/whatif.md).
pub const LOOP_ITERATION_MS: f64 = 0.0143;
/// The overlap [ms] over which the profile's own slowdown is measured, at least.
const BESIDE_MEASURED_MS: f64 = 0.1;
/// A GEMM of at least this many FLOPs per execution measures the rate bf16 matmuls reach.
const LARGE_GEMM_FLOPS: f64 = 1e9;

/// What the scenarios read of the other analyses.
pub struct Facts<'a> {
    pub diagnosis: Option<&'a Diagnosis>,
    pub roofline: Option<&'a super::roofline_model::Roofline>,
    pub stragglers: Option<&'a super::stragglers::Stragglers>,
    /// Whether a process compiled a program more than once.
    pub recompiles: bool,
    /// The steady matmuls, and the casts the f32 ones cost, as (program id, thunk).
    pub matmuls: FxHashSet<(&'a str, &'a str)>,
    pub f32_casts: FxHashSet<(&'a str, &'a str)>,
}

impl Facts<'_> {
    /// The rate bf16 matmuls reach on this GPU [TFLOP/s]: the profile's own large bf16
    /// GEMMs' (matmuls by their op class: not attention, whose FLOPs run at other rates),
    /// else [`BF16_GEMM_FRACTION`] of the bf16 peak; and how it is known.
    pub fn bf16_rate(&self) -> Option<(f64, String)> {
        let r = self.roofline?;
        let (flops, ms) = r
            .ops
            .iter()
            .filter(|o| o.math == "bf16" && o.flops >= LARGE_GEMM_FLOPS && o.time_ms > 0.0)
            .filter(|o| {
                self.matmuls
                    .contains(&(o.program_id.as_str(), o.thunk.as_str()))
            })
            .fold((0.0, 0.0), |(f, t), o| {
                (f + o.flops * o.executions as f64, t + o.time_ms)
            });
        if ms > 0.0 {
            let rate = flops / (ms * 1e-3) / 1e12;
            return Some((
                rate,
                format!("{} TFLOP/s, this profile's bf16 GEMMs", pct(rate)),
            ));
        }
        let peak = r.peaks.as_ref()?.tflops.get(&Math::Bf16).copied()?;
        Some((
            BF16_GEMM_FRACTION * peak,
            format!(
                "{} TFLOP/s, {} % of the bf16 peak (the profile has no large bf16 GEMM)",
                pct(BF16_GEMM_FRACTION * peak),
                pct(BF16_GEMM_FRACTION * 100.0)
            ),
        ))
    }
}

/// A device's steps as paths.
#[derive(Clone, Debug)]
struct Device {
    process: usize,
    device: i32,
    steps: Vec<Path>,
}

/// Every device's steps as paths. Where devices exchange data, a step's path crosses to the
/// device that arrived last at its first collective: the others' waits for it (arrivals on
/// clocks aligned by `offsets_ms`, per device) become parts of their own.
fn devices(windows: &[Window], offsets_ms: &BTreeMap<i32, f64>) -> Vec<Device> {
    let mut devs: Vec<Device> = windows
        .iter()
        .map(|w| {
            let plain = w.plain_gap_ms();
            let who = (w.process, w.device);
            Device {
                process: w.process,
                device: w.device,
                steps: w.steps.iter().map(|s| path(who, s, plain)).collect(),
            }
        })
        .collect();
    // Per step execution: each device's (index, step, aligned arrival).
    let mut by_exec: BTreeMap<i32, Vec<(usize, usize, f64)>> = BTreeMap::new();
    for (i, w) in windows.iter().enumerate() {
        let off = offsets_ms.get(&w.device).copied().unwrap_or(0.0);
        for (k, s) in w.steps.iter().enumerate() {
            if let (Some(e), Some(a)) = (s.execution, s.arrival_ms) {
                by_exec.entry(e).or_default().push((i, k, a - off));
            }
        }
    }
    for arrivals in by_exec.values().filter(|v| v.len() >= 2) {
        let (li, lk, last) = arrivals
            .iter()
            .copied()
            .max_by(|a, b| a.2.total_cmp(&b.2))
            .expect("two arrivals");
        let first = arrivals.iter().map(|a| a.2).fold(f64::INFINITY, f64::min);
        let late = (devs[li].process, devs[li].device);
        // A step's window starts where its execution does: what made the device late to
        // it is in the gaps of the window before.
        if lk > 0 {
            devs[li].steps[lk - 1].late = last - first;
        }
        for &(i, k, a) in arrivals {
            if i == li {
                continue;
            }
            let p = &mut devs[i].steps[k];
            let wait = p.take(&Kind::Collectives, last - a);
            p.add(Kind::WaitFor(late.0, late.1), wait);
        }
    }
    devs
}

/// A scenario: its rule, what changes, and the change on each path.
pub(super) type Change<'a> = (String, String, Box<dyn Fn(&mut Path) + 'a>);

/// `per_step`: what a total over the steady state of every device is per device and step.
/// `stepped`: whether the paths are steps (else each is a whole steady state).
fn changes<'a>(
    devs: &[Device],
    f: &'a Facts,
    per_step: f64,
    stepped: bool,
    beside: (f64, String),
) -> Vec<Change<'a>> {
    let paths: Vec<&Path> = devs.iter().flat_map(|d| &d.steps).collect();
    let mut out: Vec<Change> = Vec::new();
    // The program's own host range that keeps the GPU waiting longest.
    let mut ranges: Vec<(String, f64)> = Vec::new();
    for p in &paths {
        for (k, ms) in &p.parts {
            if let Kind::HostRange(l) = k {
                match ranges.iter_mut().find(|(x, _)| x == l) {
                    Some((_, v)) => *v += ms,
                    None => ranges.push((l.clone(), *ms)),
                }
            }
        }
    }
    ranges.sort_by(|a, b| b.1.total_cmp(&a.1));
    if let Some((l, _)) = ranges.into_iter().next() {
        let k = Kind::HostRange(l.clone());
        out.push((
            "host-bound".into(),
            format!("the host's `{l}` done before the step needs it (a prefetching thread)"),
            Box::new(move |p: &mut Path| {
                p.take(&k, f64::INFINITY);
            }),
        ));
    }
    // A step of many module executions, the host dispatching and syncing between them: in
    // one jitted call the gaps between them go; the one before the next step stays.
    let calls: Vec<f64> = paths.iter().map(|p| p.executions as f64).collect();
    if stepped
        && !calls.is_empty()
        && quantile(&calls, 0.5) >= 2.0
        && paths.iter().any(|p| p.between > 0.0)
    {
        out.push((
            "host-bound".into(),
            format!(
                "the step's {} module executions in one jitted call (the repeated calls \
                 under lax.scan or fori_loop, host syncs left to the step's end)",
                quantile(&calls, 0.5)
            ),
            Box::new(|p: &mut Path| {
                // A call per program stays: the gap before the next step, and one of the
                // gaps between executions per other program.
                let keep = if p.executions > 1 {
                    p.between * p.programs.saturating_sub(1) as f64 / (p.executions - 1) as f64
                } else {
                    0.0
                };
                let b = p.between - keep;
                p.take(&Kind::Dispatch, b);
                // The repeated calls become a loop's iterations.
                if p.repeats > 1 {
                    p.add(Kind::KernelGaps, LOOP_ITERATION_MS * p.repeats as f64);
                }
            }),
        ));
    }
    // The host waiting for the GPU (a block_until_ready or a device read each step): without
    // the wait it goes on to its next work while the GPU runs, and each gap shrinks by as
    // much as the host waited before it.
    let waits: Vec<f64> = paths.iter().map(|p| p.waited).collect();
    if waits.iter().any(|&w| w > 0.0) {
        let typical = quantile(&waits, 0.5);
        out.push((
            "host-bound".into(),
            format!(
                "no host sync in the loop (block_until_ready, a device value read): the host \
                 waits {} per {} for the GPU now; without the wait it goes on while the GPU runs",
                duration_ms(typical),
                if stepped { "step" } else { "steady state" }
            ),
            Box::new(|p: &mut Path| {
                let w = p.waited;
                p.take_gaps(w);
            }),
        ));
    }
    // Compilations in the steady state: every gap with one as long as a plain one.
    if paths.iter().any(|p| p.compile_gaps > 0) {
        let (rule, change) = if f.recompiles {
            (
                "recompilation",
                "every program compiled once, before the steady state (fixed shapes)",
            )
        } else {
            (
                "compile-time",
                "the programs compiled before the steady state (a warm-up call, or \
                 jax_compilation_cache_dir)",
            )
        };
        out.push((
            rule.into(),
            change.into(),
            Box::new(|p: &mut Path| {
                p.take(&Kind::Compiling, f64::INFINITY);
                let plain = p.plain_gap.unwrap_or(DISPATCH_MS) * p.compile_gaps as f64;
                p.add(Kind::Dispatch, plain);
            }),
        ));
    }
    // Matmuls in f32 on the FP32 units at the rate bf16 GEMMs reach.
    if let (Some(r), Some((rate, how))) = (f.roofline, f.bf16_rate()) {
        let step = r.step.as_ref().map(|s| s.module.as_str());
        let in_step = |o: &&super::roofline_model::OpRow| step.is_none_or(|m| o.module == m);
        let (time, new): (f64, f64) = r
            .ops
            .iter()
            .filter(|o| o.math == "f32" && o.flops > 0.0)
            .filter(in_step)
            .fold((0.0, 0.0), |(t, n), o| {
                (
                    t + o.time_ms,
                    n + o.flops * o.executions as f64 / (rate * 1e12) * 1e3,
                )
            });
        // The casts to and from f32 around them go: the bf16 matmuls read and write bf16.
        let (casts, cast_ms) = r
            .ops
            .iter()
            .filter(in_step)
            .filter(|o| {
                f.f32_casts
                    .contains(&(o.program_id.as_str(), o.thunk.as_str()))
            })
            .fold((0, 0.0), |(n, t), o| (n + 1, t + o.time_ms));
        if time > 0.0 {
            let saved = (time + cast_ms - new).max(0.0) * per_step;
            let casts = match casts {
                0 => String::new(),
                n => format!(", and {n} casts to or from f32 around them gone"),
            };
            out.push((
                "precision".into(),
                format!("the f32 matmuls in bf16 ({how}){casts}"),
                Box::new(move |p: &mut Path| {
                    p.take(&Kind::Compute, saved);
                }),
            ));
        }
    }
    // A late device on time: the others' waits for it leave their paths, and its own host
    // gap before the step shrinks by how late it was.
    let mut waited: Vec<((usize, i32), f64)> = Vec::new();
    for p in &paths {
        for (k, ms) in &p.parts {
            if let Kind::WaitFor(q, d) = k {
                match waited.iter_mut().find(|(w, _)| *w == (*q, *d)) {
                    Some((_, v)) => *v += ms,
                    None => waited.push(((*q, *d), *ms)),
                }
            }
        }
    }
    let most = waited.into_iter().max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some(((q, d), total)) = most.filter(|m| m.1 > 0.0) {
        let lates: Vec<f64> = paths
            .iter()
            .filter(|p| p.who == (q, d) && p.late > 0.0)
            .map(|p| p.late)
            .collect();
        let typical = if lates.is_empty() {
            0.0
        } else {
            quantile(&lates, 0.5)
        };
        out.push((
            "stragglers".into(),
            format!(
                "device {d} (process {q}) on time: the others wait {} for it per step now \
                 (it arrives {} late at a median step)",
                duration_ms(total / paths.iter().filter(|p| p.who != (q, d)).count().max(1) as f64),
                duration_ms(typical)
            ),
            Box::new(move |p: &mut Path| on_time(p, (q, d))),
        ));
    } else if let Some(late) = f.stragglers.and_then(|s| {
        s.per_device
            .iter()
            .filter(|d| d.steps > 0 && 2 * d.steps_last >= d.steps)
            .map(|d| (d.device, d.step_lateness_us_median / 1e3))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }) && late.1 > 0.0
    {
        let (device, lateness) = late;
        out.push((
            "stragglers".into(),
            format!(
                "device {device} on time (late by {} per step now)",
                duration_ms(lateness)
            ),
            // The others' wait is in their collectives; the late one's delay in its gaps.
            Box::new(move |p: &mut Path| {
                let mut left = lateness;
                for k in [Kind::Collectives, Kind::Dispatch] {
                    left -= p.take(&k, left);
                }
            }),
        ));
    }
    // Collectives overlapped with computation, as far as there is computation to hide them;
    // the computation beside them slows down.
    // Of the collectives' exposed time, what independent computation (HLO edges) could hide;
    // with unknown edges any computation is taken to be independent.
    let sum = |f: fn(&Path) -> f64| paths.iter().map(|p| f(p)).sum::<f64>();
    let (hideable, split, unknown) = (sum(|p| p.hideable), sum(|p| p.split), sum(|p| p.unknown));
    let (slow, how) = beside;
    let slower =
        format!("computation beside a collective takes {slow:.2} ms longer per ms of it, {how}");
    let unknown_note = if unknown > 0.0 {
        format!(
            "; the HLO's edges are unknown for {} of collectives per step, taken as \
             independent",
            duration_ms(unknown / paths.len() as f64)
        )
    } else {
        String::new()
    };
    if hideable + unknown > 0.0 {
        let slower = slower.clone();
        out.push((
            "exposed-communication".into(),
            format!(
                "the collectives overlapped with the computation that does not depend on \
                 them ({slower}{unknown_note})"
            ),
            Box::new(move |p: &mut Path| {
                let free = p.hideable + p.unknown.min(p.get(&Kind::Compute));
                let hide = p.get(&Kind::Collectives).min(free);
                p.take(&Kind::Collectives, hide);
                p.add(Kind::Compute, slow * hide);
            }),
        ));
    }
    if split > 0.0 {
        out.push((
            "exposed-communication".into(),
            format!(
                "the collectives overlapped as above, and those that only their own producer \
                 and consumer surround split into two micro-batches, each half's collective \
                 beside the other half's computation ({slower}{unknown_note})"
            ),
            Box::new(move |p: &mut Path| {
                let free = p.hideable + p.split + p.unknown.min(p.get(&Kind::Compute));
                let hide = p.get(&Kind::Collectives).min(free);
                p.take(&Kind::Collectives, hide);
                p.add(Kind::Compute, slow * hide);
            }),
        ));
    }
    // Findings whose time at stake is GPU work re-timed on the path.
    for f in f.diagnosis.map_or(&[][..], |d| &d.findings[..]) {
        let kind = match f.rule.as_str() {
            "attention" | "wasted-flops" => Kind::Compute,
            "idle-in-modules" => Kind::KernelGaps,
            "slow-collectives" => Kind::Collectives,
            // Copies between modules run in the gaps.
            "host-device-copies" => Kind::Dispatch,
            _ => continue,
        };
        let saved = f.at_stake_ms * per_step;
        out.push((
            f.rule.clone(),
            format!("as the finding says: {}", f.title),
            Box::new(move |p: &mut Path| {
                p.take(&kind, saved);
            }),
        ));
    }
    out
}

/// How much longer computation runs per millisecond of a collective beside it: measured on
/// the profile's own overlapped computation, else [`BESIDE_SLOWDOWN`]; and how it is known.
fn slowdown(windows: &[Window]) -> (f64, String) {
    let (extra, overlap) = windows.iter().fold((0.0, 0.0), |(e, o), w| {
        (e + w.beside_extra_ms, o + w.beside_overlap_ms)
    });
    if overlap >= BESIDE_MEASURED_MS {
        (
            (extra / overlap).max(0.0),
            format!(
                "measured on {} of overlapped computation",
                duration_ms(overlap)
            ),
        )
    } else {
        (
            BESIDE_SLOWDOWN,
            "as measured on H200, the profile has no overlapped computation".into(),
        )
    }
}

/// The critical paths and the scenarios of a run's windows: each scenario changes every
/// device's every step, a step takes as long as its slowest device, and the prediction is the
/// measured step times the median ratio of a step's new to its old time.
/// Changes made beside the profile's own (the user's): from the paths and what a total
/// over the steady state is per step; what they cannot change goes to the notes.
pub(super) type Extra<'x> = &'x dyn Fn(&[&Path], f64, &mut Vec<String>) -> Vec<Change<'static>>;

pub(super) fn predict(windows: &[Window], f: &Facts, extra: Extra) -> WhatIf {
    let offsets: BTreeMap<i32, f64> = f.stragglers.map_or_else(BTreeMap::new, |s| {
        s.offsets_us
            .iter()
            .filter_map(|(d, us)| Some((d.parse().ok()?, us * 1e-3)))
            .collect()
    });
    let devs = devices(windows, &offsets);
    let n = devs.iter().map(|d| d.steps.len()).min().unwrap_or(0);
    let old: Vec<f64> = (0..n)
        .map(|i| devs.iter().map(|d| d.steps[i].total()).fold(0.0, f64::max))
        .collect();
    if n == 0 || old.iter().all(|&x| x <= 0.0) {
        return WhatIf {
            unit: "steady state".into(),
            notes: vec!["no steady state: nothing to re-time".into()],
            ..WhatIf::default()
        };
    }
    let by = |k: &Stepping| windows.iter().all(|w| w.stepped == *k);
    let step = f.roofline.and_then(|r| r.step.as_ref());
    let mut notes = Vec::new();
    let (step_ms, unit, per_step) = match step {
        Some(s) if by(&Stepping::Program) && s.period_ms > 0.0 && s.steps >= 2.0 => {
            (s.period_ms, "step", 1.0 / (s.steps * devs.len() as f64))
        }
        _ => match &windows[0].stepped {
            Stepping::Range(l) if by(&windows[0].stepped) => {
                notes.push(format!(
                    "steps cut at the program's own range `{l}` (no step program: none \
                     with matmul FLOPs executed each step)"
                ));
                // n steps between n + 1 starts.
                let total = (n + 1) as f64 * devs.len() as f64;
                (quantile(&old, 0.5), "step", 1.0 / total)
            }
            _ => (quantile(&old, 0.5), "steady state", 1.0 / devs.len() as f64),
        },
    };
    let critical_path = devs
        .iter()
        .map(|d| {
            let walls: Vec<f64> = d.steps.iter().map(Path::total).collect();
            let m = &d.steps[median_index(&walls)];
            PathRow {
                process: d.process,
                device: d.device,
                wall_ms: m.total(),
                parts: parts_of(m),
                gpu: op_shares(m),
            }
        })
        .collect();
    // The median step, and the device that sets it.
    let m = median_index(&old);
    let slowest = |ds: &[Device]| {
        ds.iter()
            .max_by(|a, b| a.steps[m].total().total_cmp(&b.steps[m].total()))
            .map(|d| parts_of(&d.steps[m]))
            .unwrap_or_default()
    };
    let path_before = slowest(&devs);
    let stepped = unit == "step";
    let paths: Vec<&Path> = devs.iter().flat_map(|d| &d.steps).collect();
    let users = extra(&paths, per_step, &mut notes);
    let mut scenarios: Vec<Scenario> = changes(&devs, f, per_step, stepped, slowdown(windows))
        .into_iter()
        .chain(
            users
                .into_iter()
                .map(|(r, c, b)| (r, c, b as Box<dyn Fn(&mut Path)>)),
        )
        .map(|(rule, change, apply)| {
            let mut after = devs.clone();
            for p in after.iter_mut().flat_map(|d| &mut d.steps) {
                apply(p);
            }
            let ratios: Vec<f64> = (0..n)
                .map(|i| {
                    let new = after.iter().map(|d| d.steps[i].total()).fold(0.0, f64::max);
                    // A change never lengthens a step (a compiling gap shorter than a plain one).
                    if old[i] > 0.0 {
                        (new / old[i]).min(1.0)
                    } else {
                        1.0
                    }
                })
                .collect();
            let predicted = step_ms * quantile(&ratios, 0.5);
            Scenario {
                rule,
                change,
                predicted_step_ms: predicted,
                saved_ms: step_ms - predicted,
                spread_ms: [
                    step_ms * quantile(&ratios, 0.25),
                    step_ms * quantile(&ratios, 0.75),
                ],
                path_before: path_before.clone(),
                path_after: slowest(&after),
            }
        })
        .collect();
    scenarios.sort_by(|a, b| b.saved_ms.total_cmp(&a.saved_ms));
    let findings = f
        .diagnosis
        .map_or(&[][..], |d| &d.findings[..])
        .iter()
        .map(|x| {
            // Sorted: the first of its rule saves most.
            let best = scenarios.iter().find(|s| s.rule == x.rule);
            FindingSaving {
                rule: x.rule.clone(),
                title: x.title.clone(),
                at_stake_ms: x.at_stake_ms,
                saved_ms: best.map(|s| s.saved_ms),
                predicted_step_ms: best.map(|s| s.predicted_step_ms),
            }
        })
        .collect();
    WhatIf {
        findings,
        step_ms: Some(step_ms),
        unit: unit.into(),
        steps: n as f64,
        critical_path,
        scenarios,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::whatif_model::{GapMs, StepWindow};

    fn gap(ms: f64, compiling_ms: f64, host: &[(&str, f64)]) -> GapMs {
        GapMs {
            ms,
            compiling_ms,
            host: host.iter().map(|(l, x)| (l.to_string(), *x)).collect(),
            waited_ms: 0.0,
        }
    }

    /// One device's steady state, nothing measured beside collectives.
    fn window(stepped: Stepping, steps: Vec<StepWindow>) -> Window {
        Window {
            process: 0,
            device: 0,
            stepped,
            beside_extra_ms: 0.0,
            beside_overlap_ms: 0.0,
            steps,
        }
    }

    /// A step of one execution of one program, nothing measured yet.
    fn one_call() -> StepWindow {
        StepWindow {
            executions: 1,
            programs: 1,
            repeats: 1,
            ..StepWindow::default()
        }
    }

    fn none() -> Facts<'static> {
        Facts {
            diagnosis: None,
            roofline: None,
            stragglers: None,
            recompiles: true,
            matmuls: Default::default(),
            f32_casts: Default::default(),
        }
    }

    /// Four steps of 2 ms on the GPU, each after 10 ms of `load` on the host and 0.5 ms of
    /// dispatch; one gap also compiles for 30 ms.
    #[test]
    fn a_host_range_and_a_compilation_leave_the_path() {
        let mut gaps = vec![gap(10.5, 0.0, &[("load", 10.0)]); 3];
        gaps.push(gap(30.5, 30.0, &[]));
        gaps.push(gap(0.5, 0.0, &[]));
        let span = 8.0 + gaps.iter().map(|g| g.ms).sum::<f64>();
        let w = window(
            Stepping::Whole,
            vec![StepWindow {
                wall_ms: span,
                busy_ms: 8.0,
                compute_ms: 8.0,
                gaps,
                ..one_call()
            }],
        );
        let r = predict(&[w.clone()], &none(), &|_, _, _| Vec::new());
        assert_eq!(r.unit, "steady state");
        assert_eq!(r.step_ms, Some(span));
        let by = |rule: &str| {
            r.scenarios
                .iter()
                .find(|s| s.rule == rule)
                .unwrap_or_else(|| panic!("no {rule}: {:?}", r.scenarios))
        };
        // The range's 30 ms leave; the compiling gap becomes a plain one (0.5 ms).
        assert!((by("host-bound").predicted_step_ms - (span - 30.0)).abs() < 1e-9);
        assert!((by("recompilation").predicted_step_ms - (span - 30.0)).abs() < 1e-9);
        assert!(r.scenarios.iter().all(|s| s.saved_ms >= 0.0));
        // The path adds up to the step, and names the range.
        let parts = &r.critical_path[0].parts;
        let sum: f64 = parts.iter().map(|p| p.ms).sum();
        assert!((sum - span).abs() < 1e-9, "{parts:?}");
        assert!(
            parts
                .iter()
                .any(|p| p.what.contains("`load`") && (p.ms - 30.0).abs() < 1e-9)
        );
    }

    /// Steps of 2 ms on the GPU, each followed by a gap before the next in which the host
    /// works 0.5 ms (a short gap) or 3 ms (a long one), having waited 1.5 ms for the GPU
    /// before it: without the wait that work overlaps the GPU's, so the short gap goes and
    /// the long one shrinks by the wait.
    #[test]
    fn the_host_s_wait_for_the_gpu_leaves_the_gaps_it_could_have_filled() {
        let waited = |ms: f64| GapMs {
            waited_ms: 1.5,
            ..gap(ms, 0.0, &[])
        };
        let step = |g: f64| StepWindow {
            wall_ms: 2.0 + g,
            busy_ms: 2.0,
            compute_ms: 2.0,
            gaps: vec![waited(g)],
            ..one_call()
        };
        for (g, after) in [(0.5, 2.0), (3.0, 3.5)] {
            let w = window(Stepping::Program, vec![step(g); 4]);
            let r = predict(&[w], &none(), &|_, _, _| Vec::new());
            let s = &r.scenarios[0];
            assert_eq!(s.rule, "host-bound");
            assert!(s.change.starts_with("no host sync"), "{}", s.change);
            assert!((s.predicted_step_ms - after).abs() < 1e-9, "{s:?}");
        }
    }

    /// Five steps of 2 ms on the GPU after 1 ms of gap, 0.8 ms of it in `load`; one step's
    /// `load` took 49.8 ms. The prediction is the typical step's, not the outlier's.
    #[test]
    fn the_prediction_is_the_median_steps() {
        let step = |load: f64| StepWindow {
            wall_ms: 2.0 + load + 0.2,
            busy_ms: 2.0,
            compute_ms: 2.0,
            gaps: vec![gap(load + 0.2, 0.0, &[("load", load)])],
            ..one_call()
        };
        let w = window(
            Stepping::Program,
            vec![step(0.8), step(0.8), step(49.8), step(0.8), step(0.8)],
        );
        let r = predict(&[w], &none(), &|_, _, _| Vec::new());
        assert_eq!(r.step_ms, Some(3.0));
        assert_eq!(r.steps, 5.0);
        let s = &r.scenarios[0];
        assert_eq!(s.rule, "host-bound");
        assert!((s.predicted_step_ms - 2.2).abs() < 1e-9, "{s:?}");
        assert!((s.spread_ms[0] - 2.2).abs() < 1e-9 && (s.spread_ms[1] - 2.2).abs() < 1e-9);
        // The critical path is the median step's: 3 ms, 0.8 ms of it in `load`.
        let row = &r.critical_path[0];
        assert!((row.wall_ms - 3.0).abs() < 1e-9, "{row:?}");
        assert!(
            row.parts
                .iter()
                .any(|p| p.what.contains("`load`") && (p.ms - 0.8).abs() < 1e-9)
        );
    }

    /// Steps marked by the program's own range, each 30 calls of a tiny program and one
    /// read: 0.01 ms of GPU work per call, 0.2 ms of dispatch between calls, 1 ms before the
    /// next step. In one call per program the 29 gaps between the tiny calls go (one stays
    /// for the read), and the loop's 30 iterations cost the GPU.
    #[test]
    fn many_calls_per_step_become_one_per_program() {
        let step = || StepWindow {
            wall_ms: 0.31 + 30.0 * 0.2 + 1.0,
            busy_ms: 0.31,
            compute_ms: 0.31,
            executions: 31,
            programs: 2,
            repeats: 30,
            gaps: (0..30)
                .map(|_| gap(0.2, 0.0, &[]))
                .chain([gap(1.0, 0.0, &[])])
                .collect(),
            ..StepWindow::default()
        };
        let w = window(Stepping::Range("step".into()), vec![step(), step(), step()]);
        let r = predict(&[w], &none(), &|_, _, _| Vec::new());
        assert_eq!(r.unit, "step");
        assert!(
            r.notes.iter().any(|n| n.contains("`step`")),
            "{:?}",
            r.notes
        );
        let s = &r.scenarios[0];
        assert_eq!(s.rule, "host-bound");
        let want = 0.31 + 1.0 + 0.2 + 30.0 * LOOP_ITERATION_MS;
        assert!((s.predicted_step_ms - want).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn no_window_no_prediction() {
        let r = predict(&[], &none(), &|_, _, _| Vec::new());
        assert_eq!(r.step_ms, None);
        assert!(r.scenarios.is_empty() && !r.notes.is_empty());
    }
}
