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

use anyhow::{Result, bail};
use arrow::array::{
    Array, ArrayRef, Int64Array, Int64Builder, RecordBatch, StringArray, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema};

use crate::formats::nsys_export::{
    ExportTables, KERNEL, MEMCPY, MEMSET, NVTX_EVENTS, RUNTIME, STRING_IDS, int64_column,
    text_column,
};

/// `eventType` of an NVTX push/pop range.
pub const NVTX_PUSH_POP: i64 = 59;
/// `eventType` of an NVTX start/end range.
pub const NVTX_START_END: i64 = 60;
/// `eventType` of a push/pop range made through the NVTX text API.
pub const NVTX_TEXT_PUSH_POP: i64 = 70;
/// `eventType` of a start/end range made through the NVTX text API.
pub const NVTX_TEXT_START_END: i64 = 71;
/// `eventType` of a domain registration; its `text` is the domain name.
pub const NVTX_DOMAIN_CREATE: i64 = 75;

/// Bits of a `globalTid` that name the process (and VM); the low 24 bits are the thread.
const PROCESS_MASK: i64 = !0xFF_FFFF;

/// NVTX ranges projected onto the GPU, classic trace.parquet layout (docs/design.md, "Projection"):
/// Name, Projected Start, Projected Duration, Orig Start, Orig Duration, Style, PID, TID,
/// NumGPUOps, Lvl, NumChild, RangeId, ParentId, RangeStack (+ Rank column filled by the caller
/// later; omitted here). One row per range with GPU ops, in `RangeId` order; the row of GPU
/// ops outside every range that Nsight Systems adds is not written.
pub fn project(t: &ExportTables) -> Result<RecordBatch> {
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
    let mut name = StringBuilder::with_capacity(n, n * 48);
    let mut style = StringBuilder::with_capacity(n, n * 8);
    let mut stack = StringBuilder::with_capacity(n, n * 16);
    let mut parent_id = Int64Builder::with_capacity(n);
    let mut chain = Vec::new();
    for &i in &out {
        let r = &ranges[i];
        namer.append_name(&mut name, r.row as usize);
        style.append_value(if r.push_pop { "PushPop" } else { "StartEnd" });
        parent_id.append_option(tree.parent[i].map(|p| range_id(&ranges[p as usize])));
        append_stack(&mut stack, &ranges, &tree, i, &mut chain);
    }
    let col = |f: &dyn Fn(usize) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(out.iter().map(|&i| f(i))))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(name.finish()),
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
    Ok(RecordBatch::try_new(projection_schema(), columns)?)
}

/// The schema of [`project`]'s output.
pub fn projection_schema() -> Arc<Schema> {
    let int = |name: &str| Field::new(name, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        Field::new("Name", DataType::Utf8, false),
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
    let mut name = StringBuilder::with_capacity(n, n * 48);
    let mut stack = StringBuilder::with_capacity(n, n * 16);
    let mut parent_id = Int64Builder::with_capacity(n);
    let mut chain = Vec::new();
    for &i in &out {
        namer.append_name(&mut name, ranges[i].row as usize);
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
        Arc::new(name.finish()),
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

/// The schema of [`pushpop`]'s output.
pub fn pushpop_schema() -> Arc<Schema> {
    let int = |name: &str| Field::new(name, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        int("Start (ns)"),
        int("End (ns)"),
        int("Duration (ns)"),
        int("DurChild (ns)"),
        int("DurNonChild (ns)"),
        Field::new("Name", DataType::Utf8, false),
        int("PID"),
        int("TID"),
        int("Lvl"),
        int("NumChild"),
        int("RangeId"),
        Field::new("ParentId", DataType::Int64, true),
        Field::new("RangeStack", DataType::Utf8, false),
    ]))
}

fn pid(global_tid: i64) -> i64 {
    (global_tid >> 24) & 0xFF_FFFF
}

fn tid(global_tid: i64) -> i64 {
    global_tid & 0xFF_FFFF
}

/// The SQLite rowid of the range: its position in `NVTX_EVENTS`, from 1.
fn range_id(r: &Range) -> i64 {
    r.row as i64 + 1
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

/// One CPU range.
#[derive(Clone, Copy, Debug)]
struct Range {
    /// `globalTid` of the thread it ran on.
    thread: i64,
    start: i64,
    end: i64,
    /// Position in `NVTX_EVENTS`.
    row: u32,
    push_pop: bool,
}

/// The columns of `NVTX_EVENTS` in use.
struct Nvtx<'a> {
    tables: &'a ExportTables,
    start: Int64Array,
    end: Int64Array,
    event_type: Int64Array,
    global_tid: Int64Array,
    end_global_tid: Int64Array,
    /// The latest timestamp of the table.
    last_time: i64,
}

impl<'a> Nvtx<'a> {
    fn new(tables: &'a ExportTables) -> Result<Self> {
        let b = &tables.nvtx_events;
        let get = |c: &str| int64_column(b, NVTX_EVENTS, c);
        let start = get("start")?;
        let end = optional_int64(b, "end")?;
        let last_time = max_of(&start).max(max_of(&end));
        if b.num_rows() > u32::MAX as usize {
            bail!("{NVTX_EVENTS}: too many rows ({})", b.num_rows());
        }
        Ok(Self {
            tables,
            start,
            end,
            event_type: get("eventType")?,
            global_tid: get("globalTid")?,
            end_global_tid: optional_int64(b, "endGlobalTid")?,
            last_time,
        })
    }

    /// The ranges of the kinds `keep` accepts that start and end on the same thread, sorted
    /// by `(thread, start, end descending, row)`. A range never closed ends at `capture_end`.
    fn ranges(&self, capture_end: i64, keep: impl Fn(i64) -> bool) -> Vec<Range> {
        let mut out = Vec::new();
        for row in 0..self.start.len() {
            if self.event_type.is_null(row)
                || self.global_tid.is_null(row)
                || self.start.is_null(row)
            {
                continue;
            }
            let ty = self.event_type.value(row);
            if !keep(ty) {
                continue;
            }
            let thread = self.global_tid.value(row);
            if self.end_global_tid.is_valid(row) && self.end_global_tid.value(row) != thread {
                continue;
            }
            let start = self.start.value(row);
            let end = if self.end.is_valid(row) {
                self.end.value(row)
            } else {
                capture_end.max(start)
            };
            out.push(Range {
                thread,
                start,
                end,
                row: row as u32,
                push_pop: matches!(ty, NVTX_PUSH_POP | NVTX_TEXT_PUSH_POP),
            });
        }
        out.sort_unstable_by_key(|r| (r.thread, r.start, Reverse(r.end), r.row));
        out
    }

    fn namer(&self) -> Result<Namer> {
        Namer::new(self)
    }
}

fn max_of(a: &Int64Array) -> i64 {
    arrow::compute::max(a).unwrap_or(i64::MIN)
}

/// A column of `NVTX_EVENTS` that may be absent (then all null).
fn optional_int64(b: &RecordBatch, column: &str) -> Result<Int64Array> {
    match b.column_by_name(column) {
        Some(_) => int64_column(b, NVTX_EVENTS, column),
        None => Ok(Int64Array::new_null(b.num_rows())),
    }
}

/// The last timestamp of the capture, where ranges never closed end: the latest time among
/// NVTX events, API calls and GPU ops.
fn capture_end(t: &ExportTables, nvtx: &Nvtx) -> Result<i64> {
    let mut last = nvtx.last_time;
    for (table, batch) in [
        (RUNTIME, &t.runtime),
        (KERNEL, &t.kernel),
        (MEMCPY, &t.memcpy),
        (MEMSET, &t.memset),
    ] {
        if let Some(b) = batch {
            last = last.max(max_of(&int64_column(b, table, "end")?));
        }
    }
    Ok(last)
}

/// Range names: `<domain>:<text>`, or the text alone in the default domain.
struct Namer {
    text: StringArray,
    text_id: Int64Array,
    domain_id: Int64Array,
    global_tid: Int64Array,
    /// `StringIds` sorted by id: (id, row).
    strings: Vec<(i64, u32)>,
    string_values: Option<StringArray>,
    /// Domains sorted by (process, domain id): name.
    domains: Vec<((i64, i64), String)>,
}

impl Namer {
    fn new(nvtx: &Nvtx) -> Result<Self> {
        let b = &nvtx.tables.nvtx_events;
        let text = match b.column_by_name("text") {
            Some(_) => text_column(b, NVTX_EVENTS, "text")?,
            None => StringArray::new_null(b.num_rows()),
        };
        let text_id = optional_int64(b, "textId")?;
        let domain_id = optional_int64(b, "domainId")?;
        let (strings, string_values) = match &nvtx.tables.string_ids {
            Some(s) => {
                let ids = int64_column(s, STRING_IDS, "id")?;
                let values = text_column(s, STRING_IDS, "value")?;
                let mut strings: Vec<(i64, u32)> = (0..ids.len())
                    .filter(|&i| ids.is_valid(i))
                    .map(|i| (ids.value(i), i as u32))
                    .collect();
                strings.sort_unstable();
                (strings, Some(values))
            }
            None => (Vec::new(), None),
        };
        let mut namer = Self {
            text,
            text_id,
            domain_id,
            global_tid: nvtx.global_tid.clone(),
            strings,
            string_values,
            domains: Vec::new(),
        };
        let mut domains = Vec::new();
        for row in 0..nvtx.event_type.len() {
            if nvtx.event_type.is_valid(row)
                && nvtx.event_type.value(row) == NVTX_DOMAIN_CREATE
                && namer.domain_id.is_valid(row)
                && nvtx.global_tid.is_valid(row)
            {
                let key = (
                    nvtx.global_tid.value(row) & PROCESS_MASK,
                    namer.domain_id.value(row),
                );
                domains.push((key, namer.text(row).to_string()));
            }
        }
        // Sort by key only, stably: the first registration of a key wins.
        domains.sort_by_key(|(k, _)| *k);
        domains.dedup_by_key(|(k, _)| *k);
        namer.domains = domains;
        Ok(namer)
    }

    /// `text`, else `StringIds[textId]`, else empty.
    fn text(&self, row: usize) -> &str {
        if self.text.is_valid(row) {
            return self.text.value(row);
        }
        if self.text_id.is_valid(row)
            && let Some(values) = &self.string_values
        {
            let id = self.text_id.value(row);
            if let Ok(k) = self.strings.binary_search_by_key(&id, |&(id, _)| id) {
                return values.value(self.strings[k].1 as usize);
            }
        }
        ""
    }

    /// Appends the name of the range in `row` to `out`.
    fn append_name(&self, out: &mut StringBuilder, row: usize) {
        use std::fmt::Write;
        if self.domain_id.is_valid(row) && self.global_tid.is_valid(row) {
            let key = (
                self.global_tid.value(row) & PROCESS_MASK,
                self.domain_id.value(row),
            );
            if let Ok(k) = self.domains.binary_search_by_key(&key, |(k, _)| *k) {
                // Writing into a StringBuilder's current value cannot fail.
                let _ = write!(out, "{}:", self.domains[k].1);
            }
        }
        out.append_value(self.text(row));
    }
}

/// Parent (index into the sorted ranges) and nesting level of every range.
struct Tree {
    parent: Vec<Option<u32>>,
    level: Vec<u32>,
}

impl Tree {
    /// `ranges` sorted as [`Nvtx::ranges`] sorts them.
    fn new(ranges: &[Range]) -> Self {
        let mut parent = vec![None; ranges.len()];
        let mut ends = Vec::new();
        let mut fenwick = Vec::new();
        for (offset, group) in thread_groups(ranges) {
            tightest_parents(group, offset, &mut parent, &mut ends, &mut fenwick);
        }
        // Parents come before their children in the sorted order.
        let mut level = vec![0u32; ranges.len()];
        for i in 0..ranges.len() {
            if let Some(p) = parent[i] {
                level[i] = level[p as usize] + 1;
            }
        }
        Self { parent, level }
    }
}

/// `(offset, slice)` of each run of ranges on one thread.
fn thread_groups(ranges: &[Range]) -> impl Iterator<Item = (usize, &[Range])> {
    let mut offset = 0;
    ranges.chunk_by(|a, b| a.thread == b.thread).map(move |g| {
        let o = offset;
        offset += g.len();
        (o, g)
    })
}

/// Parents within one thread's ranges (sorted by start, end descending, row).
///
/// A Fenwick tree over the distinct end times, largest first, holds for each prefix the
/// shortest range inserted so far (ties: the latest inserted). Querying the prefix of ends
/// `>= range.end` before inserting the range gives the shortest enclosing range among those
/// sorted before it, which are all the ranges that enclose it.
fn tightest_parents(
    group: &[Range],
    offset: usize,
    parent: &mut [Option<u32>],
    ends: &mut Vec<i64>,
    fenwick: &mut Vec<(i64, i64)>,
) {
    const EMPTY: (i64, i64) = (i64::MAX, i64::MAX);
    ends.clear();
    ends.extend(group.iter().map(|r| r.end));
    ends.sort_unstable_by_key(|&e| Reverse(e));
    ends.dedup();
    fenwick.clear();
    fenwick.resize(ends.len() + 1, EMPTY);
    // 1-based Fenwick position of an end time: its rank among the ends, largest first.
    let position = |ends: &[i64], end: i64| -> usize { ends.partition_point(|&e| e > end) + 1 };
    for (k, r) in group.iter().enumerate() {
        let at = position(ends, r.end);
        // Query the prefix [1, at]: ranges ending at or after r.end.
        let mut best = EMPTY;
        let mut i = at;
        while i > 0 {
            best = best.min(fenwick[i]);
            i &= i - 1;
        }
        if best != EMPTY {
            parent[offset + k] = Some((-best.1) as u32);
        }
        // Insert r, keyed by (duration, later first).
        let key = (r.end - r.start, -((offset + k) as i64));
        let mut i = at;
        while i < fenwick.len() {
            if key < fenwick[i] {
                fenwick[i] = key;
            }
            i += i & i.wrapping_neg();
        }
    }
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
    // (process, correlation id, start, end) of every GPU op.
    let mut ops: Vec<(i64, i64, i64, i64)> = Vec::new();
    for (table, batch) in [
        (KERNEL, &t.kernel),
        (MEMCPY, &t.memcpy),
        (MEMSET, &t.memset),
    ] {
        let Some(b) = batch else { continue };
        let start = int64_column(b, table, "start")?;
        let end = int64_column(b, table, "end")?;
        let corr = int64_column(b, table, "correlationId")?;
        let gpid = int64_column(b, table, "globalPid")?;
        for i in 0..b.num_rows() {
            if corr.is_valid(i) && gpid.is_valid(i) && start.is_valid(i) && end.is_valid(i) {
                ops.push((
                    gpid.value(i) & PROCESS_MASK,
                    corr.value(i),
                    start.value(i),
                    end.value(i),
                ));
            }
        }
    }
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
mod tests {
    use super::*;
    use crate::formats::nsys_export::testing;
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    use std::collections::HashMap;
    use std::path::Path;

    // ---- synthetic tables -------------------------------------------------------------

    const PROC: i64 = (1 << 48) | (7 << 24);
    const T1: i64 = PROC | 11;
    const T2: i64 = PROC | 12;

    /// (start, end, eventType, text, domainId, globalTid)
    type Ev = (i64, Option<i64>, i64, &'static str, i64, i64);

    fn tables(
        events: &[Ev],
        api: &[(i64, i64, i64, i64)],
        ops: &[(i64, i64, i64)],
    ) -> ExportTables {
        let nvtx = RecordBatch::try_from_iter([
            (
                "start",
                Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.0))) as ArrayRef,
            ),
            (
                "end",
                Arc::new(Int64Array::from_iter(events.iter().map(|e| e.1))),
            ),
            (
                "eventType",
                Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.2))),
            ),
            (
                "text",
                Arc::new(StringArray::from_iter_values(events.iter().map(|e| e.3))),
            ),
            ("textId", Arc::new(Int64Array::new_null(events.len()))),
            (
                "domainId",
                Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.4))),
            ),
            (
                "globalTid",
                Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.5))),
            ),
            ("endGlobalTid", Arc::new(Int64Array::new_null(events.len()))),
        ])
        .unwrap();
        // api: (start, end, correlationId, globalTid)
        let runtime = RecordBatch::try_from_iter([
            (
                "start",
                Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.0))) as ArrayRef,
            ),
            (
                "end",
                Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.1))),
            ),
            (
                "correlationId",
                Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.2))),
            ),
            (
                "globalTid",
                Arc::new(Int64Array::from_iter_values(api.iter().map(|a| a.3))),
            ),
        ])
        .unwrap();
        // ops: (start, end, correlationId)
        let kernel = RecordBatch::try_from_iter([
            (
                "start",
                Arc::new(Int64Array::from_iter_values(ops.iter().map(|o| o.0))) as ArrayRef,
            ),
            (
                "end",
                Arc::new(Int64Array::from_iter_values(ops.iter().map(|o| o.1))),
            ),
            (
                "correlationId",
                Arc::new(Int64Array::from_iter_values(ops.iter().map(|o| o.2))),
            ),
            (
                "globalPid",
                Arc::new(Int64Array::from(vec![PROC; ops.len()])),
            ),
        ])
        .unwrap();
        ExportTables {
            nvtx_events: nvtx,
            string_ids: None,
            runtime: Some(runtime),
            kernel: Some(kernel),
            memcpy: None,
            memset: None,
            thread_names: None,
            target_info_gpu: None,
            target_info_nvtx_cuda_device: None,
            target_info_system_env: None,
        }
    }

    fn ints(b: &RecordBatch, c: &str) -> Vec<Option<i64>> {
        b.column_by_name(c)
            .unwrap()
            .as_primitive::<Int64Type>()
            .iter()
            .collect()
    }

    fn strs(b: &RecordBatch, c: &str) -> Vec<String> {
        b.column_by_name(c)
            .unwrap()
            .as_string::<i32>()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect()
    }

    #[test]
    fn projects_nested_ranges() {
        let events: &[Ev] = &[
            (0, None, NVTX_DOMAIN_CREATE, "TSL", 1, T1),
            (10, Some(100), NVTX_PUSH_POP, "outer", 1, T1), // id 2
            (20, Some(40), NVTX_PUSH_POP, "a", 1, T1),      // id 3
            (50, Some(90), NVTX_PUSH_POP, "b", 0, T1),      // id 4, default domain
            (60, Some(70), NVTX_PUSH_POP, "c", 1, T1),      // id 5
            (10, Some(100), NVTX_PUSH_POP, "other", 1, T2), // id 6, other thread
            (5, Some(200), NVTX_START_END, "se", 1, T1),    // id 7, encloses all of T1
            (91, Some(94), NVTX_PUSH_POP, "d", 1, T1),      // id 8, no ops
        ];
        let api = &[
            (21, 25, 100, T1),
            (30, 35, 101, T1),
            (61, 65, 102, T1),
            (95, 99, 103, T1), // directly in "outer"
            (41, 45, 104, T2), // in "other"
            (150, 160, 105, T1),
            (92, 93, 106, T1), // in "d", but without GPU work
        ];
        let ops = &[
            (1000, 1100, 100),
            (1200, 1300, 101),
            (1250, 1280, 101), // second op of the same call
            (1400, 1500, 102),
            (1600, 1700, 103),
            (900, 950, 104),
            (2000, 2100, 105),
            (5000, 5100, 999), // no call
        ];
        let t = tables(events, api, ops);
        let p = project(&t).unwrap();
        assert_eq!(ints(&p, "RangeId"), [2, 3, 4, 5, 6, 7].map(Some));
        assert_eq!(
            strs(&p, "Name"),
            ["TSL:outer", "TSL:a", "b", "TSL:c", "TSL:other", "TSL:se"]
        );
        assert_eq!(ints(&p, "NumGPUOps"), [4, 2, 1, 1, 1, 5].map(Some));
        assert_eq!(
            ints(&p, "Projected Start"),
            [1000, 1000, 1400, 1400, 900, 1000].map(Some)
        );
        assert_eq!(
            ints(&p, "Projected Duration"),
            [700, 300, 100, 100, 50, 1100].map(Some)
        );
        assert_eq!(
            ints(&p, "ParentId"),
            [Some(7), Some(2), Some(2), Some(4), None, None]
        );
        assert_eq!(
            strs(&p, "RangeStack"),
            [":7:2", ":7:2:3", ":7:2:4", ":7:2:4:5", ":6", ":7"]
        );
        assert_eq!(ints(&p, "Lvl"), [1, 2, 2, 3, 0, 0].map(Some));
        // "d" (id 8) is not projected, so "outer" counts two projected children.
        assert_eq!(ints(&p, "NumChild"), [2, 0, 1, 0, 0, 1].map(Some));
        assert_eq!(strs(&p, "Style")[5], "StartEnd");
        assert_eq!(strs(&p, "Style")[0], "PushPop");
        assert_eq!(ints(&p, "PID"), [Some(7); 6]);
        assert_eq!(ints(&p, "TID"), [11, 11, 11, 11, 12, 11].map(Some));
        assert_eq!(ints(&p, "Orig Start"), [10, 20, 50, 60, 10, 5].map(Some));
        assert_eq!(
            ints(&p, "Orig Duration"),
            [90, 20, 40, 10, 90, 195].map(Some)
        );

        let pp = pushpop(&t).unwrap();
        assert_eq!(ints(&pp, "RangeId"), [2, 3, 4, 5, 6, 8].map(Some));
        // The start/end range is not part of the push/pop tree.
        assert_eq!(
            ints(&pp, "ParentId"),
            [None, Some(2), Some(2), Some(4), None, Some(2)]
        );
        assert_eq!(ints(&pp, "DurChild (ns)"), [63, 0, 10, 0, 0, 0].map(Some));
        assert_eq!(
            ints(&pp, "DurNonChild (ns)"),
            [27, 20, 30, 10, 90, 3].map(Some)
        );
        assert_eq!(ints(&pp, "NumChild"), [3, 0, 1, 0, 0, 0].map(Some));
        assert_eq!(ints(&pp, "Lvl"), [0, 1, 1, 2, 0, 1].map(Some));
        assert_eq!(
            strs(&pp, "RangeStack"),
            [":2", ":2:3", ":2:4", ":2:4:5", ":6", ":2:8"]
        );
        assert_eq!(strs(&pp, "Name")[2], "b");
    }

    #[test]
    fn overlapping_start_end_ranges_take_the_tightest_parent() {
        let events: &[Ev] = &[
            (0, Some(100), NVTX_START_END, "A", 0, T1),   // id 1
            (10, Some(200), NVTX_START_END, "B", 0, T1),  // id 2: overlaps A, does not nest
            (20, Some(50), NVTX_START_END, "r", 0, T1),   // id 3: inside both; A is tighter
            (150, Some(160), NVTX_START_END, "s", 0, T1), // id 4: inside B only
            (300, None, NVTX_PUSH_POP, "open", 0, T1),    // id 5: never closed
        ];
        let api = &[(25, 30, 1, T1), (155, 156, 2, T1), (400, 410, 3, T1)];
        let ops = &[(1000, 1010, 1), (2000, 2010, 2), (3000, 3010, 3)];
        let p = project(&tables(events, api, ops)).unwrap();
        assert_eq!(ints(&p, "RangeId"), [1, 2, 3, 4, 5].map(Some));
        assert_eq!(ints(&p, "ParentId"), [None, None, Some(1), Some(2), None]);
        assert_eq!(ints(&p, "NumGPUOps"), [1, 2, 1, 1, 1].map(Some));
        assert_eq!(
            ints(&p, "Projected Start"),
            [1000, 1000, 1000, 2000, 3000].map(Some)
        );
        // The open range ends at the capture's last timestamp (the last op's end).
        assert_eq!(ints(&p, "Orig Duration")[4], Some(3010 - 300));
    }

    #[test]
    fn identical_ranges_and_shared_correlation_ids() {
        let events: &[Ev] = &[
            (0, Some(100), NVTX_PUSH_POP, "x", 0, T1), // id 1
            (0, Some(100), NVTX_PUSH_POP, "y", 0, T1), // id 2: same interval
            (10, Some(20), NVTX_PUSH_POP, "p", 0, T1), // id 3
            (30, Some(40), NVTX_PUSH_POP, "q", 0, T1), // id 4
        ];
        // Correlation id 7: two calls on T1 in different ranges, a nested duplicate, and one
        // on T2. Id 8: one call.
        let api = &[
            (12, 18, 7, T1),
            (13, 14, 7, T1),
            (32, 38, 7, T1),
            (50, 51, 7, T2),
            (60, 61, 8, T1),
        ];
        let ops = &[(500, 600, 7), (700, 800, 8)];
        let p = project(&tables(events, api, ops)).unwrap();
        assert_eq!(ints(&p, "RangeId"), [1, 2, 3, 4].map(Some));
        assert_eq!(ints(&p, "ParentId"), [None, Some(1), Some(2), Some(2)]);
        assert_eq!(strs(&p, "RangeStack"), [":1", ":1:2", ":1:2:3", ":1:2:4"]);
        assert_eq!(ints(&p, "NumGPUOps"), [2, 2, 1, 1].map(Some));
        assert_eq!(ints(&p, "NumChild"), [1, 2, 0, 0].map(Some));
    }

    #[test]
    fn text_ids_text_api_ranges_and_cross_thread_ranges() {
        // textId → StringIds; types 70/71; a start/end range that ends on another thread is
        // not a range of either thread; a never-closed push/pop range ends at the capture's
        // last timestamp in both outputs.
        let n = 5;
        let nvtx = RecordBatch::try_from_iter([
            (
                "start",
                Arc::new(Int64Array::from(vec![0, 10, 20, 30, 40])) as ArrayRef,
            ),
            (
                "end",
                Arc::new(Int64Array::from(vec![
                    None,
                    Some(100),
                    Some(50),
                    Some(60),
                    None,
                ])),
            ),
            (
                "eventType",
                Arc::new(Int64Array::from(vec![
                    NVTX_DOMAIN_CREATE,
                    NVTX_TEXT_PUSH_POP,
                    NVTX_TEXT_START_END,
                    NVTX_START_END,
                    NVTX_PUSH_POP,
                ])),
            ),
            (
                "text",
                Arc::new(StringArray::from(vec![
                    Some("D"),
                    None,
                    None,
                    Some("x"),
                    None,
                ])),
            ),
            (
                "textId",
                Arc::new(Int64Array::from(vec![
                    None,
                    Some(5),
                    Some(6),
                    None,
                    Some(5),
                ])),
            ),
            ("domainId", Arc::new(Int64Array::from(vec![3, 3, 0, 0, 0]))),
            ("globalTid", Arc::new(Int64Array::from(vec![T1; n]))),
            (
                "endGlobalTid",
                Arc::new(Int64Array::from(vec![None, None, Some(T1), Some(T2), None])),
            ),
        ])
        .unwrap();
        let strings = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![6, 5])) as ArrayRef),
            ("value", Arc::new(StringArray::from(vec!["six", "five"]))),
        ])
        .unwrap();
        let mut t = tables(
            &[],
            &[(45, 46, 1, T1), (55, 56, 2, T1)],
            &[(70, 80, 1), (90, 130, 2)],
        );
        t.nvtx_events = nvtx;
        t.string_ids = Some(strings);
        let p = project(&t).unwrap();
        assert_eq!(ints(&p, "RangeId"), [2, 3, 5].map(Some));
        assert_eq!(strs(&p, "Name"), ["D:five", "six", "five"]);
        assert_eq!(strs(&p, "Style"), ["PushPop", "StartEnd", "PushPop"]);
        assert_eq!(ints(&p, "NumGPUOps"), [2, 1, 2].map(Some));
        // The open range starts inside range 2 but outlives it.
        assert_eq!(ints(&p, "ParentId"), [None, Some(2), None]);
        // The capture ends with the last op (130).
        assert_eq!(ints(&p, "Orig Duration"), [90, 30, 90].map(Some));
        let pp = pushpop(&t).unwrap();
        assert_eq!(ints(&pp, "RangeId"), [2, 5].map(Some));
        assert_eq!(ints(&pp, "End (ns)"), [100, 130].map(Some));
        assert_eq!(ints(&pp, "ParentId"), [None, None]);
    }

    #[test]
    fn no_gpu_tables_give_an_empty_projection() {
        let events: &[Ev] = &[(0, Some(100), NVTX_PUSH_POP, "x", 0, T1)];
        let mut t = tables(events, &[], &[]);
        t.runtime = None;
        t.kernel = None;
        let p = project(&t).unwrap();
        assert_eq!(p.num_rows(), 0);
        assert_eq!(p.schema(), projection_schema());
        assert_eq!(pushpop(&t).unwrap().num_rows(), 1);
    }

    // ---- real reports ----------------------------------------------------------------

    fn read_reference(path: &Path) -> RecordBatch {
        crate::formats::read_parquet(std::fs::read(path).unwrap()).unwrap()
    }

    /// Column `c` of `b` as i64 (nulls as None), whatever its stored type.
    fn col_i64(b: &RecordBatch, c: &str) -> Vec<Option<i64>> {
        let a = b
            .column_by_name(c)
            .unwrap_or_else(|| panic!("no column {c}"));
        let a = arrow::compute::cast(a, &DataType::Int64).unwrap();
        a.as_primitive::<Int64Type>().iter().collect()
    }

    fn col_str(b: &RecordBatch, c: &str) -> Vec<Option<String>> {
        let a = b.column_by_name(c).unwrap();
        let a = arrow::compute::cast(a, &DataType::Utf8).unwrap();
        a.as_string::<i32>()
            .iter()
            .map(|s| s.map(str::to_string))
            .collect()
    }

    /// Compares `ours` to `reference` row by row, matching rows by RangeId. `columns` pairs
    /// our column name with the reference's; reference rows without a RangeId are dropped.
    fn assert_same_rows(
        ours: &RecordBatch,
        reference: &RecordBatch,
        int_columns: &[(&str, &str)],
        text_columns: &[(&str, &str)],
        what: &str,
    ) {
        let ref_ids = col_i64(reference, "RangeId");
        let keep: Vec<usize> = (0..ref_ids.len())
            .filter(|&i| ref_ids[i].is_some())
            .collect();
        let our_ids = col_i64(ours, "RangeId");
        assert_eq!(our_ids.len(), keep.len(), "{what}: row count");
        let by_id: HashMap<i64, usize> = our_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.unwrap(), i))
            .collect();
        assert_eq!(by_id.len(), our_ids.len(), "{what}: duplicate RangeId");
        let mut mismatches = Vec::new();
        for (ours_col, ref_col) in int_columns {
            let o = col_i64(ours, ours_col);
            let r = col_i64(reference, ref_col);
            for &k in &keep {
                let i = by_id[&ref_ids[k].unwrap()];
                if o[i] != r[k] {
                    mismatches.push(format!(
                        "RangeId {}: {ours_col} ours {:?} reference {:?}",
                        ref_ids[k].unwrap(),
                        o[i],
                        r[k]
                    ));
                }
            }
        }
        for (ours_col, ref_col) in text_columns {
            let o = col_str(ours, ours_col);
            let r = col_str(reference, ref_col);
            for &k in &keep {
                let i = by_id[&ref_ids[k].unwrap()];
                if o[i] != r[k] {
                    mismatches.push(format!(
                        "RangeId {}: {ours_col} ours {:?} reference {:?}",
                        ref_ids[k].unwrap(),
                        o[i],
                        r[k]
                    ));
                }
            }
        }
        assert!(
            mismatches.is_empty(),
            "{what}: {} mismatches, first: {:#?}",
            mismatches.len(),
            &mismatches[..mismatches.len().min(10)]
        );
    }

    const PROJECTION_INTS: &[(&str, &str)] = &[
        ("PID", "PID"),
        ("TID", "TID"),
        ("Orig Start", "Orig Start"),
        ("Orig Duration", "Orig Duration"),
        ("Projected Start", "Projected Start"),
        ("Projected Duration", "Projected Duration"),
        ("NumGPUOps", "NumGPUOps"),
        ("Lvl", "Lvl"),
        ("NumChild", "NumChild"),
        ("ParentId", "ParentId"),
    ];
    const PROJECTION_TEXT: &[(&str, &str)] = &[("Name", "Name"), ("RangeStack", "RangeStack")];

    /// Exports `report` (relative to the fixtures) into `tmp` and reads it; `None` when the
    /// fixtures or nsys are not here.
    fn exported(report: &str, tmp: &Path) -> Option<ExportTables> {
        let fixtures = crate::testutil::fixtures_dir()?;
        let nsys = crate::testutil::nsys_path()?;
        let dir = testing::export_to(&nsys, &fixtures.join(report), tmp);
        Some(crate::formats::nsys_export::read_export_dir(&dir).unwrap())
    }

    /// Nsight Systems' own `nvtx_gpu_proj_trace` and `nvtx_pushpop_trace` reports for
    /// `report` (the `nsys stats` variants, which run on the SQLite export), as read from their
    /// CSV files; `None` for a report nsys wrote no rows for. `None` overall (with a notice)
    /// when this nsys cannot produce them.
    fn nsys_stats(report: &str, tmp: &Path) -> Option<(Option<RecordBatch>, Option<RecordBatch>)> {
        let fixtures = crate::testutil::fixtures_dir()?;
        let nsys = crate::testutil::nsys_path()?;
        let sqlite = tmp.join("stats.sqlite");
        let run = |args: &[&std::ffi::OsStr]| {
            std::process::Command::new(&nsys)
                .args(args)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let ok = run(&[
            "export".as_ref(),
            "--type=sqlite".as_ref(),
            "--quiet=true".as_ref(),
            "--force-overwrite=true".as_ref(),
            "--output".as_ref(),
            sqlite.as_os_str(),
            fixtures.join(report).as_os_str(),
        ]) && run(&[
            "stats".as_ref(),
            "--quiet".as_ref(),
            "--report=nvtx_gpu_proj_trace,nvtx_pushpop_trace".as_ref(),
            "--format=csv".as_ref(),
            "--output".as_ref(),
            tmp.join("stats").as_os_str(),
            sqlite.as_os_str(),
        ]);
        if !ok {
            eprintln!("\n!!! SKIPPING comparison with `nsys stats`: it failed here !!!\n");
            return None;
        }
        let read = |name: &str| -> Option<RecordBatch> {
            let path = tmp.join(format!("stats_{name}.csv"));
            let text = std::fs::read(&path).ok()?;
            if text.iter().all(|b| b.is_ascii_whitespace()) {
                return None;
            }
            let (schema, _) = arrow::csv::reader::Format::default()
                .with_header(true)
                .infer_schema(std::io::Cursor::new(&text), None)
                .unwrap();
            let reader = arrow::csv::ReaderBuilder::new(Arc::new(schema))
                .with_header(true)
                .build(std::io::Cursor::new(text))
                .unwrap();
            let schema = reader.schema();
            let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
            Some(arrow::compute::concat_batches(&schema, &batches).unwrap())
        };
        Some((read("nvtx_gpu_proj_trace"), read("nvtx_pushpop_trace")))
    }

    /// Compares our outputs with `nsys stats`' reports of the same report, column by column.
    fn assert_same_as_nsys_stats(p: &RecordBatch, pp: &RecordBatch, report: &str, tmp: &Path) {
        let Some((proj_ref, pp_ref)) = nsys_stats(report, tmp) else {
            return;
        };
        match proj_ref {
            Some(r) => assert_same_rows(
                p,
                &r,
                &[
                    ("Projected Start", "Projected Start (ns)"),
                    ("Projected Duration", "Projected Duration (ns)"),
                    ("Orig Start", "Orig Start (ns)"),
                    ("Orig Duration", "Orig Duration (ns)"),
                    ("PID", "PID"),
                    ("TID", "TID"),
                    ("NumGPUOps", "NumGPUOps"),
                    ("Lvl", "Lvl"),
                    ("NumChild", "NumChild"),
                    ("ParentId", "ParentId"),
                ],
                &[
                    ("Name", "Name"),
                    ("Style", "Style"),
                    ("RangeStack", "RangeStack"),
                ],
                &format!("{report}: nvtx_gpu_proj_trace"),
            ),
            None => assert_eq!(p.num_rows(), 0, "{report}"),
        }
        let pp_ref = pp_ref.expect("nsys wrote no push/pop trace");
        let columns: Vec<(&str, &str)> = [
            "Start (ns)",
            "End (ns)",
            "Duration (ns)",
            "DurChild (ns)",
            "DurNonChild (ns)",
            "PID",
            "TID",
            "Lvl",
            "NumChild",
            "ParentId",
        ]
        .iter()
        .map(|c| (*c, *c))
        .collect();
        assert_same_rows(
            pp,
            &pp_ref,
            &columns,
            &[("Name", "Name"), ("RangeStack", "RangeStack")],
            &format!("{report}: nvtx_pushpop_trace"),
        );
    }

    /// Structural checks that hold for any projection.
    fn check_invariants(p: &RecordBatch, pp: &RecordBatch, t: &ExportTables, what: &str) {
        let n = p.num_rows();
        let ids = col_i64(p, "RangeId");
        let parent = col_i64(p, "ParentId");
        let lvl = col_i64(p, "Lvl");
        let nchild = col_i64(p, "NumChild");
        let ops = col_i64(p, "NumGPUOps");
        let dur = col_i64(p, "Projected Duration");
        let stacks = col_str(p, "RangeStack");
        let nvtx_rows = t.nvtx_events.num_rows() as i64;
        let mut children: HashMap<i64, i64> = HashMap::new();
        for i in 0..n {
            let id = ids[i].unwrap();
            assert!(id >= 1 && id <= nvtx_rows, "{what}: RangeId {id}");
            assert!(
                i == 0 || ids[i - 1] < ids[i],
                "{what}: not in RangeId order"
            );
            assert!(
                ops[i].unwrap() >= 1 && dur[i].unwrap() >= 0,
                "{what}: RangeId {id}"
            );
            let stack = stacks[i].as_deref().unwrap();
            let chain: Vec<i64> = stack[1..].split(':').map(|s| s.parse().unwrap()).collect();
            assert_eq!(chain.last(), Some(&id), "{what}: stack {stack}");
            assert_eq!(
                chain.len() as i64 - 1,
                lvl[i].unwrap(),
                "{what}: stack {stack}"
            );
            assert_eq!(
                parent[i],
                (chain.len() > 1).then(|| chain[chain.len() - 2]),
                "{what}: stack {stack}"
            );
            if let Some(p) = parent[i] {
                *children.entry(p).or_default() += 1;
            }
        }
        for i in 0..n {
            assert_eq!(
                nchild[i].unwrap(),
                children.get(&ids[i].unwrap()).copied().unwrap_or(0),
                "{what}: NumChild of {:?}",
                ids[i]
            );
        }
        // A projected parent holds at least the ops of each projected child, and its GPU
        // span covers the child's.
        let row_of: HashMap<i64, usize> = (0..n).map(|i| (ids[i].unwrap(), i)).collect();
        let start = col_i64(p, "Projected Start");
        for i in 0..n {
            if let Some(&j) = parent[i].and_then(|p| row_of.get(&p)) {
                assert!(ops[j] >= ops[i], "{what}: ops of {:?}", ids[i]);
                assert!(start[j] <= start[i], "{what}: start of {:?}", ids[i]);
                assert!(
                    start[j].unwrap() + dur[j].unwrap() >= start[i].unwrap() + dur[i].unwrap(),
                    "{what}: end of {:?}",
                    ids[i]
                );
            }
        }
        // Every push/pop range in the projection is in the push/pop trace with the same
        // parent (no start/end ranges in these captures).
        let pp_ids = col_i64(pp, "RangeId");
        let pp_parent = col_i64(pp, "ParentId");
        let pp_row: HashMap<i64, usize> = (0..pp.num_rows())
            .map(|i| (pp_ids[i].unwrap(), i))
            .collect();
        for i in 0..n {
            let k = pp_row[&ids[i].unwrap()];
            assert_eq!(pp_parent[k], parent[i], "{what}: parent of {:?}", ids[i]);
        }
        let ppd = col_i64(pp, "Duration (ns)");
        let ppc = col_i64(pp, "DurChild (ns)");
        let ppn = col_i64(pp, "DurNonChild (ns)");
        for i in 0..pp.num_rows() {
            assert_eq!(ppd[i].unwrap(), ppc[i].unwrap() + ppn[i].unwrap());
            assert!(
                ppn[i].unwrap() >= 0,
                "{what}: push/pop children overflow {:?}",
                pp_ids[i]
            );
        }
    }

    #[test]
    fn reproduces_nsys_projection_and_pushpop_on_fsdp2_1proc() {
        let tmp = tempfile::tempdir().unwrap();
        let Some(t) = exported("h200/fsdp2_1proc/rep.nsys-rep", tmp.path()) else {
            return;
        };
        let fixtures = crate::testutil::fixtures_dir().unwrap();
        let reference = fixtures.join("reference/h200-fsdp2_1proc");

        let p = project(&t).unwrap();
        assert_eq!(p.num_rows(), 1354);
        let trace = read_reference(&reference.join("trace.parquet"));
        assert_same_rows(
            &p,
            &trace,
            PROJECTION_INTS,
            PROJECTION_TEXT,
            "trace.parquet",
        );
        assert!(strs(&p, "Style").iter().all(|s| s == "PushPop"));

        let pp = pushpop(&t).unwrap();
        assert_eq!(pp.num_rows(), 2178);
        let pp_ref = read_reference(&reference.join("report_nvtx_pushpop_trace.parquet"));
        assert_same_rows(
            &pp,
            &pp_ref,
            &[
                ("Start (ns)", "Start (ns)"),
                ("End (ns)", "End (ns)"),
                ("Duration (ns)", "Duration (ns)"),
                ("DurChild (ns)", "DurChild (ns)"),
                ("DurNonChild (ns)", "DurNonChild (ns)"),
                ("TID", "TID"),
                ("NumChild", "NumChild"),
                ("ParentId", "ParentId"),
            ],
            &[("Name", "Name"), ("RangeStack", "RangeStack")],
            "report_nvtx_pushpop_trace.parquet",
        );
        // Our push/pop output loads through the archive reader, with the same levels.
        let mut bytes = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, pp.schema(), None).unwrap();
        w.write(&pp).unwrap();
        w.close().unwrap();
        let normalised = crate::formats::pushpop::read_parquet(&bytes).unwrap();
        assert_eq!(normalised.num_rows(), 2178);
        assert_eq!(
            col_i64(&normalised, "Lvl"),
            col_i64(&pp, "Lvl"),
            "levels from the archive reader"
        );
        check_invariants(&p, &pp, &t, "fsdp2_1proc");
    }

    #[test]
    fn projects_fsdp2_2proc_ranks() {
        for rank in ["rank0", "rank1"] {
            let tmp = tempfile::tempdir().unwrap();
            let report = format!("h200/fsdp2_2proc/{rank}.nsys-rep");
            let Some(t) = exported(&report, tmp.path()) else {
                return;
            };
            let p = project(&t).unwrap();
            let pp = pushpop(&t).unwrap();
            // nsys 2023.4's own `nvtx_gpu_proj_trace` has 677 ranges (+ its row of ops outside
            // every range); its `nvtx_pushpop_trace` 1100.
            assert_eq!(p.num_rows(), 677, "{rank}");
            assert_eq!(pp.num_rows(), 1100, "{rank}");
            check_invariants(&p, &pp, &t, rank);
            let names = strs(&p, "Name");
            assert!(
                names.iter().any(|n| n.starts_with("TSL:XlaModule:#")),
                "{rank}"
            );
            assert!(names.iter().any(|n| n.starts_with("NCCL:")), "{rank}");
            assert_same_as_nsys_stats(&p, &pp, &report, tmp.path());
        }
    }

    #[test]
    fn projects_long_1proc() {
        let tmp = tempfile::tempdir().unwrap();
        let Some(t) = exported("h200/long_1proc/rep.nsys-rep", tmp.path()) else {
            return;
        };
        // Best of three, after a first run that warms the caches.
        let p = project(&t).unwrap();
        let mut projected = std::time::Duration::MAX;
        for _ in 0..3 {
            let started = std::time::Instant::now();
            let again = project(&t).unwrap();
            projected = projected.min(started.elapsed());
            assert_eq!(again, p, "project is deterministic");
        }
        let started = std::time::Instant::now();
        let pp = pushpop(&t).unwrap();
        eprintln!(
            "long_1proc: project {:.1} ms for {} NVTX events, {} kernels ({} rows); pushpop {:.1} ms",
            projected.as_secs_f64() * 1e3,
            t.nvtx_events.num_rows(),
            t.kernel.as_ref().map_or(0, |k| k.num_rows()),
            p.num_rows(),
            started.elapsed().as_secs_f64() * 1e3
        );
        // nsys 2023.4's own projection of this report has 44,702 ranges (design.md "Projection").
        assert_eq!(p.num_rows(), 44_702);
        assert_eq!(pp.num_rows(), 71_846);
        check_invariants(&p, &pp, &t, "long_1proc");
        // Row-by-row comparison with `nsys stats` (about 12 s more): on request.
        if std::env::var_os("NSYS_JAX_PIPE_SLOW_TESTS").is_some() {
            assert_same_as_nsys_stats(&p, &pp, "h200/long_1proc/rep.nsys-rep", tmp.path());
        }
        // Top-level ranges (one per XlaModule execution and launch thread) never share a
        // launch, so their op counts add up to at most the capture's GPU ops; nearly every
        // kernel is launched inside one.
        let ops_total: i64 = col_i64(&p, "NumGPUOps")
            .iter()
            .zip(col_i64(&p, "Lvl"))
            .filter(|(_, l)| *l == Some(0))
            .map(|(o, _)| o.unwrap())
            .sum();
        let kernels = t.kernel.as_ref().unwrap().num_rows() as i64;
        let memcpys = t.memcpy.as_ref().map_or(0, |m| m.num_rows()) as i64;
        assert!(
            ops_total <= kernels + memcpys,
            "{ops_total} > {kernels} + {memcpys}"
        );
        assert!(
            ops_total > kernels * 9 / 10,
            "{ops_total} vs {kernels} kernels"
        );
    }

    #[test]
    fn nvtx_only_capture_has_pushpop_but_no_projection() {
        let tmp = tempfile::tempdir().unwrap();
        let Some(t) = exported("h200/compile_1proc/rep.nsys-rep", tmp.path()) else {
            return;
        };
        assert!(t.kernel.is_none() && t.runtime.is_none());
        assert_eq!(project(&t).unwrap().num_rows(), 0);
        assert!(t.target_info_nvtx_cuda_device.is_none());
        let pp = pushpop(&t).unwrap();
        // As nsys 2023.4's `nvtx_pushpop_trace`.
        assert_eq!(pp.num_rows(), 17_444);
        let names = strs(&pp, "Name");
        assert!(names.iter().any(|n| n.starts_with("TSL:XlaCompile:#")));
        let p = project(&t).unwrap();
        assert_same_as_nsys_stats(&p, &pp, "h200/compile_1proc/rep.nsys-rep", tmp.path());
    }
}
