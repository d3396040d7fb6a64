use super::*;

// --- real dumps -----------------------------------------------------------------------

pub(super) fn read_zip_member(archive: &mut zip::ZipArchive<std::fs::File>, name: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    archive
        .by_name(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .read_to_end(&mut bytes)
        .unwrap();
    bytes
}

pub(super) fn unxz(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    liblzma::read::XzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

pub(super) fn collectives(info: &HloModuleInfo) -> HashMap<String, Vec<&CommunicationInfo>> {
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
pub(super) fn pax_archive() -> Option<(zip::ZipArchive<std::fs::File>, HloSchema)> {
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
            .any(|i| !i.op_name().is_empty())
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
            .any(|i| !i.scheduling_name().is_empty())
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
pub(super) fn decode_with_both(
    s: &HloSchema,
    bytes: &[u8],
) -> (Result<HloModuleInfo>, Result<HloModuleInfo>) {
    let fast = decode_hlo(s, bytes);
    let reflect = decode_hlo_reflect(s, bytes);
    if let (Ok(fast), Ok(reflect)) = (&fast, &reflect) {
        assert_eq!(fast, reflect);
    }
    (fast, reflect)
}

/// Both decoders succeed and agree.
pub(super) fn decode_agreeing(s: &HloSchema, bytes: &[u8]) -> HloModuleInfo {
    match decode_with_both(s, bytes) {
        (Ok(info), Ok(_)) => info,
        (fast, reflect) => panic!("fast: {fast:?}\nreflective: {reflect:?}"),
    }
}

/// Both decoders fail; returns the fast decoder's message.
pub(super) fn decode_failing(s: &HloSchema, bytes: &[u8]) -> String {
    match decode_with_both(s, bytes) {
        (Err(fast), Err(_)) => format!("{fast:#}"),
        (fast, reflect) => panic!("fast: {fast:?}\nreflective: {reflect:?}"),
    }
}

/// The best of `runs` timings of `f`, in milliseconds (not counting dropping its result).
pub(super) fn best_ms<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
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
    let bytes = bytes::Bytes::from(step_fn.expect("the step function's dump"));
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let s = &archive_schema;
    let planned_1 = best_ms(10, || {
        module_info(
            s,
            &bytes,
            decode_planned(&s.plan, &bytes, false).unwrap(),
            false,
        )
        .unwrap()
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

/// pax rank 3's training-step dump differs from rank 0's only in the autotuner's choices
/// (backend configs) and the module fingerprint: it decodes as rank 0's module with rank 3's
/// fingerprint, and a dump that differs in a field that is read does not.
#[test]
fn a_dump_that_differs_only_in_unread_fields_decodes_as_its_twin() {
    let Some((mut archive, schema)) = pax_archive() else {
        return;
    };
    let fixtures = crate::testutil::fixtures_dir().expect("pax_archive found them");
    let path = fixtures.join("jaxtoolbox-pax-fsdp4-4proc/proc3.zip");
    let mut rank3 = zip::ZipArchive::new(std::fs::File::open(&path).unwrap()).unwrap();
    let member = "dump/module_0040.pjit__wrapped_step_fn.sm_8.0_gpu_after_optimizations.hlo.pb.xz";
    let bytes0 = unxz(&read_zip_member(&mut archive, member));
    let bytes3 = unxz(&read_zip_member(&mut rank3, member));
    assert_ne!(bytes0, bytes3);
    let module0 = std::sync::Arc::new(decode_hlo(&schema, &bytes0).unwrap());
    let module3 = decode_hlo(&schema, &bytes3).unwrap();
    assert_ne!(module0.fingerprint, module3.fingerprint);
    let twin = decode_like(&module0, &schema, &bytes3).expect("decodes alike");
    assert_eq!(*twin, module3);
    // The same bytes are the same module, shared.
    let same = decode_like(&module0, &schema, &bytes0).unwrap();
    assert!(std::sync::Arc::ptr_eq(&same, &module0));
    // An instruction's name changed (same length): decoded apart.
    let name = module3.instructions[module3.instructions.len() / 2]
        .name()
        .to_string();
    let at = bytes3
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .unwrap();
    let mut renamed = bytes3.clone();
    renamed[at] = if renamed[at] == b'z' { b'y' } else { b'z' };
    assert!(decode_like(&module0, &schema, &renamed).is_none());
}
