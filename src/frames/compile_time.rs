//! The time of every compile range, attributed: its own (non-child) and its children's time,
//! with parallel compilation shared out. A range of the compiling ("main") thread with
//! worker-thread children is a *parallel region launcher*: the span from the first worker
//! start to the last worker end that no main-thread child covers is shared among its worker
//! ranges in proportion to their own non-child time, and the launcher's child time is its
//! main-thread children plus that span; so a compilation's parts add up to its wall time
//! (docs/design.md, "Formulas").

use anyhow::Result;
use arrow::array::{Array, RecordBatch, StringArray};

use crate::formats::pushpop::{self, Columns};
use crate::frames::compile::{preorder, program_columns};

/// A compile frame with every row's attributed (non-child, child) time, ns.
pub struct Attributed<'a> {
    pub cols: Columns<'a>,
    pub program_id: &'a [i64],
    pub program_name: &'a StringArray,
    /// Rows in pre-order and subtree sizes: a subtree is a contiguous run of `order`.
    pub order: Vec<usize>,
    pub size: Vec<usize>,
    pub non_child: Vec<f64>,
    pub child: Vec<f64>,
}

impl<'a> Attributed<'a> {
    pub fn new(frame: &'a RecordBatch) -> Result<Self> {
        let cols = Columns::of(frame)?;
        let (program_id, program_name) = program_columns(frame)?;
        let n = frame.num_rows();
        let parent = pushpop::parent_rows(cols.range_id, cols.parent_id)?;
        let (order, size) = preorder(&parent)?;

        // Main thread of each row: the thread of its compilation (the root).
        let mut root_tid = vec![0i64; n];
        // Worker rows: nearest main-thread ancestor, the launcher of their region.
        let mut launcher: Vec<Option<usize>> = vec![None; n];
        for &i in &order {
            match parent[i] {
                None => root_tid[i] = cols.tid[i],
                Some(p) => {
                    root_tid[i] = root_tid[p];
                    if cols.tid[i] != root_tid[i] {
                        launcher[i] = if cols.tid[p] == root_tid[p] {
                            Some(p)
                        } else {
                            launcher[p]
                        };
                    }
                }
            }
        }
        let is_main = |i: usize| cols.tid[i] == root_tid[i];

        // Per launcher: worker span and worker non-child total.
        let mut span: Vec<Option<(i64, i64)>> = vec![None; n];
        let mut worker_time = vec![0f64; n];
        for (i, l) in launcher.iter().enumerate() {
            if let Some(l) = *l {
                let (s, e) = (cols.start[i], cols.end[i]);
                span[l] = Some(match span[l] {
                    None => (s, e),
                    Some((ps, pe)) => (ps.min(s), pe.max(e)),
                });
                worker_time[l] += cols.dur_non_child[i] as f64;
            }
        }
        // Launchers' main-thread children: total duration and overlap with the worker span.
        let clipped = |l: usize| {
            span[l].map(|(s, e)| {
                (
                    s.max(cols.start[l]),
                    e.min(cols.end[l]).max(s.max(cols.start[l])),
                )
            })
        };
        let mut main_child = vec![0f64; n];
        let mut covered = vec![0f64; n];
        for (i, p) in parent.iter().enumerate() {
            if !is_main(i) {
                continue;
            }
            if let Some(p) = *p
                && let Some((s, e)) = clipped(p)
            {
                main_child[p] += cols.duration[i] as f64;
                let overlap = cols.end[i].min(e).saturating_sub(cols.start[i].max(s));
                covered[p] += overlap.max(0) as f64;
            }
        }

        let mut non_child = vec![0f64; n];
        let mut child = vec![0f64; n];
        let mut scale = vec![0f64; n];
        for i in 0..n {
            if !is_main(i) {
                continue;
            }
            match clipped(i) {
                Some((s, e)) if worker_time[i] > 0.0 => {
                    let exclusive = (e.saturating_sub(s) as f64 - covered[i]).max(0.0);
                    scale[i] = exclusive / worker_time[i];
                    child[i] = main_child[i] + exclusive;
                    non_child[i] = cols.duration[i] as f64 - child[i];
                }
                Some(_) => {
                    child[i] = main_child[i];
                    non_child[i] = cols.duration[i] as f64 - child[i];
                }
                None => {
                    non_child[i] = cols.dur_non_child[i] as f64;
                    child[i] = cols.dur_child[i] as f64;
                }
            }
        }
        for i in 0..n {
            if let Some(l) = launcher[i] {
                non_child[i] = scale[l] * cols.dur_non_child[i] as f64;
                child[i] = scale[l] * cols.dur_child[i] as f64;
            }
        }
        Ok(Self {
            cols,
            program_id,
            program_name,
            order,
            size,
            non_child,
            child,
        })
    }

    pub fn program_name(&self, i: usize) -> Option<&'a str> {
        self.program_name
            .is_valid(i)
            .then(|| self.program_name.value(i))
    }
}
