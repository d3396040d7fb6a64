//! Command buffers (CUDA graphs) opened up, on captures of the example workload with XLA's
//! command buffers (`tests/data/command-buffers*/`, READMEs there): kernels attributed to
//! HLO instructions, checked against Nsight Systems' own kernel summary.

use crate::common::*;
use nsys_jax_pipe::api::graph_ops;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MEMBER: &str = "nsys-jax-pipe/graph-ops.parquet";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `nsys stats --report cuda_gpu_kern_sum` as name → (total ns, instances).
fn kernel_summary(csv: &Path) -> BTreeMap<String, (i64, i64)> {
    let text = std::fs::read_to_string(csv).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(9, ',').collect();
            let name = f[8].split('(').next().unwrap().to_string();
            (name, (f[1].parse().unwrap(), f[2].parse().unwrap()))
        })
        .collect()
}

fn ops_json(nsys: &Path, cache: &Path, out: &Path, input: &Path) -> serde_json::Value {
    assert_ok(&run_with_nsys(
        nsys,
        &os(&args![
            "analyze",
            "--cache-dir",
            cache,
            "-o",
            out,
            "--analysis",
            "ops",
            "--analysis",
            "communication",
            input
        ]),
    ));
    json(&out.join("ops.json"))
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn default_command_buffers_are_attributed_to_instructions() {
    let Some(nsys) = nsys() else { return };
    let dir = data("command-buffers");
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let report = dir.join("rep.nsys-rep");
    let ops = ops_json(&nsys, &cache, &tmp.path().join("out"), &report);
    let cb = &ops["command_buffers"];
    assert_eq!(cb["thunks"], 7, "{cb}");
    assert!(f(&cb["attributed_ms"]) >= 0.99 * f(&cb["ms"]), "{cb}");
    assert!(f(&cb["ms"]) > 0.5, "{cb}");
    let opcodes: Vec<&str> = ops["by_opcode"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["opcode"].as_str().unwrap())
        .collect();
    assert!(!opcodes.contains(&"[command buffer]"), "{opcodes:?}");
    let thunks: Vec<&str> = ops["top_thunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thunk"].as_str().unwrap())
        .collect();
    for instr in [
        "gemm_fusion_dot.7",
        "loop_reduce_fusion",
        "loop_subtract_fusion.2",
    ] {
        assert!(thunks.contains(&instr), "{instr} not in {thunks:?}");
    }

    // The archive holds the graph operations: per kernel name, the time and count Nsight
    // Systems' own kernel summary gives.
    let zip = tmp.path().join("cb.zip");
    assert_ok(&archive_with(&nsys, &report, &zip, &cache));
    let member = graph_ops::read(zip_read(&zip, MEMBER)).unwrap();
    let mut by_name: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for i in 0..member.len() {
        let e = by_name.entry(member.name.value(i).to_string()).or_default();
        e.0 += member.end.value(i) - member.start.value(i);
        e.1 += 1;
    }
    let summary = kernel_summary(&dir.join("kern_cuda_gpu_kern_sum.csv"));
    let mut kernels = 0;
    for (name, got) in &by_name {
        if name.starts_with('[') {
            continue;
        }
        kernels += 1;
        assert_eq!(Some(got), summary.get(name), "{name}");
    }
    assert_eq!(kernels, 14, "{by_name:?}");
    // The account covers the steady state: every graph operation but each device's first
    // launch of each graph node (the warm-up execution).
    let mut per_node: BTreeMap<(i64, i64), Vec<(i64, i64)>> = BTreeMap::new();
    for i in 0..member.len() {
        per_node
            .entry((member.device.value(i), member.graph_node_id.value(i)))
            .or_default()
            .push((member.start.value(i), member.end.value(i)));
    }
    let steady: i64 = per_node
        .values_mut()
        .map(|v| {
            v.sort();
            v[1..].iter().map(|(s, e)| e - s).sum::<i64>()
        })
        .sum();
    let ms = f(&cb["ms"]);
    assert!(
        rel(ms, steady as f64 * 1e-6) < 1e-3,
        "{ms} ms vs {steady} ns"
    );

    // Read from the archive, the same answer.
    let from_zip = ops_json(&nsys, &cache, &tmp.path().join("zip-out"), &zip);
    assert_eq!(without_labels(from_zip), without_labels(ops));
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn collectives_inside_command_buffers_are_communication() {
    let Some(nsys) = nsys() else { return };
    let dir = data("command-buffers-collectives");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let ops = ops_json(
        &nsys,
        &tmp.path().join("cache"),
        &out,
        &dir.join("rep.nsys-rep"),
    );
    let cb = &ops["command_buffers"];
    assert!(f(&cb["attributed_ms"]) >= 0.99 * f(&cb["ms"]), "{cb}");
    let top = ops["top_thunks"].as_array().unwrap();
    let opcode = |thunk: &str| {
        top.iter()
            .find(|t| t["thunk"] == thunk)
            .map(|t| t["opcode"].as_str().unwrap().to_string())
    };
    // NCCL kernels inside graphs, matched by thunk order.
    assert_eq!(opcode("all-gather.5").as_deref(), Some("all-gather"));
    assert_eq!(opcode("all-gather.1.1").as_deref(), Some("all-gather"));
    assert_eq!(opcode("all-gather.2.2").as_deref(), Some("all-gather"));
    assert_eq!(opcode("all-to-all.2").as_deref(), Some("all-to-all"));
    let comm = ops["by_category"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "communication")
        .unwrap();
    let summary = kernel_summary(&dir.join("kern_cuda_gpu_kern_sum.csv"));
    let nccl: i64 = summary
        .iter()
        .filter(|(n, _)| n.starts_with("nccl"))
        .map(|(_, (ns, _))| ns)
        .sum();
    // Steady state: 8 of the 10 executions (exposed time, so at most that).
    let comm_ms = f(&comm["ms"]);
    assert!(
        comm_ms > 0.6 * nccl as f64 * 1e-6 && comm_ms <= nccl as f64 * 1e-6,
        "{comm_ms} ms of {nccl} ns"
    );
    // The all-to-all inside a graph has its bandwidth measured.
    let c = json(&out.join("communication.json"));
    assert!(c.to_string().contains("all-to-all"), "{c}");
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn archives_without_graph_operations_say_so_and_count_buffers_whole() {
    let Some(nsys) = nsys() else { return };
    let dir = data("command-buffers");
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let zip = tmp.path().join("cb.zip");
    assert_ok(&archive_with(
        &nsys,
        &dir.join("rep.nsys-rep"),
        &zip,
        &cache,
    ));
    // The archive as nsys-jax writes it: no graph operations member.
    let old = tmp.path().join("nsys-jax.zip");
    {
        use std::io::{Read, Write};
        let mut src = zip::ZipArchive::new(std::fs::File::open(&zip).unwrap()).unwrap();
        let mut dst = zip::ZipWriter::new(std::fs::File::create(&old).unwrap());
        for i in 0..src.len() {
            let mut m = src.by_index(i).unwrap();
            let name = m.name().unwrap().into_owned();
            if name == MEMBER {
                continue;
            }
            let mut bytes = Vec::new();
            m.read_to_end(&mut bytes).unwrap();
            dst.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            dst.write_all(&bytes).unwrap();
        }
        dst.finish().unwrap();
    }
    let out = tmp.path().join("out");
    let o = analyze(&cache, &out, &["--analysis", "ops"], &[old]);
    assert_ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("no table of graph kernels"), "{stdout}");
    let cb = json(&out.join("ops.json"))["command_buffers"].clone();
    assert_eq!(cb["thunks"], 7, "{cb}");
    assert_eq!(f(&cb["attributed_ms"]), 0.0, "{cb}");
    assert!(f(&cb["ms"]) > 0.5, "{cb}");
}

/// Library kernels inside command buffers (`tests/data/gemm-bf16-cmdbuf`, `mixed-cmdbuf`,
/// READMEs there): cuBLAS/cuBLASLt GEMMs with their workspace memsets, whose names say nothing
/// of their instructions and whose graph nodes come after the fusions' in node order. Every
/// graph node goes to the instruction the XLA dump and the capture without command buffers say
/// launched it, and each instruction's time is the sum of its nodes' durations as the report
/// records them; nothing is left under the command buffer.
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn library_kernels_inside_command_buffers_go_to_their_instructions() {
    let Some(nsys) = nsys() else { return };
    // (capture, [(instruction, its graph nodes)]): the READMEs' ground truth.
    let cases: [(&str, &[(&str, &[i64])]); 2] = [
        (
            "gemm-bf16-cmdbuf",
            &[
                ("custom-call.1", &[42949672968, 42949672969]),
                ("gemm_fusion_dot_general.4", &[42949672961]),
                ("custom-call.0", &[42949672970, 42949672971]),
                ("gemm_fusion_dot_general.5", &[42949672963]),
                ("custom-call.2", &[42949672972, 42949672973]),
                ("gemm_fusion_dot_general.6", &[42949672965]),
                ("custom-call.3", &[42949672974, 42949672975]),
                ("gemm_fusion_dot_general.7", &[42949672967]),
            ],
        ),
        (
            "mixed-cmdbuf",
            &[
                ("custom-call.2", &[60129542149, 60129542150]),
                ("custom-call.3", &[60129542151]),
                ("custom-call.4", &[60129542152, 60129542153]),
                ("input_add_reduce_fusion", &[60129542147]),
                ("input_reduce_fusion", &[60129542148]),
            ],
        ),
    ];
    for (name, truth) in cases {
        let dir = data(name);
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let report = dir.join("rep.nsys-rep");
        let ops = ops_json(&nsys, &cache, &tmp.path().join("out"), &report);
        let cb = &ops["command_buffers"];
        assert_eq!(cb["thunks"], 1, "{name}: {cb}");
        assert_eq!(f(&cb["attributed_ms"]), f(&cb["ms"]), "{name}: {cb}");
        let zip = tmp.path().join("cb.zip");
        assert_ok(&archive_with(&nsys, &report, &zip, &cache));
        let member = graph_ops::read(zip_read(&zip, MEMBER)).unwrap();
        // The member is the report's: per kernel name, Nsight Systems' own totals.
        let summary = kernel_summary(&dir.join("kern_cuda_gpu_kern_sum.csv"));
        let mut by_name: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        let mut by_node: BTreeMap<i64, i64> = BTreeMap::new();
        for i in 0..member.len() {
            let d = member.end.value(i) - member.start.value(i);
            let e = by_name.entry(member.name.value(i).to_string()).or_default();
            e.0 += d;
            e.1 += 1;
            *by_node.entry(member.graph_node_id.value(i)).or_default() += d;
        }
        for (kernel, got) in by_name.iter().filter(|(k, _)| !k.starts_with('[')) {
            assert_eq!(Some(got), summary.get(kernel), "{name}: {kernel}");
        }
        let nodes: usize = truth.iter().map(|(_, n)| n.len()).sum();
        assert_eq!(nodes, by_node.len(), "{name}: {by_node:?}");
        let top = ops["top_thunks"].as_array().unwrap();
        for (instruction, its) in truth {
            let want: i64 = its.iter().map(|n| by_node[n]).sum();
            let row = top
                .iter()
                .find(|t| t["thunk"] == *instruction)
                .unwrap_or_else(|| panic!("{name}: {instruction} not among {top:?}"));
            assert_eq!(row["executions"], 10, "{name}: {row}");
            let got = f(&row["total_ms"]);
            assert!(
                (got - want as f64 * 1e-6).abs() < 1e-9,
                "{name}: {instruction}: {got} ms, its kernels {want} ns"
            );
        }
    }
}
