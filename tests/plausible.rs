//! Generated traces, plausible and not, through every analysis: a trace Nsight Systems could
//! have made (thunks inside their modules, overlapping each other or not, communication
//! hidden behind any number of compute thunks) is analysed, one with a thunk reaching outside
//! its module is refused as an input error naming the member, and no output of any analysis
//! holds a negative number.

use crate::common::*;
use crate::fuzz::negatives;
use crate::synthetic::{Range, trace_of, write_archive_with};
use proptest::prelude::*;

/// One execution of `jit_step`: its thunks' (start offset, duration) in ns, in the order
/// fusion.1, all-reduce-start, fusion.2, and the module's duration.
#[derive(Debug, Clone)]
struct Execution {
    thunks: [(i64, i64); 3],
    module: i64,
}

fn execution() -> impl Strategy<Value = Execution> {
    // Thunks anywhere inside a module of 1 to 50 µs, overlapping freely.
    (
        1_000i64..50_000,
        prop::array::uniform3((0.0f64..1.0, 0.0f64..1.0)),
    )
        .prop_map(|(module, shape)| {
            let thunks = shape.map(|(s, d)| {
                let start = (s * module as f64) as i64;
                (start, ((module - start) as f64 * d) as i64)
            });
            Execution { thunks, module }
        })
}

/// The ranges of `executions`, one module a millisecond; `outside`: a thunk of one execution
/// reaches past its module's end by that many ns.
fn ranges(executions: &[Execution], outside: Option<(usize, i64)>) -> Vec<Range> {
    let names = [
        "TSL:Thunk:#name=jit(step)/mul,hlo_op=fusion.1#",
        "TSL:Thunk:#name=jit(step)/psum[axes=(0,)],hlo_op=all-reduce-start#",
        "TSL:Thunk:#hlo_op=fusion.2#",
    ];
    let mut r = Vec::new();
    let mut id = 1;
    for (e, x) in executions.iter().enumerate() {
        let base = 1_000_000 * (e as i64 + 1);
        let m = id;
        r.push(Range {
            name: "TSL:XlaModule:#hlo_module=jit_step,program_id=5#",
            start: base,
            dur: x.module,
            tid: 101,
            ops: 3,
            id: m,
            parent: None,
            stack: format!(":{m}"),
        });
        for (k, &(s, d)) in x.thunks.iter().enumerate() {
            id += 1;
            let d = match outside {
                Some((at, by)) if at == e && k == 2 => x.module - s + by,
                _ => d,
            };
            r.push(Range {
                name: names[k],
                start: base + s,
                dur: d,
                tid: 101,
                ops: 1,
                id,
                parent: Some(m),
                stack: format!(":{m}:{id}"),
            });
        }
        id += 1;
    }
    r
}

fn analyse_all(archive: &std::path::Path, out: &std::path::Path) -> std::process::Output {
    let mut c = std::process::Command::new(bin());
    c.args(["analyze", "--no-cache", "-q", "-o"]).arg(out);
    for a in all_analyses() {
        c.args(["--analysis", a]);
    }
    c.arg(archive).output().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn no_analysis_gives_a_negative_number_for_a_trace_that_could_be(
        executions in prop::collection::vec(execution(), 3..8),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let archive = tmp.path().join("generated.zip");
        write_archive_with(&archive, trace_of(&ranges(&executions, None)));
        let out = tmp.path().join("out");
        let o = analyse_all(&archive, &out);
        prop_assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let found = negatives(&out);
        prop_assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_thunk_outside_its_module_is_an_input_error_naming_the_trace(
        executions in prop::collection::vec(execution(), 3..8),
        at in 0usize..3,
        by in 2_000i64..1_000_000_000_000,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let archive = tmp.path().join("generated.zip");
        write_archive_with(&archive, trace_of(&ranges(&executions, Some((at, by)))));
        let o = analyse_all(&archive, &tmp.path().join("out"));
        let err = String::from_utf8_lossy(&o.stderr);
        prop_assert_eq!(o.status.code(), Some(2), "{}", err);
        let last = err.lines().last().unwrap_or("");
        prop_assert!(
            last.starts_with("nsys-jax-pipe: error: ")
                && last.contains("nvtx_gpu_proj_trace/trace.parquet")
                && last.contains("an impossible trace: thunk ranges lie outside"),
            "{}", err
        );
        prop_assert!(!tmp.path().join("out").exists());
    }
}
