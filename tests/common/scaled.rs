//! Archives of a run made slower or faster by a known factor: every GPU time point of the
//! projection, the graph kernels and the copies goes through `t0 + f·(t − t0)` and every
//! duration is multiplied by `f` (nesting kept), and `run`'s record names a commit of our
//! choosing. The XLA dumps and the compile ranges stay as they are. For histories with steps
//! at known commits and the real run-to-run noise of the archives they are made from.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, RecordBatchReader};
use arrow::datatypes::DataType;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const SCALED: [&str; 3] = [
    "nvtx_gpu_proj_trace/trace.parquet",
    "nsys-jax-pipe/graph-ops.parquet",
    "nsys-jax-pipe/gpu-transfers.parquet",
];
const RECORD: &str = "nsys-jax-pipe/run-metadata.json";

fn is_time(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("start") || n.contains("end") || n == "launch"
}

fn is_duration(name: &str) -> bool {
    name.to_ascii_lowercase().contains("dur")
}

fn map(a: &ArrayRef, f: impl Fn(f64) -> f64) -> ArrayRef {
    match a.data_type() {
        DataType::Int64 => {
            let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
            Arc::new(
                a.iter()
                    .map(|v| v.map(|v| f(v as f64).round() as i64))
                    .collect::<Int64Array>(),
            )
        }
        DataType::Float64 => {
            let a = a.as_any().downcast_ref::<Float64Array>().unwrap();
            Arc::new(a.iter().map(|v| v.map(&f)).collect::<Float64Array>())
        }
        _ => a.clone(),
    }
}

fn first_time(batch: &RecordBatch) -> Option<f64> {
    let schema = batch.schema();
    let mut t0: Option<f64> = None;
    for (i, field) in schema.fields().iter().enumerate() {
        if !is_time(field.name()) {
            continue;
        }
        let c = batch.column(i);
        let min = match c.data_type() {
            DataType::Int64 => {
                arrow::compute::min(c.as_any().downcast_ref::<Int64Array>().unwrap())
                    .map(|v| v as f64)
            }
            DataType::Float64 => {
                arrow::compute::min(c.as_any().downcast_ref::<Float64Array>().unwrap())
            }
            _ => None,
        };
        if let Some(m) = min {
            t0 = Some(t0.map_or(m, |t: f64| t.min(m)));
        }
    }
    t0
}

fn scale_parquet(bytes: Vec<u8>, factor: f64, t0: Option<f64>) -> (Vec<u8>, Option<f64>) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .unwrap()
        .build()
        .unwrap();
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    let batch = arrow::compute::concat_batches(&schema, &batches).unwrap();
    let t0 = t0.or_else(|| first_time(&batch)).unwrap_or(0.0);
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, c)| {
            if is_duration(field.name()) {
                map(c, |d| d * factor)
            } else if is_time(field.name()) {
                map(c, |t| t0 + (t - t0) * factor)
            } else {
                c.clone()
            }
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    (out, Some(t0))
}

/// `src` with its GPU times scaled by `factor` and its record naming `commit`, written to
/// `dst`.
pub fn scaled_archive(src: &Path, dst: &Path, factor: f64, commit: &str) {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(src).unwrap()).unwrap();
    let mut w = zip::ZipWriter::new(std::fs::File::create(dst).unwrap());
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    // The projection first: its first time is the origin of every member's map.
    let mut t0 = None;
    let mut names: Vec<String> = (0..zip.len())
        .map(|i| zip.by_index_raw(i).unwrap().name().unwrap().to_string())
        .collect();
    names.sort_by_key(|n| n != SCALED[0]);
    for name in names {
        if SCALED.contains(&name.as_str()) {
            let mut bytes = Vec::new();
            zip.by_name(&name).unwrap().read_to_end(&mut bytes).unwrap();
            let (new, origin) = scale_parquet(bytes, factor, t0);
            t0 = origin;
            w.start_file(name.as_str(), stored).unwrap();
            w.write_all(&new).unwrap();
        } else if name == RECORD {
            let mut bytes = Vec::new();
            zip.by_name(&name).unwrap().read_to_end(&mut bytes).unwrap();
            let mut record: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            record["git"] = serde_json::json!({"commit": commit, "branch": "main", "dirty": false});
            w.start_file(name.as_str(), stored).unwrap();
            w.write_all(&serde_json::to_vec(&record).unwrap()).unwrap();
        } else {
            let idx = zip.index_for_name(&name).unwrap();
            w.raw_copy_file(zip.by_index_raw(idx).unwrap()).unwrap();
        }
    }
    w.finish().unwrap();
}
