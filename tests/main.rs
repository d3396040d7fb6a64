//! The integration tests, one module per area (each file of this folder). They run the built
//! binary on data the repository owns and on the shared fixtures (skipped loudly when absent);
//! `cargo test --test integration NAME` runs those whose path contains NAME (`hostile::`).
//! One binary rather than one per file: each links the whole library.

#[macro_use]
mod common;

mod bad_inputs;
mod cache_and_layouts;
mod capture_range;
mod captures;
mod combine;
mod command_buffers;
mod compare;
mod compare_causes;
mod diagnose;
mod docs;
mod example;
mod external_script;
mod frames;
mod fuzz;
mod hostile;
mod hostile_fs;
mod html_report;
mod import_diagnostics;
mod layout;
mod models;
mod notebook_ops;
mod nsys_jax_archives;
mod pax_reference;
mod pgle_memory;
mod plausible;
mod python_package;
mod remote_cache;
mod roofline;
mod run;
mod run_cpu;
mod shared_bucket;
mod synthetic;
mod terminal;
mod typed_results;
mod user_view;
mod watch;
mod whatif;
mod why_history;
