//! Inputs a user can get wrong: one-line errors naming the file and the problem, a non-zero
//! exit, no panic, and nothing half-written in the cache or the output folder.

use crate::common::*;
use std::io::Write;
use std::path::{Path, PathBuf};

fn expect_error(inputs: &[PathBuf], must_contain: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let (cache, out) = (tmp.path().join("cache"), tmp.path().join("out"));
    let o = analyze(&cache, &out, &[], inputs);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("internal error"),
        "{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    for s in must_contain {
        assert!(lines[0].contains(s), "{:?} should mention {s:?}", lines[0]);
    }
    assert!(!out.exists(), "no output folder on error");
    if cache.exists() {
        for e in walkdir::WalkDir::new(&cache) {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy();
            assert!(
                !name.starts_with(".tmp-"),
                "temporary file left in cache: {}",
                e.path().display()
            );
        }
    }
}

fn zip_with(path: &Path, members: &[(&str, &[u8])]) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    for (name, bytes) in members {
        z.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

#[test]
fn missing_path() {
    expect_error(
        &[PathBuf::from("/nonexistent/x.zip")],
        &["/nonexistent/x.zip", "no such file"],
    );
}

#[test]
fn text_file_named_zip() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("notes.zip");
    std::fs::write(&p, "just some text\n").unwrap();
    expect_error(&[p.clone()], &[p.to_str().unwrap(), "not a zip archive"]);
}

#[test]
fn truncated_zip() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.zip");
    zip_with(
        &good,
        &[("nvtx_gpu_proj_trace/trace.parquet", &[7u8; 5000])],
    );
    let bytes = std::fs::read(&good).unwrap();
    let p = tmp.path().join("truncated.zip");
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    expect_error(&[p.clone()], &[p.to_str().unwrap(), "corrupt or truncated"]);
}

#[test]
fn zip_without_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("empty-ish.zip");
    zip_with(&p, &[("README.txt", b"hello")]);
    expect_error(
        &[p.clone()],
        &[
            p.to_str().unwrap(),
            "trace.parquet",
            "not an nsys-jax archive",
        ],
    );
}

#[test]
fn a_folder_holding_a_report_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("capture");
    std::fs::create_dir_all(dir.join("dump_rep")).unwrap();
    std::fs::write(dir.join("rep.nsys-rep"), b"not read").unwrap();
    let report = dir.join("rep.nsys-rep");
    expect_error(
        &[dir.clone()],
        &[
            "not an nsys-jax archive",
            &format!("pass {} instead", report.display()),
        ],
    );
}

#[test]
fn unknown_parquet_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let batch = arrow::array::RecordBatch::try_from_iter(vec![(
        "Whatever",
        std::sync::Arc::new(arrow::array::Int64Array::from(vec![1, 2])) as arrow::array::ArrayRef,
    )])
    .unwrap();
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let p = tmp.path().join("odd.zip");
    zip_with(&p, &[("nvtx_gpu_proj_trace/trace.parquet", &buf)]);
    expect_error(
        &[p.clone()],
        &[
            p.to_str().unwrap(),
            "nvtx_gpu_proj_trace/trace.parquet",
            "unknown trace.parquet column layout",
        ],
    );
}

#[test]
fn truncated_parquet_member() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad-parquet.zip");
    zip_with(
        &p,
        &[(
            "nvtx_gpu_proj_trace/trace.parquet",
            b"PAR1 this is not really parquet",
        )],
    );
    expect_error(
        &[p.clone()],
        &[p.to_str().unwrap(), "trace.parquet", "parquet"],
    );
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn a_good_input_beside_a_bad_one_still_fails_cleanly() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.zip");
    std::fs::write(&bad, "nope").unwrap();
    expect_error(
        &[pax_archives(&f)[0].clone(), bad.clone()],
        &[bad.to_str().unwrap()],
    );
}

#[test]
fn a_file_named_like_a_report_that_is_none() {
    // Reports are read through `nsys export`; a file that is not one fails there, with
    // nsys's words, or (without nsys) with how to install it.
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("rank0.nsys-rep");
    std::fs::write(&p, b"\x00\x01binary").unwrap();
    let (cache, out) = (tmp.path().join("cache"), tmp.path().join("out"));
    let o = analyze(&cache, &out, &[], &[p.clone()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("rank0.nsys-rep") && errors[0].contains("nsys export")
            || errors[0].contains("install-nsys.sh"),
        "{stderr}"
    );
    // The run said that no dump folder was found.
    assert!(stderr.contains("no XLA dump folder"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn analysis_parameters_are_typed_and_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let example = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/mlp-fsdp-2gpu.zip"
    ));
    let pipeline = tmp.path().join("misspelt.toml");
    std::fs::write(
        &pipeline,
        "[[analysis]]\nname = \"compilation\"\ndetial = true\n",
    )
    .unwrap();
    let (cache, out) = (tmp.path().join("c"), tmp.path().join("o"));
    for (extra, what) in [
        (
            vec!["--pipeline", pipeline.to_str().unwrap()],
            vec!["misspelt.toml", "analysis compilation", "detial"],
        ),
        (
            vec!["--analysis", "compilation", "--analysis-arg", "detial=true"],
            vec!["analysis compilation", "detial"],
        ),
        (
            vec![
                "--analysis",
                "compilation",
                "--analysis-arg",
                "detail=maybe",
            ],
            vec!["analysis compilation", "invalid type"],
        ),
    ] {
        let o = analyze(&cache, &out, &extra, std::slice::from_ref(&example));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        for w in what {
            assert!(err.contains(w), "{err:?} should say {w:?}");
        }
        assert!(!out.exists());
    }
    // `detail=true` breaks compilations down by full range name.
    let Some(f) = fixtures() else { return };
    let proc0 = pax_archives(&f).remove(0);
    let parts = |extra: &[&str], out: &Path| -> usize {
        assert_ok(&analyze(&cache, out, extra, std::slice::from_ref(&proc0)));
        let c = json(&out.join("compilation.json"));
        let mut names = std::collections::BTreeSet::new();
        for comp in c["compilations"].as_array().unwrap() {
            for p in comp["parts"].as_array().unwrap() {
                names.insert(p["kind"].as_str().unwrap().to_string());
            }
        }
        names.len()
    };
    let plain = parts(&["--analysis", "compilation"], &tmp.path().join("p"));
    let detailed = parts(
        &["--analysis", "compilation", "--analysis-arg", "detail=true"],
        &tmp.path().join("d"),
    );
    assert!(detailed > 2 * plain, "{detailed} vs {plain}");
}

#[test]
fn a_reused_output_folder_loses_only_the_stale_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let (cache, out) = (tmp.path().join("cache"), tmp.path().join("out"));
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    assert_ok(&analyze(
        &cache,
        &out,
        &["-q", "--analysis", "pgle", "--analysis", "summary"],
        std::slice::from_ref(&example),
    ));
    assert!(out.join("pgle.json").is_file());
    let mine = out.join("notes-of-mine.txt");
    std::fs::write(&mine, "kept").unwrap();
    assert_ok(&analyze(
        &cache,
        &out,
        &["-q", "--analysis", "summary"],
        std::slice::from_ref(&example),
    ));
    assert!(out.join("summary.json").is_file());
    assert!(!out.join("pgle.json").exists());
    assert!(
        !out.join("pgle").exists(),
        "the emptied pgle/ folder goes too"
    );
    assert!(mine.is_file());
    let run = json(&out.join("pipeline-run.json"));
    assert_eq!(run["inputs"][0], example.display().to_string());
    let outputs: Vec<&str> = run["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["summary.json", "pipeline-run.json"]);
}

/// The example archive with its members as `change` leaves them, written to `path`.
fn example_with(path: &Path, change: impl FnOnce(&mut Vec<(String, Vec<u8>)>)) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let mut members: Vec<(String, Vec<u8>)> = zip_members(&example)
        .into_iter()
        .map(|m| {
            let b = zip_read(&example, &m);
            (m, b)
        })
        .collect();
    change(&mut members);
    let refs: Vec<(&str, &[u8])> = members
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    zip_with(path, &refs);
}

/// The middle one of the rows of the example's trace that are thunks (not modules): one of
/// the steady state, neither before the first module nor in a cut last execution.
fn middle_thunk_row(trace: &arrow::array::RecordBatch) -> usize {
    use arrow::array::AsArray;
    let names = trace.column_by_name("Name").unwrap().as_string::<i32>();
    let thunks: Vec<usize> = (0..trace.num_rows())
        .filter(|&r| names.value(r).contains("Thunk:#"))
        .collect();
    thunks[thunks.len() / 2]
}

/// One thunk made longer than its module (a cell of the trace set to 400,000 ns, which gave
/// a negative "GPU idle during modules" before the trace was checked): an input error naming
/// the trace member, the range and its module.
#[test]
fn a_thunk_longer_than_its_module_is_an_impossible_trace() {
    use crate::fuzz::{parquet_bytes, table, with_column};
    use arrow::array::{ArrayRef, AsArray, Int64Array};
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("long-thunk.zip");
    let trace = "nvtx_gpu_proj_trace/trace.parquet";
    example_with(&p, |m| {
        let b = &mut m.iter_mut().find(|(n, _)| n == trace).unwrap().1;
        let t = table(b);
        let row = middle_thunk_row(&t);
        *b = parquet_bytes(&with_column(&t, "Projected Duration", |a| {
            let mut v = a
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec();
            v[row] = 400_000;
            std::sync::Arc::new(Int64Array::from(v)) as ArrayRef
        }));
    });
    expect_error(
        &[p],
        &[
            trace,
            "an impossible trace: thunk ranges lie outside their module's range on the GPU (1 in all",
            "400000 ns",
            "XlaModule",
        ],
    );
}

/// A damaged optional member (the device metadata replaced by the system metadata, or cut
/// short) is one warning naming the archive, the member and what is lost, said under `-q`;
/// the run goes on and the roofline says it has no peaks.
#[test]
fn a_damaged_device_metadata_member_is_a_warning_under_quiet() {
    for (what, damage) in [
        ("swapped", "not a device metadata table"),
        ("truncated", "not a readable parquet file"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join(format!("{what}.zip"));
        example_with(&p, |m| {
            let system = m
                .iter()
                .find(|(n, _)| n == "system-metadata.parquet")
                .unwrap()
                .1
                .clone();
            let b = &mut m
                .iter_mut()
                .find(|(n, _)| n == "device-metadata.parquet")
                .unwrap()
                .1;
            match what {
                "swapped" => *b = system,
                _ => b.truncate(b.len() / 2),
            }
        });
        let out = tmp.path().join("out");
        let o = analyze(
            &tmp.path().join("cache"),
            &out,
            &["-q", "--analysis", "roofline"],
            std::slice::from_ref(&p),
        );
        assert_ok(&o);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let warning = format!(
            "nsys-jax-pipe: warning: {}: device-metadata.parquet: {damage}",
            p.display()
        );
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: {stderr}");
        assert!(
            lines[0].starts_with(&warning)
                && lines[0].ends_with(
                    "; no GPU names or peaks: the roofline, MFU and the memory limit are skipped"
                ),
            "{what}: {stderr}"
        );
        let roofline = std::fs::read_to_string(out.join("roofline.json")).unwrap();
        assert!(!roofline.contains("H200"), "{what}: peaks without metadata");
    }
}

/// A member written twice in a zip archive: which copy would be read is not defined, so the
/// archive is refused, naming the member.
#[test]
fn a_member_written_twice_is_an_input_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("twice.zip");
    // The zip writer refuses a repeated name: write a placeholder of the same length and
    // rename it in the bytes (the local header and the central directory both).
    example_with(&p, |m| {
        let copy = m
            .iter()
            .find(|(n, _)| n == "thread-metadata.parquet")
            .unwrap()
            .1
            .clone();
        m.push(("thread-metadataXparquet".into(), copy));
    });
    let mut bytes = std::fs::read(&p).unwrap();
    let (from, to) = (b"thread-metadataXparquet", b"thread-metadata.parquet");
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
        }
        i += 1;
    }
    std::fs::write(&p, bytes).unwrap();
    expect_error(
        &[p],
        &["member thread-metadata.parquet appears twice", "twice.zip"],
    );
}
