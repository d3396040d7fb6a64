//! The operations of CUDA graph launches (docs/design.md, "Command buffers"): every kernel,
//! memcpy and memset with a `graphNodeId`, joined to the API call that launched it (by process
//! and correlation id) and to the innermost NVTX range of the call's thread that encloses the
//! call — for XLA, the command-buffer thunk that launched the graph.
//!
//! The innermost enclosing range of each call is found by one sweep per thread with the tree
//! that finds range parents ([`super::ShortestByEnd`]): ranges by start are inserted; a call,
//! once every range starting no later than it is in, asks for the shortest one ending at or
//! after its own end.

use std::sync::Arc;

use anyhow::Result;
use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringBuilder};

use super::ranges::{PROCESS_MASK, Range, Strings, range_id};
use super::tree::{ShortestByEnd, thread_groups};
use crate::formats::graph_ops::{self as g, MEMCPY as MEMCPY_NAME, MEMSET as MEMSET_NAME};
use crate::formats::nsys_export::{ExportTables, KERNEL, MEMCPY, MEMSET, RUNTIME, int64_column};

/// What a graph operation is called: a kernel's `shortName` id, or a copy or a set.
#[derive(Clone, Copy)]
enum OpName {
    Kernel(i64),
    Memcpy,
    Memset,
}

/// One graph operation.
struct Op {
    /// (process, correlation id) of its launch.
    key: (i64, i64),
    node: i64,
    start: i64,
    end: i64,
    device: i64,
    name: OpName,
}

/// The graph operations of a report, in the [`g::SCHEMA`] layout sorted by (range, start);
/// None when it has none. Operations whose launch is in no range are left out.
pub(super) fn graph_ops(t: &ExportTables, ranges: &[Range]) -> Result<Option<RecordBatch>> {
    let mut ops = collect(t)?;
    if ops.is_empty() {
        return Ok(None);
    }
    ops.sort_unstable_by_key(|o| o.key);
    let mut keys: Vec<(i64, i64)> = ops.iter().map(|o| o.key).collect();
    keys.dedup();

    // The launching call of every key: (thread, start, end, key index).
    let mut calls: Vec<(i64, i64, i64, u32)> = Vec::new();
    if let Some(b) = &t.runtime {
        let start = int64_column(b, RUNTIME, "start")?;
        let end = int64_column(b, RUNTIME, "end")?;
        let corr = int64_column(b, RUNTIME, "correlationId")?;
        let gtid = int64_column(b, RUNTIME, "globalTid")?;
        let mut seen = vec![false; keys.len()];
        for i in 0..b.num_rows() {
            if !(corr.is_valid(i) && gtid.is_valid(i) && start.is_valid(i) && end.is_valid(i)) {
                continue;
            }
            let thread = gtid.value(i);
            if let Ok(k) = keys.binary_search(&(thread & PROCESS_MASK, corr.value(i)))
                && !seen[k]
            {
                // The runtime call and the driver call under it share the id; the innermost
                // NVTX range around either is the same.
                seen[k] = true;
                calls.push((thread, start.value(i), end.value(i), k as u32));
            }
        }
    }
    calls.sort_unstable();
    let range_of_key = innermost_ranges(ranges, &calls, keys.len());

    let mut rows: Vec<(i64, &Op)> = Vec::with_capacity(ops.len());
    let mut k = 0;
    for op in &ops {
        while keys[k] != op.key {
            k += 1;
        }
        if let Some(r) = range_of_key[k] {
            rows.push((range_id(&ranges[r as usize]), op));
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    rows.sort_unstable_by_key(|(r, op)| (*r, op.start, op.end, op.node));

    let strings = Strings::new(t)?;
    let mut name = StringBuilder::with_capacity(rows.len(), rows.len() * 24);
    for (_, op) in &rows {
        match op.name {
            OpName::Kernel(id) => name.append_value(strings.get(id).unwrap_or("")),
            OpName::Memcpy => name.append_value(MEMCPY_NAME),
            OpName::Memset => name.append_value(MEMSET_NAME),
        }
    }
    let col = |f: &dyn Fn(&(i64, &Op)) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
    };
    let columns = vec![
        col(&|r| r.0),
        col(&|r| r.1.key.1),
        col(&|r| r.1.node),
        col(&|r| r.1.start),
        col(&|r| r.1.end),
        col(&|r| r.1.device),
        Arc::new(name.finish()) as ArrayRef,
    ];
    Ok(Some(RecordBatch::try_new(g::SCHEMA.clone(), columns)?))
}

/// The kernels, memcpys and memsets with a graph node id.
fn collect(t: &ExportTables) -> Result<Vec<Op>> {
    let mut ops = Vec::new();
    for (table, batch) in [
        (KERNEL, &t.kernel),
        (MEMCPY, &t.memcpy),
        (MEMSET, &t.memset),
    ] {
        let Some(b) = batch else { continue };
        if b.column_by_name("graphNodeId").is_none() {
            continue;
        }
        let node = int64_column(b, table, "graphNodeId")?;
        let start = int64_column(b, table, "start")?;
        let end = int64_column(b, table, "end")?;
        let corr = int64_column(b, table, "correlationId")?;
        let gpid = int64_column(b, table, "globalPid")?;
        let device = int64_column(b, table, "deviceId")?;
        let short = match table {
            KERNEL => Some(int64_column(b, table, "shortName")?),
            _ => None,
        };
        for i in 0..b.num_rows() {
            let valid = [&node, &start, &end, &corr, &gpid]
                .iter()
                .all(|c| c.is_valid(i));
            if !valid || end.value(i) < start.value(i) {
                continue;
            }
            let name = match (&short, table) {
                (Some(s), _) if s.is_valid(i) => OpName::Kernel(s.value(i)),
                (Some(_), _) => OpName::Kernel(i64::MIN),
                (None, MEMCPY) => OpName::Memcpy,
                (None, _) => OpName::Memset,
            };
            ops.push(Op {
                key: (gpid.value(i) & PROCESS_MASK, corr.value(i)),
                node: node.value(i),
                start: start.value(i),
                end: end.value(i),
                device: if device.is_valid(i) {
                    device.value(i)
                } else {
                    -1
                },
                name,
            });
        }
    }
    Ok(ops)
}

/// For each key, the index (into `ranges`) of the innermost range of its call's thread that
/// encloses the call. `calls` sorted by (thread, start).
fn innermost_ranges(
    ranges: &[Range],
    calls: &[(i64, i64, i64, u32)],
    keys: usize,
) -> Vec<Option<u32>> {
    let mut out = vec![None; keys];
    let mut shortest = ShortestByEnd::default();
    let mut c = 0;
    for (offset, group) in thread_groups(ranges) {
        let thread = group[0].thread;
        while c < calls.len() && calls[c].0 < thread {
            c += 1;
        }
        let first = c;
        while c < calls.len() && calls[c].0 == thread {
            c += 1;
        }
        if first == c {
            continue;
        }
        shortest.reset(group);
        let mut next = 0;
        for &(_, start, end, key) in &calls[first..c] {
            while next < group.len() && group[next].start <= start {
                shortest.insert(&group[next], offset + next);
                next += 1;
            }
            out[key as usize] = shortest.query(end);
        }
    }
    out
}
