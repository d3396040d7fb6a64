//! nsys-jax-pipe: turn Nsight Systems profiles of JAX programs into answers,
//! as an incremental, content-addressed build graph.
//!
//! Layout, bottom to top (each layer uses only those below it; `tests/layout.rs` checks it):
//! - the utilities: errors, tables, statistics, units, temporary files;
//! - [`store`]: the persistent store and the shared cache, by content key;
//! - [`engine`]: the graph engine (node keys, node kinds and their versions, the run log);
//! - [`formats`]: readers and writers of file formats (archives, parquet tables, HLO), and
//!   [`report`], the HTML report's page, tables and charts;
//! - [`frames`]: the data model built from the raw tables (module, thunk, compile, communication);
//! - [`analyses`]: one module per analysis, and [`capture`]: a report and XLA dump turned into
//!   archive members, profiling a program under Nsight Systems;
//! - [`graph`]: the salsa query graph that wires every node together;
//! - [`compare`]: comparing runs (statistics, explanation, HLO diff) and histories of runs;
//! - [`commands`]: `run`, `archive`, `analyze`, `combine`, `compare`, `history` as functions of
//!   requests;
//! - [`cli`]: the front-end: arguments in, results printed.
//!
//! The library is the command line's: [`cli`] is its entry point. [`api`] holds what the
//! integration tests and benchmarks read directly; everything else is private to the crate.

pub(crate) mod analyses;
pub(crate) mod capture;
pub mod cli;
pub(crate) mod commands;
pub(crate) mod compare;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod formats;
pub(crate) mod frames;
pub(crate) mod graph;
pub mod interrupt;
pub(crate) mod nvtx;
pub(crate) mod report;
pub(crate) mod stats;
pub(crate) mod store;
pub(crate) mod table;
#[cfg(test)]
pub(crate) mod testutil;
pub(crate) mod tmpfiles;
pub(crate) mod units;

/// What the integration tests and benchmarks read directly, besides running the binary:
/// archive members (the command-buffer graph table, parquet tables), HLO protos, the inputs
/// of analysis scripts, the registry's analysis names, and a history's series of points.
pub mod api {
    pub use crate::analyses::external::materialize;
    pub use crate::compare::history::points::PointData;
    pub use crate::compare::history::series as history_series;
    pub use crate::formats::archive::Archive;
    pub use crate::formats::{graph_ops, hlo, read_parquet};
    pub use crate::stats::changepoint::Params as ChangePointParams;

    /// The built-in analyses, in the registry's order.
    pub fn analysis_names() -> Vec<&'static str> {
        crate::analyses::REGISTRY.iter().map(|a| a.name()).collect()
    }

    /// The files the analysis `name` writes from the result it reads back from `files` (an
    /// output folder's, by relative path): how another analysis reads its output, typed.
    pub fn rewritten(
        name: &str,
        files: &[(String, String)],
    ) -> anyhow::Result<Vec<(String, String)>> {
        let a = crate::analyses::find(name).ok_or_else(|| anyhow::anyhow!("no analysis {name}"))?;
        let files: Vec<(String, crate::engine::value::Text)> = files
            .iter()
            .map(|(n, t)| (n.clone(), t.as_str().into()))
            .collect();
        a.rewritten(&files)
    }
}
