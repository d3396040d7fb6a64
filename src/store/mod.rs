//! Where node values are kept between runs: the local content-addressed store, the shared
//! cache on an object store (with signed entries and file-key claims), and the memo of file
//! keys. One boundary for the engine above: get, put, claim and list by [`Key`].
//!
//! - [`local`]: entries on disk under their key, written atomically, verified on read, packs
//!   for prefetched entries;
//! - [`remote`]: the second tier shared between machines (`object_store`), with [`signing`]
//!   and [`claims`] (content keys of big files other machines have hashed);
//! - [`filememo`], [`verified`]: what this machine already knows of its files and entries.

pub mod claims;
pub mod entry;
pub mod filememo;
pub mod key;
pub mod local;
pub mod pace;
pub mod packs;
pub mod remote;
mod remote_store;
pub mod signing;
pub mod verified;

pub use key::Key;
pub use local::Store;
