//! The plain data of a decoded module that the decoders share: field numbers, the parts of a
//! module as both decoders fill them, and what the analysis reads of an instruction's
//! communication and of the module's stack frames.

use std::borrow::Cow;

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Field numbers (XLA's; docs/design.md, "HLO fields"). Besides the schema's checks, only the reflective decoder and
// the tests read them.

#[cfg_attr(not(test), allow(dead_code))]
pub(super) mod field {
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
    pub const INSTR_CONTROL_PREDECESSOR_IDS: u32 = 37;
    pub const INSTR_CALLED_COMPUTATION_IDS: u32 = 38;
    pub const INSTR_REPLICA_GROUPS: u32 = 49;
    pub const INSTR_COLLECTIVE_DEVICE_LIST: u32 = 87;
    pub const INSTR_IOTA_COLLECTIVE_DEVICE_LIST: u32 = 92;
    pub const INSTR_MESH_AXES_REPLICA_GROUP_LIST: u32 = 93;
    pub const INSTR_WINDOW: u32 = 15;
    pub const INSTR_CONVOLUTION_DIMENSION_NUMBERS: u32 = 16;
    pub const INSTR_CUSTOM_CALL_TARGET: u32 = 28;
    pub const INSTR_DOT_DIMENSION_NUMBERS: u32 = 30;
    pub const INSTR_BACKEND_CONFIG: u32 = 43;
    pub const INSTR_PRECISION_CONFIG: u32 = 51;
    // xla.Window, xla.WindowDimension, xla.ConvolutionDimensionNumbers,
    // xla.DotDimensionNumbers, xla.PrecisionConfig
    pub const WINDOW_DIMENSIONS: u32 = 1;
    pub const WINDOW_DIMENSION_SIZE: u32 = 1;
    pub const CONV_KERNEL_OUTPUT_FEATURE: u32 = 4;
    pub const DOT_LHS_CONTRACTING: u32 = 1;
    pub const PRECISION_OPERANDS: u32 = 1;
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
pub(super) const PRIMITIVE_TUPLE: i32 = 13;
pub(super) const PRIMITIVE_BUFFER: i32 = 34;
/// `LayoutProto.memory_space` of host memory.
pub(super) const HOST_MEMORY_SPACE: i64 = 5;
/// Module frontend attribute that identifies a module across processes (design.md "Program ids").
pub(super) const FINGERPRINT_ATTRIBUTE: &str = "fingerprint_before_lhs";

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

// ---------------------------------------------------------------------------------------------
// Plain copies of the parts of a module the analysis needs; both decoders fill these.
//
// Strings borrow from the encoded module where the decoder can (`Cow::Borrowed`); an
// `HloModuleInfo` keeps those as spans of the module's bytes (`instruction.rs`).

/// A list of integers that keeps up to [`INLINE_INTS`] in place: most shapes, operand lists and
/// called computations of an instruction are that short, and then cost no allocation.
#[derive(Debug, Clone)]
pub(super) enum IntList {
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
    pub(super) fn push(&mut self, item: i64) {
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
    pub(super) fn as_slice(&self) -> &[i64] {
        match self {
            IntList::Inline { len, items } => &items[..usize::from(*len)],
            IntList::Heap(items) => items,
        }
    }
}

/// XLA's name of a primitive type (`PrimitiveType` in xla_data.proto).
fn type_name(t: i32) -> String {
    let name = match t {
        1 => "pred",
        2 => "s8",
        3 => "s16",
        4 => "s32",
        5 => "s64",
        6 => "u8",
        7 => "u16",
        8 => "u32",
        9 => "u64",
        10 => "f16",
        11 => "f32",
        12 => "f64",
        14 => "opaque",
        15 => "c64",
        16 => "bf16",
        17 => "token",
        18 => "c128",
        19 => "f8e5m2",
        20 => "f8e4m3fn",
        21 => "s4",
        22 => "u4",
        23 => "f8e4m3b11fnuz",
        24 => "f8e5m2fnuz",
        25 => "f8e4m3fnuz",
        26 => "s2",
        27 => "u2",
        _ => return format!("type{t}"),
    };
    name.to_string()
}

/// A shape as XLA prints it without layout: `f32[8,64]`, `(f32[2], s32[])`.
pub(super) fn shape_text(s: &Shape) -> String {
    if s.element_type == PRIMITIVE_TUPLE || !s.tuple_shapes.is_empty() {
        let parts: Vec<String> = s.tuple_shapes.iter().map(shape_text).collect();
        return format!("({})", parts.join(", "));
    }
    let dims: Vec<String> = s
        .dimensions
        .as_slice()
        .iter()
        .map(|d| d.to_string())
        .collect();
    format!("{}[{}]", type_name(s.element_type), dims.join(","))
}

#[derive(Debug, Default)]
pub(super) struct Shape {
    pub(super) element_type: i32,
    pub(super) dimensions: IntList,
    pub(super) tuple_shapes: Vec<Shape>,
    pub(super) memory_space: i64,
    /// Read from the dump (an instruction without a shape field leaves this false).
    pub(super) decoded: bool,
}

/// What the cost model reads of an instruction beyond its shape, operands and called
/// computations (docs/design.md, "Cost model").
#[derive(Debug, Default)]
pub(super) struct CostFields<'a> {
    /// `reduce-window`'s window sizes.
    pub(super) window: Vec<i64>,
    /// A convolution's `kernel_output_feature_dimension` (present dimension numbers mean 0
    /// until told: proto3 leaves a 0 out).
    pub(super) kernel_output_feature: Option<i64>,
    /// A dot's `lhs_contracting_dimensions`, when it has dimension numbers.
    pub(super) lhs_contracting: Option<Vec<i64>>,
    pub(super) target: Cow<'a, str>,
    pub(super) backend_config: Cow<'a, [u8]>,
    /// `PrecisionConfig.operand_precision` (2: HIGHEST).
    pub(super) precision: Vec<i64>,
}

/// The replica groups of a collective, in whichever of XLA's encodings the dump uses.
#[derive(Debug, Default)]
pub(super) struct DeviceGroups {
    /// Sizes of the explicit groups: `collective_device_list.replica_groups` (87.1), else the
    /// older `replica_groups` (49).
    pub(super) explicit: Vec<usize>,
    /// `num_devices_per_group` of an iota list: `collective_device_list.iota_replica_group_list`
    /// (87.2) or `iota_collective_device_list` (92); 0 if absent.
    pub(super) iota: i64,
    /// `mesh_axes_replica_group_list` (93).
    pub(super) mesh: Option<Box<MeshGroups>>,
}

/// Replica groups given as the devices that vary along some axes of a mesh.
#[derive(Debug, Default)]
pub(super) struct MeshGroups {
    /// Sizes of the mesh's axes.
    pub(super) axis_sizes: Vec<i64>,
    /// The axes the groups span: (index into `axis_sizes`, size of the sub-axis if only a part).
    pub(super) axes: Vec<(i64, Option<i64>)>,
}

impl DeviceGroups {
    /// Devices per group; errors when groups differ in size or none are given.
    pub(super) fn size(&self) -> Result<i64> {
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
pub(super) struct Instruction<'a> {
    pub(super) name: Cow<'a, str>,
    pub(super) opcode: Cow<'a, str>,
    pub(super) shape: Shape,
    pub(super) id: i64,
    pub(super) operand_ids: IntList,
    /// Instructions that must run before it though it reads nothing of theirs (by id).
    pub(super) control_predecessor_ids: IntList,
    pub(super) called_computation_ids: IntList,
    pub(super) groups: DeviceGroups,
    pub(super) op_type: Cow<'a, str>,
    pub(super) op_name: Cow<'a, str>,
    pub(super) source_file: Cow<'a, str>,
    pub(super) source_line: i64,
    pub(super) stack_frame_id: i64,
    pub(super) scheduling_name: Cow<'a, str>,
    pub(super) cost: CostFields<'a>,
}

pub(super) struct Computation<'a> {
    pub(super) id: i64,
    pub(super) instructions: Vec<Instruction<'a>>,
}

/// The parts of an `xla.HloModuleProto` that the analysis reads.
#[derive(Default)]
pub(super) struct ModuleParts<'a> {
    pub(super) name: String,
    pub(super) id: i64,
    pub(super) computations: Vec<Computation<'a>>,
    pub(super) stack_frames: StackFrameIndex,
    pub(super) fingerprint: Option<String>,
}
