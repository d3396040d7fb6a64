//! Archives as NVIDIA's nsys-jax writes them: the report inside, none of this project's own
//! members. What this project derives from reports (the kernels of CUDA graphs, the copies,
//! the user ranges, the memory events, the import diagnostics) comes from the report inside,
//! exported once and cached; a damaged report costs only that.

use crate::common::*;
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(p)
}

/// `report` archived by this project, then laid out as nsys-jax lays it out: this
/// project's members, stored analyses and import diagnostics removed; `damage` cuts the
/// report inside to a third.
fn nsys_jax_archive(nsys: &Path, report: &Path, dir: &Path, damage: bool) -> (PathBuf, PathBuf) {
    let ours = dir.join("ours.zip");
    assert_ok(&run_with_nsys(
        nsys,
        &os(&args![
            "archive",
            report,
            "-o",
            &ours,
            "--cache-dir",
            dir.join("archive-cache"),
            "-q"
        ]),
    ));
    let theirs = dir.join(if damage {
        "damaged.zip"
    } else {
        "nsys-jax.zip"
    });
    let mut src = zip::ZipArchive::new(std::fs::File::open(&ours).unwrap()).unwrap();
    let mut dst = zip::ZipWriter::new(std::fs::File::create(&theirs).unwrap());
    for i in 0..src.len() {
        use std::io::{Read, Write};
        let mut f = src.by_index(i).unwrap();
        let name = f.name().unwrap().to_string();
        if name.starts_with("nsys-jax-pipe/")
            || name.starts_with("analysis/")
            || name == "import-diagnostics.json"
        {
            continue;
        }
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        if damage && name.ends_with(".nsys-rep") {
            bytes.truncate(bytes.len() / 3);
        }
        dst.start_file(name, zip::write::SimpleFileOptions::default())
            .unwrap();
        dst.write_all(&bytes).unwrap();
    }
    dst.finish().unwrap();
    (ours, theirs)
}

fn analyze_with(
    nsys: &Path,
    cache: &Path,
    out: &Path,
    analyses: &[&str],
    input: &Path,
) -> std::process::Output {
    let mut a = args!["analyze", "--cache-dir", cache, "-o", out];
    for x in analyses {
        a.extend(args!["--analysis", x]);
    }
    a.push(input.into());
    run_with_nsys(nsys, &os(&a))
}

fn executed(out: &Path, kind: &str) -> usize {
    json(&out.join("pipeline-run.json"))["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == kind && n["status"] == "executed")
        .count()
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn an_nsys_jax_archive_opens_its_cuda_graphs_from_the_report_inside() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (ours, theirs) = nsys_jax_archive(
        &nsys,
        &data("gemm-bf16-cmdbuf/rep.nsys-rep"),
        tmp.path(),
        false,
    );
    let members = zip_members(&theirs);
    assert!(members.contains(&"rep.nsys-rep".to_string()));
    assert!(
        !members.iter().any(|m| m.starts_with("nsys-jax-pipe/")),
        "{members:?}"
    );
    let cache = tmp.path().join("cache");
    let command_buffers = |input: &Path, out: &str| {
        let out = tmp.path().join(out);
        let o = analyze_with(&nsys, &cache, &out, &["ops"], input);
        assert_ok(&o);
        (json(&out.join("ops.json"))["command_buffers"].clone(), out)
    };
    let (cb, out) = command_buffers(&theirs, "theirs");
    let (ms, attributed) = (
        cb["ms"].as_f64().unwrap(),
        cb["attributed_ms"].as_f64().unwrap(),
    );
    assert!(ms > 0.0 && attributed >= 0.95 * ms, "{cb}");
    assert_eq!(
        executed(&out, "nsys-export"),
        1,
        "the report inside, exported once"
    );
    // As for the archive this project writes.
    assert_eq!(command_buffers(&ours, "ours").0, cb);
    // A second analysis exports nothing and computes nothing.
    let (again, out) = command_buffers(&theirs, "again");
    assert_eq!(again, cb);
    assert_eq!(executed(&out, "nsys-export"), 0);
    let run = json(&out.join("pipeline-run.json"));
    assert!(
        run["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"] != "executed"),
        "{run}"
    );
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn an_nsys_jax_archive_of_an_incomplete_import_gets_the_warning() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (_, theirs) = nsys_jax_archive(
        &nsys,
        &data("whole-program-cuda13.nsys-rep"),
        tmp.path(),
        false,
    );
    let o = analyze_with(
        &nsys,
        &tmp.path().join("cache"),
        &tmp.path().join("out"),
        &["summary"],
        &theirs,
    );
    assert_ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("could not fully import")
            && err.contains("Unknown driver API function index: 780"),
        "{err}"
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("NVTX-only capture"), "{text}");
    assert!(
        text.contains("could not import the capture's GPU work"),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn a_damaged_report_inside_costs_only_what_it_would_give() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (_, damaged) = nsys_jax_archive(
        &nsys,
        &data("gemm-bf16-cmdbuf/rep.nsys-rep"),
        tmp.path(),
        true,
    );
    let out = tmp.path().join("out");
    let o = analyze_with(
        &nsys,
        &tmp.path().join("cache"),
        &out,
        &["summary", "ops"],
        &damaged,
    );
    assert_ok(&o);
    let summary = json(&out.join("summary.json"));
    let text = String::from_utf8_lossy(&o.stdout).replace("\n      ", " ");
    assert!(
        text.contains("the report inside (rep.nsys-rep) could not be read")
            && text.contains("the kernels of its CUDA graphs"),
        "{text}"
    );
    // The other analyses ran: the module table is there, the graphs counted whole.
    assert!(
        !summary["modules"].as_array().unwrap().is_empty(),
        "{summary}"
    );
    let cb = &json(&out.join("ops.json"))["command_buffers"];
    assert_eq!(cb["attributed_ms"].as_f64(), Some(0.0), "{cb}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("damaged.zip: the report inside (rep.nsys-rep) could not be read"),
        "{err}"
    );
}
