//! Reports and XLA dumps (captures) analysed directly and turned into archives, with the real
//! `nsys export`: numbers against the Python tool's reference, archive layout, equality of the
//! archive's analysis with the report's, memoisation without nsys, and errors.

use crate::common::*;
use std::io::Read;
use std::path::{Path, PathBuf};

fn setup() -> Option<(PathBuf, PathBuf)> {
    Some((fixtures()?, nsys()?))
}

/// `mean(err)` notation of the reference CSV → mean (e.g. `54.5(4)`, `0.000803(18)`).
fn csv_mean(cell: &str) -> Option<f64> {
    cell.split('(').next()?.parse().ok()
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn fsdp2_1proc_report_matches_the_reference() {
    let Some((f, nsys)) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = run_with_nsys(
        &nsys,
        &os(&args![
            "analyze",
            "--cache-dir",
            tmp.path().join("cache"),
            "-o",
            &out,
            f.join("h200/fsdp2_1proc/rep.nsys-rep"),
        ]),
    );
    assert_ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("dump_rep (beside the report)"), "{stderr}");

    let s = json(&out.join("summary.json"));
    let step = s["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "jit_train_step")
        .expect("jit_train_step");
    assert_eq!(step["executions"], 16);
    assert_eq!(step["thunks_mean"], 44.0);
    let mean = step["duration_ms_mean"].as_f64().unwrap();
    assert!(rel(mean, 1.1017550625) < 0.005, "{mean}");
    assert!(rel(step["wait_ms_mean"].as_f64().unwrap(), 0.08233975) < 0.01);
    let eval = s["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "jit_evaluate")
        .expect("jit_evaluate");
    assert_eq!(eval["executions"], 2);

    // Every bandwidth cell of the reference, within 1 % (or the reference's printed digits).
    let c = json(&out.join("communication.json"));
    let csv =
        std::fs::read_to_string(f.join("reference/h200-fsdp2_1proc/communication_summary.csv"))
            .unwrap();
    let mut lines = csv.lines().skip(1);
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows = c["bandwidth"].as_array().expect("bandwidth rows");
    let mut checked = 0;
    for line in lines.take_while(|l| !l.is_empty()) {
        let cells: Vec<&str> = line.split(',').collect();
        let size: u64 = cells[0].parse().unwrap();
        for (col, cell) in header.iter().zip(&cells).skip(1) {
            let Some(want) = csv_mean(cell) else { continue };
            let row = rows
                .iter()
                .find(|r| r["collective"] == *col && r["message_size_bytes"] == size)
                .unwrap_or_else(|| panic!("no {col} {size} row"));
            let got = row["bus_bandwidth_gbps"].as_f64().unwrap();
            let digits = cell.split('(').next().unwrap();
            let ulp = digits
                .split_once('.')
                .map(|(_, d)| 10f64.powi(-(d.len() as i32)))
                .unwrap_or(1.0);
            assert!(
                rel(got, want) < 0.01 || (got - want).abs() <= ulp,
                "{col} {size}: {got} vs {want}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 11, "reference cells compared");
    for col in ["all-gather", "all-to-all", "reduce-scatter", "all-reduce"] {
        assert!(rows.iter().any(|r| r["collective"] == col), "{col}");
    }
    let overall = c["overall_hidden_fraction"].as_f64().unwrap();
    assert!(rel(overall, 0.17660526486225073) < 1e-6, "{overall}");
}

/// The member names an archive of `report` + `dump` must have (sources aside).
fn expected_members(report: &Path, dump: &Path, gpu: bool) -> Vec<String> {
    let mut want = vec![
        report.file_name().unwrap().to_string_lossy().into_owned(),
        "report_nvtx_pushpop_trace.parquet".into(),
        "thread-metadata.parquet".into(),
        "system-metadata.parquet".into(),
        "device-metadata.parquet".into(),
        "protos/xla/xla_data.proto".into(),
        "protos/xla/service/hlo.proto".into(),
        "nsys-jax-pipe/nvtx-user.parquet".into(),
        "install.sh".into(),
        "Analysis.ipynb".into(),
    ];
    if gpu {
        want.push("nvtx_gpu_proj_trace/trace.parquet".into());
        want.push("nsys-jax-pipe/gpu-transfers.parquet".into());
    }
    for e in walkdir::WalkDir::new(dump).min_depth(1) {
        let e = e.unwrap();
        let n = e.file_name().to_string_lossy();
        if e.file_type().is_file() && (n.ends_with(".pb") || n.ends_with(".pbtxt")) {
            let rel = e.path().strip_prefix(dump).unwrap().to_string_lossy();
            want.push(format!("dump/{rel}.xz"));
        }
    }
    want.sort();
    want
}

fn check_layout(zip: &Path, report: &Path, dump: &Path, gpu: bool) {
    let members: Vec<String> = zip_members(zip)
        .into_iter()
        .filter(|m| !m.starts_with("sources/") && !m.starts_with("analysis/"))
        .collect();
    assert_eq!(
        members,
        expected_members(report, dump, gpu),
        "{}",
        zip.display()
    );
    let mut z = zip::ZipArchive::new(std::fs::File::open(zip).unwrap()).unwrap();
    for i in 0..z.len() {
        let mut e = z.by_index(i).unwrap();
        let name = e.name().unwrap().into_owned();
        let stored = name.ends_with(".xz") || name.ends_with(".parquet");
        assert_eq!(
            e.compression() == zip::CompressionMethod::Stored,
            stored,
            "{name}: {:?}",
            e.compression()
        );
        if let Some(rel) = name.strip_prefix("dump/") {
            let mut xz = Vec::new();
            e.read_to_end(&mut xz).unwrap();
            let mut raw = Vec::new();
            liblzma::read::XzDecoder::new(xz.as_slice())
                .read_to_end(&mut raw)
                .unwrap();
            let original = std::fs::read(dump.join(rel.strip_suffix(".xz").unwrap())).unwrap();
            assert!(
                raw == original,
                "{name} does not decompress to its dump file"
            );
        }
    }
    let rep = zip_read(zip, &report.file_name().unwrap().to_string_lossy());
    assert!(
        rep == std::fs::read(report).unwrap(),
        "report copied intact"
    );
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn archives_of_captures_analyse_like_the_reports() {
    let Some((f, nsys)) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    for (report, dump, gpu) in [
        (
            "h200/fsdp2_1proc/rep.nsys-rep",
            "h200/fsdp2_1proc/dump_rep",
            true,
        ),
        (
            "h200/fsdp2_2proc/rank1.nsys-rep",
            "h200/fsdp2_2proc/dump_rank1",
            true,
        ),
        (
            "h200/compile_1proc/rep.nsys-rep",
            "h200/compile_1proc/dump_rep",
            false,
        ),
    ] {
        let (report, dump) = (f.join(report), f.join(dump));
        let name = report
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let zip = tmp.path().join(format!("{name}.zip"));
        let o = archive_with(&nsys, &report, &zip, &cache);
        assert_ok(&o);
        let stderr = String::from_utf8_lossy(&o.stderr);
        // The workload's own file is not on this machine: listed, not fatal.
        assert!(
            stderr.contains("/opt/jaxbench/train_mlp.py (no such file or folder)"),
            "{stderr}"
        );
        if !gpu {
            assert!(stderr.contains("NVTX-only capture"), "{stderr}");
        }
        check_layout(&zip, &report, &dump, gpu);

        let direct = tmp.path().join(format!("{name}-direct"));
        let archived = tmp.path().join(format!("{name}-archived"));
        assert_ok(&run_with_nsys(
            &nsys,
            &os(&args![
                "analyze",
                "--cache-dir",
                &cache,
                "-o",
                &direct,
                &report
            ]),
        ));
        assert_ok(&analyze(&cache, &archived, &[], &[zip.clone()]));
        for file in ["summary.json", "communication.json", "compilation.json"] {
            assert_eq!(
                without_labels(json(&direct.join(file))),
                without_labels(json(&archived.join(file))),
                "{name}: {file}"
            );
        }
        if !gpu {
            let s = json(&direct.join("summary.json"));
            assert!(s["modules"].as_array().unwrap().is_empty());
            let c = json(&direct.join("compilation.json"));
            assert!(!c["compilations"].as_array().unwrap().is_empty(), "{c}");
        }
    }
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn metadata_files_match_the_python_tool() {
    let Some((f, nsys)) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let zip = tmp.path().join("a.zip");
    assert_ok(&run_with_nsys(
        &nsys,
        &os(&args![
            "archive",
            f.join("h200/fsdp2_1proc/rep.nsys-rep"),
            "-o",
            &zip,
            "--cache-dir",
            tmp.path().join("cache")
        ]),
    ));
    for member in [
        "thread-metadata.parquet",
        "system-metadata.parquet",
        "device-metadata.parquet",
    ] {
        let ours = nsys_jax_pipe::api::read_parquet(zip_read(&zip, member)).unwrap();
        let theirs = nsys_jax_pipe::api::read_parquet(
            std::fs::read(f.join("reference/h200-fsdp2_1proc").join(member)).unwrap(),
        )
        .unwrap();
        assert_eq!(ours.num_rows(), theirs.num_rows(), "{member}");
        let names = |b: &arrow::array::RecordBatch| -> Vec<String> {
            b.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        };
        assert_eq!(names(&ours), names(&theirs), "{member}");
        for (i, name) in names(&ours).iter().enumerate() {
            let a = arrow::compute::cast(ours.column(i), theirs.column(i).data_type()).unwrap();
            assert_eq!(&a, theirs.column(i), "{member}: {name}");
        }
        // pandas rebuilds the same index.
        let pandas = |bytes: Vec<u8>| -> serde_json::Value {
            let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                bytes::Bytes::from(bytes),
            )
            .unwrap();
            let kv = b.metadata().file_metadata().key_value_metadata().unwrap();
            let v = kv.iter().find(|kv| kv.key == "pandas").unwrap();
            let m: serde_json::Value = serde_json::from_str(v.value.as_ref().unwrap()).unwrap();
            m["index_columns"].clone()
        };
        assert_eq!(
            pandas(zip_read(&zip, member)),
            pandas(std::fs::read(f.join("reference/h200-fsdp2_1proc").join(member)).unwrap()),
            "{member}"
        );
    }
}

/// A stand-in nsys that logs each call and runs the real one.
fn logging_nsys(dir: &Path, real: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let log = dir.join("calls.log");
    let script = dir.join("nsys");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (script, log)
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn second_run_executes_nothing_and_does_not_start_nsys() {
    let Some((f, real)) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (nsys, log) = logging_nsys(tmp.path(), &real);
    let cache = tmp.path().join("cache");
    let report = f.join("h200/fsdp2_1proc/rep.nsys-rep");
    let out = tmp.path().join("out");
    let run = || {
        let o = run_with_nsys(
            &nsys,
            &os(&args![
                "analyze",
                "--cache-dir",
                &cache,
                "-o",
                &out,
                &report
            ]),
        );
        assert_ok(&o);
        json(&out.join("pipeline-run.json"))
    };
    let first = run();
    assert!(first["executed"].as_u64().unwrap() > 0);
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.lines().filter(|l| *l == "export").count(),
        1,
        "{calls}"
    );
    let second = run();
    assert_eq!(second["executed"], 0, "{second}");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        calls,
        "nsys started again"
    );
    // Archiving reuses the same export.
    let zip = tmp.path().join("a.zip");
    assert_ok(&archive_with(&nsys, &report, &zip, &cache));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        calls,
        "export repeated"
    );
}

fn fake_nsys(dir: &Path, export_body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("nsys");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'NVIDIA Nsight Systems version 2024.6.9.1-0v0'; exit 0; fi\n{export_body}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn one_line_error(o: &std::process::Output) -> String {
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    let errors: Vec<&str> = e.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{e}");
    assert!(
        !e.contains("panicked") && !e.contains("RUST_BACKTRACE"),
        "{e}"
    );
    errors[0].to_string()
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn bad_captures_and_bad_nsys_give_one_line_errors() {
    let Some((f, real)) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let report = f.join("h200/fsdp2_1proc/rep.nsys-rep");
    let zip = tmp.path().join("out.zip");

    // No nsys anywhere.
    let o = std::process::Command::new(bin())
        .args([
            "archive".as_ref(),
            report.as_os_str(),
            "-o".as_ref(),
            zip.as_os_str(),
        ])
        .args(["--cache-dir".as_ref(), cache.as_os_str()])
        .env("PATH", tmp.path())
        .env_remove("NSYS")
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .output()
        .unwrap();
    // (the checkout's own .nsys may exist; then this run succeeds)
    if !o.status.success() {
        let e = one_line_error(&o);
        assert!(e.contains("install-nsys.sh"), "{e}");
    }
    std::fs::remove_file(&zip).ok();
    let e = one_line_error(&run(&os(&args![
        "archive",
        &report,
        "-o",
        &zip,
        "--cache-dir",
        &cache,
        "--nsys",
        tmp.path().join("none")
    ])));
    assert!(e.contains("none") && e.contains("no such nsys"), "{e}");

    // An nsys whose export fails: its message reaches the user; nothing is written.
    let bad = tmp.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    let nsys = fake_nsys(&bad, "echo 'FATAL: license server unreachable' >&2; exit 1");
    let e = one_line_error(&run(&os(&args![
        "archive",
        &report,
        "-o",
        &zip,
        "--cache-dir",
        &cache,
        "--nsys",
        &nsys
    ])));
    assert!(
        e.contains("license server unreachable") && e.contains("rep.nsys-rep"),
        "{e}"
    );
    assert!(!zip.exists());
    let out = tmp.path().join("o1");
    let e = one_line_error(&run(&os(&args![
        "analyze",
        &report,
        "-o",
        &out,
        "--cache-dir",
        &cache,
        "--nsys",
        &nsys
    ])));
    assert!(e.contains("license server unreachable"), "{e}");
    assert!(!out.exists());

    // A file that is not a report.
    let fake = tmp.path().join("fake.nsys-rep");
    std::fs::write(&fake, b"not a report at all").unwrap();
    let e = one_line_error(&archive_with(&real, &fake, &zip, &cache));
    assert!(
        e.contains("fake.nsys-rep") && e.contains("nsys export"),
        "{e}"
    );
    assert!(!zip.exists());

    // A dump with a corrupt after-optimizations module.
    let cap = tmp.path().join("cap");
    let dump = cap.join("dump_rep");
    std::fs::create_dir_all(&dump).unwrap();
    std::fs::copy(&report, cap.join("rep.nsys-rep")).unwrap();
    for e in std::fs::read_dir(f.join("h200/fsdp2_1proc/dump_rep")).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dump.join(e.file_name())).unwrap();
        }
    }
    let victim = dump.join("module_3984.jit_train_step.sm_9.0a_gpu_after_optimizations.hlo.pb");
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes.truncate(bytes.len() / 3);
    bytes.extend_from_slice(&[0xff; 16]);
    std::fs::write(&victim, bytes).unwrap();
    let out = tmp.path().join("o2");
    let e = one_line_error(&run_with_nsys(
        &real,
        &os(&args![
            "analyze",
            cap.join("rep.nsys-rep"),
            "-o",
            &out,
            "--cache-dir",
            &cache
        ]),
    ));
    assert!(e.contains("module_3984.jit_train_step"), "{e}");
    assert!(!out.exists());
    // The archive keeps the user's files as they are and says what it could not use.
    let o = archive_with(&real, &cap.join("rep.nsys-rep"), &zip, &cache);
    assert_ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("no source files archived") && stderr.contains("module_3984"),
        "{stderr}"
    );

    // A missing --dump folder.
    let e = one_line_error(&run_with_nsys(
        &real,
        &os(&args![
            "analyze",
            &report,
            "--dump",
            tmp.path().join("nodump"),
            "-o",
            &out
        ]),
    ));
    assert!(e.contains("nodump") && e.contains("not found"), "{e}");
}
