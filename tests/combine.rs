//! `combine` (and `nsys-jax-combine` command lines): the combined layout of real per-process
//! archives and captures, its analysis against the inputs', and inputs that cannot be one run.

use crate::common::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

fn combine(dir: &Path, extra: &[&str], inputs: &[PathBuf]) -> std::process::Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "combine".into(),
        "--cache-dir".into(),
        dir.join("cache").into(),
    ];
    args.extend(extra.iter().map(|s| s.into()));
    args.extend(inputs.iter().map(|p| p.into()));
    run_with_nsys(&nsys().unwrap_or_else(|| "nsys".into()), &os(&args))
}

/// Every member of a per-process input appears in the combined archive once, either under
/// its own name (identical in every input, or a shared source/schema file) or as
/// `name/<stem>` for each input whose copy differs.
fn check_layout(combined: &Path, inputs: &[PathBuf], stems: &[&str]) {
    let members = zip_members(combined);
    let mut per_input: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, p) in inputs.iter().enumerate() {
        for m in zip_members(p) {
            per_input.entry(m).or_default().push(i);
        }
    }
    for (name, present) in &per_input {
        if name.ends_with(".nsys-rep") {
            continue;
        }
        let contents: Vec<Vec<u8>> = present
            .iter()
            .map(|i| zip_read(&inputs[*i], name))
            .collect();
        let same = contents.iter().all(|c| c == &contents[0]);
        let shared = name.starts_with("sources/") || name.starts_with("protos/");
        if same && (present.len() == inputs.len() || shared) {
            assert!(members.contains(name), "{name} should be stored once");
            assert_eq!(zip_read(combined, name), contents[0], "{name}");
        } else {
            assert!(!members.contains(name), "{name} differs: should be split");
            for (i, c) in present.iter().zip(&contents) {
                let split = format!("{name}/{}", stems[*i]);
                assert_eq!(&zip_read(combined, &split), c, "{split}");
            }
        }
    }
    let expected: usize = per_input
        .iter()
        .filter(|(n, _)| !n.ends_with(".nsys-rep"))
        .map(|(name, present)| {
            let first = zip_read(&inputs[present[0]], name);
            let same = present.iter().all(|i| zip_read(&inputs[*i], name) == first);
            let shared = name.starts_with("sources/") || name.starts_with("protos/");
            if same && (present.len() == inputs.len() || shared) {
                1
            } else {
                present.len()
            }
        })
        .sum();
    let analyses = members
        .iter()
        .filter(|m| m.starts_with("analysis/"))
        .count();
    let reports = members.iter().filter(|m| m.ends_with(".nsys-rep")).count();
    // The HTML report of the analyses, when they ran.
    let page = usize::from(members.iter().any(|m| m == "report.html"));
    assert_eq!(
        page,
        usize::from(analyses > 0),
        "report.html with the analyses"
    );
    // install.sh and the notebook, as every archive written here.
    let reader = 2;
    assert_eq!(
        members.len(),
        expected + analyses + reports + page + reader,
        "no other members"
    );
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn four_pax_archives_combine_into_the_nsys_jax_layout_and_analyse_the_same() {
    let Some(f) = fixtures() else { return };
    let inputs = pax_archives(&f);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pax4.zip");
    let o = combine(
        dir.path(),
        &[
            "-o",
            out.to_str().unwrap(),
            "--analysis",
            "summary",
            "--analysis",
            "communication",
        ],
        &inputs,
    );
    assert_ok(&o);
    check_layout(&out, &inputs, &["proc0", "proc1", "proc2", "proc3"]);
    let members = zip_members(&out);
    for stem in ["proc0", "proc1", "proc2", "proc3"] {
        assert!(members.contains(&format!("nvtx_gpu_proj_trace/trace.parquet/{stem}")));
        assert!(members.contains(&format!("report_nvtx_pushpop_trace.csv.xz/{stem}")));
    }

    // The combined archive analyses exactly like its four inputs, and like what it stored.
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    assert_ok(&analyze(&dir.path().join("c1"), &a, &[], &inputs));
    assert_ok(&analyze(&dir.path().join("c2"), &b, &[], &[out.clone()]));
    for name in ["summary.json", "communication.json", "compilation.json"] {
        assert_eq!(
            without_labels(json(&a.join(name))),
            without_labels(json(&b.join(name))),
            "{name}"
        );
    }
    let stored: serde_json::Value =
        serde_json::from_slice(&zip_read(&out, "analysis/summary/summary.json")).unwrap();
    assert_eq!(
        without_labels(stored),
        without_labels(json(&a.join("summary.json")))
    );
    // The numbers of the Python tool's combined reference (tests/pax_reference.rs checks
    // every cell of the inputs' analysis against it).
    let s = json(&b.join("summary.json"));
    let execs: BTreeMap<String, u64> = s["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                format!(
                    "{} {}",
                    m["name"].as_str().unwrap(),
                    &m["program_id"].as_str().unwrap()[..6]
                ),
                m["executions"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(execs["jit__psum 6f8097"], 12, "{execs:?}");
    assert_eq!(execs["pjit__wrapped_step_fn 25fa0b"], 9, "{execs:?}");
    assert_eq!(execs["pjit__wrapped_step_fn 04555b"], 3, "{execs:?}");

    // Existing output: refused without -f; the same inputs again: replaced with -f.
    let o = combine(dir.path(), &["-o", out.to_str().unwrap()], &inputs);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists"));
    let o = combine(dir.path(), &["-o", out.to_str().unwrap(), "-f"], &inputs);
    assert_ok(&o);
    assert!(!zip_members(&out).iter().any(|m| m.starts_with("analysis/")));
    // Again: the archive there is, unchanged, what this writes: left as it is.
    let before = std::fs::metadata(&out).unwrap().modified().unwrap();
    let o = combine(dir.path(), &["-o", out.to_str().unwrap(), "-f"], &inputs);
    assert_ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("unchanged: "), "{text}");
    assert_eq!(std::fs::metadata(&out).unwrap().modified().unwrap(), before);
    // Touched by someone else: written again.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&out)
        .unwrap()
        .write_all(b"x")
        .unwrap();
    let o = combine(dir.path(), &["-o", out.to_str().unwrap(), "-f"], &inputs);
    assert_ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote "));
    assert!(!zip_members(&out).is_empty());
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn inputs_that_cannot_be_combined_are_named() {
    let Some(f) = fixtures() else { return };
    let inputs = pax_archives(&f);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.zip");
    // The same archive twice, under two names.
    let copy = dir.path().join("again.zip");
    std::fs::copy(&inputs[0], &copy).unwrap();
    let o = combine(
        dir.path(),
        &["-o", out.to_str().unwrap()],
        &[inputs[0].clone(), copy.clone()],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("proc0.zip and") && err.contains("again.zip hold the same profile"),
        "{err}"
    );
    // Two inputs with the same stem.
    let sub = dir.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(&inputs[1], sub.join("proc0.zip")).unwrap();
    let o = combine(
        dir.path(),
        &["-o", out.to_str().unwrap()],
        &[inputs[0].clone(), sub.join("proc0.zip")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the same name \"proc0\""));
    // An input from another program.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let o = combine(
        dir.path(),
        &["-o", out.to_str().unwrap()],
        &[inputs[0].clone(), example],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("profile different programs"), "{err}");
    assert!(!out.exists(), "nothing is written");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn two_process_captures_combine_end_to_end() {
    let Some(f) = fixtures() else { return };
    if nsys().is_none() {
        return;
    }
    let cap = f.join("h200/fsdp2_2proc");
    let inputs = vec![cap.join("rank0.nsys-rep"), cap.join("rank1.nsys-rep")];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fsdp2_2proc.zip");
    let o = combine(
        dir.path(),
        &[
            "-o",
            out.to_str().unwrap(),
            "--keep-nsys-rep",
            "all",
            "--analysis",
            "summary",
            "--analysis",
            "stragglers",
        ],
        &inputs,
    );
    assert_ok(&o);
    // Alignment and stragglers across the two processes (each report has its own time
    // origin: the clocks differ by ~49 ms, which the alignment recovers).
    let st: serde_json::Value =
        serde_json::from_slice(&zip_read(&out, "analysis/stragglers/stragglers.json")).unwrap();
    assert_eq!(st["devices"], 2, "{st}");
    assert!(st["aligned_instances"].as_u64().unwrap() >= 100, "{st}");
    let off0 = st["offsets_us"]["0"].as_f64().unwrap();
    let off1 = st["offsets_us"]["1"].as_f64().unwrap();
    assert!((off1 - off0 - 49_384.0).abs() < 100.0, "{off0} {off1}");
    let per_device = st["per_device"].as_array().unwrap();
    let last: u64 = per_device
        .iter()
        .map(|d| d["times_last"].as_u64().unwrap())
        .sum();
    assert_eq!(
        last,
        per_device[0]["instances"].as_u64().unwrap(),
        "one last device per instance"
    );
    let modules: Vec<&str> = st["per_module"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(modules, ["jit_train_step", "jit_evaluate"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("Arrival at collectives"));
    let members = zip_members(&out);
    for m in [
        "rank0.nsys-rep",
        "rank1.nsys-rep",
        "nvtx_gpu_proj_trace/trace.parquet/rank0",
        "nvtx_gpu_proj_trace/trace.parquet/rank1",
        "report_nvtx_pushpop_trace.parquet/rank0",
        "report_nvtx_pushpop_trace.parquet/rank1",
        "protos/xla/xla_data.proto",
        "protos/xla/service/hlo.proto",
        "analysis/summary/summary.json",
        "report.html",
    ] {
        assert!(members.contains(&m.to_string()), "{m} missing: {members:?}");
    }
    // The combined archive analyses like the two reports.
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    assert_ok(&analyze(
        &dir.path().join("cache"),
        &a,
        &["--analysis", "summary"],
        &inputs,
    ));
    assert_ok(&analyze(
        &dir.path().join("cache"),
        &b,
        &["--analysis", "summary"],
        &[out.clone()],
    ));
    assert_eq!(
        without_labels(json(&a.join("summary.json"))),
        without_labels(json(&b.join("summary.json")))
    );
    // nsys-jax-combine's command line, through a link of that name: first report only.
    let link = dir.path().join("nsys-jax-combine");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let out2 = dir.path().join("via-link");
    let o = std::process::Command::new(&link)
        .args(["-o", out2.to_str().unwrap(), "--cache-dir"])
        .arg(dir.path().join("cache"))
        .args(&inputs)
        .env("NSYS", nsys().unwrap())
        .output()
        .unwrap();
    assert_ok(&o);
    let members = zip_members(&dir.path().join("via-link.zip"));
    assert!(members.contains(&"rank0.nsys-rep".to_string()));
    assert!(!members.contains(&"rank1.nsys-rep".to_string()));
}
