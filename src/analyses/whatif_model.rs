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
}

/// One device's steady window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeviceSteps {
    pub device: i32,
    /// From the first steady execution's start to the last one's end [ns].
    pub start_ns: i64,
    pub end_ns: i64,
    /// Time some module ran in the window [ns].
    pub busy_ns: i64,
    /// Of the steady thunks in the window: the collectives' time not hidden under other work,
    /// and the other thunks' time [ns].
    #[serde(default)]
    pub collectives_ns: i64,
    #[serde(default)]
    pub compute_ns: i64,
    pub gaps: Vec<Gap>,
    /// Per steady program name: its first execution's start and its last one's end, and its
    /// thunks' times as for the device [ns].
    #[serde(default)]
    pub spans: Vec<Span>,
}

/// A steady program's executions on a device.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Span {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub collectives_ns: i64,
    pub compute_ns: i64,
}

/// One process's devices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StepTimeline {
    /// The process, as notes and the compilations name it.
    pub process: String,
    pub devices: Vec<DeviceSteps>,
    /// The labels of the host ranges the gaps name.
    pub labels: Vec<String>,
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

/// The timeline of one process: its steady window per device (from the steady module frame),
/// every module execution in it (from the whole module frame) and the host ranges of the
/// program's own that launched no GPU work.
pub fn timeline(
    process: &str,
    steady: &crate::frames::warmup::Steady,
    modules: &arrow::array::RecordBatch,
    user: Option<&arrow::array::RecordBatch>,
) -> Result<StepTimeline> {
    let s = ModuleView::of(&steady.module);
    let mut windows: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    let mut spans: BTreeMap<(i32, &str), (i64, i64)> = BTreeMap::new();
    for i in 0..s.rows {
        let (a, b) = (s.start.value(i), s.start.value(i) + s.dur.value(i));
        for w in [
            windows.entry(s.device.value(i)).or_insert((a, b)),
            spans
                .entry((s.device.value(i), s.program_name.value(i)))
                .or_insert((a, b)),
        ] {
            w.0 = w.0.min(a);
            w.1 = w.1.max(b);
        }
    }
    let m = ModuleView::of(modules);
    let mut runs: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for i in 0..m.rows {
        let d = m.device.value(i);
        let (a, b) = (m.start.value(i), m.start.value(i) + m.dur.value(i));
        if let Some(&(w0, w1)) = windows.get(&d)
            && b > w0
            && a < w1
        {
            runs.entry(d).or_default().push((a.max(w0), b.min(w1)));
        }
    }
    // Ranges without GPU work, merged per label (nested instances counted once).
    let mut labels: Vec<String> = Vec::new();
    let mut host: Vec<Vec<(i64, i64)>> = Vec::new();
    if let Some(u) = user {
        let t = UserNvtx::of(u)?;
        let mut by: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        for i in 0..t.len() {
            if t.is_mark(i) || t.gpu_ops.value(i) > 0 || t.end.is_null(i) {
                continue;
            }
            by.entry(label(t.domain.value(i), t.name.value(i)))
                .or_default()
                .push((t.start.value(i), t.end.value(i)));
        }
        for (l, v) in by {
            labels.push(l);
            host.push(union(v));
        }
    }
    // Thunk time per device and program: collectives' exposed time, the others' whole time.
    let t = ThunkView::of(&steady.thunk);
    let name_of: BTreeMap<&str, &str> = (0..s.rows)
        .map(|i| (s.program_id.value(i), s.program_name.value(i)))
        .collect();
    let mut exposed: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    let mut by_program: BTreeMap<(i32, &str), (i64, i64)> = BTreeMap::new();
    for i in 0..t.rows {
        let d = t.device.value(i);
        let name = name_of.get(t.program_id.value(i)).copied().unwrap_or("");
        let (c, x) = if t.communication.value(i) {
            ((t.dur.value(i) - t.dur_hidden.value(i)).max(0), 0)
        } else {
            (0, t.dur.value(i))
        };
        for e in [
            exposed.entry(d).or_default(),
            by_program.entry((d, name)).or_default(),
        ] {
            e.0 += c;
            e.1 += x;
        }
    }
    let mut devices = Vec::new();
    for (device, (w0, w1)) in windows {
        let busy = union(runs.remove(&device).unwrap_or_default());
        let busy_ns = busy.iter().map(|(a, b)| b - a).sum();
        let gaps = busy
            .windows(2)
            .filter(|p| p[1].0 > p[0].1)
            .map(|p| {
                let (a, b) = (p[0].1, p[1].0);
                Gap {
                    start_ns: a,
                    dur_ns: b - a,
                    host: host
                        .iter()
                        .enumerate()
                        .map(|(k, u)| (k as u32, covered(u, a, b)))
                        .filter(|&(_, ns)| ns > 0)
                        .collect(),
                }
            })
            .collect();
        let (collectives_ns, compute_ns) = exposed.get(&device).copied().unwrap_or_default();
        devices.push(DeviceSteps {
            device,
            start_ns: w0,
            end_ns: w1,
            busy_ns,
            collectives_ns,
            compute_ns,
            gaps,
            spans: spans
                .iter()
                .filter(|((d, _), _)| *d == device)
                .map(|(&(d, name), &(a, b))| {
                    let (c, x) = by_program.get(&(d, name)).copied().unwrap_or_default();
                    Span {
                        name: name.to_string(),
                        start_ns: a,
                        end_ns: b,
                        collectives_ns: c,
                        compute_ns: x,
                    }
                })
                .collect(),
        });
    }
    Ok(StepTimeline {
        process: process.to_string(),
        devices,
        labels,
    })
}

/// A device's steady window as the scenarios see it [ms]: its wall time, the GPU's busy time
/// and each gap with what the host did in it.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub process: usize,
    pub device: i32,
    pub wall_ms: f64,
    pub busy_ms: f64,
    /// Of the busy time, the steady thunks' exposed time: collectives, the rest.
    pub collectives_ms: f64,
    pub compute_ms: f64,
    pub gaps: Vec<GapMs>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GapMs {
    pub ms: f64,
    /// Of it, time the host compiled.
    pub compiling_ms: f64,
    /// Of it, time in each host range (by label).
    pub host: Vec<(String, f64)>,
}

impl Window {
    /// The windows of every process's devices, with the compilations of each process
    /// (process, start, end [ms] on the profile's clock) laid over the gaps. With a step
    /// program, a device's window is from its first execution to the end of its last.
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
            for d in &t.devices {
                let span = step.and_then(|n| d.spans.iter().find(|x| x.name == n));
                let (w0, w1) = span.map_or((d.start_ns, d.end_ns), |x| (x.start_ns, x.end_ns));
                // The thunks of the step's program, else of every steady program.
                let (coll_ns, comp_ns) = span.map_or((d.collectives_ns, d.compute_ns), |x| {
                    (x.collectives_ns, x.compute_ns)
                });
                let inside: Vec<&Gap> = d
                    .gaps
                    .iter()
                    .filter(|g| g.start_ns >= w0 && g.start_ns + g.dur_ns <= w1)
                    .collect();
                let busy = (w1 - w0) - inside.iter().map(|g| g.dur_ns).sum::<i64>();
                let gaps = inside
                    .into_iter()
                    .map(|g| GapMs {
                        ms: g.dur_ns as f64 * 1e-6,
                        compiling_ms: covered(&comp, g.start_ns, g.start_ns + g.dur_ns) as f64
                            * 1e-6,
                        host: g
                            .host
                            .iter()
                            .map(|&(k, ns)| (t.labels[k as usize].clone(), ns as f64 * 1e-6))
                            .collect(),
                    })
                    .collect();
                out.push(Window {
                    process: p,
                    device: d.device,
                    wall_ms: (w1 - w0) as f64 * 1e-6,
                    busy_ms: busy as f64 * 1e-6,
                    collectives_ms: coll_ns as f64 * 1e-6,
                    compute_ms: comp_ns as f64 * 1e-6,
                    gaps,
                });
            }
        }
        out
    }

    /// The median gap in which the host neither compiled nor worked in a range of its own:
    /// what a dispatch and a synchronisation cost (None without such a gap).
    pub fn plain_gap_ms(&self) -> Option<f64> {
        let mut v: Vec<f64> = self
            .gaps
            .iter()
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
    fn the_plain_gap_leaves_out_compiling_and_host_ranges() {
        let g = |ms, c, h: &[(&str, f64)]| GapMs {
            ms,
            compiling_ms: c,
            host: h.iter().map(|(l, x)| (l.to_string(), *x)).collect(),
        };
        let w = Window {
            process: 0,
            device: 0,
            wall_ms: 10.0,
            busy_ms: 1.0,
            collectives_ms: 0.0,
            compute_ms: 1.0,
            gaps: vec![
                g(0.3, 0.0, &[]),
                g(5.0, 4.0, &[]),
                g(0.2, 0.0, &[]),
                g(3.0, 0.0, &[("load", 2.9)]),
                g(0.4, 0.0, &[]),
            ],
        };
        assert_eq!(w.plain_gap_ms(), Some(0.3));
    }
}
