//! Analyses: one module per analysis.
pub mod compilation;
