//! Hostile and broken archives: members that try to escape the output folder, decompression
//! bombs, sizes that lie, dumps of another program, traces that parse but cannot be true.
//! Each is an input error naming the file and the problem (exit 2, one line), never a panic,
//! a hang, memory without bound, a file outside the output folder or a wrong number.

use crate::common::*;
use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mlp-fsdp-2gpu.zip");
const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";

/// The example archive's members, in order.
fn example_members() -> Vec<(String, Vec<u8>)> {
    let p = Path::new(EXAMPLE);
    zip_members(p)
        .into_iter()
        .map(|m| {
            let b = zip_read(p, &m);
            (m, b)
        })
        .collect()
}

/// Write `members` as a zip (deflated), names as given, unchecked.
fn write_zip(path: &Path, members: &[(String, Vec<u8>)]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in members {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .large_file(bytes.len() as u64 >= u32::MAX as u64);
        z.start_file(name.as_str(), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

/// The example archive with `f` applied to its member list.
fn example_with(path: &Path, f: impl FnOnce(&mut Vec<(String, Vec<u8>)>)) -> PathBuf {
    let mut m = example_members();
    f(&mut m);
    write_zip(path, &m);
    path.to_path_buf()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 with one line of error that names `file` and says each of `what`.
fn assert_input_error(o: &std::process::Output, file: &Path, what: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    let name = file.file_name().unwrap().to_string_lossy();
    assert!(
        lines[0].contains(name.as_ref()),
        "{:?} should name {name}",
        lines[0]
    );
    for w in what {
        assert!(lines[0].contains(w), "{:?} should say {w:?}", lines[0]);
    }
}

/// Every file under `root`, relative.
fn tree(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.path().strip_prefix(root).unwrap().display().to_string())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------- zip-slip

#[test]
fn members_that_escape_are_refused_and_nothing_is_written_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Scripts run in a temporary folder under TMPDIR: give it one inside `root`, deep enough
    // that `../` chains from the laid-out archive stay inside `root` where we can see them.
    let tmpdir = root.join("t1/t2/t3/t4");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let script = root.join("count.sh");
    std::fs::write(&script, "#!/bin/sh\nls \"$1\" > listing.txt\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let abs = root.join("outside-abs.txt");
    let names = [
        "../../evil-up.txt".to_string(),
        "../../../../../evil-deep.txt".to_string(),
        abs.display().to_string(),
        "dump/../../../../evil-dump.txt".to_string(),
        "sources/../../../../evil-src.txt".to_string(),
    ];
    for (i, name) in names.iter().enumerate() {
        let zip = example_with(&root.join(format!("slip{i}.zip")), |m| {
            m.push((name.clone(), b"pwned\n".to_vec()))
        });
        let other = example_with(&root.join(format!("other{i}.zip")), |_| {});
        for inputs in [vec![zip.clone()], vec![zip.clone(), other]] {
            let before = tree(root);
            let out = root.join("out");
            let o = std::process::Command::new(bin())
                .args(["analyze", "--no-cache", "-o"])
                .arg(&out)
                .args(["--analysis", script.to_str().unwrap()])
                .args(&inputs)
                .env("TMPDIR", &tmpdir)
                .output()
                .unwrap();
            if name.starts_with("sources/") {
                // Only kept for people to read: skipped with a warning; the run goes on.
                assert_ok(&o);
                assert!(stderr(&o).contains("skipped member"), "{}", stderr(&o));
                std::fs::remove_dir_all(&out).unwrap();
            } else {
                let why = if name.starts_with('/') {
                    "an absolute path"
                } else {
                    "a path with `..`"
                };
                assert_input_error(&o, &zip, &["refused member", why]);
            }
            assert_eq!(tree(root), before, "{name}: files appeared");
            assert!(!abs.exists());
        }
    }
}

#[test]
fn symbolic_link_members_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let zip = tmp.path().join("link.zip");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&zip).unwrap());
    for (name, bytes) in example_members() {
        z.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(&bytes).unwrap();
    }
    z.add_symlink(
        "dump/link.pb",
        "/etc/passwd",
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    z.finish().unwrap();
    let o = analyze(
        &tmp.path().join("c"),
        &tmp.path().join("o"),
        &[],
        &[zip.clone()],
    );
    assert_input_error(&o, &zip, &["dump/link.pb", "symbolic link"]);
}

#[test]
fn special_files_are_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("profile.zip");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a path in our own temporary folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let o = analyze(
        &tmp.path().join("c"),
        &tmp.path().join("o"),
        &[],
        &[fifo.clone()],
    );
    assert_input_error(&o, &fifo, &["not a regular file"]);
    let o = analyze(
        &tmp.path().join("c"),
        &tmp.path().join("o"),
        &["--pipeline", fifo.to_str().unwrap()],
        &[PathBuf::from(EXAMPLE)],
    );
    assert_input_error(&o, &fifo, &["not a regular file"]);
}

// ---------------------------------------------------------------- bombs and lying sizes

/// A multi-stream xz of `n × 64 MiB` zeros: small, built in a second.
fn xz_bomb(n: usize) -> Vec<u8> {
    let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 0);
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        enc.write_all(&zeros).unwrap();
    }
    let one = enc.finish().unwrap();
    one.repeat(n)
}

/// `analyze --no-cache -o out zip`, returning its output, wall time and peak RSS (KiB).
fn analyze_measured(zip: &Path, out: &Path) -> (std::process::Output, f64, i64) {
    use std::os::unix::process::ExitStatusExt;
    let t = std::time::Instant::now();
    let child = std::process::Command::new(bin())
        .args(["analyze", "--no-cache", "-o"])
        .arg(out)
        .arg(zip)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: wait4 on our own child; the rusage is zero-initialised plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let out_pipe = child.stdout;
    let err_pipe = child.stderr;
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let (mut o, mut e) = (Vec::new(), Vec::new());
        out_pipe.unwrap().read_to_end(&mut o).unwrap();
        err_pipe.unwrap().read_to_end(&mut e).unwrap();
        (o, e)
    });
    // SAFETY: as above.
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut ru) }, pid);
    let wall = t.elapsed().as_secs_f64();
    let (stdout, stderr) = reader.join().unwrap();
    let out = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout,
        stderr,
    };
    (out, wall, ru.ru_maxrss)
}

#[test]
fn a_4_gib_xz_bomb_stops_at_its_limit_with_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    // 64 streams of 64 MiB of zeros: 4 GiB once decompressed, as the push/pop trace...
    let bomb = xz_bomb(64);
    assert!(bomb.len() < 2 << 20, "{}", bomb.len());
    let zip = example_with(&tmp.path().join("bomb.zip"), |m| {
        m.retain(|(n, _)| n != "report_nvtx_pushpop_trace.parquet");
        m.push(("report_nvtx_pushpop_trace.csv.xz".into(), bomb.clone()));
    });
    let (o, wall, rss_kib) = analyze_measured(&zip, &tmp.path().join("o"));
    assert_input_error(
        &o,
        &zip,
        &["report_nvtx_pushpop_trace.csv.xz", "decompression bomb"],
    );
    eprintln!(
        "4 GiB xz bomb ({} KiB): refused in {wall:.2} s, peak RSS {} MiB",
        bomb.len() >> 10,
        rss_kib >> 10
    );
    assert!(rss_kib < 500 << 10, "peak RSS {} MiB", rss_kib >> 10);

    // ... and as a module of the XLA dump.
    let zip = example_with(&tmp.path().join("dumpbomb.zip"), |m| {
        let (_, b) = m
            .iter_mut()
            .find(|(n, _)| n.ends_with("jit_train_step.sm_9.0a_gpu_after_optimizations.hlo.pb.xz"))
            .expect("the example dumps jit_train_step");
        *b = bomb.clone();
    });
    let (o, _, rss_kib) = analyze_measured(&zip, &tmp.path().join("o"));
    assert_input_error(&o, &zip, &["jit_train_step", "decompression bomb"]);
    assert!(rss_kib < 500 << 10, "peak RSS {} MiB", rss_kib >> 10);
}

#[test]
fn a_deflate_bomb_member_stops_at_its_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let zip = example_with(&tmp.path().join("deflate.zip"), |m| {
        let (_, b) = m.iter_mut().find(|(n, _)| n == TRACE).unwrap();
        *b = vec![0u8; 200 << 20];
    });
    let (o, _, rss_kib) = analyze_measured(&zip, &tmp.path().join("o"));
    assert_input_error(&o, &zip, &[TRACE, "decompression bomb"]);
    assert!(rss_kib < 500 << 10, "peak RSS {} MiB", rss_kib >> 10);
}

/// Overwrite the uncompressed size `member` declares in the zip64 extra field of its central
/// directory record.
fn lie_about_size(zip: &Path, member: &str, size: u64) {
    let mut b = std::fs::read(zip).unwrap();
    let mut i = 0;
    let mut patched = false;
    while i + 46 <= b.len() {
        if b[i..i + 4] == *b"PK\x01\x02" {
            let n = u16::from_le_bytes([b[i + 28], b[i + 29]]) as usize;
            let x = u16::from_le_bytes([b[i + 30], b[i + 31]]) as usize;
            let name = &b[i + 46..i + 46 + n];
            if name == member.as_bytes() {
                let mut e = i + 46 + n;
                let end = e + x;
                while e + 4 <= end {
                    let tag = u16::from_le_bytes([b[e], b[e + 1]]);
                    let len = u16::from_le_bytes([b[e + 2], b[e + 3]]) as usize;
                    if tag == 1 {
                        b[e + 4..e + 12].copy_from_slice(&size.to_le_bytes());
                        patched = true;
                    }
                    e += 4 + len;
                }
            }
        }
        i += 1;
    }
    assert!(patched, "no zip64 record for {member}");
    std::fs::write(zip, b).unwrap();
}

#[test]
fn declared_sizes_that_lie_allocate_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, size) in [1u64 << 40, (1u64 << 63) + 5].into_iter().enumerate() {
        let zip = tmp.path().join(format!("lie{i}.zip"));
        let mut z = zip::ZipWriter::new(std::fs::File::create(&zip).unwrap());
        for (name, bytes) in example_members() {
            let opts = zip::write::SimpleFileOptions::default().large_file(name == TRACE);
            z.start_file(name.as_str(), opts).unwrap();
            z.write_all(&bytes).unwrap();
        }
        z.finish().unwrap();
        lie_about_size(&zip, TRACE, size);
        let o = analyze(
            &tmp.path().join("c"),
            &tmp.path().join("o"),
            &[],
            &[zip.clone()],
        );
        let err = stderr(&o);
        assert!(
            o.status.code() == Some(2) || o.status.success(),
            "{:?} {err}",
            o.status
        );
        assert!(
            !err.contains("panicked") && !err.contains("internal error"),
            "{err}"
        );
        if !o.status.success() {
            assert_input_error(&o, &zip, &[]);
        }
    }
}

// ---------------------------------------------------------------- the dump against the profile

fn summary_modules(out: &Path) -> Vec<String> {
    let s = json(&out.join("summary.json"));
    s["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_dump_of_another_program_is_an_input_error_and_a_partial_one_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    // Another program's dump: every after-optimizations module renamed (its id kept).
    let zip = example_with(&tmp.path().join("otherdump.zip"), |m| {
        m.retain(|(n, _)| !n.starts_with("dump/") || n.contains("after_optimizations.hlo"));
        for (n, _) in m.iter_mut() {
            if let Some(rest) = n.strip_prefix("dump/module_") {
                let id = &rest[..4];
                *n = format!(
                    "dump/module_{id}.jit_other_program.sm_9.0a_gpu_after_optimizations.hlo.pb.xz"
                );
            }
        }
        for (n, b) in m.iter_mut().filter(|(n, _)| n.starts_with("dump/")) {
            let _ = n;
            *b = rename_module_in_dump(b);
        }
    });
    let o = analyze(
        &tmp.path().join("c"),
        &tmp.path().join("o"),
        &[],
        &[zip.clone()],
    );
    assert_input_error(&o, &zip, &["dump/", "holds none of the", "jit_train_step"]);

    // One program missing (every other execution of the step renamed to a program the dump
    // does not hold): a warning saying what is lost, and the analysis goes on.
    let b = read_trace();
    let text = text_column(&b);
    let seen = std::cell::Cell::new(0);
    let trace = with_column(text, |c| {
        str_map(c, |s| {
            if s.contains("XlaModule:#") && s.contains("hlo_module=jit_train_step,") {
                seen.set(seen.get() + 1);
                if seen.get() % 2 == 0 {
                    return s.replace(
                        "hlo_module=jit_train_step,program_id=",
                        "hlo_module=jit_extra,program_id=9",
                    );
                }
            }
            s.to_string()
        })
    });
    let zip = example_with(&tmp.path().join("partial.zip"), |m| {
        m.iter_mut().find(|(n, _)| n == TRACE).unwrap().1 = trace;
    });
    let out = tmp.path().join("o2");
    let o = analyze(&tmp.path().join("c"), &out, &[], &[zip.clone()]);
    assert_ok(&o);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(
        text.contains("missing from the XLA dump") && text.contains("jit_extra"),
        "{text}"
    );
}

/// An after-optimizations HLO module (xz) with its module name replaced by another of the
/// same length, so that ids match and names do not.
fn rename_module_in_dump(xz: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut raw = Vec::new();
    liblzma::read::XzDecoder::new(xz)
        .read_to_end(&mut raw)
        .unwrap();
    for from in [
        "jit_train_step",
        "jit_init_params",
        "jit__threefry_seed",
        "jit_stage",
        "jit_evaluate",
    ] {
        let to: String = "x".repeat(from.len());
        let mut i = 0;
        while i + from.len() <= raw.len() {
            if &raw[i..i + from.len()] == from.as_bytes() {
                raw[i..i + from.len()].copy_from_slice(to.as_bytes());
            }
            i += 1;
        }
    }
    let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
    enc.write_all(&raw).unwrap();
    enc.finish().unwrap()
}

// ---------------------------------------------------------------- traces that cannot be true

fn read_trace() -> RecordBatch {
    let bytes = zip_read(Path::new(EXAMPLE), TRACE);
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(bytes),
    )
    .unwrap()
    .build()
    .unwrap();
    let batches: Vec<RecordBatch> = r.map(Result::unwrap).collect();
    arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
}

fn write_trace(b: &RecordBatch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, b.schema(), None).unwrap();
    w.write(b).unwrap();
    w.close().unwrap();
    out
}

/// The example's trace with column `name` replaced by `f(old column)` (type may change).
fn with_column(name: &str, f: impl Fn(&ArrayRef) -> ArrayRef) -> Vec<u8> {
    let b = read_trace();
    let schema = b.schema();
    let mut fields = Vec::new();
    let mut cols = Vec::new();
    for (field, col) in schema.fields().iter().zip(b.columns()) {
        if field.name() == name {
            let c = f(col);
            fields.push(arrow::datatypes::Field::new(
                name,
                c.data_type().clone(),
                true,
            ));
            cols.push(c);
        } else {
            fields.push(field.as_ref().clone());
            cols.push(col.clone());
        }
    }
    let schema = Arc::new(arrow::datatypes::Schema::new(fields));
    write_trace(&RecordBatch::try_new(schema, cols).unwrap())
}

fn i64_map(c: &ArrayRef, f: impl Fn(usize, i64) -> i64) -> ArrayRef {
    let c = arrow::compute::cast(c, &arrow::datatypes::DataType::Int64).unwrap();
    let c = c.as_primitive::<arrow::datatypes::Int64Type>();
    Arc::new(
        (0..c.len())
            .map(|i| (!c.is_null(i)).then(|| f(i, c.value(i))))
            .collect::<Int64Array>(),
    )
}

fn str_map(c: &ArrayRef, f: impl Fn(&str) -> String) -> ArrayRef {
    let c = c.as_string::<i32>();
    Arc::new(c.iter().map(|v| v.map(&f)).collect::<StringArray>())
}

/// Analyse the example with its trace replaced.
fn analyze_trace(tmp: &Path, name: &str, trace: Vec<u8>) -> (PathBuf, std::process::Output) {
    let zip = example_with(&tmp.join(format!("{name}.zip")), |m| {
        m.iter_mut().find(|(n, _)| n == TRACE).unwrap().1 = trace;
    });
    let o = analyze(
        &tmp.join("c"),
        &tmp.join(format!("o-{name}")),
        &[],
        &[zip.clone()],
    );
    (zip, o)
}

fn text_column(b: &RecordBatch) -> &'static str {
    if b.column_by_name("Name").is_some() {
        "Name"
    } else {
        "Text"
    }
}

#[test]
fn traces_that_cannot_be_true_are_input_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let b = read_trace();
    let text = text_column(&b);
    let (start, dur_or_end) = if text == "Name" {
        ("Projected Start", "Projected Duration")
    } else {
        ("Start", "End")
    };

    // Names stored as numbers.
    let (zip, o) = analyze_trace(
        tmp.path(),
        "intnames",
        with_column(text, |c| {
            Arc::new(Int64Array::from_iter_values(0..c.len() as i64))
        }),
    );
    assert_input_error(&o, &zip, &[TRACE, "not text"]);

    // Ranges that end before they start.
    let (zip, o) = analyze_trace(
        tmp.path(),
        "negative",
        with_column(dur_or_end, |c| {
            i64_map(c, |i, v| if i % 7 == 3 { -v.abs() - 5 } else { v })
        }),
    );
    assert_input_error(&o, &zip, &[TRACE, "negative duration"]);

    // Times at the end of the 64-bit range.
    let (zip, o) = analyze_trace(
        tmp.path(),
        "overflow",
        with_column(start, |c| {
            i64_map(c, |i, v| if i == 5 { i64::MAX - 10 } else { v })
        }),
    );
    assert_input_error(&o, &zip, &[TRACE]);

    // XLA's range names without their `#` delimiters.
    let (zip, o) = analyze_trace(
        tmp.path(),
        "nohash",
        with_column(text, |c| {
            str_map(c, |s| s.replace(":#", ":").replace('#', ""))
        }),
    );
    assert_input_error(&o, &zip, &[TRACE, "not in XLA's NVTX form"]);

    // Program ids too large for any integer.
    let (zip, o) = analyze_trace(
        tmp.path(),
        "bigid",
        with_column(text, |c| {
            str_map(c, |s| {
                s.replace("program_id=", "program_id=99999999999999999999")
            })
        }),
    );
    assert_input_error(&o, &zip, &[TRACE, "not in XLA's NVTX form"]);
}

#[test]
fn module_names_beyond_ascii_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let b = read_trace();
    let text = text_column(&b);
    let trace = with_column(text, |c| {
        str_map(c, |s| s.replace("jit_train_step", "jit_résumé"))
    });
    // Without a dump (its module names would not match the renamed trace).
    let zip = example_with(&tmp.path().join("resume.zip"), |m| {
        m.retain(|(n, _)| !n.starts_with("dump/"));
        m.iter_mut().find(|(n, _)| n == TRACE).unwrap().1 = trace;
    });
    let out = tmp.path().join("o");
    let o = analyze(&tmp.path().join("c"), &out, &[], &[zip]);
    assert_ok(&o);
    let names = summary_modules(&out);
    assert!(names.iter().any(|n| n == "jit_résumé"), "{names:?}");
}

#[test]
fn an_empty_or_foreign_dump_given_with_a_report_is_an_input_error() {
    let (Some(f), Some(nsys)) = (fixtures(), nsys()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let report = f.join("h200/fsdp2_1proc/rep.nsys-rep");
    let empty = tmp.path().join("empty-dump");
    std::fs::create_dir(&empty).unwrap();
    let run = |dump: &Path| {
        run_with_nsys(
            &nsys,
            &os(&args![
                "analyze",
                "--cache-dir",
                tmp.path().join("c"),
                "-o",
                tmp.path().join("o"),
                &report,
                "--dump",
                dump
            ]),
        )
    };
    // The run first says which dump it uses; the error is the last line.
    let last_error = |o: &std::process::Output, dump: &Path, what: &[&str]| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("nsys-jax-pipe: error: "), "{err}");
        assert!(last.contains(dump.to_str().unwrap()), "{last}");
        for w in what {
            assert!(last.contains(w), "{last:?} should say {w:?}");
        }
    };
    let o = run(&empty);
    last_error(&o, &empty, &["holds none of the", "jit_train_step"]);
    // The example's dump: another run's programs (same names, other ids).
    let other = tmp.path().join("other-dump");
    std::fs::create_dir(&other).unwrap();
    for (name, bytes) in example_members() {
        if let Some(file) = name
            .strip_prefix("dump/")
            .and_then(|n| n.strip_suffix(".xz"))
            && !file.contains('/')
        {
            let mut raw = Vec::new();
            use std::io::Read;
            liblzma::read::XzDecoder::new(&bytes[..])
                .read_to_end(&mut raw)
                .unwrap();
            std::fs::write(other.join(file), raw).unwrap();
        }
    }
    let o = run(&other);
    last_error(&o, &other, &["holds none of the"]);
    assert!(!tmp.path().join("o").exists());
}
