//! Device memory the process held over the run, from the allocations and frees Nsight Systems
//! records with `--cuda-memory-usage=true` (`formats::memory_usage`; docs/design.md, "Memory
//! over time"): per device, the bytes held after each event, the peak and when it happened,
//! what was live at the peak, the allocator's growth steps, and what was held before the
//! capture began (events at the capture's first timestamp), where a pool that takes a large
//! part of the device is XLA's preallocation.
//!
//! Only device memory is counted (pinned host memory is summarised by count and size). A free
//! removes what its allocation added; a free of an address with no live allocation (allocated
//! before Nsight Systems watched) is counted but changes nothing.

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use arrow::array::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::formats::gpus::DeviceFacts;
use crate::formats::memory_usage::{DEVICE_KIND, MemoryUsage};

/// Points of a held-memory curve kept (each run of points keeps its largest; the peak stays).
pub const CURVE_POINTS: usize = 2000;
/// Growth steps and live allocations at the peak listed.
const LISTED: usize = 20;
/// An allocation held from the start is XLA's preallocated pool when it is at least this
/// share of the device (XLA takes 75 % by default; `XLA_PYTHON_CLIENT_MEM_FRACTION`), or,
/// with the device's size unknown, at least [`POOL_BYTES`].
const POOL_SHARE: f64 = 0.2;
const POOL_BYTES: i64 = 4 << 30;

/// A live allocation at the peak.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Live {
    pub bytes: i64,
    /// When it was made [ns, profile time]; at the start for memory held before the capture.
    pub since_ns: i64,
    /// Whether it is XLA's preallocated pool.
    pub pool: bool,
}

/// An allocation that raised the held memory above every earlier level.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Growth {
    pub at_ns: i64,
    pub bytes: i64,
    pub held_after: i64,
}

/// One device of one process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeviceHeld {
    pub pid: i64,
    /// CUDA device id (-1: a free whose allocation was not seen).
    pub device: i64,
    /// The device's memory [bytes], when the archive says.
    pub capacity: Option<i64>,
    /// The first event's time [ns]: events then describe what was held before the capture.
    pub start_ns: i64,
    pub last_ns: i64,
    pub held_at_start: i64,
    /// The events at the start (allocations and frees describing the state before it).
    pub allocations_at_start: u64,
    pub allocated_at_start_bytes: i64,
    pub frees_at_start: u64,
    pub freed_at_start_bytes: i64,
    /// XLA's preallocated pool among what was held at the start [bytes].
    pub preallocated: Option<i64>,
    /// Allocations and frees after the start.
    pub allocations: u64,
    pub allocated_bytes: i64,
    pub frees: u64,
    pub freed_bytes: i64,
    /// Frees of addresses with no live allocation.
    pub unmatched_frees: u64,
    pub peak_bytes: i64,
    pub peak_ns: i64,
    pub held_at_end: i64,
    pub growth_steps: u64,
    pub growth: Vec<Growth>,
    pub live_at_peak: Vec<Live>,
    /// (time [ns], held [bytes]) after each event, thinned to [`CURVE_POINTS`].
    pub curve: Vec<(i64, i64)>,
}

/// Host (pinned, pageable) and other non-device allocations of a process, by kind.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OtherKind {
    pub kind: String,
    pub allocations: u64,
    pub bytes: i64,
}

/// One process's memory over time.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HeldPartial {
    /// Whether the profile recorded memory events (else how to get them is said).
    pub measured: bool,
    pub devices: Vec<DeviceHeld>,
    pub other: Vec<OtherKind>,
    /// The steady state (first to last steady module execution) [ns], for the chart.
    pub steady: Option<(i64, i64)>,
}

impl crate::engine::value::JsonValue for HeldPartial {}

/// Thins `curve` to at most `n` points, each run keeping its largest (so the peak stays).
fn thin(curve: &[(i64, i64)], n: usize) -> Vec<(i64, i64)> {
    if curve.len() <= n {
        return curve.to_vec();
    }
    let run = curve.len().div_ceil(n);
    curve
        .chunks(run)
        .filter_map(|c| c.iter().max_by_key(|p| p.1).copied())
        .collect()
}

/// Memory over time of one process from its memory-usage table.
pub fn partial(
    events: &RecordBatch,
    devices: &[DeviceFacts],
    steady: Option<(i64, i64)>,
) -> Result<HeldPartial> {
    let m = MemoryUsage::of(events)?;
    if m.len() == 0 {
        return Ok(HeldPartial {
            steady,
            ..Default::default()
        });
    }
    let first = m.start.value(0);
    let mut other: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    // (pid, device) -> row indices of device-memory events, in time order.
    let mut per: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
    for i in 0..m.len() {
        if m.kind.value(i) == DEVICE_KIND {
            per.entry((m.pid.value(i), m.device.value(i)))
                .or_default()
                .push(i);
        } else if m.is_alloc(i) {
            let e = other.entry(m.kind.value(i).to_string()).or_default();
            e.0 += 1;
            e.1 += m.bytes.value(i);
        }
    }
    let capacity = |d: i64| -> Option<i64> {
        let f = usize::try_from(d)
            .ok()
            .and_then(|d| devices.get(d))
            .or(devices.first())?;
        f.memory_bytes.map(|b| b as i64)
    };
    let mut out = Vec::new();
    for ((pid, device), rows) in per {
        out.push(device_held(&m, &rows, pid, device, first, capacity(device)));
    }
    Ok(HeldPartial {
        measured: true,
        devices: out,
        other: other
            .into_iter()
            .map(|(kind, (allocations, bytes))| OtherKind {
                kind,
                allocations,
                bytes,
            })
            .collect(),
        steady,
    })
}

fn device_held(
    m: &MemoryUsage,
    rows: &[usize],
    pid: i64,
    device: i64,
    first: i64,
    capacity: Option<i64>,
) -> DeviceHeld {
    // address -> (bytes, since).
    let mut live: HashMap<i64, (i64, i64)> = HashMap::new();
    let mut d = DeviceHeld {
        pid,
        device,
        capacity,
        start_ns: first,
        last_ns: first,
        held_at_start: 0,
        allocations_at_start: 0,
        allocated_at_start_bytes: 0,
        frees_at_start: 0,
        freed_at_start_bytes: 0,
        preallocated: None,
        allocations: 0,
        allocated_bytes: 0,
        frees: 0,
        freed_bytes: 0,
        unmatched_frees: 0,
        peak_bytes: 0,
        peak_ns: first,
        held_at_end: 0,
        growth_steps: 0,
        growth: Vec::new(),
        live_at_peak: Vec::new(),
        curve: Vec::new(),
    };
    let (mut held, mut max_seen) = (0i64, 0i64);
    let mut peak_live: Vec<(i64, i64)> = Vec::new();
    let mut curve = Vec::with_capacity(rows.len());
    for (k, &i) in rows.iter().enumerate() {
        let (t, bytes, addr) = (m.start.value(i), m.bytes.value(i), m.address.value(i));
        let at_start = t == first;
        if m.is_alloc(i) {
            held += bytes;
            live.insert(addr, (bytes, t));
            if at_start {
                d.allocations_at_start += 1;
                d.allocated_at_start_bytes += bytes;
            } else {
                d.allocations += 1;
                d.allocated_bytes += bytes;
                if held > max_seen {
                    d.growth_steps += 1;
                    if d.growth.len() < LISTED {
                        d.growth.push(Growth {
                            at_ns: t,
                            bytes,
                            held_after: held,
                        });
                    }
                }
            }
        } else {
            match live.remove(&addr) {
                Some((b, _)) => held -= b,
                None => d.unmatched_frees += 1,
            }
            if at_start {
                d.frees_at_start += 1;
                d.freed_at_start_bytes += bytes;
            } else {
                d.frees += 1;
                d.freed_bytes += bytes;
            }
        }
        max_seen = max_seen.max(held);
        // The state at the start is what stands after its last event.
        let start_done = !at_start || rows.get(k + 1).is_none_or(|&j| m.start.value(j) != first);
        if at_start && start_done {
            // Growth is measured from what stood at the start, not from the order in which
            // the events describing it were written.
            d.held_at_start = held;
            max_seen = held;
        }
        if start_done && held > d.peak_bytes {
            d.peak_bytes = held;
            d.peak_ns = t;
            peak_live = live.values().copied().collect();
        }
        if start_done {
            curve.push((t, held));
        }
        d.last_ns = t;
    }
    d.held_at_end = held;
    let pool_floor = capacity.map_or(POOL_BYTES, |c| (c as f64 * POOL_SHARE) as i64);
    let pool = peak_live
        .iter()
        .chain(live.values())
        .filter(|&&(b, since)| since == first && b >= pool_floor)
        .map(|&(b, _)| b)
        .max();
    d.preallocated = pool;
    peak_live.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    d.live_at_peak = peak_live
        .into_iter()
        .take(LISTED)
        .map(|(bytes, since)| Live {
            bytes,
            since_ns: since,
            pool: Some(bytes) == pool && since == first,
        })
        .collect();
    d.curve = thin(&curve, CURVE_POINTS);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::memory_usage::SCHEMA;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    /// (start, address, bytes, kind, op) on device 0 of process 5.
    fn events(rows: &[(i64, i64, i64, &str, &str)]) -> RecordBatch {
        let i = |f: &dyn Fn(&(i64, i64, i64, &str, &str)) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        RecordBatch::try_new(
            SCHEMA.clone(),
            vec![
                i(&|r| r.0),
                i(&|_| 5),
                i(&|_| 0),
                i(&|r| r.1),
                i(&|r| r.2),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.4))),
            ],
        )
        .unwrap()
    }

    #[test]
    fn held_memory_peak_growth_and_the_pool() {
        let gib = 1i64 << 30;
        let b = events(&[
            (0, 1, 60 * gib, "device", "alloc"),
            (0, 2, gib, "device", "alloc"),
            (0, 2, gib, "device", "free"),
            (0, 9, 4096, "pinned", "alloc"),
            (10, 3, 2 * gib, "device", "alloc"),
            (20, 4, 3 * gib, "device", "alloc"),
            (30, 3, 2 * gib, "device", "free"),
            (40, 5, gib, "device", "alloc"),
            (50, 77, 8, "device", "free"),
        ]);
        let facts = DeviceFacts {
            name: "NVIDIA H100".into(),
            sms: None,
            capability: None,
            memory_bandwidth: None,
            memory_bytes: Some((80 * gib) as f64),
        };
        let p = partial(&b, &[facts], Some((5, 45))).unwrap();
        assert!(p.measured);
        let d = &p.devices[0];
        assert_eq!((d.held_at_start, d.allocations_at_start), (60 * gib, 2));
        assert_eq!(d.preallocated, Some(60 * gib));
        assert_eq!((d.allocations, d.allocated_bytes), (3, 6 * gib));
        assert_eq!(
            (d.frees, d.freed_bytes, d.unmatched_frees),
            (2, 2 * gib + 8, 1)
        );
        assert_eq!((d.peak_bytes, d.peak_ns), (65 * gib, 20));
        assert_eq!(d.held_at_end, 64 * gib);
        assert_eq!(d.growth_steps, 2, "{:?}", d.growth);
        assert_eq!(
            d.live_at_peak[0],
            Live {
                bytes: 60 * gib,
                since_ns: 0,
                pool: true
            }
        );
        assert_eq!(d.curve.first(), Some(&(0, 60 * gib)));
        assert_eq!(p.other[0].kind, "pinned");
    }

    #[test]
    fn no_events_is_not_measured() {
        let p = partial(&events(&[]), &[], None).unwrap();
        assert!(!p.measured && p.devices.is_empty());
    }

    #[test]
    fn long_curves_keep_the_peak() {
        let c: Vec<(i64, i64)> = (0..10_000)
            .map(|i| (i, if i == 4321 { 99 } else { i % 5 }))
            .collect();
        let t = thin(&c, 100);
        assert!(t.len() <= 100 && t.contains(&(4321, 99)));
    }
}
