//! The CPU push/pop NVTX trace of one profiled process (docs/design.md, "Push/pop trace").
//!
//! Archives hold it as `report_nvtx_pushpop_trace.csv.xz` (older, the CSV written by
//! `nsys stats --report nvtx_pushpop_trace`) or `report_nvtx_pushpop_trace.parquet` (newer,
//! written through pandas: a subset of the columns, `ParentId` as float, `RangeId` as int32).
//! Both are turned into one normalized arrow schema ([`schema`]); columns a variant lacks are
//! derived from the others where that is possible (`Lvl` from `RangeStack`, `RangeStack` from
//! `ParentId`, ...) and left null where it is not (`PID`).

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use arrow::array::{Array, ArrayRef, AsArray, Int32Array, Int64Array, StringArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Int64Type};
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::push_decoder::PushBuffers;

mod csv;
mod schema;

use schema::aliases;
pub use schema::{
    DUR_CHILD, DUR_NON_CHILD, DURATION, END, LVL, NAME, NUM_CHILD, PARENT_ID, PID, RANGE_ID,
    RANGE_STACK, START, TID, fields, schema,
};

/// `f` applied element by element to two equally long columns.
fn elementwise(a: &Int64Array, b: &Int64Array, f: impl Fn(i64, i64) -> i64) -> Int64Array {
    a.values()
        .iter()
        .zip(b.values())
        .map(|(&x, &y)| f(x, y))
        .collect()
}

/// Reads the xz-compressed CSV variant, parsing as it decompresses (within the member's
/// limit).
pub fn read_csv_xz(bytes: &[u8], checked: super::limits::Checked) -> Result<RecordBatch> {
    normalize(&csv::read(super::xz::member_reader(bytes, checked))?)
}

#[cfg(test)]
/// Reads the uncompressed CSV variant.
pub fn read_csv(text: &[u8]) -> Result<RecordBatch> {
    normalize(&csv::read(text)?)
}

/// The rows of one batch as a selection sees them: names with their domain, starts and ends.
pub struct Spans<'a> {
    pub name: &'a StringArray,
    pub start: &'a [i64],
    pub end: &'a [i64],
}

/// What a selective read ([`read_parquet_selected`]) keeps.
pub trait Selection {
    /// Sees every row's name and times, batch by batch, before any row is kept.
    fn scan(&mut self, rows: &Spans);
    /// Which rows of a batch to keep.
    fn keep(&mut self, rows: &Spans) -> Vec<bool>;
}

/// Rows per batch of a selective read: what is held of the rows a selection drops.
const SELECT_BATCH: usize = 1 << 16;

/// Reads the parquet variant keeping only the rows a selection chooses, never holding the
/// whole table: the file is read twice in batches, first only its names and times, each
/// batch shown to [`Selection::scan`], then whole, each batch's rows filtered by
/// [`Selection::keep`] as they are read. The kept rows are normalized together (so what
/// [`normalize`] derives from a row's ancestors, `RangeStack` from `ParentId`, is right only
/// when every kept row's ancestors are kept).
pub fn read_parquet_selected(
    bytes: &bytes::Bytes,
    selection: &mut dyn Selection,
) -> Result<RecordBatch> {
    let bad = |e: &dyn std::fmt::Display| anyhow!("bad parquet file: {e}");
    let open = || -> Result<ParquetRecordBatchReaderBuilder<bytes::Bytes>> {
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).map_err(|e| bad(&e))?;
        super::check_parquet_expansion(builder.metadata(), bytes.len() as u64)?;
        Ok(builder.with_batch_size(SELECT_BATCH))
    };
    let spans_of = |batch: &RecordBatch, f: &mut dyn FnMut(&Spans)| -> Result<()> {
        let (start, end, _) = times(batch)?;
        let name = names(batch)?;
        f(&Spans {
            name: &name,
            start: start.values(),
            end: end.values(),
        });
        Ok(())
    };

    let wanted: Vec<&str> = span_columns().collect();
    let builder = super::project(open()?, &wanted);
    for batch in builder.build().map_err(|e| bad(&e))? {
        spans_of(&batch.map_err(|e| bad(&e))?, &mut |s| selection.scan(s))?;
    }

    let reader = open()?.build().map_err(|e| bad(&e))?;
    let schema = reader.schema();
    let mut kept = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(&e))?;
        let mut rows = Vec::new();
        spans_of(&batch, &mut |s| rows = selection.keep(s))?;
        let rows = arrow::array::BooleanArray::from(rows);
        let batch = arrow::compute::filter_record_batch(&batch, &rows).map_err(|e| bad(&e))?;
        if batch.num_rows() > 0 {
            kept.push(batch);
        }
    }
    let batch = arrow::compute::concat_batches(&schema, &kept).map_err(|e| bad(&e))?;
    normalize(&batch)
}

/// Reads the parquet variant (`bytes`: a `Vec<u8>` or shared bytes, not copied).
pub fn read_parquet(bytes: impl Into<bytes::Bytes>) -> Result<RecordBatch> {
    let bytes: bytes::Bytes = bytes.into();
    let len = bytes.len() as u64;
    let mut buffers = PushBuffers::new(len);
    buffers
        .push_range(0..len, bytes)
        .map_err(|e| anyhow!("bad parquet file: {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(buffers)
        .map_err(|e| anyhow!("bad parquet file: {e}"))?;
    super::check_parquet_expansion(builder.metadata(), len)?;
    let schema = builder.schema().clone();
    let rows = super::whole_table_rows(builder.metadata());
    let reader = builder
        .with_batch_size(rows)
        .build()
        .map_err(|e| anyhow!("bad parquet file: {e}"))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("bad parquet file: {e}"))?;
    let batch = crate::engine::value::one_batch(&schema, batches)
        .map_err(|e| anyhow!("bad parquet file: {e}"))?;
    normalize(&batch)
}

/// Finds the source column for a normalized column.
fn find<'a>(batch: &'a RecordBatch, column: &str) -> Option<&'a ArrayRef> {
    aliases(column)
        .iter()
        .find_map(|alias| batch.column_by_name(alias))
}

fn safe_cast(array: &ArrayRef, to: &DataType, column: &str) -> Result<ArrayRef> {
    let options = CastOptions {
        safe: true,
        ..Default::default()
    };
    cast_with_options(array, to, &options)
        .map_err(|e| anyhow!("column {column}: cannot read as {to}: {e}"))
}

/// An integer column; `nullable = false` rejects nulls (and values that are not integers).
fn int64_column(batch: &RecordBatch, column: &str, nullable: bool) -> Result<Option<Int64Array>> {
    let Some(array) = find(batch, column) else {
        return Ok(None);
    };
    crate::formats::columns::ensure_numbers(array, column)?;
    let cast = safe_cast(array, &DataType::Int64, column)?;
    let out = cast.as_primitive::<Int64Type>().clone();
    if !nullable && out.null_count() > 0 {
        let row = (0..out.len()).find(|&i| out.is_null(i)).unwrap_or(0);
        bail!("column {column}: missing or non-integer value in row {row}");
    }
    Ok(Some(out))
}

fn utf8_column(batch: &RecordBatch, column: &str) -> Result<Option<StringArray>> {
    let Some(array) = find(batch, column) else {
        return Ok(None);
    };
    utf8(array, column).map(Some)
}

fn utf8(array: &ArrayRef, column: &str) -> Result<StringArray> {
    crate::formats::columns::ensure_text(array, column)?;
    let cast = safe_cast(array, &DataType::Utf8, column)?;
    Ok(cast.as_string::<i32>().clone())
}

/// A `RangeStack` stored as a list of ids (newer Nsight Systems) turned into `:a:b:c`.
fn list_stack(array: &ArrayRef) -> Result<StringArray> {
    let to = DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true)));
    let cast = safe_cast(array, &to, RANGE_STACK)?;
    let list = cast.as_list::<i32>();
    let mut out = Vec::with_capacity(list.len());
    for i in 0..list.len() {
        if list.is_null(i) {
            out.push(None);
            continue;
        }
        let values = list.value(i);
        let values = values.as_primitive::<Int64Type>();
        let mut s = String::new();
        for v in values.iter().flatten() {
            s.push(':');
            s.push_str(&v.to_string());
        }
        out.push(Some(s));
    }
    Ok(StringArray::from(out))
}

/// `RangeId` → row lookup by binary search over sorted ids.
pub struct IdIndex {
    sorted: Vec<(i64, usize)>,
}

impl IdIndex {
    /// Indexes `ids`; fails on a duplicate id.
    pub fn new(ids: &[i64]) -> Result<Self> {
        let mut sorted: Vec<(i64, usize)> = ids.iter().copied().zip(0..).collect();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
            bail!("duplicate RangeId {}", w[0].0);
        }
        Ok(Self { sorted })
    }

    /// The row holding `id`.
    pub fn get(&self, id: i64) -> Option<usize> {
        self.sorted
            .binary_search_by_key(&id, |&(k, _)| k)
            .ok()
            .map(|i| self.sorted[i].1)
    }
}

/// Parent row of every row (by `ParentId`); a parent id that names no row counts as none.
pub fn parent_rows(range_id: &[i64], parent_id: &Int64Array) -> Result<Vec<Option<usize>>> {
    let index = IdIndex::new(range_id)?;
    Ok(parent_id
        .iter()
        .map(|p| p.and_then(|p| index.get(p)))
        .collect())
}

/// The id of the second-to-last entry of `:a:b:c`, i.e. the parent.
fn parent_from_stack(stack: &str) -> Result<Option<i64>> {
    let ids: Vec<&str> = stack.split(':').filter(|s| !s.is_empty()).collect();
    if ids.len() < 2 {
        return Ok(None);
    }
    let p = ids[ids.len() - 2];
    p.trim()
        .parse::<i64>()
        .map(Some)
        .map_err(|_| anyhow!("bad RangeStack {stack:?}"))
}

/// `:root:...:self` for every row from the parent chain.
fn stacks_from_parents(range_id: &[i64], parent: &[Option<usize>]) -> Result<Vec<String>> {
    let n = range_id.len();
    let mut stack: Vec<Option<String>> = vec![None; n];
    let mut path = Vec::new();
    for start in 0..n {
        let mut cur = start;
        path.clear();
        loop {
            if stack[cur].is_some() {
                break;
            }
            path.push(cur);
            if path.len() > n {
                bail!("cycle in ParentId at RangeId {}", range_id[start]);
            }
            match parent[cur] {
                Some(p) => cur = p,
                None => break,
            }
        }
        for &row in path.iter().rev() {
            let prefix = parent[row].and_then(|p| stack[p].as_deref()).unwrap_or("");
            stack[row] = Some(format!("{prefix}:{}", range_id[row]));
        }
    }
    Ok(stack.into_iter().map(|s| s.unwrap_or_default()).collect())
}

fn missing(column: &str) -> anyhow::Error {
    anyhow!("missing column {column}")
}

/// Start, end and duration of every row, as [`normalize`] reads or derives them.
fn times(batch: &RecordBatch) -> Result<(Int64Array, Int64Array, Int64Array)> {
    let start = int64_column(batch, START, false)?.ok_or_else(|| missing(START))?;
    let end = int64_column(batch, END, false)?;
    let duration = int64_column(batch, DURATION, false)?;
    let (end, duration) = match (end, duration) {
        (Some(e), Some(d)) => (e, d),
        (Some(e), None) => {
            let d = elementwise(&start, &e, |s, e| e.saturating_sub(s));
            (e, d)
        }
        (None, Some(d)) => {
            let e = elementwise(&start, &d, |s, d| s.saturating_add(d));
            (e, d)
        }
        (None, None) => return Err(missing(END)),
    };
    Ok((start, end, duration))
}

/// Every row's name with its domain prefix, as [`normalize`] makes it.
fn names(batch: &RecordBatch) -> Result<StringArray> {
    let n = batch.num_rows();
    let text = utf8_column(batch, NAME)?.ok_or_else(|| missing(NAME))?;
    // Newer layouts split the domain off the text.
    let domain = match (batch.column_by_name("Name"), batch.column_by_name("Domain")) {
        (None, Some(d)) => Some(utf8(d, "Domain")?),
        _ => None,
    };
    let name = if domain.is_some() || text.null_count() > 0 {
        (0..n)
            .map(|i| {
                let t = if text.is_valid(i) { text.value(i) } else { "" };
                match domain
                    .as_ref()
                    .filter(|d| d.is_valid(i))
                    .map(|d| d.value(i))
                {
                    Some(d) if !d.is_empty() => Some(format!("{d}:{t}")),
                    _ => Some(t.to_string()),
                }
            })
            .collect::<StringArray>()
    } else {
        text
    };
    Ok(name)
}

/// The columns a batch's names and times are made of, under any of their names.
fn span_columns() -> impl Iterator<Item = &'static str> {
    [NAME, START, END, DURATION]
        .into_iter()
        .flat_map(|c| aliases(c).iter().copied())
        .chain(["Domain"])
}

/// Turns a batch with the columns of either source variant into the normalized schema.
pub fn normalize(batch: &RecordBatch) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let (start, end, duration) = times(batch)?;
    let name = names(batch)?;

    let pid = match int64_column(batch, PID, true)? {
        Some(p) => p,
        None => Int64Array::new_null(n),
    };
    let tid = int64_column(batch, TID, false)?.ok_or_else(|| missing(TID))?;
    let range_id = int64_column(batch, RANGE_ID, false)?.ok_or_else(|| missing(RANGE_ID))?;

    let stack_source = match find(batch, RANGE_STACK) {
        Some(a) if matches!(a.data_type(), DataType::List(_) | DataType::LargeList(_)) => {
            Some(list_stack(a)?)
        }
        Some(_) => utf8_column(batch, RANGE_STACK)?,
        None => None,
    };
    if let Some(s) = &stack_source
        && s.null_count() > 0
    {
        bail!("column {RANGE_STACK}: missing values");
    }

    let parent_id = match int64_column(batch, PARENT_ID, true)? {
        Some(p) => p,
        None => {
            let stacks = stack_source.as_ref().ok_or_else(|| missing(PARENT_ID))?;
            (0..n)
                .map(|i| parent_from_stack(stacks.value(i)))
                .collect::<Result<Int64Array>>()?
        }
    };
    let parent = parent_rows(range_id.values(), &parent_id)?;

    let range_stack = match stack_source {
        Some(s) => s,
        None => StringArray::from(stacks_from_parents(range_id.values(), &parent)?),
    };

    let lvl = match find(batch, LVL) {
        Some(a) => {
            let cast = safe_cast(a, &DataType::Int32, LVL)?;
            let lvl = cast.as_primitive::<arrow::datatypes::Int32Type>().clone();
            if lvl.null_count() > 0 {
                bail!("column {LVL}: missing or non-integer values");
            }
            lvl
        }
        None => (0..n)
            .map(|i| {
                let depth = range_stack
                    .value(i)
                    .split(':')
                    .filter(|s| !s.is_empty())
                    .count();
                i32::try_from(depth.saturating_sub(1)).unwrap_or(i32::MAX)
            })
            .collect::<Int32Array>(),
    };

    // Children counts and durations, needed where the source lacks them.
    let need_children = find(batch, NUM_CHILD).is_none()
        || (find(batch, DUR_CHILD).is_none() && find(batch, DUR_NON_CHILD).is_none());
    let (child_count, child_dur) = if need_children {
        let mut count = vec![0i32; n];
        let mut dur = vec![0i64; n];
        for (i, p) in parent.iter().enumerate() {
            if let Some(p) = *p {
                count[p] = count[p].saturating_add(1);
                dur[p] = dur[p].saturating_add(duration.value(i));
            }
        }
        (count, dur)
    } else {
        (Vec::new(), Vec::new())
    };

    let num_child = match find(batch, NUM_CHILD) {
        Some(a) => {
            let cast = safe_cast(a, &DataType::Int32, NUM_CHILD)?;
            let c = cast.as_primitive::<arrow::datatypes::Int32Type>().clone();
            if c.null_count() > 0 {
                bail!("column {NUM_CHILD}: missing or non-integer values");
            }
            c
        }
        None => Int32Array::from(child_count),
    };

    let dur_child = int64_column(batch, DUR_CHILD, false)?;
    let dur_non_child = int64_column(batch, DUR_NON_CHILD, false)?;
    let (dur_child, dur_non_child) = match (dur_child, dur_non_child) {
        (Some(c), Some(nc)) => (c, nc),
        (Some(c), None) => {
            let nc = elementwise(&duration, &c, |d, c| d.saturating_sub(c));
            (c, nc)
        }
        (None, Some(nc)) => {
            let c = elementwise(&duration, &nc, |d, nc| d.saturating_sub(nc));
            (c, nc)
        }
        (None, None) => {
            let c = Int64Array::from(child_dur);
            let nc = elementwise(&duration, &c, |d, c| d.saturating_sub(c));
            (c, nc)
        }
    };

    let columns: Vec<ArrayRef> = vec![
        Arc::new(start),
        Arc::new(end),
        Arc::new(duration),
        Arc::new(dur_child),
        Arc::new(dur_non_child),
        Arc::new(name),
        Arc::new(pid),
        Arc::new(tid),
        Arc::new(lvl),
        Arc::new(num_child),
        Arc::new(range_id),
        Arc::new(parent_id),
        Arc::new(range_stack),
    ];
    RecordBatch::try_new(schema(), columns)
        .map_err(|e| anyhow!("cannot assemble push/pop table: {e}"))
}

/// Typed views of the normalized columns of a batch (the push/pop schema or an extension).
pub struct Columns<'a> {
    pub start: &'a [i64],
    pub end: &'a [i64],
    pub duration: &'a [i64],
    pub dur_child: &'a [i64],
    pub dur_non_child: &'a [i64],
    pub name: &'a StringArray,
    pub pid: &'a Int64Array,
    pub tid: &'a [i64],
    pub lvl: &'a [i32],
    /// Read by tests only (the frames count children themselves).
    #[cfg(test)]
    pub num_child: &'a [i32],
    pub range_id: &'a [i64],
    pub parent_id: &'a Int64Array,
    pub range_stack: &'a StringArray,
}

fn typed<'a, T: 'static>(batch: &'a RecordBatch, column: &str) -> Result<&'a T> {
    batch
        .column_by_name(column)
        .ok_or_else(|| anyhow!("missing column {column}"))?
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| anyhow!("column {column} has the wrong type"))
}

fn no_nulls<'a, A: Array>(array: &'a A, column: &str) -> Result<&'a A> {
    if array.null_count() > 0 {
        bail!("column {column} has null values");
    }
    Ok(array)
}

impl<'a> Columns<'a> {
    /// Checks names and types of the normalized columns.
    pub fn of(batch: &'a RecordBatch) -> Result<Self> {
        let i64s = |c: &str| -> Result<&'a [i64]> {
            Ok(no_nulls(typed::<Int64Array>(batch, c)?, c)?.values())
        };
        let i32s = |c: &str| -> Result<&'a [i32]> {
            Ok(no_nulls(typed::<Int32Array>(batch, c)?, c)?.values())
        };
        Ok(Self {
            start: i64s(START)?,
            end: i64s(END)?,
            duration: i64s(DURATION)?,
            dur_child: i64s(DUR_CHILD)?,
            dur_non_child: i64s(DUR_NON_CHILD)?,
            name: no_nulls(typed::<StringArray>(batch, NAME)?, NAME)?,
            pid: typed::<Int64Array>(batch, PID)?,
            tid: i64s(TID)?,
            lvl: i32s(LVL)?,
            #[cfg(test)]
            num_child: i32s(NUM_CHILD)?,
            range_id: i64s(RANGE_ID)?,
            parent_id: typed::<Int64Array>(batch, PARENT_ID)?,
            range_stack: no_nulls(typed::<StringArray>(batch, RANGE_STACK)?, RANGE_STACK)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::limits::Checked;
    use std::io::Write;

    const CSV: &str = "Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),Name,PID,TID,Lvl,NumChild,RangeId,ParentId,RangeStack,NameTree\n\
10,100,90,30,60,\"TSL:XlaCompile:#module=jit_f,program_id=1#\",7,7,0,1,5,,:5,\"TSL:XlaCompile:#module=jit_f,program_id=1#\"\n\
20,50,30,0,30,\"TSL:XlaPass:#name=a,module=jit_f,program_id=1#\",7,7,1,0,6,5,:5:6,\"--TSL:XlaPass\"\n";

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 6);
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn csv_xz_roundtrip() {
        let batch = read_csv_xz(&xz(CSV.as_bytes()), Checked::No).unwrap();
        assert_eq!(batch.schema(), schema());
        let c = Columns::of(&batch).unwrap();
        assert_eq!(c.start, &[10, 20]);
        assert_eq!(c.range_id, &[5, 6]);
        assert!(c.parent_id.is_null(0));
        assert_eq!(c.parent_id.value(1), 5);
        assert_eq!(
            c.name.value(0),
            "TSL:XlaCompile:#module=jit_f,program_id=1#"
        );
        assert_eq!(c.range_stack.value(1), ":5:6");
        assert_eq!(c.pid.value(0), 7);
        assert_eq!(c.lvl, &[0, 1]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let e = read_csv_xz(b"not xz at all", Checked::No)
            .unwrap_err()
            .to_string();
        assert!(e.contains("xz"), "{e}");
        let e = read_csv(b"Start (ns),Name\n1,a\n").unwrap_err().to_string();
        assert!(e.contains("missing column"), "{e}");
        let e = read_csv(b"").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = read_parquet(&b"PAR1garbage"[..]).unwrap_err().to_string();
        assert!(e.contains("parquet"), "{e}");
        let bad = CSV.replace(",90,30,60,", ",x,30,60,");
        assert!(read_csv(bad.as_bytes()).is_err());
        let dup = format!("{CSV}20,50,30,0,30,x,7,7,1,0,6,5,:5:6,x\n");
        let e = read_csv(dup.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("duplicate"), "{e}");
    }

    #[test]
    fn derives_missing_columns() {
        let text =
            "Start,End,Name,TID,RangeId,ParentId\n10,100,a,1,1,\n20,30,b,1,2,1\n40,60,c,1,3,1\n";
        let batch = read_csv(text.as_bytes()).unwrap();
        let c = Columns::of(&batch).unwrap();
        assert_eq!(c.duration, &[90, 10, 20]);
        assert_eq!(c.dur_child, &[30, 0, 0]);
        assert_eq!(c.dur_non_child, &[60, 10, 20]);
        assert_eq!(c.num_child, &[2, 0, 0]);
        assert_eq!(c.lvl, &[0, 1, 1]);
        assert_eq!(c.range_stack.value(2), ":1:3");
        assert!(c.pid.is_null(0));
    }

    #[test]
    fn reads_reference_parquet() {
        let Some(dir) = crate::testutil::fixtures_dir() else {
            return;
        };
        let path = dir.join("reference/h200-fsdp2_1proc/report_nvtx_pushpop_trace.parquet");
        let bytes = std::fs::read(path).unwrap();
        let batch = read_parquet(bytes.clone()).unwrap();
        assert_eq!(batch.num_rows(), 2178);
        let c = Columns::of(&batch).unwrap();
        assert_eq!(c.parent_id.null_count(), 22);
        // Levels derived from the stacks agree with the parent links.
        let parent = parent_rows(c.range_id, c.parent_id).unwrap();
        for (i, p) in parent.iter().enumerate() {
            match p {
                Some(p) => assert_eq!(c.lvl[i], c.lvl[*p] + 1),
                None => assert_eq!(c.lvl[i], 0),
            }
        }
        let first = (0..batch.num_rows()).find(|&i| c.range_id[i] == 7).unwrap();
        assert_eq!(c.parent_id.value(first), 6);
        assert_eq!(c.range_stack.value(first), ":6:7");
        assert_eq!(c.num_child[first], 3);
    }
}

/// `report_nvtx_pushpop_trace.parquet` from the output of
/// [`crate::capture::projection::pushpop`] (pandas index: RangeId).
pub fn write_parquet(pushpop: &RecordBatch) -> Result<Vec<u8>> {
    super::write_parquet(pushpop, &super::PandasIndex::Columns(&["RangeId"]), 1)
}
