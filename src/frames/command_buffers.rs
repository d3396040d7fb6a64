//! Command buffers opened up (docs/design.md, "Command buffers"): a thunk named
//! `command_buffer_N` runs a CUDA graph of several HLO instructions and has no instruction of
//! its own. Its execution is replaced by one row per instruction whose kernels the graph ran,
//! from the graph operations recorded under its range (`nsys-jax-pipe/graph-ops.parquet`):
//!
//! The candidates are the thunks that `module_*.thunk_metadata.pb` lists after the command
//! buffer (up to the next one) that launch work, without the instructions that run as thunks
//! of their own. Graph nodes, in node order (the order XLA recorded them, which is thunk
//! order), are aligned with them:
//! 1. **By kernel name**: XLA names a kernel after its instruction with every character other
//!    than a letter, digit or `_` made `_` (`gemm_fusion_dot.38` → `gemm_fusion_dot_38`; a
//!    name that two instructions share this way is not used). A node takes the candidate its
//!    kernel names when that one is free.
//! 2. **By order within a class**: otherwise the next free candidate, after the last one
//!    taken, that does the node's class of work: all-gather, reduce-scatter, all-reduce,
//!    send/recv, broadcast (NCCL kernels), memset, memcpy, an XLA kernel of the same opcode (XLA
//!    compiles identical fusions once, so a kernel may carry another instruction's name).
//!    Library work (cuBLAS, cuDNN, ...) is not placed this way: a library call's kernels are
//!    nodes of a child graph, numbered after all the command buffer's own nodes.
//! 3. **By position**: when as many nodes are left as candidates, they pair up in order (a
//!    graph node that the profiler records as another kind of work).
//! 4. **By child graph**: a library call is recorded as a child graph whose nodes are
//!    numbered after all the command buffer's own nodes, call after call in command order,
//!    each call's nodes run back to back, most opened by a workspace memset
//!    (`frames/library_calls.rs`): the nodes after the last attributed one, cut at those
//!    memsets and where an attributed node ran between two of them, go to the free library
//!    candidates in order when the counts agree.
//! 5. **By time**: the graph's nodes run in thunk order, but their ids need not follow it
//!    (XLA creates a library call's nodes — cuBLAS, cuDNN — after the others'), so what is
//!    left is placed by when it ran: the nodes between two attributed ones (in time) belong
//!    to the free candidates between theirs. One candidate takes them all (a cuBLAS call's
//!    workspace memset, its GEMM and a split-K reduction); several pair with the gap's main
//!    operations in order when as many of both are left, each pair of one class, an
//!    auxiliary operation (memset, copy, split-K reduction, layout conversion) going with the
//!    next main one.
//! 6. What none of these matches stays in one row named after the command buffer (opcode
//!    `[command buffer]`), and is reported by operation name with its time. Without thunk
//!    metadata, kernel names alone.
//!
//! A graph node is matched once; its repeats in one launch (a loop's iterations) share its
//! instruction. In time order, consecutive operations of one instruction make one row, from
//! the first one's start, whose duration is the time they kept the GPU busy (the union of
//! their intervals: the sum of their durations, without the gaps between a memset and its
//! GEMM), so a loop's iterations are rows of their own, as their thunks are without command
//! buffers. Every row keeps the command buffer's name (the frame's `CommandBuffer`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::formats::graph_ops::{GraphOps, MEMCPY, MEMSET};
use crate::formats::hlo::HloModuleInfo;
use crate::formats::thunk_metadata::ThunkEntry;

use super::thunk_rows::{NO_NAME, Names, Program, ThunkRow};

/// How the notes about command buffers begin (after the process's label).
pub const NOTE: &str = "command buffers: ";

/// A thunk name XLA gives a command buffer.
pub fn is_command_buffer(thunk: &str) -> bool {
    thunk.starts_with("command_buffer")
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
    /// A kernel XLA generated (named after an instruction).
    Kernel,
    Library,
    /// A library GEMM (cuBLAS, cuBLASLt): one main kernel a call.
    LibraryGemm,
    /// A dynamic slice fusion's copy, recorded as a child graph.
    ChildCopy,
}

/// The work a class does when matched by class: library GEMMs are library work, a dynamic
/// slice fusion's copy a copy.
fn family(c: Class) -> Class {
    match c {
        Class::LibraryGemm => Class::Library,
        Class::ChildCopy => Class::Memcpy,
        c => c,
    }
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
        "kKernel" | "kCustomKernel" => Class::Kernel,
        "kGemm" | "kCublasLtMatmul" => Class::LibraryGemm,
        // A dynamic slice fusion in a command buffer is, in practice, a copy into or out of
        // a loop's carried buffer (a scan's dynamic-update-slice), recorded as a child graph.
        "kDynamicSliceFusion" => Class::ChildCopy,
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
fn kernel_names(hlo: &HloModuleInfo) -> HashMap<String, Option<Arc<str>>> {
    let mut out: HashMap<String, Option<Arc<str>>> = HashMap::new();
    for i in hlo.instructions.iter() {
        out.entry(kernel_name(i.name()))
            .and_modify(|e| *e = None)
            .or_insert_with(|| Some(Arc::from(i.name())));
    }
    out
}

/// The thunks of the metadata that may run inside command buffer `cb`: those after it, up to
/// the next command buffer, that launch work, without the instructions in `top_level`.
fn candidates(entries: &[ThunkEntry], cb: &str, top_level: impl Fn(&str) -> bool) -> Candidates {
    let Some(at) = entries.iter().position(|e| e.name == cb) else {
        return Candidates::default();
    };
    let list: Vec<(Class, Arc<str>)> = entries[at + 1..]
        .iter()
        .take_while(|e| e.kind != "kCommandBuffer")
        .filter(|e| !e.name.is_empty() && !top_level(&e.name))
        .filter_map(|e| Some((thunk_class(&e.kind)?, Arc::from(e.name.as_str()))))
        .collect();
    let mut at: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
    for (i, (_, name)) in list.iter().enumerate() {
        at.entry(name.clone()).or_default().push(i);
    }
    Candidates { list, at }
}

/// The thunks a command buffer may run, in order, and where each instruction is among them.
#[derive(Default)]
struct Candidates {
    list: Vec<(Class, Arc<str>)>,
    at: HashMap<Arc<str>, Vec<usize>>,
}

/// The owner (HLO instruction) of each operation of one command-buffer execution (`here`:
/// indices into `ops`, sorted by graph node, then start). A graph node is matched once and
/// its repeats (a loop's iterations) share its owner. Nodes in node order are aligned with
/// `list` (the command buffer's thunks in order): a node takes the candidate its kernel names
/// when that one is free, else the next free candidate of its class after the last one taken;
/// then the leftovers pair by position. Without a list, kernel names alone (see the module
/// docs).
fn attribute(
    ops: &GraphOps,
    here: &[u32],
    hlo: &HloModuleInfo,
    names: &HashMap<String, Option<Arc<str>>>,
    candidates: &Candidates,
    attribution: &mut Attribution,
) -> Vec<Option<Arc<str>>> {
    let list = &candidates.list;
    // (first index into `here`, one past the last) of each graph node.
    let mut nodes: Vec<(usize, usize)> = Vec::new();
    for (k, &i) in here.iter().enumerate() {
        let node = ops.graph_node_id.value(i as usize);
        match nodes.last_mut() {
            Some(n) if ops.graph_node_id.value(here[n.0] as usize) == node => n.1 = k + 1,
            _ => nodes.push((k, k + 1)),
        }
    }
    let opcode = |instr: &Arc<str>| hlo.instruction(instr).map(|i| i.opcode());
    let mut taken = vec![false; list.len()];
    let mut owner: Vec<Option<&Arc<str>>> = vec![None; nodes.len()];
    // The candidate each node took.
    let mut took: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut how = vec![0u8; nodes.len()];
    let mut after = 0;
    let id = |j: usize| ops.graph_node_id.value(here[nodes[j].0] as usize);
    // The graph's own nodes (commands) come before every library call's child graph: a
    // kernel numbered below the last one named after an instruction is one XLA emitted, even
    // when no candidate's name is its own (a sort's `sort_17_1`, `sort_17_1__2`, ...).
    let last_named = (0..nodes.len())
        .filter(|&j| {
            matches!(
                names.get(ops.name.value(here[nodes[j].0] as usize)),
                Some(Some(_))
            )
        })
        .map(id)
        .max();
    for (j, n) in nodes.iter().enumerate() {
        let name = ops.name.value(here[n.0] as usize);
        // The instruction the kernel is named after (XLA reuses one kernel for identical
        // fusions: then it is another instruction's name).
        let named = match names.get(name) {
            Some(Some(instr)) => Some(instr),
            _ => None,
        };
        if list.is_empty() {
            owner[j] = named;
            how[j] = 1;
            continue;
        }
        let free_named = named
            .and_then(|x| candidates.at.get(x))
            .and_then(|at| at.iter().copied().find(|&c| !taken[c]));
        if let Some(at) = free_named {
            taken[at] = true;
            after = after.max(at + 1);
            owner[j] = Some(&list[at].1);
            took[j] = Some(at);
            how[j] = 1;
            continue;
        }
        // An own kernel that no candidate names: unnamed, or named after an instruction
        // inside a fusion (`sort_14_1` of `sort.14_1` in `fusion.32`).
        let own_kernel = match named {
            Some(instr) => !candidates.at.contains_key(instr),
            None => op_class(name) == Class::Library,
        } && last_named.is_some_and(|last| id(j) < last);
        let class = match named.is_some() || own_kernel {
            true => Class::Kernel,
            false => op_class(name),
        };
        // A library call's kernels are nodes of a child graph, numbered after all the
        // command buffer's own nodes: their node order says nothing of their place among
        // the thunks, so they are placed by their child graphs (step 4) or by time (step 5).
        if class == Class::Library {
            continue;
        }
        // A kernel named after an instruction fits one of the same opcode; an unnamed own
        // kernel any instruction's kernel.
        let fits = |c: usize| {
            !taken[c]
                && list[c].0 == class
                && (class != Class::Kernel
                    || own_kernel
                    || opcode(&list[c].1) == named.and_then(|x| opcode(x)))
        };
        // An unnamed own kernel is the command after the one the node before it ran.
        let from = match j.checked_sub(1).and_then(|p| took[p]) {
            Some(c) if own_kernel => c + 1,
            _ => after,
        };
        if let Some(at) = (from..list.len()).find(|&c| fits(c)) {
            taken[at] = true;
            after = at + 1;
            owner[j] = Some(&list[at].1);
            took[j] = Some(at);
            how[j] = 2;
        }
    }
    // Last, when as many nodes as candidates are left, they pair up in order.
    let left: Vec<usize> = (0..nodes.len()).filter(|&j| owner[j].is_none()).collect();
    let free: Vec<usize> = (0..list.len()).filter(|&c| !taken[c]).collect();
    if !left.is_empty() && left.len() == free.len() {
        for (j, c) in left.into_iter().zip(free) {
            owner[j] = Some(&list[c].1);
            took[j] = Some(c);
            taken[c] = true;
            how[j] = 3;
        }
    }
    // Library calls by their child graphs: nodes numbered after every attributed one, cut
    // into calls where a workspace memset opens one, go to the free library candidates in
    // order.
    use super::library_calls::Call;
    let free_calls: Vec<(usize, Call)> = (0..list.len())
        .filter(|&c| !taken[c])
        .filter_map(|c| match list[c].0 {
            Class::Library => Some((c, Call::Library)),
            Class::LibraryGemm => Some((c, Call::Gemm)),
            Class::ChildCopy => Some((c, Call::Copy)),
            _ => None,
        })
        .collect();
    let seen: Vec<super::library_calls::Node> = nodes
        .iter()
        .zip(&took)
        .map(|(n, took)| {
            let first = here[n.0] as usize;
            let name = ops.name.value(first);
            super::library_calls::Node {
                id: ops.graph_node_id.value(first),
                start: ops.start.value(first),
                end: (n.0..n.1)
                    .map(|k| ops.end.value(here[k] as usize))
                    .max()
                    .unwrap_or(0),
                owned: took.is_some(),
                opens: name == MEMSET,
                main: auxiliary(name).is_none(),
                copy: name == MEMCPY,
            }
        })
        .collect();
    for (j, c) in super::library_calls::child_graph_calls(&seen, &free_calls) {
        owner[j] = Some(&list[c].1);
        took[j] = Some(c);
        taken[c] = true;
        how[j] = 5;
    }
    // Then by time: what runs between two attributed nodes belongs to the free candidates
    // between theirs (a library call's kernels: a workspace memset, the GEMM, a split-K
    // reduction).
    let first_start = |j: usize| ops.start.value(here[nodes[j].0] as usize);
    for (j, c) in by_time_gaps(
        nodes.len(),
        &took,
        first_start,
        |j| ops.name.value(here[nodes[j].0] as usize),
        &taken,
        |c| list[c].0,
    ) {
        owner[j] = Some(&list[c].1);
        how[j] = 4;
    }
    let mut out = vec![None; here.len()];
    for (j, n) in nodes.iter().enumerate() {
        for k in n.0..n.1 {
            let i = here[k] as usize;
            let d = ops.end.value(i) - ops.start.value(i);
            attribution.total += d;
            match how[j] {
                1 if owner[j].is_some() => attribution.by_name += d,
                2 => attribution.by_order += d,
                3 => attribution.by_position += d,
                4 => attribution.by_time += d,
                5 => attribution.by_call += d,
                _ => {
                    let e = attribution
                        .unmatched
                        .entry(ops.name.value(i).to_string())
                        .or_default();
                    e.0 += d;
                    e.1 += 1;
                }
            }
            out[k] = owner[j].cloned();
        }
    }
    out
}

/// Time of the command buffers' graph operations [ns]: in all, matched by name, by order
/// within a class, by position, by time, by child graph; and what stayed unmatched, by operation name
/// (time, count).
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    pub total: i64,
    pub by_name: i64,
    pub by_order: i64,
    pub by_position: i64,
    pub by_time: i64,
    /// Library calls placed by their child graphs.
    pub by_call: i64,
    pub unmatched: BTreeMap<String, (i64, u64)>,
}

/// Where an operation that comes with a library call, rather than being one, runs relative
/// to the call's main kernel: before it (a workspace memset or initialisation, an input
/// layout conversion) or after it (a split-K reduction, an output layout conversion). None: a
/// main kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Auxiliary {
    Before,
    After,
}

fn auxiliary(name: &str) -> Option<Auxiliary> {
    let has = |parts: &[&str]| parts.iter().any(|p| name.contains(p));
    if name == MEMSET || name == MEMCPY || has(&["init_device_workspace", "nchwToNhwc"]) {
        Some(Auxiliary::Before)
    } else if has(&[
        "splitKreduce",
        "splitK_reduce",
        "execute_split_k_kernel",
        "nhwcToNchw",
    ]) {
        Some(Auxiliary::After)
    } else {
        None
    }
}

/// Step 5 of [`attribute`]: for `n` nodes of which `took` says which candidate each took,
/// the free candidates (`taken`, classes `class`) each unattributed node gets. Nodes in time
/// order (`start`) are cut at the attributed ones; the nodes of a gap belong to the free
/// candidates between the two around it, in order: all to the one when there is one, else
/// the gap's main operations (not [`auxiliary`]) pair with the candidates when as many of
/// both are left and each pair is of one class, and an auxiliary operation goes with the next
/// main one it belongs with ([`auxiliary`]).
fn by_time_gaps<'n>(
    n: usize,
    took: &[Option<usize>],
    start: impl Fn(usize) -> i64,
    name: impl Fn(usize) -> &'n str,
    taken: &[bool],
    class: impl Fn(usize) -> Class,
) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&j| (start(j), j));
    let mut out = Vec::new();
    let mut lo = 0;
    let mut gap: Vec<usize> = Vec::new();
    for k in 0..=n {
        let anchor = order.get(k).and_then(|&j| took[j]);
        if k < n && anchor.is_none() {
            gap.push(order[k]);
            continue;
        }
        let hi = anchor.unwrap_or(taken.len());
        if !gap.is_empty() && lo <= hi {
            let free: Vec<usize> = (lo..hi).filter(|&c| !taken[c]).collect();
            if let [only] = free[..] {
                out.extend(gap.iter().map(|&j| (j, only)));
            } else if !free.is_empty() {
                let main: Vec<usize> = gap
                    .iter()
                    .copied()
                    .filter(|&j| auxiliary(name(j)).is_none())
                    .collect();
                let same_class = main.len() == free.len()
                    && main
                        .iter()
                        .zip(&free)
                        .all(|(&j, &c)| op_class(name(j)) == family(class(c)));
                if same_class && !main.is_empty() {
                    let paired: HashMap<usize, usize> =
                        main.iter().copied().zip(free.iter().copied()).collect();
                    // Each auxiliary operation goes with the main one it comes before (or
                    // after), else with the nearest one on the other side.
                    let at = |k: usize, before: bool| -> Option<usize> {
                        let found = if before {
                            gap[k..].iter().find_map(|j| paired.get(j))
                        } else {
                            gap[..k].iter().rev().find_map(|j| paired.get(j))
                        };
                        found.copied()
                    };
                    for (k, &j) in gap.iter().enumerate() {
                        let c = match auxiliary(name(j)) {
                            None => paired.get(&j).copied(),
                            Some(Auxiliary::Before) => at(k, true).or_else(|| at(k, false)),
                            Some(Auxiliary::After) => at(k, false).or_else(|| at(k, true)),
                        };
                        if let Some(c) = c {
                            out.push((j, c));
                        }
                    }
                }
            }
        }
        gap.clear();
        if let Some(c) = anchor {
            lo = c + 1;
        }
    }
    out
}

/// Replaces every execution of a command buffer in `ts` by the rows of the instructions it
/// ran (see the module docs); the rows come back ordered by their range, and within a
/// command buffer's execution by time. `names` holds the rows' names (the instructions found
/// are added); `programs` the rows' programs.
pub fn expand(
    ts: Vec<ThunkRow>,
    names: &mut Names,
    programs: &[Program],
    inputs: &GraphInputs,
    notes: &mut Vec<String>,
) -> (Vec<ThunkRow>, Attribution) {
    let mut attribution = Attribution::default();
    notes.extend(inputs.notes.iter().cloned());
    let mut ts = ts;
    let is_buffer: Vec<bool> = names.iter().map(is_command_buffer).collect();
    let buffer = |t: &ThunkRow| is_buffer.get(t.op as usize).copied().unwrap_or(false);
    let mut buffers = 0;
    for t in ts.iter_mut().filter(|t| buffer(t)) {
        t.command_buffer = t.op;
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
    // Room for the rows the command buffers open up into (at most one per operation), so
    // the rows are copied to a larger vector once at most.
    ts.reserve_exact(ops.len());
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

    // Instructions that run as thunks of their own, per program (by stable id).
    let mut top_level: HashMap<u32, HashSet<u32>> = HashMap::new();
    for t in ts.iter().filter(|t| !buffer(t)) {
        top_level
            .entry(programs[t.prog as usize].rank)
            .or_default()
            .insert(t.op);
    }
    let mut kernels: HashMap<i64, HashMap<String, Option<Arc<str>>>> = HashMap::new();
    let mut lists: HashMap<(i64, u32), Candidates> = HashMap::new();
    let mut no_dump = 0usize;
    // A command buffer's execution is replaced by its instructions' rows (kept whole when
    // they cannot be told). The rows are added to the same vector, and the executions they
    // replace removed after (one vector of rows: docs/design.md, "Bounded memory").
    let before = ts.len();
    let mut opened = vec![false; before];
    for at in 0..before {
        if !buffer(&ts[at]) {
            continue;
        }
        let t = ts[at];
        let lo = ranges.partition_point(|&r| r < t.range);
        let hi = ranges.partition_point(|&r| r <= t.range);
        let here = &order[lo..hi];
        let program = &programs[t.prog as usize];
        let Some(hlo) = program.hlo else {
            no_dump += 1;
            continue;
        };
        if here.is_empty() {
            continue;
        }
        opened[at] = true;
        let kernels = kernels.entry(hlo.id).or_insert_with(|| kernel_names(hlo));
        let list = lists.entry((hlo.id, t.op)).or_insert_with(|| {
            let top = top_level.get(&program.rank);
            let names = &*names;
            let top = |name: &str| {
                top.zip(names.find(name))
                    .is_some_and(|(top, n)| top.contains(&n))
            };
            inputs
                .metadata
                .get(&hlo.id)
                .map(|e| candidates(e, names.get(t.op), top))
                .unwrap_or_default()
        });
        let owner = attribute(ops, here, hlo, kernels, list, &mut attribution);
        // Rows in time order: consecutive operations of one owner make one row (an
        // instruction's kernels; a loop's iterations alternate with other instructions').
        let mut by_time: Vec<usize> = (0..here.len()).collect();
        by_time.sort_by_key(|&k| (ops.start.value(here[k] as usize), here[k]));
        // (owner, start, end of the last operation, busy time: the union of its operations,
        // so that the gaps between an instruction's kernels, such as a workspace memset and
        // its GEMM, are not its time).
        let mut parts: Vec<(Option<&Arc<str>>, i64, i64, i64)> = Vec::new();
        for k in by_time {
            let i = here[k] as usize;
            let (s, e) = (ops.start.value(i), ops.end.value(i));
            let name = owner[k].as_ref();
            match parts.last_mut() {
                Some((last, _, end, busy)) if *last == name => {
                    *busy += (e - s.max(*end)).max(0);
                    *end = (*end).max(e);
                }
                _ => parts.push((name, s, e, e - s)),
            }
        }
        for (sub, (name, s, _, busy)) in parts.into_iter().enumerate() {
            ts.push(ThunkRow {
                sub: sub as u32,
                op: name.map_or(t.op, |n| names.intern(n)),
                op_name: if name.is_some() { NO_NAME } else { t.op_name },
                start: s,
                dur: busy,
                command_buffer: t.op,
                ..t
            });
        }
    }
    let mut at = 0;
    ts.retain(|_| {
        let keep = at >= before || !opened[at];
        at += 1;
        keep
    });
    drop(opened);
    // In the order of their ranges, a command buffer's rows in time order.
    ts.sort_unstable_by_key(|t| (t.range, t.sub));
    if no_dump > 0 {
        notes.push(format!(
            "{NOTE}{no_dump} executions of CUDA graphs are counted whole: their module has no HLO dump to name the kernels inside"
        ));
    }
    let unmatched: i64 = attribution.unmatched.values().map(|u| u.0).sum();
    if unmatched > 0 {
        let mut by_time: Vec<(&String, &(i64, u64))> = attribution.unmatched.iter().collect();
        by_time.sort_by_key(|(name, (t, _))| (std::cmp::Reverse(*t), *name));
        let shown: Vec<String> = by_time
            .iter()
            .take(5)
            .map(|(name, (t, count))| format!("{name} {:.3} ms ({count})", *t as f64 * 1e-6))
            .collect();
        let more = by_time.len().saturating_sub(shown.len());
        notes.push(format!(
            "{NOTE}{:.2} % of the time of the operations inside ({:.3} ms) is not attributed to an HLO instruction; counted under the command buffer: {}{}",
            100.0 * unmatched as f64 / attribution.total.max(1) as f64,
            unmatched as f64 * 1e-6,
            shown.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ));
    }
    (ts, attribution)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::graph_ops::SCHEMA;
    use crate::formats::hlo::{HloInstructionInfo, InstructionText};
    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;

    fn module(names: &[&str]) -> HloModuleInfo {
        let mut instructions: Vec<HloInstructionInfo> = names
            .iter()
            .map(|n| {
                let text = InstructionText {
                    name: n,
                    opcode: "fusion",
                    ..InstructionText::default()
                };
                HloInstructionInfo::new(text, 0, 0, None, vec![])
            })
            .collect();
        instructions.sort_by(|a, b| a.name().cmp(b.name()));
        HloModuleInfo::of_instructions(instructions)
    }

    /// A row opened up: (instruction, start, duration, command buffer, position).
    type Opened = (String, i64, i64, Option<String>, u32);

    /// Opens the command buffers among `rows` ((range id, instruction), each from 0 for
    /// 1000 ns) of one program whose HLO is `hlo`.
    fn open(
        rows: &[(i64, &str)],
        hlo: &HloModuleInfo,
        inputs: &GraphInputs,
        notes: &mut Vec<String>,
    ) -> (Vec<Opened>, Attribution) {
        let mut names = Names::default();
        let programs = [Program {
            stable: "p".into(),
            hlo_module: "m".into(),
            numeric: Some(1),
            hlo: Some(hlo),
            rank: 0,
        }];
        let ts = rows
            .iter()
            .map(|&(range, op)| ThunkRow {
                range,
                start: 0,
                dur: 1000,
                sub: 0,
                prog: 0,
                exec: 0,
                dev: 0,
                op: names.intern(op),
                op_name: NO_NAME,
                command_buffer: NO_NAME,
            })
            .collect();
        let (rows, a) = expand(ts, &mut names, &programs, inputs, notes);
        let rows = rows
            .iter()
            .map(|r| {
                let cb = names.opt(r.command_buffer).map(String::from);
                (names.get(r.op).to_string(), r.start, r.dur, cb, r.sub)
            })
            .collect();
        (rows, a)
    }

    /// (instruction, start, duration) of each row.
    fn times(rows: &[Opened]) -> Vec<(&str, i64, i64)> {
        rows.iter().map(|r| (r.0.as_str(), r.1, r.2)).collect()
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
        let mut notes = Vec::new();
        let ts = [(5, "all-reduce.9"), (10, "command_buffer_2")];
        let (rows, a) = open(&ts, &hlo, &inputs, &mut notes);
        let got: Vec<(&str, i64, i64, Option<&str>)> = rows
            .iter()
            .map(|r| (r.0.as_str(), r.1, r.2, r.3.as_deref()))
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
                by_order: 100 + 250,
                by_position: 50 + 20,
                ..Attribution::default()
            }
        );
        assert!(notes.is_empty(), "{notes:?}");
        let subs: Vec<u32> = rows.iter().map(|r| r.4).collect();
        assert_eq!(subs, [0, 0, 1, 2, 3, 4]);
    }

    /// cuBLAS inside a graph, as XLA records it (`tests/data/gemm-bf16-cmdbuf`): the GEMM
    /// nodes are created after the fusions' (node order is not thunk order), each GEMM comes
    /// with a workspace memset, and one is split-K (a reduction kernel after it). The library
    /// kernels' names say nothing of their instructions; their child graphs do, and where
    /// those do not pair with the candidates (a call that never ran), time order does.
    #[test]
    fn library_kernels_are_matched_by_child_graph_or_by_time_between_attributed_ones() {
        for never_ran in [false, true] {
            library_kernels(never_ran);
        }
    }

    fn library_kernels(never_ran: bool) {
        let hlo = module(&[
            "custom-call.1",
            "fusion.4",
            "custom-call.0",
            "fusion.5",
            "custom-call.9",
        ]);
        let mut metadata = vec![
            entry("command_buffer_1", "kCommandBuffer"),
            entry("", "kSequential"),
            entry("custom-call.1", "kCublasLtMatmul"),
            entry("fusion.4", "kCustomKernel"),
            entry("custom-call.0", "kCublasLtMatmul"),
            entry("fusion.5", "kCustomKernel"),
        ];
        if never_ran {
            metadata.push(entry("custom-call.9", "kCublasLtMatmul"));
        }
        let inputs = GraphInputs {
            ops: Some(ops(&[
                (3, 1, 300, 340, "fusion_4"),
                (3, 2, 700, 740, "fusion_5"),
                (3, 3, 100, 105, "[memset]"),
                (3, 4, 110, 290, "nvjet_sm90_tst_256x128"),
                (3, 5, 350, 355, "[memset]"),
                (3, 6, 360, 600, "sm90_xmma_gemm_bf16_splitK"),
                (3, 7, 610, 690, "splitKreduce_kernel"),
            ])),
            metadata: BTreeMap::from([(1, metadata)]),
            notes: vec![],
        };
        let mut notes = Vec::new();
        let (rows, a) = open(&[(3, "command_buffer_1")], &hlo, &inputs, &mut notes);
        let got = times(&rows);
        assert_eq!(
            got,
            [
                ("custom-call.1", 100, 5 + 180),
                ("fusion.4", 300, 40),
                ("custom-call.0", 350, 5 + 240 + 80),
                ("fusion.5", 700, 40)
            ]
        );
        let (by_call, by_time) = match never_ran {
            false => (5 + 180 + 5 + 240 + 80, 0),
            true => (0, 5 + 180 + 5 + 240 + 80),
        };
        assert_eq!((a.by_name, a.by_call, a.by_time), (80, by_call, by_time));
        assert!(a.unmatched.is_empty() && notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn a_loop_inside_a_graph_gives_a_row_per_iteration() {
        // A while loop as a conditional node: nodes 1 and 2 run three times each, alternating;
        // node 2 is a library kernel with one candidate thunk.
        let hlo = module(&["gemm.1", "reduce.2"]);
        let metadata = vec![
            entry("command_buffer_1", "kCommandBuffer"),
            entry("gemm.1", "kKernel"),
            entry("reduce.2", "kCustomCall"),
        ];
        let inputs = GraphInputs {
            ops: Some(ops(&[
                (3, 1, 0, 10, "gemm_1"),
                (3, 2, 10, 15, "cub_reduce"),
                (3, 1, 20, 30, "gemm_1"),
                (3, 2, 30, 35, "cub_reduce"),
                (3, 1, 40, 50, "gemm_1"),
                (3, 2, 50, 55, "cub_reduce"),
            ])),
            metadata: BTreeMap::from([(1, metadata)]),
            notes: vec![],
        };
        let mut notes = Vec::new();
        let (rows, a) = open(&[(3, "command_buffer_1")], &hlo, &inputs, &mut notes);
        let got = times(&rows);
        assert_eq!(
            got,
            [
                ("gemm.1", 0, 10),
                ("reduce.2", 10, 5),
                ("gemm.1", 20, 10),
                ("reduce.2", 30, 5),
                ("gemm.1", 40, 10),
                ("reduce.2", 50, 5)
            ]
        );
        assert_eq!((a.total, a.by_name, a.by_position), (45, 30, 15));
        // Rows add up to the kernel time: nothing counted twice.
        assert_eq!(rows.iter().map(|r| r.2).sum::<i64>(), a.total);
        assert!(notes.is_empty(), "{notes:?}");
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
        let (rows, a) = open(&[(3, "command_buffer_1")], &hlo, &inputs, &mut notes);
        let got = times(&rows);
        assert_eq!(
            got,
            [
                ("command_buffer_1", 0, 10),
                ("b.2", 10, 20),
                ("command_buffer_1", 40, 5)
            ]
        );
        assert_eq!(a.total, 35);
        assert_eq!(a.by_name, 20);
        assert!(
            notes[0].starts_with("command buffers: 42.86 % of the time"),
            "{notes:?}"
        );
        // Named, with their time and count.
        assert!(
            notes[0].ends_with("command buffer: a_1 0.000 ms (1), mystery 0.000 ms (1)"),
            "{notes:?}"
        );
        assert_eq!(
            a.unmatched,
            BTreeMap::from([
                ("a_1".to_string(), (10, 1)),
                ("mystery".to_string(), (5, 1))
            ])
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
            let ts = [(0, "command_buffer_1"), (1, "x")];
            let (rows, _) = open(&ts, &hlo, &inputs, &mut notes);
            assert_eq!(rows.len(), 2);
            assert!(notes[0].contains(why), "{notes:?}");
        }
        // No command buffer: nothing to say.
        let mut notes = Vec::new();
        let (rows, _) = open(&[(1, "x")], &hlo, &GraphInputs::default(), &mut notes);
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
        assert_eq!(thunk_class("kGemm"), Some(Class::LibraryGemm));
        assert_eq!(thunk_class("kCuDnn"), Some(Class::Library));
        assert_eq!(thunk_class("kDynamicSliceFusion"), Some(Class::ChildCopy));
    }
}
