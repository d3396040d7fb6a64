//! The per-process shares of the analyses: one stored node per (share, process), computed
//! from the process's steady-state GPU frames or its compile frame, and sums of shares over
//! groups of processes. [`RunView`] is how a reduce reads them.

use crate::analyses::share::{AnyValue, ShareInputs, downcast};
use crate::analyses::{AnyShare, ProcessView, Reads, Share};
use crate::engine::Key;
use crate::error::Place;
use crate::formats::archive::{DEVICE_METADATA, SYSTEM_METADATA};
use crate::formats::gpus::DeviceFacts;
use crate::formats::metadata::device_facts;
use crate::formats::run_metadata;
use crate::frames::gpu::Programs;
use anyhow::{Context, Result};
use std::sync::Arc;

use super::NONE;
use super::frames::{
    compile_frame, compile_frame_key, frame_notes, gpu_frames, gpu_frames_key, process_facts,
    steady_frames, warmup_context,
};
use super::hlo::{programs, programs_map};
use super::members::{member_key, read_member};
use super::{Db, NodeError, NodeResult, Out, Process, Run, fail};

/// How many consecutive processes' shares are added up into one stored group (for a share
/// that adds up): a reduce reads one stored sum per group instead of one share per process,
/// so a run with one more process reads its groups (all but the last unchanged) and the new
/// share.
pub const GROUP: usize = 16;

/// What process `p`'s share node is keyed by, besides the share's kind and version.
pub fn share_inputs(
    db: &Db,
    run: Run,
    p: Process,
    share: &dyn AnyShare,
    param: &str,
) -> Result<ShareInputs, NodeError> {
    let (frames, context) = match share.reads() {
        Reads::Gpu => {
            // Only what the warm-up split of this process depends on (whether the run
            // communicates, which of the programs it executes were compiled in the run's
            // profiles), not the context's key: a process joining the run changes the key
            // but rarely this.
            let ctx = warmup_context(db, run)?;
            let facts = process_facts(db, p)?;
            let relevant: Vec<&String> = ctx
                .value
                .compiled
                .intersection(&facts.value.programs)
                .collect();
            let devices = match share.reads_devices() {
                true => member_key(db, p, DEVICE_METADATA)?.map(|(_, k)| k),
                false => None,
            };
            let context = Key::of_bytes(
                &serde_json::to_vec(&(ctx.value.has_communication, relevant, devices))
                    .expect("plain data"),
            );
            (gpu_frames_key(db, p)?.unwrap_or(NONE), context)
        }
        Reads::Compile => (compile_frame_key(db, p)?.unwrap_or(NONE), NONE),
        Reads::Provenance => (provenance_key(db, p)?, NONE),
    };
    Ok(ShareInputs {
        frames,
        context,
        param: param.to_string(),
        label: p.label(db),
    })
}

/// The members what an archive says of its run is read from.
const PROVENANCE_MEMBERS: [&str; 3] = [run_metadata::MEMBER, SYSTEM_METADATA, DEVICE_METADATA];

/// The key of what an archive says of its run: its members' keys.
pub(super) fn provenance_key(db: &Db, p: Process) -> Result<Key, NodeError> {
    let mut keys = Vec::new();
    for m in PROVENANCE_MEMBERS {
        keys.push(member_key(db, p, m)?.map(|(_, k)| k.0));
    }
    Ok(Key::of_bytes(
        &serde_json::to_vec(&keys).expect("plain data"),
    ))
}

/// What `p`'s archive says of its run; a member that cannot be read is said or left out.
fn provenance(db: &Db, p: Process) -> run_metadata::Provenance {
    let mut out = run_metadata::Provenance::default();
    let read = |m: &str| p.resolve(db, m).map(|m| (read_member(db, p, &m), m));
    if let Some((bytes, m)) = read(run_metadata::MEMBER) {
        match bytes.and_then(|b| run_metadata::read(&b)) {
            Ok(r) => out.record = Some(r),
            Err(e) => {
                out.problem = Some(format!(
                    "{}: {m}: {}",
                    p.archive_ref(db).path.display(),
                    crate::error::one_line(&e)
                ))
            }
        }
    }
    if let Some((Ok(b), _)) = read(SYSTEM_METADATA) {
        out.system = crate::formats::metadata::system_entries(b).unwrap_or_default();
    }
    if let Some((Ok(b), _)) = read(DEVICE_METADATA) {
        out.gpus = crate::formats::metadata::gpu_names(b).unwrap_or_default();
    }
    out
}

/// Process `p`'s share (parameters as canonical JSON): stored, or computed from its frames.
pub fn share_any(
    db: &Db,
    run: Run,
    p: Process,
    share: &dyn AnyShare,
    param: &str,
) -> Result<(Key, AnyValue), NodeError> {
    let inputs = share_inputs(db, run, p, share, param)?;
    let label = inputs.label.as_str();
    fail(share.compute(db.engine(), &inputs, &|| {
        let decoded =
            || -> Result<Arc<Programs>> { Ok(Arc::new(programs_map(&programs(db, p)?.value))) };
        let devices = || -> Result<Vec<DeviceFacts>> {
            let Some(member) = p.resolve(db, DEVICE_METADATA) else {
                return Ok(Vec::new());
            };
            read_member(db, p, &member)
                .and_then(device_facts)
                .with_context(|| Place::member(&p.archive_ref(db).path, &member))
        };
        let none = [];
        let mut view = ProcessView {
            label,
            steady: None,
            frame_notes: &none,
            transfers: None,
            modules: None,
            user_nvtx: None,
            memory_usage: None,
            compile: None,
            provenance: None,
            programs: &decoded,
            devices: &devices,
        };
        match share.reads() {
            Reads::Gpu => {
                let Some(g) = gpu_frames(db, p)? else {
                    return share.map_view(&view, param);
                };
                let steady = steady_frames(db, run, p, &g)?;
                let notes = frame_notes(&g, label);
                view.steady = Some(&steady);
                view.frame_notes = &notes;
                view.transfers = g.value.get("transfers");
                view.modules = g.value.get("module");
                view.user_nvtx = g.value.get("user_nvtx");
                view.memory_usage = g.value.get("memory_usage");
                share.map_view(&view, param)
            }
            Reads::Provenance => {
                let prov = provenance(db, p);
                view.provenance = Some(&prov);
                share.map_view(&view, param)
            }
            Reads::Compile => {
                let frame = compile_frame(db, p)?;
                view.compile = frame
                    .as_ref()
                    .map(|c| c.value.get("compile").expect("compile table"));
                share.map_view(&view, param)
            }
        }
    }))
}

/// Every process's share of `S` in `run`, in process order.
pub fn run_shares<S: Share>(
    db: &Db,
    run: Run,
    s: &S,
    param: &S::Param,
) -> Result<Vec<Out<S::Value>>, NodeError> {
    run.processes(db)
        .iter()
        .map(|&p| share(db, run, p, s, param))
        .collect()
}

/// Process `p`'s share of `S`, typed.
pub fn share<S: Share>(
    db: &Db,
    run: Run,
    p: Process,
    s: &S,
    param: &S::Param,
) -> NodeResult<S::Value> {
    let param = fail(serde_json::to_string(param).map_err(anyhow::Error::from))?;
    let (key, value) = share_any(db, run, p, s, &param)?;
    Ok(Out {
        key,
        value: fail(downcast::<S::Value>(value))?,
    })
}

/// The sum of a share over processes `[GROUP g, GROUP g + GROUP)` of a run, in process order
/// (None when the share does not add up).
pub(super) fn group_sum(
    db: &Db,
    run: Run,
    share: &dyn AnyShare,
    g: usize,
) -> Result<Option<AnyValue>, NodeError> {
    let procs = run.processes(db);
    let members = &procs[g * GROUP..procs.len().min((g + 1) * GROUP)];
    let param = share.default_param();
    let keys = members
        .iter()
        .map(|&p| Ok(share.key(&share_inputs(db, run, p, share, &param)?)))
        .collect::<Result<Vec<Key>, NodeError>>()?;
    let label = format!("processes {}–{}", g * GROUP, g * GROUP + members.len() - 1);
    fail(share.group(db.engine(), &label, &keys, &|| {
        members
            .iter()
            .map(|&p| Ok(share_any(db, run, p, share, &param)?.1))
            .collect()
    }))
}

/// The group sums of the shares among `uses` that add up, for every group of the run's
/// processes, in parallel. Called at the top level, before the reduces, which then find them
/// memoised (a reduce runs inside a query, one group after another). Only warming memos: a
/// failure is said by the reduce that reads the sum.
pub(super) fn prepare_group_sums<'a>(
    db: &Db,
    run: Run,
    uses: impl Iterator<Item = &'a crate::analyses::ShareUse>,
) {
    use rayon::prelude::*;
    let groups = run.processes(db).len().div_ceil(GROUP);
    let work: Vec<(&dyn AnyShare, usize)> = uses
        .filter(|u| u.share.adds_up() && u.param == u.share.default_param())
        .flat_map(|u| (0..groups).map(move |g| (u.share, g)))
        .collect();
    work.par_iter()
        .for_each_with(db.clone(), |db, &(share, g)| {
            let _ = group_sum(db, run, share, g);
        });
}
