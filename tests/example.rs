//! The example profile the repository ships (`examples/mlp-fsdp-2gpu.zip`, a real capture of
//! `examples/workload.py` on two H200s, archived by this tool): analysed from the archive
//! (no fixtures, no nsys needed), and, where nsys is installed, from the report and dump it
//! holds, which must give the same archive and the same numbers.

use crate::common::*;
use std::io::Read;
use std::path::{Path, PathBuf};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip")
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems: the archive's copies are read from the report inside it"
)]
fn example_archive_analyses() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = analyze(&tmp.path().join("cache"), &out, &[], &[example()]);
    assert_ok(&o);
    let s = json(&out.join("summary.json"));
    let modules = s["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 1, "{s}");
    let step = &modules[0];
    assert_eq!(step["name"], "jit_train_step");
    // 5 profiled steps on 2 GPUs; the first of each device is warm-up (communication).
    assert_eq!(step["executions"], 8);
    assert_eq!(step["thunks_mean"], 20.0);
    let mean = step["duration_ms_mean"].as_f64().unwrap();
    assert!((0.2..0.5).contains(&mean), "{mean}");
    let c = json(&out.join("communication.json"));
    let rows = c["bandwidth"].as_array().unwrap();
    for (col, size) in [
        ("all-gather", 8388608u64),
        ("reduce-scatter", 16777216),
        ("all-to-all", 2097152),
        ("all-reduce", 4),
    ] {
        assert!(
            rows.iter()
                .any(|r| r["collective"] == col && r["message_size_bytes"] == size),
            "{col} {size}: {c}"
        );
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let text: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("wrote ") && !l.starts_with("report: "))
        .collect();
    insta::assert_snapshot!("example_analyze_stdout", text.join("\n"));
}

/// Unpack the report and the dump (decompressed) of the example into `dir`.
fn unpack_capture(dir: &Path) -> PathBuf {
    let zip = example();
    for m in zip_members(&zip) {
        if let Some(rel) = m.strip_prefix("dump/") {
            let xz = zip_read(&zip, &m);
            let mut raw = Vec::new();
            liblzma::read::XzDecoder::new(xz.as_slice())
                .read_to_end(&mut raw)
                .unwrap();
            let path = dir
                .join("dump_example")
                .join(rel.strip_suffix(".xz").unwrap());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, raw).unwrap();
        }
    }
    let report = dir.join("example.nsys-rep");
    std::fs::write(&report, zip_read(&zip, "example.nsys-rep")).unwrap();
    report
}

#[test]
#[cfg_attr(
    not(test_nsys),
    ignore = "needs Nsight Systems (scripts/install-nsys.sh .nsys, or NSYS)"
)]
fn example_report_gives_the_shipped_archive() {
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("capture");
    let report = unpack_capture(&cap);
    let cache = tmp.path().join("cache");

    let zip = tmp.path().join("again.zip");
    assert_ok(&archive_with(&nsys, &report, &zip, &cache));
    let shipped = example();
    // The shipped archive was made before copies between modules and user NVTX ranges were
    // recorded, and before archives carried install.sh and the notebook: the same members
    // but those.
    let later = [
        "nsys-jax-pipe/gpu-transfers.parquet",
        "nsys-jax-pipe/nvtx-user.parquet",
        "install.sh",
        "Analysis.ipynb",
    ];
    let ours: Vec<String> = zip_members(&zip)
        .into_iter()
        .filter(|m| !m.starts_with("sources/") && !later.contains(&m.as_str()))
        .collect();
    for m in later {
        assert!(zip_members(&zip).iter().any(|z| z == m), "{m}");
    }
    let theirs: Vec<String> = zip_members(&shipped)
        .into_iter()
        .filter(|m| !m.starts_with("sources/"))
        .collect();
    assert_eq!(ours, theirs);
    // The derived tables are equal to the shipped ones (same export, same projection).
    for m in [
        "nvtx_gpu_proj_trace/trace.parquet",
        "report_nvtx_pushpop_trace.parquet",
        "thread-metadata.parquet",
        "system-metadata.parquet",
        "device-metadata.parquet",
    ] {
        let a = nsys_jax_pipe::api::read_parquet(zip_read(&zip, m)).unwrap();
        let b = nsys_jax_pipe::api::read_parquet(zip_read(&shipped, m)).unwrap();
        assert_eq!(a.columns(), b.columns(), "{m}");
    }

    // Analysing the report directly gives what analysing the archive gives.
    let direct = tmp.path().join("direct");
    let o = run_with_nsys(
        &nsys,
        &os(&args![
            "analyze",
            "--cache-dir",
            &cache,
            "-o",
            &direct,
            &report
        ]),
    );
    assert_ok(&o);
    let archived = tmp.path().join("archived");
    assert_ok(&analyze(&cache, &archived, &[], &[shipped]));
    for file in ["summary.json", "communication.json", "compilation.json"] {
        assert_eq!(
            without_labels(json(&direct.join(file))),
            without_labels(json(&archived.join(file))),
            "{file}"
        );
    }
}
