//! `nsys-jax-pipe/graph-ops.parquet`: the GPU operations launched from CUDA graphs (XLA's
//! command buffers), one row per kernel, memcpy or memset of every graph launch, with the
//! innermost NVTX range around the launch (docs/design.md, "Command buffers"). nsys-jax's
//! readers ignore the member; it is what opens a command buffer up without the report.
//!
//! Columns: `RangeId` (the projection's range id of the innermost range enclosing the launch
//! call), `Launch` (the launch's correlation id), `GraphNodeId`, `Start`, `End` (ns),
//! `Device` (CUDA device id) and `Name` (the kernel's short name, or `[memcpy]`/`[memset]`).

use std::sync::{Arc, LazyLock};

use anyhow::{Result, bail};
use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};

pub const RANGE_ID: &str = "RangeId";
pub const LAUNCH: &str = "Launch";
pub const GRAPH_NODE_ID: &str = "GraphNodeId";
pub const START: &str = "Start";
pub const END: &str = "End";
pub const DEVICE: &str = "Device";
pub const NAME: &str = "Name";

/// The name of a memcpy graph node.
pub const MEMCPY: &str = "[memcpy]";
/// The name of a memset graph node.
pub const MEMSET: &str = "[memset]";

pub static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let int = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        int(RANGE_ID),
        int(LAUNCH),
        int(GRAPH_NODE_ID),
        int(START),
        int(END),
        int(DEVICE),
        Field::new(NAME, DataType::Utf8, false),
    ]))
});

/// The graph operations of one process, as read from the member.
#[derive(Debug, Clone)]
pub struct GraphOps {
    pub range_id: Int64Array,
    pub graph_node_id: Int64Array,
    pub start: Int64Array,
    pub end: Int64Array,
    pub device: Int64Array,
    /// Kernel names, a dictionary (a few hundred names for millions of operations).
    pub name: super::columns::Names,
}

impl GraphOps {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// No operations (a capture without CUDA graphs).
    pub fn empty() -> GraphOps {
        GraphOps::of(&RecordBatch::new_empty(SCHEMA.clone())).expect("the schema's own batch")
    }

    /// Checks the columns of a batch: all present, of their types, without nulls, and every
    /// operation ending no earlier than it starts.
    pub fn of(b: &RecordBatch) -> Result<GraphOps> {
        let int = |c: &str| -> Result<Int64Array> {
            let Some(a) = b.column_by_name(c) else {
                bail!("no column {c:?}");
            };
            let Some(a) = a.as_primitive_opt::<Int64Type>() else {
                bail!("column {c:?} is {}, not int64", a.data_type());
            };
            if a.null_count() > 0 {
                bail!("column {c:?} has nulls");
            }
            Ok(a.clone())
        };
        let name = super::columns::names(b, NAME)?;
        let ops = GraphOps {
            range_id: int(RANGE_ID)?,
            graph_node_id: int(GRAPH_NODE_ID)?,
            start: int(START)?,
            end: int(END)?,
            device: int(DEVICE)?,
            name,
        };
        if let Some(i) = (0..ops.len()).find(|&i| ops.end.value(i) < ops.start.value(i)) {
            bail!(
                "row {i}: operation ends at {} before it starts at {}",
                ops.end.value(i),
                ops.start.value(i)
            );
        }
        Ok(ops)
    }
}

/// Reads the member. Errors say what is wrong in one line; the caller names the file.
/// The columns [`GraphOps`] keeps (launch ids are not read), names as a dictionary.
static READ: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields = SCHEMA
        .fields()
        .iter()
        .filter(|f| f.name() != LAUNCH)
        .map(|f| match f.name().as_str() {
            NAME => Field::new(NAME, super::columns::dictionary_type(), false),
            _ => f.as_ref().clone(),
        });
    Arc::new(Schema::new(fields.collect::<Vec<_>>()))
});

/// Read the member in batches gathered into one table (a row per graph kernel).
pub fn read(bytes: Vec<u8>) -> Result<GraphOps> {
    let columns: Vec<&str> = READ.fields().iter().map(|f| f.name().as_str()).collect();
    let table = super::gather_parquet(bytes, &columns, &[NAME], READ.clone(), |_| {
        Ok(|b: &RecordBatch| Ok(b.clone()))
    })?;
    GraphOps::of(&table)
}

pub fn write(batch: &RecordBatch) -> Result<Vec<u8>> {
    super::write_parquet(batch, &super::PandasIndex::Default, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::ArrayRef;
    use arrow::array::StringArray;

    fn batch(start: i64, end: i64) -> RecordBatch {
        let i = |v: i64| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
        RecordBatch::try_new(
            SCHEMA.clone(),
            vec![
                i(7),
                i(1),
                i(2),
                i(start),
                i(end),
                i(0),
                Arc::new(StringArray::from(vec!["gemm_fusion_dot_1"])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn round_trip() {
        let ops = read(write(&batch(10, 20)).unwrap()).unwrap();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops.range_id.value(0), 7);
        assert_eq!(ops.name.value(0), "gemm_fusion_dot_1");
        assert!(GraphOps::empty().is_empty());
    }

    #[test]
    fn malformed_members_are_refused() {
        let e = read(write(&batch(20, 10)).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("before it starts"), "{e}");
        let other = RecordBatch::try_from_iter(vec![(
            "RangeId",
            Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
        )])
        .unwrap();
        let e = read(write(&other).unwrap()).unwrap_err().to_string();
        assert!(e.contains(r#"column "RangeId" is Utf8, not int64"#), "{e}");
        assert!(read(b"PAR1 nonsense".to_vec()).is_err());
    }
}
