//! The run's frames for pandas and polars (`analyze --frames`): the module, thunk, compile and
//! communication frames of every process, shaped as nsys-jax's `load_profiler_data` returns
//! them ([`crate::frames::nsys_jax`]), as parquet files. A node like every output: an unchanged
//! run reads the files back.

use anyhow::Result;
use rayon::prelude::*;

use super::NONE;
use crate::engine::kinds::kind;
use crate::engine::value::Files;
use crate::engine::{Key, KeyBuilder, Node, node_kind};
use crate::frames::nsys_jax::{self, CompileInput};

use super::frames::{compile_frame, compile_frame_key, gpu_frames, gpu_frames_key};
use super::hlo::{programs, programs_key, programs_map};
use super::{Db, Out, Process, Run, fail};

kind!(
    /// A run's frames as parquet files shaped as nsys-jax's.
    PANDAS_FRAMES = "pandas-frames"
);

/// The run's frames as parquet files shaped as nsys-jax's (`analyze --frames`): keyed by each
/// process's profile name, frames and decoded programs, in run order.
pub struct PandasFramesNode {
    pub processes: Vec<(String, Option<Key>, Option<Key>, Key)>,
}
node_kind!(PandasFramesNode, PANDAS_FRAMES, Stored, Files);
impl PandasFramesNode {
    fn feed(&self, mut kb: KeyBuilder) -> KeyBuilder {
        kb = kb.param("processes", self.processes.len().to_string());
        for (profile, gpu, compile, programs) in &self.processes {
            kb = kb
                .param("profile", profile)
                .input(&gpu.unwrap_or(NONE))
                .input(&compile.unwrap_or(NONE))
                .input(programs);
        }
        kb
    }
}

/// nsys-jax's name for one process's profile: the stem of a combined archive's member, else
/// the archive's file name without its extension.
fn profile_name(db: &Db, p: Process) -> String {
    if let Some(stem) = p.stem(db) {
        return stem.clone();
    }
    let a = p.archive_ref(db);
    a.path
        .file_stem()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The frames of `run` as `<frame>.parquet` files.
pub fn pandas_frames(db: &Db, run: Run) -> Result<Out<Files>> {
    let processes = run.processes(db);
    let mut keys = Vec::new();
    for &p in processes {
        keys.push((
            profile_name(db, p),
            gpu_frames_key(db, p)?,
            compile_frame_key(db, p)?,
            programs_key(db, p)?,
        ));
    }
    let node = PandasFramesNode { processes: keys };
    let (key, value) = fail(db.engine().compute(&node, "", || {
        // Per process in parallel: its GPU frames, and its compile frame with stable ids.
        let per: Vec<_> = processes
            .par_iter()
            .map_with(db.clone(), |db, &p| -> Result<_> {
                let db = &*db;
                let gpu = gpu_frames(db, p)?;
                let compile = compile_frame(db, p)?;
                let map = match compile {
                    Some(_) => Some(programs_map(&programs(db, p)?.value)),
                    None => None,
                };
                Ok((profile_name(db, p), gpu, compile, map))
            })
            .collect::<Result<_>>()?;
        let mut modules = Vec::new();
        let mut thunks = Vec::new();
        for (_, gpu, _, _) in &per {
            if let Some(g) = gpu {
                modules.extend(g.value.get("module"));
                thunks.extend(g.value.get("thunk"));
            }
        }
        let compiles: Vec<CompileInput> = per
            .iter()
            .filter_map(|(profile, _, compile, programs)| {
                Some(CompileInput {
                    profile,
                    frame: compile.as_ref()?.value.get("compile")?,
                    programs: programs.as_ref()?,
                })
            })
            .collect();
        let sorted = nsys_jax::sorted_thunks(&thunks)?;
        let files = nsys_jax::parquet_files(
            &nsys_jax::module(&modules)?,
            &nsys_jax::thunk(sorted.as_ref())?,
            &nsys_jax::compile(&compiles)?,
            &nsys_jax::communication(sorted.as_ref())?,
        )?;
        Ok(Files(
            files.into_iter().map(|(n, b)| (n, b.into())).collect(),
        ))
    }))?;
    debug_assert_eq!(key, node.key());
    Ok(Out { key, value })
}
