//! Per-process work in parallel, before the reduces: keying every input archive, decoding the
//! HLO dumps and building the compile frames (one flat pass over all processes, largest dumps
//! first), the run's warm-up context, and each process's shares of the requested analyses.
//! The reduces then find these values memoised.

use crate::analyses::{Reads, ShareUse};
use crate::engine::Key;
use crate::formats::archive::Archive;
use anyhow::Result;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::frames::{
    compile_frame, compile_frame_stored, compiled_names, compiled_programs, gpu_frames,
    gpu_frames_key, gpu_frames_stored, own_frames, process_facts, pushpop_member, unplaced_node,
    warmup_context,
};
use super::hlo::{HloMember, decode_dump, hlo_members, hlo_schema, schema_key};
use super::members::member_keys;
use super::needs::Needs;
use super::shares::{share_any, share_inputs};
use super::{Db, InputArchive, NodeError, Process, Run, fail};

/// Key the members of every input archive, then what each process's frames are keyed by, in
/// parallel (top level, outside any query): every key of the run is built on these.
pub fn prepare_archives(db: &Db, run: Run) -> Result<()> {
    use rayon::prelude::*;
    let mut archives: Vec<InputArchive> = Vec::new();
    for &p in run.processes(db) {
        if !archives.contains(&p.archive(db)) {
            archives.push(p.archive(db));
        }
    }
    super::prefetch::member_keys(db, &archives);
    archives
        .par_iter()
        .map_with(db.clone(), |db, &a| member_keys(db, a).map(|_| ()))
        .collect::<std::result::Result<Vec<()>, _>>()?;
    // Only warming memos: a failure here (a damaged dump) is said by whatever needs the key,
    // or not at all when nothing does. Only where it is cheap: a process whose frames do not
    // yet say whether they need its position is keyed by building its frames, which
    // `prepare_processes` schedules with the rest of the run's work.
    let procs = run.processes(db).clone();
    let _ = super::prefetch::unplaced(db, &procs);
    procs.par_iter().for_each_with(db.clone(), |db, &p| {
        if let Ok(Some((kind, key))) = unplaced_node(db, p)
            && db.engine().stored(&kind, &key)
        {
            let _ = gpu_frames_key(db, p);
        }
    });
    Ok(())
}

/// Whether every process's frames are known to say whether they need its position (the
/// stored node that keying anything built on them reads). When one is not, nothing keyed by
/// that process's frames (its shares, the run's analyses) can be stored: a run that stored
/// them stored it too. Asking whether an analysis is stored would then build that process's
/// frames one process after another just to key it; `prepare_processes` builds them instead,
/// in parallel with the rest of the run's work.
pub fn frames_keyed_cheaply(db: &Db, run: Run) -> Result<bool> {
    for &p in run.processes(db) {
        if let Some((kind, key)) = unplaced_node(db, p)?
            && !db.engine().stored(&kind, &key)
        {
            return Ok(false);
        }
    }
    Ok(true)
}

fn is_stored(db: &Db, run: Run, p: Process, u: &ShareUse) -> Result<bool, NodeError> {
    let key = u.share.key(&share_inputs(db, run, p, u.share, &u.param)?);
    Ok(db.engine().stored(u.share.kind(), &key))
}

/// One piece of the first, flat pass over a run's processes.
enum Task {
    /// Compile an archive's protobuf schema (what its decodes wait for).
    Schema(InputArchive),
    /// A process's compile frame, and what reads it while it is in memory.
    Compile(Process),
    /// One distinct HLO dump (by schema, content and memory report).
    Decode(InputArchive, Arc<Archive>, Key, HloMember),
    /// A process's GPU frames, built (and stored) to learn whether they need its position:
    /// after its dumps, which they read.
    Frames(Process),
}

/// Run `tasks` on every thread of the pool, each thread taking the next task in list order
/// (greedy list scheduling: the order is the priority). Stops at the first error.
fn run_in_order(
    db: &Db,
    tasks: &[Task],
    run_one: &(dyn Fn(&Db, &Task) -> Result<(), NodeError> + Sync),
) -> Result<(), NodeError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let first_error: Mutex<Option<NodeError>> = Mutex::new(None);
    let workers = rayon::current_num_threads().min(tasks.len());
    let dbs: Vec<Db> = (0..workers).map(|_| db.clone()).collect();
    let (next, first_error) = (&next, &first_error);
    rayon::scope(move |s| {
        for db in dbs {
            s.spawn(move |_| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(task) = tasks.get(i) else { break };
                    if let Err(e) = run_one(&db, task) {
                        next.store(tasks.len(), Ordering::Relaxed);
                        first_error.lock().unwrap().get_or_insert(e);
                        break;
                    }
                }
            });
        }
    });
    match first_error.lock().unwrap().take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Compute the per-process nodes of a run in parallel. Called at the top level, outside any
/// query, before analyses whose results are not stored; the analyses then find these values
/// memoised.
pub fn prepare_processes(
    db: &Db,
    run: Run,
    needs: &Needs,
    on_done: &(dyn Fn() + Sync),
) -> Result<()> {
    use rayon::prelude::*;
    let procs = run.processes(db).clone();
    // First, one flat pass over the work that is independent between processes, in an order
    // that keeps every thread busy and none waiting: the schemas (decodes need them), each
    // distinct HLO dump once (of the processes whose GPU frames are not stored yet), the
    // compile frames (which need no decoded dump), and then those GPU frames.
    super::prefetch::process_nodes(db, &procs)?;
    let engine = db.engine();
    let mut schemas = Vec::new();
    let mut decodes = Vec::new();
    let mut compiles = Vec::new();
    let mut schema_keys = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut users: std::collections::BTreeMap<_, Vec<Process>> = Default::default();
    let mut frames = Vec::new();
    let gpu_shares = needs.reading(Reads::Gpu).next().is_some();
    // Which frames each process lacks (in parallel: keying them lists each archive's dumps).
    let lacking = procs
        .par_iter()
        .map_with(db.clone(), |db, &p| -> Result<_, NodeError> {
            let dumps = match gpu_frames_stored(db, p)? {
                true => None,
                false => Some(hlo_members(db, p)?),
            };
            let compile = match compile_frame_stored(db, p)? {
                true => None,
                false => pushpop_member(db, p)?.map(|(member, _)| member),
            };
            Ok((p, dumps, compile))
        })
        .collect::<Vec<Result<_, NodeError>>>()
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    for (p, dumps, compile) in lacking {
        if let Some(dumps) = dumps {
            let a = p.archive(db);
            let schema_key = schema_key(db, a)?;
            let archive = p.archive_ref(db);
            for m in dumps {
                let id = (schema_key, m.content, m.report.as_ref().map(|r| r.1));
                users.entry(id).or_default().push(p);
                if seen.insert(id) {
                    if schema_keys.insert(schema_key) {
                        schemas.push(Task::Schema(a));
                    }
                    let cost = archive.member_size(&m.member);
                    decodes.push((cost, Task::Decode(a, archive.clone(), schema_key, m)));
                }
            }
            if gpu_shares {
                frames.push(Task::Frames(p));
            }
        }
        if let Some(member) = compile {
            let cost = p.archive_ref(db).member_size(&member);
            compiles.push((cost, Task::Compile(p)));
        }
    }
    // Longest first within each kind (an estimate from the members' stored sizes), so that no
    // thread is left with one long task at the end.
    decodes.sort_by_key(|(cost, _)| std::cmp::Reverse(*cost));
    compiles.sort_by_key(|(cost, _)| std::cmp::Reverse(*cost));
    // A dump of the same name (schema and memory report) as one decoded before it, in another
    // process, may decode alike and then take that module (`hlo::decode_dump`): it goes after
    // the compile frames, by which time the first is decoded, and its processes' frames last.
    let mut names = BTreeSet::new();
    let (decodes, twins): (Vec<_>, Vec<_>) = decodes.into_iter().partition(|(_, t)| match t {
        Task::Decode(_, _, schema, m) => {
            names.insert((*schema, m.member.clone(), m.report.as_ref().map(|r| r.1)))
        }
        _ => true,
    });
    let late: std::collections::HashSet<Process> = twins
        .iter()
        .filter_map(|(_, t)| match t {
            Task::Decode(_, _, schema, m) => {
                users.get(&(*schema, m.content, m.report.as_ref().map(|r| r.1)))
            }
            _ => None,
        })
        .flatten()
        .copied()
        .collect();
    frames.sort_by_key(|t| matches!(t, Task::Frames(p) if late.contains(p)));
    // While the schemas compile, the other threads build compile frames rather than wait for
    // a schema at the head of a decode.
    let idle = rayon::current_num_threads().saturating_sub(schemas.len());
    let ahead = match schemas.is_empty() {
        true => 0,
        false => idle.min(compiles.len()),
    };
    let ahead: Vec<_> = compiles.drain(..ahead).collect();
    // The decodes before the other compile frames, and the GPU frames last: a process's
    // frames wait for its dumps, so a decode left at the end would keep the threads that take
    // the frames waiting, where compile frames (which wait for nothing) keep them busy.
    let tasks: Vec<Task> = schemas
        .into_iter()
        .chain(ahead.into_iter().map(|(_, t)| t))
        .chain(decodes.into_iter().map(|(_, t)| t))
        .chain(compiles.into_iter().map(|(_, t)| t))
        .chain(twins.into_iter().map(|(_, t)| t))
        .chain(frames)
        .collect();
    let kept = KeptFrames::default();
    run_in_order(db, &tasks, &|db, t| {
        match t {
            Task::Schema(a) => {
                hlo_schema(db, *a)?;
            }
            Task::Compile(p) => {
                // Everything read from the compile frame while it is in memory.
                let _frame = compile_frame(db, *p)?;
                compiled_names(db, *p)?;
                for u in needs.reading(Reads::Compile) {
                    share_any(db, run, *p, u.share, &u.param)?;
                }
            }
            Task::Decode(a, archive, schema_key, dump) => {
                let schema = hlo_schema(db, *a)?;
                fail(decode_dump(engine, archive, &schema, schema_key, dump))?;
            }
            Task::Frames(p) => {
                // Built and stored here; the process's facts read them now, and its shares
                // later from memory while they fit the budget (else from the store).
                let frames = own_frames(db, *p)?;
                gpu_frames_key(db, *p)?;
                process_facts(db, *p)?;
                if let Some(f) = frames {
                    kept.offer(f);
                }
            }
        }
        Ok(())
    })?;
    // Then what the warm-up context of the run needs from each process (small and stored:
    // a process whose facts are stored is not loaded), the context, and each process's
    // shares of the analyses (a stored share is not recomputed, and its process's frames are
    // not loaded).
    procs
        .par_iter()
        .map_with(db.clone(), |db, &p| -> Result<(), NodeError> {
            process_facts(db, p)?;
            compiled_programs(db, p)?;
            Ok(())
        })
        .collect::<Result<Vec<()>, _>>()?;
    warmup_context(db, run)?;
    super::prefetch::shares(db, run, needs)?;
    // With fewer processes than threads (a capture, a small run), a process's shares are
    // computed side by side; otherwise one process per thread, so that the threads never
    // hold more than one process's frames each.
    let side_by_side = procs.len() < rayon::current_num_threads();
    procs
        .par_iter()
        .map_with(db.clone(), |db, &p| -> Result<(), NodeError> {
            // The process's frames are loaded once for its missing shares (and not at all
            // when they are stored), and let go before the next process.
            let mut missing = false;
            for u in needs.reading(Reads::Gpu) {
                missing |= !is_stored(db, run, p, u)?;
            }
            let _frames = if missing { gpu_frames(db, p)? } else { None };
            let gpu: Vec<_> = needs.reading(Reads::Gpu).collect();
            if side_by_side {
                gpu.par_iter()
                    .map_with(db.clone(), |db, u| share_any(db, run, p, u.share, &u.param))
                    .collect::<Result<Vec<_>, _>>()?;
            } else {
                for u in gpu {
                    share_any(db, run, p, u.share, &u.param)?;
                }
            }
            // Stored compile shares are left in the store: the reduces read them (or the
            // stored sums of whole groups of processes) when they need them.
            for u in needs.reading(Reads::Compile) {
                if !is_stored(db, run, p, u)? {
                    share_any(db, run, p, u.share, &u.param)?;
                }
            }
            on_done();
            Ok(())
        })
        .collect::<Result<Vec<()>, _>>()?;
    drop(kept);
    super::shares::prepare_group_sums(db, run, needs.uses());
    Ok(())
}

/// The GPU frames built in the first pass, held (up to [`KeptFrames::BUDGET`] bytes in
/// memory, first built first kept) until the shares are computed from them: a run over a few
/// processes reads no frames back from the store, and a run over many holds a bounded amount.
#[derive(Default)]
struct KeptFrames(std::sync::Mutex<(usize, Vec<Arc<crate::engine::value::Tables>>)>);

impl KeptFrames {
    const BUDGET: usize = 16 << 20;

    fn offer(&self, frames: Arc<crate::engine::value::Tables>) {
        let size: usize = frames
            .0
            .iter()
            .map(|(_, b)| b.get_array_memory_size())
            .sum();
        let mut kept = self.0.lock().unwrap();
        if kept.0 + size <= Self::BUDGET {
            kept.0 += size;
            kept.1.push(frames);
        }
    }
}

/// Whether every per-process share that `needs` names is stored for every process of the
/// run (then nothing needs preparing, and no frames are loaded).
pub fn shares_stored(db: &Db, run: Run, needs: &Needs) -> Result<bool> {
    if db.engine().store().is_none() {
        return Ok(false);
    }
    for &p in run.processes(db) {
        for u in needs.uses() {
            if !is_stored(db, run, p, u)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
