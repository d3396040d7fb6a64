//! `nsys-jax-pipe/nvtx-user.parquet`: the program's own NVTX ranges and marks (those of XLA's
//! `TSL` domain and of NCCL left out), one row each, with the GPU work each range launched
//! (docs/design.md, "User NVTX ranges"). nsys-jax's readers ignore the member. An archive
//! without it does not say whether the program had such ranges; with it, no rows means none
//! reached the report.
//!
//! Columns: `Kind` (`PushPop`, `StartEnd` or `Mark`), `Domain` (empty for the default domain),
//! `Name`, `Category` (the NVTX category id, null for none), `PID`, `TID`, `Start`, `End` (ns;
//! null for a mark), `RangeId` (the event's row in `NVTX_EVENTS`, from 1, as the projection
//! numbers ranges), `ParentId` (the `RangeId` of the tightest user range of the same thread
//! around it; null at the top), `Level` (0 at the top), `GpuOps` (distinct correlation ids of
//! the GPU operations launched by calls inside the range on its thread), `GpuStart`, `GpuEnd`
//! (first operation start, last operation end; null without operations) and `GpuBusy` (the
//! time at least one of those operations ran, ns).

use std::sync::{Arc, LazyLock};

use anyhow::{Result, bail};
use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::columns::{int64, utf8};

pub const KIND: &str = "Kind";
pub const DOMAIN: &str = "Domain";
pub const NAME: &str = "Name";
pub const CATEGORY: &str = "Category";
pub const PID: &str = "PID";
pub const TID: &str = "TID";
pub const START: &str = "Start";
pub const END: &str = "End";
pub const RANGE_ID: &str = "RangeId";
pub const PARENT_ID: &str = "ParentId";
pub const LEVEL: &str = "Level";
pub const GPU_OPS: &str = "GpuOps";
pub const GPU_START: &str = "GpuStart";
pub const GPU_END: &str = "GpuEnd";
pub const GPU_BUSY: &str = "GpuBusy";

pub const PUSH_POP: &str = "PushPop";
pub const START_END: &str = "StartEnd";
pub const MARK: &str = "Mark";

pub static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let int = |n: &str, null: bool| Field::new(n, DataType::Int64, null);
    let text = |n: &str| Field::new(n, DataType::Utf8, false);
    Arc::new(Schema::new(vec![
        text(KIND),
        text(DOMAIN),
        text(NAME),
        int(CATEGORY, true),
        int(PID, false),
        int(TID, false),
        int(START, false),
        int(END, true),
        int(RANGE_ID, false),
        int(PARENT_ID, true),
        int(LEVEL, false),
        int(GPU_OPS, false),
        int(GPU_START, true),
        int(GPU_END, true),
        int(GPU_BUSY, false),
    ]))
});

/// How a range or mark is shown: `domain:name`, or the name in the default domain.
pub fn label(domain: &str, name: &str) -> String {
    if domain.is_empty() {
        name.to_string()
    } else {
        format!("{domain}:{name}")
    }
}

/// The member's rows, checked.
#[derive(Debug, Clone)]
pub struct UserNvtx {
    pub kind: StringArray,
    pub domain: StringArray,
    pub name: StringArray,
    pub tid: Int64Array,
    pub start: Int64Array,
    pub end: Int64Array,
    pub range_id: Int64Array,
    pub parent_id: Int64Array,
    pub level: Int64Array,
    pub gpu_ops: Int64Array,
    pub gpu_start: Int64Array,
    pub gpu_end: Int64Array,
    pub gpu_busy: Int64Array,
}

impl UserNvtx {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// Whether row `i` is a mark (an instant).
    pub fn is_mark(&self, i: usize) -> bool {
        self.kind.value(i) == MARK
    }

    /// Checks a batch: every column present, of its type, nulls only where allowed; a range
    /// has an end no earlier than its start, a mark none; GPU work only inside a range.
    pub fn of(b: &RecordBatch) -> Result<UserNvtx> {
        // Checked, though no reader needs them yet.
        int64(b, CATEGORY, true)?;
        int64(b, PID, false)?;
        let t = UserNvtx {
            kind: utf8(b, KIND)?,
            domain: utf8(b, DOMAIN)?,
            name: utf8(b, NAME)?,
            tid: int64(b, TID, false)?,
            start: int64(b, START, false)?,
            end: int64(b, END, true)?,
            range_id: int64(b, RANGE_ID, false)?,
            parent_id: int64(b, PARENT_ID, true)?,
            level: int64(b, LEVEL, false)?,
            gpu_ops: int64(b, GPU_OPS, false)?,
            gpu_start: int64(b, GPU_START, true)?,
            gpu_end: int64(b, GPU_END, true)?,
            gpu_busy: int64(b, GPU_BUSY, false)?,
        };
        for i in 0..t.len() {
            let mark = match t.kind.value(i) {
                MARK => true,
                PUSH_POP | START_END => false,
                k => bail!("row {i}: unknown kind {k:?}"),
            };
            if mark != t.end.is_null(i) {
                bail!("row {i}: a mark has no end and a range has one");
            }
            if !mark && t.end.value(i) < t.start.value(i) {
                bail!("row {i}: ends before it starts");
            }
            if t.level.value(i) < 0 || t.gpu_ops.value(i) < 0 || t.gpu_busy.value(i) < 0 {
                bail!("row {i}: a negative level, count or time");
            }
            let has_ops = t.gpu_ops.value(i) > 0;
            if has_ops != (t.gpu_start.is_valid(i) && t.gpu_end.is_valid(i)) {
                bail!("row {i}: GPU operations without their span, or a span without them");
            }
            if has_ops {
                let span = t.gpu_end.value(i) - t.gpu_start.value(i);
                if span < 0 || t.gpu_busy.value(i) > span {
                    bail!("row {i}: GPU busy time outside its span");
                }
            }
        }
        Ok(t)
    }
}

/// Reads the member, checked ([`UserNvtx::of`]); errors say what is wrong in one line (the
/// caller names the file).
pub fn read(bytes: Vec<u8>) -> Result<RecordBatch> {
    let b = super::read_parquet(bytes)?;
    UserNvtx::of(&b)?;
    Ok(b)
}

/// Writes the member from a batch of [`SCHEMA`].
pub fn write(batch: &RecordBatch) -> Result<Vec<u8>> {
    super::write_parquet(batch, &super::PandasIndex::Default, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::ArrayRef;

    fn batch(
        kind: &str,
        end: Option<i64>,
        ops: i64,
        span: Option<(i64, i64)>,
        busy: i64,
    ) -> RecordBatch {
        let s = |v: &str| Arc::new(StringArray::from(vec![v])) as ArrayRef;
        let i = |v: Option<i64>| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
        RecordBatch::try_new(
            SCHEMA.clone(),
            vec![
                s(kind),
                s("myapp"),
                s("train_step"),
                i(None),
                i(Some(1)),
                i(Some(2)),
                i(Some(100)),
                i(end),
                i(Some(7)),
                i(None),
                i(Some(0)),
                i(Some(ops)),
                i(span.map(|s| s.0)),
                i(span.map(|s| s.1)),
                i(Some(busy)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn round_trip() {
        let b = batch(PUSH_POP, Some(200), 2, Some((150, 190)), 30);
        let t = UserNvtx::of(&read(write(&b).unwrap()).unwrap()).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.name.value(0), "train_step");
        assert_eq!(t.gpu_busy.value(0), 30);
        let m =
            UserNvtx::of(&read(write(&batch(MARK, None, 0, None, 0)).unwrap()).unwrap()).unwrap();
        assert!(m.is_mark(0));
    }

    #[test]
    fn malformed_rows_are_refused() {
        for (b, why) in [
            (batch("Range", Some(200), 0, None, 0), "unknown kind"),
            (batch(MARK, Some(200), 0, None, 0), "a mark has no end"),
            (batch(PUSH_POP, None, 0, None, 0), "a mark has no end"),
            (
                batch(PUSH_POP, Some(50), 0, None, 0),
                "ends before it starts",
            ),
            (batch(PUSH_POP, Some(200), 3, None, 0), "without their span"),
            (
                batch(PUSH_POP, Some(200), 0, Some((1, 2)), 0),
                "without their span",
            ),
            (
                batch(PUSH_POP, Some(200), 1, Some((150, 160)), 11),
                "outside its span",
            ),
        ] {
            let e = UserNvtx::of(&b).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
    }
}
