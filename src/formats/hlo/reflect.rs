//! Reflective decoding, the reference: dynamic messages read by field number.
//!
//! Each message is consumed in one pass over the fields it has (`take_fields`), matching on
//! field numbers: values move out without copies, and whatever the code does not use is
//! skipped. Fields that the schema does not declare never show up here.

use super::*;

use anyhow::{Result, anyhow};
use prost_reflect::{DynamicMessage, MapKey, Value};

pub(super) fn dyn_fields(msg: &mut DynamicMessage) -> impl Iterator<Item = (u32, Value)> + '_ {
    msg.take_fields().map(|(f, v)| (f.number(), v))
}

pub(super) fn value_i64(value: &Value) -> Option<i64> {
    match *value {
        Value::I32(v) => Some(v.into()),
        Value::I64(v) => Some(v),
        Value::U32(v) => Some(v.into()),
        Value::U64(v) => i64::try_from(v).ok(),
        Value::EnumNumber(v) => Some(v.into()),
        _ => None,
    }
}

pub(super) fn int(value: &Value) -> i64 {
    value_i64(value).unwrap_or(0)
}

pub(super) fn ints(value: &Value) -> Vec<i64> {
    match value {
        Value::List(items) => items.iter().filter_map(value_i64).collect(),
        _ => Vec::new(),
    }
}

pub(super) fn string(value: Value) -> String {
    match value {
        Value::String(s) => s,
        _ => String::new(),
    }
}

pub(super) fn strings(value: Value) -> Vec<String> {
    match value {
        Value::List(items) => items.into_iter().map(string).collect(),
        _ => Vec::new(),
    }
}

pub(super) fn message(value: Value) -> Option<DynamicMessage> {
    match value {
        Value::Message(m) => Some(m),
        _ => None,
    }
}

pub(super) fn messages(value: Value) -> impl Iterator<Item = DynamicMessage> {
    let items = match value {
        Value::List(items) => items,
        _ => Vec::new(),
    };
    items.into_iter().filter_map(message)
}

/// The integer field `number` of a message, 0 when unset.
pub(super) fn int_field(mut msg: DynamicMessage, number: u32) -> i64 {
    dyn_fields(&mut msg)
        .find(|(n, _)| *n == number)
        .map_or(0, |(_, v)| int(&v))
}

pub(super) fn take_shape(mut msg: DynamicMessage) -> Shape {
    let mut shape = Shape {
        decoded: true,
        ..Shape::default()
    };
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
pub(super) fn group_sizes(value: Value) -> Vec<usize> {
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

pub(super) fn read_mesh_groups(mut list: DynamicMessage) -> MeshGroups {
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

pub(super) fn take_instruction(mut msg: DynamicMessage) -> Instruction<'static> {
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
            field::INSTR_CONTROL_PREDECESSOR_IDS => {
                instr.control_predecessor_ids = ints(&value).into()
            }
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
            field::INSTR_WINDOW => {
                if let Some(mut window) = message(value) {
                    for (n, dims) in dyn_fields(&mut window) {
                        if n == field::WINDOW_DIMENSIONS {
                            instr.cost.window.extend(
                                messages(dims).map(|d| int_field(d, field::WINDOW_DIMENSION_SIZE)),
                            );
                        }
                    }
                }
            }
            field::INSTR_CONVOLUTION_DIMENSION_NUMBERS => {
                instr.cost.kernel_output_feature =
                    message(value).map(|d| int_field(d, field::CONV_KERNEL_OUTPUT_FEATURE));
            }
            field::INSTR_CUSTOM_CALL_TARGET => instr.cost.target = string(value).into(),
            field::INSTR_DOT_DIMENSION_NUMBERS => {
                instr.cost.lhs_contracting = message(value).map(|mut d| {
                    dyn_fields(&mut d)
                        .filter(|(n, _)| *n == field::DOT_LHS_CONTRACTING)
                        .flat_map(|(_, v)| ints(&v))
                        .collect()
                });
            }
            field::INSTR_BACKEND_CONFIG => {
                instr.cost.backend_config = match value {
                    Value::Bytes(b) => b.to_vec().into(),
                    v => string(v).into_bytes().into(),
                }
            }
            field::INSTR_PRECISION_CONFIG => {
                if let Some(mut p) = message(value) {
                    for (n, v) in dyn_fields(&mut p) {
                        if n == field::PRECISION_OPERANDS {
                            instr.cost.precision.extend(ints(&v));
                        }
                    }
                }
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

pub(super) fn take_metadata(instr: &mut Instruction<'static>, mut metadata: DynamicMessage) {
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

pub(super) fn take_computation(mut msg: DynamicMessage) -> Computation<'static> {
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

pub(super) fn take_stack_frame_index(mut msg: DynamicMessage) -> StackFrameIndex {
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

pub(super) fn take_fingerprint(mut attributes: DynamicMessage) -> Option<String> {
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

pub(super) fn take_module(parts: &mut ModuleParts<'static>, mut module: DynamicMessage) {
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
pub(super) struct WireField<'a> {
    pub(super) number: u32,
    /// The whole field, key included.
    pub(super) raw: &'a [u8],
    /// The contents of a length-delimited field.
    pub(super) payload: Option<&'a [u8]>,
}

pub(super) fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
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
pub(super) fn wire_fields(buf: &[u8]) -> Option<Vec<WireField<'_>>> {
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
pub(super) fn decode_split(
    schema: &HloSchema,
    bytes: &[u8],
) -> Option<Result<ModuleParts<'static>>> {
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
pub(super) fn decode_whole(schema: &HloSchema, bytes: &[u8]) -> Result<ModuleParts<'static>> {
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
    module_info(schema, &bytes::Bytes::new(), parts, true)
}
