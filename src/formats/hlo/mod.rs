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

use std::borrow::Cow;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};

mod alike;
mod collectives;
pub mod heap;
mod instruction;
mod plan;
#[cfg(test)]
mod reflect;
mod schema;
#[cfg(test)]
mod tests;
mod wire;

use collectives::*;
use plan::*;
#[cfg(test)]
use reflect::*;
pub use schema::{HloSchema, builtin_proto_sources, compile_protos};
use wire::*;

// ---------------------------------------------------------------------------------------------
// Field numbers (XLA's; docs/design.md, "HLO fields"). Besides the schema's checks, only the reflective decoder and
// the tests read them.

#[cfg_attr(not(test), allow(dead_code))]
mod field {
    // xla.HloProto
    pub const HLO_MODULE: u32 = 1;
    // xla.HloModuleProto
    pub const MODULE_NAME: u32 = 1;
    pub const MODULE_COMPUTATIONS: u32 = 3;
    pub const MODULE_ID: u32 = 5;
    pub const MODULE_STACK_FRAME_INDEX: u32 = 17;
    pub const MODULE_FRONTEND_ATTRIBUTES: u32 = 19;
    // xla.HloComputationProto
    pub const COMPUTATION_INSTRUCTIONS: u32 = 2;
    pub const COMPUTATION_ID: u32 = 5;
    // xla.HloInstructionProto
    pub const INSTR_NAME: u32 = 1;
    pub const INSTR_OPCODE: u32 = 2;
    pub const INSTR_SHAPE: u32 = 3;
    pub const INSTR_METADATA: u32 = 7;
    pub const INSTR_ID: u32 = 35;
    pub const INSTR_OPERAND_IDS: u32 = 36;
    pub const INSTR_CALLED_COMPUTATION_IDS: u32 = 38;
    pub const INSTR_REPLICA_GROUPS: u32 = 49;
    pub const INSTR_COLLECTIVE_DEVICE_LIST: u32 = 87;
    pub const INSTR_IOTA_COLLECTIVE_DEVICE_LIST: u32 = 92;
    pub const INSTR_MESH_AXES_REPLICA_GROUP_LIST: u32 = 93;
    // xla.OpMetadata
    pub const META_OP_TYPE: u32 = 1;
    pub const META_OP_NAME: u32 = 2;
    pub const META_SOURCE_FILE: u32 = 3;
    pub const META_SOURCE_LINE: u32 = 4;
    pub const META_STACK_FRAME_ID: u32 = 15;
    pub const META_SCHEDULING_NAME: u32 = 16;
    // xla.ShapeProto
    pub const SHAPE_ELEMENT_TYPE: u32 = 2;
    pub const SHAPE_DIMENSIONS: u32 = 3;
    pub const SHAPE_TUPLE_SHAPES: u32 = 4;
    pub const SHAPE_LAYOUT: u32 = 5;
    // xla.LayoutProto
    pub const LAYOUT_MEMORY_SPACE: u32 = 8;
    // xla.FrontendAttributes
    pub const FRONTEND_ATTRIBUTES_MAP: u32 = 1;
    // xla.ReplicaGroup
    pub const REPLICA_IDS: u32 = 1;
    // xla.CollectiveDeviceListProto
    pub const CDL_REPLICA_GROUPS: u32 = 1;
    pub const CDL_IOTA_LIST: u32 = 2;
    // xla.IotaReplicaGroupListProto
    pub const IOTA_NUM_DEVICES_PER_GROUP: u32 = 2;
    // xla.MeshAxesReplicaGroupListProto, xla.MeshProto(.MeshAxis), xla.AxisRefProto(.SubAxis)
    pub const MESH_GROUPS_MESH: u32 = 1;
    pub const MESH_GROUPS_AXES: u32 = 2;
    pub const MESH_AXES: u32 = 1;
    pub const MESH_AXIS_SIZE: u32 = 2;
    pub const AXIS_REF_INDEX: u32 = 1;
    pub const AXIS_REF_SUB_AXIS: u32 = 2;
    pub const SUB_AXIS_SIZE: u32 = 2;
    // xla.StackFrameIndexProto (+ nested FileLocation, StackFrame)
    pub const SFI_FILE_NAMES: u32 = 1;
    pub const SFI_FUNCTION_NAMES: u32 = 2;
    pub const SFI_FILE_LOCATIONS: u32 = 3;
    pub const SFI_STACK_FRAMES: u32 = 4;
    pub const LOC_FILE_NAME_ID: u32 = 1;
    pub const LOC_FUNCTION_NAME_ID: u32 = 2;
    pub const LOC_LINE: u32 = 3;
    pub const LOC_COLUMN: u32 = 4;
    pub const FRAME_FILE_LOCATION_ID: u32 = 1;
    pub const FRAME_PARENT_FRAME_ID: u32 = 2;
}

/// `xla.PrimitiveType` numbers whose shapes hold other shapes in `tuple_shapes`.
const PRIMITIVE_TUPLE: i32 = 13;
const PRIMITIVE_BUFFER: i32 = 34;
/// `LayoutProto.memory_space` of host memory.
const HOST_MEMORY_SPACE: i64 = 5;
pub use heap::{HeapProfile, UsageSummary};
pub use instruction::{HloInstructionInfo, InstructionText};

/// Module frontend attribute that identifies a module across processes (design.md "Program ids").
const FINGERPRINT_ATTRIBUTE: &str = "fingerprint_before_lhs";

// ---------------------------------------------------------------------------------------------
// Output types.

/// What nsys-jax-pipe needs from one HLO module.
#[derive(Debug, Clone, PartialEq)]
pub struct HloModuleInfo {
    pub name: String,
    pub id: i64,
    /// The module's `fingerprint_before_lhs` frontend attribute (docs/design.md, "Program ids").
    pub fingerprint: Option<String>,
    /// Every instruction of every computation, sorted by name (shared: a module that decodes
    /// like another, but for its frontend attributes, shares the other's instructions).
    pub instructions: Arc<Vec<HloInstructionInfo>>,
    pub stack_frames: Arc<StackFrameIndex>,
    /// The static heap from its buffer assignment (docs/design.md, "Memory"); filled by the
    /// reader of the dump, which also says why when it cannot be.
    pub heap: Option<HeapProfile>,
    pub heap_error: Option<String>,
    /// XLA's memory usage report of the module, when the dump has one.
    pub usage: Option<UsageSummary>,
    pub usage_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommunicationInfo {
    /// `all-gather`, `all-reduce`, `all-to-all`, `collective-broadcast`, `collective-permute`,
    /// `reduce-scatter`, or `device-to-host`/`host-to-device` for host-offload copies.
    pub collective: String,
    pub message_size_bytes: u64,
    pub collective_size: u32,
    /// algbw = bandwidth_correction × size / time.
    pub bandwidth_correction: f64,
    /// busbw = algbw × bus_correction.
    pub bus_correction: f64,
}

/// The module's table of Python stack frames; every id is 1-based (0 = none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StackFrameIndex {
    pub file_names: Vec<String>,
    pub function_names: Vec<String>,
    pub file_locations: Vec<FileLocation>,
    pub frames: Vec<StackFrame>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileLocation {
    pub file_name_id: i64,
    pub function_name_id: i64,
    pub line: i64,
    pub column: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackFrame {
    pub file_location_id: i64,
    pub parent_frame_id: i64,
}

impl HloModuleInfo {
    /// What `bytes`, another dump, decode to when that is this module but perhaps its
    /// fingerprint (same schema): when they differ from the dump it was decoded from only
    /// inside fields that nothing reads, or in the module's frontend attributes (`alike.rs`).
    /// The heap profile is the dump's too; the memory usage report is not compared.
    pub fn decode_alike(self: &Arc<Self>, schema: &HloSchema, bytes: &[u8]) -> Option<Arc<Self>> {
        let dump = self.instructions.first()?.dump();
        match alike::decode_alike(&schema.plan, dump, bytes)? {
            alike::Alike::Same => Some(self.clone()),
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
                let mut module = HloModuleInfo::clone(self);
                module.fingerprint = scan.fingerprint.map(str::to_string);
                Some(Arc::new(module))
            }
        }
    }

    /// The instruction with this name.
    pub fn instruction(&self, name: &str) -> Option<&HloInstructionInfo> {
        self.position(name).map(|i| &self.instructions[i])
    }

    /// The index in [`HloModuleInfo::instructions`] of the instruction with this name.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.instructions
            .binary_search_by(|i| i.name_bytes().cmp(name.as_bytes()))
            .ok()
    }

    /// The Python stack of a 1-based frame id, outermost first, each frame written
    /// `file:line[:column][function]` (the column when known).
    pub fn frames(&self, frame_id: i64) -> Vec<String> {
        self.stack_with_columns(frame_id)
            .into_iter()
            .map(|(file, line, column, function)| match column {
                0 => format!("{file}:{line}[{function}]"),
                c => format!("{file}:{line}:{c}[{function}]"),
            })
            .collect()
    }

    /// The Python stack of a 1-based frame id as `(file, line, function)`, outermost first;
    /// empty for 0 or an unknown id.
    pub fn stack(&self, frame_id: i64) -> Vec<(String, i64, String)> {
        self.stack_with_columns(frame_id)
            .into_iter()
            .map(|(file, line, _, function)| (file, line, function))
            .collect()
    }

    fn stack_with_columns(&self, frame_id: i64) -> Vec<(String, i64, i64, String)> {
        fn nth<T>(items: &[T], id: i64) -> Option<&T> {
            usize::try_from(id)
                .ok()?
                .checked_sub(1)
                .and_then(|i| items.get(i))
        }
        let index = &self.stack_frames;
        let mut stack = Vec::new();
        let mut id = frame_id;
        // A well-formed index has no cycles; bound the walk anyway.
        while stack.len() < index.frames.len() {
            let Some(frame) = nth(&index.frames, id) else {
                break;
            };
            let (file, line, column, function) =
                match nth(&index.file_locations, frame.file_location_id) {
                    Some(loc) => (
                        nth(&index.file_names, loc.file_name_id)
                            .cloned()
                            .unwrap_or_default(),
                        loc.line,
                        loc.column,
                        nth(&index.function_names, loc.function_name_id)
                            .cloned()
                            .unwrap_or_default(),
                    ),
                    None => (String::new(), 0, 0, String::new()),
                };
            stack.push((file, line, column, function));
            id = frame.parent_frame_id;
        }
        stack.reverse();
        stack
    }
}

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

// ---------------------------------------------------------------------------------------------
// Plain copies of the parts of a module the analysis needs; both decoders fill these.
//
// Strings borrow from the encoded module where the decoder can (`Cow::Borrowed`); an
// `HloModuleInfo` keeps those as spans of the module's bytes (`instruction.rs`).

/// A list of integers that keeps up to [`INLINE_INTS`] in place: most shapes, operand lists and
/// called computations of an instruction are that short, and then cost no allocation.
#[derive(Debug, Clone)]
enum IntList {
    Inline { len: u8, items: [i64; INLINE_INTS] },
    Heap(Vec<i64>),
}

const INLINE_INTS: usize = 4;

impl Default for IntList {
    fn default() -> Self {
        IntList::Inline {
            len: 0,
            items: [0; INLINE_INTS],
        }
    }
}

impl From<Vec<i64>> for IntList {
    fn from(items: Vec<i64>) -> Self {
        IntList::Heap(items)
    }
}

impl IntList {
    #[inline]
    fn push(&mut self, item: i64) {
        match self {
            IntList::Inline { len, items } if usize::from(*len) < INLINE_INTS => {
                items[usize::from(*len)] = item;
                *len += 1;
            }
            IntList::Inline { items, .. } => {
                let mut heap = Vec::with_capacity(2 * INLINE_INTS);
                heap.extend_from_slice(items);
                heap.push(item);
                *self = IntList::Heap(heap);
            }
            IntList::Heap(items) => items.push(item),
        }
    }

    #[inline]
    fn as_slice(&self) -> &[i64] {
        match self {
            IntList::Inline { len, items } => &items[..usize::from(*len)],
            IntList::Heap(items) => items,
        }
    }
}

#[derive(Debug, Default)]
struct Shape {
    element_type: i32,
    dimensions: IntList,
    tuple_shapes: Vec<Shape>,
    memory_space: i64,
}

/// The replica groups of a collective, in whichever of XLA's encodings the dump uses.
#[derive(Debug, Default)]
struct DeviceGroups {
    /// Sizes of the explicit groups: `collective_device_list.replica_groups` (87.1), else the
    /// older `replica_groups` (49).
    explicit: Vec<usize>,
    /// `num_devices_per_group` of an iota list: `collective_device_list.iota_replica_group_list`
    /// (87.2) or `iota_collective_device_list` (92); 0 if absent.
    iota: i64,
    /// `mesh_axes_replica_group_list` (93).
    mesh: Option<Box<MeshGroups>>,
}

/// Replica groups given as the devices that vary along some axes of a mesh.
#[derive(Debug, Default)]
struct MeshGroups {
    /// Sizes of the mesh's axes.
    axis_sizes: Vec<i64>,
    /// The axes the groups span: (index into `axis_sizes`, size of the sub-axis if only a part).
    axes: Vec<(i64, Option<i64>)>,
}

impl DeviceGroups {
    /// Devices per group; errors when groups differ in size or none are given.
    fn size(&self) -> Result<i64> {
        if let Some(&first) = self.explicit.first() {
            if self.explicit.iter().any(|&s| s != first) {
                bail!("replica groups of different sizes {:?}", self.explicit);
            }
            return Ok(i64::try_from(first).unwrap_or(i64::MAX));
        }
        if self.iota > 0 {
            return Ok(self.iota);
        }
        if let Some(MeshGroups { axis_sizes, axes }) = self.mesh.as_deref() {
            let mut size = 1i64;
            for &(index, sub_size) in axes {
                let axis_size = match sub_size {
                    Some(s) => s,
                    None => *usize::try_from(index)
                        .ok()
                        .and_then(|i| axis_sizes.get(i))
                        .ok_or_else(|| {
                            anyhow!(
                                "mesh axis index {index} is out of range ({} axes)",
                                axis_sizes.len()
                            )
                        })?,
                };
                size = size.saturating_mul(axis_size);
            }
            return Ok(size);
        }
        bail!("no replica groups: the collective size is unknown")
    }
}

#[derive(Debug, Default)]
struct Instruction<'a> {
    name: Cow<'a, str>,
    opcode: Cow<'a, str>,
    shape: Shape,
    id: i64,
    operand_ids: IntList,
    called_computation_ids: IntList,
    groups: DeviceGroups,
    op_type: Cow<'a, str>,
    op_name: Cow<'a, str>,
    source_file: Cow<'a, str>,
    source_line: i64,
    stack_frame_id: i64,
    scheduling_name: Cow<'a, str>,
}

struct Computation<'a> {
    id: i64,
    instructions: Vec<Instruction<'a>>,
}

/// The parts of an `xla.HloModuleProto` that the analysis reads.
#[derive(Default)]
struct ModuleParts<'a> {
    name: String,
    id: i64,
    computations: Vec<Computation<'a>>,
    stack_frames: StackFrameIndex,
    fingerprint: Option<String>,
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
