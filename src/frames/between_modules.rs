//! The GPU work between modules: the copies and sets of `formats::gpu_transfers` (a process's
//! copies outside CUDA graphs), less the parts that run while a module runs on the same
//! device (those are the module's own), as a frame beside the module frame (docs/design.md,
//! "Copies between modules"). Idle time between modules is then the time neither runs.
//!
//! Devices: the member names CUDA ordinals, the frames XLA's devices. A process's XLA
//! devices are its local GPUs in ordinal order, so the k-th ordinal the process copied on
//! is its k-th device of the module frame; a process whose copies name more ordinals than
//! its modules ran on keeps the unmatched ones out (and says so).

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use anyhow::Result;
use arrow::array::{ArrayRef, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema, SchemaRef};

use super::gpu::{DEVICE, PROJ_DUR, PROJ_START};
use crate::formats::gpu_transfers::Transfers;

pub const START: &str = "Start";
pub const END: &str = "End";
pub const BYTES: &str = "Bytes";
pub const KIND: &str = "Kind";
pub const IDLE_BEFORE: &str = "IdleBefore";

/// `Device` (the frames' device), `Start`, `End` (ns; the part outside modules), `Bytes`
/// (the whole copy's, on its first part), `Kind`, `IdleBefore` (ns the device was idle
/// before the copy's first part: since the last module or copy on it ended; 0 on later
/// parts).
pub static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let int = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        Field::new(DEVICE, DataType::Int32, false),
        int(START),
        int(END),
        int(BYTES),
        Field::new(KIND, DataType::Utf8, false),
        int(IDLE_BEFORE),
    ]))
});

/// The module executions of `module` (a module frame) per device, as sorted disjoint spans
/// `(start, end)` [ns].
pub fn module_spans(module: &RecordBatch) -> BTreeMap<i32, Vec<(i64, i64)>> {
    let dev = module
        .column_by_name(DEVICE)
        .unwrap()
        .as_primitive::<Int32Type>();
    let start = module
        .column_by_name(PROJ_START)
        .unwrap()
        .as_primitive::<Int64Type>();
    let dur = module
        .column_by_name(PROJ_DUR)
        .unwrap()
        .as_primitive::<Int64Type>();
    // Module executions per device, sorted, merged into disjoint spans.
    let mut spans: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for i in 0..module.num_rows() {
        let s = start.value(i);
        spans
            .entry(dev.value(i))
            .or_default()
            .push((s, s + dur.value(i).max(0)));
    }
    for v in spans.values_mut() {
        v.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(v.len());
        for &(s, e) in v.iter() {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        *v = merged;
    }
    spans
}

/// The parts of `t` outside the module executions of `module` (a module frame), per device,
/// and a note when some ordinals have no device.
pub fn between_modules(module: &RecordBatch, t: &Transfers) -> Result<(RecordBatch, Vec<String>)> {
    let spans = module_spans(module);
    let devices: Vec<i32> = spans.keys().copied().collect();
    let mut ordinals: Vec<i64> = t.device.values().to_vec();
    ordinals.sort_unstable();
    ordinals.dedup();
    let mut notes = Vec::new();
    if ordinals.len() > devices.len() && !devices.is_empty() {
        notes.push(format!(
            "copies on {} GPUs but modules on {}: those of GPUs {:?} are left out",
            ordinals.len(),
            devices.len(),
            &ordinals[devices.len()..]
        ));
    }
    let device_of = |ordinal: i64| -> Option<i32> {
        let k = ordinals.binary_search(&ordinal).ok()?;
        devices.get(k).copied()
    };
    let (mut d, mut s, mut e, mut b, mut k) = (vec![], vec![], vec![], vec![], vec![]);
    let mut idle = Vec::new();
    // Per device, when its last copy ended (copies come in start order).
    let mut last_copy: BTreeMap<i32, i64> = BTreeMap::new();
    let rows = if t.is_empty() { 0 } else { t.len() };
    for i in 0..rows {
        let Some(device) = device_of(t.device.value(i)) else {
            continue;
        };
        let busy = &spans[&device];
        let (mut at, end) = (t.start.value(i), t.end.value(i));
        let mut first = true;
        // The first module span that ends after the copy starts, then on.
        let from = busy.partition_point(|&(_, e)| e <= at);
        let module_end = from.checked_sub(1).map(|j| busy[j].1);
        let copy_end = last_copy.get(&device).copied();
        let inside = busy.get(from).is_some_and(|&(bs, _)| bs <= at);
        let before = match module_end.max(copy_end) {
            Some(prev) if !inside => (at - prev).max(0),
            _ => 0,
        };
        let entry = last_copy.entry(device).or_insert(end);
        *entry = (*entry).max(end);
        for &(bs, be) in &busy[from..] {
            if bs >= end {
                break;
            }
            if bs > at {
                d.push(device);
                s.push(at);
                e.push(bs);
                b.push(if first { t.bytes.value(i) } else { 0 });
                k.push(t.kind.value(i).to_string());
                idle.push(if first { before } else { 0 });
                first = false;
            }
            at = at.max(be);
            if at >= end {
                break;
            }
        }
        if at < end {
            d.push(device);
            s.push(at);
            e.push(end);
            b.push(if first { t.bytes.value(i) } else { 0 });
            k.push(t.kind.value(i).to_string());
            idle.push(if first { before } else { 0 });
        }
    }
    let batch = RecordBatch::try_new(
        SCHEMA.clone(),
        vec![
            Arc::new(Int32Array::from(d)) as ArrayRef,
            Arc::new(Int64Array::from(s)),
            Arc::new(Int64Array::from(e)),
            Arc::new(Int64Array::from(b)),
            Arc::new(StringArray::from(k)),
            Arc::new(Int64Array::from(idle)),
        ],
    )?;
    Ok((batch, notes))
}

/// What the copies between modules of one kind add up to, on one device.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TransferSum {
    pub device: i32,
    pub kind: String,
    pub count: u64,
    pub bytes: i64,
    /// Time covered by at least one such copy [ns] (overlapping copies counted once).
    pub busy_ns: i64,
    /// Time the device was idle just before those of these copies that move at least
    /// [`LARGE_COPY`] bytes (in the window) [ns]: the host preparing them (a pageable copy's
    /// staging, making the array). The wait before a small copy (a scalar index, a result
    /// read back) is not its preparation.
    #[serde(default)]
    pub idle_before_ns: i64,
}

/// Copies of at least this many bytes [B] take host time to prepare worth counting.
pub const LARGE_COPY: i64 = 1 << 20;

/// The copies of `frame` (a [`between_modules`] frame) that fall in each device's window
/// `[first, last)`, summed per (device, kind), and the time any copy runs per device [ns].
pub fn sums(
    frame: &RecordBatch,
    windows: &BTreeMap<i32, (i64, i64)>,
) -> (Vec<TransferSum>, BTreeMap<i32, i64>) {
    let dev = frame
        .column_by_name(DEVICE)
        .unwrap()
        .as_primitive::<Int32Type>();
    let start = frame
        .column_by_name(START)
        .unwrap()
        .as_primitive::<Int64Type>();
    let end = frame
        .column_by_name(END)
        .unwrap()
        .as_primitive::<Int64Type>();
    let bytes = frame
        .column_by_name(BYTES)
        .unwrap()
        .as_primitive::<Int64Type>();
    let kind = frame.column_by_name(KIND).unwrap().as_string::<i32>();
    let idle = frame
        .column_by_name(IDLE_BEFORE)
        .unwrap()
        .as_primitive::<Int64Type>();
    type Spans = Vec<(i64, i64)>;
    let mut by: BTreeMap<(i32, String), (TransferSum, Spans)> = BTreeMap::new();
    let mut all: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
    for i in 0..frame.num_rows() {
        let d = dev.value(i);
        let Some(&(w0, w1)) = windows.get(&d) else {
            continue;
        };
        let (s, e) = (start.value(i).max(w0), end.value(i).min(w1));
        if s >= e {
            continue;
        }
        let entry = by.entry((d, kind.value(i).to_string())).or_insert_with(|| {
            (
                TransferSum {
                    device: d,
                    kind: kind.value(i).to_string(),
                    ..TransferSum::default()
                },
                Vec::new(),
            )
        });
        if bytes.value(i) > 0 {
            entry.0.count += 1;
            entry.0.bytes += bytes.value(i);
        }
        // The idle time before a large copy, within the window.
        if bytes.value(i) >= LARGE_COPY {
            entry.0.idle_before_ns += idle.value(i).min(s - w0).max(0);
        }
        entry.1.push((s, e));
        all.entry(d).or_default().push((s, e));
    }
    let out = by
        .into_values()
        .map(|(mut sum, spans)| {
            sum.busy_ns = covered(spans);
            sum
        })
        .collect();
    (out, all.into_iter().map(|(d, v)| (d, covered(v))).collect())
}

/// The time covered by `spans` (overlaps once).
fn covered(mut spans: Vec<(i64, i64)>) -> i64 {
    spans.sort_unstable();
    let (mut total, mut at) = (0, i64::MIN);
    for (s, e) in spans {
        let s = s.max(at);
        if e > s {
            total += e - s;
            at = e;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(rows: &[(i32, i64, i64)]) -> RecordBatch {
        RecordBatch::try_from_iter(vec![
            (
                DEVICE,
                Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
            ),
            (
                PROJ_START,
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))) as ArrayRef,
            ),
            (
                PROJ_DUR,
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    fn transfers(rows: &[(i64, i64, i64, i64, &str)]) -> Transfers {
        Transfers {
            device: Int64Array::from_iter_values(rows.iter().map(|r| r.0)),
            start: Int64Array::from_iter_values(rows.iter().map(|r| r.1)),
            end: Int64Array::from_iter_values(rows.iter().map(|r| r.2)),
            bytes: Int64Array::from_iter_values(rows.iter().map(|r| r.3)),
            kind: StringArray::from_iter_values(rows.iter().map(|r| r.4)),
        }
    }

    /// A copy before a module, one inside it, one across its end, on two devices whose
    /// ordinals (2 and 5) are not their frame devices (0 and 1).
    #[test]
    fn copies_inside_modules_are_the_modules_own() {
        let m = modules(&[(0, 100, 100), (0, 250, 50), (1, 0, 1000)]);
        let t = transfers(&[
            (2, 10, 60, 1000, "HtoD"),
            (2, 120, 150, 10, "DtoD"),
            (2, 180, 280, 500, "DtoH"),
            (5, 500, 600, 7, "HtoD"),
            (5, 2000, 2100, 8, "HtoD"),
            (9, 0, 10, 1, "HtoD"),
        ]);
        let (f, notes) = between_modules(&m, &t).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        let col = |c: &str| {
            f.column_by_name(c)
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        };
        let dev: Vec<i32> = f
            .column_by_name(DEVICE)
            .unwrap()
            .as_primitive::<Int32Type>()
            .values()
            .to_vec();
        assert_eq!(dev, vec![0, 0, 1]);
        assert_eq!(col(START), vec![10, 200, 2000]);
        assert_eq!(col(END), vec![60, 250, 2100]);
        assert_eq!(col(BYTES), vec![1000, 500, 8]);
        // Idle before: nothing before the first copy; 200 - 150 (the module spans merge to
        // 100..200 then 250..300; the DtoD copy inside is the module's); 2000 - 1000.
        assert_eq!(col(IDLE_BEFORE), vec![0, 0, 1000]);

        let windows = BTreeMap::from([(0, (0, 300)), (1, (0, 3000))]);
        let (s, busy) = sums(&f, &windows);
        assert_eq!(s.len(), 3);
        let htod0 = s
            .iter()
            .find(|x| x.device == 0 && x.kind == "HtoD")
            .unwrap();
        assert_eq!((htod0.count, htod0.bytes, htod0.busy_ns), (1, 1000, 50));
        // 1000 bytes is a small copy: no wait counted before it.
        assert_eq!(htod0.idle_before_ns, 0);
        assert_eq!(busy[&0], 100);
        // Outside the window: left out.
        let (s, _) = sums(&f, &BTreeMap::from([(0, (0, 55))]));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].busy_ns, 45);
        assert_eq!(covered(vec![(0, 10), (5, 15), (20, 30)]), 25);
    }
}
