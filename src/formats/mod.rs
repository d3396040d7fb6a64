//! File formats: one module per format.
pub mod archive;
pub mod hlo;
pub mod nsys_export;
pub mod pushpop;
pub mod trace;

use anyhow::Result;
use arrow::array::{RecordBatch, RecordBatchReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Read a whole parquet file into one batch. Errors say what is wrong, in one line; the
/// caller adds the file name.
pub fn read_parquet(bytes: Vec<u8>) -> Result<RecordBatch> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .map_err(|e| anyhow::anyhow!("not a readable parquet file ({e})"))?;
    let reader = builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot read parquet ({e})"))?;
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("corrupt or truncated parquet ({e})"))?;
    Ok(arrow::compute::concat_batches(&schema, &batches)?)
}
