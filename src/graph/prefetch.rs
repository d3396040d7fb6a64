//! With a shared cache, the stored nodes a run reads one process at a time are fetched first,
//! many at once: each fetch is a round trip to object storage, and a run over a thousand
//! processes reads several per process. Each step needs the values of the one before to key
//! its nodes: the archives' member keys, then whether each process's frames need its position,
//! then what the warm-up context reads (and whether the frames are stored), then (after the
//! context) the shares.

use crate::engine::{Key, Node};
use rayon::prelude::*;

use super::frames::{context_nodes, frame_nodes, unplaced_node};
use super::members::MemberKeysNode;
use super::needs::Needs;
use super::shares::share_inputs;
use super::{Db, InputArchive, NodeError, Process, Run};

/// The member keys of `archives` (zip and folder inputs; a capture's are not stored).
pub(super) fn member_keys(db: &Db, archives: &[InputArchive]) {
    if !db.engine().has_remote() {
        return;
    }
    let wanted: Vec<(String, Key)> = archives
        .iter()
        .filter(|a| !db.ctx.archive(a.index(db)).is_capture())
        .map(|&a| {
            let n = MemberKeysNode {
                file: a.file_key(db),
            };
            (n.kind().to_string(), n.key())
        })
        .collect();
    db.engine().prefetch(&wanted);
}

/// Whether each process's frames need its position: what keying anything built on its frames
/// reads.
pub(super) fn unplaced(db: &Db, procs: &[Process]) -> Result<(), NodeError> {
    if !db.engine().has_remote() {
        return Ok(());
    }
    let unplaced = each(db, procs, |db, p| {
        Ok(unplaced_node(db, p)?.into_iter().collect())
    })?;
    db.engine().prefetch(&unplaced);
    Ok(())
}

/// What the warm-up context reads, and whether the processes' frames are stored (asked, not
/// fetched: a run whose shares are stored never reads them).
pub(super) fn process_nodes(db: &Db, procs: &[Process]) -> Result<(), NodeError> {
    if !db.engine().has_remote() {
        return Ok(());
    }
    let frames = each(db, procs, frame_nodes)?;
    db.engine().prefetch_presence(&frames);
    let context = each(db, procs, context_nodes)?;
    db.engine().prefetch(&context);
    Ok(())
}

/// The processes' shares that `needs` names (after the run's warm-up context).
pub(super) fn shares(db: &Db, run: Run, needs: &Needs) -> Result<(), NodeError> {
    if !db.engine().has_remote() {
        return Ok(());
    }
    let procs = run.processes(db).clone();
    let wanted = each(db, &procs, |db, p| {
        needs
            .uses()
            .map(|u| {
                let key = u.share.key(&share_inputs(db, run, p, u.share, &u.param)?);
                Ok((u.share.kind().to_string(), key))
            })
            .collect()
    })?;
    db.engine().prefetch(&wanted);
    Ok(())
}

/// `f` of every process, in parallel, flattened.
fn each(
    db: &Db,
    procs: &[Process],
    f: impl Fn(&Db, Process) -> Result<Vec<(String, Key)>, NodeError> + Sync,
) -> Result<Vec<(String, Key)>, NodeError> {
    let lists = procs
        .par_iter()
        .map_with(db.clone(), |db, &p| f(db, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(lists.into_iter().flatten().collect())
}
