//! The `nsys-jax-combine` command: `nsys-jax-pipe` under that name (see alias.rs).
include!("alias.rs");
