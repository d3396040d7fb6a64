//! `nvtx_gpu_proj_trace/trace.parquet`: NVTX ranges projected onto the GPU, in any of the three
//! column layouts found in the wild, normalised to one Arrow schema (times in ns).

use anyhow::{Context, Result, bail};
use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, StringBuilder};
use arrow::compute::{cast, filter_record_batch, is_not_null};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::{Arc, LazyLock};

pub const NAME: &str = "Name";
pub const PROJ_START: &str = "ProjStart";
pub const PROJ_DUR: &str = "ProjDur";
pub const ORIG_START: &str = "OrigStart";
pub const ORIG_DUR: &str = "OrigDur";
pub const PID: &str = "PID";
pub const TID: &str = "TID";
pub const NUM_GPU_OPS: &str = "NumGPUOps";
pub const LVL: &str = "Lvl";
pub const RANGE_ID: &str = "RangeId";
pub const PARENT_ID: &str = "ParentId";

/// The normalised schema. Names keep their domain prefix (`TSL:`, `NCCL:`) when the layout
/// has one.
///
/// Only what the frames read is kept (docs/design.md, "Bounded memory"): names are a
/// dictionary (a row per thunk execution, a few hundred distinct names), and the levels,
/// child counts and range stacks, which the frames rebuild from `ParentId`, are not read.
pub static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new(NAME, super::columns::dictionary_type(), false),
        Field::new(PROJ_START, DataType::Int64, false),
        Field::new(PROJ_DUR, DataType::Int64, false),
        Field::new(ORIG_START, DataType::Int64, true),
        Field::new(ORIG_DUR, DataType::Int64, true),
        Field::new(PID, DataType::Int64, false),
        Field::new(TID, DataType::Int64, false),
        Field::new(NUM_GPU_OPS, DataType::Int64, true),
        Field::new(RANGE_ID, DataType::Int64, false),
        Field::new(PARENT_ID, DataType::Int64, true),
    ]))
});

/// The columns of the three layouts that [`SCHEMA`]'s are made of.
const READ: [&str; 18] = [
    "Name",
    "Projected Start",
    "Projected Duration",
    "Orig Start",
    "Orig Duration",
    "PID",
    "TID",
    "NumGPUOps",
    "RangeId",
    "ParentId",
    "Text",
    "Domain",
    "Start",
    "End",
    "Range ID",
    "Parent ID",
    "Children Count",
    "Stack Level",
];

/// Which layout a file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// nsys <= 2024.4: `Name, Projected Start, Projected Duration, Orig Start, ...`
    Classic,
    /// nsys 2024.5+: `Text, Start, End, Children Count, Range ID, ...`
    Text,
    /// nsys 2026.1+: as `Text` plus `Domain`.
    TextDomain,
}

pub fn detect_layout(schema: &Schema) -> Result<Layout> {
    let has = |n: &str| schema.column_with_name(n).is_some();
    if has("Name") && has("Projected Start") && has("Projected Duration") && has("RangeId") {
        Ok(Layout::Classic)
    } else if has("Text") && has("Start") && has("End") && has("Range ID") {
        Ok(if has("Domain") {
            Layout::TextDomain
        } else {
            Layout::Text
        })
    } else {
        let cols: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        bail!(
            "unknown trace.parquet column layout (columns: {})",
            cols.join(", ")
        )
    }
}

/// Read and normalise a trace.parquet file's bytes: only the columns normalised, names read
/// as dictionaries, in batches normalised and gathered one by one (a row per thunk execution).
pub fn read(bytes: Vec<u8>) -> Result<RecordBatch> {
    let names = ["Name", "Text", "Domain"];
    let table = super::gather_parquet(bytes, &READ, &names, SCHEMA.clone(), |schema| {
        let layout = detect_layout(schema)?;
        Ok(move |raw: &RecordBatch| normalise_rows(raw, layout))
    })?;
    check_times(&table)?;
    Ok(table)
}

/// Normalise a trace table as a trace.parquet file holds it (what [`read`] decodes, or the
/// table [`classic_table`] builds before it is written).
pub fn from_table(raw: &RecordBatch) -> Result<RecordBatch> {
    let layout = detect_layout(&raw.schema())?;
    normalise(raw, layout)
}

fn col<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    b.column_by_name(name)
        .with_context(|| format!("trace.parquet has no column {name:?}"))
}

fn as_i64(b: &RecordBatch, name: &str) -> Result<ArrayRef> {
    let a = col(b, name)?;
    super::columns::ensure_numbers(a.as_ref(), name)?;
    // Casting is checked: a value beyond the 64-bit range is an error, not a wrapped number.
    let opts = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow::compute::cast_with_options(a, &DataType::Int64, &opts)
        .map_err(|e| anyhow::anyhow!("column {name:?}: {e}"))
}

fn as_i32(b: &RecordBatch, name: &str) -> Result<ArrayRef> {
    let a = col(b, name)?;
    super::columns::ensure_numbers(a.as_ref(), name)?;
    let opts = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow::compute::cast_with_options(a, &DataType::Int32, &opts)
        .map_err(|e| anyhow::anyhow!("column {name:?}: {e}"))
}

/// Text (see [`super::columns::ensure_text`]).
fn as_utf8(b: &RecordBatch, name: &str) -> Result<ArrayRef> {
    let a = col(b, name)?;
    super::columns::ensure_text(a.as_ref(), name)?;
    Ok(cast(a, &DataType::Utf8).with_context(|| format!("column {name:?}: not text"))?)
}

/// Times beyond ±2^62 ns (146 years) cannot come from a capture; sums of them would overflow.
const TIME_BOUND: i64 = 1 << 62;

/// Every range must have a duration of at least zero and times far from overflowing; a trace
/// that breaks this is refused, naming how many ranges and the first of them, rather than
/// averaged into wrong numbers.
fn check_times(b: &RecordBatch) -> Result<()> {
    let name = super::columns::names(b, NAME)?;
    let i64s = |c: &str| -> Int64Array {
        b.column_by_name(c)
            .expect("normalised")
            .as_primitive::<arrow::datatypes::Int64Type>()
            .clone()
    };
    let (start, dur) = (i64s(PROJ_START), i64s(PROJ_DUR));
    let (ostart, odur) = (i64s(ORIG_START), i64s(ORIG_DUR));
    let mut negative = (0usize, None);
    let mut overflow = (0usize, None);
    for r in 0..b.num_rows() {
        let pairs = [
            (Some(start.value(r)), Some(dur.value(r))),
            (
                (!ostart.is_null(r)).then(|| ostart.value(r)),
                (!odur.is_null(r)).then(|| odur.value(r)),
            ),
        ];
        for (s, d) in pairs {
            let (s, d) = (s.unwrap_or(0), d.unwrap_or(0));
            if d < 0 {
                negative.0 += 1;
                negative.1.get_or_insert(r);
            } else if s.unsigned_abs() > TIME_BOUND as u64
                || s.checked_add(d).is_none_or(|e| e > TIME_BOUND)
            {
                overflow.0 += 1;
                overflow.1.get_or_insert(r);
            }
        }
    }
    if let (n, Some(r)) = negative {
        bail!(
            "{n} ranges end before they start (negative duration; first: {:?}, {} ns)",
            name.value(r),
            dur.value(r)
                .min(if odur.is_null(r) { 0 } else { odur.value(r) })
        );
    }
    if let (n, Some(r)) = overflow {
        bail!(
            "{n} ranges have times beyond any capture (first: {:?}, start {} ns): a damaged trace",
            name.value(r),
            start.value(r)
        );
    }
    Ok(())
}

fn normalise(raw: &RecordBatch, layout: Layout) -> Result<RecordBatch> {
    let batch = normalise_rows(raw, layout)?;
    check_times(&batch)?;
    Ok(batch)
}

/// [`normalise`] without the check of the times (made once over the whole table).
fn normalise_rows(raw: &RecordBatch, layout: Layout) -> Result<RecordBatch> {
    // Rows without a range id gather GPU work outside every range: drop them.
    let range_id_col = match layout {
        Layout::Classic => "RangeId",
        _ => "Range ID",
    };
    let keep = is_not_null(col(raw, range_id_col)?)?;
    let raw = filter_record_batch(raw, &keep)?;
    let raw = &raw;
    let columns: Vec<ArrayRef> = match layout {
        Layout::Classic => {
            // Name may be null only on the junk row dropped above.
            let name = as_names(raw, "Name")?;
            vec![
                name,
                as_i64(raw, "Projected Start")?,
                as_i64(raw, "Projected Duration")?,
                as_i64(raw, "Orig Start")?,
                as_i64(raw, "Orig Duration")?,
                as_i64(raw, "PID")?,
                as_i64(raw, "TID")?,
                as_i64(raw, "NumGPUOps")?,
                as_i64(raw, "RangeId")?,
                as_i64(raw, "ParentId")?,
            ]
        }
        Layout::Text | Layout::TextDomain => {
            let name: ArrayRef = if layout == Layout::TextDomain {
                let text = as_utf8(raw, "Text")?;
                let text = text.as_string::<i32>();
                let domain = as_utf8(raw, "Domain")?;
                let domain = domain.as_string::<i32>();
                let mut b = StringBuilder::new();
                for i in 0..text.len() {
                    let t = if text.is_null(i) { "" } else { text.value(i) };
                    if domain.is_null(i) || domain.value(i).is_empty() {
                        b.append_value(t);
                    } else {
                        b.append_value(format!("{}:{}", domain.value(i), t));
                    }
                }
                cast(&b.finish(), &super::columns::dictionary_type())?
            } else {
                as_names(raw, "Text")?
            };
            let start = as_i64(raw, "Start")?;
            let end = as_i64(raw, "End")?;
            let dur = arrow::compute::kernels::numeric::sub(&end, &start)
                .map_err(|e| anyhow::anyhow!("columns \"Start\" and \"End\": {e}"))?;
            let n = raw.num_rows();
            let nulls64: ArrayRef = Arc::new(Int64Array::new_null(n));
            // Checked as numbers, though not kept.
            if raw.column_by_name("Stack Level").is_some() {
                as_i32(raw, "Stack Level")?;
            }
            as_i32(raw, "Children Count")?;
            vec![
                name,
                start,
                dur,
                nulls64.clone(),
                nulls64.clone(),
                as_i64(raw, "PID")?,
                as_i64(raw, "TID")?,
                nulls64,
                as_i64(raw, "Range ID")?,
                as_i64(raw, "Parent ID")?,
            ]
        }
    };
    RecordBatch::try_new(SCHEMA.clone(), columns)
        .map_err(|e| anyhow::anyhow!("unexpected nulls or lengths ({e})"))
}

/// A text column as a dictionary of names, a null as "".
fn as_names(b: &RecordBatch, name: &str) -> Result<ArrayRef> {
    let a = col(b, name)?;
    if a.data_type() == &super::columns::dictionary_type() && a.null_count() == 0 {
        return Ok(a.clone());
    }
    let text = as_utf8(b, name)?;
    Ok(cast(
        &fill_nulls_empty(text.as_string::<i32>()),
        &super::columns::dictionary_type(),
    )?)
}

fn fill_nulls_empty(a: &StringArray) -> ArrayRef {
    if a.null_count() == 0 {
        return Arc::new(a.clone());
    }
    Arc::new(
        a.iter()
            .map(|v| Some(v.unwrap_or("")))
            .collect::<StringArray>(),
    )
}

/// `thread-metadata.parquet`: (PID, TID) -> thread name.
pub struct ThreadNames {
    pub pid: Vec<i64>,
    pub tid: Vec<i64>,
    pub name: Vec<String>,
}

pub fn read_thread_metadata(bytes: Vec<u8>) -> Result<ThreadNames> {
    let b = super::read_parquet(bytes)?;
    // `Priority` tells the thread table from others with names, processes and threads (the
    // projected trace has all three).
    for c in ["Name", "Priority", "PID", "TID"] {
        if b.column_by_name(c).is_none() {
            bail!("not a thread metadata table: no column {c}");
        }
    }
    let pid = as_i64(&b, "PID")?;
    let tid = as_i64(&b, "TID")?;
    let name = as_utf8(&b, "Name")?;
    let name = name.as_string::<i32>();
    Ok(ThreadNames {
        pid: pid
            .as_primitive::<arrow::datatypes::Int64Type>()
            .values()
            .to_vec(),
        tid: tid
            .as_primitive::<arrow::datatypes::Int64Type>()
            .values()
            .to_vec(),
        name: name.iter().map(|s| s.unwrap_or("").to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_parquet(batch: &RecordBatch) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        buf
    }

    #[test]
    fn text_domain_layout_is_normalised() {
        use arrow::array::{Int64Array, ListArray};
        use arrow::datatypes::Int64Type;
        let stack = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1)]),
            Some(vec![Some(1), Some(2)]),
        ]);
        let b = RecordBatch::try_from_iter(vec![
            (
                "Text",
                Arc::new(StringArray::from(vec![
                    "XlaModule:#hlo_module=m,program_id=1#",
                    "Thunk:#hlo_op=f#",
                ])) as ArrayRef,
            ),
            (
                "Domain",
                Arc::new(StringArray::from(vec![Some("TSL"), Some("TSL")])) as _,
            ),
            ("Start", Arc::new(Int64Array::from(vec![100, 110])) as _),
            ("End", Arc::new(Int64Array::from(vec![200, 150])) as _),
            (
                "Children Count",
                Arc::new(Int64Array::from(vec![1, 0])) as _,
            ),
            ("Range ID", Arc::new(Int64Array::from(vec![1, 2])) as _),
            (
                "Parent ID",
                Arc::new(Int64Array::from(vec![None, Some(1)])) as _,
            ),
            ("PID", Arc::new(Int64Array::from(vec![7, 7])) as _),
            ("TID", Arc::new(Int64Array::from(vec![8, 8])) as _),
            ("Range Stack", Arc::new(stack) as _),
            ("Stack Level", Arc::new(Int64Array::from(vec![0, 1])) as _),
        ])
        .unwrap();
        let out = read(write_parquet(&b)).unwrap();
        assert_eq!(out.schema(), SCHEMA.clone());
        let names = crate::formats::columns::names(&out, NAME).unwrap();
        assert_eq!(names.value(1), "TSL:Thunk:#hlo_op=f#");
        let dur = out
            .column_by_name(PROJ_DUR)
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(dur.values(), &[100, 40]);
    }

    #[test]
    fn unknown_layout_is_an_error() {
        let b = RecordBatch::try_from_iter(vec![(
            "Foo",
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
        )])
        .unwrap();
        let e = read(write_parquet(&b)).unwrap_err().to_string();
        assert!(e.contains("unknown trace.parquet column layout"), "{e}");
        assert!(read(b"not parquet".to_vec()).is_err());
    }
}

/// `trace.parquet` in the classic layout, as Nsight Systems' `nvtx_gpu_proj_trace` recipe
/// writes it (pandas types: the columns that recipe leaves nullable are float64) plus the
/// `Rank` column, from the output of [`crate::capture::projection::project`].
pub fn write_classic(projection: &RecordBatch, rank: i64) -> Result<Vec<u8>> {
    write_classic_table(&classic_table(projection, rank)?)
}

/// The table [`write_classic`] writes: the projection with the columns pandas holds as
/// floating point cast so, and `Rank`.
pub fn classic_table(projection: &RecordBatch, rank: i64) -> Result<RecordBatch> {
    const FLOAT: [&str; 5] = ["Orig Start", "Orig Duration", "Lvl", "RangeId", "ParentId"];
    let schema = projection.schema();
    let mut cols: Vec<(String, ArrayRef)> = Vec::new();
    for (f, c) in schema.fields().iter().zip(projection.columns()) {
        let c = if FLOAT.contains(&f.name().as_str()) {
            cast(c, &DataType::Float64)?
        } else {
            c.clone()
        };
        cols.push((f.name().clone(), c));
    }
    cols.push((
        "Rank".into(),
        Arc::new(arrow::array::Int64Array::from(vec![
            rank;
            projection.num_rows()
        ])),
    ));
    Ok(RecordBatch::try_from_iter(cols)?)
}

/// Writes a table of [`classic_table`] as trace.parquet.
pub fn write_classic_table(table: &RecordBatch) -> Result<Vec<u8>> {
    super::write_parquet(table, &super::PandasIndex::Default, 1)
}
