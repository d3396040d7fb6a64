//! `run` for real: a small JAX program on the CPU (JAX from PyPI, `scripts/install-jax.sh`)
//! under the real `nsys profile --trace=nvtx` (the Nsight Systems `scripts/install-nsys.sh`
//! installs, importer included). No stand-in: what a user without a GPU can do.

use crate::common::*;
use std::path::Path;

const PROGRAM: &str = r#"
import os
# Set by the program itself, before JAX reads it.
os.environ["XLA_FLAGS"] += " --xla_cpu_use_thunk_runtime=true"
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
    // What the run was: the JAX the program imported, the flags it ran with (given and set
    // by itself), the command and the Nsight Systems.
    let jax_version = String::from_utf8(
        std::process::Command::new(&python)
            .args(["-c", "import jax; print(jax.__version__)"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    assert!(!jax_version.is_empty());
    let record: serde_json::Value =
        serde_json::from_slice(&zip_read(&zip, "nsys-jax-pipe/run-metadata.json")).unwrap();
    let py = &record["python"][0];
    assert_eq!(py["imported"]["jax"], jax_version.as_str(), "{record}");
    let seen = py["environment"]["XLA_FLAGS"].as_str().unwrap();
    assert!(
        seen.contains("--xla_cpu_enable_fast_math=false")
            && seen.contains("--xla_cpu_use_thunk_runtime=true"),
        "{seen}"
    );
    assert_eq!(
        record["environment"]["JAX_ENABLE_COMPILATION_CACHE"],
        "false"
    );
    assert_eq!(py["backend"]["platform"], "cpu", "{record}");
    assert!(record["command"][1].as_str().unwrap().ends_with("step.py"));
    assert!(record["nsys_version"].as_str().unwrap().starts_with("20"));
    // The archive analyses like any other, and says what the run was.
    let again = analyze(
        &tmp.path().join("cache2"),
        &tmp.path().join("again"),
        &[],
        &[zip.clone()],
    );
    assert_ok(&again);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains(&format!("jax {jax_version}")), "{text}");
    assert!(text.contains("--xla_cpu_use_thunk_runtime=true"), "{text}");
    assert!(Path::new(&tmp.path().join("again/summary.json")).is_file());
    let prov: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("again/provenance.json")).unwrap())
            .unwrap();
    assert_eq!(prov["facts"]["imported jax"], jax_version.as_str());
}

/// A JAX program annotated with the `nvtx` package (0.2.17) as users write it: nested ranges in
/// the default domain and in one of its own, a range with no work, marks. Under Nsight
/// Systems 2023.4 the package drops every one of them unless `run` works around its domain
/// check (README, "User NVTX ranges"): with the workaround all of them reach the archive,
/// counted as opened; with `--no-nvtx-workaround` none does.
const NVTX_PROGRAM: &str = r#"
import time
import jax
import jax.numpy as jnp
import nvtx


@jax.jit
def step(w, x):
    return jnp.tanh(x @ w).sum()


w = jnp.ones((64, 64))
x = jnp.ones((8, 64))
with nvtx.annotate("epoch"):
    for i in range(4):
        with nvtx.annotate("train_step"):
            with nvtx.annotate("data", domain="myapp"):
                time.sleep(0.001)
            step(w, x).block_until_ready()
        nvtx.mark("checkpoint")
print("annotated steps done")
"#;

#[test]
#[cfg_attr(
    not(all(test_nsys, test_jax)),
    ignore = "needs nsys with its importer and a Python with JAX and nvtx"
)]
fn run_records_the_nvtx_packages_ranges() {
    let Some(nsys) = nsys() else { return };
    let Some(python) = crate::common::testutil::jax_python() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("annotated.py");
    std::fs::write(&program, NVTX_PROGRAM).unwrap();
    let user_rows = |extra: &[&str], name: &str| {
        let out = tmp.path().join(name);
        let o = std::process::Command::new(bin())
            .args(["run", "-q", "--no-analysis", "--nsys"])
            .arg(&nsys)
            .arg("-o")
            .arg(&out)
            .args(extra)
            .args(["--trace=nvtx", "--"])
            .arg(&python)
            .arg(&program)
            .env("NSYS_JAX_PIPE_CACHE", tmp.path().join("cache"))
            .output()
            .unwrap();
        assert_ok(&o);
        assert!(String::from_utf8_lossy(&o.stdout).contains("annotated steps done"));
        let zip = out.with_extension("zip");
        let b = nsys_jax_pipe::api::read_parquet(zip_read(&zip, "nsys-jax-pipe/nvtx-user.parquet"))
            .unwrap();
        let col = |c: &str| {
            b.column_by_name(c)
                .unwrap()
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .unwrap()
                .iter()
                .map(|s| s.unwrap().to_string())
                .collect::<Vec<_>>()
        };
        let mut rows: Vec<String> = col("Kind")
            .into_iter()
            .zip(col("Domain"))
            .zip(col("Name"))
            .map(|((k, d), n)| format!("{k} {d}:{n}"))
            .collect();
        rows.sort();
        rows
    };
    let mut want = vec!["PushPop :epoch".to_string()];
    want.extend(std::iter::repeat_n("PushPop :train_step".to_string(), 4));
    want.extend(std::iter::repeat_n("PushPop myapp:data".to_string(), 4));
    want.extend(std::iter::repeat_n("Mark :checkpoint".to_string(), 4));
    want.sort();
    assert_eq!(user_rows(&[], "with"), want);
    assert_eq!(
        user_rows(&["--no-nvtx-workaround"], "without"),
        Vec::<String>::new()
    );
}
