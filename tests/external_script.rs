//! An analysis script run the way nsys-jax runs its analysis scripts.

use crate::common::*;

const SCRIPT: &str = r#"
import os, sys, zipfile
prefix = sys.argv[-1]
extra = sys.argv[1:-1]
assert os.path.isdir(prefix), prefix
trace = os.path.join(prefix, "nvtx_gpu_proj_trace", "trace.parquet")
kind = "combined" if os.path.isdir(trace) else "single"
with open("result.txt", "w") as f:
    f.write(f"{kind} {' '.join(extra)} {len(os.listdir(os.path.join(prefix, 'dump')))}\n")
os.makedirs("sub", exist_ok=True)
open(os.path.join("sub", "cwd.txt"), "w").write(os.getcwd())
print("script ran on", kind)
"#;

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn external_script_runs_once_and_its_outputs_are_collected() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("my_analysis.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let cache = tmp.path().join("cache");
    let s = script.to_str().unwrap();
    let inputs = &pax_archives(&f)[..2];
    let out1 = tmp.path().join("o1");
    let o = analyze(
        &cache,
        &out1,
        &["--analysis", s, "--analysis-arg", "--flag=1"],
        inputs,
    );
    assert_ok(&o);
    let result = std::fs::read_to_string(out1.join("analysis/my_analysis/result.txt")).unwrap();
    assert!(result.starts_with("combined --flag=1 "), "{result}");
    assert!(out1.join("analysis/my_analysis/sub/cwd.txt").is_file());
    assert!(String::from_utf8_lossy(&o.stdout).contains("script ran on combined"));

    // Same script, same inputs: reused, not run again.
    let out2 = tmp.path().join("o2");
    assert_ok(&analyze(
        &cache,
        &out2,
        &["--analysis", s, "--analysis-arg", "--flag=1"],
        inputs,
    ));
    let run = json(&out2.join("pipeline-run.json"));
    assert_eq!(run["executed"], 0, "{run}");
    assert_eq!(
        std::fs::read_to_string(out2.join("analysis/my_analysis/result.txt")).unwrap(),
        result
    );

    // A script that fails: clear error, non-zero exit.
    let bad = tmp.path().join("broken.py");
    std::fs::write(&bad, "raise SystemExit('something went wrong')\n").unwrap();
    let o = analyze(
        &cache,
        &tmp.path().join("o3"),
        &["--analysis", bad.to_str().unwrap()],
        inputs,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("broken.py") && err.contains("something went wrong"),
        "{err}"
    );
}

/// A script given a report sees the archive the report makes (one per report; several
/// reports as one combined folder).
#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn external_script_sees_captures_as_archives() {
    let Some(f) = fixtures() else { return };
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("layout.py");
    std::fs::write(
        &script,
        r#"
import os, sys
prefix = sys.argv[-1]
trace = os.path.join(prefix, "nvtx_gpu_proj_trace", "trace.parquet")
kind = "combined" if os.path.isdir(trace) else "single"
dumps = [f for f in os.listdir(os.path.join(prefix, "dump")) if f.endswith(".hlo.pb.xz")]
print(kind, sorted(f for f in os.listdir(prefix) if f.endswith(".nsys-rep")), len(dumps) > 0)
"#,
    )
    .unwrap();
    let cache = tmp.path().join("cache");
    let run_on = |reports: &[&str]| -> String {
        let out = tmp.path().join(format!("o{}", reports.len()));
        let mut a = args![
            "analyze",
            "--cache-dir",
            &cache,
            "-o",
            &out,
            "--analysis",
            &script
        ];
        a.extend(reports.iter().map(|r| f.join(r).into_os_string()));
        let o = run_with_nsys(&nsys, &os(&a));
        assert_ok(&o);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let one = run_on(&["h200/fsdp2_1proc/rep.nsys-rep"]);
    assert!(one.contains("single ['rep.nsys-rep'] True"), "{one}");
    let two = run_on(&[
        "h200/fsdp2_2proc/rank0.nsys-rep",
        "h200/fsdp2_2proc/rank1.nsys-rep",
    ]);
    assert!(
        two.contains("combined ['rank0.nsys-rep', 'rank1.nsys-rep'] True"),
        "{two}"
    );
}
