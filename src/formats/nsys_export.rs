//! Tables exported from an Nsight Systems report with `nsys export --type arrowdir` (or
//! `parquetdir`) (docs/design.md, "Nsight Systems export").
//!
//! Such an export is a folder holding one `<TABLE>.arrow` (Arrow IPC stream) or
//! `<TABLE>.parquet` per table, named exactly like the SQLite tables (`NVTX_EVENTS`,
//! `StringIds`, `CUPTI_ACTIVITY_KIND_KERNEL`, ...). Tables are created lazily: a report
//! without memsets has no `CUPTI_ACTIVITY_KIND_MEMSET` file, an NVTX-only capture has no CUPTI
//! tables at all.
//!
//! [`read_export_dir`] reads only the columns this project uses and normalises their types:
//! nsys writes ids such as `globalTid`, `globalPid`, `domainId` or `nameId` as unsigned
//! 64-bit integers and other exporters may write nullable integers as floating point; every
//! integer column comes back as `Int64` (a value that does not fit, or a float that is not
//! a whole number, is an error naming the file, column and row). Text columns come back as
//! `Utf8`. The small `TARGET_INFO_*` tables are kept whole (the archive's metadata files copy
//! them), with their integer columns normalised the same way.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, RecordBatchReader, StringArray,
    new_null_array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Float32Type, Float64Type, Int64Type, Schema, UInt64Type};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// `NVTX_EVENTS`: markers, ranges and domain registrations.
pub const NVTX_EVENTS: &str = "NVTX_EVENTS";
/// `StringIds(id, value)`: the string table.
pub const STRING_IDS: &str = "StringIds";
/// CUDA runtime and driver API calls.
pub const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
/// GPU kernels.
pub const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
/// GPU memory copies.
pub const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
/// GPU memory sets.
pub const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
/// `ThreadNames(nameId, priority, globalTid)`.
pub const THREAD_NAMES: &str = "ThreadNames";
/// One row per GPU of the machine.
pub const TARGET_INFO_GPU: &str = "TARGET_INFO_GPU";
/// Names given to CUDA devices through NVTX (`Xla:#global=0,...#`).
pub const TARGET_INFO_NVTX_CUDA_DEVICE: &str = "TARGET_INFO_NVTX_CUDA_DEVICE";
/// The machine's environment (CPU, OS, driver, ...).
pub const TARGET_INFO_SYSTEM_ENV: &str = "TARGET_INFO_SYSTEM_ENV";
/// `CUDA_GPU_MEMORY_USAGE_EVENTS`: device allocations and frees (with
/// `--cuda-memory-usage=true` only).
pub const MEMORY_USAGE: &str = "CUDA_GPU_MEMORY_USAGE_EVENTS";

/// Every table [`read_export_dir`] reads, which is also what [`export`] asks nsys for.
pub const TABLES: [&str; 11] = [
    NVTX_EVENTS,
    STRING_IDS,
    RUNTIME,
    KERNEL,
    MEMCPY,
    MEMSET,
    THREAD_NAMES,
    TARGET_INFO_GPU,
    TARGET_INFO_NVTX_CUDA_DEVICE,
    TARGET_INFO_SYSTEM_ENV,
    MEMORY_USAGE,
];

/// The tables of one exported report. Only `NVTX_EVENTS` is required; the others are `None`
/// when the report has no such events.
#[derive(Debug, Clone)]
pub struct ExportTables {
    /// `start, end, eventType, text, textId, domainId, globalTid, endGlobalTid`.
    pub nvtx_events: RecordBatch,
    /// `id, value`.
    pub string_ids: Option<RecordBatch>,
    /// `start, end, correlationId, globalTid, nameId`.
    pub runtime: Option<RecordBatch>,
    /// `start, end, correlationId, globalPid, deviceId, streamId, shortName, demangledName,
    /// graphNodeId`.
    pub kernel: Option<RecordBatch>,
    /// `start, end, correlationId, globalPid, deviceId, streamId, graphNodeId, bytes,
    /// copyKind`.
    pub memcpy: Option<RecordBatch>,
    /// As `memcpy`.
    pub memset: Option<RecordBatch>,
    /// `nameId, priority, globalTid`.
    pub thread_names: Option<RecordBatch>,
    /// All columns.
    pub target_info_gpu: Option<RecordBatch>,
    /// All columns (`name, hwId, vmId, deviceId`).
    pub target_info_nvtx_cuda_device: Option<RecordBatch>,
    /// All columns (`globalVid, devStateName, name, nameEnum, value`).
    pub target_info_system_env: Option<RecordBatch>,
    /// `start, globalPid, deviceId, address, bytes, memKind, memoryOperationType`.
    pub memory_usage: Option<RecordBatch>,
}

impl ExportTables {
    /// The tables by name (for storing them as a node value).
    pub fn to_named(&self) -> Vec<(String, RecordBatch)> {
        let mut out = vec![(NVTX_EVENTS.to_string(), self.nvtx_events.clone())];
        for (name, t) in [
            (STRING_IDS, &self.string_ids),
            (RUNTIME, &self.runtime),
            (KERNEL, &self.kernel),
            (MEMCPY, &self.memcpy),
            (MEMSET, &self.memset),
            (THREAD_NAMES, &self.thread_names),
            (TARGET_INFO_GPU, &self.target_info_gpu),
            (
                TARGET_INFO_NVTX_CUDA_DEVICE,
                &self.target_info_nvtx_cuda_device,
            ),
            (TARGET_INFO_SYSTEM_ENV, &self.target_info_system_env),
            (MEMORY_USAGE, &self.memory_usage),
        ] {
            if let Some(b) = t {
                out.push((name.to_string(), b.clone()));
            }
        }
        out
    }

    /// The inverse of [`ExportTables::to_named`].
    pub fn from_named(tables: &[(String, RecordBatch)]) -> Result<ExportTables> {
        let get = |n: &str| tables.iter().find(|(k, _)| k == n).map(|(_, b)| b.clone());
        Ok(ExportTables {
            nvtx_events: get(NVTX_EVENTS).context("stored export has no NVTX_EVENTS")?,
            string_ids: get(STRING_IDS),
            runtime: get(RUNTIME),
            kernel: get(KERNEL),
            memcpy: get(MEMCPY),
            memset: get(MEMSET),
            thread_names: get(THREAD_NAMES),
            target_info_gpu: get(TARGET_INFO_GPU),
            target_info_nvtx_cuda_device: get(TARGET_INFO_NVTX_CUDA_DEVICE),
            target_info_system_env: get(TARGET_INFO_SYSTEM_ENV),
            memory_usage: get(MEMORY_USAGE),
        })
    }

    /// Whether the report holds any GPU activity (kernels, copies or sets).
    pub fn has_gpu_activity(&self) -> bool {
        [&self.kernel, &self.memcpy, &self.memset]
            .iter()
            .any(|t| t.as_ref().is_some_and(|b| b.num_rows() > 0))
    }
}

/// What a column must become.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Text,
}

/// One column to read.
struct Col {
    name: &'static str,
    kind: Kind,
    required: bool,
}

const fn int(name: &'static str) -> Col {
    Col {
        name,
        kind: Kind::Int,
        required: false,
    }
}

const fn int_req(name: &'static str) -> Col {
    Col {
        name,
        kind: Kind::Int,
        required: true,
    }
}

const fn text(name: &'static str) -> Col {
    Col {
        name,
        kind: Kind::Text,
        required: false,
    }
}

const fn text_req(name: &'static str) -> Col {
    Col {
        name,
        kind: Kind::Text,
        required: true,
    }
}

const NVTX_COLS: &[Col] = &[
    int_req("start"),
    int("end"),
    int_req("eventType"),
    text("text"),
    int("textId"),
    int("domainId"),
    int_req("globalTid"),
    int("endGlobalTid"),
    int("category"),
];
const STRING_COLS: &[Col] = &[int_req("id"), text_req("value")];
const RUNTIME_COLS: &[Col] = &[
    int_req("start"),
    int_req("end"),
    int("correlationId"),
    int("globalTid"),
    int("nameId"),
];
const KERNEL_COLS: &[Col] = &[
    int_req("start"),
    int_req("end"),
    int("correlationId"),
    int("globalPid"),
    int("deviceId"),
    int("streamId"),
    int("shortName"),
    int("demangledName"),
    int("graphNodeId"),
];
const MEM_COLS: &[Col] = &[
    int_req("start"),
    int_req("end"),
    int("correlationId"),
    int("globalPid"),
    int("deviceId"),
    int("streamId"),
    int("graphNodeId"),
    int("bytes"),
    int("copyKind"),
];
const MEMORY_USAGE_COLS: &[Col] = &[
    int_req("start"),
    int_req("globalPid"),
    int_req("deviceId"),
    int_req("address"),
    int_req("bytes"),
    int_req("memKind"),
    int_req("memoryOperationType"),
];
const THREAD_COLS: &[Col] = &[int_req("nameId"), int("priority"), int_req("globalTid")];

/// Reads the tables of an arrowdir or parquetdir export (see the module notes).
pub fn read_export_dir(dir: &Path) -> Result<ExportTables> {
    if !dir.is_dir() {
        bail!(
            "{}: not a folder (expected an nsys arrowdir or parquetdir export)",
            dir.display()
        );
    }
    // One table at a time: each is mapped, its wanted columns copied out and the mapping
    // dropped before the next (reading them side by side would map them all at once).
    let nvtx = read_table(dir, NVTX_EVENTS, Some(NVTX_COLS))?;
    let runtime = read_table(dir, RUNTIME, Some(RUNTIME_COLS))?;
    let kernel = read_table(dir, KERNEL, Some(KERNEL_COLS))?;
    let small = [
        read_table(dir, STRING_IDS, Some(STRING_COLS))?,
        read_table(dir, MEMCPY, Some(MEM_COLS))?,
        read_table(dir, MEMSET, Some(MEM_COLS))?,
        read_table(dir, THREAD_NAMES, Some(THREAD_COLS))?,
        read_table(dir, TARGET_INFO_GPU, None)?,
        read_table(dir, TARGET_INFO_NVTX_CUDA_DEVICE, None)?,
        read_table(dir, TARGET_INFO_SYSTEM_ENV, None)?,
        read_table(dir, MEMORY_USAGE, Some(MEMORY_USAGE_COLS))?,
    ];
    let nvtx_events = match nvtx {
        Some(t) => t,
        // nsys writes no file for a table without rows: a report without NVTX events (a
        // program that never ran XLA code) has none, but has other tables.
        None if TABLES.iter().any(|t| table_path(dir, t).exists()) => normalise_columns(
            RecordBatch::new_empty(Arc::new(Schema::empty())),
            Some(NVTX_COLS),
        )?,
        None => bail!(
            "{}: no tables ({} is not an nsys export)",
            dir.display(),
            dir.display()
        ),
    };
    let [
        string_ids,
        memcpy,
        memset,
        thread_names,
        gpu,
        nvtx_cuda_device,
        system_env,
        memory_usage,
    ] = small;
    Ok(ExportTables {
        nvtx_events,
        string_ids,
        runtime,
        kernel,
        memcpy,
        memset,
        thread_names,
        target_info_gpu: gpu,
        target_info_nvtx_cuda_device: nvtx_cuda_device,
        target_info_system_env: system_env,
        memory_usage,
    })
}

/// The file of `table` in an export folder: `<table>.arrow` (arrowdir) or `<table>.parquet`
/// (parquetdir); the parquet name when neither exists.
fn table_path(dir: &Path, table: &str) -> PathBuf {
    let arrow = dir.join(format!("{table}.arrow"));
    if arrow.exists() {
        return arrow;
    }
    dir.join(format!("{table}.parquet"))
}

/// Reads one table; `None` when its file is absent. `cols = None` keeps every column.
fn read_table(dir: &Path, table: &str, cols: Option<&[Col]>) -> Result<Option<RecordBatch>> {
    let path = table_path(dir, table);
    if !path.exists() {
        return Ok(None);
    }
    read_file(&path, cols)
        .with_context(|| format!("{}", path.display()))
        .map(Some)
}

fn read_file(path: &Path, cols: Option<&[Col]>) -> Result<RecordBatch> {
    if path.extension().is_some_and(|e| e == "arrow") {
        read_arrow(path, cols)
    } else {
        normalise_columns(read_parquet_file(path, cols)?, cols)
    }
}

/// The wanted columns that a file has, as indices into its schema, in file order.
fn wanted_roots(file_schema: &Schema, cols: Option<&[Col]>) -> Result<Vec<usize>> {
    let mut roots: Vec<usize> = match cols {
        Some(cols) => {
            let mut roots = Vec::new();
            for c in cols {
                match file_schema.index_of(c.name) {
                    Ok(i) => roots.push(i),
                    Err(_) if c.required => bail!("no column {:?}", c.name),
                    Err(_) => {}
                }
            }
            roots
        }
        None => (0..file_schema.fields().len()).collect(),
    };
    roots.sort_unstable();
    Ok(roots)
}

/// An Arrow IPC stream file of an arrowdir export, mapped rather than read: the decoded
/// arrays point into the mapping, so only the pages of the wanted columns are ever touched,
/// and each wanted column is copied out of it (normalised) before it is unmapped. Reading
/// the file instead would hold each record batch's whole body — every column nsys wrote,
/// three times what is used for the kernel table — for as long as any column of it lives
/// (docs/design.md, "Bounded memory").
fn read_arrow(path: &Path, cols: Option<&[Col]>) -> Result<RecordBatch> {
    use arrow::ipc::reader::StreamDecoder;
    let file = File::open(path).map_err(|e| anyhow!("cannot open: {e}"))?;
    // SAFETY: export folders are this process's scratch folders (see `capture`), written by
    // an nsys that has exited; nothing writes the file while it is mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| anyhow!("cannot map: {e}"))?;
    let mapped = map.as_ptr() as usize..map.as_ptr() as usize + map.len();
    let mut buffer = arrow::buffer::Buffer::from(bytes::Bytes::from_owner(map));
    let mut decoder = StreamDecoder::new();
    let unreadable = |e| anyhow!("not a readable Arrow IPC stream ({e})");
    let mut batches = Vec::new();
    let mut roots: Option<Vec<usize>> = None;
    while !buffer.is_empty() {
        let Some(batch) = decoder.decode(&mut buffer).map_err(unreadable)? else {
            continue;
        };
        let roots = match &roots {
            Some(r) => r,
            None => roots.insert(wanted_roots(&batch.schema(), cols)?),
        };
        let batch = normalise_columns(batch.project(roots)?, cols)?;
        batches.push(detach(batch, &mapped)?);
    }
    drop(buffer);
    decoder
        .finish()
        .map_err(|e| anyhow!("corrupt or truncated Arrow IPC stream ({e})"))?;
    if batches.is_empty() {
        let schema = decoder
            .schema()
            .ok_or_else(|| anyhow!("not a readable Arrow IPC stream (no schema)"))?;
        let roots = wanted_roots(&schema, cols)?;
        let empty = RecordBatch::new_empty(Arc::new(schema.project(&roots)?));
        return normalise_columns(empty, cols);
    }
    Ok(crate::engine::value::one_batch(
        &batches[0].schema(),
        batches,
    )?)
}

/// `batch` with every column that still points into the address range `mapped` copied out
/// of it (normalised columns that were converted already own their values).
fn detach(batch: RecordBatch, mapped: &std::ops::Range<usize>) -> Result<RecordBatch> {
    use arrow::array::{ArrayData, MutableArrayData, make_array};
    fn inside(d: &ArrayData, mapped: &std::ops::Range<usize>) -> bool {
        let within = |p: *const u8| mapped.contains(&(p as usize));
        d.buffers().iter().any(|b| within(b.as_ptr()))
            || d.nulls().is_some_and(|n| within(n.buffer().as_ptr()))
            || d.child_data().iter().any(|c| inside(c, mapped))
    }
    let columns = batch
        .columns()
        .iter()
        .map(|c| {
            let data = c.to_data();
            if !inside(&data, mapped) {
                return Ok(c.clone());
            }
            let mut copy = MutableArrayData::new(vec![&data], false, data.len());
            copy.try_extend(0, 0, data.len())?;
            Ok(make_array(copy.freeze()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

fn read_parquet_file(path: &Path, cols: Option<&[Col]>) -> Result<RecordBatch> {
    let file = File::open(path).map_err(|e| anyhow!("cannot open: {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| anyhow!("not a readable parquet file ({e})"))?;
    let roots = wanted_roots(builder.schema(), cols)?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let rows = super::whole_table_rows(builder.metadata());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(rows)
        .build()
        .map_err(|e| anyhow!("cannot read parquet ({e})"))?;
    let read_schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("corrupt or truncated parquet ({e})"))?;
    Ok(crate::engine::value::one_batch(&read_schema, batches)?)
}

/// The wanted columns with normalised types (see the module notes).
fn normalise_columns(raw: RecordBatch, cols: Option<&[Col]>) -> Result<RecordBatch> {
    let (fields, columns): (Vec<Field>, Vec<ArrayRef>) = match cols {
        Some(cols) => {
            let mut fields = Vec::with_capacity(cols.len());
            let mut columns = Vec::with_capacity(cols.len());
            for c in cols {
                let (data_type, array) = match (raw.column_by_name(c.name), c.kind) {
                    (Some(a), Kind::Int) => (DataType::Int64, normalise_int(a, c.name)?),
                    (Some(a), Kind::Text) => (DataType::Utf8, normalise_text(a, c.name)?),
                    (None, Kind::Int) => (
                        DataType::Int64,
                        new_null_array(&DataType::Int64, raw.num_rows()),
                    ),
                    (None, Kind::Text) => (
                        DataType::Utf8,
                        new_null_array(&DataType::Utf8, raw.num_rows()),
                    ),
                };
                // Always nullable, so that every export reads with the same schema.
                fields.push(Field::new(c.name, data_type, true));
                columns.push(array);
            }
            (fields, columns)
        }
        None => {
            let mut fields = Vec::new();
            let mut columns = Vec::new();
            for (field, array) in raw.schema().fields().iter().zip(raw.columns()) {
                let array = if field.data_type().is_integer() {
                    normalise_int(array, field.name())?
                } else {
                    array.clone()
                };
                fields.push(Field::new(
                    field.name(),
                    array.data_type().clone(),
                    field.is_nullable(),
                ));
                columns.push(array);
            }
            (fields, columns)
        }
    };
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| anyhow!("cannot assemble columns ({e})"))
}

/// An integer column of any stored type as `Int64`; errors on values that are not integers
/// or do not fit.
fn normalise_int(array: &ArrayRef, column: &str) -> Result<ArrayRef> {
    let bad = |row: usize, what: &str| anyhow!("column {column:?}, row {row}: {what}");
    let out: ArrayRef = match array.data_type() {
        DataType::Int64 => array.clone(),
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => cast(array, &DataType::Int64)?,
        DataType::UInt64 => {
            let a = array.as_primitive::<UInt64Type>();
            if let Some(row) = (0..a.len()).find(|&i| a.is_valid(i) && a.value(i) > i64::MAX as u64)
            {
                return Err(bad(
                    row,
                    &format!("{} does not fit a signed 64-bit integer", a.value(row)),
                ));
            }
            Arc::new(a.unary::<_, Int64Type>(|v| v as i64))
        }
        DataType::Float64 => Arc::new(float_to_int(
            array.as_primitive::<Float64Type>().iter(),
            &bad,
        )?),
        DataType::Float32 => Arc::new(float_to_int(
            array
                .as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(f64::from)),
            &bad,
        )?),
        DataType::Null => new_null_array(&DataType::Int64, array.len()),
        other => bail!("column {column:?}: expected integers, found {other}"),
    };
    Ok(out)
}

fn float_to_int(
    values: impl Iterator<Item = Option<f64>>,
    bad: &dyn Fn(usize, &str) -> anyhow::Error,
) -> Result<Int64Array> {
    // 2^63 as f64; every whole f64 below it in magnitude converts exactly.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    values
        .enumerate()
        .map(|(row, v)| match v {
            None => Ok(None),
            Some(x) if x.is_nan() => Ok(None),
            Some(x) if x.fract() == 0.0 && (-LIMIT..LIMIT).contains(&x) => Ok(Some(x as i64)),
            Some(x) => Err(bad(row, &format!("{x} is not a 64-bit integer"))),
        })
        .collect()
}

fn normalise_text(array: &ArrayRef, column: &str) -> Result<ArrayRef> {
    match array.data_type() {
        DataType::Utf8 => Ok(array.clone()),
        DataType::Null => Ok(new_null_array(&DataType::Utf8, array.len())),
        _ => cast(array, &DataType::Utf8)
            .map_err(|e| anyhow!("column {column:?}: expected text ({e})")),
    }
}

/// A column of a table as `Int64` (a no-op copy for tables from [`read_export_dir`]; other
/// integer or float types are converted with the same checks).
pub fn int64_column(batch: &RecordBatch, table: &str, column: &str) -> Result<Int64Array> {
    let array = batch
        .column_by_name(column)
        .ok_or_else(|| anyhow!("{table}: no column {column:?}"))?;
    let array = normalise_int(array, column).with_context(|| table.to_string())?;
    Ok(array.as_primitive::<Int64Type>().clone())
}

/// A column of a table as `Utf8`.
pub fn text_column(batch: &RecordBatch, table: &str, column: &str) -> Result<StringArray> {
    let array = batch
        .column_by_name(column)
        .ok_or_else(|| anyhow!("{table}: no column {column:?}"))?;
    let array = normalise_text(array, column).with_context(|| table.to_string())?;
    Ok(array.as_string::<i32>().clone())
}

mod process;
pub use process::{Running, export, start};

#[cfg(test)]
pub(crate) mod testing {
    //! Finding nsys and exporting fixtures in tests.
    use std::path::{Path, PathBuf};

    /// Exports `report` into a fresh folder under `tmp`.
    pub fn export_to(nsys: &Path, report: &Path, tmp: &Path) -> PathBuf {
        let out = tmp.join(
            report
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "report".into()),
        );
        super::export(nsys, report, &out).unwrap();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, UInt64Array};
    use parquet::arrow::ArrowWriter;

    fn write_parquet(path: &Path, batch: &RecordBatch) {
        let file = File::create(path).unwrap();
        let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
    }

    fn nvtx_batch(global_tid: ArrayRef, end: ArrayRef) -> RecordBatch {
        let n = global_tid.len();
        RecordBatch::try_from_iter([
            (
                "start",
                Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
            ),
            ("end", end),
            (
                "eventType",
                Arc::new(Int64Array::from(vec![59; n])) as ArrayRef,
            ),
            ("globalTid", global_tid),
            ("color", Arc::new(Int64Array::from(vec![1; n])) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn normalises_unsigned_and_float_columns() {
        let tmp = tempfile::tempdir().unwrap();
        let gt = (1u64 << 48) | (64 << 24) | 472;
        let batch = nvtx_batch(
            Arc::new(UInt64Array::from(vec![gt, gt])),
            Arc::new(Float64Array::from(vec![Some(10.0), None])),
        );
        write_parquet(&tmp.path().join("NVTX_EVENTS.parquet"), &batch);
        let t = read_export_dir(tmp.path()).unwrap();
        let nvtx = &t.nvtx_events;
        let schema = nvtx.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "start",
                "end",
                "eventType",
                "text",
                "textId",
                "domainId",
                "globalTid",
                "endGlobalTid",
                "category"
            ]
        );
        let g = int64_column(nvtx, NVTX_EVENTS, "globalTid").unwrap();
        assert_eq!(g.values(), &[gt as i64, gt as i64]);
        let e = int64_column(nvtx, NVTX_EVENTS, "end").unwrap();
        assert_eq!(e.value(0), 10);
        assert!(e.is_null(1));
        assert_eq!(
            nvtx.column_by_name("text").unwrap().data_type(),
            &DataType::Utf8
        );
        assert_eq!(nvtx.column_by_name("text").unwrap().null_count(), 2);
        assert!(t.kernel.is_none() && t.string_ids.is_none() && t.memset.is_none());
    }

    /// The whole error (with its causes) of reading the export in `dir`.
    fn export_error(dir: &Path) -> String {
        format!("{:#}", read_export_dir(dir).unwrap_err())
    }

    fn write_arrow(path: &Path, schema: &Schema, batches: &[RecordBatch]) {
        let file = File::create(path).unwrap();
        let mut w = arrow::ipc::writer::StreamWriter::try_new(file, schema).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn reads_arrow_streams_batch_by_batch_and_refuses_damaged_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let gt = (1u64 << 48) | (64 << 24) | 472;
        let one = nvtx_batch(
            Arc::new(UInt64Array::from(vec![gt, gt])),
            Arc::new(Float64Array::from(vec![Some(10.0), None])),
        );
        let two = nvtx_batch(
            Arc::new(UInt64Array::from(vec![gt + 1])),
            Arc::new(Float64Array::from(vec![Some(30.0)])),
        );
        let path = tmp.path().join("NVTX_EVENTS.arrow");
        write_arrow(&path, &one.schema(), &[one.clone(), two]);
        let t = read_export_dir(tmp.path()).unwrap();
        let g = int64_column(&t.nvtx_events, NVTX_EVENTS, "globalTid").unwrap();
        assert_eq!(g.values(), &[gt as i64, gt as i64, gt as i64 + 1]);
        let e = int64_column(&t.nvtx_events, NVTX_EVENTS, "end").unwrap();
        assert_eq!((e.value(0), e.is_null(1), e.value(2)), (10, true, 30));
        assert_eq!(t.nvtx_events.num_columns(), NVTX_COLS.len());

        // A stream of a schema alone is a table without rows.
        write_arrow(&path, &one.schema(), &[]);
        let t = read_export_dir(tmp.path()).unwrap();
        assert_eq!(t.nvtx_events.num_rows(), 0);
        assert_eq!(t.nvtx_events.num_columns(), NVTX_COLS.len());

        // Cut short, or empty: an error naming the file.
        write_arrow(&path, &one.schema(), &[one.clone()]);
        let whole = std::fs::read(&path).unwrap();
        for cut in [
            &whole[..whole.len() - 20],
            &whole[..0],
            b"not arrow at all".as_slice(),
        ] {
            std::fs::write(&path, cut).unwrap();
            let e = export_error(tmp.path());
            assert!(
                e.contains("NVTX_EVENTS.arrow") && e.contains("Arrow IPC"),
                "{e}"
            );
        }
    }

    #[test]
    fn detached_columns_own_their_values() {
        let batch = nvtx_batch(
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            Arc::new(Int64Array::from(vec![Some(4), None, Some(6)])),
        );
        let end = batch.column_by_name("end").unwrap().to_data();
        let at = end.buffers()[0].as_ptr() as usize;
        let out = detach(batch.clone(), &(at..at + 24)).unwrap();
        let copied = out.column_by_name("end").unwrap();
        assert_ne!(copied.to_data().buffers()[0].as_ptr() as usize, at);
        assert_eq!(
            copied.as_ref(),
            batch.column_by_name("end").unwrap().as_ref()
        );
        // Columns elsewhere are kept as they are.
        let start =
            |b: &RecordBatch| b.column_by_name("start").unwrap().to_data().buffers()[0].as_ptr();
        assert_eq!(start(&out), start(&batch));
    }

    #[test]
    fn bad_values_and_missing_tables_name_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let e = read_export_dir(tmp.path()).unwrap_err().to_string();
        assert!(
            e.contains("no tables") && e.contains("is not an nsys export"),
            "{e}"
        );
        // A report without NVTX events: the other tables, and no NVTX rows.
        let strings = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("value", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
        ])
        .unwrap();
        write_parquet(&tmp.path().join("StringIds.parquet"), &strings);
        let t = read_export_dir(tmp.path()).unwrap();
        assert_eq!(t.nvtx_events.num_rows(), 0);
        assert_eq!(t.nvtx_events.num_columns(), NVTX_COLS.len());
        std::fs::remove_file(tmp.path().join("StringIds.parquet")).unwrap();

        let batch = nvtx_batch(
            Arc::new(UInt64Array::from(vec![1, 2])),
            Arc::new(Float64Array::from(vec![Some(10.5), None])),
        );
        write_parquet(&tmp.path().join("NVTX_EVENTS.parquet"), &batch);
        let e = export_error(tmp.path());
        assert!(
            e.contains("NVTX_EVENTS.parquet") && e.contains("\"end\""),
            "{e}"
        );

        let batch = nvtx_batch(
            Arc::new(UInt64Array::from(vec![u64::MAX, 2])),
            Arc::new(Float64Array::from(vec![Some(10.0), None])),
        );
        write_parquet(&tmp.path().join("NVTX_EVENTS.parquet"), &batch);
        let e = export_error(tmp.path());
        assert!(e.contains("globalTid") && e.contains("row 0"), "{e}");

        std::fs::write(tmp.path().join("NVTX_EVENTS.parquet"), b"not parquet").unwrap();
        let e = export_error(tmp.path());
        assert!(
            e.contains("NVTX_EVENTS.parquet") && e.contains("parquet"),
            "{e}"
        );

        let no_tid = RecordBatch::try_from_iter([(
            "start",
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
        )])
        .unwrap();
        write_parquet(&tmp.path().join("NVTX_EVENTS.parquet"), &no_tid);
        let e = export_error(tmp.path());
        assert!(
            e.contains("NVTX_EVENTS.parquet") && e.contains("eventType"),
            "{e}"
        );
    }

    #[test]
    fn exports_and_reads_a_fixture() {
        let Some(fixtures) = crate::testutil::fixtures_dir() else {
            return;
        };
        let Some(nsys) = crate::testutil::nsys_path() else {
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let report = fixtures.join("h200/fsdp2_1proc/rep.nsys-rep");
        // A stale table from an earlier export must not survive a new one.
        let out = tmp.path().join("rep");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("CUPTI_ACTIVITY_KIND_MEMSET.parquet"), b"stale").unwrap();
        std::fs::write(out.join("CUPTI_ACTIVITY_KIND_MEMSET.arrow"), b"stale").unwrap();
        export(&nsys, &report, &out).unwrap();
        let mut files: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        // Only the selected tables, and of those only the ones with events.
        assert!(
            files
                .iter()
                .all(|f| TABLES.iter().any(|t| f == &format!("{t}.arrow"))),
            "{files:?}"
        );
        assert!(!files.iter().any(|f| f.contains("MEMSET")), "{files:?}");

        let t = read_export_dir(&out).unwrap();
        assert_eq!(t.nvtx_events.num_rows(), 2182);
        assert_eq!(t.kernel.as_ref().unwrap().num_rows(), 844);
        assert_eq!(t.memcpy.as_ref().unwrap().num_rows(), 9);
        assert!(t.memset.is_none());
        assert_eq!(t.runtime.as_ref().unwrap().num_rows(), 4203);
        assert_eq!(t.thread_names.as_ref().unwrap().num_rows(), 782);
        assert_eq!(t.target_info_gpu.as_ref().unwrap().num_rows(), 4);
        assert_eq!(
            t.target_info_nvtx_cuda_device.as_ref().unwrap().num_rows(),
            2
        );
        assert_eq!(t.target_info_system_env.as_ref().unwrap().num_rows(), 83);
        for (name, batch) in [
            (NVTX_EVENTS, Some(&t.nvtx_events)),
            (RUNTIME, t.runtime.as_ref()),
            (KERNEL, t.kernel.as_ref()),
            (THREAD_NAMES, t.thread_names.as_ref()),
            (TARGET_INFO_GPU, t.target_info_gpu.as_ref()),
        ] {
            for f in batch.unwrap().schema().fields() {
                assert!(
                    !f.data_type().is_unsigned_integer() && !f.data_type().is_floating(),
                    "{name}.{} is {}",
                    f.name(),
                    f.data_type()
                );
            }
        }
        let gpu = t.target_info_gpu.as_ref().unwrap();
        assert_eq!(
            gpu.column_by_name("totalMemory").unwrap().data_type(),
            &DataType::Int64
        );
        assert_eq!(
            gpu.column_by_name("name").unwrap().data_type(),
            &DataType::Utf8
        );
    }

    #[test]
    fn export_failure_carries_nsys_message() {
        let Some(nsys) = crate::testutil::nsys_path() else {
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let bad = tmp.path().join("bad.nsys-rep");
        std::fs::write(&bad, b"this is not a report").unwrap();
        let e = export(&nsys, &bad, &tmp.path().join("out"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bad.nsys-rep") && e.contains("Cannot read"),
            "{e}"
        );
        let e = export(
            &nsys,
            &tmp.path().join("missing.nsys-rep"),
            &tmp.path().join("o"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("missing.nsys-rep"), "{e}");
        let e = export(&tmp.path().join("no-nsys"), &bad, &tmp.path().join("o"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot run"), "{e}");
    }
}
