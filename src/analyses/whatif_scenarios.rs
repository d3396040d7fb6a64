//! The scenarios of `whatif` (docs/whatif.md): each device's steady window as the parts of its
//! critical path, and per problem a change of those parts; the step is predicted from the
//! device that finishes last.

use serde::{Deserialize, Serialize};

use super::diagnose::Diagnosis;
use super::whatif_model::Window;
use crate::formats::hlo::cost::Math;
use crate::units::{duration_ms, pct};

/// A part of the critical path.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Part {
    pub what: String,
    /// Per step [ms].
    pub ms: f64,
    /// Of the step.
    pub percent: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PathRow {
    pub process: usize,
    pub device: i32,
    /// The device's steady window per step [ms].
    pub wall_ms: f64,
    pub parts: Vec<Part>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The finding rule whose problem it fixes (docs/diagnosis.md).
    pub rule: String,
    pub change: String,
    pub predicted_step_ms: f64,
    pub saved_ms: f64,
    /// The critical path of the device that sets the step, before and after.
    pub path_before: Vec<Part>,
    pub path_after: Vec<Part>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct WhatIf {
    /// The measured step [ms] (of the steady state when no step is known).
    pub step_ms: Option<f64>,
    pub unit: String,
    pub steps: f64,
    pub critical_path: Vec<PathRow>,
    pub scenarios: Vec<Scenario>,
    pub notes: Vec<String>,
}

/// The share of the dense bf16 peak a large bf16 GEMM reaches when the profile has none of
/// its own to measure: 73 % measured on H200 (4096³ bf16 GEMMs, `bf16_gemm` capture), taken
/// as 70 %.
pub const BF16_GEMM_FRACTION: f64 = 0.7;
/// A GEMM of at least this many FLOPs per execution measures the rate bf16 matmuls reach.
const LARGE_GEMM_FLOPS: f64 = 1e9;

/// What the scenarios read of the other analyses.
pub struct Facts<'a> {
    pub diagnosis: Option<&'a Diagnosis>,
    pub roofline: Option<&'a super::roofline_model::Roofline>,
    pub stragglers: Option<&'a super::stragglers::Stragglers>,
    /// Whether a process compiled a program more than once.
    pub recompiles: bool,
}

impl Facts<'_> {
    /// The rate bf16 matmuls reach on this GPU [TFLOP/s]: the profile's own large bf16
    /// GEMMs', else [`BF16_GEMM_FRACTION`] of the bf16 peak; and how it is known.
    pub fn bf16_rate(&self) -> Option<(f64, String)> {
        let r = self.roofline?;
        let (flops, ms) = r
            .ops
            .iter()
            .filter(|o| o.math == "bf16" && o.flops >= LARGE_GEMM_FLOPS && o.time_ms > 0.0)
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

/// What a part of the path is.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Compute,
    /// Gaps between a module's kernels (inside its executions).
    KernelGaps,
    Collectives,
    /// Gaps in which the host compiled (tracing and dispatch included).
    Compiling,
    /// Gaps' time in a range of the program's own without GPU work.
    HostRange(String),
    /// The rest of the gaps: dispatch, synchronisation, other host work.
    Dispatch,
}

impl Kind {
    fn what(&self) -> String {
        match self {
            Kind::Compute => "GPU computing".into(),
            Kind::KernelGaps => "GPU idle between a module's kernels".into(),
            Kind::Collectives => "collectives not hidden by computation".into(),
            Kind::Compiling => "host tracing and compiling (GPU idle)".into(),
            Kind::HostRange(l) => format!("host in `{l}` (GPU idle)"),
            Kind::Dispatch => "host dispatch and syncs (GPU idle)".into(),
        }
    }
}

#[derive(Clone, Debug)]
struct Path {
    process: usize,
    device: i32,
    wall: f64,
    parts: Vec<(Kind, f64)>,
    /// Gaps in which the host compiled.
    compile_gaps: usize,
    plain_gap: Option<f64>,
}

impl Path {
    fn total(&self) -> f64 {
        self.parts.iter().map(|(_, ms)| ms).sum()
    }
    fn get(&self, k: &Kind) -> f64 {
        self.parts
            .iter()
            .filter(|(x, _)| x == k)
            .map(|(_, ms)| ms)
            .sum()
    }
    /// Takes up to `ms` from part `k`; returns what it took.
    fn take(&mut self, k: &Kind, ms: f64) -> f64 {
        let mut took = 0.0;
        for (_, v) in self.parts.iter_mut().filter(|(x, _)| x == k) {
            let t = v.min(ms - took).max(0.0);
            *v -= t;
            took += t;
        }
        took
    }
    fn add(&mut self, k: Kind, ms: f64) {
        match self.parts.iter_mut().find(|(x, _)| *x == k) {
            Some((_, v)) => *v += ms,
            None => self.parts.push((k, ms)),
        }
    }
}

/// Each window's path: the GPU's busy time split by the device's own thunks (their exposed
/// time: collectives, the rest; the remainder is gaps between a module's kernels), and the
/// gaps by what the host did.
fn paths(windows: &[Window]) -> Vec<Path> {
    windows
        .iter()
        .map(|w| {
            // Thunks of several streams can add up to more than the busy time.
            let thunks = w.compute_ms + w.collectives_ms;
            let k = if thunks > w.busy_ms && thunks > 0.0 {
                w.busy_ms / thunks
            } else {
                1.0
            };
            let (compute, coll) = (w.compute_ms * k, w.collectives_ms * k);
            let mut parts = vec![
                (Kind::Compute, compute),
                (Kind::KernelGaps, (w.busy_ms - compute - coll).max(0.0)),
                (Kind::Collectives, coll),
            ];
            let (mut compiling, mut dispatch) = (0.0, 0.0);
            let mut host: Vec<(String, f64)> = Vec::new();
            let mut compile_gaps = 0;
            for g in &w.gaps {
                if g.compiling_ms > 0.0 {
                    compiling += g.ms;
                    compile_gaps += 1;
                    continue;
                }
                let mut rest = g.ms;
                for (l, ms) in &g.host {
                    let ms = ms.min(rest);
                    rest -= ms;
                    match host.iter_mut().find(|(x, _)| x == l) {
                        Some((_, v)) => *v += ms,
                        None => host.push((l.clone(), ms)),
                    }
                }
                dispatch += rest;
            }
            parts.push((Kind::Compiling, compiling));
            host.sort_by(|a, b| b.1.total_cmp(&a.1));
            for (l, ms) in host {
                parts.push((Kind::HostRange(l), ms));
            }
            parts.push((Kind::Dispatch, dispatch));
            Path {
                process: w.process,
                device: w.device,
                wall: w.wall_ms,
                parts,
                compile_gaps,
                plain_gap: w.plain_gap_ms(),
            }
        })
        .collect()
}

/// The parts of a path per step: scaled so that they add up to the step.
fn per_step(p: &Path, step: f64, span: f64) -> Vec<Part> {
    let k = if span > 0.0 { step / span } else { 0.0 };
    let total = p.total().max(f64::MIN_POSITIVE);
    p.parts
        .iter()
        .filter(|(_, ms)| *ms > 1e-9)
        .map(|(kind, ms)| Part {
            what: kind.what(),
            ms: ms * k,
            percent: 100.0 * ms / total,
        })
        .collect()
}

/// A scenario: its rule, what changes, and the change on each path.
type Change<'a> = (String, String, Box<dyn Fn(&mut Path) + 'a>);

fn changes<'a>(paths: &[Path], f: &'a Facts, steps: f64, devices: f64) -> Vec<Change<'a>> {
    let mut out: Vec<Change> = Vec::new();
    // The program's own host range that keeps the GPU waiting longest.
    let mut ranges: Vec<(String, f64)> = Vec::new();
    for p in paths {
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
                let plain = p.plain_gap.unwrap_or(0.0) * p.compile_gaps as f64;
                p.add(Kind::Dispatch, plain);
            }),
        ));
    }
    // Matmuls in f32 on the FP32 units at the rate bf16 GEMMs reach.
    if let (Some(r), Some((rate, how))) = (f.roofline, f.bf16_rate()) {
        let (time, new): (f64, f64) = r
            .ops
            .iter()
            .filter(|o| o.math == "f32" && o.flops > 0.0)
            .fold((0.0, 0.0), |(t, n), o| {
                (
                    t + o.time_ms,
                    n + o.flops * o.executions as f64 / (rate * 1e12) * 1e3,
                )
            });
        if time > 0.0 {
            let saved = (time - new).max(0.0) / devices;
            out.push((
                "precision".into(),
                format!("the f32 matmuls in bf16 ({how})"),
                Box::new(move |p: &mut Path| {
                    p.take(&Kind::Compute, saved);
                }),
            ));
        }
    }
    // A late device on time: the others wait for nothing, it starts with them.
    if let Some(late) = f.stragglers.and_then(|s| {
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
                let mut left = lateness * steps;
                for k in [Kind::Collectives, Kind::Dispatch] {
                    left -= p.take(&k, left);
                }
            }),
        ));
    }
    // Collectives overlapped with computation, as far as there is computation to hide them.
    if paths.iter().any(|p| p.get(&Kind::Collectives) > 0.0) {
        out.push((
            "exposed-communication".into(),
            "the collectives overlapped with independent computation".into(),
            Box::new(|p: &mut Path| {
                let hide = p.get(&Kind::Collectives).min(p.get(&Kind::Compute));
                p.take(&Kind::Collectives, hide);
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
        let saved = f.at_stake_ms / devices;
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

/// The critical paths and the scenarios of a run's windows.
pub fn predict(windows: &[Window], f: &Facts) -> WhatIf {
    let paths = paths(windows);
    let span = paths.iter().map(|p| p.wall).fold(0.0, f64::max);
    if paths.is_empty() || span <= 0.0 {
        return WhatIf {
            unit: "steady state".into(),
            notes: vec!["no steady state: nothing to re-time".into()],
            ..WhatIf::default()
        };
    }
    let step = f.roofline.and_then(|r| r.step.as_ref());
    let (step_ms, steps, unit) = match step {
        Some(s) if s.period_ms > 0.0 && s.steps >= 2.0 => (s.period_ms, s.steps, "step"),
        _ => (span, 1.0, "steady state"),
    };
    let devices = paths.len() as f64;
    let critical_path = paths
        .iter()
        .map(|p| PathRow {
            process: p.process,
            device: p.device,
            wall_ms: step_ms * p.wall / span,
            parts: per_step(p, step_ms, span),
        })
        .collect();
    let last = paths
        .iter()
        .max_by(|a, b| a.wall.total_cmp(&b.wall))
        .expect("paths");
    let mut scenarios: Vec<Scenario> = changes(&paths, f, steps, devices)
        .into_iter()
        .map(|(rule, change, apply)| {
            let mut after = paths.clone();
            for p in &mut after {
                apply(p);
            }
            let new_span = after.iter().map(Path::total).fold(0.0, f64::max);
            // A change never lengthens the step (a compiling gap shorter than a plain one).
            let predicted = (step_ms * new_span / span).min(step_ms);
            let slowest = after
                .iter()
                .max_by(|a, b| a.total().total_cmp(&b.total()))
                .expect("paths");
            Scenario {
                rule,
                change,
                predicted_step_ms: predicted,
                saved_ms: step_ms - predicted,
                path_before: per_step(last, step_ms, span),
                path_after: per_step(slowest, step_ms * new_span / span, new_span),
            }
        })
        .collect();
    scenarios.sort_by(|a, b| b.saved_ms.total_cmp(&a.saved_ms));
    WhatIf {
        step_ms: Some(step_ms),
        unit: unit.into(),
        steps,
        critical_path,
        scenarios,
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::whatif_model::GapMs;

    fn gap(ms: f64, compiling_ms: f64, host: &[(&str, f64)]) -> GapMs {
        GapMs {
            ms,
            compiling_ms,
            host: host.iter().map(|(l, x)| (l.to_string(), *x)).collect(),
        }
    }

    fn none() -> Facts<'static> {
        Facts {
            diagnosis: None,
            roofline: None,
            stragglers: None,
            recompiles: true,
        }
    }

    /// Four steps of 2 ms on the GPU, each after 10 ms of `load` on the host and 0.5 ms of
    /// dispatch; one gap also compiles for 30 ms.
    #[test]
    fn a_host_range_and_a_compilation_leave_the_path() {
        let mut gaps = vec![gap(10.5, 0.0, &[("load", 10.0)]); 3];
        gaps.push(gap(30.5, 30.0, &[]));
        gaps.push(gap(0.5, 0.0, &[]));
        let w = Window {
            process: 0,
            device: 0,
            wall_ms: 8.0 + gaps.iter().map(|g| g.ms).sum::<f64>(),
            busy_ms: 8.0,
            collectives_ms: 0.0,
            compute_ms: 8.0,
            gaps,
        };
        let r = predict(&[w.clone()], &none());
        assert_eq!(r.unit, "steady state");
        let span = w.wall_ms;
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

    #[test]
    fn no_window_no_prediction() {
        let r = predict(&[], &none());
        assert_eq!(r.step_ms, None);
        assert!(r.scenarios.is_empty() && !r.notes.is_empty());
    }
}
