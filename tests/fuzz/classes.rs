//! Damage by class, as disks, transfers and other tools give it to an archive's members: a
//! flipped byte under the zip's checksum, a truncated member, one member swapped for another,
//! a column of another type, impossible times in the GPU trace, names in other scripts, and a
//! member written twice. `analyze` runs on each damaged copy of the example archive. Every run
//! must end with exit 0 or an input error (no panic, signal or hang); a damage that reading
//! the member must find names that member on stderr (an error, or a warning that `-q` still
//! prints); and no output of a run that succeeded holds a negative time, share or fraction.
//!
//! `cargo test --release --test integration fuzz::classes` runs 300 cases (seed 1); for the
//! full campaign: `NSYS_JAX_PIPE_FUZZ_CLASS_CASES=1500 NSYS_JAX_PIPE_FUZZ_SEED=7 ...`.

use super::{Outcome, Rng, env_or, members, run_case_said, run_case_with, zip_bytes};
use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::DataType;
use std::path::Path;
use std::sync::Arc;

const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";
const PUSHPOP: &str = "report_nvtx_pushpop_trace.parquet";
const THREADS: &str = "thread-metadata.parquet";
const SYSTEM: &str = "system-metadata.parquet";
const DEVICES: &str = "device-metadata.parquet";
const HLO: &str = "dump/module_4642.jit_train_step.sm_9.0a_gpu_after_optimizations.hlo.pb.xz";

/// The members `analyze` reads by default, each damaged in turn.
const READ: [&str; 6] = [TRACE, PUSHPOP, THREADS, SYSTEM, DEVICES, HLO];

/// Columns each table member is read by: retyping one of them must be found.
const READ_COLUMNS: [(&str, &[&str]); 5] = [
    (
        TRACE,
        &[
            "Name",
            "Projected Start",
            "Projected Duration",
            "PID",
            "TID",
            "RangeId",
        ],
    ),
    (
        PUSHPOP,
        &["Start (ns)", "End (ns)", "Name", "PID", "TID", "RangeId"],
    ),
    (THREADS, &["Name", "PID", "TID"]),
    (SYSTEM, &["name", "value"]),
    (
        DEVICES,
        &[
            "('TARGET_INFO_GPU', 'name')",
            "('TARGET_INFO_GPU', 'smCount')",
        ],
    ),
];

/// One damaged archive.
struct Case {
    class: &'static str,
    bytes: Vec<u8>,
    what: String,
    /// The member stderr must name, whatever the outcome.
    must_name: Option<&'static str>,
    /// Whether the run must fail (a damage no reader may take for data).
    must_fail: bool,
}

pub(crate) fn table(bytes: &[u8]) -> RecordBatch {
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(bytes.to_vec()),
    )
    .unwrap()
    .build()
    .unwrap();
    let schema = arrow::array::RecordBatchReader::schema(&r);
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    arrow::compute::concat_batches(&schema, &batches).unwrap()
}

pub(crate) fn parquet_bytes(b: &RecordBatch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, b.schema(), None).unwrap();
    w.write(b).unwrap();
    w.close().unwrap();
    out
}

/// `b` with column `name` replaced by `f` of it (same name, the new type).
pub(crate) fn with_column(
    b: &RecordBatch,
    name: &str,
    f: impl Fn(&ArrayRef) -> ArrayRef,
) -> RecordBatch {
    let (i, _) = b.schema().column_with_name(name).unwrap();
    let mut fields: Vec<arrow::datatypes::Field> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut columns = b.columns().to_vec();
    columns[i] = f(&columns[i]);
    fields[i] = arrow::datatypes::Field::new(name, columns[i].data_type().clone(), true);
    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).unwrap()
}

/// A column retyped: numbers become their text, text becomes its length.
fn retype(a: &ArrayRef) -> ArrayRef {
    match a.data_type() {
        DataType::Utf8 => Arc::new(Int64Array::from_iter(
            a.as_string::<i32>()
                .iter()
                .map(|s| s.map(|s| s.len() as i64)),
        )),
        _ => {
            let text = arrow::compute::cast(a, &DataType::Utf8).unwrap();
            Arc::new(StringArray::from_iter(
                text.as_string::<i32>()
                    .iter()
                    .map(|s| s.map(|s| format!("{s}x"))),
            ))
        }
    }
}

fn member<'a>(m: &'a mut [(String, Vec<u8>)], name: &str) -> &'a mut Vec<u8> {
    &mut m.iter_mut().find(|(n, _)| n == name).unwrap().1
}

/// The example with one byte of `name`'s stored data flipped under the zip's checksum.
fn flipped(base: &[(String, Vec<u8>)], name: &str, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = zip_bytes(base);
    let start = {
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(&bytes)).unwrap();
        let f = z.by_name(name).unwrap();
        (f.data_start().unwrap(), f.compressed_size())
    };
    let at = start.0 as usize + rng.below(start.1 as usize);
    bytes[at] ^= 1 << rng.below(8);
    bytes
}

/// The projected trace with impossible times: one thunk longer than its module, one time
/// beyond any capture, every start at zero, or a negative duration.
fn bad_times(trace: &[u8], rng: &mut Rng) -> (Vec<u8>, String) {
    let b = table(trace);
    let n = b.num_rows();
    let row = rng.below(n);
    let i64s = |c: &str| -> Vec<i64> {
        arrow::compute::cast(b.column_by_name(c).unwrap(), &DataType::Int64)
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>()
            .values()
            .to_vec()
    };
    let set = |c: &str, v: Vec<i64>| {
        with_column(&b, c, |_| Arc::new(Int64Array::from(v.clone())) as ArrayRef)
    };
    let (b, what) = match rng.below(5) {
        0 => {
            let mut d = i64s("Projected Duration");
            d[row] = 400_000;
            (
                set("Projected Duration", d),
                format!("row {row}: duration 400000 ns"),
            )
        }
        1 => {
            let mut d = i64s("Projected Duration");
            d[row] = 1_000_000_000_000;
            (
                set("Projected Duration", d),
                format!("row {row}: duration 1e12 ns"),
            )
        }
        2 => (
            set("Projected Start", vec![0; n]),
            "every start 0".to_string(),
        ),
        3 => {
            let mut d = i64s("Projected Duration");
            d[row] = -5;
            (
                set("Projected Duration", d),
                format!("row {row}: duration -5 ns"),
            )
        }
        _ => {
            let mut s = i64s("Projected Start");
            s[row] += 1 + rng.below(10_000_000) as i64;
            (
                set("Projected Start", s),
                format!("row {row}: start moved later"),
            )
        }
    };
    (parquet_bytes(&b), what)
}

/// Range names in other scripts: the thunks' JAX op names (`name=params['w_in']`), which
/// reach the outputs as they are.
fn unicode_names(trace: &[u8]) -> Vec<u8> {
    let b = table(trace);
    let b = with_column(&b, "Name", |a| {
        Arc::new(StringArray::from_iter(a.as_string::<i32>().iter().map(
            |s| s.map(|s| s.replace("params", "paramètres_параметры_参数🚀")),
        )))
    });
    parquet_bytes(&b)
}

fn case(base: &[(String, Vec<u8>)], rng: &mut Rng) -> Case {
    let mut m = base.to_vec();
    let target = READ[rng.below(READ.len())];
    let zip = |m: &[(String, Vec<u8>)]| zip_bytes(m);
    match rng.below(7) {
        0 => Case {
            class: "checksum",
            bytes: flipped(&m, target, rng),
            what: format!("{target}: a byte flipped under the checksum"),
            must_name: Some(target),
            must_fail: false,
        },
        1 => {
            let b = member(&mut m, target);
            let at = rng.below(b.len());
            b.truncate(at);
            Case {
                class: "truncated",
                bytes: zip(&m),
                what: format!("{target}: truncated at {at}"),
                must_name: Some(target),
                must_fail: false,
            }
        }
        2 => {
            let tables = [TRACE, PUSHPOP, THREADS, SYSTEM, DEVICES];
            let (a, b) = loop {
                let (a, b) = (tables[rng.below(5)], tables[rng.below(5)]);
                if a != b {
                    break (a, b);
                }
            };
            let other = member(&mut m, b).clone();
            *member(&mut m, a) = other;
            Case {
                class: "swapped",
                bytes: zip(&m),
                what: format!("{a} replaced by {b}"),
                must_name: Some(a),
                must_fail: false,
            }
        }
        3 => {
            let (name, columns) = READ_COLUMNS[rng.below(READ_COLUMNS.len())];
            let column = columns[rng.below(columns.len())];
            let b = member(&mut m, name);
            *b = parquet_bytes(&with_column(&table(b), column, retype));
            Case {
                class: "retyped",
                bytes: zip(&m),
                what: format!("{name}: column {column} retyped"),
                must_name: Some(name),
                must_fail: false,
            }
        }
        4 => {
            let (bytes, what) = bad_times(member(&mut m, TRACE), rng);
            *member(&mut m, TRACE) = bytes;
            Case {
                class: "times",
                bytes: zip(&m),
                what: format!("{TRACE}: {what}"),
                must_name: None,
                must_fail: false,
            }
        }
        5 => {
            let b = member(&mut m, TRACE);
            *b = unicode_names(b);
            Case {
                class: "unicode",
                bytes: zip(&m),
                what: format!("{TRACE}: names in other scripts"),
                must_name: None,
                must_fail: false,
            }
        }
        _ => {
            let copy = m.iter().find(|(n, _)| n == target).unwrap().clone();
            m.push(copy);
            Case {
                class: "duplicate",
                bytes: zip_duplicates(&m),
                what: format!("{target}: written twice"),
                must_name: Some(target),
                must_fail: true,
            }
        }
    }
}

/// A zip of `members`, names repeated as given (the writer refuses a repeated name, so the
/// second copy is written under a placeholder of the same length and renamed in the bytes).
fn zip_duplicates(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut seen = std::collections::HashSet::new();
    let mut renamed = Vec::new();
    let mut placeholders = Vec::new();
    for (name, bytes) in members {
        if seen.insert(name.clone()) {
            renamed.push((name.clone(), bytes.clone()));
        } else {
            let p: String = name
                .chars()
                .map(|c| if c == '/' { '/' } else { 'Z' })
                .collect();
            placeholders.push((p.clone(), name.clone()));
            renamed.push((p, bytes.clone()));
        }
    }
    let mut z = zip_bytes(&renamed);
    for (p, name) in placeholders {
        let (p, name) = (p.as_bytes(), name.as_bytes());
        let mut i = 0;
        while i + p.len() <= z.len() {
            if &z[i..i + p.len()] == p {
                z[i..i + p.len()].copy_from_slice(name);
                i += p.len();
            } else {
                i += 1;
            }
        }
    }
    z
}

/// Where an output folder's JSON holds a negative number (the file and the path to it).
pub(crate) fn negatives(out: &Path) -> Vec<String> {
    fn walk(v: &serde_json::Value, at: &str, found: &mut Vec<String>) {
        match v {
            serde_json::Value::Number(n) if n.as_f64().is_some_and(|x| x < 0.0) => {
                found.push(format!("{at} = {n}"))
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}[{i}]"), found);
                }
            }
            serde_json::Value::Object(o) => {
                for (k, x) in o {
                    if !SIGNED.contains(&k.as_str()) {
                        walk(x, &format!("{at}.{k}"), found);
                    }
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for e in walkdir::WalkDir::new(out).into_iter().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json")
            && let Ok(v) = serde_json::from_slice(&std::fs::read(p).unwrap_or_default())
        {
            let rel = p.strip_prefix(out).unwrap().display().to_string();
            walk(&v, &rel, &mut found);
        }
    }
    found
}

/// Keys whose values may be below zero in any run: none are times, shares or fractions.
/// `offsets_us`: each device's clock offset against the others' (stragglers), signed by
/// nature (they sum to zero).
const SIGNED: &[&str] = &["offsets_us"];

#[test]
fn damage_by_class_is_named_and_never_gives_negative_numbers() {
    let cases = env_or("NSYS_JAX_PIPE_FUZZ_CLASS_CASES", 300) as usize;
    let seed = env_or("NSYS_JAX_PIPE_FUZZ_SEED", 1);
    let base = members();
    let nsys = crate::common::testutil::nsys_path();
    let nsys = nsys.as_deref();
    let tmp = tempfile::tempdir().unwrap();
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let results: Vec<(Vec<String>, Vec<(&str, bool)>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (base, tmp) = (&base, tmp.path());
                s.spawn(move || {
                    let mut problems = Vec::new();
                    let mut tally = Vec::new();
                    for i in (w..cases).step_by(workers) {
                        let mut rng = Rng(seed.wrapping_mul(2_000_003).wrapping_add(i as u64));
                        let c = case(base, &mut rng);
                        let zip = tmp.join(format!("class{i}.zip"));
                        let out = tmp.join(format!("class-out{i}"));
                        std::fs::write(&zip, &c.bytes).unwrap();
                        let (outcome, stderr) = run_case_said(&zip, &out);
                        tally.push((c.class, matches!(outcome, Outcome::Ok)));
                        let mut say =
                            |why: String| problems.push(format!("case {i} ({}): {why}", c.what));
                        match &outcome {
                            Outcome::Bad(why) => say(why.clone()),
                            Outcome::Ok if c.must_fail => say("exit 0".into()),
                            Outcome::Ok => {
                                for n in negatives(&out) {
                                    say(format!("negative: {n}"));
                                }
                            }
                            Outcome::InputError(_) => {}
                        }
                        if let Some(m) = c.must_name
                            && !stderr.contains(m)
                        {
                            say(format!("{m} not named on stderr ({outcome:?}): {stderr}"));
                        }
                        // Optional members: the same outcome and words whether or not Nsight
                        // Systems is at hand (the archive holds its report).
                        if let (Some(m @ (SYSTEM | DEVICES)), Some(nsys)) = (c.must_name, nsys) {
                            let run = |env: &dyn Fn(&mut std::process::Command)| {
                                let _ = std::fs::remove_dir_all(&out);
                                let (o, e) = run_case_with(&zip, &out, env);
                                let words: Vec<String> = e
                                    .lines()
                                    .filter(|l| l.starts_with("nsys-jax-pipe: "))
                                    .map(str::to_string)
                                    .collect();
                                (format!("{o:?}"), words)
                            };
                            let with = run(&|c| {
                                c.env("NSYS", nsys);
                            });
                            let without = run(&|c| {
                                c.env("NSYS", "").env("PATH", "/usr/bin:/bin");
                            });
                            if with != without {
                                say(format!("{m}: with nsys {with:?}, without {without:?}"));
                            }
                        }
                        let _ = std::fs::remove_file(&zip);
                        let _ = std::fs::remove_dir_all(&out);
                    }
                    (problems, tally)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut by_class: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for (class, ok) in results.iter().flat_map(|r| &r.1) {
        let e = by_class.entry(class).or_default();
        if *ok { e.0 += 1 } else { e.1 += 1 }
    }
    let problems: Vec<&String> = results.iter().flat_map(|r| &r.0).collect();
    eprintln!(
        "fuzz by class: {cases} damaged archives (seed {seed}), {} problems",
        problems.len()
    );
    for (class, (ok, failed)) in &by_class {
        eprintln!("  {class:10} {ok:5} analysed, {failed:5} input errors");
    }
    for p in &problems {
        eprintln!("{p}");
    }
    assert!(problems.is_empty(), "{} of {cases} cases", problems.len());
}
