//! Module and thunk frames of one profiled process, from its projected NVTX ranges
//! (docs/design.md, "NVTX names" to "Formulas"): deepest thunks linked to their XlaModule run,
//! to the module fingerprint, devices from launcher threads, edge effects removed,
//! communication classified from the HLO and overlap with compute measured.

use super::command_buffers::{self as cb, GraphInputs};
use super::ordering::{overlap, ranks};
use super::strings::dictionary;
use super::thunk_rows::{NO_NAME, Names, Program, ThunkRow};
use crate::formats::hlo::HloModuleInfo;
use crate::formats::trace::{self as tr, ThreadNames};
use crate::nvtx;
use anyhow::Result;
use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

pub const PROGRAM_ID: &str = "ProgramId";
pub const PROGRAM_NAME: &str = "ProgramName";
pub const PROGRAM_EXECUTION: &str = "ProgramExecution";
pub const DEVICE: &str = "Device";
pub const PROJ_START: &str = "ProjStart";
pub const PROJ_DUR: &str = "ProjDur";
pub const ORIG_START: &str = "OrigStart";
pub const ORIG_DUR: &str = "OrigDur";
pub const NUM_THUNKS: &str = "NumThunks";
pub const NUM_GPU_OPS: &str = "NumGPUOps";
pub const NAME: &str = "Name";
pub const OP_NAME: &str = "OpName";
pub const THUNK_INDEX: &str = "ThunkIndex";
pub const THUNK_EXECUTION: &str = "ThunkExecution";
pub const PROJ_DUR_HIDDEN: &str = "ProjDurHidden";
pub const COMMUNICATION: &str = "Communication";
pub const COLLECTIVE: &str = "Collective";
pub const MESSAGE_SIZE: &str = "MessageSize";
pub const COLLECTIVE_SIZE: &str = "CollectiveSize";
pub const ALGO_BW: &str = "AlgorithmBandwidthGBPerSec";
pub const BUS_BW: &str = "BusBandwidthGBPerSec";
pub const COMMAND_BUFFER: &str = "CommandBuffer";

/// No module (a thunk outside any): the module row of a range.
const NONE: u32 = u32::MAX;

/// The stable id of autotuning executions (no program id).
pub const UNKNOWN_PROGRAM: &str = "unknown";

/// Module rows: one per XlaModule execution. Times in ns.
pub static MODULE_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new(PROGRAM_ID, DataType::Utf8, false),
        Field::new(PROGRAM_NAME, DataType::Utf8, false),
        Field::new(PROGRAM_EXECUTION, DataType::Int32, false),
        Field::new(DEVICE, DataType::Int32, false),
        Field::new(PROJ_START, DataType::Int64, false),
        Field::new(PROJ_DUR, DataType::Int64, false),
        Field::new(ORIG_START, DataType::Int64, true),
        Field::new(ORIG_DUR, DataType::Int64, true),
        Field::new(NUM_THUNKS, DataType::Int32, false),
        Field::new(NUM_GPU_OPS, DataType::Int64, true),
    ]))
});

/// Thunk rows: one per deepest thunk execution, a command buffer's execution opened up into
/// one per instruction it ran (`CommandBuffer` names it). `ProjDur` is the exposed (not
/// hidden) time.
pub static THUNK_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    // Names are dictionaries (super::strings): a row per kernel, a few hundred names.
    let names = super::strings::dictionary_type;
    Arc::new(Schema::new(vec![
        Field::new(PROGRAM_ID, names(), false),
        Field::new(PROGRAM_EXECUTION, DataType::Int32, false),
        Field::new(DEVICE, DataType::Int32, false),
        Field::new(THUNK_INDEX, DataType::Int32, false),
        Field::new(THUNK_EXECUTION, DataType::Int32, false),
        Field::new(NAME, names(), false),
        Field::new(OP_NAME, names(), true),
        Field::new(PROJ_START, DataType::Int64, false),
        Field::new(PROJ_DUR, DataType::Int64, false),
        Field::new(PROJ_DUR_HIDDEN, DataType::Int64, false),
        Field::new(COMMUNICATION, DataType::Boolean, false),
        Field::new(COLLECTIVE, names(), true),
        Field::new(MESSAGE_SIZE, DataType::Int64, true),
        Field::new(COLLECTIVE_SIZE, DataType::Int32, true),
        Field::new(ALGO_BW, DataType::Float64, true),
        Field::new(BUS_BW, DataType::Float64, true),
        Field::new(COMMAND_BUFFER, names(), true),
    ]))
});

/// The after-optimizations HLO of one process's programs, by program id.
#[derive(Default, Clone)]
pub struct Programs {
    pub by_id: BTreeMap<i64, Arc<HloModuleInfo>>,
    /// Where the process's XLA dump is, when it has one (even one without modules): the
    /// profile's programs are then checked against it.
    pub dump: Option<String>,
}

impl Programs {
    /// The HLO modules by stable program id (several modules may share one).
    pub fn by_program(
        &self,
    ) -> std::collections::BTreeMap<String, Vec<&crate::formats::hlo::HloModuleInfo>> {
        let mut out: std::collections::BTreeMap<String, Vec<_>> = Default::default();
        for m in self.by_id.values() {
            out.entry(self.stable_id(Some(m.id), &m.name))
                .or_default()
                .push(m.as_ref());
        }
        out
    }

    /// The stable id of program `id` named `name`: its fingerprint; a name-based id when the
    /// dump is missing; "unknown" for autotuning executions (no program id).
    pub fn stable_id(&self, id: Option<i64>, name: &str) -> String {
        let Some(id) = id else {
            return UNKNOWN_PROGRAM.to_string();
        };
        match self.hlo(Some(id), name).and_then(|m| m.fingerprint.clone()) {
            Some(fp) if !fp.is_empty() => fp,
            _ => format!("{name}#{id}"),
        }
    }

    /// The HLO of program `id`, if the dump holds a module of that id and `name` (a module
    /// of the same id under another name belongs to another program).
    pub fn hlo(&self, id: Option<i64>, name: &str) -> Option<&HloModuleInfo> {
        self.by_id
            .get(&id?)
            .map(|a| a.as_ref())
            .filter(|m| m.name == name)
    }
}

/// The XLA dump holds none of the programs the profile ran (the message names the dump).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DumpMismatch(pub String);

/// Check the programs the profile ran against the process's dump: none of them there is an
/// error (a dump of another program, or an empty one); some missing is a note saying what
/// the analyses lose.
fn check_dump(
    programs: &Programs,
    ran: &std::collections::BTreeSet<(i64, &str)>,
    notes: &mut Notes,
) -> Result<()> {
    let Some(dump) = &programs.dump else {
        return Ok(());
    };
    let missing: Vec<String> = ran
        .iter()
        .filter(|(id, name)| programs.hlo(Some(*id), name).is_none())
        .map(|(id, name)| format!("{name} (id {id})"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = |v: &[String]| {
        let mut s = v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        if v.len() > 5 {
            s.push_str(&format!(", and {} more", v.len() - 5));
        }
        s
    };
    if missing.len() == ran.len() {
        return Err(DumpMismatch(format!(
            "{dump}: the XLA dump holds none of the {} programs the profile ran ({}; it has {} after-optimization modules): a dump of another program or run?",
            ran.len(),
            list(&missing),
            programs.by_id.len()
        ))
        .into());
    }
    notes.0.push(format!(
        "{} of the {} programs the profile ran are missing from the XLA dump: {}. Without their HLO their thunks count as compute: the summary's communication share, communication's bandwidth and stragglers leave their collectives out",
        missing.len(),
        ran.len(),
        list(&missing)
    ));
    Ok(())
}

/// Notes worth telling the user (edge effects, unknown threads...).
#[derive(Default, Debug, Clone)]
pub struct Notes(pub Vec<String>);

pub struct GpuFrames {
    pub module: RecordBatch,
    pub thunk: RecordBatch,
    pub notes: Notes,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Module,
    Thunk,
    Other,
}

/// Build the module and thunk frames of one process. `fallback_device` is used for the
/// launching thread when the process names no XlaLauncher threads; what `graphs` gives opens
/// command buffers up (asked for once the ranges are done with, so the two are not held
/// together).
pub fn build(
    ranges: RecordBatch,
    graphs: impl FnOnce() -> Result<GraphInputs>,
    threads: &ThreadNames,
    programs: &Programs,
    fallback_device: i32,
) -> Result<GpuFrames> {
    let mut notes = Notes::default();
    // The projected ranges and what is derived from them row by row are dropped once the
    // thunk rows are made: only a range id per row is kept (docs/design.md, "Bounded memory").
    let (module, ts, mut names, progs) = {
        let ranges = ranges;
        let n = ranges.num_rows();
        anyhow::ensure!(
            u32::try_from(n).is_ok_and(|n| n < NONE),
            "{n} NVTX ranges in one process: more than this tool counts (2^32 - 1)"
        );
        let name = crate::formats::columns::names(&ranges, tr::NAME)?;
        let i64col = |c: &str| {
            ranges
                .column_by_name(c)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let range_id = i64col(tr::RANGE_ID);
        let parent_id = i64col(tr::PARENT_ID);
        let proj_start = i64col(tr::PROJ_START);
        let proj_dur = i64col(tr::PROJ_DUR);
        let orig_start = i64col(tr::ORIG_START);
        let orig_dur = i64col(tr::ORIG_DUR);
        let pid = i64col(tr::PID);
        let tid = i64col(tr::TID);
        let gpu_ops = i64col(tr::NUM_GPU_OPS);

        // Rows in RangeId order, and RangeId -> row by binary search (on the column itself
        // when it is in order, as the trace's rows are).
        let ids = range_id.values();
        let in_order = ids.is_sorted();
        let mut order: Vec<u32> = (0..n as u32).collect();
        if !in_order {
            order.sort_by_key(|&r| ids[r as usize]);
        }
        let ids_sorted: std::borrow::Cow<[i64]> = if in_order {
            std::borrow::Cow::Borrowed(&ids[..])
        } else {
            order.iter().map(|&r| ids[r as usize]).collect()
        };
        let row_of = |id: i64| -> Option<usize> {
            ids_sorted
                .binary_search(&id)
                .ok()
                .map(|i| order[i] as usize)
        };
        let parent = |r: usize| -> Option<usize> {
            if parent_id.is_null(r) {
                None
            } else {
                row_of(parent_id.value(r))
            }
        };
        let start_of = |r: usize| -> i64 {
            if orig_start.is_null(r) {
                proj_start.value(r)
            } else {
                orig_start.value(r)
            }
        };

        let mut kind = vec![Kind::Other; n];
        // Ranges named like XLA's but not in its vocabulary: counted, never silently dropped.
        let mut malformed = 0usize;
        let mut malformed_example = None;
        let mut parsed_modules = 0usize;
        for r in 0..n {
            let s = name.value(r);
            let t = nvtx::strip_tsl(s);
            let ok = if t.starts_with("Thunk:#") {
                kind[r] = Kind::Thunk;
                nvtx::parse_thunk(s).is_some()
            } else if t.starts_with("XlaModule:#") {
                kind[r] = Kind::Module;
                let ok = nvtx::parse_module(s).is_some();
                parsed_modules += ok as usize;
                ok
            } else {
                !(t.starts_with("Thunk:") || t.starts_with("XlaModule:"))
            };
            if !ok {
                malformed += 1;
                malformed_example.get_or_insert(s);
            }
        }
        if malformed > 0 {
            let example = malformed_example.unwrap_or_default();
            if parsed_modules == 0 {
                anyhow::bail!(
                    "{malformed} ranges are named like XLA modules or thunks but not in XLA's NVTX form (e.g. {example:?}): not a trace of XLA's ranges, or a damaged one"
                );
            }
            notes.0.push(format!(
                "{malformed} ranges named like XLA modules or thunks do not parse (e.g. {example:?}); those modules are counted under their full range name"
            ));
        }

        // Thunks that started before the first module are edge effects of the capture start.
        let first_module = (0..n)
            .filter(|&r| kind[r] == Kind::Module)
            .map(start_of)
            .min();
        let mut is_thunk: Vec<bool> = (0..n)
            .map(|r| kind[r] == Kind::Thunk && first_module.is_some_and(|f| start_of(r) >= f))
            .collect();
        let early = (0..n)
            .filter(|&r| kind[r] == Kind::Thunk && !is_thunk[r])
            .count();
        if early > 0 {
            notes.0.push(format!(
                "ignored {early} thunks that started before the first module"
            ));
        }

        // Link each thunk to its closest XlaModule ancestor; thunks with thunk children are not
        // the deepest and are dropped (command buffers hold their thunks).
        let mut module_of: Vec<u32> = vec![NONE; n];
        let mut has_child_thunk = vec![false; n];
        for r in 0..n {
            if !is_thunk[r] {
                continue;
            }
            let mut p = parent(r);
            let mut depth = 0;
            while let Some(q) = p {
                match kind[q] {
                    Kind::Module => {
                        module_of[r] = q as u32;
                        break;
                    }
                    Kind::Thunk => has_child_thunk[q] = true,
                    Kind::Other => {}
                }
                depth += 1;
                if depth > 10_000 {
                    break;
                }
                p = parent(q);
            }
        }
        let orphans = (0..n)
            .filter(|&r| is_thunk[r] && module_of[r] == NONE)
            .count();
        if orphans > 0 {
            notes.0.push(format!(
                "ignored {orphans} thunks outside any XlaModule range"
            ));
        }
        for r in 0..n {
            is_thunk[r] = is_thunk[r] && !has_child_thunk[r] && module_of[r] != NONE;
        }

        let mut thunks_per_module = vec![0i32; n];
        for r in 0..n {
            if is_thunk[r] {
                thunks_per_module[module_of[r] as usize] += 1;
            }
        }
        // Modules with at least one deepest thunk, in RangeId order.
        let mut modules: Vec<usize> = order
            .iter()
            .map(|&r| r as usize)
            .filter(|&r| thunks_per_module[r] > 0)
            .collect();

        // The capture may stop inside the last execution of a module: drop it when it has clearly
        // fewer GPU operations than the earlier ones (mean - population std).
        if gpu_ops.null_count() < n {
            let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
            for &r in &modules {
                by_name.entry(name.value(r)).or_default().push(r);
            }
            let mut dropped = Vec::new();
            for (nm, rows) in by_name {
                let (last, rest) = rows.split_last().unwrap();
                if rest.is_empty() || gpu_ops.is_null(*last) {
                    continue;
                }
                let xs: Vec<f64> = rest.iter().map(|&r| gpu_ops.value(r) as f64).collect();
                let mean = xs.iter().sum::<f64>() / xs.len() as f64;
                let std =
                    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
                if (gpu_ops.value(*last) as f64) < mean - std {
                    notes.0.push(format!(
                        "dropped the last execution of {} ({} GPU operations vs {:.1} ± {:.1} before): the capture stopped inside it",
                        nvtx::parse_module(nm).map(|m| m.hlo_module).unwrap_or(nm),
                        gpu_ops.value(*last),
                        mean,
                        std
                    ));
                    dropped.push(*last);
                }
            }
            if !dropped.is_empty() {
                modules.retain(|r| !dropped.contains(r));
                for r in 0..n {
                    if is_thunk[r] && dropped.contains(&(module_of[r] as usize)) {
                        is_thunk[r] = false;
                    }
                }
            }
        }

        super::nesting::check(&super::nesting::View {
            name: &name,
            range_id: &range_id,
            start: &proj_start,
            dur: &proj_dur,
            is_thunk: &is_thunk,
            module_of: &module_of,
        })?;

        // Program identity and execution counters (per launching thread and program).
        let mut progs: Vec<Program> = Vec::new();
        let mut prog_index: FxHashMap<(Arc<str>, String, Option<i64>), u32> = FxHashMap::default();
        let mut prog_of: FxHashMap<usize, u32> = FxHashMap::default();
        let mut exec_of: FxHashMap<usize, i32> = FxHashMap::default();
        let mut counters: FxHashMap<(i64, i64, Arc<str>), i32> = FxHashMap::default();
        for &r in &modules {
            let parsed = nvtx::parse_module(name.value(r));
            let (hlo_module, numeric) = parsed
                .as_ref()
                .map(|m| (m.hlo_module.to_string(), m.program_id))
                .unwrap_or_else(|| (name.value(r).to_string(), None));
            let stable: Arc<str> = Arc::from(programs.stable_id(numeric, &hlo_module));
            let c = counters
                .entry((pid.value(r), tid.value(r), stable.clone()))
                .or_insert(0);
            exec_of.insert(r, *c);
            *c += 1;
            let next = progs.len() as u32;
            let p = *prog_index
                .entry((stable.clone(), hlo_module.clone(), numeric))
                .or_insert_with(|| {
                    progs.push(Program {
                        hlo: programs.hlo(numeric, &hlo_module),
                        stable,
                        hlo_module,
                        numeric,
                        rank: 0,
                    });
                    next
                });
            prog_of.insert(r, p);
        }
        drop(prog_index);
        let prog_ranks = ranks(progs.iter().map(|p| &*p.stable));
        for (p, rank) in progs.iter_mut().zip(prog_ranks) {
            p.rank = rank;
        }
        let ran: std::collections::BTreeSet<(i64, &str)> = progs
            .iter()
            .filter_map(|p| Some((p.numeric?, p.hlo_module.as_str())))
            .collect();
        check_dump(programs, &ran, &mut notes)?;

        // Devices: launcher threads name their global device; a process driving one GPU may
        // launch from its main thread, which then takes the process's first device.
        let mut device_of_thread: BTreeMap<(i64, i64), i32> = BTreeMap::new();
        let mut first_device_of_pid: BTreeMap<i64, (i64, i32)> = BTreeMap::new();
        for i in 0..threads.name.len() {
            if let Some(l) = nvtx::parse_launcher(&threads.name[i]) {
                device_of_thread.insert((threads.pid[i], threads.tid[i]), l.global as i32);
                let e = first_device_of_pid
                    .entry(threads.pid[i])
                    .or_insert((l.local, l.global as i32));
                if l.local < e.0 {
                    *e = (l.local, l.global as i32);
                }
            }
        }
        let mut threads_of_program: BTreeMap<Option<i64>, std::collections::BTreeSet<(i64, i64)>> =
            BTreeMap::new();
        for r in 0..n {
            if is_thunk[r] {
                let m = module_of[r] as usize;
                threads_of_program
                    .entry(prog_of.get(&m).and_then(|&p| progs[p as usize].numeric))
                    .or_default()
                    .insert((pid.value(r), tid.value(r)));
            }
        }
        let mut main_candidates: std::collections::BTreeSet<(i64, i64)> = threads_of_program
            .values()
            .filter(|s| s.len() == 1)
            .map(|s| *s.iter().next().unwrap())
            .collect();
        let compile_threads: std::collections::BTreeSet<(i64, i64)> = (0..n)
            .filter(|&r| nvtx::strip_tsl(name.value(r)).starts_with("XlaCompile:#"))
            .map(|r| (pid.value(r), tid.value(r)))
            .collect();
        if compile_threads.len() == 1 {
            main_candidates.extend(compile_threads);
        }
        for (p, t) in main_candidates {
            device_of_thread.entry((p, t)).or_insert_with(|| {
                first_device_of_pid
                    .get(&p)
                    .map(|d| d.1)
                    .unwrap_or(fallback_device)
            });
        }
        let device = |r: usize| device_of_thread.get(&(pid.value(r), tid.value(r))).copied();
        let unplaced = (0..n)
            .filter(|&r| is_thunk[r] && device(r).is_none())
            .count();
        let thunks = is_thunk.iter().filter(|&&t| t).count();
        // Thread metadata that places none of the trace's thunks belongs to another process
        // (or lost its rows): the analyses would find nothing, and say so only in a note.
        if unplaced > 0 && unplaced == thunks && !threads.name.is_empty() {
            anyhow::bail!(
                "{}: names none of the {} threads that launched the trace's {thunks} thunks (a thread table of another process, or a damaged one)",
                crate::formats::archive::THREAD_METADATA,
                (0..n)
                    .filter(|&r| is_thunk[r])
                    .map(|r| (pid.value(r), tid.value(r)))
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
            );
        }
        if unplaced > 0 {
            notes.0.push(format!(
                "ignored {unplaced} thunks launched from threads that map to no device"
            ));
        }

        // ---- module frame
        let mut m_rows: Vec<usize> = modules
            .iter()
            .copied()
            .filter(|&r| device(r).is_some())
            .collect();
        m_rows.sort_by_key(|&r| range_id.value(r));
        let module = RecordBatch::try_new(
            MODULE_SCHEMA.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(
                    m_rows.iter().map(|r| &*progs[prog_of[r] as usize].stable),
                )) as ArrayRef,
                Arc::new(StringArray::from_iter_values(
                    m_rows
                        .iter()
                        .map(|r| progs[prog_of[r] as usize].hlo_module.as_str()),
                )),
                Arc::new(Int32Array::from_iter_values(
                    m_rows.iter().map(|r| exec_of[r]),
                )),
                Arc::new(Int32Array::from_iter_values(
                    m_rows.iter().map(|&r| device(r).unwrap()),
                )),
                Arc::new(Int64Array::from_iter_values(
                    m_rows.iter().map(|&r| proj_start.value(r)),
                )),
                Arc::new(Int64Array::from_iter_values(
                    m_rows.iter().map(|&r| proj_dur.value(r)),
                )),
                Arc::new(
                    m_rows
                        .iter()
                        .map(|&r| orig_start.is_valid(r).then(|| orig_start.value(r)))
                        .collect::<Int64Array>(),
                ),
                Arc::new(
                    m_rows
                        .iter()
                        .map(|&r| orig_dur.is_valid(r).then(|| orig_dur.value(r)))
                        .collect::<Int64Array>(),
                ),
                Arc::new(Int32Array::from_iter_values(
                    m_rows.iter().map(|&r| thunks_per_module[r]),
                )),
                Arc::new(
                    m_rows
                        .iter()
                        .map(|&r| gpu_ops.is_valid(r).then(|| gpu_ops.value(r)))
                        .collect::<Int64Array>(),
                ),
            ],
        )?;

        // ---- thunk frame
        let mut names = Names::default();
        let mut ts: Vec<ThunkRow> = Vec::with_capacity(is_thunk.iter().filter(|&&t| t).count());
        for r in order.iter().map(|&r| r as usize) {
            if !is_thunk[r] {
                continue;
            }
            let Some(dev) = device(r) else { continue };
            let m = module_of[r] as usize;
            let Some(&prog) = prog_of.get(&m) else {
                continue;
            };
            let parsed = nvtx::parse_thunk(name.value(r));
            let op = parsed
                .as_ref()
                .map(|t| t.hlo_op)
                .unwrap_or_else(|| nvtx::strip_tsl(name.value(r)));
            ts.push(ThunkRow {
                range: range_id.value(r),
                sub: 0,
                prog,
                exec: exec_of[&m],
                dev,
                op: names.intern(op),
                op_name: parsed
                    .and_then(|t| t.name)
                    .map_or(NO_NAME, |n| names.intern(n)),
                start: proj_start.value(r),
                dur: proj_dur.value(r),
                command_buffer: NO_NAME,
            });
        }
        (module, ts, names, progs)
    };
    let graphs = graphs()?;
    let (mut ts, _) = cb::expand(ts, &mut names, &progs, &graphs, &mut notes.0);
    drop(graphs);
    // Thunk index and per-name execution counters: sort by (program, execution, device,
    // RangeId) and sweep. Programs and instructions are compared by their rank among the
    // distinct names (the order of the names), so the sorts compare integers.
    anyhow::ensure!(
        u32::try_from(ts.len()).is_ok(),
        "{} thunk executions: more than this tool counts (2^32)",
        ts.len()
    );
    let prog_rank = |t: &ThunkRow| progs[t.prog as usize].rank;
    ts.sort_unstable_by_key(|t| (prog_rank(t), t.exec, t.dev, t.range, t.sub));
    let name_rank = ranks(names.iter());
    let op_rank = |t: &ThunkRow| name_rank[t.op as usize];
    let mut thunk_index = vec![0i32; ts.len()];
    for i in 1..ts.len() {
        let (a, b) = (&ts[i - 1], &ts[i]);
        let same = prog_rank(a) == prog_rank(b) && a.exec == b.exec && a.dev == b.dev;
        thunk_index[i] = if same { thunk_index[i - 1] + 1 } else { 0 };
    }
    // Rows by (program, execution, device, instruction); a stable sort keeps the rows'
    // (RangeId, position) order within each.
    let by_name = {
        let mut by_name: Vec<u32> = (0..ts.len() as u32).collect();
        by_name.sort_by_key(|&i| {
            let t = &ts[i as usize];
            (prog_rank(t), t.exec, t.dev, op_rank(t))
        });
        by_name
    };
    let mut thunk_exec = vec![0i32; ts.len()];
    for w in 1..by_name.len() {
        let (a, b) = (by_name[w - 1] as usize, by_name[w] as usize);
        let (ta, tb) = (&ts[a], &ts[b]);
        let same = prog_rank(ta) == prog_rank(tb)
            && ta.exec == tb.exec
            && ta.dev == tb.dev
            && op_rank(ta) == op_rank(tb);
        thunk_exec[b] = if same { thunk_exec[a] + 1 } else { 0 };
    }
    drop(by_name);

    // Communication classification from the HLO, looked up once per (program, instruction).
    let mut missing_ops = 0usize;
    let mut looked_up: FxHashMap<
        (u32, u32),
        Option<Option<&crate::formats::hlo::HloInstructionInfo>>,
    > = FxHashMap::default();
    let comm: Vec<Option<&crate::formats::hlo::CommunicationInfo>> = ts
        .iter()
        .map(|t| {
            let program = &progs[t.prog as usize];
            if &*program.stable == UNKNOWN_PROGRAM {
                return None;
            }
            // None: no HLO for the program; Some(None): no such instruction in it.
            let op = names.get(t.op);
            let lookup = *looked_up
                .entry((program.rank, t.op))
                .or_insert_with(|| program.hlo.map(|hlo| hlo.instruction(op)));
            match lookup? {
                Some(i) => i.communication.as_ref(),
                None if cb::is_command_buffer(op) => None,
                None => {
                    missing_ops += 1;
                    None
                }
            }
        })
        .collect();
    if missing_ops > 0 {
        notes.0.push(format!(
            "{missing_ops} thunks name HLO instructions missing from their module's dump; counted as compute"
        ));
    }

    // The columns the rows give, then the rows are dropped (docs/design.md, "Bounded memory").
    let program = dictionary(ts.iter().map(|t| Some(&*progs[t.prog as usize].stable)));
    let instruction = dictionary(ts.iter().map(|t| Some(names.get(t.op))));
    let op_name = dictionary(ts.iter().map(|t| names.opt(t.op_name)));
    let command_buffer = dictionary(ts.iter().map(|t| names.opt(t.command_buffer)));
    let exec = Int32Array::from_iter_values(ts.iter().map(|t| t.exec));
    let dev = Int32Array::from_iter_values(ts.iter().map(|t| t.dev));
    let start = Int64Array::from_iter_values(ts.iter().map(|t| t.start));
    let dur: Vec<i64> = ts.iter().map(|t| t.dur).collect();
    let program_of: Vec<u32> = ts.iter().map(prog_rank).collect();
    drop(ts);

    // Overlap: per (program, device), the part of each communication thunk covered by
    // compute thunks is hidden.
    let is_comm: Vec<bool> = comm.iter().map(|c| c.is_some()).collect();
    let hidden = overlap(
        dur.len(),
        |i| {
            let s = start.value(i);
            (program_of[i], dev.value(i), s, s + dur[i])
        },
        &is_comm,
    );
    drop(program_of);

    let exposed: Int64Array = dur.iter().zip(&hidden).map(|(d, h)| d - h).collect();
    let algbw: Float64Array = dur
        .iter()
        .zip(&comm)
        .map(|(&d, c)| {
            c.and_then(|c| {
                (d > 0).then(|| c.bandwidth_correction * c.message_size_bytes as f64 / d as f64)
            })
        })
        .collect();
    drop(dur);
    let busbw: Float64Array = algbw
        .iter()
        .zip(&comm)
        .map(|(a, c)| a.zip(*c).map(|(a, c)| a * c.bus_correction))
        .collect();
    let thunk = RecordBatch::try_new(
        THUNK_SCHEMA.clone(),
        vec![
            program,
            Arc::new(exec),
            Arc::new(dev),
            Arc::new(Int32Array::from(thunk_index)),
            Arc::new(Int32Array::from(thunk_exec)),
            instruction,
            op_name,
            Arc::new(start),
            Arc::new(exposed),
            Arc::new(Int64Array::from(hidden)),
            Arc::new(BooleanArray::from(is_comm)),
            dictionary(comm.iter().map(|c| c.map(|c| c.collective.as_str()))),
            Arc::new(
                comm.iter()
                    .map(|c| c.map(|c| c.message_size_bytes as i64))
                    .collect::<Int64Array>(),
            ),
            Arc::new(
                comm.iter()
                    .map(|c| c.map(|c| c.collective_size as i32))
                    .collect::<Int32Array>(),
            ),
            Arc::new(algbw),
            Arc::new(busbw),
            command_buffer,
        ],
    )?;
    Ok(GpuFrames {
        module,
        thunk,
        notes,
    })
}
