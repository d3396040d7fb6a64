//! The run's frames as nsys-jax's `load_profiler_data` hands them to pandas (docs/design.md,
//! "Frames for pandas and polars"): `module`, `thunk`, `compile` and `communication`, with its
//! column and index names, times in milliseconds and its row order, built from the frames of
//! every process. Nothing is filtered or shifted here: warm-up removal and clock alignment are
//! the reader's choice (the Python package applies nsys-jax's rules when asked).

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, RecordBatch, StringArray, UInt32Array,
};
use arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType, Field, Float64Type, Int32Type, Int64Type, Schema};

use super::compile::{PROGRAM_ID as COMPILE_PROGRAM_ID, PROGRAM_NAME as COMPILE_PROGRAM_NAME};
use super::gpu::*;
use crate::formats::PandasIndex;
use crate::formats::pushpop;

/// The index columns of each frame, as nsys-jax sets them.
pub const MODULE_INDEX: &[&str] = &[PROGRAM_ID, PROGRAM_EXECUTION, DEVICE];
pub const THUNK_INDEX_COLUMNS: &[&str] =
    &[PROGRAM_ID, PROGRAM_EXECUTION, NAME, THUNK_EXECUTION, DEVICE];
pub const COMPILE_INDEX: &[&str] = &["ProfileName", "RangeId"];

/// One process's compile frame with what its rows need from outside it.
pub struct CompileInput<'a> {
    /// The process's profile name (nsys-jax's `ProfileName`: the per-process slug).
    pub profile: &'a str,
    pub frame: &'a RecordBatch,
    /// The process's programs, which give each (numeric id, module name) its stable id.
    pub programs: &'a Programs,
}

fn column<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    b.column_by_name(name)
        .ok_or_else(|| anyhow!("frame has no column {name}"))
}

/// Nanoseconds to milliseconds as nsys-jax computes them (`1e-6 * ns`).
fn ms(a: &ArrayRef) -> Result<ArrayRef> {
    let ns = a
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| anyhow!("time column is not int64"))?;
    Ok(Arc::new(
        ns.iter()
            .map(|v| v.map(|v| 1e-6 * v as f64))
            .collect::<Float64Array>(),
    ) as _)
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), a.null_count() > 0))
        .collect();
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )?)
}

fn concat(parts: &[&RecordBatch]) -> Result<Option<RecordBatch>> {
    match parts.first() {
        None => Ok(None),
        Some(first) => Ok(Some(concat_batches(
            &first.schema(),
            parts.iter().copied(),
        )?)),
    }
}

/// Row order by string, then integer keys, lexicographically (stable).
fn order(keys: &[&dyn Fn(usize, usize) -> std::cmp::Ordering], n: usize) -> UInt32Array {
    let mut idx: Vec<u32> = (0..n as u32).collect();
    idx.sort_by(|&a, &b| {
        keys.iter()
            .map(|k| k(a as usize, b as usize))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    UInt32Array::from(idx)
}

/// The module frame: one row per module execution per device, sorted by its index
/// (ProgramId, ProgramExecution, Device). `NumThunks` counts the thunks of the execution.
pub fn module(parts: &[&RecordBatch]) -> Result<RecordBatch> {
    let Some(m) = concat(parts)? else {
        return empty(&[
            (PROGRAM_ID, DataType::Utf8),
            (PROGRAM_EXECUTION, DataType::Int32),
            (DEVICE, DataType::Int32),
            (NAME, DataType::Utf8),
            ("ProjStartMs", DataType::Float64),
            ("ProjDurMs", DataType::Float64),
            (NUM_THUNKS, DataType::Int32),
        ]);
    };
    let prog = column(&m, PROGRAM_ID)?.as_string::<i32>();
    let exec = column(&m, PROGRAM_EXECUTION)?.as_primitive::<Int32Type>();
    let dev = column(&m, DEVICE)?.as_primitive::<Int32Type>();
    let idx = order(
        &[
            &|a, b| prog.value(a).cmp(prog.value(b)),
            &|a, b| exec.value(a).cmp(&exec.value(b)),
            &|a, b| dev.value(a).cmp(&dev.value(b)),
        ],
        m.num_rows(),
    );
    let m = take_record_batch(&m, &idx)?;
    let mut cols = vec![
        (PROGRAM_ID, column(&m, PROGRAM_ID)?.clone()),
        (PROGRAM_EXECUTION, column(&m, PROGRAM_EXECUTION)?.clone()),
        (DEVICE, column(&m, DEVICE)?.clone()),
        (NAME, column(&m, PROGRAM_NAME)?.clone()),
        ("ProjStartMs", ms(column(&m, PROJ_START)?)?),
        ("ProjDurMs", ms(column(&m, PROJ_DUR)?)?),
    ];
    // Captures through Nsight Systems' classic projection also have the original times.
    let orig_start = column(&m, ORIG_START)?;
    if orig_start.null_count() < orig_start.len() {
        cols.push(("OrigStartMs", ms(orig_start)?));
        cols.push(("OrigDurMs", ms(column(&m, ORIG_DUR)?)?));
    }
    cols.push((NUM_THUNKS, column(&m, NUM_THUNKS)?.clone()));
    batch(cols)
}

fn empty(columns: &[(&str, DataType)]) -> Result<RecordBatch> {
    let schema = Schema::new(
        columns
            .iter()
            .map(|(n, t)| Field::new(*n, t.clone(), true))
            .collect::<Vec<_>>(),
    );
    Ok(RecordBatch::new_empty(Arc::new(schema)))
}

/// The thunk frame sorted as nsys-jax sorts it: by ProgramId, ProgramExecution, the mean start
/// over devices of the thunk execution, then Device. Returned in this crate's column layout
/// (the communication frame is cut from it); [`thunk`] and [`communication`] shape it.
pub fn sorted_thunks(parts: &[&RecordBatch]) -> Result<Option<RecordBatch>> {
    let Some(t) = concat(parts)? else {
        return Ok(None);
    };
    let prog = crate::frames::strings::strings(column(&t, PROGRAM_ID)?);
    let exec = column(&t, PROGRAM_EXECUTION)?.as_primitive::<Int32Type>();
    let name = crate::frames::strings::strings(column(&t, NAME)?);
    let texec = column(&t, THUNK_EXECUTION)?.as_primitive::<Int32Type>();
    let dev = column(&t, DEVICE)?.as_primitive::<Int32Type>();
    let start = ms(column(&t, PROJ_START)?)?;
    let start = start.as_primitive::<Float64Type>();
    let mut sums: HashMap<(&str, i32, &str, i32), (f64, u32)> = HashMap::new();
    for i in 0..t.num_rows() {
        let e = sums
            .entry((prog.value(i), exec.value(i), name.value(i), texec.value(i)))
            .or_default();
        e.0 += start.value(i);
        e.1 += 1;
    }
    let mean: Vec<f64> = (0..t.num_rows())
        .map(|i| {
            let (s, n) = sums[&(prog.value(i), exec.value(i), name.value(i), texec.value(i))];
            s / n as f64
        })
        .collect();
    let idx = order(
        &[
            &|a, b| prog.value(a).cmp(prog.value(b)),
            &|a, b| exec.value(a).cmp(&exec.value(b)),
            &|a, b| mean[a].total_cmp(&mean[b]),
            &|a, b| dev.value(a).cmp(&dev.value(b)),
        ],
        t.num_rows(),
    );
    // Names as plain strings: pandas reads a dictionary column as a categorical.
    Ok(Some(super::strings::plain(&take_record_batch(&t, &idx)?)?))
}

fn index_columns(t: &RecordBatch) -> Result<Vec<(&'static str, ArrayRef)>> {
    THUNK_INDEX_COLUMNS
        .iter()
        .map(|&c| Ok((c, column(t, c)?.clone())))
        .collect()
}

const THUNK_COLUMNS: &[(&str, DataType)] = &[
    (PROGRAM_ID, DataType::Utf8),
    (PROGRAM_EXECUTION, DataType::Int32),
    (NAME, DataType::Utf8),
    (THUNK_EXECUTION, DataType::Int32),
    (DEVICE, DataType::Int32),
    ("ProjStartMs", DataType::Float64),
    ("ProjDurMs", DataType::Float64),
    ("Communication", DataType::Boolean),
    ("ProjDurHiddenMs", DataType::Float64),
];

/// The thunk frame: `ProjDurMs` of a communication thunk is the part not hidden behind compute,
/// the hidden part is `ProjDurHiddenMs`.
pub fn thunk(sorted: Option<&RecordBatch>) -> Result<RecordBatch> {
    let Some(t) = sorted else {
        return empty(THUNK_COLUMNS);
    };
    let mut cols = index_columns(t)?;
    cols.push(("ProjStartMs", ms(column(t, PROJ_START)?)?));
    cols.push(("ProjDurMs", ms(column(t, PROJ_DUR)?)?));
    cols.push(("Communication", column(t, COMMUNICATION)?.clone()));
    cols.push(("ProjDurHiddenMs", ms(column(t, PROJ_DUR_HIDDEN)?)?));
    batch(cols)
}

/// The communication frame: the communication thunks with their collective, sizes and
/// bandwidths.
pub fn communication(sorted: Option<&RecordBatch>) -> Result<RecordBatch> {
    let Some(t) = sorted else {
        let mut c = THUNK_COLUMNS.to_vec();
        c.retain(|(n, _)| *n != "Communication");
        c.extend([
            (COLLECTIVE, DataType::Utf8),
            (COLLECTIVE_SIZE, DataType::Int32),
            (MESSAGE_SIZE, DataType::Int64),
            (ALGO_BW, DataType::Float64),
            (BUS_BW, DataType::Float64),
        ]);
        return empty(&c);
    };
    let mask: BooleanArray = column(t, COMMUNICATION)?.as_boolean().clone();
    let t = filter_record_batch(t, &mask)?;
    let mut cols = index_columns(&t)?;
    cols.push(("ProjStartMs", ms(column(&t, PROJ_START)?)?));
    cols.push(("ProjDurMs", ms(column(&t, PROJ_DUR)?)?));
    cols.push(("ProjDurHiddenMs", ms(column(&t, PROJ_DUR_HIDDEN)?)?));
    for c in [COLLECTIVE, COLLECTIVE_SIZE, MESSAGE_SIZE, ALGO_BW, BUS_BW] {
        cols.push((c, column(&t, c)?.clone()));
    }
    batch(cols)
}

/// The compile frame: the XLA compilation ranges of every process, indexed by
/// (ProfileName, RangeId); `ProgramId` is the program's stable id ("unknown" where the range
/// names none) and `Name` loses the program id and module name that the columns carry.
pub fn compile(parts: &[CompileInput]) -> Result<RecordBatch> {
    let shaped = parts.iter().map(compile_part).collect::<Result<Vec<_>>>()?;
    Ok(concat_batches(&compile_schema(), &shaped)?)
}

fn compile_schema() -> Arc<Schema> {
    let f = |n: &str, t: DataType| Field::new(n, t, true);
    Arc::new(Schema::new(vec![
        f("ProfileName", DataType::Utf8),
        f(pushpop::RANGE_ID, DataType::Int64),
        f(NAME, DataType::Utf8),
        f("StartMs", DataType::Float64),
        f("DurMs", DataType::Float64),
        f("DurChildMs", DataType::Float64),
        f("DurNonChildMs", DataType::Float64),
        f(pushpop::NUM_CHILD, DataType::Int32),
        f(pushpop::PARENT_ID, DataType::Int64),
        f(pushpop::RANGE_STACK, DataType::Utf8),
        f(pushpop::TID, DataType::Int64),
        f(COMPILE_PROGRAM_ID, DataType::Utf8),
        f(COMPILE_PROGRAM_NAME, DataType::Utf8),
    ]))
}

fn compile_part(part: &CompileInput) -> Result<RecordBatch> {
    let f = part.frame;
    let (ids, prog_names) = super::compile::program_columns(f)?;
    let name = column(f, pushpop::NAME)?.as_string::<i32>();
    let mut ids_seen: HashMap<(i64, &str), String> = HashMap::new();
    let mut names = Vec::with_capacity(f.num_rows());
    let mut program = Vec::with_capacity(f.num_rows());
    for (i, &id) in ids.iter().enumerate() {
        let pname = (!prog_names.is_null(i)).then(|| prog_names.value(i));
        let mut n = name.value(i).to_string();
        if id >= 0 {
            n = n.replace(&format!(",program_id={id}"), "");
        }
        if let Some(pn) = pname {
            n = n
                .replace(&format!(",module={pn}"), "")
                .replace(&format!(":#module={pn}#"), "");
        }
        names.push(n);
        program.push(match pname {
            Some(pn) if id >= 0 => ids_seen
                .entry((id, pn))
                .or_insert_with(|| part.programs.stable_id(Some(id), pn))
                .clone(),
            _ => UNKNOWN_PROGRAM.to_string(),
        });
    }
    let profile: StringArray = std::iter::repeat_n(Some(part.profile), f.num_rows()).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(profile),
        column(f, pushpop::RANGE_ID)?.clone(),
        Arc::new(StringArray::from(names)),
        ms(column(f, pushpop::START)?)?,
        ms(column(f, pushpop::DURATION)?)?,
        ms(column(f, pushpop::DUR_CHILD)?)?,
        ms(column(f, pushpop::DUR_NON_CHILD)?)?,
        column(f, pushpop::NUM_CHILD)?.clone(),
        column(f, pushpop::PARENT_ID)?.clone(),
        column(f, pushpop::RANGE_STACK)?.clone(),
        column(f, pushpop::TID)?.clone(),
        Arc::new(StringArray::from(program)),
        column(f, COMPILE_PROGRAM_NAME)?.clone(),
    ];
    Ok(RecordBatch::try_new(compile_schema(), columns)?)
}

/// The four frames as parquet files named `<frame>.parquet`, each with the pandas metadata
/// that makes `pandas.read_parquet` rebuild nsys-jax's index.
pub fn parquet_files(
    module: &RecordBatch,
    thunk: &RecordBatch,
    compile: &RecordBatch,
    communication: &RecordBatch,
) -> Result<Vec<(String, Vec<u8>)>> {
    let write = |b: &RecordBatch, index: &[&str]| {
        crate::formats::write_parquet(b, &PandasIndex::Columns(index), 1)
    };
    Ok(vec![
        ("module.parquet".into(), write(module, MODULE_INDEX)?),
        ("thunk.parquet".into(), write(thunk, THUNK_INDEX_COLUMNS)?),
        ("compile.parquet".into(), write(compile, COMPILE_INDEX)?),
        (
            "communication.parquet".into(),
            write(communication, THUNK_INDEX_COLUMNS)?,
        ),
    ])
}
