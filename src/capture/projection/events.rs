//! `NVTX_EVENTS` as the projection and the user ranges read it: its columns, the CPU ranges
//! of each thread, the capture's end and the names of ranges (domain and text).

use std::cmp::Reverse;
use std::sync::Arc;

use anyhow::{Result, bail};
use arrow::array::{
    Array, ArrayRef, Int64Array, RecordBatch, StringArray, StringDictionaryBuilder,
};
use arrow::datatypes::Int32Type;

use super::ranges::{PROCESS_MASK, Range, Strings};
use crate::formats::nsys_export::{
    ExportTables, KERNEL, MEMCPY, MEMSET, NVTX_EVENTS, RUNTIME, int64_column, text_column,
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

pub(super) fn pid(global_tid: i64) -> i64 {
    (global_tid >> 24) & 0xFF_FFFF
}

pub(super) fn tid(global_tid: i64) -> i64 {
    global_tid & 0xFF_FFFF
}

/// The columns of `NVTX_EVENTS` in use.
pub(super) struct Nvtx<'a> {
    tables: &'a ExportTables,
    pub(super) start: Int64Array,
    end: Int64Array,
    pub(super) event_type: Int64Array,
    pub(super) global_tid: Int64Array,
    end_global_tid: Int64Array,
    /// The latest timestamp of the table.
    last_time: i64,
}

impl<'a> Nvtx<'a> {
    pub(super) fn new(tables: &'a ExportTables) -> Result<Self> {
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
    pub(super) fn ranges(&self, capture_end: i64, keep: impl Fn(i64) -> bool) -> Vec<Range> {
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

    pub(super) fn namer(&self) -> Result<Namer> {
        Namer::new(self)
    }
}

fn max_of(a: &Int64Array) -> i64 {
    arrow::compute::max(a).unwrap_or(i64::MIN)
}

/// A column of `NVTX_EVENTS` that may be absent (then all null).
pub(super) fn optional_int64(b: &RecordBatch, column: &str) -> Result<Int64Array> {
    match b.column_by_name(column) {
        Some(_) => int64_column(b, NVTX_EVENTS, column),
        None => Ok(Int64Array::new_null(b.num_rows())),
    }
}

/// The last timestamp of the capture, where ranges never closed end: the latest time among
/// NVTX events, API calls and GPU ops.
pub(super) fn capture_end(t: &ExportTables, nvtx: &Nvtx) -> Result<i64> {
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
pub(super) struct Namer {
    text: StringArray,
    text_id: Int64Array,
    domain_id: Int64Array,
    global_tid: Int64Array,
    strings: Strings,
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
        let mut namer = Self {
            text,
            text_id,
            domain_id,
            global_tid: nvtx.global_tid.clone(),
            strings: Strings::new(nvtx.tables)?,
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
    pub(super) fn text(&self, row: usize) -> &str {
        if self.text.is_valid(row) {
            return self.text.value(row);
        }
        if self.text_id.is_valid(row)
            && let Some(text) = self.strings.get(self.text_id.value(row))
        {
            return text;
        }
        ""
    }

    /// The name of the domain of the event in `row` (None for the default domain).
    pub(super) fn domain(&self, row: usize) -> Option<&str> {
        if !(self.domain_id.is_valid(row) && self.global_tid.is_valid(row)) {
            return None;
        }
        let key = (
            self.global_tid.value(row) & PROCESS_MASK,
            self.domain_id.value(row),
        );
        let k = self.domains.binary_search_by_key(&key, |(k, _)| *k).ok()?;
        Some(&self.domains[k].1)
    }

    /// The domain (None for the default domain) and the text of the event in `row`.
    pub(super) fn domain_and_text(&self, row: usize) -> (Option<&str>, &str) {
        (self.domain(row), self.text(row))
    }

    /// Appends the name of the range in `row` to `out`.
    pub(super) fn append_name(&self, out: &mut NameColumn, row: usize) -> Result<()> {
        out.scratch.clear();
        if let Some(d) = self.domain(row) {
            out.scratch.push_str(d);
            out.scratch.push(':');
        }
        out.scratch.push_str(self.text(row));
        out.builder.append(&out.scratch)?;
        Ok(())
    }
}

/// A column of range names, built as a dictionary: a row per range (one per thunk execution),
/// a few hundred distinct names. Written to parquet as text (see `formats::write_parquet`).
pub(super) struct NameColumn {
    builder: StringDictionaryBuilder<Int32Type>,
    scratch: String,
}

impl NameColumn {
    pub(super) fn with_capacity(rows: usize) -> Self {
        NameColumn {
            builder: StringDictionaryBuilder::with_capacity(rows, 1024, 64 * 1024),
            scratch: String::new(),
        }
    }

    pub(super) fn finish(mut self) -> ArrayRef {
        Arc::new(self.builder.finish())
    }
}

/// `(process, correlation id, start, end)` of every GPU operation (kernels, CUDA-graph
/// kernels, memcpys, memsets) with all four known, in table order.
pub(super) fn gpu_ops(t: &ExportTables) -> Result<Vec<(i64, i64, i64, i64)>> {
    let mut ops = Vec::new();
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
    Ok(ops)
}
