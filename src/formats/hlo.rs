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
//! [`decode_hlo_reflect`] gives the same result through `prost_reflect::DynamicMessage`,
//! reading fields by NUMBER; it is the reference the fast decoder is tested against.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::BuildHasherDefault;

use anyhow::{Context, Result, anyhow, bail};
use prost_reflect::{
    Cardinality, DescriptorPool, DynamicMessage, EnumDescriptor, FieldDescriptor, Kind, MapKey,
    MessageDescriptor, Value,
};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Field numbers (XLA's; docs/design.md, "HLO fields").

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
/// Module frontend attribute that identifies a module across processes (design.md "Program ids").
const FINGERPRINT_ATTRIBUTE: &str = "fingerprint_before_lhs";

// ---------------------------------------------------------------------------------------------
// Schema compilation.

/// The project's own schema, embedded at build time: `(path relative to protos/, contents)`.
pub fn builtin_proto_sources() -> Vec<(String, Vec<u8>)> {
    vec![(
        "xla_hlo_minimal.proto".to_string(),
        include_bytes!("../../protos/xla_hlo_minimal.proto").to_vec(),
    )]
}

/// Resolves imports among in-memory `.proto` sources, keyed by their import path.
struct MemoryResolver {
    sources: HashMap<String, String>,
}

impl protox::file::FileResolver for MemoryResolver {
    fn open_file(&self, name: &str) -> std::result::Result<protox::file::File, protox::Error> {
        match self.sources.get(name) {
            Some(source) => protox::file::File::from_source(name, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// Normalises a path relative to the protos root into protobuf's import form.
fn import_name(path: &str) -> String {
    let path = path.replace('\\', "/");
    let mut path = path.as_str();
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path.trim_start_matches('/').to_string()
}

/// Compiles `.proto` sources into an encoded `google.protobuf.FileDescriptorSet`.
///
/// `files` are `(path relative to the protos root, contents)`, e.g. `("xla/service/hlo.proto",
/// ...)`. Imports resolve among the given files and protobuf's well-known types
/// (`google/protobuf/*.proto`). The set holds every given file and everything it imports.
/// Errors name the offending `.proto` file and say what is wrong, on one line.
pub fn compile_protos(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut sources = HashMap::with_capacity(files.len());
    for (path, bytes) in files {
        let name = import_name(path);
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| anyhow!("{name}: .proto source is not valid UTF-8"))?;
        sources.insert(name, text);
    }
    let mut names: Vec<String> = sources.keys().cloned().collect();
    names.sort();

    let mut resolver = protox::file::ChainFileResolver::new();
    resolver.add(MemoryResolver { sources });
    resolver.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true).include_source_info(false);
    for name in &names {
        compiler
            .open_file(name)
            .map_err(|e| anyhow!("{}", protox_error_line(&e, name)))?;
    }
    Ok(compiler.encode_file_descriptor_set())
}

/// One line naming the file at fault (as `file[:line:column]: message`).
fn protox_error_line(err: &protox::Error, opened: &str) -> String {
    // protox's Debug form carries `file:line:column:` where it knows them; Display does not.
    let detailed = format!("{err:?}");
    let file = err.file().unwrap_or(opened);
    let mut line = if detailed.contains(file) {
        detailed
    } else {
        format!("{file}: {detailed}")
    };
    if file != opened && !line.contains(opened) {
        line = format!("{line} (while compiling {opened})");
    }
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A compiled schema able to decode `xla.HloProto`, with the field plan of [`decode_hlo`].
#[derive(Debug, Clone)]
pub struct HloSchema {
    pool: DescriptorPool,
    hlo_proto: MessageDescriptor,
    /// `xla.HloModuleProto`, and `xla.HloComputationProto` when the module's field 3 is one.
    module: MessageDescriptor,
    computation: Option<MessageDescriptor>,
    primitive_type: Option<EnumDescriptor>,
    /// The fields [`decode_hlo`] reads, resolved in this schema.
    plan: FieldPlan,
}

impl HloSchema {
    /// Loads an encoded `FileDescriptorSet` (as from [`compile_protos`]); it must define
    /// `xla.HloProto`. Errors when a field that [`decode_hlo`] reads has a type it cannot read
    /// (naming the field and its message); fields that the schema lacks are fine.
    pub fn from_descriptor_set(bytes: &[u8]) -> Result<HloSchema> {
        let pool = DescriptorPool::decode(bytes)
            .map_err(|e| anyhow!("loading protobuf descriptor set: {e}"))?;
        let hlo_proto = pool
            .get_message_by_name("xla.HloProto")
            .ok_or_else(|| anyhow!("the protobuf schema does not define xla.HloProto"))?;
        let module = hlo_proto
            .get_field(field::HLO_MODULE)
            .filter(|f| !f.is_list() && !f.is_map())
            .and_then(|f| f.kind().as_message().cloned())
            .filter(|m| m.full_name() == "xla.HloModuleProto")
            .ok_or_else(|| {
                anyhow!("xla.HloProto field 1 is not an xla.HloModuleProto in this protobuf schema")
            })?;
        let computation = module
            .get_field(field::MODULE_COMPUTATIONS)
            .filter(|f| f.is_list())
            .and_then(|f| f.kind().as_message().cloned())
            .filter(|m| m.full_name() == "xla.HloComputationProto");
        let primitive_type = pool.get_enum_by_name("xla.PrimitiveType");
        let plan = FieldPlan::resolve(&hlo_proto)?;
        Ok(HloSchema {
            pool,
            hlo_proto,
            module,
            computation,
            primitive_type,
            plan,
        })
    }

    /// The project's own schema ([`builtin_proto_sources`]), compiled.
    pub fn builtin() -> Result<HloSchema> {
        let set = compile_protos(&builtin_proto_sources())?;
        HloSchema::from_descriptor_set(&set)
    }

    /// The descriptor pool the schema was loaded into.
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    /// The `xla.HloProto` message descriptor.
    pub fn hlo_proto(&self) -> &MessageDescriptor {
        &self.hlo_proto
    }

    /// The name this schema gives a `PrimitiveType` number, if it knows it.
    fn primitive_type_name(&self, number: i32) -> Option<String> {
        self.primitive_type
            .as_ref()?
            .get_value(number)
            .map(|v| v.name().to_string())
    }
}

// ---------------------------------------------------------------------------------------------
// Output types.

/// What nsys-jax-pipe needs from one HLO module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HloModuleInfo {
    pub name: String,
    pub id: i64,
    /// The module's `fingerprint_before_lhs` frontend attribute (docs/design.md, "Program ids").
    pub fingerprint: Option<String>,
    /// Every instruction of every computation, sorted by name.
    pub instructions: Vec<HloInstructionInfo>,
    pub stack_frames: StackFrameIndex,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HloInstructionInfo {
    pub name: String,
    pub opcode: String,
    pub op_type: String,
    pub op_name: String,
    pub source_file: String,
    pub source_line: i64,
    /// 1-based id into [`HloModuleInfo::stack_frames`]; 0 = none.
    pub stack_frame_id: i64,
    pub scheduling_name: String,
    /// Set when the instruction is communication (docs/design.md, "Communication").
    pub communication: Option<CommunicationInfo>,
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
    /// The instruction with this name.
    pub fn instruction(&self, name: &str) -> Option<&HloInstructionInfo> {
        self.instructions
            .binary_search_by(|i| i.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.instructions[i])
    }

    /// The Python stack of a 1-based frame id as `(file, line, function)`, outermost first;
    /// empty for 0 or an unknown id.
    pub fn stack(&self, frame_id: i64) -> Vec<(String, i64, String)> {
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
            let (file, line, function) = match nth(&index.file_locations, frame.file_location_id) {
                Some(loc) => (
                    nth(&index.file_names, loc.file_name_id)
                        .cloned()
                        .unwrap_or_default(),
                    loc.line,
                    nth(&index.function_names, loc.function_name_id)
                        .cloned()
                        .unwrap_or_default(),
                ),
                None => (String::new(), 0, String::new()),
            };
            stack.push((file, line, function));
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
// Strings borrow from the encoded module where the decoder can (`Cow::Borrowed`); only those
// that end up in an `HloModuleInfo` are ever copied.

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

// ---------------------------------------------------------------------------------------------
// The field plan: what the fast decoder reads, resolved by name in the schema.
//
// Once per schema, every field the decoder reads is looked up by message and field name,
// following message types from `xla.HloProto` down; its number and type come from the schema,
// and its type is checked against the way the decoder reads it. A field that the schema lacks
// (an older XLA) is simply not in the plan, and the decoder skips it like any other field.

const WIRE_VARINT: u8 = 0;
const WIRE_FIXED64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_START_GROUP: u8 = 3;
const WIRE_END_GROUP: u8 = 4;
const WIRE_FIXED32: u8 = 5;

/// How deeply messages (and groups) may nest, as in prost.
const RECURSION_LIMIT: u32 = 100;

/// The protobuf type of an integer field: its wire encoding and its conversion to `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntKind {
    /// `int32` and enums.
    Int32,
    Int64,
    Uint32,
    Uint64,
    Sint32,
    Sint64,
    Fixed32,
    Sfixed32,
    Fixed64,
    Sfixed64,
}

impl IntKind {
    fn of(kind: &Kind) -> Option<IntKind> {
        Some(match kind {
            Kind::Int32 | Kind::Enum(_) => IntKind::Int32,
            Kind::Int64 => IntKind::Int64,
            Kind::Uint32 => IntKind::Uint32,
            Kind::Uint64 => IntKind::Uint64,
            Kind::Sint32 => IntKind::Sint32,
            Kind::Sint64 => IntKind::Sint64,
            Kind::Fixed32 => IntKind::Fixed32,
            Kind::Sfixed32 => IntKind::Sfixed32,
            Kind::Fixed64 => IntKind::Fixed64,
            Kind::Sfixed64 => IntKind::Sfixed64,
            _ => return None,
        })
    }

    fn wire_type(self) -> u8 {
        match self {
            IntKind::Fixed32 | IntKind::Sfixed32 => WIRE_FIXED32,
            IntKind::Fixed64 | IntKind::Sfixed64 => WIRE_FIXED64,
            _ => WIRE_VARINT,
        }
    }

    /// The value of a raw wire value (a varint, or fixed-width bits) as the reflective decoder
    /// sees it: `None` for an unsigned 64-bit value above `i64::MAX`.
    #[inline]
    fn value(self, raw: u64) -> Option<i64> {
        match self {
            IntKind::Int32 => Some(i64::from(raw as i32)),
            IntKind::Int64 | IntKind::Sfixed64 => Some(raw as i64),
            IntKind::Uint32 | IntKind::Fixed32 => Some(i64::from(raw as u32)),
            IntKind::Uint64 | IntKind::Fixed64 => i64::try_from(raw).ok(),
            IntKind::Sint32 => {
                let v = raw as u32;
                Some(i64::from((v >> 1) as i32 ^ -((v & 1) as i32)))
            }
            IntKind::Sint64 => Some((raw >> 1) as i64 ^ -((raw & 1) as i64)),
            IntKind::Sfixed32 => Some(i64::from(raw as u32 as i32)),
        }
    }
}

/// The shape of field that the decoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Int,
    Ints,
    Str,
    Strs,
    Msg,
    Msgs,
    StrMap,
}

impl Expect {
    fn describe(self) -> &'static str {
        match self {
            Expect::Int => "a singular integer or enum field",
            Expect::Ints => "a repeated integer or enum field",
            Expect::Str => "a singular string field",
            Expect::Strs => "a repeated string field",
            Expect::Msg => "a singular message field",
            Expect::Msgs => "a repeated message field",
            Expect::StrMap => "a map<string, string> field",
        }
    }
}

/// A field's type as a `.proto` file would write it.
fn describe_field(field: &FieldDescriptor) -> String {
    fn kind(kind: Kind) -> String {
        match kind {
            Kind::Message(m) => m.full_name().to_string(),
            Kind::Enum(e) => e.full_name().to_string(),
            other => format!("{other:?}").to_ascii_lowercase(),
        }
    }
    match field.kind() {
        Kind::Message(entry) if field.is_map() => format!(
            "map<{}, {}>",
            kind(entry.map_entry_key_field().kind()),
            kind(entry.map_entry_value_field().kind())
        ),
        other => format!(
            "{}{}{}",
            if field.is_list() { "repeated " } else { "" },
            if field.is_group() { "group " } else { "" },
            kind(other)
        ),
    }
}

/// What to do with one field.
#[derive(Debug, Clone, Copy)]
struct Slot<A> {
    action: A,
    /// The field's integer type; unused for string and message fields.
    int: IntKind,
}

/// Field numbers below this are looked up by index.
const DENSE_FIELD_NUMBERS: u32 = 1024;

/// Field number → slot, for one message type.
#[derive(Debug, Clone)]
struct Table<A> {
    dense: Vec<Option<Slot<A>>>,
    /// Fields numbered `DENSE_FIELD_NUMBERS` or more.
    sparse: Vec<(u32, Slot<A>)>,
}

impl<A> Default for Table<A> {
    fn default() -> Self {
        Table {
            dense: Vec::new(),
            sparse: Vec::new(),
        }
    }
}

impl<A: Copy> Table<A> {
    fn insert(&mut self, number: u32, slot: Slot<A>) {
        if number < DENSE_FIELD_NUMBERS {
            let index = number as usize;
            if self.dense.len() <= index {
                self.dense.resize(index + 1, None);
            }
            self.dense[index] = Some(slot);
        } else {
            self.sparse.push((number, slot));
        }
    }

    #[inline]
    fn get(&self, number: u32) -> Option<Slot<A>> {
        match self.dense.get(number as usize) {
            Some(slot) => *slot,
            None => self
                .sparse
                .iter()
                .find(|(n, _)| *n == number)
                .map(|&(_, slot)| slot),
        }
    }
}

/// The planned fields of one message type, and the message types of its message fields.
struct Resolved<A> {
    message: Option<MessageDescriptor>,
    table: Table<A>,
    children: Vec<(A, MessageDescriptor)>,
}

impl<A: Copy + PartialEq> Resolved<A> {
    fn child(&self, action: A) -> Option<&MessageDescriptor> {
        self.children
            .iter()
            .find(|(a, _)| *a == action)
            .map(|(_, m)| m)
    }
}

/// Looks up `wanted` fields `(name, expected type, action)` of `message` (none if the message
/// is absent) and checks their types.
fn resolve<A: Copy + PartialEq>(
    message: Option<&MessageDescriptor>,
    wanted: &[(&str, Expect, A)],
) -> Result<Resolved<A>> {
    let mut resolved = Resolved {
        message: message.cloned(),
        table: Table::default(),
        children: Vec::new(),
    };
    let Some(message) = message else {
        return Ok(resolved);
    };
    for &(name, expect, action) in wanted {
        let Some(field) = message.get_field_by_name(name) else {
            continue;
        };
        let singular = field.cardinality() != Cardinality::Repeated;
        let kind = field.kind();
        let int = IntKind::of(&kind);
        let string = matches!(kind, Kind::String);
        let message_kind = matches!(kind, Kind::Message(_)) && !field.is_group();
        let fits = match expect {
            Expect::Int => singular && int.is_some(),
            Expect::Ints => field.is_list() && int.is_some(),
            Expect::Str => singular && string,
            Expect::Strs => field.is_list() && string,
            Expect::Msg => singular && message_kind,
            Expect::Msgs => field.is_list() && message_kind,
            Expect::StrMap => {
                field.is_map()
                    && matches!(&kind, Kind::Message(entry)
                        if matches!(entry.map_entry_key_field().kind(), Kind::String)
                            && matches!(entry.map_entry_value_field().kind(), Kind::String))
            }
        };
        if !fits {
            bail!(
                "the protobuf schema does not fit nsys-jax-pipe: field {name} (number {}) of \
                 {} is {}, where {} is expected",
                field.number(),
                message.full_name(),
                describe_field(&field),
                expect.describe()
            );
        }
        if let Kind::Message(child) = kind {
            resolved.children.push((action, child));
        }
        resolved.table.insert(
            field.number(),
            Slot {
                action,
                int: int.unwrap_or(IntKind::Int64),
            },
        );
    }
    Ok(resolved)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModuleField {
    Name,
    Computations,
    Id,
    StackFrameIndex,
    FrontendAttributes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryField {
    Key,
    Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IndexField {
    FileNames,
    FunctionNames,
    FileLocations,
    StackFrames,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LocationField {
    FileNameId,
    FunctionNameId,
    Line,
    Column,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameField {
    FileLocationId,
    ParentFrameId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ComputationField {
    Instructions,
    Id,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InstructionField {
    Name,
    Opcode,
    Shape,
    Metadata,
    Id,
    OperandIds,
    CalledComputationIds,
    ReplicaGroups,
    CollectiveDeviceList,
    IotaCollectiveDeviceList,
    MeshAxesReplicaGroupList,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShapeField {
    ElementType,
    Dimensions,
    TupleShapes,
    Layout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetadataField {
    OpType,
    OpName,
    SourceFile,
    SourceLine,
    StackFrameId,
    SchedulingName,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeviceListField {
    ReplicaGroups,
    IotaReplicaGroupList,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MeshGroupsField {
    Mesh,
    Axes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AxisRefField {
    MeshAxisIndex,
    SubAxisInfo,
}

/// The fields the fast decoder reads, by message (named after XLA's types; each table belongs
/// to the message type the schema gives the field that leads to it). Messages with a single
/// planned field use `()` as its action.
#[derive(Debug, Clone)]
struct FieldPlan {
    hlo_proto: Table<()>,
    module: Table<ModuleField>,
    /// `HloModuleProto.frontend_attributes`, and its map's entries.
    attributes: Table<()>,
    attribute: Table<EntryField>,
    stack_index: Table<IndexField>,
    location: Table<LocationField>,
    frame: Table<FrameField>,
    computation: Table<ComputationField>,
    instruction: Table<InstructionField>,
    shape: Table<ShapeField>,
    layout: Table<()>,
    metadata: Table<MetadataField>,
    /// `HloInstructionProto.replica_groups` (a `ReplicaGroup`).
    legacy_group: Table<()>,
    device_list: Table<DeviceListField>,
    /// `CollectiveDeviceListProto.replica_groups` (a `ReplicaGroup`).
    device_list_group: Table<()>,
    /// `CollectiveDeviceListProto.iota_replica_group_list`.
    device_list_iota: Table<()>,
    /// `HloInstructionProto.iota_collective_device_list`.
    iota_list: Table<()>,
    mesh_groups: Table<MeshGroupsField>,
    mesh: Table<()>,
    mesh_axis: Table<()>,
    axis_ref: Table<AxisRefField>,
    sub_axis: Table<()>,
}

/// `ReplicaGroup.replica_ids`.
fn resolve_replica_group(message: Option<&MessageDescriptor>) -> Result<Resolved<()>> {
    resolve(message, &[("replica_ids", Expect::Ints, ())])
}

/// `IotaReplicaGroupListProto.num_devices_per_group`.
fn resolve_iota_list(message: Option<&MessageDescriptor>) -> Result<Resolved<()>> {
    resolve(message, &[("num_devices_per_group", Expect::Int, ())])
}

impl FieldPlan {
    fn resolve(hlo_proto: &MessageDescriptor) -> Result<FieldPlan> {
        use Expect::{Int, Ints, Msg, Msgs, Str, StrMap, Strs};
        let top = resolve(Some(hlo_proto), &[("hlo_module", Msg, ())])?;
        let module = top.child(()).ok_or_else(|| {
            anyhow!(
                "the protobuf schema's {} has no field hlo_module",
                hlo_proto.full_name()
            )
        })?;
        let module = resolve(
            Some(module),
            &[
                ("name", Str, ModuleField::Name),
                ("computations", Msgs, ModuleField::Computations),
                ("id", Int, ModuleField::Id),
                ("stack_frame_index", Msg, ModuleField::StackFrameIndex),
                ("frontend_attributes", Msg, ModuleField::FrontendAttributes),
            ],
        )?;
        let attributes = resolve(
            module.child(ModuleField::FrontendAttributes),
            &[("map", StrMap, ())],
        )?;
        let attribute = resolve(
            attributes.child(()),
            &[
                ("key", Str, EntryField::Key),
                ("value", Str, EntryField::Value),
            ],
        )?;
        let stack_index = resolve(
            module.child(ModuleField::StackFrameIndex),
            &[
                ("file_names", Strs, IndexField::FileNames),
                ("function_names", Strs, IndexField::FunctionNames),
                ("file_locations", Msgs, IndexField::FileLocations),
                ("stack_frames", Msgs, IndexField::StackFrames),
            ],
        )?;
        let location = resolve(
            stack_index.child(IndexField::FileLocations),
            &[
                ("file_name_id", Int, LocationField::FileNameId),
                ("function_name_id", Int, LocationField::FunctionNameId),
                ("line", Int, LocationField::Line),
                ("column", Int, LocationField::Column),
            ],
        )?;
        let frame = resolve(
            stack_index.child(IndexField::StackFrames),
            &[
                ("file_location_id", Int, FrameField::FileLocationId),
                ("parent_frame_id", Int, FrameField::ParentFrameId),
            ],
        )?;
        let computation = resolve(
            module.child(ModuleField::Computations),
            &[
                ("instructions", Msgs, ComputationField::Instructions),
                ("id", Int, ComputationField::Id),
            ],
        )?;
        let instruction = resolve(
            computation.child(ComputationField::Instructions),
            &[
                ("name", Str, InstructionField::Name),
                ("opcode", Str, InstructionField::Opcode),
                ("shape", Msg, InstructionField::Shape),
                ("metadata", Msg, InstructionField::Metadata),
                ("id", Int, InstructionField::Id),
                ("operand_ids", Ints, InstructionField::OperandIds),
                (
                    "called_computation_ids",
                    Ints,
                    InstructionField::CalledComputationIds,
                ),
                ("replica_groups", Msgs, InstructionField::ReplicaGroups),
                (
                    "collective_device_list",
                    Msg,
                    InstructionField::CollectiveDeviceList,
                ),
                (
                    "iota_collective_device_list",
                    Msg,
                    InstructionField::IotaCollectiveDeviceList,
                ),
                (
                    "mesh_axes_replica_group_list",
                    Msg,
                    InstructionField::MeshAxesReplicaGroupList,
                ),
            ],
        )?;
        let shape = resolve(
            instruction.child(InstructionField::Shape),
            &[
                ("element_type", Int, ShapeField::ElementType),
                ("dimensions", Ints, ShapeField::Dimensions),
                ("tuple_shapes", Msgs, ShapeField::TupleShapes),
                ("layout", Msg, ShapeField::Layout),
            ],
        )?;
        if let (Some(outer), Some(inner)) = (&shape.message, shape.child(ShapeField::TupleShapes))
            && inner.full_name() != outer.full_name()
        {
            bail!(
                "the protobuf schema does not fit nsys-jax-pipe: field tuple_shapes of {} is a \
                 {}, where a {0} is expected",
                outer.full_name(),
                inner.full_name()
            );
        }
        let layout = resolve(
            shape.child(ShapeField::Layout),
            &[("memory_space", Int, ())],
        )?;
        let metadata = resolve(
            instruction.child(InstructionField::Metadata),
            &[
                ("op_type", Str, MetadataField::OpType),
                ("op_name", Str, MetadataField::OpName),
                ("source_file", Str, MetadataField::SourceFile),
                ("source_line", Int, MetadataField::SourceLine),
                ("stack_frame_id", Int, MetadataField::StackFrameId),
                ("scheduling_name", Str, MetadataField::SchedulingName),
            ],
        )?;
        let legacy_group =
            resolve_replica_group(instruction.child(InstructionField::ReplicaGroups))?;
        let device_list = resolve(
            instruction.child(InstructionField::CollectiveDeviceList),
            &[
                ("replica_groups", Msgs, DeviceListField::ReplicaGroups),
                (
                    "iota_replica_group_list",
                    Msg,
                    DeviceListField::IotaReplicaGroupList,
                ),
            ],
        )?;
        let device_list_group =
            resolve_replica_group(device_list.child(DeviceListField::ReplicaGroups))?;
        let device_list_iota =
            resolve_iota_list(device_list.child(DeviceListField::IotaReplicaGroupList))?;
        let iota_list =
            resolve_iota_list(instruction.child(InstructionField::IotaCollectiveDeviceList))?;
        let mesh_groups = resolve(
            instruction.child(InstructionField::MeshAxesReplicaGroupList),
            &[
                ("mesh", Msg, MeshGroupsField::Mesh),
                ("axes", Msgs, MeshGroupsField::Axes),
            ],
        )?;
        let mesh = resolve(
            mesh_groups.child(MeshGroupsField::Mesh),
            &[("axes", Msgs, ())],
        )?;
        let mesh_axis = resolve(mesh.child(()), &[("size", Int, ())])?;
        let axis_ref = resolve(
            mesh_groups.child(MeshGroupsField::Axes),
            &[
                ("mesh_axis_index", Int, AxisRefField::MeshAxisIndex),
                ("sub_axis_info", Msg, AxisRefField::SubAxisInfo),
            ],
        )?;
        let sub_axis = resolve(
            axis_ref.child(AxisRefField::SubAxisInfo),
            &[("size", Int, ())],
        )?;
        Ok(FieldPlan {
            hlo_proto: top.table,
            module: module.table,
            attributes: attributes.table,
            attribute: attribute.table,
            stack_index: stack_index.table,
            location: location.table,
            frame: frame.table,
            computation: computation.table,
            instruction: instruction.table,
            shape: shape.table,
            layout: layout.table,
            metadata: metadata.table,
            legacy_group: legacy_group.table,
            device_list: device_list.table,
            device_list_group: device_list_group.table,
            device_list_iota: device_list_iota.table,
            iota_list: iota_list.table,
            mesh_groups: mesh_groups.table,
            mesh: mesh.table,
            mesh_axis: mesh_axis.table,
            axis_ref: axis_ref.table,
            sub_axis: sub_axis.table,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Fast decoding: a sparse reader of the protobuf wire format, directed by the field plan.
//
// Only planned fields are read; everything else is skipped without allocating. Decoding
// follows protobuf's rules as prost-reflect applies them, so it gives what the reflective
// decoder gives: the last value of a singular field wins, a message field that occurs more
// than once merges, repeated integers may be packed or not, a planned field with the wrong wire
// type is an error, and so is any malformed input.

/// What is wrong with the bytes, and in which message.
#[derive(Debug, Clone, Copy)]
struct WireError {
    problem: &'static str,
    /// The innermost message being decoded; empty until known.
    message: &'static str,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.problem)?;
        if !self.message.is_empty() {
            write!(f, " (in an {})", self.message)?;
        }
        Ok(())
    }
}

type Wire<T> = std::result::Result<T, WireError>;

fn wire_error<T>(problem: &'static str) -> Wire<T> {
    Err(WireError {
        problem,
        message: "",
    })
}

/// A position in one message's bytes.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline]
    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    fn varint(&mut self) -> Wire<u64> {
        match self.buf.get(self.pos) {
            Some(&byte) if byte < 0x80 => {
                self.pos += 1;
                Ok(u64::from(byte))
            }
            _ => self.long_varint(),
        }
    }

    fn long_varint(&mut self) -> Wire<u64> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let mut value = 0u64;
        for (i, &byte) in rest.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                if i == 9 && byte > 1 {
                    return wire_error("varint overflows 64 bits");
                }
                self.pos += i + 1;
                return Ok(value);
            }
        }
        if rest.len() < 10 {
            wire_error("truncated varint")
        } else {
            wire_error("varint longer than 10 bytes")
        }
    }

    /// The next `len` bytes.
    #[inline]
    fn take(&mut self, len: u64) -> Wire<&'a [u8]> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match usize::try_from(len).ok().and_then(|len| rest.get(..len)) {
            Some(bytes) => {
                self.pos += bytes.len();
                Ok(bytes)
            }
            None => wire_error("a field runs past the end of its message"),
        }
    }

    /// A little-endian fixed-width value of `width` bytes.
    #[inline]
    fn fixed(&mut self, width: u64) -> Wire<u64> {
        let bytes = self.take(width)?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0, |value, &byte| (value << 8) | u64::from(byte)))
    }

    /// A field key: (field number, wire type).
    #[inline]
    fn key(&mut self) -> Wire<(u32, u8)> {
        let Ok(key) = u32::try_from(self.varint()?) else {
            return wire_error("field key out of range");
        };
        let wire = (key & 7) as u8;
        if wire > WIRE_FIXED32 {
            return wire_error("invalid wire type");
        }
        let number = key >> 3;
        if number == 0 {
            return wire_error("field number 0");
        }
        Ok((number, wire))
    }

    /// Skips the value of a field that the plan does not read.
    fn skip(&mut self, wire: u8, number: u32, depth: u32) -> Wire<()> {
        match wire {
            WIRE_VARINT => {
                self.varint()?;
            }
            WIRE_FIXED64 => {
                self.take(8)?;
            }
            WIRE_FIXED32 => {
                self.take(4)?;
            }
            WIRE_LEN => {
                let len = self.varint()?;
                self.take(len)?;
            }
            WIRE_START_GROUP => {
                if depth >= RECURSION_LIMIT {
                    return wire_error("messages nested too deeply");
                }
                loop {
                    let (inner, inner_wire) = self.key()?;
                    if inner_wire == WIRE_END_GROUP {
                        if inner != number {
                            return wire_error("mismatched end-group tag");
                        }
                        break;
                    }
                    self.skip(inner_wire, inner, depth + 1)?;
                }
            }
            _ => return wire_error("unexpected end-group tag"),
        }
        Ok(())
    }
}

/// A planned field, positioned at its value; its type was checked when the plan was made.
struct FieldValue<'r, 'a> {
    reader: &'r mut Reader<'a>,
    wire: u8,
    int: IntKind,
}

impl<'a> FieldValue<'_, 'a> {
    /// The contents of a string or message field.
    #[inline]
    fn bytes(self) -> Wire<&'a [u8]> {
        if self.wire != WIRE_LEN {
            return wire_error("wrong wire type for a string or message field");
        }
        let len = self.reader.varint()?;
        self.reader.take(len)
    }

    #[inline]
    fn str(self) -> Wire<&'a str> {
        match std::str::from_utf8(self.bytes()?) {
            Ok(s) => Ok(s),
            Err(_) => wire_error("a string field is not valid UTF-8"),
        }
    }

    #[inline]
    fn scalar(reader: &mut Reader<'a>, int: IntKind) -> Wire<Option<i64>> {
        let raw = match int.wire_type() {
            WIRE_VARINT => reader.varint()?,
            WIRE_FIXED32 => reader.fixed(4)?,
            _ => reader.fixed(8)?,
        };
        Ok(int.value(raw))
    }

    /// A singular integer field; 0 where the reflective decoder has no `i64` for it.
    #[inline]
    fn int(self) -> Wire<i64> {
        if self.wire != self.int.wire_type() {
            return wire_error("wrong wire type for an integer field");
        }
        Ok(Self::scalar(self.reader, self.int)?.unwrap_or(0))
    }

    /// One occurrence of a repeated integer field, packed or not: calls `each` per element.
    #[inline]
    fn ints(self, mut each: impl FnMut(Option<i64>)) -> Wire<()> {
        if self.wire == WIRE_LEN {
            let len = self.reader.varint()?;
            let mut packed = Reader::new(self.reader.take(len)?);
            while !packed.at_end() {
                each(Self::scalar(&mut packed, self.int)?);
            }
            Ok(())
        } else if self.wire == self.int.wire_type() {
            each(Self::scalar(self.reader, self.int)?);
            Ok(())
        } else {
            wire_error("wrong wire type for a repeated integer field")
        }
    }
}

/// Reads the fields of one message: `each` gets the planned ones, in order; the rest are
/// skipped. `depth` is the message's nesting depth (0 for `HloProto`); `message` names it in
/// errors.
#[inline]
fn fields<'a, A: Copy>(
    bytes: &'a [u8],
    table: &Table<A>,
    depth: u32,
    message: &'static str,
    mut each: impl FnMut(A, FieldValue<'_, 'a>) -> Wire<()>,
) -> Wire<()> {
    let mut read = || {
        if depth > RECURSION_LIMIT {
            return wire_error("messages nested too deeply");
        }
        let mut reader = Reader::new(bytes);
        while !reader.at_end() {
            let (number, wire) = reader.key()?;
            match table.get(number) {
                Some(slot) => each(
                    slot.action,
                    FieldValue {
                        reader: &mut reader,
                        wire,
                        int: slot.int,
                    },
                )?,
                None => reader.skip(wire, number, depth)?,
            }
        }
        Ok(())
    };
    read().map_err(|e| {
        if e.message.is_empty() {
            WireError { message, ..e }
        } else {
            e
        }
    })
}

/// The module-level fields read so far, and the computations, not yet decoded.
#[derive(Default)]
struct ModuleScan<'a> {
    name: &'a str,
    id: i64,
    computations: Vec<&'a [u8]>,
    stack_frames: StackFrameIndex,
    fingerprint: Option<&'a str>,
}

/// Reads one occurrence of `HloProto.hlo_module` into `scan` (occurrences merge).
fn scan_module<'a>(
    plan: &FieldPlan,
    bytes: &'a [u8],
    depth: u32,
    scan: &mut ModuleScan<'a>,
) -> Wire<()> {
    fields(
        bytes,
        &plan.module,
        depth,
        "xla.HloModuleProto",
        |field, value| {
            match field {
                ModuleField::Name => scan.name = value.str()?,
                ModuleField::Id => scan.id = value.int()?,
                ModuleField::Computations => scan.computations.push(value.bytes()?),
                ModuleField::StackFrameIndex => decode_stack_frame_index(
                    plan,
                    value.bytes()?,
                    depth + 1,
                    &mut scan.stack_frames,
                )?,
                ModuleField::FrontendAttributes => fields(
                    value.bytes()?,
                    &plan.attributes,
                    depth + 1,
                    "xla.FrontendAttributes",
                    |(), entry| {
                        let (mut key, mut text) = ("", "");
                        fields(
                            entry.bytes()?,
                            &plan.attribute,
                            depth + 2,
                            "xla.FrontendAttributes.MapEntry",
                            |field, value| {
                                match field {
                                    EntryField::Key => key = value.str()?,
                                    EntryField::Value => text = value.str()?,
                                }
                                Ok(())
                            },
                        )?;
                        if key == FINGERPRINT_ATTRIBUTE {
                            scan.fingerprint = Some(text);
                        }
                        Ok(())
                    },
                )?,
            }
            Ok(())
        },
    )
}

fn decode_stack_frame_index(
    plan: &FieldPlan,
    bytes: &[u8],
    depth: u32,
    index: &mut StackFrameIndex,
) -> Wire<()> {
    fields(
        bytes,
        &plan.stack_index,
        depth,
        "xla.StackFrameIndexProto",
        |field, value| {
            match field {
                IndexField::FileNames => index.file_names.push(value.str()?.to_string()),
                IndexField::FunctionNames => index.function_names.push(value.str()?.to_string()),
                IndexField::FileLocations => {
                    let mut loc = FileLocation {
                        file_name_id: 0,
                        function_name_id: 0,
                        line: 0,
                        column: 0,
                    };
                    fields(
                        value.bytes()?,
                        &plan.location,
                        depth + 1,
                        "xla.StackFrameIndexProto.FileLocation",
                        |field, value| {
                            let value = value.int()?;
                            match field {
                                LocationField::FileNameId => loc.file_name_id = value,
                                LocationField::FunctionNameId => loc.function_name_id = value,
                                LocationField::Line => loc.line = value,
                                LocationField::Column => loc.column = value,
                            }
                            Ok(())
                        },
                    )?;
                    index.file_locations.push(loc);
                }
                IndexField::StackFrames => {
                    let mut frame = StackFrame {
                        file_location_id: 0,
                        parent_frame_id: 0,
                    };
                    fields(
                        value.bytes()?,
                        &plan.frame,
                        depth + 1,
                        "xla.StackFrameIndexProto.StackFrame",
                        |field, value| {
                            let value = value.int()?;
                            match field {
                                FrameField::FileLocationId => frame.file_location_id = value,
                                FrameField::ParentFrameId => frame.parent_frame_id = value,
                            }
                            Ok(())
                        },
                    )?;
                    index.frames.push(frame);
                }
            }
            Ok(())
        },
    )
}

fn decode_computation<'a>(plan: &FieldPlan, bytes: &'a [u8], depth: u32) -> Wire<Computation<'a>> {
    // The instructions are found first, so that their list is allocated once.
    let mut id = 0;
    let mut found = Vec::new();
    fields(
        bytes,
        &plan.computation,
        depth,
        "xla.HloComputationProto",
        |field, value| {
            match field {
                ComputationField::Id => id = value.int()?,
                ComputationField::Instructions => found.push(value.bytes()?),
            }
            Ok(())
        },
    )?;
    let mut instructions = Vec::with_capacity(found.len());
    for bytes in found {
        instructions.push(decode_instruction(plan, bytes, depth + 1)?);
    }
    Ok(Computation { id, instructions })
}

fn decode_instruction<'a>(plan: &FieldPlan, bytes: &'a [u8], depth: u32) -> Wire<Instruction<'a>> {
    let mut instr = Instruction::default();
    // As the reflective decoder does: `collective_device_list` first, then the older fields.
    let mut legacy_groups = Vec::new();
    let mut iota_list = 0;
    let inner = depth + 1;
    fields(
        bytes,
        &plan.instruction,
        depth,
        "xla.HloInstructionProto",
        |field, value| {
            match field {
                InstructionField::Name => instr.name = Cow::Borrowed(value.str()?),
                InstructionField::Opcode => instr.opcode = Cow::Borrowed(value.str()?),
                InstructionField::Shape => {
                    decode_shape(plan, value.bytes()?, inner, &mut instr.shape)?
                }
                InstructionField::Metadata => {
                    decode_metadata(plan, value.bytes()?, inner, &mut instr)?
                }
                InstructionField::Id => instr.id = value.int()?,
                InstructionField::OperandIds => value.ints(|v| {
                    if let Some(v) = v {
                        instr.operand_ids.push(v)
                    }
                })?,
                InstructionField::CalledComputationIds => value.ints(|v| {
                    if let Some(v) = v {
                        instr.called_computation_ids.push(v)
                    }
                })?,
                InstructionField::ReplicaGroups => legacy_groups.push(count_replica_ids(
                    &plan.legacy_group,
                    value.bytes()?,
                    inner,
                )?),
                InstructionField::CollectiveDeviceList => {
                    decode_device_list(plan, value.bytes()?, inner, &mut instr.groups)?
                }
                InstructionField::IotaCollectiveDeviceList => {
                    decode_iota_list(&plan.iota_list, value.bytes()?, inner, &mut iota_list)?
                }
                InstructionField::MeshAxesReplicaGroupList => decode_mesh_groups(
                    plan,
                    value.bytes()?,
                    inner,
                    instr.groups.mesh.get_or_insert_default(),
                )?,
            }
            Ok(())
        },
    )?;
    if instr.groups.explicit.is_empty() {
        instr.groups.explicit = legacy_groups;
    }
    if instr.groups.iota <= 0 {
        instr.groups.iota = iota_list;
    }
    Ok(instr)
}

fn decode_shape(plan: &FieldPlan, bytes: &[u8], depth: u32, shape: &mut Shape) -> Wire<()> {
    fields(
        bytes,
        &plan.shape,
        depth,
        "xla.ShapeProto",
        |field, value| {
            match field {
                ShapeField::ElementType => {
                    shape.element_type = i32::try_from(value.int()?).unwrap_or(-1)
                }
                ShapeField::Dimensions => value.ints(|v| {
                    if let Some(v) = v {
                        shape.dimensions.push(v)
                    }
                })?,
                ShapeField::TupleShapes => {
                    let mut element = Shape::default();
                    decode_shape(plan, value.bytes()?, depth + 1, &mut element)?;
                    shape.tuple_shapes.push(element);
                }
                ShapeField::Layout => fields(
                    value.bytes()?,
                    &plan.layout,
                    depth + 1,
                    "xla.LayoutProto",
                    |(), value| {
                        shape.memory_space = value.int()?;
                        Ok(())
                    },
                )?,
            }
            Ok(())
        },
    )
}

fn decode_metadata<'a>(
    plan: &FieldPlan,
    bytes: &'a [u8],
    depth: u32,
    instr: &mut Instruction<'a>,
) -> Wire<()> {
    fields(
        bytes,
        &plan.metadata,
        depth,
        "xla.OpMetadata",
        |field, value| {
            match field {
                MetadataField::OpType => instr.op_type = Cow::Borrowed(value.str()?),
                MetadataField::OpName => instr.op_name = Cow::Borrowed(value.str()?),
                MetadataField::SourceFile => instr.source_file = Cow::Borrowed(value.str()?),
                MetadataField::SourceLine => instr.source_line = value.int()?,
                MetadataField::StackFrameId => instr.stack_frame_id = value.int()?,
                MetadataField::SchedulingName => {
                    instr.scheduling_name = Cow::Borrowed(value.str()?)
                }
            }
            Ok(())
        },
    )
}

/// The number of `replica_ids` of one `ReplicaGroup`.
fn count_replica_ids(table: &Table<()>, bytes: &[u8], depth: u32) -> Wire<usize> {
    let mut count = 0;
    fields(bytes, table, depth, "xla.ReplicaGroup", |(), value| {
        value.ints(|_| count += 1)
    })?;
    Ok(count)
}

/// `num_devices_per_group` of an `IotaReplicaGroupListProto`, into `devices_per_group` when
/// present.
fn decode_iota_list(
    table: &Table<()>,
    bytes: &[u8],
    depth: u32,
    devices_per_group: &mut i64,
) -> Wire<()> {
    fields(
        bytes,
        table,
        depth,
        "xla.IotaReplicaGroupListProto",
        |(), value| {
            *devices_per_group = value.int()?;
            Ok(())
        },
    )
}

fn decode_device_list(
    plan: &FieldPlan,
    bytes: &[u8],
    depth: u32,
    groups: &mut DeviceGroups,
) -> Wire<()> {
    fields(
        bytes,
        &plan.device_list,
        depth,
        "xla.CollectiveDeviceListProto",
        |field, value| {
            match field {
                DeviceListField::ReplicaGroups => groups.explicit.push(count_replica_ids(
                    &plan.device_list_group,
                    value.bytes()?,
                    depth + 1,
                )?),
                DeviceListField::IotaReplicaGroupList => decode_iota_list(
                    &plan.device_list_iota,
                    value.bytes()?,
                    depth + 1,
                    &mut groups.iota,
                )?,
            }
            Ok(())
        },
    )
}

fn decode_mesh_groups(
    plan: &FieldPlan,
    bytes: &[u8],
    depth: u32,
    mesh: &mut MeshGroups,
) -> Wire<()> {
    fields(
        bytes,
        &plan.mesh_groups,
        depth,
        "xla.MeshAxesReplicaGroupListProto",
        |field, value| {
            match field {
                MeshGroupsField::Mesh => fields(
                    value.bytes()?,
                    &plan.mesh,
                    depth + 1,
                    "xla.MeshProto",
                    |(), axis| {
                        let mut size = 0;
                        fields(
                            axis.bytes()?,
                            &plan.mesh_axis,
                            depth + 2,
                            "xla.MeshProto.MeshAxis",
                            |(), value| {
                                size = value.int()?;
                                Ok(())
                            },
                        )?;
                        mesh.axis_sizes.push(size);
                        Ok(())
                    },
                )?,
                MeshGroupsField::Axes => {
                    let (mut index, mut sub_size) = (0, None);
                    fields(
                        value.bytes()?,
                        &plan.axis_ref,
                        depth + 1,
                        "xla.AxisRefProto",
                        |field, value| {
                            match field {
                                AxisRefField::MeshAxisIndex => index = value.int()?,
                                AxisRefField::SubAxisInfo => {
                                    let size = sub_size.get_or_insert(0);
                                    fields(
                                        value.bytes()?,
                                        &plan.sub_axis,
                                        depth + 2,
                                        "xla.AxisRefProto.SubAxis",
                                        |(), value| {
                                            *size = value.int()?;
                                            Ok(())
                                        },
                                    )?
                                }
                            }
                            Ok(())
                        },
                    )?;
                    mesh.axes.push((index, sub_size));
                }
            }
            Ok(())
        },
    )
}

/// Modules smaller than this are decoded on one thread.
const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// Decodes an `xla.HloProto` with the schema's field plan; with `parallel`, large modules'
/// computations are decoded on rayon's threads.
fn decode_planned<'a>(
    plan: &FieldPlan,
    bytes: &'a [u8],
    parallel: bool,
) -> Result<ModuleParts<'a>> {
    use rayon::prelude::*;

    let context = |e: WireError| anyhow!("decoding xla.HloProto ({} bytes): {e}", bytes.len());
    let mut scan = ModuleScan::default();
    let mut has_module = false;
    fields(bytes, &plan.hlo_proto, 0, "xla.HloProto", |(), value| {
        has_module = true;
        scan_module(plan, value.bytes()?, 1, &mut scan)
    })
    .map_err(context)?;
    if !has_module {
        bail!("xla.HloProto has no hlo_module");
    }
    let decode = |c: &&'a [u8]| decode_computation(plan, c, 2);
    let computations =
        if parallel && scan.computations.len() > 1 && bytes.len() >= PARALLEL_MIN_BYTES {
            scan.computations
                .par_iter()
                .map(decode)
                .collect::<Wire<Vec<_>>>()
        } else {
            scan.computations.iter().map(decode).collect()
        }
        .map_err(context)?;
    Ok(ModuleParts {
        name: scan.name.to_string(),
        id: scan.id,
        computations,
        stack_frames: scan.stack_frames,
        fingerprint: scan.fingerprint.map(str::to_string),
    })
}

/// Decodes one `xla.HloProto` (raw bytes, not xz-compressed) into an [`HloModuleInfo`].
///
/// Reads only the fields nsys-jax-pipe uses, by the numbers and types the schema gives them
/// (see [`HloSchema`]); everything else is skipped. The computations of a large module are
/// decoded in parallel (rayon). Gives what [`decode_hlo_reflect`] gives, faster.
pub fn decode_hlo(schema: &HloSchema, bytes: &[u8]) -> Result<HloModuleInfo> {
    module_info(schema, decode_planned(&schema.plan, bytes, true)?, true)
}

// ---------------------------------------------------------------------------------------------
// Reflective decoding, the reference: dynamic messages read by field number.
//
// Each message is consumed in one pass over the fields it has (`take_fields`), matching on
// field numbers: values move out without copies, and whatever the code does not use is
// skipped. Fields that the schema does not declare never show up here.

fn dyn_fields(msg: &mut DynamicMessage) -> impl Iterator<Item = (u32, Value)> + '_ {
    msg.take_fields().map(|(f, v)| (f.number(), v))
}

fn value_i64(value: &Value) -> Option<i64> {
    match *value {
        Value::I32(v) => Some(v.into()),
        Value::I64(v) => Some(v),
        Value::U32(v) => Some(v.into()),
        Value::U64(v) => i64::try_from(v).ok(),
        Value::EnumNumber(v) => Some(v.into()),
        _ => None,
    }
}

fn int(value: &Value) -> i64 {
    value_i64(value).unwrap_or(0)
}

fn ints(value: &Value) -> Vec<i64> {
    match value {
        Value::List(items) => items.iter().filter_map(value_i64).collect(),
        _ => Vec::new(),
    }
}

fn string(value: Value) -> String {
    match value {
        Value::String(s) => s,
        _ => String::new(),
    }
}

fn strings(value: Value) -> Vec<String> {
    match value {
        Value::List(items) => items.into_iter().map(string).collect(),
        _ => Vec::new(),
    }
}

fn message(value: Value) -> Option<DynamicMessage> {
    match value {
        Value::Message(m) => Some(m),
        _ => None,
    }
}

fn messages(value: Value) -> impl Iterator<Item = DynamicMessage> {
    let items = match value {
        Value::List(items) => items,
        _ => Vec::new(),
    };
    items.into_iter().filter_map(message)
}

/// The integer field `number` of a message, 0 when unset.
fn int_field(mut msg: DynamicMessage, number: u32) -> i64 {
    dyn_fields(&mut msg)
        .find(|(n, _)| *n == number)
        .map_or(0, |(_, v)| int(&v))
}

fn take_shape(mut msg: DynamicMessage) -> Shape {
    let mut shape = Shape::default();
    for (number, value) in dyn_fields(&mut msg) {
        match number {
            field::SHAPE_ELEMENT_TYPE => {
                shape.element_type = i32::try_from(int(&value)).unwrap_or(-1)
            }
            field::SHAPE_DIMENSIONS => shape.dimensions = ints(&value).into(),
            field::SHAPE_TUPLE_SHAPES => {
                shape.tuple_shapes = messages(value).map(take_shape).collect()
            }
            field::SHAPE_LAYOUT => {
                if let Some(layout) = message(value) {
                    shape.memory_space = int_field(layout, field::LAYOUT_MEMORY_SPACE);
                }
            }
            _ => {}
        }
    }
    shape
}

/// Sizes of a list of `xla.ReplicaGroup`s.
fn group_sizes(value: Value) -> Vec<usize> {
    messages(value)
        .map(|mut group| {
            dyn_fields(&mut group)
                .find(|(n, _)| *n == field::REPLICA_IDS)
                .map_or(0, |(_, ids)| match ids {
                    Value::List(ids) => ids.len(),
                    _ => 0,
                })
        })
        .collect()
}

fn read_mesh_groups(mut list: DynamicMessage) -> MeshGroups {
    let mut axis_sizes = Vec::new();
    let mut axes = Vec::new();
    for (number, value) in dyn_fields(&mut list) {
        match number {
            field::MESH_GROUPS_MESH => {
                let Some(mut mesh) = message(value) else {
                    continue;
                };
                for (n, v) in dyn_fields(&mut mesh) {
                    if n == field::MESH_AXES {
                        axis_sizes = messages(v)
                            .map(|axis| int_field(axis, field::MESH_AXIS_SIZE))
                            .collect();
                    }
                }
            }
            field::MESH_GROUPS_AXES => {
                axes = messages(value)
                    .map(|mut axis| {
                        let (mut index, mut sub_size) = (0, None);
                        for (n, v) in dyn_fields(&mut axis) {
                            match n {
                                field::AXIS_REF_INDEX => index = int(&v),
                                field::AXIS_REF_SUB_AXIS => {
                                    sub_size =
                                        message(v).map(|sub| int_field(sub, field::SUB_AXIS_SIZE))
                                }
                                _ => {}
                            }
                        }
                        (index, sub_size)
                    })
                    .collect();
            }
            _ => {}
        }
    }
    MeshGroups { axis_sizes, axes }
}

fn take_instruction(mut msg: DynamicMessage) -> Instruction<'static> {
    let mut instr = Instruction::default();
    let mut legacy_groups = Vec::new();
    let mut iota_list = 0;
    for (number, value) in dyn_fields(&mut msg) {
        match number {
            field::INSTR_NAME => instr.name = string(value).into(),
            field::INSTR_OPCODE => instr.opcode = string(value).into(),
            field::INSTR_SHAPE => {
                if let Some(shape) = message(value) {
                    instr.shape = take_shape(shape);
                }
            }
            field::INSTR_METADATA => {
                if let Some(metadata) = message(value) {
                    take_metadata(&mut instr, metadata);
                }
            }
            field::INSTR_ID => instr.id = int(&value),
            field::INSTR_OPERAND_IDS => instr.operand_ids = ints(&value).into(),
            field::INSTR_CALLED_COMPUTATION_IDS => {
                instr.called_computation_ids = ints(&value).into()
            }
            field::INSTR_REPLICA_GROUPS => legacy_groups = group_sizes(value),
            field::INSTR_COLLECTIVE_DEVICE_LIST => {
                let Some(mut list) = message(value) else {
                    continue;
                };
                for (n, v) in dyn_fields(&mut list) {
                    match n {
                        field::CDL_REPLICA_GROUPS => instr.groups.explicit = group_sizes(v),
                        field::CDL_IOTA_LIST => {
                            if let Some(iota) = message(v) {
                                instr.groups.iota =
                                    int_field(iota, field::IOTA_NUM_DEVICES_PER_GROUP);
                            }
                        }
                        _ => {}
                    }
                }
            }
            field::INSTR_IOTA_COLLECTIVE_DEVICE_LIST => {
                if let Some(iota) = message(value) {
                    iota_list = int_field(iota, field::IOTA_NUM_DEVICES_PER_GROUP);
                }
            }
            field::INSTR_MESH_AXES_REPLICA_GROUP_LIST => {
                instr.groups.mesh = message(value).map(|m| Box::new(read_mesh_groups(m)));
            }
            _ => {}
        }
    }
    if instr.groups.explicit.is_empty() {
        instr.groups.explicit = legacy_groups;
    }
    if instr.groups.iota <= 0 {
        instr.groups.iota = iota_list;
    }
    instr
}

fn take_metadata(instr: &mut Instruction<'static>, mut metadata: DynamicMessage) {
    for (number, value) in dyn_fields(&mut metadata) {
        match number {
            field::META_OP_TYPE => instr.op_type = string(value).into(),
            field::META_OP_NAME => instr.op_name = string(value).into(),
            field::META_SOURCE_FILE => instr.source_file = string(value).into(),
            field::META_SOURCE_LINE => instr.source_line = int(&value),
            field::META_STACK_FRAME_ID => instr.stack_frame_id = int(&value),
            field::META_SCHEDULING_NAME => instr.scheduling_name = string(value).into(),
            _ => {}
        }
    }
}

fn take_computation(mut msg: DynamicMessage) -> Computation<'static> {
    let mut computation = Computation {
        id: 0,
        instructions: Vec::new(),
    };
    for (number, value) in dyn_fields(&mut msg) {
        match number {
            field::COMPUTATION_ID => computation.id = int(&value),
            field::COMPUTATION_INSTRUCTIONS => {
                computation.instructions = messages(value).map(take_instruction).collect()
            }
            _ => {}
        }
    }
    computation
}

fn take_stack_frame_index(mut msg: DynamicMessage) -> StackFrameIndex {
    let mut index = StackFrameIndex::default();
    for (number, value) in dyn_fields(&mut msg) {
        match number {
            field::SFI_FILE_NAMES => index.file_names = strings(value),
            field::SFI_FUNCTION_NAMES => index.function_names = strings(value),
            field::SFI_FILE_LOCATIONS => {
                index.file_locations = messages(value)
                    .map(|mut l| {
                        let mut loc = FileLocation {
                            file_name_id: 0,
                            function_name_id: 0,
                            line: 0,
                            column: 0,
                        };
                        for (n, v) in dyn_fields(&mut l) {
                            match n {
                                field::LOC_FILE_NAME_ID => loc.file_name_id = int(&v),
                                field::LOC_FUNCTION_NAME_ID => loc.function_name_id = int(&v),
                                field::LOC_LINE => loc.line = int(&v),
                                field::LOC_COLUMN => loc.column = int(&v),
                                _ => {}
                            }
                        }
                        loc
                    })
                    .collect()
            }
            field::SFI_STACK_FRAMES => {
                index.frames = messages(value)
                    .map(|mut f| {
                        let mut frame = StackFrame {
                            file_location_id: 0,
                            parent_frame_id: 0,
                        };
                        for (n, v) in dyn_fields(&mut f) {
                            match n {
                                field::FRAME_FILE_LOCATION_ID => frame.file_location_id = int(&v),
                                field::FRAME_PARENT_FRAME_ID => frame.parent_frame_id = int(&v),
                                _ => {}
                            }
                        }
                        frame
                    })
                    .collect()
            }
            _ => {}
        }
    }
    index
}

fn take_fingerprint(mut attributes: DynamicMessage) -> Option<String> {
    let (_, map) =
        dyn_fields(&mut attributes).find(|(n, _)| *n == field::FRONTEND_ATTRIBUTES_MAP)?;
    match map {
        Value::Map(mut map) => {
            match map.remove(&MapKey::String(FINGERPRINT_ATTRIBUTE.to_string()))? {
                Value::String(s) => Some(s),
                _ => None,
            }
        }
        _ => None,
    }
}

fn take_module(parts: &mut ModuleParts<'static>, mut module: DynamicMessage) {
    for (number, value) in dyn_fields(&mut module) {
        match number {
            field::MODULE_NAME => parts.name = string(value),
            field::MODULE_ID => parts.id = int(&value),
            field::MODULE_COMPUTATIONS => {
                parts.computations = messages(value).map(take_computation).collect()
            }
            field::MODULE_STACK_FRAME_INDEX => {
                if let Some(index) = message(value) {
                    parts.stack_frames = take_stack_frame_index(index);
                }
            }
            field::MODULE_FRONTEND_ATTRIBUTES => {
                parts.fingerprint = message(value).and_then(take_fingerprint)
            }
            _ => {}
        }
    }
}

/// One field of a protobuf message in wire form.
struct WireField<'a> {
    number: u32,
    /// The whole field, key included.
    raw: &'a [u8],
    /// The contents of a length-delimited field.
    payload: Option<&'a [u8]>,
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// Splits a message into its fields without decoding them; `None` if the bytes are not a
/// well-formed message (or use groups).
fn wire_fields(buf: &[u8]) -> Option<Vec<WireField<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let key = read_varint(buf, &mut pos)?;
        let number = u32::try_from(key >> 3).ok().filter(|&n| n > 0)?;
        let payload = match key & 7 {
            0 => {
                read_varint(buf, &mut pos)?;
                None
            }
            1 => {
                pos = pos.checked_add(8)?;
                None
            }
            5 => {
                pos = pos.checked_add(4)?;
                None
            }
            2 => {
                let len = usize::try_from(read_varint(buf, &mut pos)?).ok()?;
                let end = pos.checked_add(len)?;
                let payload = buf.get(pos..end)?;
                pos = end;
                Some(payload)
            }
            _ => return None,
        };
        out.push(WireField {
            number,
            raw: buf.get(start..pos)?,
            payload,
        });
    }
    Some(out)
}

/// Decodes the computations of `HloProto.hlo_module` in parallel: splits the module into its
/// computations and everything else, and decodes each piece with the schema. `None` when the
/// bytes are not laid out the usual way; the caller then decodes the whole message in one go.
fn decode_split(schema: &HloSchema, bytes: &[u8]) -> Option<Result<ModuleParts<'static>>> {
    use rayon::prelude::*;

    let computation_desc = schema.computation.as_ref()?;
    let top = wire_fields(bytes)?;
    let mut modules = top.iter().filter(|f| f.number == field::HLO_MODULE);
    let module_bytes = modules.next()?.payload?;
    if modules.next().is_some() {
        return None; // Repeated occurrences merge: leave that to the full decoder.
    }
    let mut rest = Vec::new();
    let mut computation_bytes = Vec::new();
    for f in wire_fields(module_bytes)? {
        match (f.number, f.payload) {
            (field::MODULE_COMPUTATIONS, Some(payload)) => computation_bytes.push(payload),
            (field::MODULE_COMPUTATIONS, None) => return None,
            _ => rest.extend_from_slice(f.raw),
        }
    }
    let computations = computation_bytes
        .par_iter()
        .map(|c| {
            DynamicMessage::decode(computation_desc.clone(), *c)
                .map(take_computation)
                .map_err(|e| anyhow!("decoding xla.HloComputationProto: {e}"))
        })
        .collect::<Result<Vec<_>>>();
    Some(computations.and_then(|computations| {
        let module = DynamicMessage::decode(schema.module.clone(), rest.as_slice())
            .map_err(|e| anyhow!("decoding xla.HloModuleProto: {e}"))?;
        let mut parts = ModuleParts::default();
        take_module(&mut parts, module);
        parts.computations = computations;
        Ok(parts)
    }))
}

/// Decodes a whole `xla.HloProto` in one go.
fn decode_whole(schema: &HloSchema, bytes: &[u8]) -> Result<ModuleParts<'static>> {
    let mut proto = DynamicMessage::decode(schema.hlo_proto.clone(), bytes)
        .map_err(|e| anyhow!("decoding xla.HloProto ({} bytes): {e}", bytes.len()))?;
    let module = dyn_fields(&mut proto)
        .find(|(n, _)| *n == field::HLO_MODULE)
        .and_then(|(_, v)| message(v))
        .ok_or_else(|| anyhow!("xla.HloProto has no hlo_module"))?;
    let mut parts = ModuleParts::default();
    take_module(&mut parts, module);
    Ok(parts)
}

/// Decodes one `xla.HloProto` like [`decode_hlo`], through `prost_reflect::DynamicMessage`:
/// every field the schema declares is decoded, and fields are then read by their NUMBER. The
/// reference that the fast decoder is tested against; several times slower.
pub fn decode_hlo_reflect(schema: &HloSchema, bytes: &[u8]) -> Result<HloModuleInfo> {
    let parts = match decode_split(schema, bytes) {
        Some(parts) => parts?,
        None => decode_whole(schema, bytes)?,
    };
    module_info(schema, parts, true)
}

// ---------------------------------------------------------------------------------------------
// Communication analysis.

/// Classifies communication and assembles the summary; with `parallel`, sorts and copies on
/// rayon's threads.
fn module_info(
    schema: &HloSchema,
    parts: ModuleParts<'_>,
    parallel: bool,
) -> Result<HloModuleInfo> {
    use rayon::prelude::*;

    let ModuleParts {
        name,
        id,
        computations,
        stack_frames,
        fingerprint,
    } = parts;

    let total = computations.iter().map(|c| c.instructions.len()).sum();
    let mut communication = Vec::with_capacity(total);
    {
        let analysis = Analysis::new(schema, &name, &computations);
        for (ci, computation) in computations.iter().enumerate() {
            for (ii, instr) in computation.instructions.iter().enumerate() {
                communication.push(
                    analysis.communication(Ref { ci, ii }).with_context(|| {
                        format!("HLO module {name}, instruction {}", instr.name)
                    })?,
                );
            }
        }
    }

    // The order by name (then position), from small keys rather than the instructions. The
    // first 16 bytes of a name (zero-padded, as a number) order names as the names do, and
    // settle most comparisons without reading the name.
    let order: Vec<u32> = {
        let mut keys: Vec<(u128, &str, u32)> = Vec::with_capacity(total);
        for instr in computations.iter().flat_map(|c| &c.instructions) {
            let mut prefix = [0u8; 16];
            let len = instr.name.len().min(prefix.len());
            prefix[..len].copy_from_slice(&instr.name.as_bytes()[..len]);
            let index = u32::try_from(keys.len()).unwrap_or(u32::MAX);
            keys.push((u128::from_be_bytes(prefix), &instr.name, index));
        }
        if parallel {
            keys.par_sort_unstable();
        } else {
            keys.sort_unstable();
        }
        keys.into_iter().map(|(_, _, i)| i).collect()
    };
    // Copy the strings in the order they lie in memory, then put the instructions in order.
    let info = |instr: Instruction<'_>| {
        Some(HloInstructionInfo {
            name: instr.name.into_owned(),
            opcode: instr.opcode.into_owned(),
            op_type: instr.op_type.into_owned(),
            op_name: instr.op_name.into_owned(),
            source_file: instr.source_file.into_owned(),
            source_line: instr.source_line,
            stack_frame_id: instr.stack_frame_id,
            scheduling_name: instr.scheduling_name.into_owned(),
            communication: None,
        })
    };
    let mut unsorted: Vec<Option<HloInstructionInfo>> = if parallel {
        computations
            .into_par_iter()
            .flat_map_iter(|c| c.instructions.into_iter().map(info))
            .collect()
    } else {
        computations
            .into_iter()
            .flat_map(|c| c.instructions.into_iter().map(info))
            .collect()
    };
    let mut instructions = Vec::with_capacity(total);
    for i in order {
        let i = i as usize;
        if let Some(mut instr) = unsorted.get_mut(i).and_then(Option::take) {
            instr.communication = communication.get_mut(i).and_then(Option::take);
            instructions.push(instr);
        }
    }

    Ok(HloModuleInfo {
        name,
        id,
        fingerprint,
        instructions,
        stack_frames,
    })
}

/// A fast hasher for the analysis' integer keys (ids and indices).
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// Opcodes that are communication by themselves.
const COMMUNICATION_OPCODES: &[&str] = &[
    "all-gather",
    "all-reduce",
    "all-to-all",
    "collective-broadcast",
    "collective-permute",
    "reduce-scatter",
    "all-gather-start",
    "all-reduce-start",
    "collective-permute-start",
];

/// Position of an instruction: computation index, instruction index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ref {
    ci: usize,
    ii: usize,
}

struct Analysis<'a, 's> {
    schema: &'a HloSchema,
    module_name: &'a str,
    computations: &'a [Computation<'s>],
    /// Computation id → index.
    computation_index: IdMap<i64, usize>,
    /// (computation index, instruction id) → instruction index.
    local: IdMap<(usize, i64), usize>,
    /// Instruction id → first instruction with it anywhere in the module.
    global: IdMap<i64, Ref>,
}

impl<'a, 's> Analysis<'a, 's> {
    fn new(
        schema: &'a HloSchema,
        module_name: &'a str,
        computations: &'a [Computation<'s>],
    ) -> Self {
        let total = computations.iter().map(|c| c.instructions.len()).sum();
        let mut local = IdMap::with_capacity_and_hasher(total, Default::default());
        let mut global = IdMap::with_capacity_and_hasher(total, Default::default());
        for (ci, c) in computations.iter().enumerate() {
            for (ii, instr) in c.instructions.iter().enumerate() {
                local.insert((ci, instr.id), ii);
                global.entry(instr.id).or_insert(Ref { ci, ii });
            }
        }
        let mut computation_index =
            IdMap::with_capacity_and_hasher(computations.len(), Default::default());
        for (ci, c) in computations.iter().enumerate() {
            computation_index.entry(c.id).or_insert(ci);
        }
        Analysis {
            schema,
            module_name,
            computations,
            computation_index,
            local,
            global,
        }
    }

    fn get(&self, r: Ref) -> &'a Instruction<'s> {
        &self.computations[r.ci].instructions[r.ii]
    }

    /// Operand `k` of an instruction, found by id (its own computation first, then the module).
    fn operand(&self, r: Ref, k: usize) -> Result<&'a Instruction<'s>> {
        let instr = self.get(r);
        let id = *instr
            .operand_ids
            .as_slice()
            .get(k)
            .ok_or_else(|| anyhow!("{} has no operand {k}", instr.opcode))?;
        let found = self
            .local
            .get(&(r.ci, id))
            .map(|&ii| Ref { ci: r.ci, ii })
            .or_else(|| self.global.get(&id).copied())
            .ok_or_else(|| anyhow!("operand id {id} is not an instruction of the module"))?;
        Ok(self.get(found))
    }

    /// `Some(is_device_to_host)` when the instruction is a host-offload copy.
    fn host_offload(&self, r: Ref) -> Result<Option<bool>> {
        let instr = self.get(r);
        match instr.opcode.as_ref() {
            "dynamic-slice" => {
                let source = self.operand(r, 0)?;
                Ok((instr.shape.memory_space != source.shape.memory_space)
                    .then_some(instr.shape.memory_space == HOST_MEMORY_SPACE))
            }
            "dynamic-update-slice" => {
                let buffer = self.operand(r, 0)?;
                let update = self.operand(r, 1)?;
                let space = instr.shape.memory_space;
                Ok(
                    (space == buffer.shape.memory_space && update.shape.memory_space != space)
                        .then_some(space == HOST_MEMORY_SPACE),
                )
            }
            _ => Ok(None),
        }
    }

    fn is_communication_itself(&self, r: Ref) -> Result<bool> {
        let instr = self.get(r);
        Ok(COMMUNICATION_OPCODES.contains(&instr.opcode.as_ref())
            || self.host_offload(r)?.is_some())
    }

    /// Collects communication instructions in the computations called by `r`, recursively;
    /// stops once two are found.
    fn find_nested(&self, r: Ref, visited: &mut IdSet<usize>, found: &mut Vec<Ref>) -> Result<()> {
        for &cid in self.get(r).called_computation_ids.as_slice() {
            let ci = *self
                .computation_index
                .get(&cid)
                .ok_or_else(|| anyhow!("called computation id {cid} is not in the module"))?;
            if !visited.insert(ci) {
                continue;
            }
            for ii in 0..self.computations[ci].instructions.len() {
                let inner = Ref { ci, ii };
                if self.is_communication_itself(inner)? {
                    found.push(inner);
                }
                if found.len() > 1 {
                    return Ok(());
                }
                self.find_nested(inner, visited, found)?;
                if found.len() > 1 {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn communication(&self, r: Ref) -> Result<Option<CommunicationInfo>> {
        let instr = self.get(r);
        if let Some(to_host) = self.host_offload(r)? {
            return self.host_offload_info(r, to_host).map(Some);
        }
        if COMMUNICATION_OPCODES.contains(&instr.opcode.as_ref()) {
            return self.collective_info(r).map(Some);
        }
        if instr.opcode != "async-start" && instr.opcode != "fusion" {
            return Ok(None);
        }
        let mut found = Vec::new();
        self.find_nested(r, &mut IdSet::default(), &mut found)?;
        match found.as_slice() {
            [] => Ok(None),
            [inner] => {
                let inner_instr = self.get(*inner);
                let info = match self.host_offload(*inner)? {
                    Some(to_host) => self.host_offload_info(*inner, to_host),
                    None => self.collective_info(*inner),
                };
                info.map(Some)
                    .with_context(|| format!("wrapped instruction {}", inner_instr.name))
            }
            [first, second, ..] => bail!(
                "{} {} in module {} wraps more than one communication instruction ({} and {})",
                instr.opcode,
                instr.name,
                self.module_name,
                self.get(*first).name,
                self.get(*second).name
            ),
        }
    }

    fn host_offload_info(&self, r: Ref, to_host: bool) -> Result<CommunicationInfo> {
        let instr = self.get(r);
        let moved = if instr.opcode == "dynamic-update-slice" {
            &self.operand(r, 1)?.shape
        } else {
            &instr.shape
        };
        Ok(CommunicationInfo {
            collective: if to_host {
                "device-to-host"
            } else {
                "host-to-device"
            }
            .to_string(),
            message_size_bytes: self.shape_bytes(moved)?,
            collective_size: 1,
            bandwidth_correction: 1.0,
            bus_correction: 1.0,
        })
    }

    fn collective_info(&self, r: Ref) -> Result<CommunicationInfo> {
        let instr = self.get(r);
        let collective = instr.opcode.strip_suffix("-start").unwrap_or(&instr.opcode);
        let size = collective_size(instr)?;
        let mut message_size_bytes = 0u64;
        for k in 0..instr.operand_ids.as_slice().len() {
            let bytes = self.shape_bytes(&self.operand(r, k)?.shape)?;
            message_size_bytes += if collective == "reduce-scatter" {
                bytes / u64::from(size)
            } else {
                bytes
            };
        }
        let n = f64::from(size);
        let (bandwidth_correction, bus_correction) = match collective {
            "all-gather" | "reduce-scatter" => (n, (n - 1.0) / n),
            "all-reduce" => (1.0, 2.0 * (n - 1.0) / n),
            "all-to-all" => (1.0, (n - 1.0) / n),
            _ => (1.0, 1.0),
        };
        Ok(CommunicationInfo {
            collective: collective.to_string(),
            message_size_bytes,
            collective_size: size,
            bandwidth_correction,
            bus_correction,
        })
    }

    /// Bytes of an array or tuple shape.
    fn shape_bytes(&self, shape: &Shape) -> Result<u64> {
        if shape.element_type == PRIMITIVE_TUPLE || shape.element_type == PRIMITIVE_BUFFER {
            let mut total = 0u64;
            for element in &shape.tuple_shapes {
                total += self.shape_bytes(element)?;
            }
            return Ok(total);
        }
        let bits = element_bits(shape.element_type)
            .or_else(|| {
                self.schema
                    .primitive_type_name(shape.element_type)
                    .and_then(|name| bits_from_type_name(&name))
            })
            .ok_or_else(|| {
                let name = self
                    .schema
                    .primitive_type_name(shape.element_type)
                    .unwrap_or_else(|| "not in the schema".to_string());
                anyhow!(
                    "unknown element type {} ({name}): its size in bits is not known",
                    shape.element_type
                )
            })?;
        let mut elements = 1u128;
        for &d in shape.dimensions.as_slice() {
            let d = u128::try_from(d).map_err(|_| anyhow!("negative dimension {d}"))?;
            elements = elements.saturating_mul(d);
        }
        let bytes = elements.saturating_mul(bits.into()).div_ceil(8);
        Ok(u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

/// Size of the collective's groups (docs/design.md, "Formulas").
fn collective_size(instr: &Instruction<'_>) -> Result<u32> {
    if instr.opcode.starts_with("collective-permute") {
        return Ok(2);
    }
    let size = instr
        .groups
        .size()
        .with_context(|| format!("{} {}", instr.opcode, instr.name))?;
    if size <= 0 {
        bail!("{} {} has collective size {size}", instr.opcode, instr.name);
    }
    u32::try_from(size).map_err(|_| anyhow!("collective size {size} is too large"))
}

/// Bits per element of an `xla.PrimitiveType` number; `None` when unknown.
fn element_bits(element_type: i32) -> Option<u32> {
    Some(match element_type {
        1 => 8,                                     // PRED
        30 | 31 => 1,                               // S1, U1
        26 | 27 => 2,                               // S2, U2
        21 | 22 | 32 => 4,                          // S4, U4, F4E2M1FN
        35 | 36 => 6,                               // F6E3M2FN, F6E2M3FN
        2 | 6 => 8,                                 // S8, U8
        19 | 20 | 23 | 24 | 25 | 28 | 29 | 33 => 8, // F8*
        3 | 7 | 10 | 16 => 16,                      // S16, U16, F16, BF16
        4 | 8 | 11 => 32,                           // S32, U32, F32
        5 | 9 | 12 | 15 => 64,                      // S64, U64, F64, C64
        18 => 128,                                  // C128
        17 => 0,                                    // TOKEN: no data
        _ => return None,
    })
}

/// Bits per element from a type name that a newer schema knows (`F8…` → 8, `BF16` → 16,
/// `S4` → 4, ...): the digits after the leading letters.
fn bits_from_type_name(name: &str) -> Option<u32> {
    if name == "PRED" || name.starts_with("F8") {
        return Some(8);
    }
    let digits: String = name
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::io::Read;

    // --- building HloProto messages programmatically -------------------------------------

    const F32: i32 = 11;
    const BF16: i32 = 16;
    const S8: i32 = 2;
    const TUPLE: i32 = 13;

    fn builtin() -> HloSchema {
        HloSchema::builtin().expect("builtin schema compiles")
    }

    fn new_message(schema: &HloSchema, name: &str) -> DynamicMessage {
        DynamicMessage::new(schema.pool().get_message_by_name(name).expect(name))
    }

    fn i64s(values: &[i64]) -> Value {
        Value::List(values.iter().map(|&v| Value::I64(v)).collect())
    }

    fn shape(s: &HloSchema, element_type: i32, dims: &[i64], memory_space: i64) -> DynamicMessage {
        let mut m = new_message(s, "xla.ShapeProto");
        m.set_field_by_number(field::SHAPE_ELEMENT_TYPE, Value::EnumNumber(element_type));
        m.set_field_by_number(field::SHAPE_DIMENSIONS, i64s(dims));
        if memory_space != 0 {
            let mut layout = new_message(s, "xla.LayoutProto");
            layout.set_field_by_number(field::LAYOUT_MEMORY_SPACE, Value::I64(memory_space));
            m.set_field_by_number(field::SHAPE_LAYOUT, Value::Message(layout));
        }
        m
    }

    fn tuple_shape(s: &HloSchema, elements: Vec<DynamicMessage>) -> DynamicMessage {
        let mut m = new_message(s, "xla.ShapeProto");
        m.set_field_by_number(field::SHAPE_ELEMENT_TYPE, Value::EnumNumber(TUPLE));
        m.set_field_by_number(
            field::SHAPE_TUPLE_SHAPES,
            Value::List(elements.into_iter().map(Value::Message).collect()),
        );
        m
    }

    fn instr(
        s: &HloSchema,
        name: &str,
        opcode: &str,
        id: i64,
        shape: DynamicMessage,
        operands: &[i64],
    ) -> DynamicMessage {
        let mut m = new_message(s, "xla.HloInstructionProto");
        m.set_field_by_number(field::INSTR_NAME, Value::String(name.into()));
        m.set_field_by_number(field::INSTR_OPCODE, Value::String(opcode.into()));
        m.set_field_by_number(field::INSTR_ID, Value::I64(id));
        m.set_field_by_number(field::INSTR_SHAPE, Value::Message(shape));
        m.set_field_by_number(field::INSTR_OPERAND_IDS, i64s(operands));
        m
    }

    fn replica_groups(s: &HloSchema, groups: &[&[i64]]) -> Value {
        Value::List(
            groups
                .iter()
                .map(|g| {
                    let mut m = new_message(s, "xla.ReplicaGroup");
                    m.set_field_by_number(field::REPLICA_IDS, i64s(g));
                    Value::Message(m)
                })
                .collect(),
        )
    }

    /// Older form: `replica_groups` (49).
    fn with_groups(s: &HloSchema, mut m: DynamicMessage, groups: &[&[i64]]) -> DynamicMessage {
        m.set_field_by_number(field::INSTR_REPLICA_GROUPS, replica_groups(s, groups));
        m
    }

    /// Newer form: `collective_device_list` (87), explicit groups or an iota list.
    fn with_device_list(
        s: &HloSchema,
        mut m: DynamicMessage,
        groups: &[&[i64]],
        iota_devices_per_group: Option<i64>,
    ) -> DynamicMessage {
        let mut list = new_message(s, "xla.CollectiveDeviceListProto");
        if !groups.is_empty() {
            list.set_field_by_number(field::CDL_REPLICA_GROUPS, replica_groups(s, groups));
        }
        if let Some(n) = iota_devices_per_group {
            let mut iota = new_message(s, "xla.IotaReplicaGroupListProto");
            iota.set_field_by_number(1, Value::I64(4 / n));
            iota.set_field_by_number(field::IOTA_NUM_DEVICES_PER_GROUP, Value::I64(n));
            list.set_field_by_number(field::CDL_IOTA_LIST, Value::Message(iota));
        }
        m.set_field_by_number(field::INSTR_COLLECTIVE_DEVICE_LIST, Value::Message(list));
        m
    }

    fn with_called(mut m: DynamicMessage, computations: &[i64]) -> DynamicMessage {
        m.set_field_by_number(field::INSTR_CALLED_COMPUTATION_IDS, i64s(computations));
        m
    }

    fn computation(
        s: &HloSchema,
        id: i64,
        name: &str,
        instrs: Vec<DynamicMessage>,
    ) -> DynamicMessage {
        let mut m = new_message(s, "xla.HloComputationProto");
        m.set_field_by_number(1, Value::String(name.into()));
        m.set_field_by_number(field::COMPUTATION_ID, Value::I64(id));
        m.set_field_by_number(
            field::COMPUTATION_INSTRUCTIONS,
            Value::List(instrs.into_iter().map(Value::Message).collect()),
        );
        m
    }

    fn module(s: &HloSchema, computations: Vec<DynamicMessage>) -> DynamicMessage {
        let mut m = new_message(s, "xla.HloModuleProto");
        m.set_field_by_number(field::MODULE_NAME, Value::String("jit_test".into()));
        m.set_field_by_number(field::MODULE_ID, Value::I64(42));
        m.set_field_by_number(
            field::MODULE_COMPUTATIONS,
            Value::List(computations.into_iter().map(Value::Message).collect()),
        );
        m
    }

    fn encode(s: &HloSchema, module: DynamicMessage) -> Vec<u8> {
        let mut proto = DynamicMessage::new(s.hlo_proto().clone());
        proto.set_field_by_number(field::HLO_MODULE, Value::Message(module));
        proto.encode_to_vec()
    }

    /// A module whose entry computation holds `params` (f32 parameters `p0`, `p1`, ... with
    /// ids 1, 2, ...) followed by `rest`.
    fn entry_module(s: &HloSchema, params: &[&[i64]], rest: Vec<DynamicMessage>) -> Vec<u8> {
        let mut instrs: Vec<DynamicMessage> = params
            .iter()
            .enumerate()
            .map(|(k, dims)| {
                instr(
                    s,
                    &format!("p{k}"),
                    "parameter",
                    k as i64 + 1,
                    shape(s, F32, dims, 0),
                    &[],
                )
            })
            .collect();
        instrs.extend(rest);
        encode(s, module(s, vec![computation(s, 1, "main", instrs)]))
    }

    fn comm<'m>(info: &'m HloModuleInfo, name: &str) -> &'m CommunicationInfo {
        info.instruction(name)
            .unwrap_or_else(|| panic!("no instruction {name}"))
            .communication
            .as_ref()
            .unwrap_or_else(|| panic!("{name} is not communication"))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    // --- schema -------------------------------------------------------------------------

    #[test]
    fn builtin_schema_compiles() {
        let s = builtin();
        assert_eq!(s.hlo_proto().full_name(), "xla.HloProto");
        for name in [
            "xla.HloModuleProto",
            "xla.HloComputationProto",
            "xla.HloInstructionProto",
            "xla.OpMetadata",
            "xla.ShapeProto",
            "xla.LayoutProto",
            "xla.FrontendAttributes",
            "xla.ReplicaGroup",
            "xla.CollectiveDeviceListProto",
            "xla.IotaReplicaGroupListProto",
            "xla.StackFrameIndexProto",
            "xla.StackFrameIndexProto.FileLocation",
            "xla.StackFrameIndexProto.StackFrame",
        ] {
            assert!(s.pool().get_message_by_name(name).is_some(), "{name}");
        }
    }

    #[test]
    fn compile_resolves_imports_and_well_known_types() {
        let files = vec![
            (
                "a/b.proto".to_string(),
                b"syntax = \"proto3\"; package p; message B { int64 x = 1; }".to_vec(),
            ),
            (
                "./c.proto".to_string(),
                b"syntax = \"proto3\"; package p; import \"a/b.proto\"; \
                  import \"google/protobuf/any.proto\"; \
                  message C { B b = 1; google.protobuf.Any any = 2; }"
                    .to_vec(),
            ),
        ];
        let set = compile_protos(&files).unwrap();
        let pool = DescriptorPool::decode(set.as_slice()).unwrap();
        assert!(pool.get_message_by_name("p.C").is_some());
        assert!(pool.get_message_by_name("google.protobuf.Any").is_some());
        // No xla.HloProto in it.
        let err = HloSchema::from_descriptor_set(&set)
            .unwrap_err()
            .to_string();
        assert!(err.contains("xla.HloProto"), "{err}");
    }

    #[test]
    fn compile_errors_name_the_file() {
        let syntax = vec![(
            "xla/broken.proto".to_string(),
            b"syntax = \"proto3\";\npackage xla;\nmessage M { int64 x = ; }\n".to_vec(),
        )];
        let err = compile_protos(&syntax).unwrap_err().to_string();
        assert!(err.contains("xla/broken.proto"), "{err}");
        assert!(!err.contains('\n'), "{err}");

        let missing = vec![(
            "xla/importer.proto".to_string(),
            b"syntax = \"proto3\";\npackage xla;\nimport \"xla/gone.proto\";\n".to_vec(),
        )];
        let err = compile_protos(&missing).unwrap_err().to_string();
        assert!(err.contains("xla/importer.proto"), "{err}");
        assert!(err.contains("xla/gone.proto"), "{err}");

        let undefined = vec![(
            "xla/types.proto".to_string(),
            b"syntax = \"proto3\";\npackage xla;\nmessage M { Nope n = 1; }\n".to_vec(),
        )];
        let err = compile_protos(&undefined).unwrap_err().to_string();
        assert!(
            err.contains("xla/types.proto") && err.contains("Nope"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");

        let not_utf8 = vec![("xla/bin.proto".to_string(), vec![0xff, 0xfe, 0x00])];
        let err = compile_protos(&not_utf8).unwrap_err().to_string();
        assert!(err.contains("xla/bin.proto"), "{err}");

        let err = HloSchema::from_descriptor_set(b"\xff\xff\xff").unwrap_err();
        assert!(err.to_string().contains("descriptor"), "{err}");
    }

    // --- communication ------------------------------------------------------------------

    #[test]
    fn all_gather_with_replica_groups() {
        let s = builtin();
        let ag = with_groups(
            &s,
            instr(
                &s,
                "all-gather.1",
                "all-gather",
                10,
                shape(&s, F32, &[16, 8], 0),
                &[1],
            ),
            &[&[0, 1, 2, 3]],
        );
        let info = decode_hlo(&s, &entry_module(&s, &[&[4, 8]], vec![ag])).unwrap();
        let c = comm(&info, "all-gather.1");
        assert_eq!(c.collective, "all-gather");
        assert_eq!(c.message_size_bytes, 4 * 8 * 4);
        assert_eq!(c.collective_size, 4);
        assert!(close(c.bandwidth_correction, 4.0) && close(c.bus_correction, 0.75));
        assert!(info.instruction("p0").unwrap().communication.is_none());
        assert_eq!(info.name, "jit_test");
        assert_eq!(info.id, 42);
    }

    #[test]
    fn all_gather_start_and_all_reduce_start() {
        let s = builtin();
        let ag = with_device_list(
            &s,
            instr(
                &s,
                "ags",
                "all-gather-start",
                10,
                shape(&s, F32, &[8], 0),
                &[1],
            ),
            &[&[0, 1], &[2, 3]],
            None,
        );
        let ar = with_groups(
            &s,
            instr(
                &s,
                "ars",
                "all-reduce-start",
                11,
                shape(&s, F32, &[4], 0),
                &[1],
            ),
            &[&[0, 1, 2, 3]],
        );
        let done = instr(
            &s,
            "agd",
            "all-gather-done",
            12,
            shape(&s, F32, &[8], 0),
            &[10],
        );
        let info = decode_hlo(&s, &entry_module(&s, &[&[4]], vec![ag, ar, done])).unwrap();
        let c = comm(&info, "ags");
        assert_eq!(
            (
                c.collective.as_str(),
                c.message_size_bytes,
                c.collective_size
            ),
            ("all-gather", 16, 2)
        );
        assert!(close(c.bandwidth_correction, 2.0) && close(c.bus_correction, 0.5));
        let c = comm(&info, "ars");
        assert_eq!(
            (
                c.collective.as_str(),
                c.message_size_bytes,
                c.collective_size
            ),
            ("all-reduce", 16, 4)
        );
        assert!(close(c.bandwidth_correction, 1.0) && close(c.bus_correction, 1.5));
        assert!(info.instruction("agd").unwrap().communication.is_none());
    }

    #[test]
    fn reduce_scatter_divides_by_collective_size() {
        let s = builtin();
        let rs = with_groups(
            &s,
            instr(
                &s,
                "rs",
                "reduce-scatter",
                10,
                shape(&s, F32, &[16], 0),
                &[1, 2],
            ),
            &[&[0, 1, 2, 3], &[4, 5, 6, 7]],
        );
        let info = decode_hlo(&s, &entry_module(&s, &[&[64], &[32]], vec![rs])).unwrap();
        let c = comm(&info, "rs");
        assert_eq!(c.collective, "reduce-scatter");
        assert_eq!(c.collective_size, 4);
        assert_eq!(c.message_size_bytes, 64 * 4 / 4 + 32 * 4 / 4);
        assert!(close(c.bandwidth_correction, 4.0) && close(c.bus_correction, 0.75));
    }

    #[test]
    fn collective_permute_has_size_two() {
        let s = builtin();
        let cp = instr(
            &s,
            "cp",
            "collective-permute",
            10,
            shape(&s, F32, &[10], 0),
            &[1],
        );
        let cps = instr(
            &s,
            "cps",
            "collective-permute-start",
            11,
            shape(&s, F32, &[10], 0),
            &[1],
        );
        let info = decode_hlo(&s, &entry_module(&s, &[&[10]], vec![cp, cps])).unwrap();
        for name in ["cp", "cps"] {
            let c = comm(&info, name);
            assert_eq!(c.collective, "collective-permute");
            assert_eq!((c.message_size_bytes, c.collective_size), (40, 2));
            assert!(close(c.bandwidth_correction, 1.0) && close(c.bus_correction, 1.0));
        }
    }

    #[test]
    fn async_start_wrapping_all_to_all() {
        let s = builtin();
        // Computation 2 wraps an all-to-all of its parameter; computation 3 is an unrelated
        // reduction called from inside it (recursion must not find anything there).
        let wrapped = computation(
            &s,
            2,
            "wrapped_all_to_all",
            vec![
                instr(
                    &s,
                    "param.w",
                    "parameter",
                    100,
                    shape(&s, BF16, &[8, 128], 0),
                    &[],
                ),
                with_device_list(
                    &s,
                    instr(
                        &s,
                        "all-to-all.7",
                        "all-to-all",
                        101,
                        shape(&s, BF16, &[8, 128], 0),
                        &[100],
                    ),
                    &[&[0, 1]],
                    None,
                ),
            ],
        );
        let entry = computation(
            &s,
            1,
            "main",
            vec![
                instr(&s, "p0", "parameter", 1, shape(&s, BF16, &[8, 128], 0), &[]),
                with_called(
                    instr(
                        &s,
                        "all-to-all-start",
                        "async-start",
                        2,
                        shape(&s, BF16, &[8, 128], 0),
                        &[1],
                    ),
                    &[2],
                ),
                with_called(
                    instr(
                        &s,
                        "all-to-all-done",
                        "async-done",
                        3,
                        shape(&s, BF16, &[8, 128], 0),
                        &[2],
                    ),
                    &[2],
                ),
                with_called(
                    instr(&s, "fusion.1", "fusion", 4, shape(&s, F32, &[1], 0), &[1]),
                    &[3],
                ),
            ],
        );
        let plain = computation(
            &s,
            3,
            "fused",
            vec![instr(&s, "add", "add", 200, shape(&s, F32, &[1], 0), &[])],
        );
        let bytes = encode(&s, module(&s, vec![wrapped, plain, entry]));
        let info = decode_hlo(&s, &bytes).unwrap();
        let c = comm(&info, "all-to-all-start");
        assert_eq!(c.collective, "all-to-all");
        assert_eq!((c.message_size_bytes, c.collective_size), (8 * 128 * 2, 2));
        assert!(close(c.bandwidth_correction, 1.0) && close(c.bus_correction, 0.5));
        assert!(
            info.instruction("all-to-all-done")
                .unwrap()
                .communication
                .is_none()
        );
        assert!(
            info.instruction("fusion.1")
                .unwrap()
                .communication
                .is_none()
        );
        // The wrapped instruction itself is communication too.
        assert_eq!(comm(&info, "all-to-all.7"), c);
        let names: Vec<&str> = info.instructions.iter().map(|i| i.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), 7);
    }

    #[test]
    fn fusion_wrapping_two_collectives_is_an_error() {
        let s = builtin();
        let body = computation(
            &s,
            2,
            "two",
            vec![
                instr(&s, "q", "parameter", 100, shape(&s, F32, &[4], 0), &[]),
                with_groups(
                    &s,
                    instr(
                        &s,
                        "ar.a",
                        "all-reduce",
                        101,
                        shape(&s, F32, &[4], 0),
                        &[100],
                    ),
                    &[&[0, 1]],
                ),
                with_groups(
                    &s,
                    instr(
                        &s,
                        "ar.b",
                        "all-reduce",
                        102,
                        shape(&s, F32, &[4], 0),
                        &[101],
                    ),
                    &[&[0, 1]],
                ),
            ],
        );
        let entry = computation(
            &s,
            1,
            "main",
            vec![
                instr(&s, "p0", "parameter", 1, shape(&s, F32, &[4], 0), &[]),
                with_called(
                    instr(&s, "fusion.9", "fusion", 2, shape(&s, F32, &[4], 0), &[1]),
                    &[2],
                ),
            ],
        );
        let err = decode_hlo(&s, &encode(&s, module(&s, vec![body, entry]))).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("fusion.9") && text.contains("jit_test"),
            "{text}"
        );
    }

    #[test]
    fn iota_replica_group_list() {
        let s = builtin();
        let ar = with_device_list(
            &s,
            instr(&s, "ar", "all-reduce", 10, shape(&s, F32, &[256], 0), &[1]),
            &[],
            Some(4),
        );
        let info = decode_hlo(&s, &entry_module(&s, &[&[256]], vec![ar])).unwrap();
        let c = comm(&info, "ar");
        assert_eq!(
            (
                c.collective.as_str(),
                c.message_size_bytes,
                c.collective_size
            ),
            ("all-reduce", 1024, 4)
        );
        assert!(close(c.bus_correction, 1.5));
    }

    #[test]
    fn iota_and_mesh_axes_device_lists() {
        let s = builtin();
        // `iota_collective_device_list` (92): 2 groups of 4.
        let mut ag = instr(&s, "ag", "all-gather", 10, shape(&s, F32, &[64], 0), &[1]);
        let mut iota = new_message(&s, "xla.IotaReplicaGroupListProto");
        iota.set_field_by_number(1, Value::I64(2));
        iota.set_field_by_number(field::IOTA_NUM_DEVICES_PER_GROUP, Value::I64(4));
        iota.set_field_by_number(3, i64s(&[4, 2]));
        iota.set_field_by_number(4, Value::List(vec![Value::I32(1), Value::I32(0)]));
        ag.set_field_by_number(
            field::INSTR_IOTA_COLLECTIVE_DEVICE_LIST,
            Value::Message(iota),
        );

        // `mesh_axes_replica_group_list` (93) on a mesh ['data'=2, 'fsdp'=4, 'tp'=8].
        let mesh_groups = |axes: &[(i64, Option<i64>)]| {
            let mut mesh = new_message(&s, "xla.MeshProto");
            let axis = |name: &str, size: i64| {
                let mut a = new_message(&s, "xla.MeshProto.MeshAxis");
                a.set_field_by_number(1, Value::String(name.into()));
                a.set_field_by_number(field::MESH_AXIS_SIZE, Value::I64(size));
                Value::Message(a)
            };
            mesh.set_field_by_number(
                field::MESH_AXES,
                Value::List(vec![axis("data", 2), axis("fsdp", 4), axis("tp", 8)]),
            );
            let refs = axes
                .iter()
                .map(|&(index, sub)| {
                    let mut r = new_message(&s, "xla.AxisRefProto");
                    if index != 0 {
                        r.set_field_by_number(field::AXIS_REF_INDEX, Value::I64(index));
                    }
                    if let Some(size) = sub {
                        let mut sa = new_message(&s, "xla.AxisRefProto.SubAxis");
                        sa.set_field_by_number(1, Value::I64(2));
                        sa.set_field_by_number(field::SUB_AXIS_SIZE, Value::I64(size));
                        r.set_field_by_number(field::AXIS_REF_SUB_AXIS, Value::Message(sa));
                    }
                    Value::Message(r)
                })
                .collect();
            let mut list = new_message(&s, "xla.MeshAxesReplicaGroupListProto");
            list.set_field_by_number(field::MESH_GROUPS_MESH, Value::Message(mesh));
            list.set_field_by_number(field::MESH_GROUPS_AXES, Value::List(refs));
            Value::Message(list)
        };
        let mut ar = instr(&s, "ar", "all-reduce", 11, shape(&s, F32, &[64], 0), &[1]);
        ar.set_field_by_number(
            field::INSTR_MESH_AXES_REPLICA_GROUP_LIST,
            mesh_groups(&[(0, None)]),
        );
        let mut rs = instr(
            &s,
            "rs",
            "reduce-scatter",
            12,
            shape(&s, F32, &[4], 0),
            &[1],
        );
        rs.set_field_by_number(
            field::INSTR_MESH_AXES_REPLICA_GROUP_LIST,
            mesh_groups(&[(1, None), (2, Some(2))]),
        );
        let mut bad = instr(&s, "a2a", "all-to-all", 13, shape(&s, F32, &[64], 0), &[1]);
        bad.set_field_by_number(
            field::INSTR_MESH_AXES_REPLICA_GROUP_LIST,
            mesh_groups(&[(3, None)]),
        );

        let info = decode_hlo(&s, &entry_module(&s, &[&[64]], vec![ag, ar, rs])).unwrap();
        let c = comm(&info, "ag");
        assert_eq!((c.message_size_bytes, c.collective_size), (256, 4));
        let c = comm(&info, "ar");
        assert_eq!((c.message_size_bytes, c.collective_size), (256, 2));
        assert!(close(c.bus_correction, 1.0));
        let c = comm(&info, "rs");
        assert_eq!((c.message_size_bytes, c.collective_size), (256 / 8, 8));

        let err = decode_hlo(&s, &entry_module(&s, &[&[64]], vec![bad])).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("a2a") && text.contains("mesh axis index 3"),
            "{text}"
        );
    }

    #[test]
    fn replica_group_errors() {
        let s = builtin();
        let uneven = with_groups(
            &s,
            instr(&s, "ag", "all-gather", 10, shape(&s, F32, &[8], 0), &[1]),
            &[&[0, 1, 2], &[3]],
        );
        let err = decode_hlo(&s, &entry_module(&s, &[&[4]], vec![uneven])).unwrap_err();
        assert!(format!("{err:#}").contains("different sizes"), "{err:#}");

        let none = instr(&s, "ag", "all-gather", 10, shape(&s, F32, &[8], 0), &[1]);
        let err = decode_hlo(&s, &entry_module(&s, &[&[4]], vec![none])).unwrap_err();
        assert!(format!("{err:#}").contains("ag"), "{err:#}");
    }

    #[test]
    fn host_offload_copies() {
        let s = builtin();
        let instrs = vec![
            instr(
                &s,
                "dev",
                "parameter",
                1,
                shape(&s, F32, &[8, 1024], 0),
                &[],
            ),
            instr(
                &s,
                "host",
                "parameter",
                2,
                shape(&s, F32, &[8, 1024], 5),
                &[],
            ),
            instr(
                &s,
                "upd",
                "parameter",
                3,
                shape(&s, F32, &[1, 1024], 0),
                &[],
            ),
            instr(&s, "i", "parameter", 4, shape(&s, S8, &[], 0), &[]),
            // host → device
            instr(
                &s,
                "ds.h2d",
                "dynamic-slice",
                10,
                shape(&s, F32, &[1, 1024], 0),
                &[2, 4, 4],
            ),
            // device → device: not communication
            instr(
                &s,
                "ds.local",
                "dynamic-slice",
                11,
                shape(&s, F32, &[1, 1024], 0),
                &[1, 4, 4],
            ),
            // device → host
            instr(
                &s,
                "dus.d2h",
                "dynamic-update-slice",
                12,
                shape(&s, F32, &[8, 1024], 5),
                &[2, 3, 4, 4],
            ),
            // in device memory, both operands there: not communication
            instr(
                &s,
                "dus.local",
                "dynamic-update-slice",
                13,
                shape(&s, F32, &[8, 1024], 0),
                &[1, 3, 4, 4],
            ),
        ];
        let info = decode_hlo(
            &s,
            &encode(&s, module(&s, vec![computation(&s, 1, "main", instrs)])),
        )
        .unwrap();
        let c = comm(&info, "ds.h2d");
        assert_eq!(c.collective, "host-to-device");
        assert_eq!((c.message_size_bytes, c.collective_size), (4096, 1));
        assert!(close(c.bandwidth_correction, 1.0) && close(c.bus_correction, 1.0));
        let c = comm(&info, "dus.d2h");
        assert_eq!(c.collective, "device-to-host");
        assert_eq!((c.message_size_bytes, c.collective_size), (4096, 1));
        assert!(
            info.instruction("ds.local")
                .unwrap()
                .communication
                .is_none()
        );
        assert!(
            info.instruction("dus.local")
                .unwrap()
                .communication
                .is_none()
        );
    }

    #[test]
    fn tuple_operands_are_summed() {
        let s = builtin();
        let tuple = tuple_shape(
            &s,
            vec![
                shape(&s, F32, &[10], 0),
                tuple_shape(
                    &s,
                    vec![shape(&s, BF16, &[3, 4], 0), shape(&s, S8, &[5], 0)],
                ),
            ],
        );
        let instrs = vec![
            instr(&s, "t", "parameter", 1, tuple, &[]),
            instr(&s, "p", "parameter", 2, shape(&s, F32, &[2], 0), &[]),
            with_groups(
                &s,
                instr(&s, "ar", "all-reduce", 3, shape(&s, F32, &[1], 0), &[1, 2]),
                &[&[0, 1]],
            ),
        ];
        let info = decode_hlo(
            &s,
            &encode(&s, module(&s, vec![computation(&s, 1, "main", instrs)])),
        )
        .unwrap();
        assert_eq!(comm(&info, "ar").message_size_bytes, 40 + 24 + 5 + 8);
    }

    #[test]
    fn unknown_element_type_is_an_error() {
        let s = builtin();
        let instrs = vec![
            instr(&s, "p", "parameter", 1, shape(&s, 14, &[2], 0), &[]),
            with_groups(
                &s,
                instr(&s, "ar", "all-reduce", 2, shape(&s, 14, &[2], 0), &[1]),
                &[&[0, 1]],
            ),
        ];
        let err = decode_hlo(
            &s,
            &encode(&s, module(&s, vec![computation(&s, 1, "main", instrs)])),
        )
        .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("OPAQUE_TYPE") && text.contains("ar"),
            "{text}"
        );
        assert_eq!(bits_from_type_name("F8E4M3"), Some(8));
        assert_eq!(bits_from_type_name("F4E2M1FN"), Some(4));
        assert_eq!(bits_from_type_name("BF16"), Some(16));
        assert_eq!(bits_from_type_name("OPAQUE_TYPE"), None);
    }

    #[test]
    fn metadata_fingerprint_and_stack_frames() {
        let s = builtin();
        let mut metadata = new_message(&s, "xla.OpMetadata");
        metadata.set_field_by_number(field::META_OP_TYPE, Value::String("dot_general".into()));
        metadata.set_field_by_number(
            field::META_OP_NAME,
            Value::String("jit(f)/dot_general".into()),
        );
        metadata.set_field_by_number(field::META_SOURCE_FILE, Value::String("/a/model.py".into()));
        metadata.set_field_by_number(field::META_SOURCE_LINE, Value::I32(12));
        metadata.set_field_by_number(field::META_STACK_FRAME_ID, Value::I32(2));
        metadata.set_field_by_number(field::META_SCHEDULING_NAME, Value::String("dot.3".into()));
        let mut dot = instr(&s, "dot.3", "dot", 1, shape(&s, F32, &[2, 2], 0), &[]);
        dot.set_field_by_number(field::INSTR_METADATA, Value::Message(metadata));

        let mut m = module(&s, vec![computation(&s, 1, "main", vec![dot])]);
        let mut attributes = new_message(&s, "xla.FrontendAttributes");
        let map = [("fingerprint_before_lhs", "abc123"), ("other", "x")]
            .into_iter()
            .map(|(k, v)| (MapKey::String(k.into()), Value::String(v.into())))
            .collect();
        attributes.set_field_by_number(field::FRONTEND_ATTRIBUTES_MAP, Value::Map(map));
        m.set_field_by_number(
            field::MODULE_FRONTEND_ATTRIBUTES,
            Value::Message(attributes),
        );

        let mut index = new_message(&s, "xla.StackFrameIndexProto");
        let strings =
            |v: &[&str]| Value::List(v.iter().map(|s| Value::String(s.to_string())).collect());
        index.set_field_by_number(
            field::SFI_FILE_NAMES,
            strings(&["/a/main.py", "/a/model.py"]),
        );
        index.set_field_by_number(field::SFI_FUNCTION_NAMES, strings(&["main", "forward"]));
        let location = |file: i32, function: i32, line: i32| {
            let mut l = new_message(&s, "xla.StackFrameIndexProto.FileLocation");
            l.set_field_by_number(field::LOC_FILE_NAME_ID, Value::I32(file));
            l.set_field_by_number(field::LOC_FUNCTION_NAME_ID, Value::I32(function));
            l.set_field_by_number(field::LOC_LINE, Value::I32(line));
            l.set_field_by_number(field::LOC_COLUMN, Value::I32(3));
            Value::Message(l)
        };
        index.set_field_by_number(
            field::SFI_FILE_LOCATIONS,
            Value::List(vec![location(1, 1, 40), location(2, 2, 12)]),
        );
        let frame = |loc: i32, parent: i32| {
            let mut f = new_message(&s, "xla.StackFrameIndexProto.StackFrame");
            f.set_field_by_number(field::FRAME_FILE_LOCATION_ID, Value::I32(loc));
            f.set_field_by_number(field::FRAME_PARENT_FRAME_ID, Value::I32(parent));
            Value::Message(f)
        };
        index.set_field_by_number(
            field::SFI_STACK_FRAMES,
            Value::List(vec![frame(1, 0), frame(2, 1)]),
        );
        m.set_field_by_number(field::MODULE_STACK_FRAME_INDEX, Value::Message(index));

        let info = decode_hlo(&s, &encode(&s, m)).unwrap();
        assert_eq!(info.fingerprint.as_deref(), Some("abc123"));
        let dot = info.instruction("dot.3").unwrap();
        assert_eq!(dot.op_type, "dot_general");
        assert_eq!(dot.op_name, "jit(f)/dot_general");
        assert_eq!(
            (dot.source_file.as_str(), dot.source_line),
            ("/a/model.py", 12)
        );
        assert_eq!(dot.scheduling_name, "dot.3");
        assert_eq!(dot.stack_frame_id, 2);
        assert_eq!(
            info.stack(dot.stack_frame_id),
            vec![
                ("/a/main.py".to_string(), 40, "main".to_string()),
                ("/a/model.py".to_string(), 12, "forward".to_string()),
            ]
        );
        assert_eq!(info.stack_frames.file_locations[1].column, 3);
        assert!(info.stack(0).is_empty());
        assert!(info.stack(99).is_empty());
        assert!(info.instruction("nope").is_none());

        // Round trip through serde.
        let json = serde_json::to_string(&info).unwrap();
        let back: HloModuleInfo = serde_json::from_str(&json).unwrap();
        assert_eq!(back, info);
    }

    #[test]
    fn unknown_fields_are_skipped() {
        // A "newer XLA" schema: same names and numbers plus fields the builtin one lacks.
        let newer = br#"
            syntax = "proto3";
            package xla;
            message ShapeProto { int32 element_type = 2; repeated int64 dimensions = 3; repeated bool is_dynamic_dimension = 6; }
            message Extra { string text = 1; repeated int64 values = 2; }
            message HloInstructionProto {
              string name = 1; string opcode = 2; ShapeProto shape = 3; int64 id = 35;
              repeated int64 operand_ids = 36; string backend_config = 43; Extra extra = 500;
              repeated Extra extras = 501; fixed64 fixed = 502; float f = 503;
            }
            message HloComputationProto { string name = 1; repeated HloInstructionProto instructions = 2; int64 id = 5; }
            message HloModuleProto { string name = 1; repeated HloComputationProto computations = 3; int64 id = 5; Extra later = 400; }
            message HloProto { HloModuleProto hlo_module = 1; bytes buffer_assignment = 3; }
        "#;
        let set = compile_protos(&[("xla/newer.proto".to_string(), newer.to_vec())]).unwrap();
        let n = HloSchema::from_descriptor_set(&set).unwrap();
        let mut extra = new_message(&n, "xla.Extra");
        extra.set_field_by_number(1, Value::String("ignored".into()));
        extra.set_field_by_number(2, i64s(&[1, 2, 3]));

        let mut shape = new_message(&n, "xla.ShapeProto");
        shape.set_field_by_number(2, Value::I32(F32));
        shape.set_field_by_number(3, i64s(&[3]));
        shape.set_field_by_number(6, Value::List(vec![Value::Bool(true)]));
        let mut i = new_message(&n, "xla.HloInstructionProto");
        i.set_field_by_number(1, Value::String("neg.1".into()));
        i.set_field_by_number(2, Value::String("negate".into()));
        i.set_field_by_number(3, Value::Message(shape));
        i.set_field_by_number(35, Value::I64(7));
        i.set_field_by_number(43, Value::String("{\"x\":1}".into()));
        i.set_field_by_number(500, Value::Message(extra.clone()));
        i.set_field_by_number(501, Value::List(vec![Value::Message(extra.clone())]));
        i.set_field_by_number(502, Value::U64(u64::MAX));
        i.set_field_by_number(503, Value::F32(1.5));
        let mut c = new_message(&n, "xla.HloComputationProto");
        c.set_field_by_number(2, Value::List(vec![Value::Message(i)]));
        let mut m = new_message(&n, "xla.HloModuleProto");
        m.set_field_by_number(1, Value::String("jit_newer".into()));
        m.set_field_by_number(3, Value::List(vec![Value::Message(c)]));
        m.set_field_by_number(5, Value::I64(3));
        m.set_field_by_number(400, Value::Message(extra));
        let mut p = DynamicMessage::new(n.hlo_proto().clone());
        p.set_field_by_number(1, Value::Message(m));
        p.set_field_by_number(3, Value::Bytes(vec![1, 2, 3].into()));
        let mut bytes = p.encode_to_vec();
        // And one more unknown field at the top level, written by hand (field 99, varint).
        bytes.extend_from_slice(&[0x98, 0x06, 0x2a]);

        let info = decode_hlo(&builtin(), &bytes).unwrap();
        assert_eq!((info.name.as_str(), info.id), ("jit_newer", 3));
        let neg = info.instruction("neg.1").unwrap();
        assert_eq!(neg.opcode, "negate");
        assert!(neg.communication.is_none());
    }

    /// Decodes through every path (reflective: parallel split and whole message; planned: one
    /// thread and parallel) and checks they agree.
    fn decode_both_ways(s: &HloSchema, bytes: &[u8]) -> HloModuleInfo {
        let split = decode_split(s, bytes).expect("split applies").unwrap();
        let split = module_info(s, split, true).unwrap();
        let whole = module_info(s, decode_whole(s, bytes).unwrap(), false).unwrap();
        assert_eq!(split, whole);
        for parallel in [false, true] {
            let planned = decode_planned(&s.plan, bytes, parallel).unwrap();
            let planned = module_info(s, planned, parallel);
            assert_eq!(planned.unwrap(), split, "parallel: {parallel}");
        }
        split
    }

    #[test]
    fn split_and_whole_decoding_agree() {
        let s = builtin();
        let body = computation(
            &s,
            2,
            "wrapped",
            vec![
                instr(&s, "q", "parameter", 100, shape(&s, F32, &[4], 0), &[]),
                with_groups(
                    &s,
                    instr(
                        &s,
                        "ar.a",
                        "all-reduce",
                        101,
                        shape(&s, F32, &[4], 0),
                        &[100],
                    ),
                    &[&[0, 1]],
                ),
            ],
        );
        let entry = computation(
            &s,
            1,
            "main",
            vec![
                instr(&s, "p0", "parameter", 1, shape(&s, F32, &[4], 0), &[]),
                with_called(
                    instr(&s, "ars", "async-start", 2, shape(&s, F32, &[4], 0), &[1]),
                    &[2],
                ),
            ],
        );
        let mut m = module(&s, vec![body, entry]);
        let mut attributes = new_message(&s, "xla.FrontendAttributes");
        let map = [(
            MapKey::String("fingerprint_before_lhs".into()),
            Value::String("f".into()),
        )]
        .into_iter()
        .collect();
        attributes.set_field_by_number(field::FRONTEND_ATTRIBUTES_MAP, Value::Map(map));
        m.set_field_by_number(
            field::MODULE_FRONTEND_ATTRIBUTES,
            Value::Message(attributes),
        );
        let info = decode_both_ways(&s, &encode(&s, m));
        assert_eq!(info.fingerprint.as_deref(), Some("f"));
        assert_eq!((info.name.as_str(), info.id), ("jit_test", 42));
        assert_eq!(comm(&info, "ars").collective, "all-reduce");
        assert_eq!(info.instructions.len(), 4);
    }

    #[test]
    fn repeated_hlo_module_fields_merge() {
        // Protobuf merges repeated occurrences of a message field: two encoded HloProtos
        // back to back are one HloProto whose module has both parts.
        let s = builtin();
        let mut bytes = entry_module(&s, &[&[4], &[8]], vec![]);
        let mut later = new_message(&s, "xla.HloModuleProto");
        later.set_field_by_number(field::MODULE_ID, Value::I64(7));
        bytes.extend(encode(&s, later));
        assert!(decode_split(&s, &bytes).is_none());
        let info = decode_hlo(&s, &bytes).unwrap();
        assert_eq!((info.name.as_str(), info.id), ("jit_test", 7));
        assert_eq!(info.instructions.len(), 2);
    }

    #[test]
    fn corrupt_bytes_are_an_error() {
        let s = builtin();
        let good = entry_module(&s, &[&[4]], vec![]);
        // Truncated, a length that runs past the end, a bad wire type, random noise.
        let mut noise = Vec::new();
        let mut x = 0x1234_5678_u32;
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            noise.push(x as u8);
        }
        for bytes in [
            &good[..good.len() - 3],
            &[0x0a, 0xff, 0xff, 0x7f][..],
            &[0x0f, 0x00][..],
            &noise[..],
        ] {
            assert!(decode_hlo(&s, bytes).is_err(), "{bytes:?}");
        }
        // Empty input is a valid, empty HloProto but holds no module.
        let err = decode_hlo(&s, &[]).unwrap_err().to_string();
        assert!(err.contains("hlo_module"), "{err}");
    }

    // --- file names ---------------------------------------------------------------------

    #[test]
    fn dump_file_names() {
        let p = |s| parse_dump_file_name(s);
        let t = |id, name: &str, stage: &str| Some((id, name.to_string(), stage.to_string()));
        assert_eq!(
            p("module_0040.pjit__wrapped_step_fn.sm_8.0_gpu_after_optimizations.hlo.pb.xz"),
            t(
                40,
                "pjit__wrapped_step_fn",
                "sm_8.0_gpu_after_optimizations"
            )
        );
        assert_eq!(
            p("module_152797.jit_evaluate.sm_9.0a_gpu_after_optimizations.hlo.pb"),
            t(152797, "jit_evaluate", "sm_9.0a_gpu_after_optimizations")
        );
        assert_eq!(
            p("module_0000.jit_stage.before_optimizations.hlo.pb"),
            t(0, "jit_stage", "before_optimizations")
        );
        assert_eq!(
            p("module_0001.jit__psum.after_spmd_partitioner.hlo.pb"),
            t(1, "jit__psum", "after_spmd_partitioner")
        );
        for bad in [
            "module_0040.jit_f.sm_9.0a_gpu_after_optimizations-memory-usage-report.pb",
            "module_0040.jit_f.thunk_sequence.txt",
            "module_0040.jit_f.autotune_results.pbtxt.xz",
            "module_0040.jit_f.hlo.pb",
            "module_0040..stage.hlo.pb",
            "module_.jit_f.stage.hlo.pb",
            "module_12x.jit_f.stage.hlo.pb",
            "module_0040jit_f.stage.hlo.pb",
            "module_99999999999999999999.jit_f.stage.hlo.pb",
            "dump/module_0040.jit_f.stage.hlo.pb",
            "xmodule_0040.jit_f.stage.hlo.pb",
            "module_0040.jit_f.stage.hlo.pb.gz",
            "module_0040.jit_f.stage.hlo.pb.xz.xz",
            "",
        ] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }

    #[test]
    fn after_optimizations_names() {
        assert!(is_after_optimizations(
            "module_0040.f.sm_8.0_gpu_after_optimizations.hlo.pb.xz"
        ));
        assert!(is_after_optimizations(
            "module_0040.f.sm_9.0a_gpu_after_optimizations.hlo.pb"
        ));
        assert!(!is_after_optimizations(
            "module_0040.f.before_optimizations.hlo.pb"
        ));
        assert!(!is_after_optimizations(
            "module_0040.f.sm_9.0a_gpu_after_optimizations-memory-usage-report.pb"
        ));
        assert!(!is_after_optimizations(
            "module_0040.f.sm_9.0a_gpu_after_optimizations.txt"
        ));
    }

    // --- real dumps -----------------------------------------------------------------------

    fn read_zip_member(archive: &mut zip::ZipArchive<std::fs::File>, name: &str) -> Vec<u8> {
        let mut bytes = Vec::new();
        archive
            .by_name(name)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .read_to_end(&mut bytes)
            .unwrap();
        bytes
    }

    fn unxz(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        xz2::read::XzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn collectives(info: &HloModuleInfo) -> HashMap<String, Vec<&CommunicationInfo>> {
        let mut by_kind: HashMap<String, Vec<&CommunicationInfo>> = HashMap::new();
        for c in info
            .instructions
            .iter()
            .filter_map(|i| i.communication.as_ref())
        {
            by_kind.entry(c.collective.clone()).or_default().push(c);
        }
        by_kind
    }

    /// The pax proc0 archive and the schema compiled from its `protos/`.
    fn pax_archive() -> Option<(zip::ZipArchive<std::fs::File>, HloSchema)> {
        let fixtures = crate::testutil::fixtures_dir()?;
        let path = fixtures.join("jaxtoolbox-pax-fsdp4-4proc/proc0.zip");
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&path).unwrap()).unwrap();
        let proto_names: Vec<String> = archive
            .file_names()
            .map(|n| n.unwrap().into_owned())
            .filter(|n| n.starts_with("protos/") && n.ends_with(".proto"))
            .collect();
        assert!(proto_names.len() > 10, "{proto_names:?}");
        let sources: Vec<(String, Vec<u8>)> = proto_names
            .iter()
            .map(|n| {
                (
                    n["protos/".len()..].to_string(),
                    read_zip_member(&mut archive, n),
                )
            })
            .collect();
        let schema = HloSchema::from_descriptor_set(&compile_protos(&sources).unwrap()).unwrap();
        Some((archive, schema))
    }

    #[test]
    fn pax_archive_schema_and_builtin_schema_agree() {
        let Some((mut archive, archive_schema)) = pax_archive() else {
            return;
        };

        let file = "module_0040.pjit__wrapped_step_fn.sm_8.0_gpu_after_optimizations.hlo.pb.xz";
        assert!(is_after_optimizations(file));
        let bytes = unxz(&read_zip_member(&mut archive, &format!("dump/{file}")));
        let with_archive = decode_both_ways(&archive_schema, &bytes);
        let with_builtin = decode_both_ways(&builtin(), &bytes);
        assert_eq!(with_archive, with_builtin);

        let (id, name, _) = parse_dump_file_name(file).unwrap();
        assert_eq!(
            (with_builtin.id, with_builtin.name.as_str()),
            (id, name.as_str())
        );
        assert_eq!(
            with_builtin.fingerprint.as_deref(),
            Some("25fa0b3e673a92036f22550cd7bcb068")
        );
        let by_kind = collectives(&with_builtin);
        for kind in ["all-gather", "reduce-scatter", "all-reduce"] {
            let found = by_kind
                .get(kind)
                .unwrap_or_else(|| panic!("no {kind} in {by_kind:?}"));
            assert!(
                found
                    .iter()
                    .all(|c| c.message_size_bytes > 0 && c.collective_size == 4),
                "{kind}: {found:?}"
            );
        }
        assert!(
            with_builtin
                .instructions
                .iter()
                .any(|i| !i.op_name.is_empty())
        );
    }

    #[test]
    fn h200_dumps_decode_with_builtin_schema() {
        let Some(fixtures) = crate::testutil::fixtures_dir() else {
            return;
        };
        let dir = fixtures.join("h200/fsdp2_1proc/dump_rep");
        let schema = builtin();
        let mut train_step = None;
        let mut decoded = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let file_name = entry.unwrap().file_name().into_string().unwrap();
            if !is_after_optimizations(&file_name) {
                continue;
            }
            let (id, name, _) = parse_dump_file_name(&file_name).unwrap();
            let info = decode_hlo(&schema, &std::fs::read(dir.join(&file_name)).unwrap())
                .unwrap_or_else(|e| panic!("{file_name}: {e:#}"));
            assert_eq!((info.id, info.name.as_str()), (id, name.as_str()));
            assert!(info.fingerprint.is_some(), "{file_name}");
            decoded += 1;
            if name == "jit_train_step" {
                train_step = Some(info);
            }
        }
        assert!(decoded >= 5, "{decoded}");
        let info = train_step.expect("a jit_train_step dump");
        let by_kind = collectives(&info);
        for kind in ["all-gather", "all-to-all", "reduce-scatter", "all-reduce"] {
            let found = by_kind
                .get(kind)
                .unwrap_or_else(|| panic!("no {kind} in {by_kind:?}"));
            assert!(
                found
                    .iter()
                    .all(|c| c.message_size_bytes > 0 && c.collective_size == 2),
                "{kind}: {found:?}"
            );
        }
        assert!(
            info.instructions
                .iter()
                .any(|i| !i.scheduling_name.is_empty())
        );
        let with_stack = info
            .instructions
            .iter()
            .find(|i| !info.stack(i.stack_frame_id).is_empty())
            .expect("an instruction with a stack");
        let stack = info.stack(with_stack.stack_frame_id);
        assert!(
            stack
                .iter()
                .any(|(file, line, _)| file.ends_with("train_mlp.py") && *line > 0),
            "{stack:?}"
        );
    }

    // --- the planned decoder against the reflective one -----------------------------------

    /// Both decoders' results; they must agree whenever both succeed.
    fn decode_with_both(
        s: &HloSchema,
        bytes: &[u8],
    ) -> (Result<HloModuleInfo>, Result<HloModuleInfo>) {
        let fast = decode_hlo(s, bytes);
        let reflect = decode_hlo_reflect(s, bytes);
        if let (Ok(fast), Ok(reflect)) = (&fast, &reflect) {
            assert_eq!(fast, reflect);
        }
        (fast, reflect)
    }

    /// Both decoders succeed and agree.
    fn decode_agreeing(s: &HloSchema, bytes: &[u8]) -> HloModuleInfo {
        match decode_with_both(s, bytes) {
            (Ok(info), Ok(_)) => info,
            (fast, reflect) => panic!("fast: {fast:?}\nreflective: {reflect:?}"),
        }
    }

    /// Both decoders fail; returns the fast decoder's message.
    fn decode_failing(s: &HloSchema, bytes: &[u8]) -> String {
        match decode_with_both(s, bytes) {
            (Err(fast), Err(_)) => format!("{fast:#}"),
            (fast, reflect) => panic!("fast: {fast:?}\nreflective: {reflect:?}"),
        }
    }

    /// The best of `runs` timings of `f`, in milliseconds (not counting dropping its result).
    fn best_ms<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
        (0..runs)
            .map(|_| {
                let start = std::time::Instant::now();
                let out = std::hint::black_box(f());
                let ms = start.elapsed().as_secs_f64() * 1e3;
                drop(out);
                ms
            })
            .fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn planned_and_reflective_agree_on_every_pax_dump() {
        let Some((mut archive, archive_schema)) = pax_archive() else {
            return;
        };
        let builtin = builtin();
        let dumps: Vec<String> = archive
            .file_names()
            .map(|n| n.unwrap().into_owned())
            .filter(|n| n.starts_with("dump/") && is_after_optimizations(n))
            .collect();
        assert!(dumps.len() >= 15, "{dumps:?}");
        let mut step_fn = None;
        for member in &dumps {
            let bytes = unxz(&read_zip_member(&mut archive, member));
            let with_archive = decode_agreeing(&archive_schema, &bytes);
            let with_builtin = decode_agreeing(&builtin, &bytes);
            assert_eq!(with_archive, with_builtin, "{member}");
            if member.contains("pjit__wrapped_step_fn") {
                assert!(with_archive.instructions.len() > 30_000);
                step_fn = Some(bytes);
            }
        }

        // Timings of the step function (37,026 instructions), for the record.
        let bytes = step_fn.expect("the step function's dump");
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let s = &archive_schema;
        let planned_1 = best_ms(10, || {
            module_info(s, decode_planned(&s.plan, &bytes, false).unwrap(), false).unwrap()
        });
        let planned_decode_1 = best_ms(10, || decode_planned(&s.plan, &bytes, false).unwrap());
        let planned_n = best_ms(10, || decode_hlo(s, &bytes).unwrap());
        let reflect_1 = one_thread.install(|| best_ms(2, || decode_hlo_reflect(s, &bytes)));
        let reflect_n = best_ms(2, || decode_hlo_reflect(s, &bytes));
        eprintln!(
            "pax step function, {} bytes: planned {planned_1:.1} ms on one thread \
             (decoding alone {planned_decode_1:.1} ms), {planned_n:.1} ms on {} threads; \
             reflective {reflect_1:.1} ms on one thread, {reflect_n:.1} ms on {} threads",
            bytes.len(),
            rayon::current_num_threads(),
            rayon::current_num_threads()
        );
    }

    #[test]
    fn planned_and_reflective_agree_on_h200_dumps() {
        let Some(fixtures) = crate::testutil::fixtures_dir() else {
            return;
        };
        let schema = builtin();
        let mut decoded = 0;
        for run in std::fs::read_dir(fixtures.join("h200")).unwrap() {
            let run = run.unwrap().path();
            for dump in std::fs::read_dir(&run).unwrap() {
                let dump = dump.unwrap().path();
                let is_dump_dir = dump
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("dump_"));
                if !is_dump_dir || !dump.is_dir() {
                    continue;
                }
                for file in std::fs::read_dir(&dump).unwrap() {
                    let path = file.unwrap().path();
                    let name = path.file_name().unwrap().to_str().unwrap();
                    if !name.ends_with("after_optimizations.hlo.pb") {
                        continue;
                    }
                    let bytes = std::fs::read(&path).unwrap();
                    let info = decode_agreeing(&schema, &bytes);
                    assert!(!info.instructions.is_empty(), "{}", path.display());
                    decoded += 1;
                }
            }
        }
        assert!(decoded >= 20, "{decoded}");
    }

    #[test]
    fn mutations_of_a_real_dump_agree_or_fail() {
        let Some(fixtures) = crate::testutil::fixtures_dir() else {
            return;
        };
        let path = fixtures.join(
            "h200/fsdp2_1proc/dump_rep/module_3984.jit_train_step.sm_9.0a_gpu_after_optimizations.hlo.pb",
        );
        let good = std::fs::read(path).unwrap();
        let schema = builtin();
        decode_agreeing(&schema, &good);
        // Deterministic pseudo-random edits and cuts: never a panic, and where both decoders
        // accept the bytes, the same result.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut accepted, mut rejected) = (0, 0);
        for case in 0..250 {
            let mut bytes = good.clone();
            if case % 5 == 0 {
                bytes.truncate(next() as usize % good.len());
            } else {
                for _ in 0..1 + next() % 3 {
                    let at = next() as usize % bytes.len();
                    bytes[at] = next() as u8;
                }
            }
            match decode_with_both(&schema, &bytes).0 {
                Ok(_) => accepted += 1,
                Err(_) => rejected += 1,
            }
        }
        assert!(accepted > 0 && rejected > 0, "{accepted} {rejected}");
    }

    // --- wire-level cases, written by hand ------------------------------------------------

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn key(number: u32, wire: u8, out: &mut Vec<u8>) {
        varint(u64::from(number) << 3 | u64::from(wire), out);
    }

    /// A length-delimited field.
    fn len_field(number: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        key(number, WIRE_LEN, &mut out);
        varint(payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    fn varint_field(number: u32, v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        key(number, WIRE_VARINT, &mut out);
        varint(v, &mut out);
        out
    }

    fn packed(number: u32, values: &[u64]) -> Vec<u8> {
        let mut payload = Vec::new();
        for &v in values {
            varint(v, &mut payload);
        }
        len_field(number, &payload)
    }

    /// `HloProto` holding one module with one computation of the given encoded instructions.
    fn wrap_instructions(instructions: &[Vec<u8>]) -> Vec<u8> {
        let mut computation = varint_field(field::COMPUTATION_ID, 1);
        for i in instructions {
            computation.extend(len_field(field::COMPUTATION_INSTRUCTIONS, i));
        }
        let mut module = len_field(field::MODULE_NAME, b"jit_wire");
        module.extend(len_field(field::MODULE_COMPUTATIONS, &computation));
        len_field(field::HLO_MODULE, &module)
    }

    fn wire_instruction(name: &str, opcode: &str, id: u64, rest: &[Vec<u8>]) -> Vec<u8> {
        let mut out = len_field(field::INSTR_NAME, name.as_bytes());
        out.extend(len_field(field::INSTR_OPCODE, opcode.as_bytes()));
        out.extend(varint_field(field::INSTR_ID, id));
        for r in rest {
            out.extend_from_slice(r);
        }
        out
    }

    fn f32_shape(dims: &[u64]) -> Vec<u8> {
        let mut shape = varint_field(field::SHAPE_ELEMENT_TYPE, F32 as u64);
        shape.extend(packed(field::SHAPE_DIMENSIONS, dims));
        len_field(field::INSTR_SHAPE, &shape)
    }

    #[test]
    fn packed_and_unpacked_repeated_integers_and_merged_messages() {
        let s = builtin();
        // Operands and replica ids unpacked, dimensions split over a packed and an unpacked
        // occurrence, the shape given in two parts that merge, metadata given twice.
        let p0 = wire_instruction("p0", "parameter", 1, &[f32_shape(&[4])]);
        let p1 = wire_instruction("p1", "parameter", 2, &[f32_shape(&[2, 2])]);
        let mut group = varint_field(field::REPLICA_IDS, 0);
        for id in 1..4 {
            group.extend(varint_field(field::REPLICA_IDS, id));
        }
        let mut shape_b = varint_field(field::SHAPE_DIMENSIONS, 3);
        shape_b.extend(len_field(
            field::SHAPE_LAYOUT,
            &varint_field(field::LAYOUT_MEMORY_SPACE, 0),
        ));
        let ar = wire_instruction(
            "ar",
            "all-reduce",
            3,
            &[
                len_field(
                    field::INSTR_SHAPE,
                    &[
                        varint_field(field::SHAPE_ELEMENT_TYPE, BF16 as u64),
                        packed(field::SHAPE_DIMENSIONS, &[2]),
                    ]
                    .concat(),
                ),
                len_field(field::INSTR_SHAPE, &shape_b),
                varint_field(field::INSTR_OPERAND_IDS, 1),
                varint_field(field::INSTR_OPERAND_IDS, 2),
                len_field(field::INSTR_REPLICA_GROUPS, &group),
                len_field(
                    field::INSTR_METADATA,
                    &[
                        len_field(field::META_OP_NAME, b"first"),
                        len_field(field::META_OP_TYPE, b"psum"),
                    ]
                    .concat(),
                ),
                len_field(
                    field::INSTR_METADATA,
                    &[
                        len_field(field::META_OP_NAME, b"second"),
                        varint_field(field::META_SOURCE_LINE, 7),
                    ]
                    .concat(),
                ),
                // Packed and unpacked occurrences of the same repeated field add up.
                packed(field::INSTR_CALLED_COMPUTATION_IDS, &[]),
            ],
        );
        let bytes = wrap_instructions(&[p0, p1, ar]);
        let info = decode_agreeing(&s, &bytes);
        let ar = info.instruction("ar").unwrap();
        assert_eq!(
            (ar.op_name.as_str(), ar.op_type.as_str(), ar.source_line),
            ("second", "psum", 7)
        );
        let c = comm(&info, "ar");
        assert_eq!((c.message_size_bytes, c.collective_size), (16 + 16, 4));

        // Two `hlo_module` occurrences merge too (computations add up, the last id wins).
        let mut twice = bytes.clone();
        twice.extend(len_field(
            field::HLO_MODULE,
            &varint_field(field::MODULE_ID, 9),
        ));
        let merged = decode_agreeing(&s, &twice);
        assert_eq!((merged.id, merged.instructions.len()), (9, 3));
    }

    #[test]
    fn malformed_wire_data_is_an_error() {
        let s = builtin();
        let good = wrap_instructions(&[wire_instruction("p", "parameter", 1, &[f32_shape(&[4])])]);
        decode_agreeing(&s, &good);

        // A planned field with the wrong wire type: a varint opcode, a length-delimited id.
        let wrong = wrap_instructions(&[[
            len_field(field::INSTR_NAME, b"p"),
            varint_field(field::INSTR_OPCODE, 3),
        ]
        .concat()]);
        assert!(decode_failing(&s, &wrong).contains("wire type"));
        let wrong = wrap_instructions(&[len_field(field::INSTR_ID, b"\x01")]);
        assert!(decode_failing(&s, &wrong).contains("wire type"));
        // A string that is not UTF-8.
        let bad_utf8 = wrap_instructions(&[len_field(field::INSTR_NAME, b"\xff\xfe")]);
        assert!(decode_failing(&s, &bad_utf8).contains("UTF-8"));
        // A truncated varint, at the top and deep inside.
        assert!(decode_failing(&s, &[0x0a, 0x80]).contains("varint"));
        let truncated = wrap_instructions(&[vec![0x98, 0x02, 0xff]]);
        let err = decode_failing(&s, &truncated);
        assert!(
            err.contains("varint") && err.contains("HloInstructionProto"),
            "{err}"
        );
        // Varints of 10 bytes (the most) and 11; one that overflows 64 bits.
        let unknown_varint = |bytes: &[u8]| {
            let p = wire_instruction("p", "parameter", 1, &[f32_shape(&[4])]);
            wrap_instructions(&[[p.as_slice(), &[0x98, 0x06], bytes].concat()])
        };
        decode_agreeing(
            &s,
            &unknown_varint(&[[0xff; 9].as_slice(), &[0x01]].concat()),
        );
        let err = decode_failing(
            &s,
            &unknown_varint(&[[0xff; 10].as_slice(), &[0x01]].concat()),
        );
        assert!(err.contains("varint"), "{err}");
        let err = decode_failing(
            &s,
            &unknown_varint(&[[0xff; 9].as_slice(), &[0x02]].concat()),
        );
        assert!(err.contains("varint"), "{err}");
        // Field number 0; an end-group tag with no group.
        decode_failing(&s, &[0x00, 0x01]);
        decode_failing(&s, &[0x0c]);
        // A length past the end of the enclosing message (but not of the buffer).
        let mut inner = len_field(field::MODULE_NAME, b"abc");
        inner[1] = 10;
        let mut past = len_field(field::HLO_MODULE, &inner);
        past.extend(len_field(99, &[0; 16]));
        assert!(decode_failing(&s, &past).contains("runs past the end"));
        // A packed list cut inside a varint.
        let cut = wrap_instructions(&[len_field(field::INSTR_OPERAND_IDS, &[0x01, 0x80])]);
        decode_failing(&s, &cut);

        // Unknown fields of every wire type, groups included, are skipped.
        let mut unknown = Vec::new();
        unknown.extend(varint_field(700, 5));
        key(701, WIRE_FIXED64, &mut unknown);
        unknown.extend_from_slice(&[1; 8]);
        key(702, WIRE_FIXED32, &mut unknown);
        unknown.extend_from_slice(&[2; 4]);
        key(703, WIRE_START_GROUP, &mut unknown);
        unknown.extend(varint_field(1, 1));
        key(704, WIRE_START_GROUP, &mut unknown);
        key(704, WIRE_END_GROUP, &mut unknown);
        key(703, WIRE_END_GROUP, &mut unknown);
        let with_unknown = wrap_instructions(&[[
            unknown.clone(),
            wire_instruction("p", "parameter", 1, &[f32_shape(&[4])]),
            unknown.clone(),
        ]
        .concat()]);
        assert_eq!(
            decode_agreeing(&s, &with_unknown),
            decode_agreeing(&s, &good)
        );
        // ... but not a group closed by the wrong tag.
        let mut mismatched = Vec::new();
        key(703, WIRE_START_GROUP, &mut mismatched);
        key(705, WIRE_END_GROUP, &mut mismatched);
        decode_failing(&s, &wrap_instructions(&[mismatched]));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let s = builtin();
        let mut shape = f32_shape(&[1])[2..].to_vec();
        for _ in 0..200 {
            let mut outer = varint_field(field::SHAPE_ELEMENT_TYPE, TUPLE as u64);
            outer.extend(len_field(field::SHAPE_TUPLE_SHAPES, &shape));
            shape = outer;
        }
        let bytes = wrap_instructions(&[wire_instruction(
            "t",
            "parameter",
            1,
            &[len_field(field::INSTR_SHAPE, &shape)],
        )]);
        assert!(decode_failing(&s, &bytes).contains("nested too deeply"));
        let mut groups = Vec::new();
        for _ in 0..200 {
            key(800, WIRE_START_GROUP, &mut groups);
        }
        decode_failing(&s, &wrap_instructions(&[groups]));
    }

    #[test]
    fn other_integer_types_decode_alike() {
        // A schema whose integers use every other encoding: zigzag, fixed width, unsigned.
        let source = br#"
            syntax = "proto3";
            package xla;
            message LayoutProto { sint64 memory_space = 8; }
            message ShapeProto { int32 element_type = 2; repeated uint64 dimensions = 3; LayoutProto layout = 5; }
            message OpMetadata { string op_name = 2; sfixed32 source_line = 4; fixed32 stack_frame_id = 15; }
            message ReplicaGroup { repeated sfixed64 replica_ids = 1; }
            message HloInstructionProto {
              string name = 1; string opcode = 2; ShapeProto shape = 3; OpMetadata metadata = 7;
              sint64 id = 35; repeated sfixed64 operand_ids = 36; repeated fixed64 called_computation_ids = 38;
              repeated ReplicaGroup replica_groups = 49;
            }
            message HloComputationProto { repeated HloInstructionProto instructions = 2; uint32 id = 5; }
            message HloModuleProto { string name = 1; repeated HloComputationProto computations = 3; sint32 id = 5; }
            message HloProto { HloModuleProto hlo_module = 1; }
        "#;
        let set = compile_protos(&[("xla/ints.proto".to_string(), source.to_vec())]).unwrap();
        let n = HloSchema::from_descriptor_set(&set).unwrap();
        let shape = |dims: &[u64], space: i64| {
            let mut m = new_message(&n, "xla.ShapeProto");
            m.set_field_by_number(2, Value::I32(F32));
            m.set_field_by_number(
                3,
                Value::List(dims.iter().map(|&d| Value::U64(d)).collect()),
            );
            let mut layout = new_message(&n, "xla.LayoutProto");
            layout.set_field_by_number(8, Value::I64(space));
            m.set_field_by_number(5, Value::Message(layout));
            Value::Message(m)
        };
        let instr = |name: &str, opcode: &str, id: i64, operands: &[i64], space: i64| {
            let mut m = new_message(&n, "xla.HloInstructionProto");
            m.set_field_by_number(1, Value::String(name.into()));
            m.set_field_by_number(2, Value::String(opcode.into()));
            m.set_field_by_number(3, shape(&[8, 1024], space));
            m.set_field_by_number(35, Value::I64(id));
            m.set_field_by_number(
                36,
                Value::List(operands.iter().map(|&o| Value::I64(o)).collect()),
            );
            m
        };
        let mut ar = instr("ar", "all-reduce", -3, &[-1, 1 << 40], 0);
        let mut group = new_message(&n, "xla.ReplicaGroup");
        group.set_field_by_number(1, Value::List(vec![Value::I64(-5), Value::I64(6)]));
        ar.set_field_by_number(49, Value::List(vec![Value::Message(group)]));
        ar.set_field_by_number(38, Value::List(vec![Value::U64(u64::MAX), Value::U64(4)]));
        let mut metadata = new_message(&n, "xla.OpMetadata");
        metadata.set_field_by_number(2, Value::String("op".into()));
        metadata.set_field_by_number(4, Value::I32(-12));
        metadata.set_field_by_number(15, Value::U32(u32::MAX));
        ar.set_field_by_number(7, Value::Message(metadata));
        let mut c = new_message(&n, "xla.HloComputationProto");
        c.set_field_by_number(
            2,
            Value::List(vec![
                Value::Message(instr("p", "parameter", -1, &[], 0)),
                Value::Message(instr("q", "parameter", 1 << 40, &[], 5)),
                Value::Message(ar),
                Value::Message(instr("ds", "dynamic-slice", 7, &[1 << 40, -1], 0)),
            ]),
        );
        c.set_field_by_number(5, Value::U32(u32::MAX));
        let mut m = new_message(&n, "xla.HloModuleProto");
        m.set_field_by_number(1, Value::String("jit_ints".into()));
        m.set_field_by_number(3, Value::List(vec![Value::Message(c)]));
        m.set_field_by_number(5, Value::I32(-2));
        let bytes = encode(&n, m);
        let info = decode_both_ways(&n, &bytes);
        assert_eq!(info.id, -2);
        let ar = info.instruction("ar").unwrap();
        assert_eq!(
            (ar.source_line, ar.stack_frame_id),
            (-12, i64::from(u32::MAX))
        );
        let c = comm(&info, "ar");
        assert_eq!((c.message_size_bytes, c.collective_size), (2 * 32768, 2));
        assert_eq!(comm(&info, "ds").collective, "host-to-device");
    }

    #[test]
    fn schema_with_incompatible_field_types_is_rejected() {
        let schema = |instruction_fields: &str| {
            let source = format!(
                r#"syntax = "proto3"; package xla;
                   message ShapeProto {{ int32 element_type = 2; }}
                   message Other {{ int64 x = 1; }}
                   message HloInstructionProto {{ {instruction_fields} }}
                   message HloComputationProto {{ repeated HloInstructionProto instructions = 2; }}
                   message HloModuleProto {{ repeated HloComputationProto computations = 3; }}
                   message HloProto {{ HloModuleProto hlo_module = 1; }}"#
            );
            let set = compile_protos(&[("xla/t.proto".to_string(), source.into_bytes())]).unwrap();
            HloSchema::from_descriptor_set(&set).map_err(|e| format!("{e:#}"))
        };
        // Every planned field present but `operand_ids` (fine: it is left out of the plan).
        assert!(schema("string name = 1; int64 id = 35; ShapeProto shape = 3;").is_ok());
        for (fields, wanted) in [
            (
                "repeated string operand_ids = 36;",
                "field operand_ids (number 36) of xla.HloInstructionProto is repeated string",
            ),
            (
                "int64 operand_ids = 36;",
                "is int64, where a repeated integer",
            ),
            (
                "bytes name = 1;",
                "field name (number 1) of xla.HloInstructionProto is bytes",
            ),
            ("repeated string name = 1;", "is repeated string"),
            ("double id = 35;", "is double"),
            ("bool id = 35;", "is bool"),
            ("Other shape = 3; ", ""),
            (
                "int64 shape = 3;",
                "is int64, where a singular message field",
            ),
            (
                "repeated ShapeProto shape = 3;",
                "is repeated xla.ShapeProto",
            ),
            (
                "map<string, string> metadata = 7;",
                "is map<string, string>",
            ),
        ] {
            let result = schema(fields);
            if wanted.is_empty() {
                // A message of another type is read by its fields' names: no error.
                assert!(result.is_ok(), "{fields}: {result:?}");
            } else {
                let err = result.expect_err(fields);
                assert!(err.contains(wanted), "{fields}: {err}");
            }
        }
        // A map whose values are not strings.
        let source = br#"syntax = "proto3"; package xla;
            message FrontendAttributes { map<string, int64> map = 1; }
            message HloModuleProto { FrontendAttributes frontend_attributes = 19; }
            message HloProto { HloModuleProto hlo_module = 1; }"#;
        let set = compile_protos(&[("xla/m.proto".to_string(), source.to_vec())]).unwrap();
        let err = format!("{:#}", HloSchema::from_descriptor_set(&set).unwrap_err());
        assert!(
            err.contains("field map (number 1) of xla.FrontendAttributes is map<string, int64>"),
            "{err}"
        );
    }

    #[test]
    fn fields_missing_from_an_older_schema_are_skipped() {
        // The builtin schema writes `collective_device_list` (87) and `scheduling_name`; a
        // schema without them (like 2024's) decodes the same bytes with neither.
        let s = builtin();
        let mut metadata = new_message(&s, "xla.OpMetadata");
        metadata.set_field_by_number(field::META_OP_NAME, Value::String("x".into()));
        metadata.set_field_by_number(field::META_SCHEDULING_NAME, Value::String("y".into()));
        let mut ar = with_groups(
            &s,
            instr(&s, "ar", "all-reduce", 10, shape(&s, F32, &[4], 0), &[1]),
            &[&[0, 1]],
        );
        ar = with_device_list(&s, ar, &[&[0, 1, 2, 3]], None);
        ar.set_field_by_number(field::INSTR_METADATA, Value::Message(metadata));
        let bytes = entry_module(&s, &[&[4]], vec![ar]);
        let new = decode_both_ways(&s, &bytes);
        assert_eq!(comm(&new, "ar").collective_size, 4);
        assert_eq!(new.instruction("ar").unwrap().scheduling_name, "y");

        let source = br#"syntax = "proto3"; package xla;
            message ShapeProto { int32 element_type = 2; repeated int64 dimensions = 3; }
            message ReplicaGroup { repeated int64 replica_ids = 1; }
            message OpMetadata { string op_name = 2; }
            message HloInstructionProto {
              string name = 1; string opcode = 2; ShapeProto shape = 3; OpMetadata metadata = 7;
              int64 id = 35; repeated int64 operand_ids = 36; repeated ReplicaGroup replica_groups = 49;
            }
            message HloComputationProto { repeated HloInstructionProto instructions = 2; int64 id = 5; }
            message HloModuleProto { string name = 1; repeated HloComputationProto computations = 3; int64 id = 5; }
            message HloProto { HloModuleProto hlo_module = 1; }"#;
        let set = compile_protos(&[("xla/old.proto".to_string(), source.to_vec())]).unwrap();
        let old = decode_both_ways(&HloSchema::from_descriptor_set(&set).unwrap(), &bytes);
        assert_eq!(comm(&old, "ar").collective_size, 2);
        let ar = old.instruction("ar").unwrap();
        assert_eq!(
            (ar.op_name.as_str(), ar.scheduling_name.as_str()),
            ("x", "")
        );
    }

    /// A module with a bit of everything the decoder reads, encoded.
    fn rich_module(s: &HloSchema) -> Vec<u8> {
        let mut metadata = new_message(s, "xla.OpMetadata");
        metadata.set_field_by_number(field::META_OP_NAME, Value::String("jit(f)/psum".into()));
        metadata.set_field_by_number(field::META_STACK_FRAME_ID, Value::I32(1));
        let mut ar = with_device_list(
            s,
            instr(
                s,
                "ar",
                "all-reduce",
                10,
                shape(s, F32, &[4, 4], 0),
                &[1, 2],
            ),
            &[&[0, 1], &[2, 3]],
            None,
        );
        ar.set_field_by_number(field::INSTR_METADATA, Value::Message(metadata));
        let ag = with_groups(
            s,
            instr(s, "ag", "all-gather", 11, shape(s, BF16, &[8], 0), &[2]),
            &[&[0, 1, 2, 3]],
        );
        let tuple = tuple_shape(s, vec![shape(s, F32, &[3], 5), shape(s, S8, &[2, 2], 0)]);
        let mut m = module(
            s,
            vec![computation(
                s,
                1,
                "main",
                vec![
                    instr(s, "p0", "parameter", 1, tuple, &[]),
                    instr(s, "p1", "parameter", 2, shape(s, F32, &[4], 5), &[]),
                    ar,
                    ag,
                ],
            )],
        );
        let mut attributes = new_message(s, "xla.FrontendAttributes");
        let map = [(
            MapKey::String(FINGERPRINT_ATTRIBUTE.into()),
            Value::String("fp".into()),
        )]
        .into_iter()
        .collect();
        attributes.set_field_by_number(field::FRONTEND_ATTRIBUTES_MAP, Value::Map(map));
        m.set_field_by_number(
            field::MODULE_FRONTEND_ATTRIBUTES,
            Value::Message(attributes),
        );
        let mut index = new_message(s, "xla.StackFrameIndexProto");
        index.set_field_by_number(
            field::SFI_FILE_NAMES,
            Value::List(vec![Value::String("/a.py".into())]),
        );
        let mut location = new_message(s, "xla.StackFrameIndexProto.FileLocation");
        location.set_field_by_number(field::LOC_FILE_NAME_ID, Value::I32(1));
        location.set_field_by_number(field::LOC_LINE, Value::I32(3));
        index.set_field_by_number(
            field::SFI_FILE_LOCATIONS,
            Value::List(vec![Value::Message(location)]),
        );
        let mut frame = new_message(s, "xla.StackFrameIndexProto.StackFrame");
        frame.set_field_by_number(field::FRAME_FILE_LOCATION_ID, Value::I32(1));
        index.set_field_by_number(
            field::SFI_STACK_FRAMES,
            Value::List(vec![Value::Message(frame)]),
        );
        m.set_field_by_number(field::MODULE_STACK_FRAME_INDEX, Value::Message(index));
        encode(s, m)
    }

    #[test]
    fn rich_module_decodes_alike() {
        let s = builtin();
        let info = decode_both_ways(&s, &rich_module(&s));
        assert_eq!(info.fingerprint.as_deref(), Some("fp"));
        assert_eq!(info.stack(1), vec![("/a.py".to_string(), 3, String::new())]);
        assert_eq!(comm(&info, "ar").message_size_bytes, 16 + 16);
        assert_eq!(comm(&info, "ag").collective_size, 4);
    }

    mod never_panics {
        use super::*;
        use proptest::prelude::*;

        fn schema() -> &'static HloSchema {
            static SCHEMA: std::sync::OnceLock<HloSchema> = std::sync::OnceLock::new();
            SCHEMA.get_or_init(builtin)
        }

        fn rich() -> &'static [u8] {
            static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
            BYTES.get_or_init(|| rich_module(schema()))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
                let _ = decode_hlo(schema(), &bytes);
                let _ = decode_planned(&schema().plan, &bytes, false);
            }

            #[test]
            fn random_bytes_inside_a_module(noise in proptest::collection::vec(any::<u8>(), 0..256)) {
                // Noise where an instruction should be: deeper than random bytes reach.
                let _ = decode_hlo(schema(), &wrap_instructions(&[noise]));
            }

            #[test]
            fn truncations_of_a_real_module(cut in 0usize..4096) {
                let bytes = rich();
                let cut = cut % bytes.len();
                let _ = decode_with_both(schema(), &bytes[..cut]);
            }

            #[test]
            fn mutations_of_a_real_module(
                edits in proptest::collection::vec((0usize..4096, any::<u8>()), 1..4)
            ) {
                // Where both decoders accept the mutated bytes, they agree.
                let mut bytes = rich().to_vec();
                for (at, byte) in edits {
                    let at = at % bytes.len();
                    bytes[at] = byte;
                }
                let _ = decode_with_both(schema(), &bytes);
            }
        }
    }
}
