//! A seeded mutation fuzzer over a real archive: the example profile's members (the GPU
//! trace, the push/pop trace, thread metadata, an XLA dump module before and after its xz
//! layer) and the zip structure itself are damaged in many small ways, and `analyze` is run
//! on each result. Every run must end by itself, with exit 0 or an input error (exit 2, an
//! `error:` line): no panic, no signal, no hang.
//!
//! `cargo test --release --test fuzz` runs a fixed subset (500 inputs, seed 1). For a longer
//! campaign: `NSYS_JAX_PIPE_FUZZ_CASES=10000 NSYS_JAX_PIPE_FUZZ_SEED=7 cargo test --release
//! --test fuzz -- --nocapture`. Failing inputs are kept under `target/fuzz-failures/`.

mod classes;
pub(crate) use classes::{negatives, parquet_bytes, table, with_column};

use crate::common::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub(super) const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mlp-fsdp-2gpu.zip");
pub(super) const DUMP_MODULE: &str = "jit_train_step.sm_9.0a_gpu_after_optimizations.hlo.pb.xz";
/// Longer than any honest run of the example takes, by far.
const HANG: Duration = Duration::from_secs(60);

/// splitmix64: a small, well-mixed, seedable generator.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Damage `b` in one of several ways.
fn mutate(b: &mut Vec<u8>, rng: &mut Rng) -> String {
    if b.is_empty() {
        b.push(rng.next() as u8);
        return "grow".into();
    }
    let at = rng.below(b.len());
    match rng.below(7) {
        0 => {
            let k = 1 + rng.below(8);
            for _ in 0..k {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            format!("flip {k} bits")
        }
        1 => {
            let n = (1 + rng.below(64)).min(b.len() - at);
            for x in &mut b[at..at + n] {
                *x = rng.next() as u8;
            }
            format!("overwrite {n} bytes at {at}")
        }
        2 => {
            b.truncate(at);
            format!("truncate at {at}")
        }
        3 => {
            let n = 1 + rng.below(64);
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            b.splice(at..at, junk);
            format!("insert {n} bytes at {at}")
        }
        4 => {
            let n = (1 + rng.below(4096)).min(b.len() - at);
            let chunk = b[at..at + n].to_vec();
            b.splice(at..at, chunk);
            format!("duplicate {n} bytes at {at}")
        }
        5 => {
            // Lengths and counts live in little-endian integers: make one extreme.
            let extremes: [u64; 6] = [
                0,
                u64::MAX,
                i32::MAX as u64,
                u32::MAX as u64,
                1 << 40,
                i64::MAX as u64,
            ];
            let v = extremes[rng.below(extremes.len())];
            let w = [2usize, 4, 8][rng.below(3)].min(b.len() - at);
            b[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
            format!("extreme {w}-byte integer {v:#x} at {at}")
        }
        _ => {
            let n = (1 + rng.below(256)).min(b.len() - at);
            b.drain(at..at + n);
            format!("delete {n} bytes at {at}")
        }
    }
}

pub(super) fn members() -> Vec<(String, Vec<u8>)> {
    zip_members(Path::new(EXAMPLE))
        .into_iter()
        // The report is not read by `analyze` of an archive that has its derived tables.
        .filter(|m| !m.ends_with(".nsys-rep"))
        .map(|m| {
            let b = zip_read(Path::new(EXAMPLE), &m);
            (m, b)
        })
        .collect()
}

pub(super) fn zip_bytes(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in members {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        z.start_file(name.as_str(), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap().into_inner()
}

pub(super) fn xz(raw: &[u8]) -> Vec<u8> {
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 0);
    e.write_all(raw).unwrap();
    e.finish().unwrap()
}

/// The parquet file rewritten without compression or dictionaries.
fn plain_parquet(bytes: &[u8]) -> Vec<u8> {
    let b = table(bytes);
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .build();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, b.schema(), Some(props)).unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    out
}

/// One damaged archive: its bytes and what was done.
fn case(base: &[(String, Vec<u8>)], rng: &mut Rng) -> (Vec<u8>, String) {
    let targets = [
        "nvtx_gpu_proj_trace/trace.parquet",
        "nvtx_gpu_proj_trace/trace.parquet (plain)",
        "report_nvtx_pushpop_trace.parquet",
        "report_nvtx_pushpop_trace.parquet (plain)",
        "thread-metadata.parquet",
        "dump (xz)",
        "dump (proto)",
        "dump (proto)",
        "zip",
    ];
    let target = targets[rng.below(targets.len())];
    let mut m = base.to_vec();
    // Plain: the parquet file rewritten without compression or dictionaries, so that damaged
    // bytes reach the values rather than failing the decompressor.
    let target = match target.strip_suffix(" (plain)") {
        Some(member) => {
            let (_, b) = m.iter_mut().find(|(n, _)| n == member).unwrap();
            *b = plain_parquet(b);
            member
        }
        None => target,
    };
    let rounds = 1 + rng.below(3);
    let mut what = Vec::new();
    match target {
        "zip" => {
            let mut bytes = zip_bytes(&m);
            for _ in 0..rounds {
                what.push(mutate(&mut bytes, rng));
            }
            return (bytes, format!("zip: {}", what.join(", ")));
        }
        "dump (xz)" | "dump (proto)" => {
            let (_, b) = m
                .iter_mut()
                .find(|(n, _)| n.ends_with(DUMP_MODULE))
                .unwrap();
            if target == "dump (proto)" {
                let mut raw = Vec::new();
                liblzma::read::XzDecoder::new(&b[..])
                    .read_to_end(&mut raw)
                    .unwrap();
                for _ in 0..rounds {
                    what.push(mutate(&mut raw, rng));
                }
                *b = xz(&raw);
            } else {
                for _ in 0..rounds {
                    what.push(mutate(b, rng));
                }
            }
        }
        member => {
            let (_, b) = m.iter_mut().find(|(n, _)| n == member).unwrap();
            for _ in 0..rounds {
                what.push(mutate(b, rng));
            }
        }
    }
    (zip_bytes(&m), format!("{target}: {}", what.join(", ")))
}

#[derive(Debug)]
pub(super) enum Outcome {
    Ok,
    InputError(String),
    Bad(String),
}

pub(super) fn run_case(zip: &Path, out: &Path) -> Outcome {
    run_case_said(zip, out).0
}

/// [`run_case`], and what the run wrote on stderr.
pub(super) fn run_case_said(zip: &Path, out: &Path) -> (Outcome, String) {
    run_case_with(zip, out, |_| {})
}

/// [`run_case_said`], the command set up by `env` first (its environment).
pub(super) fn run_case_with(
    zip: &Path,
    out: &Path,
    env: impl FnOnce(&mut std::process::Command),
) -> (Outcome, String) {
    use std::os::unix::process::ExitStatusExt;
    let mut command = std::process::Command::new(bin());
    env(&mut command);
    let mut child = command
        .args(["analyze", "--no-cache", "-q", "-o"])
        .arg(out)
        .arg(zip)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = reader.join().unwrap();
    let Some(status) = status else {
        return (
            Outcome::Bad(format!("hang: no exit after {HANG:?}")),
            stderr,
        );
    };
    if let Some(sig) = status.signal() {
        return (
            Outcome::Bad(format!("killed by signal {sig}: {stderr}")),
            stderr,
        );
    }
    if stderr.contains("panicked") || stderr.contains("internal error") {
        return (Outcome::Bad(format!("panic: {stderr}")), stderr);
    }
    let outcome = match status.code() {
        Some(0) => Outcome::Ok,
        Some(2) => {
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            if let Some(msg) = last.strip_prefix("nsys-jax-pipe: error: ") {
                // The kind of error: the message without the archive's path and numbers.
                let kind: String = msg
                    .split(": ")
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join(": ")
                    .chars()
                    .filter(|c| !c.is_ascii_digit())
                    .take(70)
                    .collect();
                Outcome::InputError(kind)
            } else {
                Outcome::Bad(format!("exit 2 without an error line: {stderr}"))
            }
        }
        c => Outcome::Bad(format!("exit {c:?}: {stderr}")),
    };
    (outcome, stderr)
}

pub(super) fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn damaged_archives_end_in_an_answer_or_an_input_error() {
    let cases = env_or("NSYS_JAX_PIPE_FUZZ_CASES", 500) as usize;
    let seed = env_or("NSYS_JAX_PIPE_FUZZ_SEED", 1);
    let base = members();
    let tmp = tempfile::tempdir().unwrap();
    let failures_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let t = Instant::now();
    let results: Vec<(usize, String, Outcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let base = &base;
                let tmp = tmp.path();
                let failures_dir = &failures_dir;
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in (w..cases).step_by(workers) {
                        // Each case has its own generator: a case is reproducible alone.
                        let mut rng = Rng(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
                        let (bytes, what) = case(base, &mut rng);
                        let zip = tmp.join(format!("case{i}.zip"));
                        std::fs::write(&zip, &bytes).unwrap();
                        let mut o = run_case(&zip, &tmp.join(format!("out{i}")));
                        if let Outcome::Ok = o {
                            let found = negatives(&tmp.join(format!("out{i}")));
                            if !found.is_empty() {
                                o = Outcome::Bad(format!("negative numbers: {}", found.join(", ")));
                            }
                        }
                        if let Outcome::Bad(_) = o {
                            std::fs::create_dir_all(failures_dir).unwrap();
                            std::fs::copy(
                                &zip,
                                failures_dir.join(format!("seed{seed}-case{i}.zip")),
                            )
                            .unwrap();
                        }
                        let _ = std::fs::remove_file(&zip);
                        let _ = std::fs::remove_dir_all(tmp.join(format!("out{i}")));
                        out.push((i, what, o));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let ok = results
        .iter()
        .filter(|r| matches!(r.2, Outcome::Ok))
        .count();
    let input = results
        .iter()
        .filter(|r| matches!(r.2, Outcome::InputError(_)))
        .count();
    let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in &results {
        if let Outcome::InputError(k) = &r.2 {
            *kinds.entry(k.as_str()).or_default() += 1;
        }
    }
    let mut kinds: Vec<_> = kinds.into_iter().collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    let bad: Vec<_> = results
        .iter()
        .filter(|r| matches!(r.2, Outcome::Bad(_)))
        .collect();
    eprintln!(
        "fuzz: {cases} damaged archives (seed {seed}) in {:.0} s: {ok} analysed, {input} input errors, {} failures",
        t.elapsed().as_secs_f64(),
        bad.len()
    );
    for (k, n) in kinds.iter().take(12) {
        eprintln!("  {n:5} × {k}");
    }
    assert_eq!(results.len(), cases);
    assert!(
        input > cases / 10,
        "the mutations should break most archives"
    );
    for (i, what, o) in &bad {
        if let Outcome::Bad(why) = o {
            eprintln!("case {i} ({what}): {why}");
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {cases} inputs failed (kept in {})",
        bad.len(),
        failures_dir.display()
    );
}
