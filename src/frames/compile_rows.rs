//! The push/pop rows a compile frame can be built from (docs/design.md, "Bounded memory").
//!
//! A process's push/pop trace has a range for every module and thunk it ran on the CPU (about
//! one per kernel), and its compilations are a small part of it. Only ranges that meet an
//! `XlaCompile` range's time can end up in the compile frame: push/pop ranges of one thread
//! nest, so a compilation's descendants lie inside it, a grafted worker root lies inside the
//! compiling range it is grafted under, and an ancestor of either contains it. Every other
//! range is dropped before the frame is built, and for the parquet variant before it is read
//! whole; the frame is the same (every range kept keeps its ancestors, checked).

use anyhow::Result;
use arrow::array::{Array, BooleanArray, StringArray};
use arrow::record_batch::RecordBatch;

use crate::formats::pushpop::{self, Columns, Selection, Spans};

/// The name without XLA's `TSL:` domain prefix.
pub fn strip_tsl(name: &str) -> &str {
    name.strip_prefix("TSL:").unwrap_or(name)
}

/// Whether a name (with or without `TSL:`) is an `XlaCompile` range.
pub fn is_xla_compile(name: &str) -> bool {
    let bare = strip_tsl(name);
    bare == "XlaCompile" || bare.starts_with("XlaCompile:#")
}

/// The time windows of the `XlaCompile` ranges, widened by 1 ns (the frame's enclosure test
/// counts a compilation's bounds as inside it), merged.
#[derive(Default, Debug)]
pub struct CompileWindows(Vec<(i64, i64)>);

impl CompileWindows {
    /// Adds the compilations among some rows.
    pub fn add(&mut self, name: &StringArray, start: &[i64], end: &[i64]) {
        for i in 0..name.len() {
            if name.is_valid(i) && is_xla_compile(name.value(i)) {
                self.0
                    .push((start[i].saturating_sub(1), end[i].saturating_add(1)));
            }
        }
    }

    /// Sorts and merges the windows (before [`CompileWindows::meets`]).
    pub fn merge(&mut self) {
        self.0.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(self.0.len());
        for &(s, e) in &self.0 {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.0 = merged;
    }

    /// Whether `[start, end]` meets a window (bounds included).
    pub fn meets(&self, start: i64, end: i64) -> bool {
        // The first window ending at or after `start`; merged windows are sorted by both ends.
        let i = self.0.partition_point(|&(_, e)| e < start);
        self.0.get(i).is_some_and(|&(s, _)| s <= end)
    }

    /// Which of some rows meet a window.
    pub fn rows(&self, start: &[i64], end: &[i64]) -> Vec<bool> {
        start
            .iter()
            .zip(end)
            .map(|(&s, &e)| self.meets(s, e))
            .collect()
    }
}

/// The rows of a normalized push/pop table that can be part of its compile frame, when that
/// is fewer than all of them and every kept row's ancestors are kept.
pub fn subset(pushpop: &RecordBatch) -> Result<Option<RecordBatch>> {
    let c = Columns::of(pushpop)?;
    let mut windows = CompileWindows::default();
    windows.add(c.name, c.start, c.end);
    windows.merge();
    let keep = windows.rows(c.start, c.end);
    if keep.iter().all(|&k| k) {
        return Ok(None);
    }
    let parent = pushpop::parent_rows(c.range_id, c.parent_id)?;
    let closed = keep
        .iter()
        .zip(&parent)
        .all(|(&k, p)| !k || p.is_none_or(|p| keep[p]));
    if !closed {
        return Ok(None);
    }
    Ok(Some(arrow::compute::filter_record_batch(
        pushpop,
        &BooleanArray::from(keep),
    )?))
}

/// Reads the parquet variant of a push/pop member keeping only the rows [`subset`] would,
/// in batches (the whole table is never held). When a kept row's parent is not among the
/// kept rows (ranges that do not nest), the member is read whole instead.
pub fn read_parquet(bytes: Vec<u8>) -> Result<RecordBatch> {
    let bytes = bytes::Bytes::from(bytes);
    let rows = pushpop::read_parquet_selected(&bytes, &mut Selecting::default())?;
    let c = Columns::of(&rows)?;
    let ids = pushpop::IdIndex::new(c.range_id)?;
    let closed = c
        .parent_id
        .iter()
        .all(|p| p.is_none_or(|p| ids.get(p).is_some()));
    if closed {
        Ok(rows)
    } else {
        pushpop::read_parquet(bytes)
    }
}

/// Compilations seen in a first pass, then the rows that meet them.
#[derive(Default)]
struct Selecting {
    windows: CompileWindows,
    merged: bool,
}

impl Selection for Selecting {
    fn scan(&mut self, rows: &Spans) {
        self.windows.add(rows.name, rows.start, rows.end);
    }

    fn keep(&mut self, rows: &Spans) -> Vec<bool> {
        if !self.merged {
            self.windows.merge();
            self.merged = true;
        }
        self.windows.rows(rows.start, rows.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(spans: &[(i64, i64)]) -> CompileWindows {
        let mut w = CompileWindows(spans.to_vec());
        w.merge();
        w
    }

    #[test]
    fn windows_merge_and_meet() {
        let w = windows(&[(10, 20), (15, 30), (50, 60), (0, 1)]);
        assert_eq!(w.0, vec![(0, 1), (10, 30), (50, 60)]);
        for (s, e, meets) in [
            (2, 9, false),
            (1, 5, true),
            (30, 49, true),
            (31, 49, false),
            (40, 70, true),
            (61, 70, false),
            (-5, -1, false),
            (12, 13, true),
        ] {
            assert_eq!(w.meets(s, e), meets, "[{s}, {e}]");
        }
        assert!(!windows(&[]).meets(0, 100));
    }
}
