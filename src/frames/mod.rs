//! The data model built from raw tables.
pub mod compile;
