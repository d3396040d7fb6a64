//! The query graph: every step of the pipeline is a node — a salsa query, or a node of the
//! engine keyed by blake3 over its kind, version, parameters and input keys — read from the
//! persistent store when an intact entry exists.
//!
//! Keys are computed from keys only (down to the content keys of input files and archive
//! members), so a query whose result is in the store never loads its inputs: a second run of
//! the same command reads the stored analysis outputs and nothing else.
//!
//! The flow, one module each: [`inputs`] (the archives, processes and runs a command opens:
//! salsa inputs), [`members`] (archive members and their content keys), [`hlo`] (the
//! decoded HLO of each process), [`frames`] (module, thunk and compile frames, the run's
//! warm-up context), [`shares`] (the per-process map step of every analysis), [`analyses`]
//! (the reduce of any registered analysis, and analysis scripts), [`export`] (the
//! frames for pandas and polars), [`scheduler`] (per-process
//! work in parallel before the reduces), [`capture`] (a capture's archive). Each kind of node is
//! declared in the module that computes it, with its key type (`kind!`, `node_kind!`); the
//! catalogue of every kind of the crate is the build's (`engine::kinds::declared`).

pub mod analyses;
pub mod capture;
pub mod export;
pub mod frames;
pub mod hlo;
pub mod inputs;
pub mod members;
mod needs;
mod prefetch;
pub mod report;
pub mod scheduler;
pub mod shares;

/// A key standing for "none" among a node's inputs (no compile frame, no GPU frames).
pub const NONE: crate::engine::Key = crate::engine::Key([0; 32]);

pub use analyses::{analysis, analysis_is_stored, script_analysis};
pub use export::pandas_frames;
pub use inputs::{
    AnalysisSpec, InputArchive, Process, Run, RunInput, ScriptSpec, add_input, classify_inputs,
    input_paths_exist, open_run, open_runs,
};
pub use members::member_keys;
pub use needs::Needs;
pub use report::{headline, html_report};
pub use scheduler::{frames_keyed_cheaply, prepare_archives, prepare_processes, shares_stored};
pub use shares::run_shares;

use crate::capture::nsys::Nsys;
use crate::engine::Engine;
use crate::formats::archive::Archive;
use anyhow::Result;
use std::path::PathBuf;
use std::sync::Arc;

/// A node's value as salsa sees it: equal when the content keys are equal.
#[derive(Clone, Debug)]
pub struct Out<T: ?Sized> {
    pub key: crate::engine::Key,
    pub value: Arc<T>,
}

impl<T: ?Sized> PartialEq for Out<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<T: ?Sized> Eq for Out<T> {}

/// A failed node: its kind, the file and member it concerns, and its message.
pub type NodeError = crate::error::Failure;

pub type NodeResult<T> = std::result::Result<Out<T>, NodeError>;

fn fail<T>(r: Result<T>) -> std::result::Result<T, NodeError> {
    r.map_err(NodeError::from)
}

/// Everything outside salsa that queries need: the engine, the opened inputs and, for
/// captures, the Nsight Systems CLI (found when first needed).
pub struct GraphContext {
    pub engine: Engine,
    /// The opened inputs, by `InputArchive::index`; only ever appended to (a long-lived
    /// database registers the files that appear or change as new inputs).
    archives: std::sync::RwLock<Vec<Arc<Archive>>>,
    pub nsys_flag: Option<PathBuf>,
    nsys: std::sync::OnceLock<std::result::Result<Nsys, NodeError>>,
}

impl GraphContext {
    pub fn new(engine: Engine, archives: Vec<Arc<Archive>>, nsys_flag: Option<PathBuf>) -> Self {
        GraphContext {
            engine,
            archives: std::sync::RwLock::new(archives),
            nsys_flag,
            nsys: std::sync::OnceLock::new(),
        }
    }

    /// The input archive at `index`.
    pub fn archive(&self, index: usize) -> Arc<Archive> {
        self.archives.read().unwrap()[index].clone()
    }

    /// Register one more opened input; its index.
    pub fn push_archive(&self, archive: Arc<Archive>) -> usize {
        let mut all = self.archives.write().unwrap();
        all.push(archive);
        all.len() - 1
    }

    /// The nsys that exports this run's captures.
    pub fn nsys(&self) -> Result<&Nsys> {
        self.nsys
            .get_or_init(|| {
                crate::capture::nsys::find(&self.engine, self.nsys_flag.as_deref())
                    .map_err(NodeError::from)
            })
            .as_ref()
            .map_err(|e| e.clone().into())
    }
}

#[salsa::db]
#[derive(Clone)]
pub struct Db {
    storage: salsa::Storage<Self>,
    pub ctx: Arc<GraphContext>,
}

#[salsa::db]
impl salsa::Database for Db {}

/// The database as tracked queries see it.
#[salsa::db]
pub trait Graph: salsa::Database {
    fn db(&self) -> &Db;
}

#[salsa::db]
impl Graph for Db {
    fn db(&self) -> &Db {
        self
    }
}

impl Db {
    pub fn new(ctx: GraphContext) -> Db {
        Db {
            storage: salsa::Storage::default(),
            ctx: Arc::new(ctx),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.ctx.engine
    }
}
