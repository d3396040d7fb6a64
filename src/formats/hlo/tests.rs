use super::*;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MapKey, Value};
use std::collections::HashMap;
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
fn decode_with_both(s: &HloSchema, bytes: &[u8]) -> (Result<HloModuleInfo>, Result<HloModuleInfo>) {
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
