//! The compile frame of one profiled process (docs/design.md, "NVTX names", "Frames").
//!
//! Input: a normalized push/pop trace ([`crate::formats::pushpop`]). Output: the ranges that
//! belong to XLA compilations, with the same columns plus `ProgramId`/`ProgramName`, `Name`
//! without its `TSL:` domain prefix, and the tree repaired:
//! 1. worker-thread ranges of parallel compilation are grafted under the deepest range of the
//!    compiling thread that encloses them in time (the `XlaCompile` range itself when none of
//!    its descendants does);
//! 2. only `XlaCompile` ranges and their descendants are kept;
//! 3. ranges of other domains (`NCCL:`, `cuBLAS:`, ...) are dropped, their time folded into the
//!    parent and their children handed to it;
//! 4. autotuner detail is removed: descendants of `XlaAutotunerMeasurement` and
//!    `XlaAutotunerCompilation` (and of an `XlaPass:#name=autotuner#` pass, renamed to
//!    `XlaAutotunerCompilation`) are dropped and `XlaAutotunerMeasurement:#...#` loses its
//!    suffix.
//!
//! `NumChild` counts all children (grafted ones included); `DurChild` sums the durations of the
//! children on the range's own thread only (worker children run in parallel, their time is
//! apportioned by [`crate::analyses::compilation`]), so `DurNonChild = Duration - DurChild`
//! holds on every row. Roots keep their original `ParentId`/`RangeStack`/`Lvl`.

use std::borrow::Cow;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use arrow::array::{Array, ArrayRef, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

pub use super::compile_rows::{is_xla_compile, strip_tsl};
use crate::formats::pushpop::{self, Columns};

/// Numeric program id (the `program_id=` of the XLA names), −1 when unknown.
pub const PROGRAM_ID: &str = "ProgramId";
/// Module name (`module=`), null when unknown.
pub const PROGRAM_NAME: &str = "ProgramName";

/// Schema of the compile frame: the push/pop columns plus `ProgramId` and `ProgramName`.
pub fn schema() -> SchemaRef {
    let mut fields = pushpop::fields();
    fields.push(Field::new(PROGRAM_ID, DataType::Int64, false));
    fields.push(Field::new(PROGRAM_NAME, DataType::Utf8, true));
    Arc::new(Schema::new(fields))
}

/// Whether a range belongs to XLA's own (`TSL`) domain. Captures without domain prefixes are
/// recognised by XLA's range names.
fn is_xla_domain(name: &str) -> bool {
    name.starts_with("TSL:") || name.starts_with("Xla") || name.starts_with("Thunk:")
}

/// `ProgramId`/`ProgramName` columns of a compile frame.
pub fn program_columns(batch: &RecordBatch) -> Result<(&[i64], &StringArray)> {
    let id = batch
        .column_by_name(PROGRAM_ID)
        .ok_or_else(|| anyhow!("missing column {PROGRAM_ID}"))?
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| anyhow!("column {PROGRAM_ID} has the wrong type"))?;
    if id.null_count() > 0 {
        bail!("column {PROGRAM_ID} has null values");
    }
    let name = batch
        .column_by_name(PROGRAM_NAME)
        .ok_or_else(|| anyhow!("missing column {PROGRAM_NAME}"))?
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| anyhow!("column {PROGRAM_NAME} has the wrong type"))?;
    Ok((id.values(), name))
}

/// Children of every row, in row order (compressed rows).
pub struct Children {
    offsets: Vec<usize>,
    items: Vec<usize>,
}

impl Children {
    pub fn new(parent: &[Option<usize>]) -> Self {
        let n = parent.len();
        let mut offsets = vec![0usize; n + 1];
        for p in parent.iter().flatten() {
            offsets[p + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut items = vec![0usize; offsets[n]];
        for (i, p) in parent.iter().enumerate() {
            if let Some(p) = *p {
                items[fill[p]] = i;
                fill[p] += 1;
            }
        }
        Self { offsets, items }
    }

    pub fn of(&self, row: usize) -> &[usize] {
        &self.items[self.offsets[row]..self.offsets[row + 1]]
    }
}

/// Rows in pre-order (each subtree contiguous, children in row order) with subtree sizes.
/// Fails when the parent links hold a cycle.
pub fn preorder(parent: &[Option<usize>]) -> Result<(Vec<usize>, Vec<usize>)> {
    let n = parent.len();
    let children = Children::new(parent);
    let mut order = Vec::with_capacity(n);
    let mut size = vec![1usize; n];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for root in (0..n).filter(|&i| parent[i].is_none()) {
        order.push(root);
        stack.push((root, 0));
        while let Some(top) = stack.last_mut() {
            let row = top.0;
            let kids = children.of(row);
            if top.1 < kids.len() {
                let child = kids[top.1];
                top.1 += 1;
                order.push(child);
                stack.push((child, 0));
            } else {
                stack.pop();
                if let Some(p) = parent[row] {
                    size[p] += size[row];
                }
            }
        }
    }
    if order.len() != n {
        bail!("cycle in the range tree (ParentId)");
    }
    Ok((order, size))
}

/// `module=NAME,program_id=N` of `XlaCompileBackend:#...#`.
fn parse_backend(bare: &str) -> Option<(i64, &str)> {
    let body = bare
        .strip_prefix("XlaCompileBackend:#")?
        .strip_suffix('#')?;
    let (left, id) = body.rsplit_once(",program_id=")?;
    Some((id.parse().ok()?, left.strip_prefix("module=")?))
}

/// `module=NAME[,program_id=N]` of `XlaCompile:#...#`.
fn parse_compile(bare: &str) -> Option<(Option<i64>, &str)> {
    let body = bare.strip_prefix("XlaCompile:#")?.strip_suffix('#')?;
    let body = body.strip_prefix("module=")?;
    if let Some((name, id)) = body.rsplit_once(",program_id=")
        && let Ok(id) = id.parse()
    {
        return Some((Some(id), name));
    }
    Some((None, body))
}

enum Autotuner {
    Measurement,
    Compilation,
}

fn autotuner_kind(bare: &str) -> Option<Autotuner> {
    if bare.starts_with("XlaAutotunerMeasurement") {
        Some(Autotuner::Measurement)
    } else if bare.starts_with("XlaAutotunerCompilation")
        || bare.starts_with("XlaPass:#name=autotuner,")
        || bare.starts_with("XlaPass:#name=autotuner#")
    {
        Some(Autotuner::Compilation)
    } else {
        None
    }
}

/// Worker-thread roots to graft: `(worker root row, new parent row)`.
///
/// Hosts are the compiling threads' ranges: `XlaCompile` ranges and their descendants. A
/// worker root (no parent, not itself in a compilation) goes under the deepest host on another
/// thread that strictly encloses it in time, or under an `XlaCompile` range that encloses it
/// (bounds included). One sweep per host thread with a stack of open ranges.
fn graft_targets(
    c: &Columns,
    parent: &[Option<usize>],
    in_compile: &[bool],
    is_compile: &[bool],
    depth: &[u32],
) -> Vec<(usize, usize)> {
    let n = parent.len();
    // XlaCompile bounds widened by 1 ns turn "encloses, bounds included" into a strict test.
    let eff_start = |i: usize| {
        if is_compile[i] {
            c.start[i].saturating_sub(1)
        } else {
            c.start[i]
        }
    };
    let eff_end = |i: usize| {
        if is_compile[i] {
            c.end[i].saturating_add(1)
        } else {
            c.end[i]
        }
    };
    let mut hosts: Vec<usize> = (0..n).filter(|&i| in_compile[i]).collect();
    hosts.sort_unstable_by_key(|&i| (c.tid[i], eff_start(i), depth[i], i));
    let mut workers: Vec<usize> = (0..n)
        .filter(|&i| parent[i].is_none() && !in_compile[i])
        .collect();
    workers.sort_unstable_by_key(|&i| (c.start[i], i));
    let mut best: Vec<Option<usize>> = vec![None; workers.len()];

    for group in hosts.chunk_by(|a, b| c.tid[*a] == c.tid[*b]) {
        let thread = c.tid[group[0]];
        let mut stack: Vec<usize> = Vec::new();
        let mut next = 0;
        for (k, &w) in workers.iter().enumerate() {
            if c.tid[w] == thread {
                continue;
            }
            let (ws, we) = (c.start[w], c.end[w]);
            while next < group.len() && eff_start(group[next]) < ws {
                let h = group[next];
                while stack.last().is_some_and(|&t| eff_end(t) <= eff_start(h)) {
                    stack.pop();
                }
                stack.push(h);
                next += 1;
            }
            while stack.last().is_some_and(|&t| eff_end(t) <= ws) {
                stack.pop();
            }
            if let Some(&h) = stack.iter().rev().find(|&&t| eff_end(t) > we) {
                let better = match best[k] {
                    None => true,
                    Some(b) => (c.start[h], depth[h]) > (c.start[b], depth[b]),
                };
                if better {
                    best[k] = Some(h);
                }
            }
        }
    }
    workers
        .into_iter()
        .zip(best)
        .filter_map(|(w, h)| h.map(|h| (w, h)))
        .collect()
}

/// Builds the compile frame of one process from its normalized push/pop trace (from the
/// rows that can be part of it, [`super::compile_rows`]).
pub fn build_compile_frame(pushpop: &RecordBatch) -> Result<RecordBatch> {
    match super::compile_rows::subset(pushpop)? {
        Some(rows) => build_from(&rows),
        None => build_from(pushpop),
    }
}

fn build_from(pushpop: &RecordBatch) -> Result<RecordBatch> {
    let c = Columns::of(pushpop)?;
    let n = pushpop.num_rows();
    let names: Vec<&str> = (0..n).map(|i| c.name.value(i)).collect();
    let bare: Vec<&str> = names.iter().map(|s| strip_tsl(s)).collect();
    let is_compile: Vec<bool> = names.iter().map(|s| is_xla_compile(s)).collect();

    // The tree as recorded.
    let parent0 = pushpop::parent_rows(c.range_id, c.parent_id)?;
    let (order0, _) = preorder(&parent0)?;
    let mut in_compile = vec![false; n];
    let mut depth = vec![0u32; n];
    for &i in &order0 {
        if let Some(p) = parent0[i] {
            in_compile[i] = is_compile[i] || in_compile[p];
            depth[i] = depth[p].saturating_add(1);
        } else {
            in_compile[i] = is_compile[i];
        }
    }

    // 1. Graft worker-thread roots.
    let mut parent = parent0.clone();
    let mut grafted = vec![false; n];
    for (w, h) in graft_targets(&c, &parent0, &in_compile, &is_compile, &depth) {
        parent[w] = Some(h);
        grafted[w] = true;
    }
    let (order, _) = preorder(&parent)?;

    // 2. Compilations and what descends from them.
    let mut kept = vec![false; n];
    for &i in &order {
        kept[i] = is_compile[i] || parent[i].is_some_and(|p| kept[p]);
    }

    // Program id and name: from XlaCompileBackend ranges (for themselves and their parent on
    // the same thread), from XlaCompile names that carry them, else inherited.
    let mut own: Vec<Option<(i64, &str)>> = vec![None; n];
    let mut weak: Vec<Option<&str>> = vec![None; n];
    for i in 0..n {
        if is_compile[i] {
            match parse_compile(bare[i]) {
                Some((Some(id), name)) => own[i] = Some((id, name)),
                Some((None, name)) => weak[i] = Some(name),
                None => {}
            }
        }
    }
    let mut backends: Vec<(i64, usize, (i64, &str))> = (0..n)
        .filter_map(|i| parse_backend(bare[i]).map(|v| (c.range_id[i], i, v)))
        .collect();
    backends.sort_unstable_by_key(|&(id, i, _)| (id, i));
    for &(_, i, value) in &backends {
        own[i] = Some(value);
    }
    for &(_, i, value) in &backends {
        if let Some(p) = parent[i]
            && !grafted[i]
        {
            own[p] = Some(value);
        }
    }
    let mut program: Vec<Option<(i64, &str)>> = vec![None; n];
    let mut program_weak: Vec<Option<&str>> = vec![None; n];
    for &i in &order {
        let p = parent[i];
        program[i] = own[i].or_else(|| p.and_then(|p| program[p]));
        program_weak[i] = weak[i].or_else(|| p.and_then(|p| program_weak[p]));
    }

    // 3. Fold other domains: each XLA range hangs under its nearest XLA ancestor.
    let mut xla_self = vec![None; n];
    for &i in &order {
        xla_self[i] = if kept[i] && is_xla_domain(names[i]) {
            Some(i)
        } else {
            parent[i].and_then(|p| xla_self[p])
        };
    }
    let mut fparent: Vec<Option<usize>> = vec![None; n];
    let mut live = vec![false; n];
    for i in 0..n {
        if xla_self[i] == Some(i) {
            live[i] = true;
            fparent[i] = parent[i].and_then(|p| xla_self[p]);
        }
    }

    // 4. Autotuner detail.
    let autotuner: Vec<Option<Autotuner>> = bare.iter().map(|b| autotuner_kind(b)).collect();
    let mut under_autotuner = vec![false; n];
    for &i in &order {
        if !live[i] {
            continue;
        }
        if let Some(p) = fparent[i] {
            under_autotuner[i] = under_autotuner[p] || autotuner[p].is_some();
        }
    }
    for i in 0..n {
        if under_autotuner[i] {
            live[i] = false;
        }
    }

    // Children counts and same-thread child time on the final tree.
    let mut num_child = vec![0i32; n];
    let mut dur_child = vec![0i64; n];
    for i in (0..n).filter(|&i| live[i]) {
        if let Some(p) = fparent[i] {
            num_child[p] = num_child[p].saturating_add(1);
            if c.tid[p] == c.tid[i] {
                dur_child[p] = dur_child[p].saturating_add(c.duration[i]);
            }
        }
    }

    // Stacks and levels on the final tree; roots keep theirs.
    let mut stack: Vec<String> = vec![String::new(); n];
    let mut lvl = vec![0i32; n];
    for &i in &order {
        if !live[i] {
            continue;
        }
        match fparent[i] {
            Some(p) => {
                stack[i] = format!("{}:{}", stack[p], c.range_id[i]);
                lvl[i] = lvl[p].saturating_add(1);
            }
            None => {
                stack[i] = c.range_stack.value(i).to_string();
                lvl[i] = c.lvl[i];
            }
        }
    }

    let rows: Vec<usize> = (0..n).filter(|&i| live[i]).collect();
    let name: StringArray = rows
        .iter()
        .map(|&i| {
            Some(match autotuner[i] {
                Some(Autotuner::Measurement) => Cow::Borrowed("XlaAutotunerMeasurement"),
                Some(Autotuner::Compilation) => Cow::Borrowed("XlaAutotunerCompilation"),
                None => Cow::Borrowed(bare[i]),
            })
        })
        .collect();
    let i64s = |f: &dyn Fn(usize) -> i64| -> Int64Array { rows.iter().map(|&i| f(i)).collect() };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(i64s(&|i| c.start[i])),
        Arc::new(i64s(&|i| c.end[i])),
        Arc::new(i64s(&|i| c.duration[i])),
        Arc::new(i64s(&|i| dur_child[i])),
        Arc::new(i64s(&|i| c.duration[i].saturating_sub(dur_child[i]))),
        Arc::new(name),
        Arc::new(
            rows.iter()
                .map(|&i| c.pid.is_valid(i).then(|| c.pid.value(i)))
                .collect::<Int64Array>(),
        ),
        Arc::new(i64s(&|i| c.tid[i])),
        Arc::new(rows.iter().map(|&i| lvl[i]).collect::<Int32Array>()),
        Arc::new(rows.iter().map(|&i| num_child[i]).collect::<Int32Array>()),
        Arc::new(i64s(&|i| c.range_id[i])),
        Arc::new(
            rows.iter()
                .map(|&i| match fparent[i] {
                    Some(p) => Some(c.range_id[p]),
                    None => c.parent_id.is_valid(i).then(|| c.parent_id.value(i)),
                })
                .collect::<Int64Array>(),
        ),
        Arc::new(
            rows.iter()
                .map(|&i| Some(stack[i].as_str()))
                .collect::<StringArray>(),
        ),
        Arc::new(i64s(&|i| program[i].map_or(-1, |(id, _)| id))),
        Arc::new(
            rows.iter()
                .map(|&i| program[i].map(|(_, name)| name).or(program_weak[i]))
                .collect::<StringArray>(),
        ),
    ];
    RecordBatch::try_new(schema(), columns)
        .map_err(|e| anyhow!("cannot assemble compile frame: {e}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One synthetic range: (id, parent, tid, start, end, name).
    pub type Range<'a> = (i64, Option<i64>, i64, i64, i64, &'a str);

    /// A normalized push/pop batch from ranges; derived columns computed by the reader's rules.
    pub fn pushpop_batch(ranges: &[Range]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("Start", DataType::Int64, false),
            Field::new("End", DataType::Int64, false),
            Field::new("Name", DataType::Utf8, false),
            Field::new("TID", DataType::Int64, false),
            Field::new("RangeId", DataType::Int64, false),
            Field::new("ParentId", DataType::Int64, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(ranges.iter().map(|r| r.3).collect::<Int64Array>()),
            Arc::new(ranges.iter().map(|r| r.4).collect::<Int64Array>()),
            Arc::new(ranges.iter().map(|r| Some(r.5)).collect::<StringArray>()),
            Arc::new(ranges.iter().map(|r| r.2).collect::<Int64Array>()),
            Arc::new(ranges.iter().map(|r| r.0).collect::<Int64Array>()),
            Arc::new(ranges.iter().map(|r| r.1).collect::<Int64Array>()),
        ];
        let raw = RecordBatch::try_new(schema, columns).unwrap();
        pushpop::normalize(&raw).unwrap()
    }

    /// A small process: main thread 1 compiles `jit_f` (program 7); workers 2 and 3 compile in
    /// parallel under an XlaEmitLlvmIr range; NCCL and cuBLAS ranges inside; an autotuner.
    pub fn synthetic() -> RecordBatch {
        pushpop_batch(&[
            (1, None, 1, 0, 5, "TSL:XlaModule:#hlo_module=other#"),
            (2, None, 1, 10, 1000, "TSL:XlaCompile:#module=jit_f#"),
            (
                3,
                Some(2),
                1,
                20,
                200,
                "TSL:XlaPassPipeline:#name=opt,module=jit_f,program_id=7#",
            ),
            (
                4,
                Some(3),
                1,
                30,
                80,
                "TSL:XlaPass:#name=a,module=jit_f,program_id=7#",
            ),
            (5, Some(3), 1, 90, 150, "NCCL:ncclCommInitRankConfig"),
            (
                6,
                Some(5),
                1,
                100,
                120,
                "TSL:XlaPass:#name=b,module=jit_f,program_id=7#",
            ),
            (
                7,
                Some(2),
                1,
                210,
                990,
                "TSL:XlaCompileBackend:#module=jit_f,program_id=7#",
            ),
            (
                8,
                Some(7),
                1,
                220,
                300,
                "TSL:XlaAutotunerMeasurement:#hlo_op=dot.1#",
            ),
            (9, Some(8), 1, 230, 290, "TSL:XlaModule:#hlo_module=dot#"),
            (10, Some(9), 1, 240, 280, "TSL:Thunk:#hlo_op=dot.1#"),
            (
                11,
                Some(7),
                1,
                310,
                400,
                "TSL:XlaPass:#name=autotuner,module=jit_f,program_id=7#",
            ),
            (
                12,
                Some(11),
                1,
                320,
                390,
                "TSL:XlaCompileBackend:#module=fusion,program_id=99#",
            ),
            (
                13,
                Some(7),
                1,
                410,
                900,
                "TSL:XlaEmitLlvmIr:#module=jit_f,program_id=7#",
            ),
            (14, Some(13), 1, 420, 450, "cuBLAS:cublasCreate_v2"),
            (
                15,
                Some(13),
                1,
                850,
                890,
                "TSL:XlaDumpLlvmIr:#module=jit_f,program_id=7#",
            ),
            // Worker roots: inside XlaEmitLlvmIr [410, 900].
            (
                16,
                None,
                2,
                460,
                700,
                "TSL:XlaOptimizeLlvmIr:#module=jit_f_0#",
            ),
            (
                17,
                Some(16),
                2,
                470,
                600,
                "TSL:XlaEmitGpuAsm:#module=jit_f_0#",
            ),
            (18, Some(17), 2, 480, 500, "NCCL:ncclGroupEnd"),
            (
                19,
                None,
                3,
                500,
                800,
                "TSL:XlaCompileGpuAsm:#module=jit_f_1#",
            ),
            // Only the XlaCompile itself encloses this one (2026 XLA; the Python tool crashes).
            (
                20,
                None,
                3,
                992,
                1000,
                "TSL:XlaCreateGpuExecutable:#module=jit_f#",
            ),
            // Outside every compilation.
            (
                21,
                None,
                2,
                2000,
                2100,
                "TSL:XlaCompileGpuAsm:#module=late#",
            ),
            (
                22,
                None,
                1,
                3000,
                3100,
                "TSL:XlaModule:#hlo_module=jit_f,program_id=7#",
            ),
        ])
    }

    struct Frame {
        batch: RecordBatch,
    }

    impl Frame {
        fn row(&self, id: i64) -> Option<usize> {
            let c = Columns::of(&self.batch).unwrap();
            c.range_id.iter().position(|&r| r == id)
        }
        fn get(
            &self,
            id: i64,
        ) -> (
            String,
            Option<i64>,
            i32,
            i64,
            i64,
            String,
            i64,
            Option<String>,
        ) {
            let c = Columns::of(&self.batch).unwrap();
            let (pid, pname) = program_columns(&self.batch).unwrap();
            let i = self.row(id).unwrap_or_else(|| panic!("range {id} missing"));
            (
                c.name.value(i).to_string(),
                c.parent_id.is_valid(i).then(|| c.parent_id.value(i)),
                c.num_child[i],
                c.dur_child[i],
                c.dur_non_child[i],
                c.range_stack.value(i).to_string(),
                pid[i],
                pname.is_valid(i).then(|| pname.value(i).to_string()),
            )
        }
    }

    #[test]
    fn synthetic_frame() {
        let frame = Frame {
            batch: build_compile_frame(&synthetic()).unwrap(),
        };
        assert_eq!(frame.batch.schema(), schema());
        // Kept: compilation 2 and below; dropped: outside ranges, NCCL/cuBLAS, autotuner detail.
        let c = Columns::of(&frame.batch).unwrap();
        let ids: Vec<i64> = c.range_id.to_vec();
        assert_eq!(ids, vec![2, 3, 4, 6, 7, 8, 11, 13, 15, 16, 17, 19, 20]);

        // XlaCompile takes its backend child's program; children of an NCCL range move up.
        let (name, parent, nchild, dchild, dnon, stack, pid, pname) = frame.get(2);
        assert_eq!(name, "XlaCompile:#module=jit_f#");
        assert_eq!(parent, None);
        assert_eq!((nchild, dchild, dnon), (3, 180 + 780, 990 - 960));
        assert_eq!(stack, ":2");
        assert_eq!((pid, pname.as_deref()), (7, Some("jit_f")));

        // Pipeline 3 lost NCCL 5 (60 ns) but gained its child 6 (20 ns).
        let (_, parent, nchild, dchild, dnon, stack, _, _) = frame.get(3);
        assert_eq!(parent, Some(2));
        assert_eq!((nchild, dchild, dnon), (2, 50 + 20, 180 - 70));
        assert_eq!(stack, ":2:3");
        let (_, parent, _, _, _, stack, pid, _) = frame.get(6);
        assert_eq!((parent, stack.as_str(), pid), (Some(3), ":2:3:6", 7));

        // Autotuner measurement renamed and emptied.
        let (name, _, nchild, dchild, dnon, _, _, _) = frame.get(8);
        assert_eq!(name, "XlaAutotunerMeasurement");
        assert_eq!((nchild, dchild, dnon), (0, 0, 80));
        // `XlaPass:#name=autotuner` counts as autotuner compilation; its backend (program 99)
        // sets the pass's program but is removed.
        let (name, _, nchild, dchild, dnon, _, pid, pname) = frame.get(11);
        assert_eq!(name, "XlaAutotunerCompilation");
        assert_eq!((nchild, dchild, dnon), (0, 0, 90));
        assert_eq!((pid, pname.as_deref()), (99, Some("fusion")));
        assert!(frame.row(12).is_none());

        // XlaEmitLlvmIr: cuBLAS folded; workers 16 and 19 grafted (not in DurChild).
        let (_, _, nchild, dchild, dnon, _, _, _) = frame.get(13);
        assert_eq!((nchild, dchild, dnon), (3, 40, 490 - 40));
        let (_, parent, nchild, dchild, _, stack, pid, pname) = frame.get(16);
        assert_eq!(parent, Some(13));
        assert_eq!((nchild, dchild), (1, 130));
        assert_eq!(stack, ":2:7:13:16");
        assert_eq!((pid, pname.as_deref()), (7, Some("jit_f")));
        let (_, parent, nchild, dchild, dnon, stack, _, _) = frame.get(17);
        assert_eq!(parent, Some(16));
        assert_eq!((nchild, dchild, dnon), (0, 0, 130));
        assert_eq!(stack, ":2:7:13:16:17");
        let (_, parent, _, _, _, stack, _, _) = frame.get(19);
        assert_eq!((parent, stack.as_str()), (Some(13), ":2:7:13:19"));
        // No main-thread range encloses 20 except the XlaCompile.
        let (_, parent, _, _, _, stack, pid, _) = frame.get(20);
        assert_eq!((parent, stack.as_str(), pid), (Some(2), ":2:20", 7));

        // Levels follow the stacks.
        for i in 0..frame.batch.num_rows() {
            let depth = c.range_stack.value(i).matches(':').count() as i32 - 1;
            assert_eq!(c.lvl[i], depth);
        }
    }

    #[test]
    fn program_id_from_compile_name_and_empty_input() {
        let batch = pushpop_batch(&[
            (1, None, 1, 0, 100, "XlaCompile:#module=jit_g,program_id=3#"),
            (
                2,
                Some(1),
                1,
                10,
                20,
                "XlaPass:#name=x,module=jit_g,program_id=3#",
            ),
            (3, None, 1, 200, 300, "XlaCompile:#module=jit_h#"),
        ]);
        let frame = Frame {
            batch: build_compile_frame(&batch).unwrap(),
        };
        let (name, _, _, _, _, _, pid, pname) = frame.get(2);
        assert_eq!(name, "XlaPass:#name=x,module=jit_g,program_id=3#");
        assert_eq!((pid, pname.as_deref()), (3, Some("jit_g")));
        let (_, _, _, _, _, _, pid, pname) = frame.get(3);
        assert_eq!((pid, pname.as_deref()), (-1, Some("jit_h")));

        let empty = build_compile_frame(&pushpop_batch(&[])).unwrap();
        assert_eq!(empty.num_rows(), 0);
    }

    #[test]
    fn capture_without_compilation_gives_empty_frame() {
        let Some(dir) = crate::testutil::fixtures_dir() else {
            return;
        };
        let path = dir.join("reference/h200-fsdp2_1proc/report_nvtx_pushpop_trace.parquet");
        let pushpop = pushpop::read_parquet(std::fs::read(path).unwrap()).unwrap();
        let frame = build_compile_frame(&pushpop).unwrap();
        assert_eq!(frame.num_rows(), 0);
        assert_eq!(frame.schema(), schema());
    }

    #[test]
    fn cycles_are_errors() {
        let ranges: [Range; 2] = [
            (1, Some(2), 1, 0, 100, "TSL:XlaCompile:#module=a#"),
            (2, Some(1), 1, 0, 100, "TSL:XlaPass:#name=b#"),
        ];
        // The reader rejects it when it must derive stacks ...
        let raw = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("Start", DataType::Int64, false),
                Field::new("End", DataType::Int64, false),
                Field::new("Name", DataType::Utf8, false),
                Field::new("TID", DataType::Int64, false),
                Field::new("RangeId", DataType::Int64, false),
                Field::new("ParentId", DataType::Int64, true),
                Field::new("RangeStack", DataType::Utf8, false),
            ])),
            vec![
                Arc::new(ranges.iter().map(|r| r.3).collect::<Int64Array>()),
                Arc::new(ranges.iter().map(|r| r.4).collect::<Int64Array>()),
                Arc::new(ranges.iter().map(|r| Some(r.5)).collect::<StringArray>()),
                Arc::new(ranges.iter().map(|r| r.2).collect::<Int64Array>()),
                Arc::new(ranges.iter().map(|r| r.0).collect::<Int64Array>()),
                Arc::new(ranges.iter().map(|r| r.1).collect::<Int64Array>()),
                Arc::new(StringArray::from(vec![":2:1", ":1:2"])),
            ],
        )
        .unwrap();
        // ... and the frame builder when the stacks are given.
        let batch = pushpop::normalize(&raw).unwrap();
        let e = build_compile_frame(&batch).unwrap_err().to_string();
        assert!(e.contains("cycle"), "{e}");
    }
}
