//! Analyses: one module per analysis.
pub mod communication;
pub mod compilation;
pub mod external;
pub mod stragglers;
pub mod summary;
