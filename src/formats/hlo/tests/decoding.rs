use super::*;

/// Decodes through every path (reflective: parallel split and whole message; planned: one
/// thread and parallel) and checks they agree.
pub(super) fn decode_both_ways(s: &HloSchema, bytes: &[u8]) -> HloModuleInfo {
    let split = decode_split(s, bytes).expect("split applies").unwrap();
    let none = bytes::Bytes::new();
    let split = module_info(s, &none, split, true).unwrap();
    let whole = module_info(s, &none, decode_whole(s, bytes).unwrap(), false).unwrap();
    assert_eq!(split, whole);
    for parallel in [false, true] {
        let shared = bytes::Bytes::copy_from_slice(bytes);
        let planned = decode_planned(&s.plan, &shared, parallel).unwrap();
        let planned = module_info(s, &shared, planned, parallel);
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
