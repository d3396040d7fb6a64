//! The data model built from raw tables.
pub mod between_modules;
pub mod command_buffers;
pub mod compile;
pub mod compile_rows;
pub mod compile_time;
pub mod facts;
pub mod gpu;
mod library_calls;
mod nesting;
pub mod nsys_jax;
pub mod ordering;
pub mod placement;
pub mod program_ids;
pub mod strings;
pub mod thunk_rows;
pub mod views;
pub mod warmup;
