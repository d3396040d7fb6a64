//! Exit codes of `run` and of the `nsys-jax` command line when Nsight Systems ends the
//! program at the end of a capture range: every combination of the program's behaviour after
//! cudaProfilerStop, `--capture-range-end` (none given: nsys's default, stop-shutdown) and
//! `--kill`, with the stand-in nsys (`tests/data/standin-nsys.sh`), which ends the program as
//! nsys does, a moment after the program's cudaProfilerStop.

use crate::common::standin::*;

/// After cudaProfilerStop: sleep, then exit 24 (nsys ends it first when it ends it at all).
const SLEEPS: &str = "touch \"$STANDIN_PROFILER_STOP\"; sleep 2; exit 24";
/// After cudaProfilerStop: exit 42 at once (before nsys ends it).
const EXITS_42: &str = "touch \"$STANDIN_PROFILER_STOP\"; exit 42";

const KILLS: [Option<&[&str]>; 5] = [
    None,
    Some(&["--kill=none"]),
    Some(&["--kill", "sigterm"]),
    Some(&["--kill=sigkill"]),
    Some(&["--kill", "2"]),
];
const ENDS: [Option<&str>; 3] = [None, Some("stop"), Some("stop-shutdown")];

/// The code expected from `run`: the program's own when it exits first or is not ended by
/// nsys, 0 when nsys ends it with its kill signal.
fn expected(program: &str, end: Option<&str>, kill: Option<&[&str]>) -> i32 {
    let shutdown = end != Some("stop");
    let signal = kill != Some(&["--kill=none"][..]);
    match program {
        EXITS_42 => 42,
        _ if shutdown && signal => 0,
        _ => 24,
    }
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn capture_range_end_matrix_through_nsys_jax() {
    let Some(b) = Bench::new() else { return };
    let mut cases = Vec::new();
    for program in [SLEEPS, EXITS_42] {
        for end in ENDS {
            for kill in KILLS {
                cases.push((program, end, kill));
            }
        }
    }
    let results: Vec<(String, i32, i32, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .enumerate()
            .map(|(i, &(program, end, kill))| {
                let b = &b;
                s.spawn(move || {
                    let out = format!("case{i}");
                    let end_arg = end.map(|e| format!("--capture-range-end={e}"));
                    let mut args = vec!["-o", &out, "--capture-range=cudaProfilerApi"];
                    args.extend(end_arg.as_deref());
                    args.extend(kill.unwrap_or(&[]));
                    args.extend(["--", "sh", "-c", program]);
                    let o = b.nsys_jax(&args, &[]);
                    assert!(
                        b.work().join(format!("{out}.zip")).is_file(),
                        "{args:?}: no archive\n{}",
                        stderr(&o)
                    );
                    (
                        format!("{args:?}"),
                        o.status.code().unwrap_or(-1),
                        expected(program, end, kill),
                        stderr(&o),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wrong: Vec<String> = results
        .iter()
        .filter(|(_, got, want, _)| got != want)
        .map(|(case, got, want, err)| format!("{case}: exit {got}, want {want}\n{err}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The stand-in really ended the sleeping program in the cases that expect 0 (at least
    // those; under load it may also signal a program that has just exited by itself).
    let log = b.log();
    assert!(log.matches("sent SIGTERM").count() >= 4, "{log}");
    assert!(log.matches("sent SIGKILL").count() >= 2, "{log}");
    assert!(log.matches("sent SIG2").count() >= 2, "{log}");
    // The default end is named when it ended the program.
    let (_, _, _, err) = &results[0];
    assert!(
        err.contains("ended by SIGTERM")
            && err.contains("default --capture-range-end=stop-shutdown"),
        "{err}"
    );
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn run_applies_the_default_capture_range_end() {
    let Some(b) = Bench::new() else { return };
    let run = |out: &str, extra: &[&str], program: &str| {
        let mut args = vec![
            "run",
            "-o",
            out,
            "--no-analysis",
            "--capture-range=cudaProfilerApi",
        ];
        args.extend(extra);
        args.extend(["--", "sh", "-c", program]);
        b.run(&args, &[])
    };
    let o = run("default", &[], SLEEPS);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run("int", &["--kill", "2"], SLEEPS);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("ended by SIGINT"), "{}", stderr(&o));
    let o = run("first", &[], EXITS_42);
    assert_eq!(o.status.code(), Some(42), "{}", stderr(&o));
    // Without a capture range nothing ends the program: a SIGTERM is its failure.
    let o = b.run(
        &[
            "run",
            "-o",
            "whole",
            "--no-analysis",
            "--",
            "sh",
            "-c",
            "kill -TERM $$",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
}
