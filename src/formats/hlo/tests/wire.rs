use super::*;

// --- wire-level cases, written by hand ------------------------------------------------

pub(super) fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn key(number: u32, wire: u8, out: &mut Vec<u8>) {
    varint(u64::from(number) << 3 | u64::from(wire), out);
}

/// A length-delimited field.
pub(super) fn len_field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    key(number, WIRE_LEN, &mut out);
    varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

pub(super) fn varint_field(number: u32, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    key(number, WIRE_VARINT, &mut out);
    varint(v, &mut out);
    out
}

pub(super) fn packed(number: u32, values: &[u64]) -> Vec<u8> {
    let mut payload = Vec::new();
    for &v in values {
        varint(v, &mut payload);
    }
    len_field(number, &payload)
}

/// `HloProto` holding one module with one computation of the given encoded instructions.
pub(super) fn wrap_instructions(instructions: &[Vec<u8>]) -> Vec<u8> {
    let mut computation = varint_field(field::COMPUTATION_ID, 1);
    for i in instructions {
        computation.extend(len_field(field::COMPUTATION_INSTRUCTIONS, i));
    }
    let mut module = len_field(field::MODULE_NAME, b"jit_wire");
    module.extend(len_field(field::MODULE_COMPUTATIONS, &computation));
    len_field(field::HLO_MODULE, &module)
}

pub(super) fn wire_instruction(name: &str, opcode: &str, id: u64, rest: &[Vec<u8>]) -> Vec<u8> {
    let mut out = len_field(field::INSTR_NAME, name.as_bytes());
    out.extend(len_field(field::INSTR_OPCODE, opcode.as_bytes()));
    out.extend(varint_field(field::INSTR_ID, id));
    for r in rest {
        out.extend_from_slice(r);
    }
    out
}

pub(super) fn f32_shape(dims: &[u64]) -> Vec<u8> {
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
        (ar.op_name(), ar.op_type(), ar.source_line),
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
    assert_eq!(new.instruction("ar").unwrap().scheduling_name(), "y");

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
    assert_eq!((ar.op_name(), ar.scheduling_name()), ("x", ""));
}

/// A module with a bit of everything the decoder reads, encoded.
pub(super) fn rich_module(s: &HloSchema) -> Vec<u8> {
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

/// Taking a module for a dump that "decodes alike" must give what decoding that dump gives.
mod decode_alike {
    use super::*;
    use proptest::prelude::*;
    use std::sync::{Arc, OnceLock};

    const CONFIG: &str = r#"{"kind":"__triton_gemm","block_m":"128","num_warps":"4"}"#;

    fn schema() -> &'static HloSchema {
        static SCHEMA: OnceLock<HloSchema> = OnceLock::new();
        SCHEMA.get_or_init(builtin)
    }

    /// The rich module with a backend config (a field nothing reads) on its first instruction.
    fn with_config() -> &'static [u8] {
        static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
        BYTES.get_or_init(|| {
            let s = schema();
            let mut proto = DynamicMessage::decode(s.hlo_proto.clone(), &rich_module(s)[..])
                .expect("the rich module decodes");
            let Some(Value::Message(module)) = proto.get_field_by_name_mut("hlo_module") else {
                panic!("no module")
            };
            let Some(Value::List(computations)) = module.get_field_by_name_mut("computations")
            else {
                panic!("no computations")
            };
            let Value::Message(computation) = &mut computations[0] else {
                panic!("not a computation")
            };
            let Some(Value::List(instructions)) = computation.get_field_by_name_mut("instructions")
            else {
                panic!("no instructions")
            };
            let Value::Message(first) = &mut instructions[0] else {
                panic!("not an instruction")
            };
            // Field 43 (XLA's `backend_config`), which the project's trimmed schema lacks: an
            // unknown field, kept through the round trip.
            let mut raw = first.encode_to_vec();
            raw.extend_from_slice(&[0xda, 0x02, CONFIG.len() as u8]); // key (43, LEN), length
            raw.extend_from_slice(CONFIG.as_bytes());
            *first =
                DynamicMessage::decode(prost_reflect::ReflectMessage::descriptor(first), &raw[..])
                    .unwrap();
            proto.encode_to_vec()
        })
    }

    fn base() -> &'static Arc<HloModuleInfo> {
        static BASE: OnceLock<Arc<HloModuleInfo>> = OnceLock::new();
        BASE.get_or_init(|| Arc::new(decode_hlo(schema(), with_config()).unwrap()))
    }

    fn at_of(needle: &[u8]) -> usize {
        with_config()
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("in the dump")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn anywhere(edits in proptest::collection::vec((0usize..4096, any::<u8>()), 1..4)) {
            let mut bytes = with_config().to_vec();
            for (at, byte) in edits {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            if let Some(twin) = decode_like(&base(), schema(), &bytes) {
                let decoded = decode_hlo(schema(), &bytes);
                prop_assert!(decoded.is_ok(), "taken as alike, but does not decode");
                prop_assert_eq!(&*twin, &decoded.unwrap());
            }
        }

        #[test]
        fn inside_the_backend_config(
            edits in proptest::collection::vec((0usize..CONFIG.len(), 0x20u8..0x7f), 1..8)
        ) {
            let start = at_of(CONFIG.as_bytes());
            let mut bytes = with_config().to_vec();
            for (at, byte) in edits {
                bytes[start + at] = byte;
            }
            let twin = decode_like(&base(), schema(), &bytes);
            prop_assert!(twin.as_ref().is_some_and(|t| Arc::ptr_eq(t, base())));
            prop_assert_eq!(&**base(), &decode_hlo(schema(), &bytes).unwrap());
        }

        #[test]
        fn inside_the_fingerprint(a in b'a'..=b'z', b in b'a'..=b'z') {
            // The rich module's fingerprint is "fp".
            let start = at_of(b"\x12\x02fp") + 2;
            let mut bytes = with_config().to_vec();
            bytes[start] = a;
            bytes[start + 1] = b;
            let decoded = decode_hlo(schema(), &bytes).unwrap();
            let twin = decode_like(&base(), schema(), &bytes).expect("alike but the fingerprint");
            let fingerprint = format!("{}{}", a as char, b as char);
            prop_assert_eq!(decoded.fingerprint.as_deref(), Some(&*fingerprint));
            prop_assert_eq!(&*twin, &decoded);
        }
    }
}
