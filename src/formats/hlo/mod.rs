//! XLA HLO protobuf dumps (`*.hlo.pb`): schema compilation at run time and module decoding.
//!
//! No code is generated from XLA's `.proto` files at build time. A schema is compiled from
//! `.proto` sources when needed, either the project's own minimal one (`protos/`, see
//! [`builtin_proto_sources`]) or the XLA/TSL tree that an nsys-jax archive ships under
//! `protos/`.
//!
//! [`decode_hlo`] turns one `xla.HloProto` into an [`HloModuleInfo`]: per instruction its
//! opcode, source metadata and, for communication (collectives and host-offload copies), the
//! message size, collective size and bandwidth factors (docs/design.md, "Formulas"). It is a sparse
//! decoder of the protobuf wire format: when an [`HloSchema`] is loaded, the fields it reads are
//! looked up by message and field name and their types checked (the "field plan"); decoding
//! then reads just those fields, borrowing strings from the input, and skips everything else.
//! A reflective decoder (`reflect.rs`, built for tests only) gives the same result through
//! `prost_reflect::DynamicMessage`, reading fields by NUMBER; it is the reference the fast
//! decoder is tested against.
//!
//! Files: `schema.rs` (compiling `.proto` sources, [`HloSchema`]), `plan.rs` (the field plan),
//! `wire.rs` (the sparse wire reader), `collectives.rs` (communication analysis).

use std::sync::Arc;

use anyhow::Result;

mod alike;
mod attention;
pub mod casts;
mod collectives;
pub mod cost;
mod decoded;
pub mod deps;
pub mod heap;
mod instruction;
pub mod library;
mod module;
mod plan;
mod program;
mod ragged;
#[cfg(test)]
mod reflect;
mod schema;
#[cfg(test)]
mod tests;
mod wire;

// The reflective decoder and the tests see every part.
use collectives::module_info;
pub use schema::{HloSchema, builtin_proto_sources, compile_protos};
use wire::{ModuleScan, decode_planned, fields, scan_module};
#[cfg(test)]
#[allow(unused_imports)]
use {collectives::*, decoded::*, plan::*, reflect::*, wire::*};

pub use decoded::{CommunicationInfo, FileLocation, StackFrame, StackFrameIndex};
pub use heap::{HeapProfile, UsageSummary};
pub use instruction::{HloInstructionInfo, InstructionText};
pub use module::HloModuleInfo;
pub use program::program_hash;

/// What `bytes`, another dump, decode to when that is `module` but perhaps its
/// fingerprint (same schema): when they differ from the dump it was decoded from only
/// inside fields that nothing reads, or in the module's frontend attributes (`alike.rs`).
/// The heap profile is the dump's too; the memory usage report is not compared.
pub fn decode_like(
    module: &Arc<HloModuleInfo>,
    schema: &HloSchema,
    bytes: &[u8],
) -> Option<Arc<HloModuleInfo>> {
    let dump = module.instructions.first()?.dump();
    match alike::decode_alike(&schema.plan, dump, bytes)? {
        alike::Alike::Same => Some(module.clone()),
        alike::Alike::ButAttributes => {
            let mut scan = ModuleScan::default();
            fields(
                bytes,
                &schema.plan.hlo_proto,
                0,
                "xla.HloProto",
                |(), value| scan_module(&schema.plan, value.bytes()?, 1, &mut scan),
            )
            .ok()?;
            let mut module = HloModuleInfo::clone(module);
            module.fingerprint = scan.fingerprint.map(str::to_string);
            Some(Arc::new(module))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Output types.

// ---------------------------------------------------------------------------------------------
// Dump file names.

/// Splits an HLO dump file name `module_<id>.<name>.<stage>.hlo.pb[.xz]` into
/// `(id, name, stage)`, e.g. `module_0040.pjit__wrapped_step_fn.sm_8.0_gpu_after_optimizations
/// .hlo.pb.xz` → `(40, "pjit__wrapped_step_fn", "sm_8.0_gpu_after_optimizations")`. The name
/// ends at the first `.` after the id; the stage (which may hold dots) is the rest. `None` for
/// anything else, including a path with folders.
pub fn parse_dump_file_name(file_name: &str) -> Option<(i64, String, String)> {
    let rest = file_name.strip_prefix("module_")?;
    let rest = rest.strip_suffix(".xz").unwrap_or(rest);
    let rest = rest.strip_suffix(".hlo.pb")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let id: i64 = rest[..digits].parse().ok()?;
    let rest = rest[digits..].strip_prefix('.')?;
    let (name, stage) = rest.split_once('.')?;
    if name.is_empty() || stage.is_empty() || file_name.contains('/') {
        return None;
    }
    Some((id, name.to_string(), stage.to_string()))
}

/// True for after-optimizations HLO dumps (`...after_optimizations.hlo.pb[.xz]`).
pub fn is_after_optimizations(file_name: &str) -> bool {
    file_name.ends_with("after_optimizations.hlo.pb")
        || file_name.ends_with("after_optimizations.hlo.pb.xz")
}

/// Decodes one `xla.HloProto` (raw bytes, not xz-compressed) into an [`HloModuleInfo`].
///
/// Reads only the fields nsys-jax-pipe uses, by the numbers and types the schema gives them
/// (see [`HloSchema`]); everything else is skipped. The computations of a large module are
/// decoded in parallel (rayon). Gives what the reflective decoder (tests only) gives, faster.
pub fn decode_hlo(schema: &HloSchema, bytes: &[u8]) -> Result<HloModuleInfo> {
    decode_hlo_shared(schema, bytes::Bytes::copy_from_slice(bytes))
}

/// [`decode_hlo`] of bytes that the module's instructions then share (their strings are read
/// from them, not copied).
pub fn decode_hlo_shared(schema: &HloSchema, bytes: bytes::Bytes) -> Result<HloModuleInfo> {
    module_info(
        schema,
        &bytes,
        decode_planned(&schema.plan, &bytes, true)?,
        true,
    )
}
