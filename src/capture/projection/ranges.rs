//! What the projection's parts share: CPU ranges, the string table, thread ids.

use anyhow::Result;
use arrow::array::{Array, StringArray};

use crate::formats::nsys_export::{ExportTables, STRING_IDS, int64_column, text_column};

/// Bits of a `globalTid` that name the process (and VM); the low 24 bits are the thread.
pub(super) const PROCESS_MASK: i64 = !0xFF_FFFF;

/// One CPU range.
#[derive(Clone, Copy, Debug)]
pub(super) struct Range {
    /// `globalTid` of the thread it ran on.
    pub thread: i64,
    pub start: i64,
    pub end: i64,
    /// Position in `NVTX_EVENTS`.
    pub row: u32,
    pub push_pop: bool,
}

/// The SQLite rowid of the range: its position in `NVTX_EVENTS`, from 1.
pub(super) fn range_id(r: &Range) -> i64 {
    r.row as i64 + 1
}

/// `StringIds`: the strings NVTX events and kernels name by id.
pub(super) struct Strings {
    /// Sorted by id: (id, row).
    ids: Vec<(i64, u32)>,
    values: Option<StringArray>,
}

impl Strings {
    pub fn new(t: &ExportTables) -> Result<Self> {
        let Some(s) = &t.string_ids else {
            return Ok(Self {
                ids: Vec::new(),
                values: None,
            });
        };
        let ids = int64_column(s, STRING_IDS, "id")?;
        let values = text_column(s, STRING_IDS, "value")?;
        let mut sorted: Vec<(i64, u32)> = (0..ids.len())
            .filter(|&i| ids.is_valid(i))
            .map(|i| (ids.value(i), i as u32))
            .collect();
        sorted.sort_unstable();
        Ok(Self {
            ids: sorted,
            values: Some(values),
        })
    }

    pub fn get(&self, id: i64) -> Option<&str> {
        let values = self.values.as_ref()?;
        let k = self.ids.binary_search_by_key(&id, |&(id, _)| id).ok()?;
        let row = self.ids[k].1 as usize;
        values.is_valid(row).then(|| values.value(row))
    }
}
