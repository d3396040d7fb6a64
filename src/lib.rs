//! nsys-jax-pipe: turn Nsight Systems profiles of JAX programs into answers,
//! as an incremental, content-addressed build graph.
//!
//! Layout:
//! - [`engine`]: the graph engine (content keys, persistent store, run log);
//! - [`graph`]: the salsa query graph that wires every node together;
//! - [`formats`]: readers and writers of file formats (archives, parquet tables, HLO);
//! - [`frames`]: the data model built from the raw tables (module, thunk, compile, communication);
//! - [`report`]: the HTML report's page, tables and charts (each analysis draws its sections);
//! - [`analyses`]: one module per analysis;
//! - [`capture`]: the capture stage: profiling a program under Nsight Systems (the `run`
//!   command), finding `nsys`, exporting and projecting its report, and `nsys-jax` command lines;
//! - [`cli`]: the thin command-line front-end.

pub mod alloc;
pub mod analyses;
pub mod capture;
pub mod cli;
pub mod combine;
pub mod compare;
pub mod engine;
pub mod error;
pub mod formats;
pub mod frames;
pub mod graph;
pub mod interrupt;
pub mod labels;
pub mod nvtx;
pub mod pipeline;
pub mod report;
pub mod stats;
pub mod table;
pub mod testutil;
pub mod tmpfiles;
pub mod units;
