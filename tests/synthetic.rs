//! A small nsys-jax archive built from scratch (trace.parquet, thread metadata, push/pop
//! trace, HLO dump), analysed by the real binary: exact numbers worked out by hand, and golden
//! terminal output. Runs without any external fixture.

use crate::common::*;
use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use nsys_jax_pipe::api::hlo;
use prost_reflect::{DynamicMessage, MapKey, Value};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

const FINGERPRINT: &str = "0123456789abcdef0123456789abcdef";

fn parquet(batch: &RecordBatch) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    buf
}

pub(crate) struct Range {
    pub name: &'static str,
    pub start: i64,
    pub dur: i64,
    pub tid: i64,
    pub ops: i64,
    pub id: i64,
    pub parent: Option<i64>,
    pub stack: String,
}

/// The projected NVTX ranges (classic layout), ns.
fn trace() -> Vec<u8> {
    let mut r: Vec<Range> = Vec::new();
    let mut push = |name, start, dur, ops, id, parent: Option<i64>, stack: String| {
        r.push(Range {
            name,
            start,
            dur,
            tid: 101,
            ops,
            id,
            parent,
            stack,
        })
    };
    // An edge effect: a thunk that started before the first module.
    push(
        "TSL:Thunk:#hlo_op=fusion.9#",
        10,
        5,
        1,
        1,
        None,
        ":1".into(),
    );
    // An autotuning execution (no program id).
    push(
        "TSL:XlaModule:#hlo_module=gemm_fusion_dot.1#",
        500,
        50,
        1,
        2,
        None,
        ":2".into(),
    );
    push(
        "TSL:Thunk:#hlo_op=gemm#",
        500,
        50,
        1,
        3,
        Some(2),
        ":2:3".into(),
    );
    for e in 0..5i64 {
        let b = 1_000_000 * (e + 1);
        let m = 10 * e + 11;
        let last = e == 4; // the capture stopped inside this one
        let dur = if last { 300 } else { 1000 + 10 * e };
        push(
            "TSL:XlaModule:#hlo_module=jit_step,program_id=5#",
            b,
            dur,
            if last { 1 } else { 3 },
            m,
            None,
            format!(":{m}"),
        );
        push(
            "TSL:Thunk:#name=jit(step)/mul,hlo_op=fusion.1#",
            b,
            300,
            1,
            m + 1,
            Some(m),
            format!(":{m}:{}", m + 1),
        );
        if last {
            continue;
        }
        push(
            "TSL:Thunk:#name=jit(step)/psum[axes=(0,)],hlo_op=all-reduce-start#",
            b + 200,
            400,
            1,
            m + 2,
            Some(m),
            format!(":{m}:{}", m + 2),
        );
        push(
            "NCCL:ncclAllReduce",
            b + 200,
            400,
            1,
            m + 3,
            Some(m + 2),
            format!(":{m}:{}:{}", m + 2, m + 3),
        );
        push(
            "TSL:Thunk:#hlo_op=fusion.2#",
            b + 500,
            500,
            1,
            m + 4,
            Some(m),
            format!(":{m}:{}", m + 4),
        );
    }
    trace_of(&r)
}

/// The projected trace of ranges `r` (classic layout), as parquet.
pub(crate) fn trace_of(r: &[Range]) -> Vec<u8> {
    let n = r.len();
    let batch = RecordBatch::try_from_iter(vec![
        (
            "Name",
            Arc::new(StringArray::from_iter_values(r.iter().map(|x| x.name))) as ArrayRef,
        ),
        (
            "Projected Start",
            Arc::new(Int64Array::from_iter_values(r.iter().map(|x| x.start))),
        ),
        (
            "Projected Duration",
            Arc::new(Int64Array::from_iter_values(r.iter().map(|x| x.dur))),
        ),
        (
            "Orig Start",
            Arc::new(Float64Array::from_iter_values(
                r.iter().map(|x| x.start as f64 - 100.0),
            )),
        ),
        (
            "Orig Duration",
            Arc::new(Float64Array::from_iter_values(
                r.iter().map(|x| x.dur as f64),
            )),
        ),
        ("Style", Arc::new(StringArray::from(vec!["PushPop"; n]))),
        ("PID", Arc::new(Int64Array::from(vec![100; n]))),
        (
            "TID",
            Arc::new(Int64Array::from_iter_values(r.iter().map(|x| x.tid))),
        ),
        (
            "NumGPUOps",
            Arc::new(Int64Array::from_iter_values(r.iter().map(|x| x.ops))),
        ),
        (
            "Lvl",
            Arc::new(Float64Array::from_iter_values(
                r.iter().map(|x| (x.stack.matches(':').count() - 1) as f64),
            )),
        ),
        ("NumChild", Arc::new(Int64Array::from(vec![0; n]))),
        (
            "RangeId",
            Arc::new(Float64Array::from_iter_values(
                r.iter().map(|x| x.id as f64),
            )),
        ),
        (
            "ParentId",
            Arc::new(
                r.iter()
                    .map(|x| x.parent.map(|p| p as f64))
                    .collect::<Float64Array>(),
            ),
        ),
        (
            "RangeStack",
            Arc::new(StringArray::from_iter_values(
                r.iter().map(|x| x.stack.as_str()),
            )),
        ),
        ("Rank", Arc::new(Int64Array::from(vec![0; n]))),
    ])
    .unwrap();
    parquet(&batch)
}

fn thread_metadata() -> Vec<u8> {
    let batch = RecordBatch::try_from_iter(vec![
        (
            "Name",
            Arc::new(StringArray::from(vec![
                "python",
                "XlaLauncher:#global=3,local=0,process=0,slice=0#",
            ])) as ArrayRef,
        ),
        ("Priority", Arc::new(Int64Array::from(vec![20, 0]))),
        ("PID", Arc::new(Int64Array::from(vec![100, 100]))),
        ("TID", Arc::new(Int64Array::from(vec![100, 101]))),
    ])
    .unwrap();
    parquet(&batch)
}

/// CPU push/pop ranges of one compilation (main thread), as the csv.xz nsys-jax wrote.
fn pushpop_csv_xz() -> Vec<u8> {
    let csv = "\
Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),Name,PID,TID,Lvl,NumChild,RangeId,ParentId,RangeStack,NameTree
0,1000,1000,800,200,\"TSL:XlaCompile:#module=jit_step,program_id=5#\",100,100,0,2,1,,:1,\"TSL:XlaCompile:#module=jit_step,program_id=5#\"
100,700,600,200,400,\"TSL:XlaCompileBackend:#module=jit_step,program_id=5#\",100,100,1,1,2,1,:1:2,\"--TSL:XlaCompileBackend:#module=jit_step,program_id=5#\"
150,350,200,0,200,\"TSL:XlaPass:#name=algsimp,module=jit_step,program_id=5#\",100,100,2,0,3,2,:1:2:3,\"----TSL:XlaPass:#name=algsimp,module=jit_step,program_id=5#\"
750,950,200,0,200,\"TSL:XlaBufferAssignment:#module=jit_step,program_id=5#\",100,100,1,0,4,1,:1:4,\"--TSL:XlaBufferAssignment:#module=jit_step,program_id=5#\"
";
    let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 6);
    enc.write_all(csv.as_bytes()).unwrap();
    enc.finish().unwrap()
}

/// The after-optimizations HLO of jit_step: a parameter, two fusions and an all-reduce over
/// two replicas of f32[1024] (4096 bytes).
fn hlo_dump() -> Vec<u8> {
    let set = hlo::compile_protos(&hlo::builtin_proto_sources()).unwrap();
    let schema = hlo::HloSchema::from_descriptor_set(&set).unwrap();
    let pool = schema.pool();
    let msg = |name: &str| DynamicMessage::new(pool.get_message_by_name(name).unwrap());
    let shape = || {
        let mut s = msg("xla.ShapeProto");
        s.set_field_by_name("element_type", Value::EnumNumber(11));
        s.set_field_by_name("dimensions", Value::List(vec![Value::I64(1024)]));
        Value::Message(s)
    };
    let inst = |name: &str, opcode: &str, id: i64, operands: &[i64], groups: bool| {
        let mut i = msg("xla.HloInstructionProto");
        i.set_field_by_name("name", Value::String(name.into()));
        i.set_field_by_name("opcode", Value::String(opcode.into()));
        i.set_field_by_name("id", Value::I64(id));
        i.set_field_by_name("shape", shape());
        i.set_field_by_name(
            "operand_ids",
            Value::List(operands.iter().map(|&o| Value::I64(o)).collect()),
        );
        if groups {
            let mut g = msg("xla.ReplicaGroup");
            g.set_field_by_name(
                "replica_ids",
                Value::List(vec![Value::I64(0), Value::I64(1)]),
            );
            i.set_field_by_name("replica_groups", Value::List(vec![Value::Message(g)]));
        }
        Value::Message(i)
    };
    let mut comp = msg("xla.HloComputationProto");
    comp.set_field_by_name("name", Value::String("main".into()));
    comp.set_field_by_name("id", Value::I64(1));
    comp.set_field_by_name(
        "instructions",
        Value::List(vec![
            inst("p0", "parameter", 1, &[], false),
            inst("fusion.1", "fusion", 2, &[1], false),
            inst("all-reduce-start", "all-reduce-start", 3, &[2], true),
            inst("fusion.2", "fusion", 4, &[3], false),
        ]),
    );
    let mut attrs = msg("xla.FrontendAttributes");
    attrs.set_field_by_name(
        "map",
        Value::Map(
            [(
                MapKey::String("fingerprint_before_lhs".into()),
                Value::String(FINGERPRINT.into()),
            )]
            .into(),
        ),
    );
    let mut module = msg("xla.HloModuleProto");
    module.set_field_by_name("name", Value::String("jit_step".into()));
    module.set_field_by_name("id", Value::I64(5));
    module.set_field_by_name("entry_computation_id", Value::I64(1));
    module.set_field_by_name("computations", Value::List(vec![Value::Message(comp)]));
    module.set_field_by_name("frontend_attributes", Value::Message(attrs));
    let mut proto = msg("xla.HloProto");
    proto.set_field_by_name("hlo_module", Value::Message(module));
    let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 6);
    enc.write_all(&prost::Message::encode_to_vec(&proto))
        .unwrap();
    enc.finish().unwrap()
}

fn write_archive(path: &Path) {
    write_archive_with(path, trace())
}

/// The synthetic archive with the projected trace `trace` (of `jit_step`, program 5, whose
/// dump has `fusion.1`, `fusion.2` and `all-reduce-start`, launched from thread 101).
pub(crate) fn write_archive_with(path: &Path, trace: Vec<u8>) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default();
    for (name, bytes) in [
        ("nvtx_gpu_proj_trace/trace.parquet", trace),
        ("thread-metadata.parquet", thread_metadata()),
        ("report_nvtx_pushpop_trace.csv.xz", pushpop_csv_xz()),
        (
            "dump/module_0005.jit_step.sm_9.0_gpu_after_optimizations.hlo.pb.xz",
            hlo_dump(),
        ),
    ] {
        z.start_file(name, opts).unwrap();
        z.write_all(&bytes).unwrap();
    }
    z.finish().unwrap();
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 + 1e-9 * b.abs()
}

#[test]
fn synthetic_archive_gives_the_numbers_worked_out_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("synthetic.zip");
    write_archive(&archive);
    let out = tmp.path().join("out");
    let o = analyze(&tmp.path().join("cache"), &out, &[], &[archive.clone()]);
    assert_ok(&o);

    let s = json(&out.join("summary.json"));
    let modules = s["modules"].as_array().unwrap();
    assert_eq!(
        modules.len(),
        1,
        "the autotuning execution is not a module of the summary: {s}"
    );
    let m = &modules[0];
    assert_eq!(m["program_id"], FINGERPRINT);
    assert_eq!(m["name"], "jit_step");
    // 5 executions: the last is dropped (capture stopped inside it), 0 is compilation warm-up,
    // 1 is communication warm-up: 2 and 3 remain.
    assert_eq!(m["executions"], 2);
    assert_eq!(m["thunks_mean"], 3.0);
    assert_eq!(m["thunks_std"], 0.0);
    assert!(close(m["duration_ms_sum"].as_f64().unwrap(), 0.00205));
    assert!(close(m["duration_ms_mean"].as_f64().unwrap(), 0.001025));
    assert!(close(
        m["duration_ms_std"].as_f64().unwrap(),
        0.00001 / 2f64.sqrt()
    ));
    assert_eq!(m["duration_percent"], 100.0);
    assert_eq!(m["wait_ms_mean"], 0.0, "one device: no spread");
    let c = &s["compilation"];
    assert!(close(c["total_ms"].as_f64().unwrap(), 0.001));
    let ranges: Vec<(&str, f64)> = c["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["non_child_ms"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ranges.len(), 4, "{ranges:?}");
    assert!(
        ranges[0].0.starts_with("XlaCompileBackend") && close(ranges[0].1, 0.0004),
        "{ranges:?}"
    );

    let comm = json(&out.join("communication.json"));
    let bw = comm["bandwidth"].as_array().unwrap();
    assert_eq!(bw.len(), 1);
    assert_eq!(bw[0]["collective"], "all-reduce");
    assert_eq!(bw[0]["message_size_bytes"], 4096);
    assert_eq!(bw[0]["instances"], 2);
    // algbw = 4096 B / 400 ns; bus factor 2(n-1)/n = 1 for n = 2.
    assert!(close(bw[0]["bus_bandwidth_gbps"].as_f64().unwrap(), 10.24));
    assert_eq!(bw[0]["stderr_gbps"], 0.0);
    // 100 ns overlap with each fusion: half of the 400 ns is hidden.
    assert_eq!(comm["hidden_fraction"]["all-reduce"], 0.5);
    assert_eq!(comm["overall_hidden_fraction"], 0.5);

    let comp = json(&out.join("compilation.json"));
    let e = &comp["compilations"][0];
    assert_eq!(e["module"], "jit_step");
    assert_eq!(e["program_id"], 5);
    assert!(close(e["wall_s"].as_f64().unwrap(), 1e-6));

    // Golden terminal output (the last line carries timings).
    let stdout = String::from_utf8_lossy(&o.stdout);
    let text: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with("wrote ") && !l.starts_with("report: "))
        .collect();
    insta::assert_snapshot!("synthetic_analyze_stdout", text.join("\n"));
}
