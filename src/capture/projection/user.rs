//! The program's own NVTX ranges and marks with the GPU work each range launched
//! (`nsys-jax-pipe/nvtx-user.parquet`, docs/design.md "User NVTX ranges").
//!
//! A range is the user's unless it is in XLA's `TSL` domain or NCCL's (the `NCCL` domain, or
//! a default-domain name starting with `nccl`). Its GPU operations are those of the
//! projection: launched by an API call on the range's thread that starts and ends inside the
//! range, counted once per correlation id. The span is the projection's (first operation
//! start to last operation end); the busy time is the union of those operations' intervals.
//! Ranges nest among themselves as the projection's tree does, over user ranges only.
//!
//! Per range, the calls of its thread inside it are found by binary search and walked, so the
//! cost is the sum over ranges of the calls they enclose: a few levels of nesting over a
//! capture's calls.

use std::sync::Arc;

use anyhow::Result;
use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};

use super::events::{
    NVTX_PUSH_POP, NVTX_START_END, NVTX_TEXT_PUSH_POP, NVTX_TEXT_START_END, Nvtx, capture_end,
    gpu_ops, pid, tid,
};
use super::ranges::{PROCESS_MASK, Range, range_id};
use super::tree::Tree;
use crate::formats::nsys_export::{ExportTables, NVTX_EVENTS, RUNTIME, int64_column};
use crate::formats::user_nvtx::{MARK, PUSH_POP, SCHEMA, START_END};

/// `eventType` of an NVTX mark.
pub const NVTX_MARK: i64 = 34;

/// Whether a range or mark of `domain` (None: the default domain) named `text` is the
/// program's own rather than XLA's or NCCL's (XLA names its ranges `Xla...:`/`Thunk:` in its
/// `TSL` domain; a build that used the default domain is recognised by those names).
pub fn is_user(domain: Option<&str>, text: &str) -> bool {
    match domain {
        Some(d) => d != "TSL" && d != "NCCL",
        None => {
            !(text.starts_with("nccl") || text.starts_with("Thunk:#") || text.starts_with("Xla"))
        }
    }
}

/// The GPU operations of a report, by (process, correlation id), and the API calls that
/// launched them by (thread, start).
struct Launches {
    /// `intervals[offsets[k]..offsets[k + 1]]`: the operations of key `k`.
    offsets: Vec<usize>,
    intervals: Vec<(i64, i64)>,
    /// (thread, start, end, key index), sorted.
    calls: Vec<(i64, i64, i64, u32)>,
}

impl Launches {
    fn new(t: &ExportTables) -> Result<Self> {
        let mut ops = gpu_ops(t)?;
        ops.sort_unstable();
        let mut keys = Vec::new();
        let mut offsets = Vec::new();
        let mut intervals = Vec::with_capacity(ops.len());
        for group in ops.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
            keys.push((group[0].0, group[0].1));
            offsets.push(intervals.len());
            intervals.extend(group.iter().map(|o| (o.2, o.3)));
        }
        offsets.push(intervals.len());
        let mut calls = Vec::new();
        if let Some(b) = &t.runtime {
            use arrow::array::Array;
            let start = int64_column(b, RUNTIME, "start")?;
            let end = int64_column(b, RUNTIME, "end")?;
            let corr = int64_column(b, RUNTIME, "correlationId")?;
            let gtid = int64_column(b, RUNTIME, "globalTid")?;
            for i in 0..b.num_rows() {
                if !(corr.is_valid(i) && gtid.is_valid(i)) {
                    continue;
                }
                let g = gtid.value(i);
                if let Ok(k) = keys.binary_search(&(g & PROCESS_MASK, corr.value(i))) {
                    calls.push((g, start.value(i), end.value(i), k as u32));
                }
            }
        }
        calls.sort_unstable();
        Ok(Self {
            offsets,
            intervals,
            calls,
        })
    }

    /// (distinct ids, first op start, last op end, busy time) of the calls of `r`'s thread
    /// inside `r`. `seen` and `spans` are scratch space.
    fn inside(
        &self,
        r: &Range,
        seen: &mut Vec<u32>,
        spans: &mut Vec<(i64, i64)>,
    ) -> (i64, i64, i64, i64) {
        let from = self
            .calls
            .partition_point(|c| (c.0, c.1) < (r.thread, r.start));
        seen.clear();
        for c in &self.calls[from..] {
            if c.0 != r.thread || c.1 > r.end {
                break;
            }
            if c.2 <= r.end {
                seen.push(c.3);
            }
        }
        seen.sort_unstable();
        seen.dedup();
        spans.clear();
        for &k in seen.iter() {
            let k = k as usize;
            spans.extend_from_slice(&self.intervals[self.offsets[k]..self.offsets[k + 1]]);
        }
        if spans.is_empty() {
            return (0, 0, 0, 0);
        }
        spans.sort_unstable();
        // Sorted by start: a sweep merges overlapping intervals; the last merged end is the
        // latest end.
        let first = spans[0].0;
        let mut busy = 0i64;
        let (mut open_s, mut open_e) = spans[0];
        for &(s, e) in spans.iter().skip(1) {
            if s > open_e {
                busy += open_e - open_s;
                (open_s, open_e) = (s, e);
            } else {
                open_e = open_e.max(e);
            }
        }
        busy += open_e - open_s;
        (seen.len() as i64, first, open_e, busy)
    }
}

/// The user ranges and marks of an export (an empty table when there are none).
pub fn user_nvtx(t: &ExportTables) -> Result<RecordBatch> {
    let nvtx = Nvtx::new(t)?;
    let namer = nvtx.namer()?;
    let keep_user = |row: usize| {
        let (domain, text) = namer.domain_and_text(row);
        is_user(domain, text)
    };
    let ranges: Vec<Range> = nvtx
        .ranges(capture_end(t, &nvtx)?, |ty| {
            matches!(
                ty,
                NVTX_PUSH_POP | NVTX_START_END | NVTX_TEXT_PUSH_POP | NVTX_TEXT_START_END
            )
        })
        .into_iter()
        .filter(|r| keep_user(r.row as usize))
        .collect();
    let tree = Tree::new(&ranges);
    let launches = Launches::new(t)?;
    let marks: Vec<usize> = (0..nvtx.start.len())
        .filter(|&row| {
            use arrow::array::Array;
            nvtx.event_type.is_valid(row)
                && nvtx.event_type.value(row) == NVTX_MARK
                && nvtx.global_tid.is_valid(row)
                && nvtx.start.is_valid(row)
                && keep_user(row)
        })
        .collect();

    // Rows: ranges in `NVTX_EVENTS` order, then marks in time order.
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_unstable_by_key(|&i| ranges[i].row);
    let n = order.len() + marks.len();
    let (mut kind, mut domain, mut name) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut ints: [Vec<Option<i64>>; 12] = Default::default();
    let (mut seen, mut spans) = (Vec::new(), Vec::new());
    let category = optional(t, "category")?;
    for &i in &order {
        let r = &ranges[i];
        let row = r.row as usize;
        let (d, text) = namer.domain_and_text(row);
        kind.push(if r.push_pop { PUSH_POP } else { START_END });
        domain.push(d.unwrap_or("").to_string());
        name.push(text.to_string());
        let (ops, first, last, busy) = launches.inside(r, &mut seen, &mut spans);
        let values = [
            category.get(row),
            Some(pid(r.thread)),
            Some(tid(r.thread)),
            Some(r.start),
            Some(r.end),
            Some(range_id(r)),
            tree.parent[i].map(|p| range_id(&ranges[p as usize])),
            Some(tree.level[i] as i64),
            Some(ops),
            (ops > 0).then_some(first),
            (ops > 0).then_some(last),
            Some(busy),
        ];
        for (col, v) in ints.iter_mut().zip(values) {
            col.push(v);
        }
    }
    let mut marks = marks;
    marks.sort_by_key(|&row| (nvtx.start.value(row), row));
    for row in marks {
        let (d, text) = namer.domain_and_text(row);
        let thread = nvtx.global_tid.value(row);
        kind.push(MARK);
        domain.push(d.unwrap_or("").to_string());
        name.push(text.to_string());
        let values = [
            category.get(row),
            Some(pid(thread)),
            Some(tid(thread)),
            Some(nvtx.start.value(row)),
            None,
            Some(row as i64 + 1),
            None,
            Some(0),
            Some(0),
            None,
            None,
            Some(0),
        ];
        for (col, v) in ints.iter_mut().zip(values) {
            col.push(v);
        }
    }
    let [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11] =
        ints.map(|v| Arc::new(Int64Array::from(v)) as ArrayRef);
    Ok(RecordBatch::try_new(
        SCHEMA.clone(),
        vec![
            Arc::new(StringArray::from(kind)),
            Arc::new(StringArray::from(domain)),
            Arc::new(StringArray::from(name)),
            c0,
            c1,
            c2,
            c3,
            c4,
            c5,
            c6,
            c7,
            c8,
            c9,
            c10,
            c11,
        ],
    )?)
}

/// An optional integer column of `NVTX_EVENTS`.
struct Optional(Option<Int64Array>);

impl Optional {
    fn get(&self, row: usize) -> Option<i64> {
        use arrow::array::Array;
        self.0
            .as_ref()
            .filter(|a| a.is_valid(row))
            .map(|a| a.value(row))
    }
}

fn optional(t: &ExportTables, column: &str) -> Result<Optional> {
    let b = &t.nvtx_events;
    Ok(Optional(match b.column_by_name(column) {
        Some(_) => Some(int64_column(b, NVTX_EVENTS, column)?),
        None => None,
    }))
}

#[cfg(test)]
mod tests {
    use super::is_user;

    #[test]
    fn xla_and_nccl_ranges_are_not_the_users() {
        assert!(is_user(None, "train_step"));
        assert!(is_user(Some("myapp"), "XlaModule:#x#"));
        for (d, t) in [
            (Some("TSL"), "XlaModule:#hlo_module=jit_step#"),
            (Some("NCCL"), "ncclGroupEnd"),
            (None, "ncclAllReduce"),
            (None, "XlaModule:#hlo_module=jit_step#"),
            (None, "Thunk:#hlo_op=fusion#"),
        ] {
            assert!(!is_user(d, t), "{d:?} {t}");
        }
    }
}
