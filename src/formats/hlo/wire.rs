//! Fast decoding: a sparse reader of the protobuf wire format, directed by the field plan.
//!
//! Only planned fields are read; everything else is skipped without allocating. Decoding
//! follows protobuf's rules as prost-reflect applies them, so it gives what the reflective
//! decoder gives: the last value of a singular field wins, a message field that occurs more
//! than once merges, repeated integers may be packed or not, a planned field with the wrong wire
//! type is an error, and so is any malformed input.

use super::decoded::{
    Computation, DeviceGroups, FINGERPRINT_ATTRIBUTE, FileLocation, Instruction, MeshGroups,
    ModuleParts, Shape, StackFrame, StackFrameIndex,
};
use super::plan::{
    AxisRefField, ComputationField, DeviceListField, EntryField, FieldPlan, FrameField, IndexField,
    InstructionField, IntKind, LocationField, MeshGroupsField, MetadataField, ModuleField,
    RECURSION_LIMIT, ShapeField, Table, WIRE_END_GROUP, WIRE_FIXED32, WIRE_FIXED64, WIRE_LEN,
    WIRE_START_GROUP, WIRE_VARINT,
};
use std::borrow::Cow;
use std::fmt;

use anyhow::{Result, anyhow, bail};

/// What is wrong with the bytes, and in which message.
#[derive(Debug, Clone, Copy)]
pub(super) struct WireError {
    pub(super) problem: &'static str,
    /// The innermost message being decoded; empty until known.
    pub(super) message: &'static str,
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

pub(super) type Wire<T> = std::result::Result<T, WireError>;

pub(super) fn wire_error<T>(problem: &'static str) -> Wire<T> {
    Err(WireError {
        problem,
        message: "",
    })
}

/// A position in one message's bytes.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline]
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(super) fn varint(&mut self) -> Wire<u64> {
        match self.buf.get(self.pos) {
            Some(&byte) if byte < 0x80 => {
                self.pos += 1;
                Ok(u64::from(byte))
            }
            _ => self.long_varint(),
        }
    }

    pub(super) fn long_varint(&mut self) -> Wire<u64> {
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
    pub(super) fn take(&mut self, len: u64) -> Wire<&'a [u8]> {
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
    pub(super) fn fixed(&mut self, width: u64) -> Wire<u64> {
        let bytes = self.take(width)?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0, |value, &byte| (value << 8) | u64::from(byte)))
    }

    /// A field key: (field number, wire type).
    #[inline]
    pub(super) fn key(&mut self) -> Wire<(u32, u8)> {
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
    pub(super) fn skip(&mut self, wire: u8, number: u32, depth: u32) -> Wire<()> {
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
pub(super) struct FieldValue<'r, 'a> {
    pub(super) reader: &'r mut Reader<'a>,
    pub(super) wire: u8,
    pub(super) int: IntKind,
}

impl<'a> FieldValue<'_, 'a> {
    /// The contents of a string or message field.
    #[inline]
    pub(super) fn bytes(self) -> Wire<&'a [u8]> {
        if self.wire != WIRE_LEN {
            return wire_error("wrong wire type for a string or message field");
        }
        let len = self.reader.varint()?;
        self.reader.take(len)
    }

    #[inline]
    pub(super) fn str(self) -> Wire<&'a str> {
        match std::str::from_utf8(self.bytes()?) {
            Ok(s) => Ok(s),
            Err(_) => wire_error("a string field is not valid UTF-8"),
        }
    }

    #[inline]
    pub(super) fn scalar(reader: &mut Reader<'a>, int: IntKind) -> Wire<Option<i64>> {
        let raw = match int.wire_type() {
            WIRE_VARINT => reader.varint()?,
            WIRE_FIXED32 => reader.fixed(4)?,
            _ => reader.fixed(8)?,
        };
        Ok(int.value(raw))
    }

    /// A singular integer field; 0 where the reflective decoder has no `i64` for it.
    #[inline]
    pub(super) fn int(self) -> Wire<i64> {
        if self.wire != self.int.wire_type() {
            return wire_error("wrong wire type for an integer field");
        }
        Ok(Self::scalar(self.reader, self.int)?.unwrap_or(0))
    }

    /// One occurrence of a repeated integer field, packed or not: calls `each` per element.
    #[inline]
    pub(super) fn ints(self, mut each: impl FnMut(Option<i64>)) -> Wire<()> {
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
pub(super) fn fields<'a, A: Copy>(
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
pub(super) struct ModuleScan<'a> {
    pub(super) name: &'a str,
    pub(super) id: i64,
    pub(super) computations: Vec<&'a [u8]>,
    pub(super) stack_frames: StackFrameIndex,
    pub(super) fingerprint: Option<&'a str>,
}

/// Reads one occurrence of `HloProto.hlo_module` into `scan` (occurrences merge).
pub(super) fn scan_module<'a>(
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

pub(super) fn decode_stack_frame_index(
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

pub(super) fn decode_computation<'a>(
    plan: &FieldPlan,
    bytes: &'a [u8],
    depth: u32,
) -> Wire<Computation<'a>> {
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

pub(super) fn decode_instruction<'a>(
    plan: &FieldPlan,
    bytes: &'a [u8],
    depth: u32,
) -> Wire<Instruction<'a>> {
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
                // Lists of ids: the present values, in order.
                InstructionField::OperandIds => {
                    value.ints(|v| v.map_or((), |v| instr.operand_ids.push(v)))?
                }
                InstructionField::ControlPredecessorIds => {
                    value.ints(|v| v.map_or((), |v| instr.control_predecessor_ids.push(v)))?
                }
                InstructionField::CalledComputationIds => {
                    value.ints(|v| v.map_or((), |v| instr.called_computation_ids.push(v)))?
                }
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
                InstructionField::Window => {
                    let window = &mut instr.cost.window;
                    fields(
                        value.bytes()?,
                        &plan.window,
                        inner,
                        "xla.Window",
                        |(), d| {
                            let at = inner + 1;
                            let name = "xla.WindowDimension";
                            fields(d.bytes()?, &plan.window_dimension, at, name, |(), size| {
                                window.push(size.int()?);
                                Ok(())
                            })
                        },
                    )?
                }
                InstructionField::ConvolutionDimensionNumbers => {
                    let feature = instr.cost.kernel_output_feature.insert(0);
                    let name = "xla.ConvolutionDimensionNumbers";
                    fields(
                        value.bytes()?,
                        &plan.convolution_dimensions,
                        inner,
                        name,
                        |(), d| {
                            *feature = d.int()?;
                            Ok(())
                        },
                    )?
                }
                InstructionField::CustomCallTarget => {
                    instr.cost.target = Cow::Borrowed(value.str()?)
                }
                InstructionField::DotDimensionNumbers => {
                    let lhs = instr.cost.lhs_contracting.insert(Vec::new());
                    let name = "xla.DotDimensionNumbers";
                    fields(
                        value.bytes()?,
                        &plan.dot_dimensions,
                        inner,
                        name,
                        |(), d| d.ints(|v| lhs.extend(v)),
                    )?
                }
                InstructionField::BackendConfig => {
                    instr.cost.backend_config = Cow::Borrowed(value.bytes()?)
                }
                InstructionField::PrecisionConfig => {
                    let precision = &mut instr.cost.precision;
                    let name = "xla.PrecisionConfig";
                    fields(value.bytes()?, &plan.precision, inner, name, |(), p| {
                        p.ints(|v| precision.extend(v))
                    })?
                }
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

pub(super) fn decode_shape(
    plan: &FieldPlan,
    bytes: &[u8],
    depth: u32,
    shape: &mut Shape,
) -> Wire<()> {
    shape.decoded = true;
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

pub(super) fn decode_metadata<'a>(
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
pub(super) fn count_replica_ids(table: &Table<()>, bytes: &[u8], depth: u32) -> Wire<usize> {
    let mut count = 0;
    fields(bytes, table, depth, "xla.ReplicaGroup", |(), value| {
        value.ints(|_| count += 1)
    })?;
    Ok(count)
}

/// `num_devices_per_group` of an `IotaReplicaGroupListProto`, into `devices_per_group` when
/// present.
pub(super) fn decode_iota_list(
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

pub(super) fn decode_device_list(
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

pub(super) fn decode_mesh_groups(
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
pub(super) const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// Decodes an `xla.HloProto` with the schema's field plan; with `parallel`, large modules'
/// computations are decoded on rayon's threads.
pub(super) fn decode_planned<'a>(
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
