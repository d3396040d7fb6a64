//! `nsys-jax-pipe/gpu-memory-usage.parquet`: every memory allocation and free Nsight Systems
//! recorded with `--cuda-memory-usage=true`, one row each in time order (docs/design.md,
//! "Memory over time"). nsys-jax's readers ignore the member; it is absent when the report
//! has no such events (the option was off).
//!
//! Columns: `Start` (ns; events at the capture's start describe what was held before it),
//! `PID`, `Device` (CUDA device id; a free, which Nsight Systems records without its device,
//! takes the device of the allocation at its address; -1 when none is known), `Address`,
//! `Bytes`, `Kind` (`device`, `pinned`, `pageable`, `array`, `managed`, `device-static`,
//! `managed-static` or `unknown`) and `Op` (`alloc` or `free`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use anyhow::{Result, bail};
use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::columns::{int64, utf8};
use super::nsys_export::{ExportTables, MEMORY_USAGE, int64_column};

pub const START: &str = "Start";
pub const PID: &str = "PID";
pub const DEVICE: &str = "Device";
pub const ADDRESS: &str = "Address";
pub const BYTES: &str = "Bytes";
pub const KIND: &str = "Kind";
pub const OP: &str = "Op";

pub const ALLOC: &str = "alloc";
pub const FREE: &str = "free";
/// The memory kind of device allocations.
pub const DEVICE_KIND: &str = "device";

pub static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let int = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        int(START),
        int(PID),
        int(DEVICE),
        int(ADDRESS),
        int(BYTES),
        Field::new(KIND, DataType::Utf8, false),
        Field::new(OP, DataType::Utf8, false),
    ]))
});

/// The memory kind of Nsight Systems' `memKind` (`ENUM_CUDA_MEM_KIND`).
pub fn mem_kind(k: i64) -> &'static str {
    match k {
        0 => "pageable",
        1 => "pinned",
        2 => DEVICE_KIND,
        3 => "array",
        4 => "managed",
        5 => "device-static",
        6 => "managed-static",
        _ => "unknown",
    }
}

/// Nsight Systems' device id of an event whose device it does not know.
const NO_DEVICE: i64 = i32::MAX as i64;

/// The events of an export's memory-usage table in time order, frees given the device of
/// their allocation (None when the report has no such table).
pub fn from_export(t: &ExportTables) -> Result<Option<RecordBatch>> {
    let Some(b) = &t.memory_usage else {
        return Ok(None);
    };
    let col = |c: &str| int64_column(b, MEMORY_USAGE, c);
    let (start, gpid, device, address, bytes, kind, op) = (
        col("start")?,
        col("globalPid")?,
        col("deviceId")?,
        col("address")?,
        col("bytes")?,
        col("memKind")?,
        col("memoryOperationType")?,
    );
    // (start, row): events in time order, ties in the table's order.
    let mut order: Vec<(i64, usize)> = (0..b.num_rows())
        .filter(|&i| {
            [&start, &gpid, &device, &address, &bytes, &kind, &op]
                .iter()
                .all(|a| a.is_valid(i))
        })
        .map(|i| (start.value(i), i))
        .collect();
    order.sort_unstable();
    let n = order.len();
    let mut out_dev = Vec::with_capacity(n);
    // (process, address) -> device of the live allocation there.
    let mut live: HashMap<(i64, i64), i64> = HashMap::new();
    for &(_, i) in &order {
        let pid = (gpid.value(i) >> 24) & 0xFF_FFFF;
        let key = (pid, address.value(i));
        let d = device.value(i);
        let known = (d != NO_DEVICE && d >= 0).then_some(d);
        let dev = match op.value(i) {
            0 => {
                let dev = known.unwrap_or(-1);
                live.insert(key, dev);
                dev
            }
            _ => known.or_else(|| live.remove(&key)).unwrap_or(-1),
        };
        out_dev.push(dev);
    }
    let col = |f: &dyn Fn(usize) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            order.iter().map(|&(_, i)| f(i)),
        ))
    };
    Ok(Some(RecordBatch::try_new(
        SCHEMA.clone(),
        vec![
            col(&|i| start.value(i)),
            col(&|i| (gpid.value(i) >> 24) & 0xFF_FFFF),
            Arc::new(Int64Array::from(out_dev)),
            col(&|i| address.value(i)),
            col(&|i| bytes.value(i).max(0)),
            Arc::new(StringArray::from_iter_values(
                order.iter().map(|&(_, i)| mem_kind(kind.value(i))),
            )),
            Arc::new(StringArray::from_iter_values(order.iter().map(
                |&(_, i)| {
                    if op.value(i) == 0 { ALLOC } else { FREE }
                },
            ))),
        ],
    )?))
}

/// The member's rows, checked.
#[derive(Debug, Clone)]
pub struct MemoryUsage {
    pub start: Int64Array,
    pub pid: Int64Array,
    pub device: Int64Array,
    pub address: Int64Array,
    pub bytes: Int64Array,
    pub kind: StringArray,
    pub op: StringArray,
}

impl MemoryUsage {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// Whether row `i` is an allocation (else a free).
    pub fn is_alloc(&self, i: usize) -> bool {
        self.op.value(i) == ALLOC
    }
}

impl MemoryUsage {
    /// Checks a batch: every column present, of its type, without nulls; sizes not negative,
    /// rows in time order, each an `alloc` or a `free`. Errors say what is wrong in one line.
    pub fn of(b: &RecordBatch) -> Result<MemoryUsage> {
        let int = |c: &str| int64(b, c, false);
        let t = MemoryUsage {
            start: int(START)?,
            pid: int(PID)?,
            device: int(DEVICE)?,
            address: int(ADDRESS)?,
            bytes: int(BYTES)?,
            kind: utf8(b, KIND)?,
            op: utf8(b, OP)?,
        };
        for i in 0..t.len() {
            if t.bytes.value(i) < 0 {
                bail!("row {i}: negative size");
            }
            if i > 0 && t.start.value(i) < t.start.value(i - 1) {
                bail!("row {i}: out of time order");
            }
            if !matches!(t.op.value(i), ALLOC | FREE) {
                bail!(
                    "row {i}: operation {:?} is neither alloc nor free",
                    t.op.value(i)
                );
            }
        }
        Ok(t)
    }
}

/// Reads the member, checked ([`MemoryUsage::of`]); the caller names the file.
pub fn read(bytes: Vec<u8>) -> Result<RecordBatch> {
    let b = super::read_parquet(bytes)?;
    MemoryUsage::of(&b)?;
    Ok(b)
}

/// Writes the member from a batch of [`SCHEMA`].
pub fn write(batch: &RecordBatch) -> Result<Vec<u8>> {
    super::write_parquet(batch, &super::PandasIndex::Default, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::nsys_export::NVTX_EVENTS;
    use arrow::datatypes::Schema;

    fn export(rows: &[(i64, i64, i64, i64, i64, i64)]) -> ExportTables {
        // (start, deviceId, address, bytes, memKind, op)
        let c = |f: &dyn Fn(&(i64, i64, i64, i64, i64, i64)) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        let pid = 77i64 << 24;
        let mem = RecordBatch::try_from_iter(vec![
            ("start", c(&|r| r.0)),
            ("globalPid", c(&|_| pid)),
            ("deviceId", c(&|r| r.1)),
            ("address", c(&|r| r.2)),
            ("bytes", c(&|r| r.3)),
            ("memKind", c(&|r| r.4)),
            ("memoryOperationType", c(&|r| r.5)),
        ])
        .unwrap();
        let mut t = empty();
        t.memory_usage = Some(mem);
        t
    }

    fn empty() -> ExportTables {
        ExportTables::from_named(&[(
            NVTX_EVENTS.to_string(),
            RecordBatch::new_empty(Arc::new(Schema::empty())),
        )])
        .unwrap()
    }

    #[test]
    fn frees_take_the_device_of_their_allocation_and_rows_come_in_time_order() {
        let t = export(&[
            (50, NO_DEVICE, 0x1000, 64, 2, 1),
            (0, 1, 0x1000, 64, 2, 0),
            (10, 0, 0x2000, 32, 1, 0),
            (60, NO_DEVICE, 0x9000, 8, 2, 1),
        ]);
        let b = from_export(&t).unwrap().unwrap();
        let m = MemoryUsage::of(&read(write(&b).unwrap()).unwrap()).unwrap();
        assert_eq!(m.start.values().to_vec(), vec![0, 10, 50, 60]);
        assert_eq!(m.device.values().to_vec(), vec![1, 0, 1, -1]);
        assert_eq!(m.pid.value(0), 77);
        assert_eq!(m.kind.value(1), "pinned");
        assert!(m.is_alloc(0) && !m.is_alloc(2));
    }

    #[test]
    fn an_export_without_the_table_has_no_member() {
        let t = empty();
        assert!(from_export(&t).unwrap().is_none());
    }
}
