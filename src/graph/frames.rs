//! The frames of each process — module and thunk frames from its GPU projection, the compile
//! frame from its push/pop ranges — and the run's warm-up context, which splits every
//! process's frames into warm-up and steady state (docs/design.md, "Formulas").

use crate::engine::kinds::kind;
use crate::engine::value::Tables;
use crate::engine::{Key, KeyBuilder, Node, node_kind};
use crate::formats::archive;
use crate::formats::{self, graph_ops, pushpop, thunk_metadata, trace};
use crate::frames;
use crate::frames::command_buffers::GraphInputs;
use crate::frames::facts::{CompiledNames, ProcessFacts, WarmupContext};
use arrow::array::{AsArray, RecordBatch, StringArray};
use arrow::datatypes::{Int32Type, Int64Type};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::hlo::{programs, programs_key, programs_map};
use super::members::{derived_table, in_member, member_key, read_member};
use super::{Db, Graph, NONE, NodeError, NodeResult, Out, Process, Run, fail};

kind!(
    /// Module and thunk frames of one process.
    GPU_FRAMES = "gpu-frames"
);

kind!(
    /// The GPU frames as placed in a run (a key: the frames and the process's position).
    PLACED_GPU_FRAMES = "placed-gpu-frames"
);

kind!(
    /// Whether a process's GPU frames have rows only its position in the run can place.
    UNPLACED = "unplaced-devices"
);

kind!(
    /// The compile frame of one process.
    COMPILE_FRAME = "compile-frame"
);

kind!(
    /// The (program id, module name) of each compilation in a compile frame.
    COMPILED_NAMES = "compiled-names"
);

kind!(
    /// Stable ids of the programs a process's profile compiles.
    COMPILED_PROGRAMS = "compiled-programs"
);

kind!(
    /// Whether one process communicates, and the programs it executes.
    PROCESS_FACTS = "process-facts"
);

kind!(
    /// What the warm-up split of every process of a run needs to know of the others.
    WARMUP_CONTEXT = "warmup-context"
);

/// Module and thunk frames of one process, with the remarks made building them.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct GpuFramesNode {
    pub trace: Key,
    /// The graph operations member (None when the input has none).
    pub graph_ops: Option<Key>,
    /// The thunk metadata dumps.
    pub thunk_metadata: Vec<Key>,
    pub threads: Option<Key>,
    pub programs: Key,
    /// The copies and sets outside CUDA graphs (None when the input has none).
    pub transfers: Option<Key>,
    /// The program's own NVTX ranges and marks (None when the input has none).
    pub user_nvtx: Option<Key>,
    /// The memory allocations and frees over time (None when the input has none).
    pub memory_usage: Option<Key>,
}
node_kind!(GpuFramesNode, GPU_FRAMES, Volatile, Tables);
impl GpuFramesNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.trace)
            .input(&self.graph_ops.unwrap_or(NONE))
            .param(
                "thunk-metadata",
                (self.thunk_metadata.len() as u64).to_le_bytes(),
            )
            .inputs(&self.thunk_metadata)
            .input(&self.threads.unwrap_or(NONE))
            .input(&self.programs)
            .input(&self.transfers.unwrap_or(NONE))
            .input(&self.user_nvtx.unwrap_or(NONE))
            .input(&self.memory_usage.unwrap_or(NONE))
    }
}

/// Whether a process's GPU frames have rows whose device only its position in the run can
/// give (see `graph::frames::gpu_frames`).
pub struct UnplacedNode {
    pub gpu_frames: Key,
}
node_kind!(UnplacedNode, UNPLACED, Stored, bool);
impl UnplacedNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.gpu_frames)
    }
}

/// The compile frame of one process, from its push/pop ranges.
pub struct CompileFrameNode {
    pub pushpop: Key,
}
node_kind!(CompileFrameNode, COMPILE_FRAME, Volatile, Tables);
impl CompileFrameNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.pushpop)
    }
}

/// The (program id, module name) of each compilation in one process's compile frame.
pub struct CompiledNamesNode {
    pub compile_frame: Key,
}
node_kind!(CompiledNamesNode, COMPILED_NAMES, Stored, CompiledNames);
impl CompiledNamesNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.compile_frame)
    }
}

/// Stable ids of the programs whose compilation one process's profile contains.
pub struct CompiledProgramsNode {
    pub compile_frame: Option<Key>,
    pub programs: Key,
}
node_kind!(CompiledProgramsNode, COMPILED_PROGRAMS, Stored, Vec<String>);
impl CompiledProgramsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.compile_frame.unwrap_or(NONE))
            .input(&self.programs)
    }
}

/// Whether one process communicates, and the programs it executes.
pub struct ProcessFactsNode {
    pub gpu_frames: Option<Key>,
}
node_kind!(ProcessFactsNode, PROCESS_FACTS, Stored, ProcessFacts);
impl ProcessFactsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.gpu_frames.unwrap_or(NONE))
    }
}

/// What the warm-up split of every process of a run needs to know about the others, from
/// each process's facts and compiled programs (their keys, in process order).
pub struct WarmupContextNode {
    pub inputs: Vec<Key>,
}
node_kind!(WarmupContextNode, WARMUP_CONTEXT, Stored, WarmupContext);
impl WarmupContextNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.inputs(self.inputs.iter())
    }
}

type Result<T, E = anyhow::Error> = std::result::Result<T, E>;

/// What a process's GPU frames are built from (None for an NVTX-only capture). Memoised: the
/// key of every node built on the frames starts here, and listing the process's dumps reads
/// the archive's member list.
#[salsa::tracked(returns(clone))]
fn gpu_frames_node(db: &dyn Graph, p: Process) -> Result<Option<GpuFramesNode>, NodeError> {
    let db = db.db();
    let Some((_, trace)) = member_key(db, p, archive::TRACE)? else {
        return Ok(None);
    };
    Ok(Some(GpuFramesNode {
        trace,
        graph_ops: member_key(db, p, archive::GRAPH_OPS)?.map(|t| t.1),
        thunk_metadata: thunk_metadata_members(db, p)?
            .into_iter()
            .map(|(_, _, _, k)| k)
            .collect(),
        threads: member_key(db, p, archive::THREAD_METADATA)?.map(|t| t.1),
        programs: programs_key(db, p)?,
        transfers: member_key(db, p, archive::TRANSFERS)?.map(|t| t.1),
        user_nvtx: member_key(db, p, archive::USER_NVTX)?.map(|t| t.1),
        memory_usage: member_key(db, p, archive::MEMORY_USAGE)?.map(|t| t.1),
    }))
}

/// The thunk metadata dumps of a process: (file name, member, module id, content key).
fn thunk_metadata_members(
    db: &Db,
    p: Process,
) -> Result<Vec<(String, String, i64, Key)>, NodeError> {
    let keys = super::members::member_keys(db, p.archive(db))?;
    let mut out = Vec::new();
    for (file, member) in p.archive_ref(db).dump_files(p.stem(db).as_deref()) {
        if let Some(id) = thunk_metadata::module_id(&file) {
            let key = fail(keys.value.get(&member))?;
            out.push((file, member, id, key));
        }
    }
    Ok(out)
}

/// What opens a process's command buffers up: its graph operations and thunk metadata.
fn graph_inputs(db: &Db, p: Process) -> Result<GraphInputs> {
    let mut notes = Vec::new();
    let ops = match p.resolve(db, archive::GRAPH_OPS) {
        Some(m) => match optional_member(db, p, &m, &mut notes)? {
            Some(bytes) => Some(in_member(db, p, &m, graph_ops::read(bytes))?),
            None => None,
        },
        None => None,
    };
    let mut metadata = BTreeMap::new();
    for (file, member, id, _) in thunk_metadata_members(db, p)? {
        let raw = read_member(db, p, &member)?;
        let bytes = if file.ends_with(".xz") {
            crate::formats::xz::decompress_member(&raw, p.archive_ref(db).xz_check())
        } else {
            Ok(raw)
        };
        // The metadata only helps to attribute library kernels: a damaged file costs that.
        match bytes.and_then(|b| thunk_metadata::decode(&b)) {
            Ok(entries) => {
                metadata.insert(id, entries);
            }
            Err(e) => notes.push(format!(
                "{}{member}: {}; kernels in module {id}'s command buffers matched by name only",
                crate::frames::command_buffers::NOTE,
                crate::error::one_line(&e)
            )),
        }
    }
    Ok(GraphInputs {
        ops,
        metadata,
        notes,
    })
}

/// A member's bytes; for one derived from the archive's own report, None with a note when
/// that report cannot be exported (damaged: what it would give is lost, the rest goes on).
fn optional_member(
    db: &Db,
    p: Process,
    member: &str,
    notes: &mut Vec<String>,
) -> Result<Option<Vec<u8>>> {
    let archive = p.archive_ref(db);
    match read_member(db, p, member) {
        Ok(b) => Ok(Some(b)),
        Err(e) if archive.is_from_report(member) => {
            let lost: Vec<&str> = archive::FROM_REPORT
                .into_iter()
                .filter(|m| archive.is_from_report(m))
                .map(|m| match m {
                    archive::GRAPH_OPS => "the kernels of its CUDA graphs",
                    archive::TRANSFERS => "its copies between modules",
                    archive::USER_NVTX => "its user NVTX ranges",
                    _ => "its memory events",
                })
                .collect();
            let note = format!(
                "the report inside ({}) could not be read ({}): {} are not known",
                archive.embedded_report().unwrap_or("?"),
                crate::error::one_line(&e),
                lost.join(", ")
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether the GPU frames of `p` are stored (false without any).
pub(super) fn gpu_frames_stored(db: &Db, p: Process) -> Result<bool, NodeError> {
    Ok(gpu_frames_node(db, p)?.is_some_and(|n| db.engine().is_stored(&n)))
}

/// Whether the compile frame of `p` is stored (false without any).
pub(super) fn compile_frame_stored(db: &Db, p: Process) -> Result<bool, NodeError> {
    Ok(pushpop_member(db, p)?
        .is_some_and(|(_, pushpop)| db.engine().is_stored(&CompileFrameNode { pushpop })))
}

/// The key of a process's GPU frames (None for an NVTX-only capture): the key of what its own
/// profile holds, and its position in the run only when its frames take their device from it
/// (see [`gpu_frames`]).
pub fn gpu_frames_key(db: &Db, p: Process) -> Result<Option<Key>, NodeError> {
    let Some(node) = gpu_frames_node(db, p)? else {
        return Ok(None);
    };
    let key = node.key();
    Ok(Some(placed_key(db, p, key)?))
}

fn placed_key(db: &Db, p: Process, frames: Key) -> Result<Key, NodeError> {
    Ok(if *frames_unplaced(db, p)?.value {
        KeyBuilder::of(&PLACED_GPU_FRAMES)
            .input(&frames)
            .param("position", p.position(db).to_le_bytes())
            .finish()
    } else {
        frames
    })
}

/// Whether `p`'s frames have rows that only its position in the run can place (a stored
/// node, memoised here: every key built on the frames asks). Only asked of a process that
/// has frames.
#[salsa::tracked(returns(clone))]
fn frames_unplaced(db: &dyn Graph, p: Process) -> NodeResult<bool> {
    let db = db.db();
    let own = gpu_frames_node(db, p)?.expect("asked only with frames");
    let node = UnplacedNode {
        gpu_frames: own.key(),
    };
    let (key, value) = fail(db.engine().compute(&node, &p.label(db), || {
        let g = own_gpu_frames(db, p, &own)?;
        Ok(frames::placement::has_unplaced(&g.value.0))
    }))?;
    Ok(Out { key, value })
}

/// Module and thunk frames of one process (None for an NVTX-only capture). A volatile node:
/// not memoised beyond its holders, so that only the frames of the processes being worked on
/// are in memory (the small per-process results computed from them are memoised).
///
/// The frames are built from the process's own profile alone, so that they (and everything
/// computed from them) are the same whichever run the process is part of: a process whose
/// launching threads name no device gets [`frames::placement::UNPLACED`], replaced here by its
/// position in the run (and then its key says so, see [`gpu_frames_key`]).
pub fn gpu_frames(db: &Db, p: Process) -> Result<Option<Out<Tables>>, NodeError> {
    let Some(node) = gpu_frames_node(db, p)? else {
        return Ok(None);
    };
    let own = own_gpu_frames(db, p, &node)?;
    let key = placed_key(db, p, own.key)?;
    if key == own.key {
        return Ok(Some(own));
    }
    let placed = fail(frames::placement::place(
        &own.value.0,
        p.position(db) as i32,
    ))?;
    Ok(Some(Out {
        key,
        value: Arc::new(Tables(placed)),
    }))
}

/// A process's own GPU frames (as built from its profile, before any placement; None for an
/// NVTX-only capture): while a caller holds them, every request for the process's frames
/// reuses them instead of loading them from the store.
pub fn own_frames(db: &Db, p: Process) -> Result<Option<Arc<Tables>>, NodeError> {
    let Some(node) = gpu_frames_node(db, p)? else {
        return Ok(None);
    };
    Ok(Some(own_gpu_frames(db, p, &node)?.value))
}

fn own_gpu_frames(db: &Db, p: Process, node: &GpuFramesNode) -> Result<Out<Tables>, NodeError> {
    let label = p.label(db);
    let (key, value) = fail(db.engine().compute(node, &label, || {
        let member = p.resolve(db, archive::TRACE).expect("key found it");
        let ranges = match derived_table(db, p, &member)? {
            Some(table) => table,
            None => in_member(db, p, &member, trace::read(read_member(db, p, &member)?))?,
        };
        let threads = match p.resolve(db, archive::THREAD_METADATA) {
            Some(m) => in_member(
                db,
                p,
                &m,
                trace::read_thread_metadata(read_member(db, p, &m)?),
            )?,
            None => trace::ThreadNames {
                pid: vec![],
                tid: vec![],
                name: vec![],
            },
        };
        let progs = programs(db, p)?;
        let mut map = programs_map(&progs.value);
        let archive = p.archive_ref(db);
        map.dump = match archive.capture_dump() {
            Some(d) => Some(d.display().to_string()),
            None if !archive.dump_files(p.stem(db).as_deref()).is_empty() => {
                Some(format!("{}: dump/", archive.path.display()))
            }
            None => None,
        };
        // An error of the graph members names its member already.
        let graphs_failed = std::cell::Cell::new(false);
        let f = match frames::gpu::build(
            ranges,
            || graph_inputs(db, p).inspect_err(|_| graphs_failed.set(true)),
            &threads,
            &map,
            frames::placement::UNPLACED,
        ) {
            // Names the dump already.
            Err(e) if e.is::<frames::gpu::DumpMismatch>() || graphs_failed.get() => Err(e),
            r => in_member(db, p, &member, r),
        }?;
        let mut notes = f.notes.0;
        let mut tables = vec![("module".into(), f.module), ("thunk".into(), f.thunk)];
        if let Some(m) = p.resolve(db, archive::TRANSFERS)
            && let Some(bytes) = optional_member(db, p, &m, &mut notes)?
        {
            let t = in_member(db, p, &m, formats::gpu_transfers::read(bytes))?;
            let (frame, more) = frames::between_modules::between_modules(&tables[0].1, &t)?;
            notes.extend(more);
            tables.push(("transfers".into(), frame));
        }
        // The program's own ranges and the memory events, as the members hold them.
        for (member, table, read) in [
            (
                archive::USER_NVTX,
                "user_nvtx",
                formats::user_nvtx::read as fn(Vec<u8>) -> anyhow::Result<RecordBatch>,
            ),
            (
                archive::MEMORY_USAGE,
                "memory_usage",
                formats::memory_usage::read,
            ),
        ] {
            if let Some(m) = p.resolve(db, member)
                && let Some(bytes) = optional_member(db, p, &m, &mut notes)?
            {
                tables.push((table.into(), in_member(db, p, &m, read(bytes))?));
            }
        }
        tables.push(("notes".into(), notes_batch(&notes)));
        Ok(Tables(tables))
    }))?;
    Ok(Out { key, value })
}

pub fn notes_batch(notes: &[String]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![(
        "note",
        Arc::new(StringArray::from_iter_values(notes.iter())) as _,
    )])
    .expect("one string column")
}

pub fn notes_of(t: &Tables) -> Vec<String> {
    t.get("notes")
        .map(|b| {
            b.column(0)
                .as_string::<i32>()
                .iter()
                .flatten()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------- compile frame

pub(super) fn pushpop_member(db: &Db, p: Process) -> Result<Option<(String, Key)>, NodeError> {
    if let Some(m) = member_key(db, p, archive::PUSHPOP_PARQUET)? {
        return Ok(Some(m));
    }
    member_key(db, p, archive::PUSHPOP_CSV_XZ)
}

/// The key of a process's compile frame (None without push/pop ranges).
pub fn compile_frame_key(db: &Db, p: Process) -> Result<Option<Key>, NodeError> {
    Ok(pushpop_member(db, p)?.map(|(_, pushpop)| CompileFrameNode { pushpop }.key()))
}

/// The compile frame of one process (None without push/pop ranges). Volatile, as
/// [`gpu_frames`].
pub fn compile_frame(db: &Db, p: Process) -> Result<Option<Out<Tables>>, NodeError> {
    let Some((_, pushpop)) = pushpop_member(db, p)? else {
        return Ok(None);
    };
    let label = p.label(db);
    let (key, value) = fail(
        db.engine()
            .compute(&CompileFrameNode { pushpop }, &label, || {
                let (member, _) = pushpop_member(db, p)?.expect("key found it");
                let bytes = read_member(db, p, &member)?;
                let raw = in_member(
                    db,
                    p,
                    &member,
                    // In a combined archive the member is
                    // `report_nvtx_pushpop_trace.csv.xz/<stem>`.
                    if member.starts_with(archive::PUSHPOP_CSV_XZ) {
                        pushpop::read_csv_xz(&bytes, p.archive_ref(db).xz_check())
                    } else {
                        frames::compile_rows::read_parquet(bytes)
                    },
                )?;
                let frame = in_member(db, p, &member, frames::compile::build_compile_frame(&raw))?;
                Ok(Tables(vec![("compile".into(), frame)]))
            }),
    )?;
    Ok(Some(Out { key, value }))
}

/// The [`CompiledNames`] of one process (empty without push/pop ranges).
pub fn compiled_names(db: &Db, p: Process) -> Result<Out<CompiledNames>, NodeError> {
    let Some(frame) = compile_frame_key(db, p)? else {
        return Ok(Out {
            key: super::NONE,
            value: Arc::new(CompiledNames::default()),
        });
    };
    let node = CompiledNamesNode {
        compile_frame: frame,
    };
    let (key, value) = fail(db.engine().compute(&node, &p.label(db), || {
        let cf = compile_frame(db, p)?.expect("the key implies a frame");
        let (ids, names) =
            frames::compile::program_columns(cf.value.get("compile").expect("compile table"))?;
        let set: BTreeSet<(i64, String)> = ids
            .iter()
            .enumerate()
            .filter(|&(_, &id)| id >= 0)
            .map(|(i, &id)| (id, names.value(i).to_string()))
            .collect();
        Ok(CompiledNames(set.into_iter().collect()))
    }))?;
    Ok(Out { key, value })
}

fn compiled_node(db: &Db, p: Process) -> Result<CompiledProgramsNode, NodeError> {
    Ok(CompiledProgramsNode {
        compile_frame: compile_frame_key(db, p)?,
        programs: programs_key(db, p)?,
    })
}

/// The key of [`compiled_programs`].
pub fn compiled_key(db: &Db, p: Process) -> Result<Key, NodeError> {
    Ok(compiled_node(db, p)?.key())
}

/// Stable ids of the programs whose compilation one process's profile contains.
#[salsa::tracked(returns(clone))]
pub fn compiled_programs(db: &dyn Graph, p: Process) -> NodeResult<Vec<String>> {
    let db = db.db();
    let label = p.label(db);
    let (key, value) = fail(db.engine().compute(&compiled_node(db, p)?, &label, || {
        let names = compiled_names(db, p)?;
        if names.value.0.is_empty() {
            return Ok(vec![]);
        }
        let progs = programs(db, p)?;
        let map = programs_map(&progs.value);
        let set: BTreeSet<String> = names
            .value
            .0
            .iter()
            .map(|(id, name)| map.stable_id(Some(*id), name))
            .collect();
        Ok(set.into_iter().collect())
    }))?;
    Ok(Out { key, value })
}

// ---------------------------------------------------------------- the warm-up context

/// The stored node that says whether `p`'s frames need its position (None without frames),
/// as (kind, key).
pub(super) fn unplaced_node(db: &Db, p: Process) -> Result<Option<(String, Key)>, NodeError> {
    Ok(gpu_frames_node(db, p)?.map(|n| {
        let u = UnplacedNode {
            gpu_frames: n.key(),
        };
        (u.kind().to_string(), u.key())
    }))
}

/// The stored frames of `p` (GPU and compile), as (kind, key): what deciding which of them
/// to build asks about.
pub(super) fn frame_nodes(db: &Db, p: Process) -> Result<Vec<(String, Key)>, NodeError> {
    let mut out = Vec::new();
    if let Some(n) = gpu_frames_node(db, p)? {
        out.push((n.kind().to_string(), n.key()));
    }
    if let Some((_, pushpop)) = pushpop_member(db, p)? {
        let n = CompileFrameNode { pushpop };
        out.push((n.kind().to_string(), n.key()));
    }
    Ok(out)
}

/// The stored nodes of `p` that the run's warm-up context reads, as (kind, key).
pub(super) fn context_nodes(db: &Db, p: Process) -> Result<Vec<(String, Key)>, NodeError> {
    let facts = ProcessFactsNode {
        gpu_frames: gpu_frames_key(db, p)?,
    };
    let compiled = compiled_node(db, p)?;
    Ok(vec![
        (facts.kind().to_string(), facts.key()),
        (compiled.kind().to_string(), compiled.key()),
    ])
}

pub(super) fn facts_key(db: &Db, p: Process) -> Result<Key, NodeError> {
    Ok(ProcessFactsNode {
        gpu_frames: gpu_frames_key(db, p)?,
    }
    .key())
}

#[salsa::tracked(returns(clone))]
pub fn process_facts(db: &dyn Graph, p: Process) -> NodeResult<ProcessFacts> {
    let db = db.db();
    let node = ProcessFactsNode {
        gpu_frames: gpu_frames_key(db, p)?,
    };
    let (key, value) = fail(db.engine().compute(&node, &p.label(db), || {
        let Some(g) = gpu_frames(db, p)? else {
            return Ok(ProcessFacts {
                has_communication: false,
                programs: BTreeSet::new(),
                devices: BTreeSet::new(),
                span_ns: None,
                module_executions: 0,
            });
        };
        let thunk = g.value.get("thunk").expect("thunk frame");
        let module = g.value.get("module").expect("module frame");
        let has_communication = thunk
            .column_by_name(frames::gpu::COMMUNICATION)
            .expect("communication column")
            .as_boolean()
            .true_count()
            > 0;
        let ids = module
            .column_by_name(frames::gpu::PROGRAM_ID)
            .expect("program id column")
            .as_string::<i32>();
        let programs = ids.iter().flatten().map(str::to_string).collect();
        let int = |name: &str| {
            module
                .column_by_name(name)
                .map(|c| c.as_primitive::<Int64Type>().clone())
        };
        let devices = module
            .column_by_name(frames::gpu::DEVICE)
            .map(|c| {
                c.as_primitive::<Int32Type>()
                    .values()
                    .iter()
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        let span_ns = match (int(frames::gpu::PROJ_START), int(frames::gpu::PROJ_DUR)) {
            (Some(start), Some(dur)) if !start.is_empty() => Some(
                start
                    .values()
                    .iter()
                    .zip(dur.values())
                    .fold((i64::MAX, i64::MIN), |(a, b), (&s, &d)| {
                        (a.min(s), b.max(s.saturating_add(d)))
                    }),
            ),
            _ => None,
        };
        Ok(ProcessFacts {
            has_communication,
            programs,
            devices,
            span_ns,
            module_executions: module.num_rows() as u64,
        })
    }))?;
    Ok(Out { key, value })
}

#[salsa::tracked(returns(clone))]
pub fn warmup_context(db: &dyn Graph, run: Run) -> NodeResult<WarmupContext> {
    let db = db.db();
    let mut inputs = Vec::new();
    for &p in run.processes(db) {
        inputs.push(facts_key(db, p)?);
        inputs.push(compiled_key(db, p)?);
    }
    let node = WarmupContextNode { inputs };
    let (key, value) = fail(db.engine().compute(&node, "", || {
        let mut ctx = WarmupContext::default();
        for &p in run.processes(db) {
            ctx.has_communication |= process_facts(db, p)?.value.has_communication;
            ctx.compiled
                .extend(compiled_programs(db, p)?.value.iter().cloned());
        }
        Ok(ctx)
    }))?;
    Ok(Out { key, value })
}

/// Steady-state frames being used, by the keys of the GPU frames and the warm-up context they
/// were split with: the analyses of one process, run side by side, share one split instead of
/// each copying the frames (docs/design.md, "Bounded memory"). Held weakly: a split is freed
/// when its last reader is done. Each has a lock of its own, so that a second reader of a
/// process waits for the first one's split while other processes' splits go on.
type SteadySlot = Arc<std::sync::Mutex<std::sync::Weak<frames::warmup::Steady>>>;
static STEADY: std::sync::Mutex<Vec<(Key, Key, SteadySlot)>> = std::sync::Mutex::new(Vec::new());

/// The steady-state frames of one process (its GPU frames `g`), split with the run's
/// warm-up context.
pub(super) fn steady_frames(
    db: &Db,
    run: Run,
    p: Process,
    g: &Out<Tables>,
) -> Result<Arc<frames::warmup::Steady>, NodeError> {
    let ctx = warmup_context(db, run)?;
    let slot = {
        let mut held = STEADY.lock().unwrap_or_else(|e| e.into_inner());
        // Slots nobody uses and whose split is gone (one being split is kept).
        held.retain(|(_, _, s)| {
            Arc::strong_count(s) > 1 || s.try_lock().map_or(true, |w| w.strong_count() > 0)
        });
        match held
            .iter()
            .find(|(gk, ck, _)| *gk == g.key && *ck == ctx.key)
        {
            Some((_, _, s)) => s.clone(),
            None => {
                let s = SteadySlot::default();
                held.push((g.key, ctx.key, s.clone()));
                s
            }
        }
    };
    let mut weak = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = weak.upgrade() {
        return Ok(s);
    }
    let steady = Arc::new(split_steady(db, p, g, &ctx)?);
    *weak = Arc::downgrade(&steady);
    Ok(steady)
}

fn split_steady(
    db: &Db,
    p: Process,
    g: &Out<Tables>,
    ctx: &Out<WarmupContext>,
) -> Result<frames::warmup::Steady, NodeError> {
    let mut steady = fail(frames::warmup::steady_state_in(
        g.value.get("module").expect("module frame"),
        g.value.get("thunk").expect("thunk frame"),
        &ctx.value.compiled,
        ctx.value.has_communication,
    ))?;
    let label = p.label(db);
    steady.notes = steady
        .notes
        .iter()
        .map(|n| format!("{label}: {n}"))
        .collect();
    Ok(steady)
}

/// The remarks made while building a process's GPU frames `g`, prefixed with its `label`.
pub(super) fn frame_notes(g: &Out<Tables>, label: &str) -> Vec<String> {
    notes_of(&g.value)
        .into_iter()
        .map(|n| format!("{label}: {n}"))
        .collect()
}
