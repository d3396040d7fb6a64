//! File formats: one module per format.
pub mod archive;
pub mod archive_writer;
pub mod graph_ops;
pub mod hlo;
pub mod limits;
pub mod metadata;
pub mod nsys_export;
pub mod pushpop;
pub mod thunk_metadata;
pub mod trace;

use anyhow::Result;
use arrow::array::{RecordBatch, RecordBatchReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Read a whole parquet file into one batch. Errors say what is wrong, in one line; the
/// caller adds the file name.
pub fn read_parquet(bytes: Vec<u8>) -> Result<RecordBatch> {
    let len = bytes.len() as u64;
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .map_err(|e| anyhow::anyhow!("not a readable parquet file ({e})"))?;
    check_parquet_expansion(builder.metadata(), len)?;
    let reader = builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot read parquet ({e})"))?;
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("corrupt or truncated parquet ({e})"))?;
    Ok(arrow::compute::concat_batches(&schema, &batches)?)
}

/// A parquet file of `len` bytes whose row groups declare more uncompressed data than a
/// member of that size may expand to (see [`limits`]) is refused before any page is read.
/// The pages' own sizes are checked as they are decompressed by the parquet reader.
pub fn check_parquet_expansion(
    meta: &parquet::file::metadata::ParquetMetaData,
    len: u64,
) -> Result<()> {
    let declared: u64 = meta
        .row_groups()
        .iter()
        .map(|rg| rg.total_byte_size().max(0) as u64)
        .fold(0u64, u64::saturating_add);
    let l = limits::get();
    let limit = l.for_member(len);
    if declared > limit {
        anyhow::bail!(
            "{}",
            limits::ExpandError::TooLarge {
                limit,
                compressed: len,
                ratio: l.ratio
            }
        );
    }
    Ok(())
}

/// How pandas should rebuild a frame's index from a parquet file written here (the
/// `pandas` schema metadata that pyarrow writes), so that the notebooks and scripts that read
/// nsys-jax archives with pandas see the frames nsys-jax wrote.
pub enum PandasIndex<'a> {
    /// A default `RangeIndex` 0..n.
    Default,
    /// These columns are the index (they stay columns in the file).
    Columns(&'a [&'a str]),
    /// A `RangeIndex` named `name`: start, stop, step.
    Range(&'a str, i64, i64, i64),
}

/// The `pandas` metadata entry for `batch` (column names and types as pandas records them;
/// `levels` > 1 when the column names are stringified tuples of a MultiIndex).
pub fn pandas_metadata(batch: &RecordBatch, index: &PandasIndex, levels: usize) -> String {
    use arrow::datatypes::DataType;
    let index_columns = match index {
        PandasIndex::Default => serde_json::json!([{
            "kind": "range", "name": null, "start": 0, "stop": batch.num_rows(), "step": 1
        }]),
        PandasIndex::Columns(c) => serde_json::json!(c),
        PandasIndex::Range(name, start, stop, step) => serde_json::json!([{
            "kind": "range", "name": name, "start": start, "stop": stop, "step": step
        }]),
    };
    let columns: Vec<serde_json::Value> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let (pandas, numpy) = match f.data_type() {
                DataType::Int64 => ("int64", "int64"),
                DataType::Int32 => ("int32", "int32"),
                DataType::Float64 => ("float64", "float64"),
                DataType::Boolean => ("bool", "bool"),
                _ => ("unicode", "object"),
            };
            serde_json::json!({
                "name": f.name(), "field_name": f.name(),
                "pandas_type": pandas, "numpy_type": numpy, "metadata": null
            })
        })
        .collect();
    let level = serde_json::json!({
        "name": null, "field_name": null, "pandas_type": "unicode",
        "numpy_type": "object", "metadata": {"encoding": "UTF-8"}
    });
    serde_json::json!({
        "index_columns": index_columns,
        "column_indexes": vec![level; levels.max(1)],
        "columns": columns,
        "creator": {"library": "nsys-jax-pipe", "version": env!("CARGO_PKG_VERSION")},
        "pandas_version": "2.2.0",
    })
    .to_string()
}

/// Write `batch` as a parquet file (snappy, one row group per 128k rows) with pandas
/// metadata (see [`pandas_metadata`]).
pub fn write_parquet(batch: &RecordBatch, index: &PandasIndex, levels: usize) -> Result<Vec<u8>> {
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    let pandas = pandas_metadata(batch, index, levels);
    let mut meta = batch.schema().metadata().clone();
    meta.insert("pandas".to_string(), pandas.clone());
    let schema = std::sync::Arc::new(batch.schema().as_ref().clone().with_metadata(meta));
    let batch = batch.clone().with_schema(schema.clone())?;
    let props = WriterProperties::builder()
        // Also as a file-level entry, where pandas' readers look first.
        .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
            "pandas".to_string(),
            pandas,
        )]))
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(128 * 1024))
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(out)
}
