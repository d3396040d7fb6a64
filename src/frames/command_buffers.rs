//! Command buffers opened up (docs/design.md, "Command buffers"): a thunk named
//! `command_buffer_N` runs a CUDA graph of several HLO instructions and has no instruction of
//! its own. Its execution is replaced by one row per instruction whose kernels the graph ran,
//! from the graph operations recorded under its range (`nsys-jax-pipe/graph-ops.parquet`):
//!
//! 1. **By kernel name**: XLA names a kernel after its instruction with every character other
//!    than a letter, digit or `_` made `_` (`gemm_fusion_dot.38` → `gemm_fusion_dot_38`); a
//!    name that two instructions of the module share this way is ambiguous and not used.
//! 2. **By thunk order**: the other operations (library kernels such as cuBLAS's and NCCL's,
//!    memcpys, memsets) are matched, per class (all-gather, reduce-scatter, all-reduce,
//!    send/recv, broadcast, memset, memcpy, other library work), in graph-node order to the
//!    thunks that `module_*.thunk_metadata.pb` lists after the command buffer (up to the next
//!    one) of a kind that does that work, leaving out the instructions matched by name and
//!    those that run as thunks of their own.
//! 3. **By position**: when as many operations are left as such thunks (of any class), they
//!    pair up in order (a graph node that the profiler records as another kind of work).
//! 4. What none of these matches stays in one row named after the command buffer (opcode
//!    `[command buffer]`), and is reported.
//!
//! An instruction's row spans its operations in that graph launch, as a thunk's range spans
//! its kernels; the unmatched row, from its first operation, lasts their summed time. Every
//! row keeps the command buffer's name (the frame's `CommandBuffer`).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::formats::graph_ops::{GraphOps, MEMCPY, MEMSET};
use crate::formats::hlo::HloModuleInfo;
use crate::formats::thunk_metadata::ThunkEntry;

/// How the notes about command buffers begin (after the process's label).
pub const NOTE: &str = "command buffers: ";

/// A thunk name XLA gives a command buffer.
pub fn is_command_buffer(thunk: &str) -> bool {
    thunk.starts_with("command_buffer")
}

/// One row of the thunk frame being built.
pub struct ThunkRow {
    /// Row of the projected range it comes from.
    pub row: usize,
    /// Position among the rows of one range (a command buffer's instructions).
    pub sub: u32,
    pub prog: String,
    /// Row of its module's range.
    pub module: usize,
    pub numeric: Option<i64>,
    pub exec: i32,
    pub dev: i32,
    /// The HLO instruction (or the command buffer) it runs.
    pub op: String,
    pub op_name: Option<String>,
    pub start: i64,
    pub dur: i64,
    /// The command buffer it ran in.
    pub command_buffer: Option<String>,
}

/// What opens command buffers: the process's graph operations (None when its input has no
/// such member: an nsys-jax archive) and each module's thunk metadata, by module id.
#[derive(Default)]
pub struct GraphInputs {
    pub ops: Option<GraphOps>,
    pub metadata: BTreeMap<i64, Vec<ThunkEntry>>,
    /// What reading them had to say.
    pub notes: Vec<String>,
}

/// The work a graph operation or a thunk does, for matching by order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Class {
    AllGather,
    ReduceScatter,
    AllReduce,
    SendRecv,
    Broadcast,
    Memset,
    Memcpy,
    Library,
}

/// The class of an operation not matched by name.
fn op_class(name: &str) -> Class {
    if name == MEMSET {
        return Class::Memset;
    }
    if name == MEMCPY {
        return Class::Memcpy;
    }
    if name.starts_with("nccl") {
        for (part, class) in [
            ("AllGather", Class::AllGather),
            ("ReduceScatter", Class::ReduceScatter),
            ("AllReduce", Class::AllReduce),
            ("Broadcast", Class::Broadcast),
            ("SendRecv", Class::SendRecv),
            ("Send", Class::SendRecv),
            ("Recv", Class::SendRecv),
        ] {
            if name.contains(part) {
                return class;
            }
        }
    }
    Class::Library
}

/// The class of a thunk kind (None: a thunk that launches no work of its own).
fn thunk_class(kind: &str) -> Option<Class> {
    let k = kind.strip_suffix("Start").unwrap_or(kind);
    Some(match k {
        "kAllGather" => Class::AllGather,
        "kReduceScatter" => Class::ReduceScatter,
        "kAllReduce" => Class::AllReduce,
        "kAllToAll" | "kRaggedAllToAll" | "kCollectivePermute" | "kSend" | "kRecv" => {
            Class::SendRecv
        }
        "kCollectiveBroadcast" => Class::Broadcast,
        "kMemset32BitValue" | "kMemzero" => Class::Memset,
        "kCommandBuffer" | "kSequential" | "kAsync" | "kWaitForStreams" | "kWhile"
        | "kConditional" | "kDynamicSlice" => return None,
        _ if k.ends_with("Done") => return None,
        _ if k.contains("Copy") || k.contains("Memcpy") => Class::Memcpy,
        _ => Class::Library,
    })
}

/// A kernel name as XLA derives it from an instruction name.
fn kernel_name(instruction: &str) -> String {
    instruction
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Kernel name → instruction (None when two instructions give the name).
fn kernel_names(hlo: &HloModuleInfo) -> HashMap<String, Option<String>> {
    let mut out: HashMap<String, Option<String>> = HashMap::new();
    for i in &hlo.instructions {
        out.entry(kernel_name(&i.name))
            .and_modify(|e| *e = None)
            .or_insert_with(|| Some(i.name.clone()));
    }
    out
}

/// The thunks of the metadata that may run inside command buffer `cb`: those after it, up to
/// the next command buffer, that launch work, without the instructions in `top_level`.
fn candidates(entries: &[ThunkEntry], cb: &str, top_level: &HashSet<&str>) -> Vec<(Class, String)> {
    let Some(at) = entries.iter().position(|e| e.name == cb) else {
        return Vec::new();
    };
    entries[at + 1..]
        .iter()
        .take_while(|e| e.kind != "kCommandBuffer")
        .filter(|e| !e.name.is_empty() && !top_level.contains(e.name.as_str()))
        .filter_map(|e| Some((thunk_class(&e.kind)?, e.name.clone())))
        .collect()
}

/// Time of the command buffers' graph operations [ns]: in all, matched by name, by order
/// within a class, by position.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attribution {
    pub total: i64,
    pub by_name: i64,
    pub by_order: i64,
    pub by_position: i64,
}

/// Replaces every execution of a command buffer in `ts` by the rows of the instructions it
/// ran (see the module docs). `range_id` gives a row's range id; `hlo_of` a row's module.
pub fn expand<'h>(
    ts: Vec<ThunkRow>,
    range_id: impl Fn(usize) -> i64,
    hlo_of: impl Fn(&ThunkRow) -> Option<&'h HloModuleInfo>,
    inputs: &GraphInputs,
    notes: &mut Vec<String>,
) -> (Vec<ThunkRow>, Attribution) {
    let mut attribution = Attribution::default();
    notes.extend(inputs.notes.iter().cloned());
    let mut ts = ts;
    let mut buffers = 0;
    for t in ts.iter_mut().filter(|t| is_command_buffer(&t.op)) {
        t.command_buffer = Some(t.op.clone());
        buffers += 1;
    }
    if buffers == 0 {
        return (ts, attribution);
    }
    let Some(ops) = inputs.ops.as_ref().filter(|o| !o.is_empty()) else {
        notes.push(format!(
            "{NOTE}{buffers} executions of CUDA graphs are counted whole: {}",
            match inputs.ops {
                None => "the input has no table of graph kernels (an nsys-jax archive); archive the report with nsys-jax-pipe to open them",
                Some(_) => "the report recorded no graph kernels (profile with --cuda-graph-trace=node)",
            }
        ));
        return (ts, attribution);
    };
    // Operations by (range, graph node, start).
    let mut order: Vec<u32> = (0..ops.len() as u32).collect();
    order.sort_unstable_by_key(|&i| {
        let i = i as usize;
        (
            ops.range_id.value(i),
            ops.graph_node_id.value(i),
            ops.start.value(i),
        )
    });
    let ranges: Vec<i64> = order
        .iter()
        .map(|&i| ops.range_id.value(i as usize))
        .collect();

    // Instructions that run as thunks of their own, per program.
    let mut top_level: HashMap<&str, HashSet<&str>> = HashMap::new();
    for t in ts.iter().filter(|t| !is_command_buffer(&t.op)) {
        top_level.entry(&t.prog).or_default().insert(&t.op);
    }
    let mut names: HashMap<i64, HashMap<String, Option<String>>> = HashMap::new();
    let mut lists: HashMap<(i64, String), Vec<(Class, String)>> = HashMap::new();
    let mut no_dump = 0usize;
    let mut out = Vec::with_capacity(ts.len());
    for t in &ts {
        if !is_command_buffer(&t.op) {
            continue;
        }
        let rid = range_id(t.row);
        let lo = ranges.partition_point(|&r| r < rid);
        let hi = ranges.partition_point(|&r| r <= rid);
        let here = &order[lo..hi];
        let Some(hlo) = hlo_of(t) else {
            no_dump += 1;
            continue;
        };
        if here.is_empty() {
            continue;
        }
        let names = names.entry(hlo.id).or_insert_with(|| kernel_names(hlo));
        let list = lists.entry((hlo.id, t.op.clone())).or_insert_with(|| {
            let empty = HashSet::new();
            let top = top_level.get(t.prog.as_str()).unwrap_or(&empty);
            inputs
                .metadata
                .get(&hlo.id)
                .map(|e| candidates(e, &t.op, top))
                .unwrap_or_default()
        });
        let mut owner: Vec<Option<String>> = vec![None; here.len()];
        let mut by_name = HashSet::new();
        for (k, &i) in here.iter().enumerate() {
            if let Some(Some(instr)) = names.get(ops.name.value(i as usize)) {
                by_name.insert(instr.clone());
                owner[k] = Some(instr.clone());
                attribution.by_name += ops.end.value(i as usize) - ops.start.value(i as usize);
            }
        }
        // The rest, per class, in graph-node order against the unmatched candidates.
        let mut next: HashMap<Class, usize> = HashMap::new();
        for (k, &i) in here.iter().enumerate() {
            if owner[k].is_some() {
                continue;
            }
            let class = op_class(ops.name.value(i as usize));
            let at = next.entry(class).or_default();
            let found = list
                .iter()
                .enumerate()
                .skip(*at)
                .find(|(_, (c, name))| *c == class && !by_name.contains(name));
            if let Some((j, (_, name))) = found {
                *at = j + 1;
                owner[k] = Some(name.clone());
                attribution.by_order += ops.end.value(i as usize) - ops.start.value(i as usize);
            }
        }
        // Last, when as many operations as candidates are left, they pair up in order.
        let left: Vec<usize> = (0..here.len()).filter(|&k| owner[k].is_none()).collect();
        let taken: HashSet<&str> = owner.iter().flatten().map(String::as_str).collect();
        let free: Vec<&String> = list
            .iter()
            .map(|(_, name)| name)
            .filter(|name| !taken.contains(name.as_str()))
            .collect();
        if !left.is_empty() && left.len() == free.len() {
            for (k, name) in left.into_iter().zip(free) {
                owner[k] = Some(name.clone());
                let i = here[k] as usize;
                attribution.by_position += ops.end.value(i) - ops.start.value(i);
            }
        }
        // One row per instruction (and one for what stays unmatched), by first start.
        // An instruction's row spans its operations; the unmatched row sums them (they may
        // lie between other instructions').
        let mut spans: BTreeMap<Option<&str>, (i64, i64)> = BTreeMap::new();
        let mut unmatched = 0;
        for (k, &i) in here.iter().enumerate() {
            let (s, e) = (ops.start.value(i as usize), ops.end.value(i as usize));
            attribution.total += e - s;
            if owner[k].is_none() {
                unmatched += e - s;
            }
            let span = spans.entry(owner[k].as_deref()).or_insert((s, e));
            span.0 = span.0.min(s);
            span.1 = span.1.max(e);
        }
        if let Some(span) = spans.get_mut(&None) {
            span.1 = span.0 + unmatched;
        }
        let mut parts: Vec<(Option<&str>, (i64, i64))> = spans.into_iter().collect();
        parts.sort_by_key(|(name, (s, e))| (*s, *e, *name));
        for (sub, (name, (s, e))) in parts.into_iter().enumerate() {
            out.push((
                t.row,
                ThunkRow {
                    row: t.row,
                    sub: sub as u32,
                    prog: t.prog.clone(),
                    module: t.module,
                    numeric: t.numeric,
                    exec: t.exec,
                    dev: t.dev,
                    op: name.unwrap_or(&t.op).to_string(),
                    op_name: if name.is_some() {
                        None
                    } else {
                        t.op_name.clone()
                    },
                    start: s,
                    dur: e - s,
                    command_buffer: Some(t.op.clone()),
                },
            ));
        }
    }
    if no_dump > 0 {
        notes.push(format!(
            "{NOTE}{no_dump} executions of CUDA graphs are counted whole: their module has no HLO dump to name the kernels inside"
        ));
    }
    let unmatched =
        attribution.total - attribution.by_name - attribution.by_order - attribution.by_position;
    if unmatched > 0 {
        notes.push(format!(
            "{NOTE}{:.2} % of the time of the operations inside ({:.3} ms) is not attributed to an HLO instruction; counted under the command buffer",
            100.0 * unmatched as f64 / attribution.total.max(1) as f64,
            unmatched as f64 * 1e-6
        ));
    }
    // Splice: every expanded thunk's rows replace it.
    let mut expanded: HashMap<usize, Vec<ThunkRow>> = HashMap::new();
    for (row, r) in out {
        expanded.entry(row).or_default().push(r);
    }
    let mut rows = Vec::with_capacity(ts.len() + expanded.values().map(Vec::len).sum::<usize>());
    for t in ts {
        match expanded.remove(&t.row) {
            Some(parts) if is_command_buffer(&t.op) => rows.extend(parts),
            _ => rows.push(t),
        }
    }
    (rows, attribution)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::graph_ops::SCHEMA;
    use crate::formats::hlo::{HloInstructionInfo, StackFrameIndex};
    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;

    fn module(names: &[&str]) -> HloModuleInfo {
        let mut instructions: Vec<HloInstructionInfo> = names
            .iter()
            .map(|n| HloInstructionInfo {
                name: n.to_string(),
                opcode: "fusion".into(),
                op_type: String::new(),
                op_name: String::new(),
                source_file: String::new(),
                source_line: 0,
                stack_frame_id: 0,
                scheduling_name: String::new(),
                communication: None,
                called: vec![],
            })
            .collect();
        instructions.sort_by(|a, b| a.name.cmp(&b.name));
        HloModuleInfo {
            name: "m".into(),
            id: 1,
            fingerprint: None,
            instructions,
            stack_frames: StackFrameIndex::default(),
        }
    }

    fn row(r: usize, op: &str) -> ThunkRow {
        ThunkRow {
            row: r,
            sub: 0,
            prog: "p".into(),
            module: 0,
            numeric: Some(1),
            exec: 0,
            dev: 0,
            op: op.into(),
            op_name: None,
            start: 0,
            dur: 1000,
            command_buffer: None,
        }
    }

    /// Graph operations (range, node, start, end, name).
    fn ops(rows: &[(i64, i64, i64, i64, &str)]) -> GraphOps {
        let col = |f: &dyn Fn(&(i64, i64, i64, i64, &str)) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        let b = RecordBatch::try_new(
            SCHEMA.clone(),
            vec![
                col(&|r| r.0),
                col(&|_| 1),
                col(&|r| r.1),
                col(&|r| r.2),
                col(&|r| r.3),
                col(&|_| 0),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.4))),
            ],
        )
        .unwrap();
        GraphOps::of(&b).unwrap()
    }

    fn entry(name: &str, kind: &str) -> ThunkEntry {
        ThunkEntry {
            name: name.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn kernels_are_matched_by_name_then_class_order_then_position() {
        let hlo = module(&[
            "gemm_fusion_dot.7",
            "all-gather.1",
            "all-gather.2",
            "cublas-gemm.3",
            "loop_fusion",
            "all-reduce.9",
        ]);
        let metadata = vec![
            entry("all-reduce.9", "kAllReduceStart"),
            entry("command_buffer_2", "kCommandBuffer"),
            entry("", "kSequential"),
            entry("all-gather.2", "kAllGather"),
            entry("gemm_fusion_dot.7", "kCustomKernel"),
            entry("all-gather-start", "kAsyncStart"),
            entry("all-gather.1", "kAllGather"),
            entry("cublas-gemm.3", "kGemm"),
            entry("loop_fusion", "kKernel"),
            entry("all-gather-done", "kAsyncDone"),
            entry("command_buffer_9", "kCommandBuffer"),
            entry("", "kSequential"),
            entry("other", "kKernel"),
        ];
        let inputs = GraphInputs {
            // Range 10: the command buffer; node order is thunk order.
            ops: Some(ops(&[
                (10, 1, 100, 200, "ncclDevKernel_AllGather_RING_LL"),
                (10, 2, 200, 300, "gemm_fusion_dot_7"),
                (10, 3, 150, 400, "ncclDevKernel_AllGather_RING_LL"),
                (10, 4, 400, 450, "sm90_xmma_gemm_f32"),
                (10, 5, 450, 470, "[memcpy]"),
                (11, 1, 0, 5, "not_ours"),
            ])),
            metadata: BTreeMap::from([(1, metadata)]),
            notes: vec![],
        };
        let ts = vec![row(0, "all-reduce.9"), row(1, "command_buffer_2")];
        let mut notes = Vec::new();
        let ids = [5i64, 10];
        let (rows, a) = expand(ts, |r| ids[r], |_| Some(&hlo), &inputs, &mut notes);
        let got: Vec<(&str, i64, i64, Option<&str>)> = rows
            .iter()
            .map(|r| (r.op.as_str(), r.start, r.dur, r.command_buffer.as_deref()))
            .collect();
        let cb = Some("command_buffer_2");
        assert_eq!(
            got,
            [
                ("all-reduce.9", 0, 1000, None),
                ("all-gather.2", 100, 100, cb),
                ("all-gather.1", 150, 250, cb),
                ("gemm_fusion_dot.7", 200, 100, cb),
                ("cublas-gemm.3", 400, 50, cb),
                // The memcpy has no copy thunk; the one thunk left takes it by position.
                ("loop_fusion", 450, 20, cb),
            ]
        );
        assert_eq!(
            a,
            Attribution {
                total: 470 - 100 + 250 - 100,
                by_name: 100,
                by_order: 100 + 250 + 50,
                by_position: 20,
            }
        );
        assert!(notes.is_empty(), "{notes:?}");
        let subs: Vec<u32> = rows.iter().map(|r| r.sub).collect();
        assert_eq!(subs, [0, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn what_stays_unmatched_is_one_row_under_the_buffer_and_reported() {
        // Two instructions give the kernel name `a_1`: ambiguous. No metadata.
        let hlo = module(&["a.1", "a-1", "b.2"]);
        let inputs = GraphInputs {
            ops: Some(ops(&[
                (3, 1, 0, 10, "a_1"),
                (3, 2, 10, 30, "b_2"),
                (3, 3, 40, 45, "mystery"),
            ])),
            metadata: BTreeMap::new(),
            notes: vec![],
        };
        let mut notes = Vec::new();
        let (rows, a) = expand(
            vec![row(0, "command_buffer_1")],
            |_| 3,
            |_| Some(&hlo),
            &inputs,
            &mut notes,
        );
        let got: Vec<(&str, i64, i64)> = rows
            .iter()
            .map(|r| (r.op.as_str(), r.start, r.dur))
            .collect();
        assert_eq!(got, [("command_buffer_1", 0, 15), ("b.2", 10, 20)]);
        assert_eq!(a.total, 35);
        assert_eq!(a.by_name, 20);
        assert!(
            notes[0].starts_with("command buffers: 42.86 % of the time"),
            "{notes:?}"
        );
    }

    #[test]
    fn without_graph_operations_buffers_stay_whole_with_a_note() {
        let hlo = module(&["x"]);
        for (ops, why) in [
            (None, "no table of graph kernels"),
            (Some(GraphOps::empty()), "--cuda-graph-trace=node"),
        ] {
            let inputs = GraphInputs {
                ops,
                metadata: BTreeMap::new(),
                notes: vec![],
            };
            let mut notes = Vec::new();
            let (rows, _) = expand(
                vec![row(0, "command_buffer_1"), row(1, "x")],
                |r| r as i64,
                |_| Some(&hlo),
                &inputs,
                &mut notes,
            );
            assert_eq!(rows.len(), 2);
            assert!(notes[0].contains(why), "{notes:?}");
        }
        // No command buffer: nothing to say.
        let mut notes = Vec::new();
        let (rows, _) = expand(
            vec![row(1, "x")],
            |r| r as i64,
            |_| Some(&hlo),
            &GraphInputs::default(),
            &mut notes,
        );
        assert_eq!(rows.len(), 1);
        assert!(notes.is_empty());
    }

    #[test]
    fn kernel_names_follow_xla() {
        assert_eq!(kernel_name("gemm_fusion_dot.38"), "gemm_fusion_dot_38");
        assert_eq!(
            kernel_name("all-reduce.2.0-fusion.1"),
            "all_reduce_2_0_fusion_1"
        );
        assert_eq!(op_class("ncclDevKernel_SendRecv"), Class::SendRecv);
        assert_eq!(
            op_class("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"),
            Class::ReduceScatter
        );
        assert_eq!(thunk_class("kAllToAll"), Some(Class::SendRecv));
        assert_eq!(thunk_class("kAllGatherDone"), None);
        assert_eq!(thunk_class("kGemm"), Some(Class::Library));
    }
}
