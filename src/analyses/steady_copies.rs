//! The copies between modules in the steady state, as `ops` counts them (docs/design.md,
//! "Copies between modules"): per process, the copies and sets of its transfers frame inside
//! each device's steady-state window (its first steady module start to its last end), per
//! kind; over the run, their sums, which `ops` counts as GPU work rather than idle time.

use std::collections::BTreeMap;

use arrow::array::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::frames::between_modules::{TransferSum, module_spans, sums};

/// One process's copies between modules (None in `ops`' share: the archive does not say).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TransfersPartial {
    pub sums: Vec<TransferSum>,
    /// Per device, the time any copy runs between modules in the window [ns].
    pub busy: Vec<(i32, i64)>,
}

/// The partial of a process from its steady module frame and its transfers frame.
pub fn partial(module: &RecordBatch, frame: &RecordBatch) -> TransfersPartial {
    // Each device's window: its first steady module start to its last end.
    let windows: BTreeMap<i32, (i64, i64)> = module_spans(module)
        .into_iter()
        .filter_map(|(d, v)| Some((d, (v.first()?.0, v.last()?.1))))
        .collect();
    let (sums, busy) = sums(frame, &windows);
    TransfersPartial {
        sums,
        busy: busy.into_iter().collect(),
    }
}

/// The copies between modules of one kind over the run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct KindRow {
    pub kind: String,
    pub count: u64,
    pub bytes: i64,
    /// Summed over devices.
    pub ms: f64,
    /// Bytes over time (None for sets and copies of no time).
    pub gb_s: Option<f64>,
    /// Time the devices were idle just before those of these copies of at least 1 MiB,
    /// summed [ms].
    pub idle_before_ms: f64,
}

/// `ops.json`'s `transfers`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Transfers {
    /// Whether the archive says (an archive without the member: not known).
    pub measured: bool,
    pub count: u64,
    pub bytes: i64,
    /// Time any copy or set runs between modules, summed over devices [ms].
    pub ms: f64,
    pub by_kind: Vec<KindRow>,
}

/// The run's transfers from its processes' partials (None where a process's archive does
/// not say): not measured unless every process's is.
pub fn reduce(parts: &[Option<&TransfersPartial>]) -> Transfers {
    let measured = !parts.is_empty() && parts.iter().all(Option::is_some);
    let mut by: BTreeMap<&str, (u64, i64, i64, i64)> = BTreeMap::new();
    let mut busy = 0;
    for p in parts.iter().flatten() {
        for s in &p.sums {
            let e = by.entry(s.kind.as_str()).or_default();
            e.0 += s.count;
            e.1 += s.bytes;
            e.2 += s.busy_ns;
            e.3 += s.idle_before_ns;
        }
        busy += p.busy.iter().map(|b| b.1).sum::<i64>();
    }
    let mut by_kind: Vec<KindRow> = by
        .into_iter()
        .map(|(kind, (count, bytes, ns, idle))| KindRow {
            kind: kind.to_string(),
            count,
            bytes,
            ms: ns as f64 * 1e-6,
            gb_s: (ns > 0 && bytes > 0).then(|| bytes as f64 / ns as f64),
            idle_before_ms: idle as f64 * 1e-6,
        })
        .collect();
    by_kind.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    Transfers {
        measured,
        count: by_kind.iter().map(|k| k.count).sum(),
        bytes: by_kind.iter().map(|k| k.bytes).sum(),
        ms: busy as f64 * 1e-6,
        by_kind,
    }
}
