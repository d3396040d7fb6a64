//! `analyze --watch`: rank archives written one by one into a watched folder (one growing
//! slowly, one written under a temporary name) each update only that rank's nodes and the
//! reduces, the final outputs are a cold `analyze` of them all, and Ctrl-C ends it cleanly.

use crate::common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The run-wide nodes: the reduces, the warm-up context, decoding a new rank's HLO.
const RUN_WIDE: &[&str] = &[
    "warmup-context",
    "compile-sums-group",
    "hlo-schema",
    "hlo-module",
    // The page of the whole run, and its headline.
    "html-report",
    "headline",
];

/// Wait until the output folder's run record lists `n` inputs; the record.
fn wait_for_update(out: &Path, n: usize, child: &mut std::process::Child) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(out.join("pipeline-run.json"))
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes)
            && v["inputs"].as_array().map(Vec::len) == Some(n)
        {
            return v;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the watch ended: {status}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no update with {n} inputs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn ranks_arriving_one_by_one_update_only_their_nodes() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (folder, out, cache) = (
        tmp.path().join("job"),
        tmp.path().join("out"),
        tmp.path().join("cache"),
    );
    std::fs::create_dir(&folder).unwrap();
    let log = tmp.path().join("watch.log");
    let mut child = std::process::Command::new(bin())
        .args(args![
            "analyze",
            "--watch",
            &folder,
            "-o",
            &out,
            "--cache-dir",
            &cache,
            "-q"
        ])
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .env_remove("NSYS_JAX_PIPE_CACHE_URL")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(tmp.path().join("watch.err")).unwrap())
        .spawn()
        .unwrap();
    let ranks = pax_archives(&f);
    for (i, rank) in ranks.iter().enumerate() {
        let name = format!("proc{i}.zip");
        let dest = folder.join(&name);
        let bytes = std::fs::read(rank).unwrap();
        match i {
            // Still growing: half now, the rest a moment later.
            1 => {
                let mut w = std::fs::File::create(&dest).unwrap();
                w.write_all(&bytes[..bytes.len() / 2]).unwrap();
                w.flush().unwrap();
                std::thread::sleep(Duration::from_millis(400));
                w.write_all(&bytes[bytes.len() / 2..]).unwrap();
            }
            // Written under a temporary name, then renamed.
            2 => {
                let part = folder.join(format!("{name}.tmp"));
                std::fs::write(&part, &bytes).unwrap();
                std::thread::sleep(Duration::from_millis(1500));
                std::fs::rename(&part, &dest).unwrap();
            }
            _ => std::fs::write(&dest, &bytes).unwrap(),
        }
        let record = wait_for_update(&out, i + 1, &mut child);
        // The first update analyses one rank from nothing; each later one, one more rank.
        for n in record["nodes"].as_array().unwrap() {
            if n["status"] != "executed" || i == 0 {
                continue;
            }
            let kind = n["kind"].as_str().unwrap();
            let label = n["label"].as_str().unwrap_or("");
            if PER_PROCESS_KINDS.contains(&kind) {
                assert!(
                    label.ends_with(&name),
                    "update {}: {kind} of {label} executed",
                    i + 1
                );
            } else {
                assert!(
                    kind.starts_with("analysis:") || RUN_WIDE.contains(&kind),
                    "update {}: {kind} ({label}) executed",
                    i + 1
                );
            }
        }
    }
    // The last update's outputs are those of a cold analysis of the four ranks.
    let cold = tmp.path().join("cold");
    assert_ok(&analyze(
        &tmp.path().join("cold-cache"),
        &cold,
        &["-q"],
        &ranks,
    ));
    // The page names its inputs by path: the watched folder's copies against the ranks'
    // own paths. Everything else is the same.
    let without_inputs = |mut files: Vec<(String, Vec<u8>)>| {
        for (name, bytes) in files.iter_mut() {
            if name == "report.html" {
                let text = String::from_utf8_lossy(bytes).into_owned();
                let start = text.find("<dt>Inputs</dt><dd>").unwrap();
                let end = start + text[start..].find("</dd>").unwrap();
                *bytes = format!("{}{}", &text[..start], &text[end..]).into_bytes();
            }
        }
        files
    };
    let (watched, cold) = (
        without_inputs(output_files(&out)),
        without_inputs(output_files(&cold)),
    );
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&watched), names(&cold));
    let differ: Vec<&str> = watched
        .iter()
        .zip(&cold)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, _)| a.0.as_str())
        .collect();
    let first_difference = |a: &[u8], b: &[u8]| {
        let i = a
            .iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        let around = |v: &[u8]| {
            String::from_utf8_lossy(&v[i.saturating_sub(200)..(i + 200).min(v.len())]).into_owned()
        };
        format!("watched: {}\ncold: {}", around(a), around(b))
    };
    let shown: Vec<String> = watched
        .iter()
        .zip(&cold)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, b)| format!("{}: {}", a.0, first_difference(&a.1, &b.1)))
        .collect();
    assert!(
        differ.is_empty(),
        "these differ from a cold analysis: {differ:?}\n{}",
        shown.join("\n")
    );
    // Each rank was analysed once: four updates, no more.
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(said.matches("update ").count(), 4, "{said}");
    // Ctrl-C between updates: exit 0, nothing half-written.
    // SAFETY: kill(2) on the id of a child not yet waited for.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(tmp.path().join("watch.err")).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("stopped watching"), "{err}");
    let leftovers: Vec<PathBuf> = walkdir::WalkDir::new(&out)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(!err.contains("error"), "{err}");
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn an_edited_analysis_script_reruns_only_itself() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (folder, out) = (tmp.path().join("job"), tmp.path().join("out"));
    std::fs::create_dir(&folder).unwrap();
    for rank in &pax_archives(&f)[..2] {
        std::fs::copy(rank, folder.join(rank.file_name().unwrap())).unwrap();
    }
    let script = tmp.path().join("count.py");
    let version = |n: u32| format!("open('result.txt', 'w').write('version {n}')\n");
    std::fs::write(&script, version(1)).unwrap();
    let mut child = std::process::Command::new(bin())
        .args(args![
            "analyze",
            "--watch",
            &folder,
            "-o",
            &out,
            "--cache-dir",
            tmp.path().join("cache"),
            "-q",
            "--analysis",
            "summary",
            "--analysis",
            &script
        ])
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .env_remove("NSYS_JAX_PIPE_CACHE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let result = out.join("analysis/count/result.txt");
    let wait_for = |text: &str, child: &mut std::process::Child| {
        let t0 = Instant::now();
        while std::fs::read_to_string(&result).ok().as_deref() != Some(text) {
            assert!(child.try_wait().unwrap().is_none(), "the watch ended");
            assert!(t0.elapsed() < Duration::from_secs(120), "no {text:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // An update writes the analyses' files before its run record (each replaced whole): the
    // record of the update that wrote a result is the first record that differs from the one
    // before it.
    let record_after = |before: Option<&[u8]>| {
        let t0 = Instant::now();
        loop {
            if let Ok(bytes) = std::fs::read(out.join("pipeline-run.json"))
                && Some(bytes.as_slice()) != before
            {
                break bytes;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no new run record");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("version 1", &mut child);
    let first = record_after(None);
    // Edited: the next update runs the script again, and nothing else.
    std::fs::write(&script, version(2)).unwrap();
    wait_for("version 2", &mut child);
    let second: serde_json::Value = serde_json::from_slice(&record_after(Some(&first))).unwrap();
    let run: Vec<String> = second["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "executed")
        .map(|n| n["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(run, vec!["analysis-script:count".to_string()]);
    // The edit took one update: none follows once the script has settled.
    let record = std::fs::read(out.join("pipeline-run.json")).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(child.try_wait().unwrap().is_none(), "the watch ended");
    assert!(std::fs::read(out.join("pipeline-run.json")).unwrap() == record);
    // SAFETY: kill(2) on the id of a child not yet waited for.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
