//! The pip package: the wheel built by maturin and installed into a fresh virtual environment
//! (`scripts/install-wheel.sh .wheel`, which `.ci/run` runs). Its commands run the README's
//! example, answer under nsys-jax's names, and its Python package loads the frames.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn venv_bin(python: &Path, name: &str) -> PathBuf {
    python.parent().unwrap().join(name)
}

fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[cfg_attr(
    not(test_wheel),
    ignore = "needs the wheel installed (scripts/install-wheel.sh .wheel)"
)]
fn installed_commands_run_the_readme_example() {
    let Some(python) = crate::common::testutil::wheel_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // The README's example, with the installed command.
    let o = Command::new(venv_bin(&python, "nsys-jax-pipe"))
        .arg("analyze")
        .arg(checkout().join("examples/mlp-fsdp-2gpu.zip"))
        .arg("-o")
        .arg(&out)
        .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert_ok(&o);
    let summary = json(&out.join("summary.json"));
    assert!(summary.is_object(), "{summary}");
    // The same numbers as the binary built here.
    let here = tmp.path().join("here");
    assert_ok(&analyze(
        &tmp.path().join("cache2"),
        &here,
        &[],
        &[checkout().join("examples/mlp-fsdp-2gpu.zip")],
    ));
    assert_eq!(
        std::fs::read(out.join("summary.json")).unwrap(),
        std::fs::read(here.join("summary.json")).unwrap()
    );
    // nsys-jax's names: the installed scripts run the binary as those commands.
    let o = Command::new(venv_bin(&python, "nsys-jax"))
        .arg("--help")
        .output()
        .unwrap();
    assert_ok(&o);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("nsys-jax"), "{help}");
    let o = Command::new(venv_bin(&python, "nsys-jax-combine"))
        .arg("--help")
        .output()
        .unwrap();
    assert_ok(&o);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("Combine") || help.contains("combine"),
        "{help}"
    );
    // A combine through the nsys-jax-combine name writes the combined archive.
    let combined = tmp.path().join("combined.zip");
    let f = fixtures();
    if let Some(f) = f {
        let o = Command::new(venv_bin(&python, "nsys-jax-combine"))
            .arg("-o")
            .arg(&combined)
            .args(pax_archives(&f))
            .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
            .output()
            .unwrap();
        assert_ok(&o);
        assert!(
            zip_members(&combined)
                .iter()
                .any(|m| m.starts_with("nvtx_gpu_proj_trace/"))
        );
    }
}

#[test]
#[cfg_attr(
    not(test_wheel),
    ignore = "needs the wheel installed (scripts/install-wheel.sh .wheel)"
)]
fn installed_package_loads_the_example_frames() {
    let Some(python) = crate::common::testutil::wheel_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let script = r#"
import sys, nsys_jax_pipe
d = nsys_jax_pipe.load(sys.argv[1], cache_dir=sys.argv[2])
assert list(d.module.index.names) == ["ProgramId", "ProgramExecution", "Device"], d.module.index.names
assert len(d.module) and len(d.thunk) and len(d.communication), (len(d.module), len(d.thunk))
# The capture began after compilation: an empty compile frame, with nsys-jax's index.
assert d.compile is not None and list(d.compile.index.names) == ["ProfileName", "RangeId"]
assert d.init is not None and len(d.init.module), "warm-up rows"
raw = nsys_jax_pipe.load(sys.argv[1], cache_dir=sys.argv[2], warmup_removal=False, align=False, frames=["module"])
assert raw.thunk is None and raw.init is None
assert len(raw.module) == len(d.module) + len(d.init.module)
try:
    nsys_jax_pipe.load(sys.argv[1] + ".missing", cache_dir=sys.argv[2])
except RuntimeError as e:
    assert ".missing" in str(e), e
else:
    raise AssertionError("no error for a missing input")
print("modules", len(d.module), "thunks", len(d.thunk), "corrections", d.device_corrections_ms)
"#;
    let o = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(checkout().join("examples/mlp-fsdp-2gpu.zip"))
        .arg(tmp.path().join("cache"))
        // The package finds its own binary, not one on PATH.
        .env("PATH", "/usr/bin:/bin")
        .env_remove("NSYS_JAX_PIPE_BIN")
        .output()
        .unwrap();
    assert_ok(&o);
    println!("{}", String::from_utf8_lossy(&o.stdout));
}

/// `tests/python/frames_match_notebook.py` with the installed package: `load` of `inputs`
/// against the notebook's results in `reference` (under the fixtures).
fn matches_notebook(reference: &str, inputs: impl FnOnce(&Path) -> Vec<PathBuf>) {
    let Some(python) = crate::common::testutil::wheel_python() else {
        return;
    };
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(&python)
        .arg(checkout().join("tests/python/frames_match_notebook.py"))
        .arg(f.join(reference))
        .arg(tmp.path().join("cache"))
        .args(inputs(&f))
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&o.stdout));
    assert_ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("ALL OK"));
}

#[test]
#[cfg_attr(
    not(all(test_wheel, test_fixtures)),
    ignore = "needs the wheel installed and the shared fixtures"
)]
fn installed_package_gives_the_notebook_steady_frames_on_pax() {
    matches_notebook("reference/pax4-notebook/notebook.json.xz", pax_archives);
}

#[test]
#[cfg_attr(
    not(all(test_wheel, test_fixtures)),
    ignore = "needs the wheel installed and the shared fixtures"
)]
fn installed_package_gives_the_notebook_steady_frames_on_the_example() {
    matches_notebook("reference/mlp-notebook/notebook.json.xz", |_| {
        vec![checkout().join("examples/mlp-fsdp-2gpu.zip")]
    });
}

/// The wheel this environment was installed from (`scripts/install-wheel.sh` leaves it in
/// the environment's `wheels/`).
fn installed_wheel(python: &Path) -> Option<PathBuf> {
    let root = python.parent()?.parent()?.join("wheels");
    let mut found = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with(".build-env") {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "whl")
                && p.to_string_lossy().contains("x86_64")
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found.pop()
}

/// An archive's own `install.sh` makes a fresh virtual environment (this version's wheel and
/// JupyterLab) in which its `Analysis.ipynb` runs end to end with a real kernel (nbclient),
/// on the example: every cell without an error, and the views show the example's numbers.
#[test]
#[cfg_attr(
    not(test_wheel),
    ignore = "needs the wheel installed (scripts/install-wheel.sh .wheel) and PyPI for JupyterLab"
)]
fn the_archive_s_notebook_runs_in_the_environment_its_install_script_makes() {
    let Some(python) = crate::common::testutil::wheel_python() else {
        return;
    };
    let wheel = installed_wheel(&python).expect("the wheel beside the environment");
    let tmp = tempfile::tempdir().unwrap();
    // This version's archive of the example: `combine` of its one process.
    let archive = tmp.path().join("example.zip");
    let o = Command::new(venv_bin(&python, "nsys-jax-pipe"))
        .arg("combine")
        .arg(checkout().join("examples/mlp-fsdp-2gpu.zip"))
        .arg("-o")
        .arg(&archive)
        .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert_ok(&o);
    let dir = tmp.path().join("example");
    zip::ZipArchive::new(std::fs::File::open(&archive).unwrap())
        .unwrap()
        .extract(&dir)
        .unwrap();
    // The script, as a reader runs it (setting up only: no JupyterLab started).
    let o = Command::new("bash")
        .arg(dir.join("install.sh"))
        .arg(&wheel)
        .env("NSYS_JAX_PIPE_NO_LAB", "1")
        .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert_ok(&o);
    let venv_python = dir.join("nsys_jax_pipe_venv/bin/python");
    assert!(venv_python.is_file(), "install.sh made no environment");
    let script = r#"
import json, sys, nbclient, nbformat
nb = nbformat.read(sys.argv[1], as_version=4)
nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                        resources={"metadata": {"path": sys.argv[2]}}).execute()
outputs = []
for cell in nb.cells:
    if cell.cell_type != "code":
        continue
    for o in cell.outputs:
        if o.output_type == "error":
            raise SystemExit(f"cell failed: {o.ename}: {o.evalue}")
        outputs.append({"type": o.output_type, "text": o.get("text", ""),
                        "data": sorted(o.get("data", {})),
                        "plain": o.get("data", {}).get("text/plain", "")})
print(json.dumps(outputs))
"#;
    let o = Command::new(&venv_python)
        .arg("-c")
        .arg(script)
        .arg(dir.join("Analysis.ipynb"))
        .arg(&dir)
        .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
        .env_remove("NSYS_JAX_PIPE_BIN")
        .output()
        .unwrap();
    assert_ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let outputs: Vec<serde_json::Value> =
        serde_json::from_str(stdout.lines().last().unwrap_or("[]")).unwrap();
    let all: String = outputs
        .iter()
        .map(|o| {
            format!(
                "{}{}",
                o["text"].as_str().unwrap(),
                o["plain"].as_str().unwrap()
            )
        })
        .collect();
    // The example: 8 steady-state executions of jit_train_step on 2 devices, its headline,
    // the top thunk, the bandwidth of the 16 MiB reduce-scatter, two devices' lateness,
    // the host-bound finding and the MFU.
    for expected in [
        "8 steady-state module executions on 2 device(s)",
        "step 729 µs",
        "jit_train_step",
        "reduce-scatter.4",
        "16777216",
        "No XLA compilation in the profile.",
        "[host-bound]",
        "MFU 0.744 %",
        "lateness_us_mean",
    ] {
        assert!(all.contains(expected), "no {expected:?} in {all}");
    }
    assert!(
        outputs.iter().any(|o| o["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "image/svg+xml")),
        "no flame graph drawn"
    );
}
