//! File formats: one module per format.
pub mod archive;
pub mod archive_writer;
pub mod columns;
pub mod gather;
pub mod gpu_transfers;
pub mod gpus;
pub mod graph_ops;
pub mod hlo;
pub mod interner;
pub mod limits;
pub mod memory_usage;
pub mod metadata;
pub mod notebook;
pub mod nsys_export;
pub mod pushpop;
pub mod run_metadata;
pub mod thunk_metadata;
pub mod trace;
pub mod user_nvtx;
pub mod xz;

use anyhow::Result;
use arrow::array::{RecordBatch, RecordBatchReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Read a whole parquet file into one batch. Errors say what is wrong, in one line; the
/// caller adds the file name.
pub fn read_parquet(bytes: Vec<u8>) -> Result<RecordBatch> {
    read_parquet_with(bytes, None, &[])
}

/// The top-level columns of a parquet file named in `names` that it has, read without the
/// others (errors as [`read_parquet`]'s).
pub fn read_parquet_columns(bytes: Vec<u8>, names: &[&str]) -> Result<RecordBatch> {
    read_parquet_with(bytes, Some(names), &[])
}

/// [`read_parquet`] of the top-level columns named in `columns` (all when None), with the
/// string columns named in `dictionaries` read as dictionaries of 32-bit keys (as parquet
/// stores repeated names: a row costs a key, not the name again).
pub fn read_parquet_with(
    bytes: Vec<u8>,
    columns: Option<&[&str]>,
    dictionaries: &[&str],
) -> Result<RecordBatch> {
    let (reader, _) = parquet_batches(bytes, columns, dictionaries, None)?;
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("corrupt or truncated parquet ({e})"))?;
    Ok(crate::engine::value::one_batch(&schema, batches)?)
}

/// The batches of a parquet file as [`read_parquet_with`] reads them, `rows` rows each (the
/// whole table in one when None, see [`whole_table_rows`]), and the rows the file declares
/// (a statement, to size what gathers them, not trusted beyond that).
pub fn parquet_batches(
    bytes: Vec<u8>,
    columns: Option<&[&str]>,
    dictionaries: &[&str],
    rows: Option<usize>,
) -> Result<(
    parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    usize,
)> {
    use arrow::datatypes::{DataType, Schema};
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    let unreadable =
        |e: parquet::errors::ParquetError| anyhow::anyhow!("not a readable parquet file ({e})");
    let bytes = bytes::Bytes::from(bytes);
    let len = bytes.len() as u64;
    let mut meta =
        ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::new()).map_err(unreadable)?;
    let plain = meta.schema().clone();
    let encoded = |name: &str, t: &DataType| dictionaries.contains(&name) && *t == DataType::Utf8;
    if plain
        .fields()
        .iter()
        .any(|f| encoded(f.name(), f.data_type()))
    {
        let fields: Vec<_> = plain
            .fields()
            .iter()
            .map(|f| match encoded(f.name(), f.data_type()) {
                true => f
                    .as_ref()
                    .clone()
                    .with_data_type(columns::dictionary_type()),
                false => f.as_ref().clone(),
            })
            .collect();
        let schema = Schema::new_with_metadata(fields, plain.metadata().clone());
        let options = ArrowReaderOptions::new().with_schema(std::sync::Arc::new(schema));
        meta =
            ArrowReaderMetadata::try_new(meta.metadata().clone(), options).map_err(unreadable)?;
    }
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, meta);
    check_parquet_expansion(builder.metadata(), len)?;
    let builder = match columns {
        Some(names) => project(builder, names),
        None => builder,
    };
    let declared = builder.metadata().file_metadata().num_rows().max(0) as usize;
    let rows = rows.unwrap_or_else(|| whole_table_rows(builder.metadata()));
    let reader = builder
        .with_batch_size(rows)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot read parquet ({e})"))?;
    Ok((reader, declared))
}

/// A parquet file read in batches of 64 Ki rows (the top-level columns named in `columns`,
/// those in `dictionaries` as dictionaries), each made a batch of `schema` by the function
/// `each` returns for the file's schema, and gathered into one table: the file's batches are
/// never all held, nor concatenated (docs/design.md, "Bounded memory").
pub fn gather_parquet<F: FnMut(&RecordBatch) -> Result<RecordBatch>>(
    bytes: Vec<u8>,
    columns: &[&str],
    dictionaries: &[&str],
    schema: arrow::datatypes::SchemaRef,
    each: impl FnOnce(&arrow::datatypes::SchemaRef) -> Result<F>,
) -> Result<RecordBatch> {
    const BATCH: usize = 1 << 16;
    let (reader, rows) = parquet_batches(bytes, Some(columns), dictionaries, Some(BATCH))?;
    let mut each = each(&reader.schema())?;
    let mut table = gather::Gather::new(schema, rows)?;
    for batch in reader {
        let batch = batch.map_err(|e| anyhow::anyhow!("corrupt or truncated parquet ({e})"))?;
        table.push(&each(&batch)?)?;
    }
    table.finish()
}

/// A reader of the top-level columns named in `names` only.
pub fn project<T>(
    builder: parquet::arrow::arrow_reader::ArrowReaderBuilder<T>,
    names: &[&str],
) -> parquet::arrow::arrow_reader::ArrowReaderBuilder<T> {
    let roots: Vec<usize> = builder
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| names.contains(&f.name().as_str()))
        .map(|(i, _)| i)
        .collect();
    let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), roots);
    builder.with_projection(mask)
}

/// Rows per batch for reading a whole parquet table: the row count the file states, within
/// 1,024 and 2^20 (a statement, not trusted beyond that), so that a table of up to a million
/// rows comes back as one batch, which [`crate::engine::value::one_batch`] does not copy.
/// Read in batches of 1,024 and concatenated, each table was built twice over, in fresh
/// memory.
pub fn whole_table_rows(meta: &parquet::file::metadata::ParquetMetaData) -> usize {
    meta.file_metadata().num_rows().clamp(1 << 10, 1 << 20) as usize
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
/// metadata (see [`pandas_metadata`]). Columns whose values are mostly distinct (see
/// [`mostly_distinct`]) are written without a dictionary.
pub fn write_parquet(batch: &RecordBatch, index: &PandasIndex, levels: usize) -> Result<Vec<u8>> {
    use arrow::datatypes::{DataType, Field};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    let pandas = pandas_metadata(batch, index, levels);
    let mut meta = batch.schema().metadata().clone();
    meta.insert("pandas".to_string(), pandas.clone());
    // Dictionary-encoded text (a column of names, a row per range) is written as text, as
    // pandas wrote it, converted a slice of rows at a time so that the strings of the whole
    // column never exist at once.
    let is_dictionary_text =
        |t: &DataType| matches!(t, DataType::Dictionary(_, v) if v.as_ref() == &DataType::Utf8);
    let fields: Vec<Field> = (batch.schema().fields().iter())
        .map(|f| match is_dictionary_text(f.data_type()) {
            true => f.as_ref().clone().with_data_type(DataType::Utf8),
            false => f.as_ref().clone(),
        })
        .collect();
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, meta));
    let mut props = WriterProperties::builder();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if mostly_distinct(column) {
            let path = parquet::schema::types::ColumnPath::from(field.name().as_str());
            props = props.set_column_dictionary_enabled(path, false);
        }
    }
    let props = props
        // Also as a file-level entry, where pandas' readers look first.
        .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
            "pandas".to_string(),
            pandas,
        )]))
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props))?;
    let converted = batch
        .schema()
        .fields()
        .iter()
        .any(|f| is_dictionary_text(f.data_type()));
    // Slices of whole write batches of the writer (1,024 rows), half a row group: the
    // file is the one the whole batch would make.
    let step = if converted {
        ROW_GROUP_ROWS / 2
    } else {
        batch.num_rows().max(1)
    };
    for start in (0..batch.num_rows().max(1)).step_by(step) {
        let part = batch.slice(start, step.min(batch.num_rows() - start));
        let columns = (part.columns().iter())
            .map(|c| match is_dictionary_text(c.data_type()) {
                true => arrow::compute::cast(c, &DataType::Utf8),
                false => Ok(c.clone()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        w.write(&RecordBatch::try_new(schema.clone(), columns)?)?;
    }
    w.close()?;
    Ok(out)
}

/// Rows per row group of the parquet files written.
const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Rows looked at by [`mostly_distinct`].
const DISTINCT_SAMPLE: usize = 4096;

/// Whether more than half of the first [`DISTINCT_SAMPLE`] values of a column of numbers or
/// text differ from each other. A parquet writer looks each value up in a dictionary before
/// it finds the dictionary too large and falls back to plain pages; for timestamps and ids
/// (every value different) that look-up was most of the writing time, and the plain pages
/// are no larger. Other columns keep the dictionary.
fn mostly_distinct(column: &arrow::array::ArrayRef) -> bool {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DataType as D, Float64Type, Int32Type, Int64Type};
    let n = column.len().min(DISTINCT_SAMPLE);
    if n < 64 {
        return false;
    }
    let distinct = match column.data_type() {
        D::Int64 => count_distinct(column.as_primitive::<Int64Type>().values()[..n].iter()),
        D::Int32 => count_distinct(column.as_primitive::<Int32Type>().values()[..n].iter()),
        D::Float64 => count_distinct(
            column.as_primitive::<Float64Type>().values()[..n]
                .iter()
                .map(|v| v.to_bits()),
        ),
        D::Utf8 => count_distinct(column.as_string::<i32>().iter().take(n)),
        D::LargeUtf8 => count_distinct(column.as_string::<i64>().iter().take(n)),
        // As its text would be.
        D::Dictionary(..) => match arrow::compute::cast(&column.slice(0, n), &D::Utf8) {
            Ok(text) => return mostly_distinct(&text),
            Err(_) => return false,
        },
        _ => return false,
    };
    distinct * 2 > n
}

fn count_distinct<T: std::hash::Hash + Eq>(values: impl Iterator<Item = T>) -> usize {
    values.collect::<std::collections::HashSet<_>>().len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn dictionary_text_is_written_as_the_text_would_be() {
        use arrow::array::DictionaryArray;
        use arrow::datatypes::Int32Type;
        // More rows than a row group; few names (a dictionary in the file) and mostly
        // distinct ones (plain).
        let n = 300_000;
        for distinct in [7, 250_000] {
            let names: Vec<String> = (0..n)
                .map(|i| format!("fusion.{}", (i * 7919) % distinct))
                .collect();
            let text: ArrayRef = Arc::new(StringArray::from_iter_values(&names));
            let dict: DictionaryArray<Int32Type> = names.iter().map(String::as_str).collect();
            let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
            let plain = RecordBatch::try_from_iter([("Name", text), ("Id", ids.clone())]).unwrap();
            let coded =
                RecordBatch::try_from_iter([("Name", Arc::new(dict) as ArrayRef), ("Id", ids)])
                    .unwrap();
            let (a, b) = (
                write_parquet(&plain, &PandasIndex::Default, 1).unwrap(),
                write_parquet(&coded, &PandasIndex::Default, 1).unwrap(),
            );
            assert!(a == b, "{distinct} distinct names: the files differ");
        }
    }

    #[test]
    fn only_mostly_distinct_columns_lose_their_dictionary() {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10_000));
        let levels: ArrayRef = Arc::new(Int64Array::from_iter_values((0..10_000).map(|i| i % 7)));
        let names: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..10_000).map(|i| format!("op{}", i % 100)),
        ));
        let stacks: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..10_000).map(|i| format!(":{i}")),
        ));
        assert!(mostly_distinct(&ids));
        assert!(!mostly_distinct(&levels));
        assert!(!mostly_distinct(&names));
        assert!(mostly_distinct(&stacks));
        // Too few rows to judge: the writer's default.
        let few: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10));
        assert!(!mostly_distinct(&few));

        let batch = RecordBatch::try_from_iter([
            ("ids", ids),
            ("levels", levels),
            ("names", names),
            ("stacks", stacks),
        ])
        .unwrap();
        let bytes = write_parquet(&batch, &PandasIndex::Default, 1).unwrap();
        let meta = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes.clone()))
            .unwrap()
            .metadata()
            .clone();
        let dictionary: Vec<bool> = meta
            .row_group(0)
            .columns()
            .iter()
            .map(|c| c.dictionary_page_offset().is_some())
            .collect();
        assert_eq!(dictionary, [false, true, true, false]);
        // Three columns alone, and read back unchanged.
        let some = read_parquet_columns(bytes.clone(), &["names", "ids", "absent"]).unwrap();
        let schema = some.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["ids", "names"]);
        let back = read_parquet(bytes).unwrap();
        for name in ["ids", "levels", "names", "stacks"] {
            assert_eq!(
                back.column_by_name(name).unwrap().as_ref(),
                batch.column_by_name(name).unwrap().as_ref()
            );
        }
    }
}
