//! `run` (and the `nsys-jax` names) end to end, with a stand-in nsys first on PATH that runs
//! the program and then leaves a real capture where nsys and XLA would have written theirs:
//! the example profile the repository ships (and, when present, a fixture capture).
//! `nsys export` and `--version` go to the real nsys.

use crate::common::standin::*;
use crate::common::*;
use std::path::Path;
use std::process::Command;

/// The summary analysis stored in an archive: (name, executions) per module.
fn archived_modules(zip: &Path) -> Vec<(String, u64)> {
    let v: serde_json::Value =
        serde_json::from_slice(&zip_read(zip, "analysis/summary/summary.json")).unwrap();
    v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["executions"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn run_writes_the_archive_under_the_expanded_name() {
    let Some(b) = Bench::new() else { return };
    let o = b.run(
        &[
            "run",
            "-o",
            "out/rank%q{RANK}.zip",
            "--label",
            "head-1234abc",
            "--capture-range=cudaProfilerApi",
            "--",
            "sh",
            "-c",
            "echo program-ran",
        ],
        &[
            ("RANK", "3"),
            (
                "NSYS_JAX_PIPE_CACHE",
                b.dir.path().join("cache").to_str().unwrap(),
            ),
        ],
    );
    assert_ok(&o);
    assert!(stdout(&o).contains("program-ran"), "{}", stdout(&o));
    let zip = b.work().join("out/rank3.zip");
    let members = zip_members(&zip);
    for m in [
        "rank3.nsys-rep",
        "nvtx_gpu_proj_trace/trace.parquet",
        "report_nvtx_pushpop_trace.parquet",
        "thread-metadata.parquet",
        "system-metadata.parquet",
        "device-metadata.parquet",
        "protos/xla/xla_data.proto",
        "protos/xla/service/hlo.proto",
        "analysis/summary/summary.json",
        "analysis/communication/communication.json",
        "analysis/compilation/compilation.json",
        "report.html",
    ] {
        assert!(members.contains(&m.to_string()), "{m} missing: {members:?}");
    }
    // The archive carries the HTML report of its analyses.
    let page = String::from_utf8(zip_read(&zip, "report.html")).unwrap();
    for id in ["overview", "modules", "communication", "compilation"] {
        assert!(page.contains(&format!("<section id=\"{id}\">")), "{id}");
    }
    let dumped = members
        .iter()
        .filter(|m| m.starts_with("dump/") && m.ends_with(".xz"))
        .count();
    assert_eq!(dumped, 88, "{members:?}");
    assert_eq!(
        archived_modules(&zip),
        vec![("jit_train_step".to_string(), 8)]
    );
    // The terminal shows the same analyses, and where the archive went.
    let out = stdout(&o);
    // The module row: its name, then its 8 executions.
    assert!(
        out.lines().any(|l| {
            let mut w = l.split_whitespace().skip_while(|w| *w != "jit_train_step");
            w.next().is_some() && w.next() == Some("8")
        }),
        "{out}"
    );
    assert!(out.contains("wrote out/rank3.zip"), "{out}");
    // The report inside is the capture, byte for byte.
    assert_eq!(
        zip_read(&zip, "rank3.nsys-rep"),
        std::fs::read(&example_capture().0).unwrap()
    );
    // nsys got the user's option and the defaults; the temporary folder is gone.
    let log = b.log();
    for opt in [
        "nsys-option --capture-range=cudaProfilerApi",
        "nsys-option --cuda-graph-trace=node",
        "nsys-option --cpuctxsw=none",
        "nsys-option --trace=cuda,nvtx,cublas,cudnn",
        "JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1",
        "JAX_ENABLE_COMPILATION_CACHE=false",
        "program sh -c echo program-ran",
    ] {
        assert!(log.contains(opt), "{opt} not in\n{log}");
    }
    assert!(b.leftovers().is_empty(), "{:?}", b.leftovers());

    // `analyze` of the archive agrees with the analysis stored in it.
    let cache = b.dir.path().join("cache");
    let outdir = b.dir.path().join("analysis");
    let a = analyze(&cache, &outdir, &["--analysis", "summary"], &[zip.clone()]);
    assert_ok(&a);
    assert_eq!(
        without_labels(json(&outdir.join("summary.json"))),
        without_labels(
            serde_json::from_slice(&zip_read(&zip, "analysis/summary/summary.json")).unwrap()
        )
    );
    // `--label` named the archive for `compare`: the same capture as the example, no change.
    let cmp = b.dir.path().join("compare");
    let args = args![
        "compare",
        "--cache-dir",
        &cache,
        "-o",
        &cmp,
        "head-1234abc",
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip"),
    ];
    let c = crate::common::run(&os(&args));
    assert_eq!(c.status.code(), Some(0), "{}{}", stdout(&c), stderr(&c));
    let base = json(&cmp.join("compare.json"))["base"]["inputs"][0].clone();
    assert!(
        base.as_str().unwrap().ends_with("work/out/rank3.zip"),
        "{base}"
    );
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn user_options_win_over_defaults_and_undefined_variables_stay() {
    let Some(b) = Bench::new() else { return };
    let o = b.run(
        &[
            "run",
            "-o",
            "x%q{NOT_SET_ANYWHERE}y%%",
            "-t",
            "cuda,nvtx,osrt",
            "--cpuctxsw=process-tree",
            "--no-analysis",
            "--",
            "true",
        ],
        &[],
    );
    assert_ok(&o);
    assert!(
        stderr(&o).contains("NOT_SET_ANYWHERE is not set"),
        "{}",
        stderr(&o)
    );
    let zip = b.work().join("x%q{NOT_SET_ANYWHERE}y%.zip");
    assert!(
        zip.is_file(),
        "{:?}",
        std::fs::read_dir(b.work()).unwrap().collect::<Vec<_>>()
    );
    assert!(!zip_members(&zip).iter().any(|m| m.starts_with("analysis/")));
    let log = b.log();
    assert!(
        log.contains("nsys-option -t\nnsys-option cuda,nvtx,osrt"),
        "{log}"
    );
    assert!(log.contains("nsys-option --cpuctxsw=process-tree"), "{log}");
    assert!(!log.contains("--trace="), "{log}");
    assert!(!log.contains("--cpuctxsw=none"), "{log}");
    assert!(log.contains("--cuda-graph-trace=node"), "{log}");
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn existing_archives_need_force_and_default_names_never_collide() {
    let Some(b) = Bench::new() else { return };
    std::fs::write(b.work().join("taken.zip"), b"keep me").unwrap();
    let o = b.run(
        &[
            "run",
            "-o",
            "taken",
            "--",
            "sh",
            "-c",
            "echo SHOULD-NOT-RUN",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("taken.zip: already exists (use -f to overwrite)"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).contains("SHOULD-NOT-RUN"), "the program ran");
    assert_eq!(
        std::fs::read(b.work().join("taken.zip")).unwrap(),
        b"keep me"
    );

    let o = b.run(
        &[
            "run",
            "-o",
            "taken.nsys-rep",
            "-f",
            "--no-analysis",
            "--",
            "true",
        ],
        &[],
    );
    assert_ok(&o);
    assert!(zip_members(&b.work().join("taken.zip")).contains(&"taken.nsys-rep".to_string()));

    // No -o: a fresh nsys-jax-report-XXXXXX.zip each time.
    for _ in 0..2 {
        assert_ok(&b.run(&["run", "--no-analysis", "--", "true"], &[]));
    }
    let mut names: Vec<String> = std::fs::read_dir(b.work())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nsys-jax-report-"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    for n in &names {
        assert!(n.ends_with(".zip"));
        let members = zip_members(&b.work().join(n));
        let report = format!("{}.nsys-rep", n.trim_end_matches(".zip"));
        assert!(members.contains(&report), "{report} not in {members:?}");
    }
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn condition_decides_whether_to_profile() {
    let Some(b) = Bench::new() else { return };
    // False: the program runs as is (its environment untouched), its exit code is ours.
    let o = b.run(
        &[
            "run",
            "-o",
            "never",
            "--condition",
            "$SLURM_LOCALID == 0",
            "--",
            "sh",
            "-c",
            "echo \"flags=[$XLA_FLAGS]\"; exit 5",
        ],
        &[("SLURM_LOCALID", "1")],
    );
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stdout(&o).contains("flags=[]"), "{}", stdout(&o));
    assert!(!b.work().join("never.zip").exists());
    assert!(b.log().is_empty(), "nsys was started: {}", b.log());
    // True: profiled.
    let o = b.run(
        &[
            "run",
            "-o",
            "yes",
            "--no-analysis",
            "--condition",
            "$SLURM_LOCALID == 0",
            "--",
            "true",
        ],
        &[("SLURM_LOCALID", "0")],
    );
    assert_ok(&o);
    assert!(b.work().join("yes.zip").is_file());
    // An expression bash cannot evaluate is an error, before anything runs.
    let o = b.run(&["run", "--condition", "1 -eq", "--", "true"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bash cannot evaluate [[ 1 -eq ]]"),
        "{}",
        stderr(&o)
    );
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn exit_codes_follow_the_program() {
    let Some(b) = Bench::new() else { return };
    // A failing program: its code, and the capture is still archived.
    let o = b.run(
        &[
            "run",
            "-o",
            "failed",
            "--no-analysis",
            "--",
            "sh",
            "-c",
            "exit 3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the program exited with code 3"),
        "{}",
        stderr(&o)
    );
    assert!(b.work().join("failed.zip").is_file());
    // Ended by nsys's shutdown signal after a stop-shutdown capture: success.
    let kill_self = ["sh", "-c", "kill -TERM $$"];
    let mut args = vec![
        "run",
        "-o",
        "shutdown",
        "--no-analysis",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop-shutdown",
        "--",
    ];
    args.extend(kill_self);
    let o = b.run(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(b.work().join("shutdown.zip").is_file());
    // The same signal without a shutdown capture end is the program's failure.
    let mut args = vec!["run", "-o", "killed", "--no-analysis", "--"];
    args.extend(kill_self);
    let o = b.run(&args, &[]);
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    // --kill=sigkill makes SIGKILL the expected end instead.
    let mut args = vec![
        "run",
        "-o",
        "k9",
        "--no-analysis",
        "--capture-range-end",
        "repeat-shutdown:2",
        "--kill",
        "sigkill",
        "--",
    ];
    args.extend(["sh", "-c", "kill -KILL $$"]);
    let o = b.run(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn xla_flags_are_merged_not_mangled() {
    let Some(b) = Bench::new() else { return };
    let user = r#"--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_to=/somewhere/else --xla_dump_hlo_pass_re=.* --xla_gpu_target_config_filename="/a b/c.txt" --xla_dump_hlo_as_proto=true"#;
    let o = b.run(
        &[
            "run",
            "-o",
            "flags",
            "--no-analysis",
            "--",
            "sh",
            "-c",
            "printf '%s\\n' \"$XLA_FLAGS\" > flags.txt",
        ],
        &[
            ("XLA_FLAGS", user),
            ("JAX_ENABLE_COMPILATION_CACHE", "true"),
        ],
    );
    assert_ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("--xla_dump_to=/somewhere/else replaced by --xla_dump_to="),
        "{err}"
    );
    let flags = std::fs::read_to_string(b.work().join("flags.txt")).unwrap();
    let flags = flags.trim();
    let dump_to = flags
        .split(' ')
        .find_map(|f| f.strip_prefix("--xla_dump_to="))
        .unwrap();
    assert!(
        dump_to.starts_with(b.dir.path().join("tmp").to_str().unwrap()),
        "{dump_to}"
    );
    assert!(dump_to.ends_with("/dump"));
    assert_eq!(
        flags,
        format!(
            r#"--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_hlo_pass_re=.* --xla_gpu_target_config_filename="/a b/c.txt" --xla_dump_hlo_as_proto=true --xla_dump_to={dump_to}"#
        )
    );
    let log = b.log();
    // A setting of the user's is kept.
    assert!(log.contains("JAX_ENABLE_COMPILATION_CACHE=true"), "{log}");
    assert!(log.contains("JAX_TRACEBACK_IN_LOCATIONS_LIMIT=-1"), "{log}");
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn nsys_jax_command_lines_work() {
    let Some(b) = Bench::new() else { return };
    // As a subcommand, with nsys-jax's option names: only the analyses asked for.
    let o = b.run(
        &[
            "nsys-jax",
            "--nsys-jax-analysis",
            "summary",
            "-o",
            "compat",
            "--capture-range=cudaProfilerApi",
            "--",
            "true",
        ],
        &[],
    );
    assert_ok(&o);
    let members = zip_members(&b.work().join("compat.zip"));
    let analyses: Vec<&String> = members
        .iter()
        .filter(|m| m.starts_with("analysis/"))
        .collect();
    assert_eq!(analyses, ["analysis/summary/summary.json"], "{members:?}");
    assert!(
        b.log()
            .contains("nsys-option --capture-range=cudaProfilerApi")
    );

    // Through a link named nsys-jax: no analyses unless asked for; --nsys-jax-condition.
    let link = b.dir.path().join("bin/nsys-jax");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let mut c = b.command(
        &[
            "-o",
            "linked",
            "--nsys-jax-condition",
            "$RANK -lt 1",
            "true",
        ],
        &[("RANK", "0")],
    );
    let c = c.env(
        "PATH",
        format!(
            "{}:{}",
            b.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap()
        ),
    );
    let o = Command::new(&link)
        .args(c.get_args())
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env_remove("NSYS")
        .current_dir(b.work())
        .output()
        .unwrap();
    assert_ok(&o);
    let members = zip_members(&b.work().join("linked.zip"));
    assert!(
        !members.iter().any(|m| m.starts_with("analysis/")),
        "{members:?}"
    );

    // nsys-jax-combine's command line reaches `combine` (tests/combine.rs combines for real):
    // here the inputs do not exist, which it says.
    let o = b.run(&["nsys-jax-combine", "-o", "c.zip", "a.zip", "b.zip"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a.zip"), "{}", stderr(&o));
    assert!(!b.work().join("c.zip").exists());
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn pipeline_and_per_analysis_arguments() {
    let Some(b) = Bench::new() else { return };
    let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/ci.toml");
    let o = b.run(
        &[
            "run",
            "-o",
            "ci",
            "-q",
            "--pipeline",
            ci.to_str().unwrap(),
            "--",
            "true",
        ],
        &[],
    );
    assert_ok(&o);
    let members = zip_members(&b.work().join("ci.zip"));
    let analyses: Vec<&String> = members
        .iter()
        .filter(|m| m.starts_with("analysis/"))
        .collect();
    assert_eq!(
        analyses,
        [
            "analysis/communication/communication.json",
            "analysis/summary/summary.json"
        ]
    );
    assert!(!stdout(&o).contains("────"), "-q printed tables");

    // An --analysis-arg belongs to the --analysis before it.
    let script = b.dir.path().join("args.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nmkdir -p \"$NSYS_JAX_ANALYSIS_OUTPUT\" 2>/dev/null; echo \"args: $*\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = b.run(
        &[
            "run",
            "--analysis-arg",
            "x",
            "--analysis",
            "summary",
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("comes before any --analysis"),
        "{}",
        stderr(&o)
    );
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn errors_before_and_after_the_program() {
    let Some(b) = Bench::new() else { return };
    // A program that does not exist: said before nsys starts.
    let o = b.run(&["run", "--", "no-such-program-4711"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no-such-program-4711: program not found on PATH"),
        "{}",
        stderr(&o)
    );
    assert!(b.log().is_empty());
    // nsys options without `--`.
    let o = b.run(&["run", "--trace=cuda", "true"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--trace=cuda: not an option of `run`"),
        "{}",
        stderr(&o)
    );
    // A missing analysis script: said before the program runs.
    let o = b.run(
        &[
            "run",
            "--analysis",
            "./missing.py",
            "--",
            "sh",
            "-c",
            "echo SHOULD-NOT-RUN",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("./missing.py: analysis script not found"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).contains("SHOULD-NOT-RUN"));
    // nsys wrote no report: said, no archive, nothing left behind.
    let mut nb = Bench::new().unwrap();
    nb.report = None;
    let o = nb.run(&["run", "-o", "none", "--", "true"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nsys profile wrote no report"),
        "{}",
        stderr(&o)
    );
    assert!(!nb.work().join("none.zip").exists());
    assert!(nb.leftovers().is_empty(), "{:?}", nb.leftovers());
    // No XLA dump: a warning, and the archive without HLO.
    let mut nd = Bench::new().unwrap();
    nd.dump = None;
    let o = nd.run(&["run", "-o", "nodump", "--no-analysis", "--", "true"], &[]);
    assert_ok(&o);
    assert!(
        stderr(&o).contains("the program wrote no XLA dump"),
        "{}",
        stderr(&o)
    );
    assert!(
        !zip_members(&nd.work().join("nodump.zip"))
            .iter()
            .any(|m| m.starts_with("dump/"))
    );
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn an_interrupt_stops_the_program_and_writes_nothing() {
    let Some(b) = Bench::new() else { return };
    let child = b
        .command(
            &[
                "run",
                "-o",
                "interrupted",
                "--",
                "sh",
                "-c",
                "echo started > started; exec sleep 30",
            ],
            &[],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = b.work().join("started");
    let t0 = std::time::Instant::now();
    while !started.exists() && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(started.exists(), "the program did not start");
    // SIGTERM to nsys-jax-pipe alone (as `kill PID` or a scheduler would send it).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(t0.elapsed().as_secs() < 20, "the program was not stopped");
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("interrupted (SIGTERM); no archive was written"),
        "{}",
        stderr(&o)
    );
    assert!(!b.work().join("interrupted.zip").exists());
    let stray: Vec<_> = std::fs::read_dir(b.work())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(stray, ["started"], "{stray:?}");
    assert!(b.leftovers().is_empty(), "{:?}", b.leftovers());
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
fn fixture_capture_replayed_matches_the_reference() {
    let Some(f) = fixtures() else { return };
    let Some(real) = nsys() else { return };
    let cap = f.join("h200/fsdp2_1proc");
    let b = Bench::with_capture(real, &cap.join("rep.nsys-rep"), &cap.join("dump_rep"));
    let o = b.run(&["run", "-o", "fsdp2", "--", "true"], &[]);
    assert_ok(&o);
    let zip = b.work().join("fsdp2.zip");
    let v: serde_json::Value =
        serde_json::from_slice(&zip_read(&zip, "analysis/summary/summary.json")).unwrap();
    let step = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "jit_train_step")
        .unwrap();
    assert_eq!(step["executions"], 16);
    assert_eq!(step["thunks_mean"], 44.0);
    let ms = step["duration_ms_mean"].as_f64().unwrap();
    assert!(rel(ms, 1.1017550625) < 1e-6, "{ms}");
}
