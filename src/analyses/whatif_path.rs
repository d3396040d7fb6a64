//! A step of a device as the parts of its critical path (docs/whatif.md), and the changes a
//! scenario makes to them.

use super::whatif_model::StepWindow;
use super::whatif_result::OP_ROWS;
use super::whatif_result::{OpShare, Part};

/// What a part of the path is.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kind {
    Compute,
    /// Gaps between a module's kernels (inside its executions).
    KernelGaps,
    Collectives,
    /// Of the collectives' time, waiting for another device (process, device) to arrive.
    WaitFor(usize, i32),
    /// Gaps in which the host compiled (tracing and dispatch included).
    Compiling,
    /// Gaps' time in a range of the program's own without GPU work.
    HostRange(String),
    /// The rest of the gaps: dispatch, synchronisation, other host work.
    Dispatch,
}

impl Kind {
    pub(super) fn what(&self) -> String {
        match self {
            Kind::Compute => "GPU computing".into(),
            Kind::KernelGaps => "GPU idle between a module's kernels".into(),
            Kind::Collectives => "collectives not hidden by computation".into(),
            Kind::WaitFor(p, d) => {
                format!("collectives waiting for device {d} (process {p}) to arrive")
            }
            Kind::Compiling => "host tracing and compiling (GPU idle)".into(),
            Kind::HostRange(l) => format!("host in `{l}` (GPU idle)"),
            Kind::Dispatch => "host dispatch and syncs (GPU idle)".into(),
        }
    }
}

/// One step of a device as parts of its critical path.
#[derive(Clone, Debug)]
pub(super) struct Path {
    /// The device (process, device).
    pub(super) who: (usize, i32),
    /// How late it arrived at the next step's first collective, after the first device [ms].
    pub(super) late: f64,
    pub(super) parts: Vec<(Kind, f64)>,
    /// Of the collectives' time: what independent computation could hide, what a split into
    /// two micro-batches could hide of the rest, what has unknown edges [ms].
    pub(super) hideable: f64,
    pub(super) split: f64,
    pub(super) unknown: f64,
    /// Gaps in which the host compiled.
    pub(super) compile_gaps: usize,
    /// The module executions in the step, and the host's dispatch and syncs in the gaps
    /// between them (all gaps but the one before the next step) [ms].
    pub(super) executions: usize,
    pub(super) between: f64,
    /// The programs the executions run, and the most executions of one.
    pub(super) programs: usize,
    pub(super) repeats: usize,
    /// Of the gaps, what the host could have spent on them while it waited for the GPU
    /// before each (its wait, up to the gap) [ms].
    pub(super) waited: f64,

    /// The device's plain gap (dispatch and sync, no compiling, no host range).
    pub(super) plain_gap: Option<f64>,
    /// The thunks' time on the path by (module, what ran) [ms].
    pub(super) gpu: Vec<(String, String, f64)>,
}

impl Path {
    pub(super) fn total(&self) -> f64 {
        self.parts.iter().map(|(_, ms)| ms).sum()
    }
    pub(super) fn get(&self, k: &Kind) -> f64 {
        self.parts
            .iter()
            .filter(|(x, _)| x == k)
            .map(|(_, ms)| ms)
            .sum()
    }
    /// Takes up to `ms` from part `k`; returns what it took.
    pub(super) fn take(&mut self, k: &Kind, ms: f64) -> f64 {
        let mut took = 0.0;
        for (_, v) in self.parts.iter_mut().filter(|(x, _)| x == k) {
            let t = v.min(ms - took).max(0.0);
            *v -= t;
            took += t;
        }
        took
    }
    /// Takes up to `ms` from the host's time in the gaps: dispatch first, then its ranges.
    pub(super) fn take_host(&mut self, ms: f64) -> f64 {
        let mut took = self.take(&Kind::Dispatch, ms);
        for (k, v) in self.parts.iter_mut() {
            if matches!(k, Kind::HostRange(_)) {
                let t = v.min(ms - took).max(0.0);
                *v -= t;
                took += t;
            }
        }
        took
    }
    /// Takes up to `ms` from the gaps: the host's time ([`Path::take_host`]), then its
    /// compiling.
    pub(super) fn take_gaps(&mut self, ms: f64) -> f64 {
        let took = self.take_host(ms);
        took + self.take(&Kind::Compiling, ms - took)
    }
    pub(super) fn add(&mut self, k: Kind, ms: f64) {
        match self.parts.iter_mut().find(|(x, _)| *x == k) {
            Some((_, v)) => *v += ms,
            None => self.parts.push((k, ms)),
        }
    }
}

/// A step's path: the GPU's busy time split by the thunks of the executions in it (their
/// exposed time: collectives, the rest; the remainder is gaps between a module's kernels),
/// and the gaps by what the host did.
pub(super) fn path(who: (usize, i32), w: &StepWindow, plain_gap: Option<f64>) -> Path {
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
    let mut between = 0.0;
    let waited = w.gaps.iter().map(|g| g.waited_ms.min(g.ms)).sum();

    let last = w.gaps.len().saturating_sub(1);
    for (i, g) in w.gaps.iter().enumerate() {
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
        if i < last {
            between += rest;
        }
    }
    parts.push((Kind::Compiling, compiling));
    host.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (l, ms) in host {
        parts.push((Kind::HostRange(l), ms));
    }
    parts.push((Kind::Dispatch, dispatch));
    Path {
        who,
        late: 0.0,
        parts,
        hideable: w.hideable_ms * k,
        split: w.split_ms * k,
        unknown: w.unknown_ms * k,
        compile_gaps,
        executions: w.executions,
        between,
        programs: w.programs,
        repeats: w.repeats,
        waited,
        plain_gap,
        gpu: w
            .kinds
            .iter()
            .map(|(m, what, ms)| (m.clone(), what.clone(), ms * k))
            .collect(),
    }
}

/// A path's GPU part by module and kind, the largest first, the rest as one row.
pub(super) fn op_shares(p: &Path) -> Vec<OpShare> {
    let total = p.total();
    let pct = |ms: f64| if total > 0.0 { 100.0 * ms / total } else { 0.0 };
    let mut v = p.gpu.clone();
    v.sort_by(|a, b| b.2.total_cmp(&a.2));
    let rest: f64 = v.iter().skip(OP_ROWS).map(|x| x.2).sum();
    let mut out: Vec<OpShare> = v
        .into_iter()
        .take(OP_ROWS)
        .map(|(module, what, ms)| OpShare {
            module,
            what,
            ms,
            percent: pct(ms),
        })
        .collect();
    if rest > 0.0 {
        out.push(OpShare {
            module: String::new(),
            what: "other ops".into(),
            ms: rest,
            percent: pct(rest),
        });
    }
    out
}

/// The parts of a path [ms], with their share of it.
pub(super) fn parts_of(p: &Path) -> Vec<Part> {
    let total = p.total().max(f64::MIN_POSITIVE);
    p.parts
        .iter()
        .filter(|(_, ms)| *ms > 1e-9)
        .map(|(kind, ms)| Part {
            what: kind.what(),
            ms: *ms,
            percent: 100.0 * ms / total,
        })
        .collect()
}

/// The device `late` on time: the others' waits for it leave their paths, and its own host
/// time in the step before shrinks by how late it was.
pub(super) fn on_time(p: &mut Path, late: (usize, i32)) {
    p.take(&Kind::WaitFor(late.0, late.1), f64::INFINITY);
    if p.who == late {
        let l = p.late;
        p.take_host(l);
    }
}
