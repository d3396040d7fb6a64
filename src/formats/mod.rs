//! File formats: one module per format.
pub mod hlo;
pub mod pushpop;
