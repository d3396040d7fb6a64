//! XLA HLO protobuf dumps (`*.hlo.pb`): schema compilation at run time and module decoding.
//!
//! No code is generated from XLA's `.proto` files at build time. A schema is compiled from
//! `.proto` sources when needed, either the project's own minimal one (`protos/`, see
//! [`builtin_proto_sources`]) or the XLA/TSL tree that an nsys-jax archive ships under
//! `protos/`. Dumps are then decoded dynamically and every field is read by its NUMBER, so the
//! same code works with either schema: XLA never renumbers fields, and fields that a schema
//! does not declare are skipped.
//!
//! [`decode_hlo`] turns one `xla.HloProto` into an [`HloModuleInfo`]: per instruction its
//! opcode, source metadata and, for communication (collectives and host-offload copies), the
//! message size, collective size and bandwidth factors of DESIGN §8.2/§8.4.

use std::collections::{HashMap, HashSet};

use anyhow::{Context, Result, anyhow, bail};
use prost_reflect::{
    DescriptorPool, DynamicMessage, EnumDescriptor, MapKey, MessageDescriptor, Value,
};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Field numbers (XLA's; DESIGN §9).

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
/// Module frontend attribute that identifies a module across processes (DESIGN §7.1).
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

/// A compiled schema able to decode `xla.HloProto`.
#[derive(Debug, Clone)]
pub struct HloSchema {
    pool: DescriptorPool,
    hlo_proto: MessageDescriptor,
    /// `xla.HloModuleProto`, and `xla.HloComputationProto` when the module's field 3 is one.
    module: MessageDescriptor,
    computation: Option<MessageDescriptor>,
    primitive_type: Option<EnumDescriptor>,
}

impl HloSchema {
    /// Loads an encoded `FileDescriptorSet` (as from [`compile_protos`]); it must define
    /// `xla.HloProto`.
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
        Ok(HloSchema {
            pool,
            hlo_proto,
            module,
            computation,
            primitive_type,
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
    /// The module's `fingerprint_before_lhs` frontend attribute (DESIGN §7.1).
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
    /// Set when the instruction is communication (DESIGN §8.2).
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
// Reading dynamic messages by field number.
//
// Each message is consumed in one pass over the fields it has (`take_fields`), matching on
// field numbers: values move out without copies, and whatever the code does not use is
// skipped. Fields that the schema does not declare never show up here.

fn fields(msg: &mut DynamicMessage) -> impl Iterator<Item = (u32, Value)> + '_ {
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
    fields(&mut msg)
        .find(|(n, _)| *n == number)
        .map_or(0, |(_, v)| int(&v))
}

// ---------------------------------------------------------------------------------------------
// Plain copies of the parts of a module the analysis needs.

#[derive(Debug, Default)]
struct Shape {
    element_type: i32,
    dimensions: Vec<i64>,
    tuple_shapes: Vec<Shape>,
    memory_space: i64,
}

impl Shape {
    fn take(mut msg: DynamicMessage) -> Shape {
        let mut shape = Shape::default();
        for (number, value) in fields(&mut msg) {
            match number {
                field::SHAPE_ELEMENT_TYPE => {
                    shape.element_type = i32::try_from(int(&value)).unwrap_or(-1)
                }
                field::SHAPE_DIMENSIONS => shape.dimensions = ints(&value),
                field::SHAPE_TUPLE_SHAPES => {
                    shape.tuple_shapes = messages(value).map(Shape::take).collect()
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
    mesh: Option<MeshGroups>,
}

/// Replica groups given as the devices that vary along some axes of a mesh.
#[derive(Debug, Default)]
struct MeshGroups {
    /// Sizes of the mesh's axes.
    axis_sizes: Vec<i64>,
    /// The axes the groups span: (index into `axis_sizes`, size of the sub-axis if only a part).
    axes: Vec<(i64, Option<i64>)>,
}

/// Sizes of a list of `xla.ReplicaGroup`s.
fn group_sizes(value: Value) -> Vec<usize> {
    messages(value)
        .map(|mut group| {
            fields(&mut group)
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
    for (number, value) in fields(&mut list) {
        match number {
            field::MESH_GROUPS_MESH => {
                let Some(mut mesh) = message(value) else {
                    continue;
                };
                for (n, v) in fields(&mut mesh) {
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
                        for (n, v) in fields(&mut axis) {
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
        if let Some(MeshGroups { axis_sizes, axes }) = &self.mesh {
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
struct Instruction {
    name: String,
    opcode: String,
    shape: Shape,
    id: i64,
    operand_ids: Vec<i64>,
    called_computation_ids: Vec<i64>,
    groups: DeviceGroups,
    op_type: String,
    op_name: String,
    source_file: String,
    source_line: i64,
    stack_frame_id: i64,
    scheduling_name: String,
}

impl Instruction {
    fn take(mut msg: DynamicMessage) -> Instruction {
        let mut instr = Instruction::default();
        let mut legacy_groups = Vec::new();
        let mut iota_list = 0;
        for (number, value) in fields(&mut msg) {
            match number {
                field::INSTR_NAME => instr.name = string(value),
                field::INSTR_OPCODE => instr.opcode = string(value),
                field::INSTR_SHAPE => {
                    if let Some(shape) = message(value) {
                        instr.shape = Shape::take(shape);
                    }
                }
                field::INSTR_METADATA => {
                    if let Some(metadata) = message(value) {
                        instr.take_metadata(metadata);
                    }
                }
                field::INSTR_ID => instr.id = int(&value),
                field::INSTR_OPERAND_IDS => instr.operand_ids = ints(&value),
                field::INSTR_CALLED_COMPUTATION_IDS => instr.called_computation_ids = ints(&value),
                field::INSTR_REPLICA_GROUPS => legacy_groups = group_sizes(value),
                field::INSTR_COLLECTIVE_DEVICE_LIST => {
                    let Some(mut list) = message(value) else {
                        continue;
                    };
                    for (n, v) in fields(&mut list) {
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
                    instr.groups.mesh = message(value).map(read_mesh_groups);
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

    fn take_metadata(&mut self, mut metadata: DynamicMessage) {
        for (number, value) in fields(&mut metadata) {
            match number {
                field::META_OP_TYPE => self.op_type = string(value),
                field::META_OP_NAME => self.op_name = string(value),
                field::META_SOURCE_FILE => self.source_file = string(value),
                field::META_SOURCE_LINE => self.source_line = int(&value),
                field::META_STACK_FRAME_ID => self.stack_frame_id = int(&value),
                field::META_SCHEDULING_NAME => self.scheduling_name = string(value),
                _ => {}
            }
        }
    }
}

struct Computation {
    id: i64,
    instructions: Vec<Instruction>,
}

impl Computation {
    fn take(mut msg: DynamicMessage) -> Computation {
        let mut computation = Computation {
            id: 0,
            instructions: Vec::new(),
        };
        for (number, value) in fields(&mut msg) {
            match number {
                field::COMPUTATION_ID => computation.id = int(&value),
                field::COMPUTATION_INSTRUCTIONS => {
                    computation.instructions = messages(value).map(Instruction::take).collect()
                }
                _ => {}
            }
        }
        computation
    }
}

fn take_stack_frame_index(mut msg: DynamicMessage) -> StackFrameIndex {
    let mut index = StackFrameIndex::default();
    for (number, value) in fields(&mut msg) {
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
                        for (n, v) in fields(&mut l) {
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
                        for (n, v) in fields(&mut f) {
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
    let (_, map) = fields(&mut attributes).find(|(n, _)| *n == field::FRONTEND_ATTRIBUTES_MAP)?;
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

// ---------------------------------------------------------------------------------------------
// Decoding and communication analysis.

/// The module-level parts of an `xla.HloModuleProto`.
#[derive(Default)]
struct ModuleParts {
    name: String,
    id: i64,
    computations: Vec<Computation>,
    stack_frames: StackFrameIndex,
    fingerprint: Option<String>,
}

impl ModuleParts {
    fn take(&mut self, mut module: DynamicMessage) {
        for (number, value) in fields(&mut module) {
            match number {
                field::MODULE_NAME => self.name = string(value),
                field::MODULE_ID => self.id = int(&value),
                field::MODULE_COMPUTATIONS => {
                    self.computations = messages(value).map(Computation::take).collect()
                }
                field::MODULE_STACK_FRAME_INDEX => {
                    if let Some(index) = message(value) {
                        self.stack_frames = take_stack_frame_index(index);
                    }
                }
                field::MODULE_FRONTEND_ATTRIBUTES => {
                    self.fingerprint = message(value).and_then(take_fingerprint)
                }
                _ => {}
            }
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
fn decode_split(schema: &HloSchema, bytes: &[u8]) -> Option<Result<ModuleParts>> {
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
                .map(Computation::take)
                .map_err(|e| anyhow!("decoding xla.HloComputationProto: {e}"))
        })
        .collect::<Result<Vec<_>>>();
    Some(computations.and_then(|computations| {
        let module = DynamicMessage::decode(schema.module.clone(), rest.as_slice())
            .map_err(|e| anyhow!("decoding xla.HloModuleProto: {e}"))?;
        let mut parts = ModuleParts::default();
        parts.take(module);
        parts.computations = computations;
        Ok(parts)
    }))
}

/// Decodes a whole `xla.HloProto` in one go.
fn decode_whole(schema: &HloSchema, bytes: &[u8]) -> Result<ModuleParts> {
    let mut proto = DynamicMessage::decode(schema.hlo_proto.clone(), bytes)
        .map_err(|e| anyhow!("decoding xla.HloProto ({} bytes): {e}", bytes.len()))?;
    let module = fields(&mut proto)
        .find(|(n, _)| *n == field::HLO_MODULE)
        .and_then(|(_, v)| message(v))
        .ok_or_else(|| anyhow!("xla.HloProto has no hlo_module"))?;
    let mut parts = ModuleParts::default();
    parts.take(module);
    Ok(parts)
}

/// Decodes one `xla.HloProto` (raw bytes, not xz-compressed) into an [`HloModuleInfo`].
///
/// Fields are read by number, so any schema with XLA's numbering works; fields it does not
/// declare are skipped. Computations are decoded in parallel (rayon).
pub fn decode_hlo(schema: &HloSchema, bytes: &[u8]) -> Result<HloModuleInfo> {
    let parts = match decode_split(schema, bytes) {
        Some(parts) => parts?,
        None => decode_whole(schema, bytes)?,
    };
    module_info(schema, parts)
}

/// Classifies communication and assembles the summary.
fn module_info(schema: &HloSchema, parts: ModuleParts) -> Result<HloModuleInfo> {
    let ModuleParts {
        name,
        id,
        computations,
        stack_frames,
        fingerprint,
    } = parts;

    let mut communication =
        Vec::with_capacity(computations.iter().map(|c| c.instructions.len()).sum());
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
    let mut instructions: Vec<HloInstructionInfo> = computations
        .into_iter()
        .flat_map(|c| c.instructions)
        .zip(communication)
        .map(|(instr, communication)| HloInstructionInfo {
            name: instr.name,
            opcode: instr.opcode,
            op_type: instr.op_type,
            op_name: instr.op_name,
            source_file: instr.source_file,
            source_line: instr.source_line,
            stack_frame_id: instr.stack_frame_id,
            scheduling_name: instr.scheduling_name,
            communication,
        })
        .collect();
    instructions.sort_unstable_by(|a, b| a.name.cmp(&b.name));

    Ok(HloModuleInfo {
        name,
        id,
        fingerprint,
        instructions,
        stack_frames,
    })
}

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

struct Analysis<'a> {
    schema: &'a HloSchema,
    module_name: &'a str,
    computations: &'a [Computation],
    /// Computation id → index.
    computation_index: HashMap<i64, usize>,
    /// (computation index, instruction id) → instruction index.
    local: HashMap<(usize, i64), usize>,
    /// Instruction id → first instruction with it anywhere in the module.
    global: HashMap<i64, Ref>,
}

impl<'a> Analysis<'a> {
    fn new(schema: &'a HloSchema, module_name: &'a str, computations: &'a [Computation]) -> Self {
        let total = computations.iter().map(|c| c.instructions.len()).sum();
        let mut local = HashMap::with_capacity(total);
        let mut global = HashMap::with_capacity(total);
        for (ci, c) in computations.iter().enumerate() {
            for (ii, instr) in c.instructions.iter().enumerate() {
                local.insert((ci, instr.id), ii);
                global.entry(instr.id).or_insert(Ref { ci, ii });
            }
        }
        let mut computation_index = HashMap::with_capacity(computations.len());
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

    fn get(&self, r: Ref) -> &'a Instruction {
        &self.computations[r.ci].instructions[r.ii]
    }

    /// Operand `k` of an instruction, found by id (its own computation first, then the module).
    fn operand(&self, r: Ref, k: usize) -> Result<&'a Instruction> {
        let instr = self.get(r);
        let id = *instr
            .operand_ids
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
        match instr.opcode.as_str() {
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
        Ok(COMMUNICATION_OPCODES.contains(&instr.opcode.as_str())
            || self.host_offload(r)?.is_some())
    }

    /// Collects communication instructions in the computations called by `r`, recursively;
    /// stops once two are found.
    fn find_nested(
        &self,
        r: Ref,
        visited: &mut HashSet<usize>,
        found: &mut Vec<Ref>,
    ) -> Result<()> {
        for &cid in &self.get(r).called_computation_ids {
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
        if COMMUNICATION_OPCODES.contains(&instr.opcode.as_str()) {
            return self.collective_info(r).map(Some);
        }
        if instr.opcode != "async-start" && instr.opcode != "fusion" {
            return Ok(None);
        }
        let mut found = Vec::new();
        self.find_nested(r, &mut HashSet::new(), &mut found)?;
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
        for k in 0..instr.operand_ids.len() {
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
        for &d in &shape.dimensions {
            let d = u128::try_from(d).map_err(|_| anyhow!("negative dimension {d}"))?;
            elements = elements.saturating_mul(d);
        }
        let bytes = elements.saturating_mul(bits.into()).div_ceil(8);
        Ok(u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

/// Size of the collective's groups (DESIGN §8.4).
fn collective_size(instr: &Instruction) -> Result<u32> {
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

    /// Decodes through both paths (parallel split and whole message) and checks they agree.
    fn decode_both_ways(s: &HloSchema, bytes: &[u8]) -> HloModuleInfo {
        let split = decode_split(s, bytes).expect("split applies").unwrap();
        let split = module_info(s, split).unwrap();
        let whole = module_info(s, decode_whole(s, bytes).unwrap()).unwrap();
        assert_eq!(split, whole);
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

    #[test]
    fn pax_archive_schema_and_builtin_schema_agree() {
        let Some(fixtures) = crate::testutil::fixtures_dir() else {
            return;
        };
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
        let archive_schema =
            HloSchema::from_descriptor_set(&compile_protos(&sources).unwrap()).unwrap();

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
}
