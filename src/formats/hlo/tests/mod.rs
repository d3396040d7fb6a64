use super::*;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MapKey, Value};
use std::collections::HashMap;
use std::io::Read;
mod communication;
mod decoding;
mod real_dumps;
mod wire;
use decoding::*;
use real_dumps::*;

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

fn computation(s: &HloSchema, id: i64, name: &str, instrs: Vec<DynamicMessage>) -> DynamicMessage {
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
fn only_the_files_of_hlo_proto_are_compiled() {
    let files = vec![
        (
            "xla/service/hlo.proto".to_string(),
            b"syntax = \"proto3\";\npackage xla;\nimport \"xla/xla_data.proto\";\n\
              message HloProto { Shape s = 1; }\n"
                .to_vec(),
        ),
        (
            "xla/xla_data.proto".to_string(),
            b"syntax = \"proto3\";\npackage xla;\nmessage Shape { int64 x = 1; }\n".to_vec(),
        ),
        (
            "xla/unrelated.proto".to_string(),
            b"syntax = \"proto3\";\npackage xla;\nmessage M { int64 x = ; }\n".to_vec(),
        ),
    ];
    let set = compile_protos(&files).unwrap();
    let pool = DescriptorPool::decode(set.as_slice()).unwrap();
    assert!(pool.get_message_by_name("xla.HloProto").is_some());
    assert!(
        pool.get_message_by_name("xla.Shape").is_some(),
        "imports come along"
    );
    assert!(pool.get_message_by_name("xla.M").is_none());
    assert!(!schema::defines_hlo_proto(
        "package xla;\nmessage HloProtoX {}"
    ));
    assert!(!schema::defines_hlo_proto(
        "package other;\nmessage HloProto {}"
    ));
    assert!(schema::defines_hlo_proto(
        "package xla;\n\nmessage HloProto{\n}"
    ));
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
