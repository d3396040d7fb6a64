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

/// The ground truth a capture's README gives: instruction → its graph nodes (rows
/// `| <node id> | `kernel` | `instruction` | ...`), read off the XLA dump's thunk order and the
/// launches' time order, and checked against the same program without command buffers.
fn readme_nodes(dir: &Path) -> BTreeMap<String, Vec<i64>> {
    let text = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        if let Ok(node) = cells[1].parse::<i64>() {
            // The first `quoted` name (a note may follow it).
            let instruction = cells[3].split('`').nth(1).unwrap_or(cells[3]).to_string();
            out.entry(instruction).or_default().push(node);
        }
    }
    out
}

/// Library kernels inside command buffers (`tests/data/*-cmdbuf`, READMEs there): cuBLAS and
/// cuBLASLt GEMMs (bf16, f16, fp8, with bias/ReLU epilogues) with their workspace memsets,
/// cuDNN forward, data- and weight-gradient convolutions (workspace initialisation and
/// split-K reduction kernels), whose names say nothing of their instructions and whose graph
/// nodes come after all the fusions' in node order; an FSDP step's graph on two devices. All
/// of the command buffers' time is attributed, and each instruction's time is the sum of the
/// durations of the graph nodes its README rows list (the report's own numbers, checked
/// against Nsight Systems' kernel summary; on two devices, without each device's first launch).
#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn library_kernels_inside_command_buffers_go_to_their_instructions() {
    let Some(nsys) = nsys() else { return };
    for (name, one_device) in [
        ("gemm-bf16-cmdbuf", true),
        ("mixed-cmdbuf", true),
        ("gemm-lowp-cmdbuf", true),
        ("gemm-epilogue-cmdbuf", true),
        ("convnet-cudnn-cmdbuf", true),
        ("convnet-cmdbuf", true),
        ("fsdp2-cmdbuf", false),
    ] {
        let dir = data(name);
        let truth = readme_nodes(&dir);
        assert!(!truth.is_empty(), "{name}: no ground truth");
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let report = dir.join("rep.nsys-rep");
        let ops = ops_json(&nsys, &cache, &tmp.path().join("out"), &report);
        let cb = &ops["command_buffers"];
        assert_eq!(f(&cb["attributed_ms"]), f(&cb["ms"]), "{name}: {cb}");
        assert!(f(&cb["ms"]) > 0.0, "{name}: {cb}");
        let zip = tmp.path().join("cb.zip");
        assert_ok(&archive_with(&nsys, &report, &zip, &cache));
        let member = graph_ops::read(zip_read(&zip, MEMBER)).unwrap();
        // The member is the report's: per kernel name, Nsight Systems' own totals.
        let summary = kernel_summary(&dir.join("kern_cuda_gpu_kern_sum.csv"));
        let mut by_name: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        let mut by_node: BTreeMap<i64, i64> = BTreeMap::new();
        // On several devices `ops` counts the steady state: each device's first launch of
        // the graph is its warm-up.
        let mut first: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for i in 0..member.len() {
            let (dev, start) = (member.device.value(i), member.start.value(i));
            let e = first
                .entry(dev)
                .or_insert((start, member.range_id.value(i)));
            if start < e.0 {
                *e = (start, member.range_id.value(i));
            }
        }
        for i in 0..member.len() {
            let d = member.end.value(i) - member.start.value(i);
            let e = by_name.entry(member.name.value(i).to_string()).or_default();
            e.0 += d;
            e.1 += 1;
            let warm_up = first[&member.device.value(i)].1 == member.range_id.value(i);
            if one_device || !warm_up {
                *by_node.entry(member.graph_node_id.value(i)).or_default() += d;
            }
        }
        for (kernel, got) in by_name.iter().filter(|(k, _)| !k.starts_with('[')) {
            // The summary names templated kernels in full (`void ns::kernel<...>`).
            let sum = summary.get(kernel).copied().or_else(|| {
                summary
                    .iter()
                    .find(|(full, _)| {
                        full.contains(&format!("::{kernel}<"))
                            || full.contains(&format!(" {kernel}<"))
                    })
                    .map(|(_, s)| *s)
            });
            // Kernels launched both inside and outside graphs count more in the summary.
            assert!(
                sum.is_some_and(|s| s.0 >= got.0),
                "{name}: {kernel}: {got:?} {sum:?}"
            );
        }
        let top = ops["top_thunks"].as_array().unwrap();
        let mut checked = 0;
        for (instruction, nodes) in &truth {
            let want: i64 = nodes.iter().filter_map(|n| by_node.get(n)).sum();
            if want == 0 {
                continue; // nodes the profiler recorded no activity for (README)
            }
            let row = top
                .iter()
                .find(|t| t["thunk"] == *instruction)
                .unwrap_or_else(|| panic!("{name}: {instruction} not among the top thunks"));
            let got = f(&row["total_ms"]);
            assert!(
                (got - want as f64 * 1e-6).abs() < 1e-9,
                "{name}: {instruction}: {got} ms, its kernels {want} ns"
            );
            checked += 1;
        }
        assert!(checked >= 4, "{name}: {checked}");
    }
}
