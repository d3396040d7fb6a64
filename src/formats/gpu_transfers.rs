//! `nsys-jax-pipe/gpu-transfers.parquet`: the memory copies and sets a process ran on its GPUs
//! outside CUDA graphs (those are in `graph_ops`), one row each (docs/design.md, "Copies
//! between modules"): a `device_put` of a host array, a device-to-host read of a result, the
//! copies and sets XLA's thunks make. nsys-jax's readers ignore the member; without it the
//! GPU work between modules is not known.
//!
//! Columns: `Device` (CUDA device ordinal), `Start`, `End` (ns), `Bytes`, `Kind` (`HtoD`,
//! `DtoH`, `DtoD`, `HtoH`, `PtoP`, `memset`, or `other`).

use std::sync::{Arc, LazyLock};

use anyhow::{Result, bail};
use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};

use super::nsys_export::{ExportTables, MEMCPY, MEMSET};

pub const DEVICE: &str = "Device";
pub const START: &str = "Start";
pub const END: &str = "End";
pub const BYTES: &str = "Bytes";
pub const KIND: &str = "Kind";

pub static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let int = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        int(DEVICE),
        int(START),
        int(END),
        int(BYTES),
        Field::new(KIND, DataType::Utf8, false),
    ]))
});

/// The kind of a copy from CUPTI's `copyKind`.
pub fn copy_kind(k: i64) -> &'static str {
    match k {
        1 | 3 => "HtoD",
        2 | 4 => "DtoH",
        5..=8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => "other",
    }
}

/// (device, start, end, bytes, kind) of one copy or set.
type Row = (i64, i64, i64, i64, &'static str);

/// The copies and sets of an export that no CUDA graph launched, in start order (None when
/// the export has neither table).
pub fn from_export(t: &ExportTables) -> Result<Option<RecordBatch>> {
    if t.memcpy.is_none() && t.memset.is_none() {
        return Ok(None);
    }
    let mut rows: Vec<Row> = Vec::new();
    for (table, batch) in [(MEMCPY, &t.memcpy), (MEMSET, &t.memset)] {
        let Some(b) = batch else { continue };
        let col = |c: &str| -> Result<Option<Int64Array>> {
            Ok(match b.column_by_name(c) {
                None => None,
                Some(a) => match a.as_primitive_opt::<Int64Type>() {
                    Some(a) => Some(a.clone()),
                    None => bail!("{table}: column {c} is {}, not integers", a.data_type()),
                },
            })
        };
        let (Some(start), Some(end)) = (col("start")?, col("end")?) else {
            bail!("{table}: no start or end column");
        };
        let (device, bytes, graph, kind) = (
            col("deviceId")?,
            col("bytes")?,
            col("graphNodeId")?,
            col("copyKind")?,
        );
        let get = |c: &Option<Int64Array>, i: usize| {
            c.as_ref().filter(|a| a.is_valid(i)).map(|a| a.value(i))
        };
        for i in 0..b.num_rows() {
            if get(&graph, i).is_some_and(|g| g != 0) || !start.is_valid(i) || !end.is_valid(i) {
                continue;
            }
            let (s, e) = (start.value(i), end.value(i));
            if e < s {
                bail!("{table}: row {i} ends at {e} before it starts at {s}");
            }
            let k = if table == MEMSET {
                "memset"
            } else {
                get(&kind, i).map_or("other", copy_kind)
            };
            rows.push((
                get(&device, i).unwrap_or(0),
                s,
                e,
                get(&bytes, i).unwrap_or(0).max(0),
                k,
            ));
        }
    }
    rows.sort_unstable_by_key(|r| (r.1, r.0));
    let col = |f: &dyn Fn(&Row) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
    };
    Ok(Some(RecordBatch::try_new(
        SCHEMA.clone(),
        vec![
            col(&|r| r.0),
            col(&|r| r.1),
            col(&|r| r.2),
            col(&|r| r.3),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.4))),
        ],
    )?))
}

/// The member's rows, checked.
#[derive(Debug, Clone)]
pub struct Transfers {
    pub device: Int64Array,
    pub start: Int64Array,
    pub end: Int64Array,
    pub bytes: Int64Array,
    pub kind: StringArray,
}

impl Transfers {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reads the member: every column present, of its type, without nulls; no row ending before
/// it starts, no negative size. Errors say what is wrong in one line; the caller names the
/// file.
pub fn read(bytes: Vec<u8>) -> Result<Transfers> {
    let b = super::read_parquet(bytes)?;
    let int = |c: &str| super::columns::int64(&b, c, false);
    let kind = super::columns::utf8(&b, KIND)?;
    let t = Transfers {
        device: int(DEVICE)?,
        start: int(START)?,
        end: int(END)?,
        bytes: int(BYTES)?,
        kind,
    };
    for i in 0..t.len() {
        if t.end.value(i) < t.start.value(i) {
            bail!("row {i}: ends before it starts");
        }
        if t.bytes.value(i) < 0 {
            bail!("row {i}: negative size");
        }
    }
    Ok(t)
}

/// Writes the member from a batch of [`SCHEMA`].
pub fn write(batch: &RecordBatch) -> Result<Vec<u8>> {
    super::write_parquet(batch, &super::PandasIndex::Default, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Schema;

    fn table(cols: Vec<(&str, Vec<Option<i64>>)>) -> RecordBatch {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, _)| Field::new(*n, DataType::Int64, true))
            .collect();
        let arrays: Vec<ArrayRef> = cols
            .into_iter()
            .map(|(_, v)| Arc::new(Int64Array::from(v)) as ArrayRef)
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
    }

    #[test]
    fn copies_outside_graphs_round_trip_and_bad_members_are_refused() {
        let memcpy = table(vec![
            ("start", vec![Some(100), Some(10), Some(50)]),
            ("end", vec![Some(200), Some(20), Some(60)]),
            ("deviceId", vec![Some(0), Some(1), Some(0)]),
            ("bytes", vec![Some(1 << 20), Some(8), Some(4)]),
            ("graphNodeId", vec![None, None, Some(7)]),
            ("copyKind", vec![Some(1), Some(2), Some(8)]),
        ]);
        let memset = table(vec![
            ("start", vec![Some(300)]),
            ("end", vec![Some(310)]),
            ("deviceId", vec![Some(0)]),
            ("bytes", vec![Some(64)]),
        ]);
        let mut t = ExportTables::from_named(&[(
            super::super::nsys_export::NVTX_EVENTS.to_string(),
            table(vec![("start", vec![])]),
        )])
        .unwrap();
        assert!(from_export(&t).unwrap().is_none());
        t.memcpy = Some(memcpy);
        t.memset = Some(memset);
        let b = from_export(&t).unwrap().unwrap();
        let back = read(write(&b).unwrap()).unwrap();
        // The graph's copy is left out; rows in start order.
        assert_eq!(back.start.values().to_vec(), vec![10, 100, 300]);
        let kinds: Vec<&str> = back.kind.iter().flatten().collect();
        assert_eq!(kinds, ["DtoH", "HtoD", "memset"]);
        assert_eq!(back.bytes.value(1), 1 << 20);
        assert_eq!(back.device.values().to_vec(), vec![1, 0, 0]);

        let backwards = RecordBatch::try_new(
            SCHEMA.clone(),
            vec![
                Arc::new(Int64Array::from(vec![0])),
                Arc::new(Int64Array::from(vec![5])),
                Arc::new(Int64Array::from(vec![4])),
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(StringArray::from(vec!["HtoD"])),
            ],
        )
        .unwrap();
        let e = read(write(&backwards).unwrap()).unwrap_err();
        assert!(e.to_string().contains("ends before it starts"), "{e}");
        assert!(read(b"not parquet".to_vec()).is_err());
        assert!(read(write(&table(vec![("Start", vec![Some(1)])])).unwrap()).is_err());
    }
}
