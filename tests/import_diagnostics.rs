//! A capture that Nsight Systems could not fully import: a whole-program capture of a small
//! JAX program (one function jitted and run five times) on CUDA 13 with Nsight Systems
//! 2023.4 (`tests/data/whole-program-cuda13.nsys-rep`, made on an H100). Its import failed at
//! a driver call that Nsight Systems does not know, and the report lacks the GPU work. Every
//! command says so, naming the error, and the archive keeps the fact.

use crate::common::standin::*;
use crate::common::*;
use std::path::{Path, PathBuf};

fn report() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/whole-program-cuda13.nsys-rep")
}

const ERROR: &str = "Unknown driver API function index: 780";

fn assert_warns(o: &std::process::Output) {
    let err = stderr(o);
    assert!(
        err.contains("warning: whole")
            && err.contains("could not fully import")
            && err.contains(ERROR),
        "{err}"
    );
    assert!(err.contains("newer Nsight Systems"), "{err}");
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn archive_and_analyze_say_the_import_was_incomplete() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let zip = tmp.path().join("whole.zip");
    let o = run_with_nsys(
        &nsys,
        &[
            "archive".as_ref(),
            report().as_os_str(),
            "--cache-dir".as_ref(),
            cache.as_os_str(),
            "-o".as_ref(),
            zip.as_os_str(),
        ],
    );
    assert_ok(&o);
    assert_warns(&o);
    let stored: serde_json::Value =
        serde_json::from_slice(&zip_read(&zip, "import-diagnostics.json")).unwrap();
    assert_eq!(stored["source"], "report");
    assert_eq!(stored["errors"][0], format!("Analysis: {ERROR}"));

    // analyze, of the archive and of the report: the warning, and a summary that says why
    // it has no module executions.
    for (input, name) in [(&zip, "zip"), (&report(), "report")] {
        let out = tmp.path().join(format!("out-{name}"));
        let o = analyze(
            &cache,
            &out,
            &["--analysis", "summary"],
            std::slice::from_ref(input),
        );
        assert_ok(&o);
        assert_warns(&o);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("Nsight Systems could not import the capture's GPU work"),
            "{text}"
        );
        let v = json(&out.join("import-diagnostics.json"));
        assert!(v[0]["errors"][0].as_str().unwrap().contains(ERROR), "{v}");
        assert_eq!(
            json(&out.join("summary.json"))["modules"],
            serde_json::json!([])
        );
    }

    // compare: the warning comes before the error that there is nothing to compare...
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let o = run(&os(&args![
        "compare",
        "--cache-dir",
        &cache,
        "-o",
        tmp.path().join("cmp0"),
        &zip,
        &example
    ]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_warns(&o);
    let err = stderr(&o);
    assert!(
        err.find("could not fully import") < err.find("error:"),
        "{err}"
    );
    // ... and where there is something to compare, it heads compare.md too (the example
    // archive carrying the whole-program capture's diagnostics).
    let flagged = tmp.path().join("flagged.zip");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&flagged).unwrap());
    for m in zip_members(&example) {
        w.start_file(m.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut w, &zip_read(&example, &m)).unwrap();
    }
    w.start_file(
        "import-diagnostics.json",
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    std::io::Write::write_all(&mut w, &zip_read(&zip, "import-diagnostics.json")).unwrap();
    w.finish().unwrap();
    let out = tmp.path().join("cmp1");
    let o = run(&os(&args![
        "compare",
        "--cache-dir",
        &cache,
        "-o",
        &out,
        &example,
        &flagged
    ]));
    assert_ok(&o);
    assert_warns(&o);
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(
        md.starts_with("> **Warning:**") && md.contains(ERROR),
        "{md}"
    );
}

#[test]
fn a_complete_capture_is_not_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let o = analyze(
        &tmp.path().join("cache"),
        &tmp.path().join("out"),
        &[],
        &[example],
    );
    assert_ok(&o);
    assert!(
        !stderr(&o).contains("could not fully import"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp.path().join("out/import-diagnostics.json").exists());
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn run_reads_what_nsys_printed() {
    let Some(real) = nsys() else { return };
    let b = Bench::with_capture(real, &report(), &example_capture().1);
    let o = b.run(
        &["run", "-o", "whole", "--", "true"],
        &[("STANDIN_IMPORT_ERRORS", "1")],
    );
    assert_ok(&o);
    assert_warns(&o);
    assert!(stderr(&o).contains("nsys output"), "{}", stderr(&o));
    // nsys's own lines went through to the terminal.
    assert!(
        stderr(&o).contains("Importer error status"),
        "{}",
        stderr(&o)
    );
    let zip = b.work().join("whole.zip");
    let stored: serde_json::Value =
        serde_json::from_slice(&zip_read(&zip, "import-diagnostics.json")).unwrap();
    assert_eq!(stored["source"], "nsys output");
    assert!(
        stored["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == ERROR),
        "{stored}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("could not import the capture's GPU work"));
}
