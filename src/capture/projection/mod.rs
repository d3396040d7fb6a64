//! NVTX ranges projected onto the GPU and the CPU push/pop trace (docs/design.md, "Projection"),
//! computed from the tables of an `nsys export` ([`ExportTables`]).
//!
//! Both start from the CPU ranges of `NVTX_EVENTS` and their tree per thread: the parent of
//! a range is the tightest other range of the same thread that encloses it. Since
//! `(child.start - parent.start) + (parent.end - child.end)` is the parent's duration minus
//! the child's, the tightest enclosing range is the enclosing range of smallest duration.
//!
//! Everything is sort-and-sweep, O(n log n):
//! - ranges are sorted by `(thread, start, end descending, row)`; every range that encloses
//!   another comes before it in that order. One sweep per thread inserts the ranges into a
//!   Fenwick tree indexed by end time that keeps the shortest range per prefix; the shortest
//!   range inserted so far whose end is not before the current range's end is its parent.
//!   For properly nested ranges (push/pop always are) this is the top of the usual interval
//!   stack; start/end ranges may overlap without nesting, and the tree still finds the
//!   tightest enclosing one. Ties between identical intervals go to the later one in the
//!   order, so the tree has no cycles.
//! - GPU ops (kernels, CUDA-graph kernels, memcpys, memsets) are grouped by (process,
//!   correlation id) into a sorted list of keys, in which each API call is looked up. An op belongs to every range of the call's thread that encloses the call, so per
//!   thread the ranges (by start, descending) and the calls (by start, descending) are swept
//!   together: the calls starting inside a range are inserted into a Fenwick tree indexed by
//!   call end, and the prefix up to the range's end gives the number of calls, the first op
//!   start and the last op end of the range. Calls that share a correlation id are reduced so
//!   that the count stays a count of distinct ids (see `join_calls`).

use std::cmp::Reverse;
use std::sync::Arc;

use anyhow::Result;
use arrow::array::{Array, ArrayRef, Int64Array, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};

mod events;
mod graph_ops;
mod ranges;
mod tree;
mod user;

use events::{NameColumn, Nvtx, capture_end, pid, tid};

pub use user::user_nvtx;

use ranges::{PROCESS_MASK, Range, range_id};
use tree::{Tree, thread_groups};

use crate::formats::columns::dictionary_type;
use crate::formats::nsys_export::{ExportTables, RUNTIME, int64_column};

pub use events::{NVTX_PUSH_POP, NVTX_START_END, NVTX_TEXT_PUSH_POP, NVTX_TEXT_START_END};

#[cfg(test)]
/// NVTX ranges projected onto the GPU, classic trace.parquet layout (docs/design.md, "Projection"):
/// Name, Projected Start, Projected Duration, Orig Start, Orig Duration, Style, PID, TID,
/// NumGPUOps, Lvl, NumChild, RangeId, ParentId, RangeStack (+ Rank column filled by the caller
/// later; omitted here). One row per range with GPU ops, in `RangeId` order; the row of GPU
/// ops outside every range that Nsight Systems adds is not written.
pub fn project(t: &ExportTables) -> Result<RecordBatch> {
    Ok(project_with_graph_ops(t)?.0)
}

/// [`project`], and the operations of CUDA graph launches with the innermost range around
/// each launch ([`graph_ops`]; None when the report has none).
pub fn project_with_graph_ops(t: &ExportTables) -> Result<(RecordBatch, Option<RecordBatch>)> {
    let nvtx = Nvtx::new(t)?;
    let calls = calls_with_ops(t)?;
    let ranges = nvtx.ranges(capture_end(t, &nvtx)?, |ty| {
        matches!(
            ty,
            NVTX_PUSH_POP | NVTX_START_END | NVTX_TEXT_PUSH_POP | NVTX_TEXT_START_END
        )
    });
    let tree = Tree::new(&ranges);
    let agg = attribute_ops(&ranges, &calls);

    let mut out: Vec<usize> = (0..ranges.len()).filter(|&i| agg[i].count > 0).collect();
    out.sort_unstable_by_key(|&i| ranges[i].row);
    let mut num_child = vec![0i64; ranges.len()];
    for &i in &out {
        if let Some(p) = tree.parent[i] {
            num_child[p as usize] += 1;
        }
    }

    let n = out.len();
    let namer = nvtx.namer()?;
    let mut name = NameColumn::with_capacity(n);
    let mut style = StringBuilder::with_capacity(n, n * 8);
    let mut stack = StringBuilder::with_capacity(n, n * 16);
    let mut parent_id = Int64Builder::with_capacity(n);
    let mut chain = Vec::new();
    for &i in &out {
        let r = &ranges[i];
        namer.append_name(&mut name, r.row as usize)?;
        style.append_value(if r.push_pop { "PushPop" } else { "StartEnd" });
        parent_id.append_option(tree.parent[i].map(|p| range_id(&ranges[p as usize])));
        append_stack(&mut stack, &ranges, &tree, i, &mut chain);
    }
    let col = |f: &dyn Fn(usize) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(out.iter().map(|&i| f(i))))
    };
    let columns: Vec<ArrayRef> = vec![
        name.finish(),
        col(&|i| agg[i].first_start),
        col(&|i| agg[i].last_end - agg[i].first_start),
        col(&|i| ranges[i].start),
        col(&|i| ranges[i].end - ranges[i].start),
        Arc::new(style.finish()),
        col(&|i| pid(ranges[i].thread)),
        col(&|i| tid(ranges[i].thread)),
        col(&|i| agg[i].count),
        col(&|i| tree.level[i] as i64),
        col(&|i| num_child[i]),
        col(&|i| range_id(&ranges[i])),
        Arc::new(parent_id.finish()),
        Arc::new(stack.finish()),
    ];
    let projection = RecordBatch::try_new(projection_schema(), columns)?;
    let graph = graph_ops::graph_ops(t, &ranges)?;
    Ok((projection, graph))
}

/// The schema of [`project`]'s output. `Name` is a dictionary (a row per range, few distinct
/// names), written to parquet as text.
pub fn projection_schema() -> Arc<Schema> {
    let int = |name: &str| Field::new(name, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        Field::new("Name", dictionary_type(), false),
        int("Projected Start"),
        int("Projected Duration"),
        int("Orig Start"),
        int("Orig Duration"),
        Field::new("Style", DataType::Utf8, false),
        int("PID"),
        int("TID"),
        int("NumGPUOps"),
        int("Lvl"),
        int("NumChild"),
        int("RangeId"),
        Field::new("ParentId", DataType::Int64, true),
        Field::new("RangeStack", DataType::Utf8, false),
    ]))
}

/// CPU push/pop ranges (docs/design.md, "Push/pop trace") in the column layout of Nsight Systems'
/// `nvtx_pushpop_trace` report, which nsys-jax archives hold (`report_nvtx_pushpop_trace`):
/// `Start (ns), End (ns), Duration (ns), DurChild (ns), DurNonChild (ns), Name, PID, TID, Lvl,
/// NumChild, RangeId, ParentId, RangeStack` (the report's `NameTree` display column is left
/// out). The tree is that of the push/pop ranges alone. Rows in `RangeId` order.
pub fn pushpop(t: &ExportTables) -> Result<RecordBatch> {
    let nvtx = Nvtx::new(t)?;
    let ranges = nvtx.ranges(capture_end(t, &nvtx)?, |ty| {
        matches!(ty, NVTX_PUSH_POP | NVTX_TEXT_PUSH_POP)
    });
    let tree = Tree::new(&ranges);
    let mut num_child = vec![0i64; ranges.len()];
    let mut dur_child = vec![0i64; ranges.len()];
    for (i, r) in ranges.iter().enumerate() {
        if let Some(p) = tree.parent[i] {
            num_child[p as usize] += 1;
            dur_child[p as usize] += r.end - r.start;
        }
    }
    let mut out: Vec<usize> = (0..ranges.len()).collect();
    out.sort_unstable_by_key(|&i| ranges[i].row);

    let n = out.len();
    let namer = nvtx.namer()?;
    let mut name = NameColumn::with_capacity(n);
    let mut stack = StringBuilder::with_capacity(n, n * 16);
    let mut parent_id = Int64Builder::with_capacity(n);
    let mut chain = Vec::new();
    for &i in &out {
        namer.append_name(&mut name, ranges[i].row as usize)?;
        parent_id.append_option(tree.parent[i].map(|p| range_id(&ranges[p as usize])));
        append_stack(&mut stack, &ranges, &tree, i, &mut chain);
    }
    let col = |f: &dyn Fn(usize) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(out.iter().map(|&i| f(i))))
    };
    let dur = |i: usize| ranges[i].end - ranges[i].start;
    let columns: Vec<ArrayRef> = vec![
        col(&|i| ranges[i].start),
        col(&|i| ranges[i].end),
        col(&dur),
        col(&|i| dur_child[i]),
        col(&|i| dur(i) - dur_child[i]),
        name.finish(),
        col(&|i| pid(ranges[i].thread)),
        col(&|i| tid(ranges[i].thread)),
        col(&|i| tree.level[i] as i64),
        col(&|i| num_child[i]),
        col(&|i| range_id(&ranges[i])),
        Arc::new(parent_id.finish()),
        Arc::new(stack.finish()),
    ];
    Ok(RecordBatch::try_new(pushpop_schema(), columns)?)
}

/// The schema of [`pushpop`]'s output (`Name` a dictionary, as in [`projection_schema`]).
pub fn pushpop_schema() -> Arc<Schema> {
    let int = |name: &str| Field::new(name, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        int("Start (ns)"),
        int("End (ns)"),
        int("Duration (ns)"),
        int("DurChild (ns)"),
        int("DurNonChild (ns)"),
        Field::new("Name", dictionary_type(), false),
        int("PID"),
        int("TID"),
        int("Lvl"),
        int("NumChild"),
        int("RangeId"),
        Field::new("ParentId", DataType::Int64, true),
        Field::new("RangeStack", DataType::Utf8, false),
    ]))
}

/// Appends `:root:...:self` for range `i`.
fn append_stack(
    out: &mut StringBuilder,
    ranges: &[Range],
    tree: &Tree,
    i: usize,
    chain: &mut Vec<i64>,
) {
    use std::fmt::Write;
    chain.clear();
    let mut cur = Some(i as u32);
    while let Some(c) = cur {
        chain.push(range_id(&ranges[c as usize]));
        cur = tree.parent[c as usize];
    }
    for id in chain.iter().rev() {
        // Writing into a StringBuilder's current value cannot fail.
        let _ = write!(out, ":{id}");
    }
    out.append_value("");
}

/// An API call with GPU work, as attributed to ranges.
#[derive(Clone, Copy, Debug)]
struct Call {
    thread: i64,
    start: i64,
    end: i64,
    /// +1 for a call; -1 for the hull of two calls with the same correlation id, so that
    /// a range enclosing both counts the id once.
    weight: i64,
    /// Earliest start and latest end of the call's GPU ops.
    op_start: i64,
    op_end: i64,
}

/// The API calls that launched GPU ops (kernels, CUDA-graph kernels, memcpys, memsets),
/// sorted by (thread, start).
fn calls_with_ops(t: &ExportTables) -> Result<Vec<Call>> {
    let mut ops = events::gpu_ops(t)?;
    let Some(b) = &t.runtime else {
        return Ok(Vec::new());
    };
    let start = int64_column(b, RUNTIME, "start")?;
    let end = int64_column(b, RUNTIME, "end")?;
    let corr = int64_column(b, RUNTIME, "correlationId")?;
    let gtid = int64_column(b, RUNTIME, "globalTid")?;
    Ok(join_calls(&mut ops, |keys, api| {
        // Most API calls launch no GPU work: look each one up among the op keys rather than
        // sorting them all.
        for i in 0..b.num_rows() {
            if !(corr.is_valid(i) && gtid.is_valid(i) && start.is_valid(i) && end.is_valid(i)) {
                continue;
            }
            let g = gtid.value(i);
            if let Ok(k) = keys.binary_search(&(g & PROCESS_MASK, corr.value(i))) {
                api.push((k as u32, g, start.value(i), end.value(i)));
            }
        }
    }))
}

/// Joins GPU ops `(process, corr, start, end)` to the API calls with the same (process,
/// corr). `find_calls(keys, calls)` gets the sorted distinct keys of the ops and pushes
/// `(key index, globalTid, start, end)` for each API call whose key is among them. Returns the
/// calls with ops, sorted by (thread, start).
///
/// When several calls share a key, the ranges that should count the id are those enclosing
/// at least one of them. Calls on different threads never share a range. On one thread, a
/// call enclosing another of the same id adds nothing (every range around it is around the
/// inner one too) and is dropped; the rest, by start, have increasing starts and ends, so a
/// range encloses a contiguous run of them, and counting each call +1 and the hull of each
/// adjacent pair -1 counts the run once.
fn join_calls(
    ops: &mut [(i64, i64, i64, i64)],
    find_calls: impl FnOnce(&[(i64, i64)], &mut Vec<(u32, i64, i64, i64)>),
) -> Vec<Call> {
    ops.sort_unstable();
    // Per distinct key: first op start, last op end.
    let mut keys: Vec<(i64, i64)> = Vec::new();
    let mut spans: Vec<(i64, i64)> = Vec::new();
    for group in ops.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
        keys.push((group[0].0, group[0].1));
        spans.push((
            group.iter().map(|o| o.2).min().unwrap_or(i64::MAX),
            group.iter().map(|o| o.3).max().unwrap_or(i64::MIN),
        ));
    }
    let mut api = Vec::new();
    find_calls(&keys, &mut api);
    api.sort_unstable_by_key(|&(k, g, s, e)| (k, g, s, Reverse(e)));

    let mut calls = Vec::with_capacity(api.len());
    for same_thread in api.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
        let (op_start, op_end) = spans[same_thread[0].0 as usize];
        let call = |s: i64, e: i64, weight: i64| Call {
            thread: same_thread[0].1,
            start: s,
            end: e,
            weight,
            op_start: if weight > 0 { op_start } else { i64::MAX },
            op_end: if weight > 0 { op_end } else { i64::MIN },
        };
        if let [only] = same_thread {
            calls.push(call(only.2, only.3, 1));
            continue;
        }
        // Sorted by start, end descending: a call encloses another exactly when a later one
        // ends no later than it does.
        let mut kept: Vec<(i64, i64)> = Vec::new();
        let mut min_end_after = i64::MAX;
        for c in same_thread.iter().rev() {
            if c.3 < min_end_after {
                kept.push((c.2, c.3));
            }
            min_end_after = min_end_after.min(c.3);
        }
        kept.reverse();
        for (k, &(s, e)) in kept.iter().enumerate() {
            calls.push(call(s, e, 1));
            if let Some(&(_, next_end)) = kept.get(k + 1) {
                calls.push(call(s, next_end, -1));
            }
        }
    }
    calls.sort_unstable_by_key(|c| (c.thread, c.start));
    calls
}

/// What a range collects from the calls it encloses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpAgg {
    /// Distinct correlation ids.
    count: i64,
    first_start: i64,
    last_end: i64,
}

const NO_OPS: OpAgg = OpAgg {
    count: 0,
    first_start: i64::MAX,
    last_end: i64::MIN,
};

impl OpAgg {
    fn merge(&mut self, o: &OpAgg) {
        self.count += o.count;
        self.first_start = self.first_start.min(o.first_start);
        self.last_end = self.last_end.max(o.last_end);
    }
}

/// For every range (sorted as [`Nvtx::ranges`] sorts them), the calls of its thread that lie
/// inside it.
fn attribute_ops(ranges: &[Range], calls: &[Call]) -> Vec<OpAgg> {
    let mut out = vec![NO_OPS; ranges.len()];
    let mut ends: Vec<i64> = Vec::new();
    let mut fenwick: Vec<OpAgg> = Vec::new();
    let mut c = 0;
    for (offset, group) in thread_groups(ranges) {
        let thread = group[0].thread;
        while c < calls.len() && calls[c].thread < thread {
            c += 1;
        }
        let first = c;
        while c < calls.len() && calls[c].thread == thread {
            c += 1;
        }
        let on_thread = &calls[first..c];
        if on_thread.is_empty() {
            continue;
        }
        ends.clear();
        ends.extend(on_thread.iter().map(|x| x.end));
        ends.sort_unstable();
        ends.dedup();
        fenwick.clear();
        fenwick.resize(ends.len() + 1, NO_OPS);
        // Ranges by start descending; calls by start descending, inserted once they start at
        // or after the range's start.
        let mut next = on_thread.len();
        for k in (0..group.len()).rev() {
            let r = &group[k];
            while next > 0 && on_thread[next - 1].start >= r.start {
                next -= 1;
                let x = &on_thread[next];
                let add = OpAgg {
                    count: x.weight,
                    first_start: x.op_start,
                    last_end: x.op_end,
                };
                let mut i = ends.partition_point(|&e| e < x.end) + 1;
                while i < fenwick.len() {
                    fenwick[i].merge(&add);
                    i += i & i.wrapping_neg();
                }
            }
            // Calls ending at or before the range's end.
            let mut i = ends.partition_point(|&e| e <= r.end);
            let mut acc = NO_OPS;
            while i > 0 {
                acc.merge(&fenwick[i]);
                i &= i - 1;
            }
            out[offset + k] = acc;
        }
    }
    out
}

#[cfg(test)]
mod tests;
