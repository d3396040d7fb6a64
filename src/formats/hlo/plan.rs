//! The field plan: what the fast decoder reads, resolved by name in the schema.
//!
//! Once per schema, every field the decoder reads is looked up by message and field name,
//! following message types from `xla.HloProto` down; its number and type come from the schema,
//! and its type is checked against the way the decoder reads it. A field that the schema lacks
//! (an older XLA) is simply not in the plan, and the decoder skips it like any other field.

use anyhow::{Result, anyhow, bail};
use prost_reflect::{Cardinality, FieldDescriptor, Kind, MessageDescriptor};

pub(super) const WIRE_VARINT: u8 = 0;
pub(super) const WIRE_FIXED64: u8 = 1;
pub(super) const WIRE_LEN: u8 = 2;
pub(super) const WIRE_START_GROUP: u8 = 3;
pub(super) const WIRE_END_GROUP: u8 = 4;
pub(super) const WIRE_FIXED32: u8 = 5;

/// How deeply messages (and groups) may nest, as in prost.
pub(super) const RECURSION_LIMIT: u32 = 100;

/// The protobuf type of an integer field: its wire encoding and its conversion to `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntKind {
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
    pub(super) fn of(kind: &Kind) -> Option<IntKind> {
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

    pub(super) fn wire_type(self) -> u8 {
        match self {
            IntKind::Fixed32 | IntKind::Sfixed32 => WIRE_FIXED32,
            IntKind::Fixed64 | IntKind::Sfixed64 => WIRE_FIXED64,
            _ => WIRE_VARINT,
        }
    }

    /// The value of a raw wire value (a varint, or fixed-width bits) as the reflective decoder
    /// sees it: `None` for an unsigned 64-bit value above `i64::MAX`.
    #[inline]
    pub(super) fn value(self, raw: u64) -> Option<i64> {
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
pub(super) enum Expect {
    Int,
    Ints,
    Str,
    Strs,
    /// A singular `bytes` (or, in older schemas, `string`) field, read as bytes.
    Bytes,
    Msg,
    Msgs,
    StrMap,
}

impl Expect {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Expect::Int => "a singular integer or enum field",
            Expect::Ints => "a repeated integer or enum field",
            Expect::Str => "a singular string field",
            Expect::Strs => "a repeated string field",
            Expect::Bytes => "a singular bytes field",
            Expect::Msg => "a singular message field",
            Expect::Msgs => "a repeated message field",
            Expect::StrMap => "a map<string, string> field",
        }
    }
}

/// A field's type as a `.proto` file would write it.
pub(super) fn describe_field(field: &FieldDescriptor) -> String {
    pub(super) fn kind(kind: Kind) -> String {
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
pub(super) struct Slot<A> {
    pub(super) action: A,
    /// The field's integer type; unused for string and message fields.
    pub(super) int: IntKind,
}

/// Field numbers below this are looked up by index.
pub(super) const DENSE_FIELD_NUMBERS: u32 = 1024;

/// Field number → slot, for one message type.
#[derive(Debug, Clone)]
pub(super) struct Table<A> {
    pub(super) dense: Vec<Option<Slot<A>>>,
    /// Fields numbered `DENSE_FIELD_NUMBERS` or more.
    pub(super) sparse: Vec<(u32, Slot<A>)>,
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
    pub(super) fn insert(&mut self, number: u32, slot: Slot<A>) {
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

    /// Adds `other`'s slots (its numbers are not in this table).
    pub(super) fn extend(&mut self, other: &Table<A>) {
        for (number, slot) in other.dense.iter().enumerate() {
            if let Some(slot) = slot {
                self.insert(number as u32, *slot);
            }
        }
        for &(number, slot) in &other.sparse {
            self.insert(number, slot);
        }
    }

    #[inline]
    pub(super) fn get(&self, number: u32) -> Option<Slot<A>> {
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
pub(super) struct Resolved<A> {
    pub(super) message: Option<MessageDescriptor>,
    pub(super) table: Table<A>,
    pub(super) children: Vec<(A, MessageDescriptor)>,
}

impl<A: Copy + PartialEq> Resolved<A> {
    pub(super) fn child(&self, action: A) -> Option<&MessageDescriptor> {
        self.children
            .iter()
            .find(|(a, _)| *a == action)
            .map(|(_, m)| m)
    }
}

/// Looks up `wanted` fields `(name, expected type, action)` of `message` (none if the message
/// is absent) and checks their types.
pub(super) fn resolve<A: Copy + PartialEq>(
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
            Expect::Bytes => singular && (string || matches!(kind, Kind::Bytes)),
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

/// [`resolve`] for fields XLA has kept under one number for years (`wanted` gives it): a field
/// the schema does not name is planned under that number when the number is free in the
/// schema's message, or when the message itself is not in the schema. The schemas this tool
/// wrote into its archives before the cost model name none of the cost model's fields.
pub(super) fn resolve_known<A: Copy + PartialEq>(
    message: Option<&MessageDescriptor>,
    wanted: &[(&str, Expect, A, u32)],
) -> Result<Resolved<A>> {
    let named: Vec<(&str, Expect, A)> = wanted.iter().map(|&(n, e, a, _)| (n, e, a)).collect();
    let mut resolved = resolve(message, &named)?;
    for &(name, _, action, number) in wanted {
        let known = message
            .is_some_and(|m| m.get_field_by_name(name).is_some() || m.get_field(number).is_some());
        if !known {
            let int = IntKind::Int64;
            resolved.table.insert(number, Slot { action, int });
        }
    }
    Ok(resolved)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ModuleField {
    Name,
    Computations,
    Id,
    StackFrameIndex,
    FrontendAttributes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryField {
    Key,
    Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IndexField {
    FileNames,
    FunctionNames,
    FileLocations,
    StackFrames,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LocationField {
    FileNameId,
    FunctionNameId,
    Line,
    Column,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FrameField {
    FileLocationId,
    ParentFrameId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ComputationField {
    Instructions,
    Id,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InstructionField {
    Name,
    Opcode,
    Shape,
    Metadata,
    Id,
    OperandIds,
    ControlPredecessorIds,
    CalledComputationIds,
    ReplicaGroups,
    CollectiveDeviceList,
    IotaCollectiveDeviceList,
    MeshAxesReplicaGroupList,
    // What the cost model reads (docs/design.md, "Cost model").
    Window,
    ConvolutionDimensionNumbers,
    CustomCallTarget,
    DotDimensionNumbers,
    BackendConfig,
    PrecisionConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ShapeField {
    ElementType,
    Dimensions,
    TupleShapes,
    Layout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MetadataField {
    OpType,
    OpName,
    SourceFile,
    SourceLine,
    StackFrameId,
    SchedulingName,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DeviceListField {
    ReplicaGroups,
    IotaReplicaGroupList,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MeshGroupsField {
    Mesh,
    Axes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AxisRefField {
    MeshAxisIndex,
    SubAxisInfo,
}

/// The fields the fast decoder reads, by message (named after XLA's types; each table belongs
/// to the message type the schema gives the field that leads to it). Messages with a single
/// planned field use `()` as its action.
#[derive(Debug, Clone)]
pub(super) struct FieldPlan {
    pub(super) hlo_proto: Table<()>,
    pub(super) module: Table<ModuleField>,
    /// `HloModuleProto.frontend_attributes`, and its map's entries.
    pub(super) attributes: Table<()>,
    pub(super) attribute: Table<EntryField>,
    pub(super) stack_index: Table<IndexField>,
    pub(super) location: Table<LocationField>,
    pub(super) frame: Table<FrameField>,
    pub(super) computation: Table<ComputationField>,
    pub(super) instruction: Table<InstructionField>,
    pub(super) shape: Table<ShapeField>,
    pub(super) layout: Table<()>,
    pub(super) metadata: Table<MetadataField>,
    /// `HloInstructionProto.replica_groups` (a `ReplicaGroup`).
    pub(super) legacy_group: Table<()>,
    pub(super) device_list: Table<DeviceListField>,
    /// `CollectiveDeviceListProto.replica_groups` (a `ReplicaGroup`).
    pub(super) device_list_group: Table<()>,
    /// `CollectiveDeviceListProto.iota_replica_group_list`.
    pub(super) device_list_iota: Table<()>,
    /// `HloInstructionProto.iota_collective_device_list`.
    pub(super) iota_list: Table<()>,
    pub(super) mesh_groups: Table<MeshGroupsField>,
    pub(super) mesh: Table<()>,
    pub(super) mesh_axis: Table<()>,
    pub(super) axis_ref: Table<AxisRefField>,
    pub(super) sub_axis: Table<()>,
    /// `Window.dimensions`, `WindowDimension.size`.
    pub(super) window: Table<()>,
    pub(super) window_dimension: Table<()>,
    /// `ConvolutionDimensionNumbers.kernel_output_feature_dimension`.
    pub(super) convolution_dimensions: Table<()>,
    /// `DotDimensionNumbers.lhs_contracting_dimensions`.
    pub(super) dot_dimensions: Table<()>,
    /// `PrecisionConfig.operand_precision`.
    pub(super) precision: Table<()>,
}

/// `ReplicaGroup.replica_ids`.
pub(super) fn resolve_replica_group(message: Option<&MessageDescriptor>) -> Result<Resolved<()>> {
    resolve(message, &[("replica_ids", Expect::Ints, ())])
}

/// `IotaReplicaGroupListProto.num_devices_per_group`.
pub(super) fn resolve_iota_list(message: Option<&MessageDescriptor>) -> Result<Resolved<()>> {
    resolve(message, &[("num_devices_per_group", Expect::Int, ())])
}

impl FieldPlan {
    pub(super) fn resolve(hlo_proto: &MessageDescriptor) -> Result<FieldPlan> {
        use Expect::{Bytes, Int, Ints, Msg, Msgs, Str, StrMap, Strs};
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
        // The cost model's fields (docs/design.md, "Cost model").
        let cost = resolve_known(
            computation.child(ComputationField::Instructions),
            &[
                (
                    "control_predecessor_ids",
                    Ints,
                    InstructionField::ControlPredecessorIds,
                    37,
                ),
                ("window", Msg, InstructionField::Window, 15),
                (
                    "convolution_dimension_numbers",
                    Msg,
                    InstructionField::ConvolutionDimensionNumbers,
                    16,
                ),
                (
                    "custom_call_target",
                    Str,
                    InstructionField::CustomCallTarget,
                    28,
                ),
                (
                    "dot_dimension_numbers",
                    Msg,
                    InstructionField::DotDimensionNumbers,
                    30,
                ),
                ("backend_config", Bytes, InstructionField::BackendConfig, 43),
                (
                    "precision_config",
                    Msg,
                    InstructionField::PrecisionConfig,
                    51,
                ),
            ],
        )?;
        let mut instruction = instruction;
        instruction.table.extend(&cost.table);
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
        let window = resolve_known(
            cost.child(InstructionField::Window),
            &[("dimensions", Msgs, (), 1)],
        )?;
        let window_dimension = resolve_known(window.child(()), &[("size", Int, (), 1)])?;
        let convolution_dimensions = resolve_known(
            cost.child(InstructionField::ConvolutionDimensionNumbers),
            &[("kernel_output_feature_dimension", Int, (), 4)],
        )?;
        let dot_dimensions = resolve_known(
            cost.child(InstructionField::DotDimensionNumbers),
            &[("lhs_contracting_dimensions", Ints, (), 1)],
        )?;
        let precision = resolve_known(
            cost.child(InstructionField::PrecisionConfig),
            &[("operand_precision", Ints, (), 1)],
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
            window: window.table,
            window_dimension: window_dimension.table,
            convolution_dimensions: convolution_dimensions.table,
            dot_dimensions: dot_dimensions.table,
            precision: precision.table,
        })
    }
}
