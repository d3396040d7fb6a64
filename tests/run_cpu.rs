//! `run` for real: a small JAX program on the CPU (JAX from PyPI, `scripts/install-jax.sh`)
//! under the real `nsys profile --trace=nvtx` (the Nsight Systems `scripts/install-nsys.sh`
//! installs, importer included). No stand-in: what a user without a GPU can do.

use crate::common::*;
use std::path::Path;

const PROGRAM: &str = r#"
import os
import jax
import jax.numpy as jnp

print("XLA_FLAGS=" + os.environ.get("XLA_FLAGS", ""))
print("COMPILATION_CACHE=" + os.environ.get("JAX_ENABLE_COMPILATION_CACHE", ""))


@jax.jit
def step(w, x):
    return jnp.tanh(x @ w).sum()


w = jnp.ones((64, 64))
x = jnp.ones((8, 64))
for _ in range(5):
    step(w, x).block_until_ready()
print("steps done")
"#;

#[test]
#[cfg_attr(
    not(all(test_nsys, test_jax)),
    ignore = "needs nsys with its importer and a Python with JAX"
)]
fn run_profiles_a_jax_program_on_the_cpu_with_the_real_nsys() {
    let Some(nsys) = nsys() else { return };
    let Some(python) = crate::common::testutil::jax_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("step.py");
    std::fs::write(&program, PROGRAM).unwrap();
    let out = tmp.path().join("out/cpu");
    let o = std::process::Command::new(bin())
        .args(["run", "--nsys"])
        .arg(&nsys)
        .arg("-o")
        .arg(&out)
        .args(["--trace=nvtx", "--html"])
        .arg(tmp.path().join("report.html"))
        .arg("--")
        .arg(&python)
        .arg(&program)
        .env("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
        .env_remove("JAX_ENABLE_COMPILATION_CACHE")
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{stdout}\n{stderr}", o.status);
    // The program saw its own XLA flag kept, the dump flags added, the cache off.
    let flags = stdout
        .lines()
        .find_map(|l| l.strip_prefix("XLA_FLAGS="))
        .unwrap_or_else(|| panic!("the program did not run: {stdout}"));
    assert!(
        flags.contains("--xla_cpu_enable_fast_math=false"),
        "{flags}"
    );
    assert!(flags.contains("--xla_dump_to="), "{flags}");
    assert!(flags.contains("--xla_dump_hlo_as_proto=true"), "{flags}");
    assert!(stdout.contains("COMPILATION_CACHE=false"), "{stdout}");
    assert!(stdout.contains("steps done"), "{stdout}");
    assert!(stderr.contains("NVTX-only capture"), "{stderr}");

    let zip = out.with_extension("zip");
    let members = zip_members(&zip);
    // The dump, harvested: the step function's optimized HLO is there.
    assert!(
        members.iter().any(|m| m.starts_with("dump/")
            && m.contains("jit_step")
            && m.ends_with("after_optimizations.hlo.pb.xz")),
        "{members:?}"
    );
    for m in [
        "cpu.nsys-rep",
        "report_nvtx_pushpop_trace.parquet",
        "analysis/summary/summary.json",
        "analysis/compilation/compilation.json",
        "report.html",
    ] {
        assert!(members.contains(&m.to_string()), "{m} missing: {members:?}");
    }
    let compilation: serde_json::Value =
        serde_json::from_slice(&zip_read(&zip, "analysis/compilation/compilation.json")).unwrap();
    assert!(compilation["compilations"].is_array(), "{compilation}");
    assert!(tmp.path().join("report.html").is_file());
    // The archive analyses like any other.
    assert_ok(&analyze(
        &tmp.path().join("cache2"),
        &tmp.path().join("again"),
        &["-q"],
        &[zip.clone()],
    ));
    assert!(Path::new(&tmp.path().join("again/summary.json")).is_file());
}
