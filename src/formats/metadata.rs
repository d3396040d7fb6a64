//! Metadata files of nsys-jax archives (docs/design.md, "Archive layout"), from an `nsys export`:
//! - `thread-metadata.parquet`: `Name, Priority, PID, TID` (pandas index PID, TID), one row
//!   per `ThreadNames` row;
//! - `system-metadata.parquet`: `name, value, nameEnum` (index nameEnum) from
//!   `TARGET_INFO_SYSTEM_ENV`;
//! - `device-metadata.parquet`: `TARGET_INFO_GPU` joined with `TARGET_INFO_NVTX_CUDA_DEVICE`
//!   on `cuDevice = deviceId`, in the GPU table's order; the columns are named like the
//!   stringified tuples of the two-level column index pandas wrote
//!   (`('TARGET_INFO_GPU', 'name')`), and the index is `cuDevice`.
//!
//! Types follow what nsys-jax wrote (integers as int64, text as strings) so that the notebooks
//! that read its archives read these.

use super::nsys_export::{
    ExportTables, TARGET_INFO_GPU, TARGET_INFO_NVTX_CUDA_DEVICE, TARGET_INFO_SYSTEM_ENV,
    THREAD_NAMES, int64_column, text_column,
};
use super::{PandasIndex, write_parquet};
use anyhow::Result;
use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array};
use arrow::compute::{cast, take};
use arrow::datatypes::DataType;
use std::sync::Arc;

/// `(file name, parquet bytes)` for the three metadata files. A table the report lacks gives
/// an empty file with the same columns.
pub fn metadata_files(t: &ExportTables) -> Result<Vec<(String, Vec<u8>)>> {
    Ok(vec![
        (
            super::archive::THREAD_METADATA.to_string(),
            write_parquet(&threads(t)?, &PandasIndex::Columns(&["PID", "TID"]), 1)?,
        ),
        (
            super::archive::SYSTEM_METADATA.to_string(),
            write_parquet(&system(t)?, &PandasIndex::Columns(&["nameEnum"]), 1)?,
        ),
        {
            let (batch, index) = devices(t)?;
            let idx = match range_of(&index) {
                Some((start, stop, step)) => PandasIndex::Range("cuDevice", start, stop, step),
                None => PandasIndex::Default,
            };
            (
                super::archive::DEVICE_METADATA.to_string(),
                write_parquet(&batch, &idx, 2)?,
            )
        },
    ])
}

/// The text column `name` of a metadata file (any string type), or nothing without one; a
/// column of another type is an error (a retyped or swapped table).
fn text_values(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>> {
    let Some(c) = batch.column_by_name(name) else {
        return Ok(Vec::new());
    };
    super::columns::ensure_text(c, name)?;
    let c = cast(c, &DataType::Utf8)?;
    let c = c
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("cast to Utf8 gives strings");
    Ok(c.iter().map(|v| v.map(str::to_string)).collect())
}

/// The columns a metadata table must have: a table without them is another table, or
/// damaged.
fn require(batch: &RecordBatch, what: &str, columns: &[&str]) -> Result<()> {
    for c in columns {
        anyhow::ensure!(
            batch.column_by_name(c).is_some(),
            "not {what}: no column {c}"
        );
    }
    Ok(())
}

/// The GPU name of each row of `device-metadata.parquet`.
pub fn gpu_names(device_metadata: Vec<u8>) -> Result<Vec<String>> {
    let batch = super::read_parquet(device_metadata)?;
    require_devices(&batch)?;
    Ok(
        text_values(&batch, &format!("('{TARGET_INFO_GPU}', 'name')"))?
            .into_iter()
            .flatten()
            .collect(),
    )
}

/// What makes a table the device metadata: the GPUs' names.
fn require_devices(batch: &RecordBatch) -> Result<()> {
    require(
        batch,
        "a device metadata table",
        &[&format!("('{TARGET_INFO_GPU}', 'name')")],
    )
}

/// The integer column `name` of a metadata file (any integer type, or floating point as
/// pandas writes integers with nulls), or nothing without one; text is an error.
fn int_values(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>> {
    let Some(c) = batch.column_by_name(name) else {
        return Ok(Vec::new());
    };
    super::columns::ensure_numbers(c, name)?;
    let c = cast(c, &DataType::Int64)?;
    let c = c
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64 gives integers");
    Ok(c.iter().collect())
}

/// What `device-metadata.parquet` says of each device: name, SM count, compute capability
/// memory bandwidth (for its peaks, `super::gpus`) and memory size. Rows without a name are left out.
pub fn device_facts(device_metadata: Vec<u8>) -> Result<Vec<super::gpus::DeviceFacts>> {
    let col = |c: &str| format!("('{TARGET_INFO_GPU}', '{c}')");
    let wanted: Vec<String> = [
        "name",
        "smCount",
        "computeMajor",
        "computeMinor",
        "memoryBandwidth",
        "totalMemory",
    ]
    .iter()
    .map(|c| col(c))
    .collect();
    let names: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let batch = super::read_parquet_columns(device_metadata, &names)?;
    require_devices(&batch)?;
    let names = text_values(&batch, &col("name"))?;
    let ints = |c: &str| -> Result<Vec<Option<i64>>> {
        let v = int_values(&batch, &col(c))?;
        Ok(if v.is_empty() {
            vec![None; names.len()]
        } else {
            v
        })
    };
    let (sms, major, minor, bandwidth, memory) = (
        ints("smCount")?,
        ints("computeMajor")?,
        ints("computeMinor")?,
        ints("memoryBandwidth")?,
        ints("totalMemory")?,
    );
    let positive = |v: Option<i64>| v.filter(|&x| x > 0);
    Ok(names
        .into_iter()
        .enumerate()
        .filter_map(|(i, name)| {
            Some(super::gpus::DeviceFacts {
                name: name?,
                sms: positive(sms[i]).and_then(|x| u32::try_from(x).ok()),
                capability: match (major[i], minor[i]) {
                    (Some(a), Some(b)) if a > 0 && b >= 0 => {
                        Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?))
                    }
                    _ => None,
                },
                memory_bandwidth: positive(bandwidth[i]).map(|b| b as f64),
                memory_bytes: positive(memory[i]).map(|b| b as f64),
            })
        })
        .collect())
}

/// The `(name, value)` entries of `system-metadata.parquet`.
pub fn system_entries(system_metadata: Vec<u8>) -> Result<Vec<(String, String)>> {
    let batch = super::read_parquet(system_metadata)?;
    require(&batch, "a system metadata table", &["name", "value"])?;
    let names = text_values(&batch, "name")?;
    let values = text_values(&batch, "value")?;
    Ok(names
        .into_iter()
        .zip(values)
        .filter_map(|(n, v)| Some((n?, v?)))
        .collect())
}

/// Id → text of the report's string table (sorted ids, binary search).
struct Strings {
    ids: Vec<(i64, u32)>,
    values: StringArray,
}

impl Strings {
    fn new(t: &ExportTables) -> Result<Strings> {
        let Some(s) = &t.string_ids else {
            return Ok(Strings {
                ids: vec![],
                values: StringArray::from(Vec::<&str>::new()),
            });
        };
        let id = int64_column(s, "StringIds", "id")?;
        let values = text_column(s, "StringIds", "value")?;
        let mut ids: Vec<(i64, u32)> = id
            .values()
            .iter()
            .enumerate()
            .map(|(i, &v)| (v, i as u32))
            .collect();
        ids.sort_unstable();
        Ok(Strings { ids, values })
    }

    fn get(&self, id: i64) -> Option<&str> {
        let i = self.ids.binary_search_by_key(&id, |p| p.0).ok()?;
        let row = self.ids[i].1 as usize;
        self.values.is_valid(row).then(|| self.values.value(row))
    }
}

fn threads(t: &ExportTables) -> Result<RecordBatch> {
    let (mut name, mut prio, mut pid, mut tid) = (vec![], vec![], vec![], vec![]);
    if let Some(b) = &t.thread_names {
        let strings = Strings::new(t)?;
        let name_id = int64_column(b, THREAD_NAMES, "nameId")?;
        let priority = int64_column(b, THREAD_NAMES, "priority")?;
        let gtid = int64_column(b, THREAD_NAMES, "globalTid")?;
        for i in 0..b.num_rows() {
            name.push(strings.get(name_id.value(i)).map(str::to_string));
            prio.push(priority.is_valid(i).then(|| priority.value(i)));
            pid.push((gtid.value(i) >> 24) & 0xFF_FFFF);
            tid.push(gtid.value(i) & 0xFF_FFFF);
        }
    }
    Ok(RecordBatch::try_from_iter(vec![
        ("Name", Arc::new(StringArray::from(name)) as ArrayRef),
        ("Priority", Arc::new(Int64Array::from(prio))),
        ("PID", Arc::new(Int64Array::from(pid))),
        ("TID", Arc::new(Int64Array::from(tid))),
    ])?)
}

fn system(t: &ExportTables) -> Result<RecordBatch> {
    let Some(b) = &t.target_info_system_env else {
        return Ok(RecordBatch::try_from_iter(vec![
            (
                "name",
                Arc::new(StringArray::from(Vec::<&str>::new())) as ArrayRef,
            ),
            ("value", Arc::new(StringArray::from(Vec::<&str>::new()))),
            ("nameEnum", Arc::new(Int64Array::from(Vec::<i64>::new()))),
        ])?);
    };
    Ok(RecordBatch::try_from_iter(vec![
        (
            "name",
            Arc::new(text_column(b, TARGET_INFO_SYSTEM_ENV, "name")?) as ArrayRef,
        ),
        (
            "value",
            Arc::new(text_column(b, TARGET_INFO_SYSTEM_ENV, "value")?),
        ),
        (
            "nameEnum",
            Arc::new(int64_column(b, TARGET_INFO_SYSTEM_ENV, "nameEnum")?),
        ),
    ])?)
}

/// The joined device table and its `cuDevice` index values.
fn devices(t: &ExportTables) -> Result<(RecordBatch, Vec<i64>)> {
    let (Some(gpu), Some(nvtx)) = (&t.target_info_gpu, &t.target_info_nvtx_cuda_device) else {
        let empty = RecordBatch::try_from_iter(vec![(
            format!("('{TARGET_INFO_GPU}', 'name')"),
            Arc::new(StringArray::from(Vec::<&str>::new())) as ArrayRef,
        )])?;
        return Ok((empty, vec![]));
    };
    let cu = int64_column(gpu, TARGET_INFO_GPU, "cuDevice")?;
    let dev = int64_column(nvtx, TARGET_INFO_NVTX_CUDA_DEVICE, "deviceId")?;
    // Inner join in the GPU table's order; each GPU row meets the NVTX rows of its device.
    let mut by_dev: Vec<(i64, u32)> = (0..nvtx.num_rows())
        .filter(|&i| dev.is_valid(i))
        .map(|i| (dev.value(i), i as u32))
        .collect();
    by_dev.sort_unstable();
    let (mut left, mut right, mut index) = (vec![], vec![], vec![]);
    for i in 0..gpu.num_rows() {
        if !cu.is_valid(i) {
            continue;
        }
        let c = cu.value(i);
        let from = by_dev.partition_point(|p| p.0 < c);
        for p in by_dev[from..].iter().take_while(|p| p.0 == c) {
            left.push(i as u32);
            right.push(p.1);
            index.push(c);
        }
    }
    let (left, right) = (UInt32Array::from(left), UInt32Array::from(right));
    let mut cols: Vec<(String, ArrayRef)> = Vec::new();
    for (table, batch, rows, skip) in [
        (TARGET_INFO_GPU, gpu, &left, Some("cuDevice")),
        (TARGET_INFO_NVTX_CUDA_DEVICE, nvtx, &right, None),
    ] {
        for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
            if Some(f.name().as_str()) == skip {
                continue;
            }
            let c = match c.data_type() {
                DataType::Boolean => cast(c, &DataType::Int64)?,
                _ => c.clone(),
            };
            cols.push((
                format!("('{table}', '{}')", f.name()),
                take(&c, rows, None)?,
            ));
        }
    }
    Ok((RecordBatch::try_from_iter(cols)?, index))
}

/// `(start, stop, step)` when `v` is an arithmetic progression (pandas' `RangeIndex`).
fn range_of(v: &[i64]) -> Option<(i64, i64, i64)> {
    match v {
        [] => Some((0, 0, 1)),
        [a] => Some((*a, a + 1, 1)),
        [a, b, ..] => {
            let step = b - a;
            (step != 0 && v.windows(2).all(|w| w[1] - w[0] == step))
                .then(|| (*a, v[v.len() - 1] + step, step))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(range_of(&[1, 0]), Some((1, -1, -1)));
        assert_eq!(range_of(&[0, 1, 2]), Some((0, 3, 1)));
        assert_eq!(range_of(&[0, 2, 3]), None);
        assert_eq!(range_of(&[5]), Some((5, 6, 1)));
    }
}
