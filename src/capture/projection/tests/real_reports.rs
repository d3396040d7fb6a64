use super::*;

// ---- real reports ----------------------------------------------------------------

fn read_reference(path: &Path) -> RecordBatch {
    crate::formats::read_parquet(std::fs::read(path).unwrap()).unwrap()
}

/// Column `c` of `b` as i64 (nulls as None), whatever its stored type.
fn col_i64(b: &RecordBatch, c: &str) -> Vec<Option<i64>> {
    let a = b
        .column_by_name(c)
        .unwrap_or_else(|| panic!("no column {c}"));
    let a = arrow::compute::cast(a, &DataType::Int64).unwrap();
    a.as_primitive::<Int64Type>().iter().collect()
}

fn col_str(b: &RecordBatch, c: &str) -> Vec<Option<String>> {
    let a = b.column_by_name(c).unwrap();
    let a = arrow::compute::cast(a, &DataType::Utf8).unwrap();
    a.as_string::<i32>()
        .iter()
        .map(|s| s.map(str::to_string))
        .collect()
}

/// Compares `ours` to `reference` row by row, matching rows by RangeId. `columns` pairs
/// our column name with the reference's; reference rows without a RangeId are dropped.
fn assert_same_rows(
    ours: &RecordBatch,
    reference: &RecordBatch,
    int_columns: &[(&str, &str)],
    text_columns: &[(&str, &str)],
    what: &str,
) {
    let ref_ids = col_i64(reference, "RangeId");
    let keep: Vec<usize> = (0..ref_ids.len())
        .filter(|&i| ref_ids[i].is_some())
        .collect();
    let our_ids = col_i64(ours, "RangeId");
    assert_eq!(our_ids.len(), keep.len(), "{what}: row count");
    let by_id: HashMap<i64, usize> = our_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.unwrap(), i))
        .collect();
    assert_eq!(by_id.len(), our_ids.len(), "{what}: duplicate RangeId");
    let mut mismatches = Vec::new();
    for (ours_col, ref_col) in int_columns {
        let o = col_i64(ours, ours_col);
        let r = col_i64(reference, ref_col);
        for &k in &keep {
            let i = by_id[&ref_ids[k].unwrap()];
            if o[i] != r[k] {
                mismatches.push(format!(
                    "RangeId {}: {ours_col} ours {:?} reference {:?}",
                    ref_ids[k].unwrap(),
                    o[i],
                    r[k]
                ));
            }
        }
    }
    for (ours_col, ref_col) in text_columns {
        let o = col_str(ours, ours_col);
        let r = col_str(reference, ref_col);
        for &k in &keep {
            let i = by_id[&ref_ids[k].unwrap()];
            if o[i] != r[k] {
                mismatches.push(format!(
                    "RangeId {}: {ours_col} ours {:?} reference {:?}",
                    ref_ids[k].unwrap(),
                    o[i],
                    r[k]
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{what}: {} mismatches, first: {:#?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(10)]
    );
}

const PROJECTION_INTS: &[(&str, &str)] = &[
    ("PID", "PID"),
    ("TID", "TID"),
    ("Orig Start", "Orig Start"),
    ("Orig Duration", "Orig Duration"),
    ("Projected Start", "Projected Start"),
    ("Projected Duration", "Projected Duration"),
    ("NumGPUOps", "NumGPUOps"),
    ("Lvl", "Lvl"),
    ("NumChild", "NumChild"),
    ("ParentId", "ParentId"),
];
const PROJECTION_TEXT: &[(&str, &str)] = &[("Name", "Name"), ("RangeStack", "RangeStack")];

/// Exports `report` (relative to the fixtures) into `tmp` and reads it; `None` when the
/// fixtures or nsys are not here.
fn exported(report: &str, tmp: &Path) -> Option<ExportTables> {
    let fixtures = crate::testutil::fixtures_dir()?;
    let nsys = crate::testutil::nsys_path()?;
    let dir = testing::export_to(&nsys, &fixtures.join(report), tmp);
    Some(crate::formats::nsys_export::read_export_dir(&dir).unwrap())
}

/// Nsight Systems' own `nvtx_gpu_proj_trace` and `nvtx_pushpop_trace` reports for
/// `report` (the `nsys stats` variants, which run on the SQLite export), as read from their
/// CSV files; `None` for a report nsys wrote no rows for. `None` overall (with a notice)
/// when this nsys cannot produce them.
fn nsys_stats(report: &str, tmp: &Path) -> Option<(Option<RecordBatch>, Option<RecordBatch>)> {
    let fixtures = crate::testutil::fixtures_dir()?;
    let nsys = crate::testutil::nsys_path()?;
    let sqlite = tmp.join("stats.sqlite");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(&nsys)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let ok = run(&[
        "export".as_ref(),
        "--type=sqlite".as_ref(),
        "--quiet=true".as_ref(),
        "--force-overwrite=true".as_ref(),
        "--output".as_ref(),
        sqlite.as_os_str(),
        fixtures.join(report).as_os_str(),
    ]) && run(&[
        "stats".as_ref(),
        "--quiet".as_ref(),
        "--report=nvtx_gpu_proj_trace,nvtx_pushpop_trace".as_ref(),
        "--format=csv".as_ref(),
        "--output".as_ref(),
        tmp.join("stats").as_os_str(),
        sqlite.as_os_str(),
    ]);
    if !ok {
        eprintln!("\n!!! SKIPPING comparison with `nsys stats`: it failed here !!!\n");
        return None;
    }
    let read = |name: &str| -> Option<RecordBatch> {
        let path = tmp.join(format!("stats_{name}.csv"));
        let text = std::fs::read(&path).ok()?;
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            return None;
        }
        let (schema, _) = arrow::csv::reader::Format::default()
            .with_header(true)
            .infer_schema(std::io::Cursor::new(&text), None)
            .unwrap();
        let reader = arrow::csv::ReaderBuilder::new(Arc::new(schema))
            .with_header(true)
            .build(std::io::Cursor::new(text))
            .unwrap();
        let schema = reader.schema();
        let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
        Some(arrow::compute::concat_batches(&schema, &batches).unwrap())
    };
    Some((read("nvtx_gpu_proj_trace"), read("nvtx_pushpop_trace")))
}

/// Compares our outputs with `nsys stats`' reports of the same report, column by column.
fn assert_same_as_nsys_stats(p: &RecordBatch, pp: &RecordBatch, report: &str, tmp: &Path) {
    let Some((proj_ref, pp_ref)) = nsys_stats(report, tmp) else {
        return;
    };
    match proj_ref {
        Some(r) => assert_same_rows(
            p,
            &r,
            &[
                ("Projected Start", "Projected Start (ns)"),
                ("Projected Duration", "Projected Duration (ns)"),
                ("Orig Start", "Orig Start (ns)"),
                ("Orig Duration", "Orig Duration (ns)"),
                ("PID", "PID"),
                ("TID", "TID"),
                ("NumGPUOps", "NumGPUOps"),
                ("Lvl", "Lvl"),
                ("NumChild", "NumChild"),
                ("ParentId", "ParentId"),
            ],
            &[
                ("Name", "Name"),
                ("Style", "Style"),
                ("RangeStack", "RangeStack"),
            ],
            &format!("{report}: nvtx_gpu_proj_trace"),
        ),
        None => assert_eq!(p.num_rows(), 0, "{report}"),
    }
    let pp_ref = pp_ref.expect("nsys wrote no push/pop trace");
    let columns: Vec<(&str, &str)> = [
        "Start (ns)",
        "End (ns)",
        "Duration (ns)",
        "DurChild (ns)",
        "DurNonChild (ns)",
        "PID",
        "TID",
        "Lvl",
        "NumChild",
        "ParentId",
    ]
    .iter()
    .map(|c| (*c, *c))
    .collect();
    assert_same_rows(
        pp,
        &pp_ref,
        &columns,
        &[("Name", "Name"), ("RangeStack", "RangeStack")],
        &format!("{report}: nvtx_pushpop_trace"),
    );
}

/// Structural checks that hold for any projection.
fn check_invariants(p: &RecordBatch, pp: &RecordBatch, t: &ExportTables, what: &str) {
    let n = p.num_rows();
    let ids = col_i64(p, "RangeId");
    let parent = col_i64(p, "ParentId");
    let lvl = col_i64(p, "Lvl");
    let nchild = col_i64(p, "NumChild");
    let ops = col_i64(p, "NumGPUOps");
    let dur = col_i64(p, "Projected Duration");
    let stacks = col_str(p, "RangeStack");
    let nvtx_rows = t.nvtx_events.num_rows() as i64;
    let mut children: HashMap<i64, i64> = HashMap::new();
    for i in 0..n {
        let id = ids[i].unwrap();
        assert!(id >= 1 && id <= nvtx_rows, "{what}: RangeId {id}");
        assert!(
            i == 0 || ids[i - 1] < ids[i],
            "{what}: not in RangeId order"
        );
        assert!(
            ops[i].unwrap() >= 1 && dur[i].unwrap() >= 0,
            "{what}: RangeId {id}"
        );
        let stack = stacks[i].as_deref().unwrap();
        let chain: Vec<i64> = stack[1..].split(':').map(|s| s.parse().unwrap()).collect();
        assert_eq!(chain.last(), Some(&id), "{what}: stack {stack}");
        assert_eq!(
            chain.len() as i64 - 1,
            lvl[i].unwrap(),
            "{what}: stack {stack}"
        );
        assert_eq!(
            parent[i],
            (chain.len() > 1).then(|| chain[chain.len() - 2]),
            "{what}: stack {stack}"
        );
        if let Some(p) = parent[i] {
            *children.entry(p).or_default() += 1;
        }
    }
    for i in 0..n {
        assert_eq!(
            nchild[i].unwrap(),
            children.get(&ids[i].unwrap()).copied().unwrap_or(0),
            "{what}: NumChild of {:?}",
            ids[i]
        );
    }
    // A projected parent holds at least the ops of each projected child, and its GPU
    // span covers the child's.
    let row_of: HashMap<i64, usize> = (0..n).map(|i| (ids[i].unwrap(), i)).collect();
    let start = col_i64(p, "Projected Start");
    for i in 0..n {
        if let Some(&j) = parent[i].and_then(|p| row_of.get(&p)) {
            assert!(ops[j] >= ops[i], "{what}: ops of {:?}", ids[i]);
            assert!(start[j] <= start[i], "{what}: start of {:?}", ids[i]);
            assert!(
                start[j].unwrap() + dur[j].unwrap() >= start[i].unwrap() + dur[i].unwrap(),
                "{what}: end of {:?}",
                ids[i]
            );
        }
    }
    // Every push/pop range in the projection is in the push/pop trace with the same
    // parent (no start/end ranges in these captures).
    let pp_ids = col_i64(pp, "RangeId");
    let pp_parent = col_i64(pp, "ParentId");
    let pp_row: HashMap<i64, usize> = (0..pp.num_rows())
        .map(|i| (pp_ids[i].unwrap(), i))
        .collect();
    for i in 0..n {
        let k = pp_row[&ids[i].unwrap()];
        assert_eq!(pp_parent[k], parent[i], "{what}: parent of {:?}", ids[i]);
    }
    let ppd = col_i64(pp, "Duration (ns)");
    let ppc = col_i64(pp, "DurChild (ns)");
    let ppn = col_i64(pp, "DurNonChild (ns)");
    for i in 0..pp.num_rows() {
        assert_eq!(ppd[i].unwrap(), ppc[i].unwrap() + ppn[i].unwrap());
        assert!(
            ppn[i].unwrap() >= 0,
            "{what}: push/pop children overflow {:?}",
            pp_ids[i]
        );
    }
}

#[test]
fn reproduces_nsys_projection_and_pushpop_on_fsdp2_1proc() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(t) = exported("h200/fsdp2_1proc/rep.nsys-rep", tmp.path()) else {
        return;
    };
    let fixtures = crate::testutil::fixtures_dir().unwrap();
    let reference = fixtures.join("reference/h200-fsdp2_1proc");

    let p = project(&t).unwrap();
    assert_eq!(p.num_rows(), 1354);
    let trace = read_reference(&reference.join("trace.parquet"));
    assert_same_rows(
        &p,
        &trace,
        PROJECTION_INTS,
        PROJECTION_TEXT,
        "trace.parquet",
    );
    assert!(strs(&p, "Style").iter().all(|s| s == "PushPop"));

    let pp = pushpop(&t).unwrap();
    assert_eq!(pp.num_rows(), 2178);
    let pp_ref = read_reference(&reference.join("report_nvtx_pushpop_trace.parquet"));
    assert_same_rows(
        &pp,
        &pp_ref,
        &[
            ("Start (ns)", "Start (ns)"),
            ("End (ns)", "End (ns)"),
            ("Duration (ns)", "Duration (ns)"),
            ("DurChild (ns)", "DurChild (ns)"),
            ("DurNonChild (ns)", "DurNonChild (ns)"),
            ("TID", "TID"),
            ("NumChild", "NumChild"),
            ("ParentId", "ParentId"),
        ],
        &[("Name", "Name"), ("RangeStack", "RangeStack")],
        "report_nvtx_pushpop_trace.parquet",
    );
    // Our push/pop output loads through the archive reader, with the same levels.
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, pp.schema(), None).unwrap();
    w.write(&pp).unwrap();
    w.close().unwrap();
    let normalised = crate::formats::pushpop::read_parquet(bytes.clone()).unwrap();
    assert_eq!(normalised.num_rows(), 2178);
    assert_eq!(
        col_i64(&normalised, "Lvl"),
        col_i64(&pp, "Lvl"),
        "levels from the archive reader"
    );
    check_invariants(&p, &pp, &t, "fsdp2_1proc");
}

#[test]
fn projects_fsdp2_2proc_ranks() {
    for rank in ["rank0", "rank1"] {
        let tmp = tempfile::tempdir().unwrap();
        let report = format!("h200/fsdp2_2proc/{rank}.nsys-rep");
        let Some(t) = exported(&report, tmp.path()) else {
            return;
        };
        let p = project(&t).unwrap();
        let pp = pushpop(&t).unwrap();
        // nsys 2023.4's own `nvtx_gpu_proj_trace` has 677 ranges (+ its row of ops outside
        // every range); its `nvtx_pushpop_trace` 1100.
        assert_eq!(p.num_rows(), 677, "{rank}");
        assert_eq!(pp.num_rows(), 1100, "{rank}");
        check_invariants(&p, &pp, &t, rank);
        let names = strs(&p, "Name");
        assert!(
            names.iter().any(|n| n.starts_with("TSL:XlaModule:#")),
            "{rank}"
        );
        assert!(names.iter().any(|n| n.starts_with("NCCL:")), "{rank}");
        assert_same_as_nsys_stats(&p, &pp, &report, tmp.path());
    }
}

#[test]
fn projects_long_1proc() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(t) = exported("h200/long_1proc/rep.nsys-rep", tmp.path()) else {
        return;
    };
    // Best of three, after a first run that warms the caches.
    let p = project(&t).unwrap();
    let mut projected = std::time::Duration::MAX;
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let again = project(&t).unwrap();
        projected = projected.min(started.elapsed());
        assert_eq!(again, p, "project is deterministic");
    }
    let started = std::time::Instant::now();
    let pp = pushpop(&t).unwrap();
    eprintln!(
        "long_1proc: project {:.1} ms for {} NVTX events, {} kernels ({} rows); pushpop {:.1} ms",
        projected.as_secs_f64() * 1e3,
        t.nvtx_events.num_rows(),
        t.kernel.as_ref().map_or(0, |k| k.num_rows()),
        p.num_rows(),
        started.elapsed().as_secs_f64() * 1e3
    );
    // nsys 2023.4's own projection of this report has 44,702 ranges (design.md "Projection").
    assert_eq!(p.num_rows(), 44_702);
    assert_eq!(pp.num_rows(), 71_846);
    check_invariants(&p, &pp, &t, "long_1proc");
    // The tables the members are written from read the same as the members written: a
    // capture's frames take the tables while they are in memory.
    use crate::formats::{pushpop as pushpop_file, trace};
    let table = trace::classic_table(&p, 0).unwrap();
    assert_eq!(
        trace::from_table(&table).unwrap(),
        trace::read(trace::write_classic_table(&table).unwrap()).unwrap()
    );
    assert_eq!(
        pushpop_file::normalize(&pp).unwrap(),
        pushpop_file::read_parquet(pushpop_file::write_parquet(&pp).unwrap()).unwrap()
    );
    // Row-by-row comparison with `nsys stats` (about 12 s more): on request.
    if std::env::var_os("NSYS_JAX_PIPE_SLOW_TESTS").is_some() {
        assert_same_as_nsys_stats(&p, &pp, "h200/long_1proc/rep.nsys-rep", tmp.path());
    }
    // Top-level ranges (one per XlaModule execution and launch thread) never share a
    // launch, so their op counts add up to at most the capture's GPU ops; nearly every
    // kernel is launched inside one.
    let ops_total: i64 = col_i64(&p, "NumGPUOps")
        .iter()
        .zip(col_i64(&p, "Lvl"))
        .filter(|(_, l)| *l == Some(0))
        .map(|(o, _)| o.unwrap())
        .sum();
    let kernels = t.kernel.as_ref().unwrap().num_rows() as i64;
    let memcpys = t.memcpy.as_ref().map_or(0, |m| m.num_rows()) as i64;
    assert!(
        ops_total <= kernels + memcpys,
        "{ops_total} > {kernels} + {memcpys}"
    );
    assert!(
        ops_total > kernels * 9 / 10,
        "{ops_total} vs {kernels} kernels"
    );
}

#[test]
fn nvtx_only_capture_has_pushpop_but_no_projection() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(t) = exported("h200/compile_1proc/rep.nsys-rep", tmp.path()) else {
        return;
    };
    assert!(t.kernel.is_none() && t.runtime.is_none());
    assert_eq!(project(&t).unwrap().num_rows(), 0);
    assert!(t.target_info_nvtx_cuda_device.is_none());
    let pp = pushpop(&t).unwrap();
    // As nsys 2023.4's `nvtx_pushpop_trace`.
    assert_eq!(pp.num_rows(), 17_444);
    let names = strs(&pp, "Name");
    assert!(names.iter().any(|n| n.starts_with("TSL:XlaCompile:#")));
    let p = project(&t).unwrap();
    assert_same_as_nsys_stats(&p, &pp, "h200/compile_1proc/rep.nsys-rep", tmp.path());
}
