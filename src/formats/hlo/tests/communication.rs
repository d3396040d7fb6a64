use super::*;

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
    let names: Vec<&str> = info.instructions.iter().map(|i| i.name()).collect();
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
    assert_eq!(dot.op_type(), "dot_general");
    assert_eq!(dot.op_name(), "jit(f)/dot_general");
    assert_eq!((dot.source_file(), dot.source_line), ("/a/model.py", 12));
    assert_eq!(dot.scheduling_name(), "dot.3");
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
    assert_eq!(neg.opcode(), "negate");
    assert!(neg.communication.is_none());
}
