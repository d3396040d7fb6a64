//! `analyze --frames`: the run's frames as parquet files shaped as nsys-jax's, read back with
//! arrow and checked against the frames' meaning and against nsys-jax's notebook on the pax
//! archives.

use crate::common::*;
use arrow::array::{
    Array, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use arrow::datatypes::{Float64Type, Int32Type, Int64Type};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn strs<'a>(b: &'a RecordBatch, c: &str) -> &'a StringArray {
    b.column_by_name(c).unwrap().as_string::<i32>()
}
fn i32s<'a>(b: &'a RecordBatch, c: &str) -> &'a Int32Array {
    b.column_by_name(c).unwrap().as_primitive::<Int32Type>()
}
fn i64s<'a>(b: &'a RecordBatch, c: &str) -> &'a Int64Array {
    b.column_by_name(c).unwrap().as_primitive::<Int64Type>()
}
fn f64s<'a>(b: &'a RecordBatch, c: &str) -> &'a Float64Array {
    b.column_by_name(c).unwrap().as_primitive::<Float64Type>()
}
fn bools<'a>(b: &'a RecordBatch, c: &str) -> &'a BooleanArray {
    b.column_by_name(c).unwrap().as_boolean()
}

fn read(path: &Path) -> (RecordBatch, serde_json::Value) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(bytes),
    )
    .unwrap();
    let pandas = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == "pandas"))
        .and_then(|k| k.value.clone())
        .expect("pandas metadata");
    let schema = builder.schema().clone();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    (
        arrow::compute::concat_batches(&schema, &batches).unwrap(),
        serde_json::from_str(&pandas).unwrap(),
    )
}

fn frames(cache: &Path, dir: &Path, inputs: &[PathBuf]) -> String {
    let mut args: Vec<std::ffi::OsString> = vec![
        "analyze".into(),
        "--no-analysis".into(),
        "--cache-dir".into(),
        cache.into(),
        "--frames".into(),
        dir.into(),
        "-o".into(),
        dir.with_file_name("out").into(),
    ];
    args.extend(inputs.iter().map(|p| p.into()));
    let o = run(&os(&args));
    assert_ok(&o);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn example_frames_have_nsys_jax_columns_and_indexes_and_are_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("frames");
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let out = frames(
        &tmp.path().join("cache"),
        &dir,
        std::slice::from_ref(&example),
    );
    assert!(out.contains("frames to"), "{out}");
    // --no-analysis: no output folder.
    assert!(!dir.with_file_name("out").exists());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "communication.parquet",
            "compile.parquet",
            "module.parquet",
            "thunk.parquet"
        ]
    );
    let (module, meta) = read(&dir.join("module.parquet"));
    assert_eq!(
        meta["index_columns"],
        serde_json::json!(["ProgramId", "ProgramExecution", "Device"])
    );
    for c in ["Name", "ProjStartMs", "ProjDurMs", "NumThunks"] {
        assert!(module.column_by_name(c).is_some(), "module has no {c}");
    }
    // Sorted by its index; the thunks of each execution counted.
    let prog = strs(&module, "ProgramId");
    let exec = i32s(&module, "ProgramExecution");
    let dev = i32s(&module, "Device");
    for i in 1..module.num_rows() {
        let a = (prog.value(i - 1), exec.value(i - 1), dev.value(i - 1));
        let b = (prog.value(i), exec.value(i), dev.value(i));
        assert!(a < b, "module rows out of order at {i}: {a:?} {b:?}");
    }
    let (thunk, meta) = read(&dir.join("thunk.parquet"));
    assert_eq!(
        meta["index_columns"],
        serde_json::json!([
            "ProgramId",
            "ProgramExecution",
            "Name",
            "ThunkExecution",
            "Device"
        ])
    );
    let mut per_exec: BTreeMap<(String, i32, i32), i32> = BTreeMap::new();
    let tp = strs(&thunk, "ProgramId");
    let te = i32s(&thunk, "ProgramExecution");
    let td = i32s(&thunk, "Device");
    for i in 0..thunk.num_rows() {
        *per_exec
            .entry((tp.value(i).to_string(), te.value(i), td.value(i)))
            .or_default() += 1;
    }
    let nthunks = i32s(&module, "NumThunks");
    for i in 0..module.num_rows() {
        let k = (prog.value(i).to_string(), exec.value(i), dev.value(i));
        assert_eq!(
            per_exec.get(&k).copied().unwrap_or(0),
            nthunks.value(i),
            "{k:?}"
        );
    }
    // Communication: the communication thunks, with sizes and bandwidths.
    let (comm, _) = read(&dir.join("communication.parquet"));
    let flags = bools(&thunk, "Communication");
    assert_eq!(comm.num_rows(), flags.true_count());
    assert!(comm.num_rows() > 0);
    let bw = f64s(&comm, "BusBandwidthGBPerSec");
    assert!((0..bw.len()).all(|i| bw.is_valid(i) && bw.value(i) > 0.0));
    // Compile: the example's capture started after compilation: the frame is empty, with
    // its columns.
    let (compile, meta) = read(&dir.join("compile.parquet"));
    assert_eq!(
        meta["index_columns"],
        serde_json::json!(["ProfileName", "RangeId"])
    );
    assert_eq!(compile.num_rows(), 0);
    for c in ["Name", "StartMs", "DurMs", "ProgramId", "ProgramName"] {
        assert!(compile.column_by_name(c).is_some(), "compile has no {c}");
    }
    // Again: read back from the cache, the same bytes.
    let before = std::fs::read(dir.join("thunk.parquet")).unwrap();
    let out = frames(&tmp.path().join("cache"), &dir, &[example]);
    assert!(out.contains("0 nodes executed"), "{out}");
    assert_eq!(before, std::fs::read(dir.join("thunk.parquet")).unwrap());
}

#[test]
fn no_analysis_alone_is_refused_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let out = tmp.path().join("out");
    let o = analyze(
        &tmp.path().join("cache"),
        &out,
        &["--no-analysis"],
        &[example],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--no-analysis") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
#[cfg_attr(not(test_fixtures), ignore = "needs the shared fixtures")]
fn pax_frames_hold_the_notebook_rows() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("frames");
    frames(&tmp.path().join("cache"), &dir, &pax_archives(&f));
    let reference = f.join("reference/pax4-notebook/notebook.json.xz");
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut liblzma::read::XzDecoder::new(std::fs::File::open(&reference).unwrap()),
        &mut text,
    )
    .unwrap();
    let nb: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Every steady module row of the notebook is a row here, with the same duration (the
    // frames are neither filtered nor aligned; durations do not depend on either).
    let (module, _) = read(&dir.join("module.parquet"));
    let prog = strs(&module, "ProgramId");
    let exec = i32s(&module, "ProgramExecution");
    let dev = i32s(&module, "Device");
    let dur = f64s(&module, "ProjDurMs");
    let rows: BTreeMap<(String, i64, i64), f64> = (0..module.num_rows())
        .map(|i| {
            (
                (
                    prog.value(i).to_string(),
                    exec.value(i) as i64,
                    dev.value(i) as i64,
                ),
                dur.value(i),
            )
        })
        .collect();
    // The notebook drops the autotuner's executions (ProgramId "unknown") first.
    let init = nb["warmup"]["init_rows"]["module"].as_u64().unwrap() as usize;
    let steady = nb["steady_modules"].as_array().unwrap();
    let known = rows.keys().filter(|k| k.0 != "unknown").count();
    assert_eq!(known, init + steady.len());
    for r in steady {
        let k = (
            r[0].as_str().unwrap().to_string(),
            r[1].as_i64().unwrap(),
            r[2].as_i64().unwrap(),
        );
        let d = rows
            .get(&k)
            .unwrap_or_else(|| panic!("no module row {k:?}"));
        assert!(
            (d - r[5].as_f64().unwrap()).abs() < 1e-9,
            "{k:?}: {d} vs {}",
            r[5]
        );
    }
    // The notebook's communication rows: same sizes, bus bandwidth within 1e-6 relative.
    let (comm, _) = read(&dir.join("communication.parquet"));
    let cp = strs(&comm, "ProgramId");
    let unknown = cp.iter().filter(|p| *p == Some("unknown")).count();
    assert_eq!(
        comm.num_rows() - unknown,
        (nb["warmup"]["init_rows"]["communication"].as_u64().unwrap()
            + nb["warmup"]["steady_rows"]["communication"]
                .as_u64()
                .unwrap()) as usize
    );
    let cn = strs(&comm, "Name");
    let (ce, ct, cd, cs) = (
        i32s(&comm, "ProgramExecution"),
        i32s(&comm, "ThunkExecution"),
        i32s(&comm, "Device"),
        i32s(&comm, "CollectiveSize"),
    );
    let (size, bw) = (
        i64s(&comm, "MessageSize"),
        f64s(&comm, "BusBandwidthGBPerSec"),
    );
    let mut by_key = BTreeMap::new();
    for i in 0..comm.num_rows() {
        by_key.insert(
            (
                cp.value(i).to_string(),
                ce.value(i) as i64,
                cn.value(i).to_string(),
                ct.value(i) as i64,
                cd.value(i) as i64,
            ),
            (size.value(i), cs.value(i) as i64, bw.value(i)),
        );
    }
    let rows = nb["communication_rows"].as_array().unwrap();
    assert_eq!(rows.len(), 288);
    for r in rows {
        let k = (
            r[0].as_str().unwrap().to_string(),
            r[1].as_i64().unwrap(),
            r[2].as_str().unwrap().to_string(),
            r[3].as_i64().unwrap(),
            r[4].as_i64().unwrap(),
        );
        let (m, c, b) = by_key.get(&k).unwrap_or_else(|| panic!("no row {k:?}"));
        assert_eq!(
            (*m, *c),
            (r[7].as_i64().unwrap(), r[6].as_i64().unwrap()),
            "{k:?}"
        );
        assert!(
            rel(*b, r[12].as_f64().unwrap()) <= 1e-6,
            "{k:?}: {b} vs {}",
            r[12]
        );
    }
    // Compile: programs named by their stable ids, as the module frame names them; the
    // programs compiled in the profile are the notebook's.
    let (compile, _) = read(&dir.join("compile.parquet"));
    let cp: BTreeSet<&str> = strs(&compile, "ProgramId").iter().flatten().collect();
    for (id, m) in nb["warmup"]["modules"].as_object().unwrap() {
        let compiled = m["compiled_in_profile"].as_bool().unwrap();
        assert_eq!(
            cp.contains(id.as_str()),
            compiled,
            "{id}: compiled in the profile"
        );
    }
    let profiles: BTreeSet<&str> = strs(&compile, "ProfileName").iter().flatten().collect();
    assert_eq!(
        profiles,
        BTreeSet::from(["proc0", "proc1", "proc2", "proc3"])
    );
    let names = strs(&compile, "Name");
    assert!(
        names.iter().flatten().all(|n| !n.contains("program_id=")),
        "compile names keep their program ids"
    );
}
