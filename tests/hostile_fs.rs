//! Hostile conditions on the file system: interrupts while an archive replaces another, runs
//! killed with SIGKILL, umasks, and full disks. A full disk is a per-process file size limit
//! (`RLIMIT_FSIZE`, with SIGXFSZ ignored, so that writes past it fail with EFBIG as they would
//! with ENOSPC): it needs no privileges, unlike mounting a small tmpfs.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip")
}

/// The binary with a private TMPDIR, run in `dir`.
fn command(dir: &Path, args: &[&std::ffi::OsStr]) -> Command {
    let tmp = dir.join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(dir)
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .env("TMPDIR", &tmp);
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Names in `dir` (none when it does not exist) that look like temporary files or folders of
/// this tool.
fn temporaries(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".nsys-jax-pipe-") || n.starts_with("nsys-jax-pipe-"))
        .collect()
}

fn combine_args(out: &Path, cache: &Path, inputs: &[PathBuf]) -> Vec<std::ffi::OsString> {
    let mut a = args!["combine", "-f", "-o", out, "--cache-dir", cache];
    a.extend(inputs.iter().map(|p| p.into()));
    a
}

/// SIGTERM at delays spread over a `combine -f` that replaces an existing archive: the exit
/// code and message always match what is on disk, and nothing temporary stays.
#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn an_interrupt_never_leaves_a_replaced_archive_unreported() {
    let Some(f) = fixtures() else { return };
    let pax = pax_archives(&f);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cache = d.join("cache");
    let out = d.join("out.zip");
    // The old archive, and the new one (the cache now holds everything it needs).
    let o = command(d, &os(&combine_args(&out, &cache, &pax[..2])))
        .output()
        .unwrap();
    assert_ok(&o);
    let old = std::fs::read(&out).unwrap();
    let reference = d.join("reference.zip");
    let o = command(d, &os(&combine_args(&reference, &cache, &pax[..3])))
        .output()
        .unwrap();
    assert_ok(&o);
    let new = std::fs::read(&reference).unwrap();
    std::fs::remove_file(&reference).unwrap();
    assert_ne!(old, new);
    // How long one replacement takes.
    let args = combine_args(&out, &cache, &pax[..3]);
    let t0 = Instant::now();
    assert_ok(&command(d, &os(&args)).output().unwrap());
    let whole = t0.elapsed();
    let trials = 20;
    let mut outcomes = std::collections::BTreeMap::<&str, u32>::new();
    for i in 0..trials {
        std::fs::remove_file(&out).unwrap();
        std::fs::write(&out, &old).unwrap();
        let delay = whole.mul_f64(1.2 * i as f64 / trials as f64);
        let child = command(d, &os(&args))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        // SAFETY: kill(2) on our child, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        let now = std::fs::read(&out).unwrap();
        let outcome = match o.status.code() {
            Some(143) if err.contains("interrupted (SIGTERM); nothing was written") => {
                assert!(
                    now == old,
                    "trial {i}: reported nothing written, but: {err}"
                );
                "interrupted, nothing written"
            }
            Some(143) if err.contains("interrupted (SIGTERM) after writing") => {
                assert!(
                    err.contains(&format!("after writing {}; nothing else", out.display())),
                    "{err}"
                );
                assert!(now == new, "trial {i}: the archive written is not complete");
                "interrupted after writing"
            }
            Some(0) => {
                assert!(now == new, "trial {i}: exit 0, archive differs");
                "finished"
            }
            // Before the handlers were installed: the default action.
            None if o.status.signal() == Some(libc::SIGTERM) => {
                assert!(now == old, "trial {i}: killed early, archive changed");
                "killed before the handlers"
            }
            _ => panic!("trial {i}: unexpected {:?}: {err}", o.status),
        };
        *outcomes.entry(outcome).or_default() += 1;
        assert!(temporaries(d).is_empty(), "{:?}", temporaries(d));
        assert!(temporaries(&cache).is_empty(), "{:?}", temporaries(&cache));
        assert!(temporaries(&d.join("tmpdir")).is_empty());
    }
    eprintln!("{trials} trials over {whole:?}: {outcomes:?}");
    assert_eq!(outcomes.values().sum::<u32>(), trials);
}

/// Make the leftovers of a killed run, as it would have left them: written temporary files
/// that no one holds a lock on, and a scratch folder whose lock file names a dead process.
fn leave_leftovers(dirs: &[&Path], tmpdir: &Path) {
    for d in dirs {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join(".nsys-jax-pipe-killed.tmp"), b"partial").unwrap();
    }
    let scratch = tmpdir.join("nsys-jax-pipe-export-killed");
    std::fs::create_dir_all(scratch.join("work")).unwrap();
    std::fs::write(scratch.join(".lock"), b"4000000\n").unwrap();
}

/// A live process's temporary file: locked for as long as the returned file is open.
fn live_temporary(path: &Path) -> std::fs::File {
    std::fs::write(path, b"being written").unwrap();
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: flock(2) on an open file.
    let r = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) };
    assert_eq!(r, 0);
    f
}

#[test]
fn the_next_run_and_cache_gc_remove_what_killed_runs_left() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (cache, out, tmpdir) = (d.join("cache"), d.join("out"), d.join("tmpdir"));
    let analyze_args = args![
        "analyze",
        "--cache-dir",
        &cache,
        "-o",
        &out,
        "-q",
        example()
    ];
    // Really killed: SIGKILL at spread-out moments of a first (uncached) run; the next run
    // cleans up after it. (Its scratch folder for the example's report, in a $TMPDIR of its
    // own here, may outlive it when the kill lands before its lock names it: such a folder
    // is left for a grace period by design. The $TMPDIR checked below is the other one.)
    let killed_tmp = d.join("tmpdir-killed");
    std::fs::create_dir_all(&killed_tmp).unwrap();
    for delay_ms in [30, 150, 400, 900] {
        let _ = std::fs::remove_dir_all(&cache);
        let mut child = command(d, &os(&analyze_args))
            .env("TMPDIR", &killed_tmp)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_ok(
            &command(d, &os(&analyze_args))
                .env("TMPDIR", &killed_tmp)
                .output()
                .unwrap(),
        );
        assert!(temporaries(&cache).is_empty(), "{:?}", temporaries(&cache));
        assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
    }
    // Leftovers in every place, and a live writer's files, which must stay.
    let labels = cache.join("labels");
    leave_leftovers(&[&cache, &out, &labels], &tmpdir);
    let _live = live_temporary(&cache.join(".nsys-jax-pipe-live.tmp"));
    let live_scratch = tmpdir.join("nsys-jax-pipe-run-live");
    std::fs::create_dir_all(&live_scratch).unwrap();
    let _live_lock = live_temporary(&live_scratch.join(".lock"));
    let o = command(
        d,
        &os(&args![
            "analyze",
            "--cache-dir",
            &cache,
            "-o",
            &out,
            "-q",
            "--label",
            "base",
            example()
        ]),
    )
    .output()
    .unwrap();
    assert_ok(&o);
    assert_eq!(temporaries(&cache), [".nsys-jax-pipe-live.tmp"]);
    assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
    assert!(
        temporaries(&labels).is_empty(),
        "{:?}",
        temporaries(&labels)
    );
    // analyze of an archive whose nodes are stored makes no scratch folder: `cache gc`
    // cleans $TMPDIR.
    leave_leftovers(&[&cache], &tmpdir);
    let o = command(
        d,
        &os(&args![
            "cache",
            "gc",
            "--cache-dir",
            &cache,
            "--max-age",
            "30d"
        ]),
    )
    .output()
    .unwrap();
    assert_ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("removed 2 temporary files or folders of killed runs"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(temporaries(&cache), [".nsys-jax-pipe-live.tmp"]);
    assert_eq!(temporaries(&tmpdir), ["nsys-jax-pipe-run-live"]);
}

/// Run with `umask` set in the child.
fn with_umask(mut c: Command, umask: u32) -> Output {
    // SAFETY: umask(2) is async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            Ok(())
        });
    }
    c.output().unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn files_get_the_modes_of_the_umask() {
    for (umask, expected) in [(0o002, 0o664), (0o077, 0o600)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (cache, out) = (d.join("cache"), d.join("out"));
        let args = args![
            "analyze",
            "--cache-dir",
            &cache,
            "-o",
            &out,
            "-q",
            "--label",
            "l",
            example()
        ];
        let o = with_umask(command(d, &os(&args)), umask);
        assert_ok(&o);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.push(cache.join("labels/l.json"));
        files.push(cache.join("file-keys.json"));
        let entries: Vec<PathBuf> = walkdir::WalkDir::new(cache.join("objects"))
            .min_depth(1)
            .into_iter()
            .map(|e| e.unwrap().path().to_path_buf())
            .collect();
        assert!(!entries.is_empty());
        files.extend(entries);
        for f in &files {
            assert_eq!(mode(f), expected, "umask {umask:o}: {}", f.display());
        }
        let Some(fx) = fixtures() else { continue };
        let zip = d.join("c.zip");
        let o = with_umask(
            command(d, &os(&combine_args(&zip, &cache, &pax_archives(&fx)[..2]))),
            umask,
        );
        assert_ok(&o);
        assert_eq!(mode(&zip), expected, "umask {umask:o}: {}", zip.display());
    }
}

/// Run with files limited to `bytes` (writes past it fail with EFBIG).
fn with_file_size_limit(mut c: Command, bytes: u64) -> Output {
    // SAFETY: setrlimit(2) and signal(2) are async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

#[test]
fn a_full_cache_disk_is_one_warning_and_the_run_goes_on_uncached() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (cache, out, reference) = (d.join("cache"), d.join("out"), d.join("reference"));
    let o = command(
        d,
        &os(&args![
            "analyze",
            "--no-cache",
            "-o",
            &reference,
            "-q",
            example()
        ]),
    )
    .output()
    .unwrap();
    assert_ok(&o);
    // Large entries (the frames) no longer fit; the outputs do (the page, 180 KB, would not:
    // writing it would be an output error, which is not what this test is about).
    let args = args![
        "analyze",
        "--cache-dir",
        &cache,
        "-o",
        &out,
        "-q",
        "--no-html",
        example()
    ];
    let o = with_file_size_limit(command(d, &os(&args)), 48 << 10);
    assert_ok(&o);
    let err = stderr(&o);
    let warning = format!(
        "nsys-jax-pipe: warning: cache {}: cannot store entries (File too large); continuing without caching",
        cache.display()
    );
    assert_eq!(err.matches("cannot store entries").count(), 1, "{err}");
    assert!(err.lines().any(|l| l == warning), "{err}");
    for name in ["summary.json", "communication.json"] {
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(reference.join(name)).unwrap(),
            "{name}"
        );
    }
    assert!(temporaries(&cache).is_empty(), "{:?}", temporaries(&cache));
}

#[test]
#[cfg_attr(
    not(test_fixtures),
    ignore = "needs the shared fixtures (../shared/fixtures or NSYS_JAX_PIPE_FIXTURES)"
)]
fn a_full_disk_for_an_archive_is_one_error_line() {
    let Some(f) = fixtures() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("out.zip");
    std::fs::write(&out, b"old").unwrap();
    let mut args = args!["combine", "--no-cache", "-f", "-q", "-o", &out];
    args.extend(pax_archives(&f)[..2].iter().map(|p| p.into()));
    let o = with_file_size_limit(command(d, &os(&args)), 1 << 20);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("nsys-jax-pipe: ") || l.starts_with("note: ")),
        "stray text: {err}"
    );
    let last = lines.last().unwrap();
    assert!(
        last.starts_with(&format!(
            "nsys-jax-pipe: error: {}: cannot write",
            out.display()
        )) && last.ends_with("File too large (os error 27)"),
        "{err}"
    );
    assert!(!err.contains("ZipWriter"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"old");
    assert!(temporaries(d).is_empty(), "{:?}", temporaries(d));
}

/// `script` run by `sh` in a private mount namespace (where it may mount tmpfs file systems
/// that go with it), with the binary as `$BIN`, a private TMPDIR and `$T` = `dir`.
fn in_mount_namespace(dir: &Path, script: &str) -> Output {
    let tmp = dir.join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Command::new("unshare")
        .args(["-m", "sh", "-euc", script])
        .current_dir(dir)
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .env("TMPDIR", &tmp)
        .env("BIN", bin())
        .env("T", dir)
        .env("EXAMPLE", example())
        .env(
            "OTHER",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/problems/healthy.zip"),
        )
        .output()
        .unwrap()
}

/// A full disk while another archive's analyses replace a folder's: the run fails naming
/// the file it could not write, and the folder holds the earlier run's outputs, every one
/// as it was (its run record still naming the earlier input), with nothing temporary left.
/// The disk is a real tmpfs, filled but for a few pages, so that some new files fit and one
/// does not.
#[test]
fn a_full_disk_while_replacing_outputs_leaves_the_earlier_ones_whole() {
    let Some(()) = testutil::private_mounts() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = in_mount_namespace(
        d,
        r#"
        mkdir -p "$T/disk" "$T/before" "$T/after"
        mount -t tmpfs -o size=8m none "$T/disk"
        "$BIN" analyze --no-cache -q -o "$T/disk/out" "$EXAMPLE" >/dev/null
        cp -a "$T/disk/out/." "$T/before/"
        # Fill the disk, then free 24 KiB: the first small outputs fit, a larger one does not.
        dd if=/dev/zero of="$T/disk/fill" bs=4k 2>/dev/null || true
        truncate -s -24k "$T/disk/fill"
        set +e
        "$BIN" analyze --no-cache -q -o "$T/disk/out" "$OTHER" >/dev/null 2>"$T/err"
        echo "rc=$?" >"$T/rc"
        set -e
        cp -a "$T/disk/out/." "$T/after/"
        ls -a "$T/disk/out" >"$T/listing"
        "#,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rc = std::fs::read_to_string(d.join("rc")).unwrap();
    let err = std::fs::read_to_string(d.join("err")).unwrap();
    assert_eq!(rc.trim(), "rc=2", "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("nsys-jax-pipe: error: ")
            && last.contains("No space left on device")
            && last.contains("no output was changed"),
        "{err}"
    );
    let (before, after) = (
        output_files_with_record(&d.join("before")),
        output_files_with_record(&d.join("after")),
    );
    assert!(!before.is_empty());
    assert_eq!(
        before.iter().map(|f| &f.0).collect::<Vec<_>>(),
        after.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for ((name, a), (_, b)) in before.iter().zip(&after) {
        assert!(a == b, "{name} changed");
    }
    let record = std::fs::read_to_string(d.join("after/pipeline-run.json")).unwrap();
    assert!(record.contains("mlp-fsdp-2gpu.zip") && !record.contains("healthy.zip"));
    let listing = std::fs::read_to_string(d.join("listing")).unwrap();
    assert!(
        !listing.contains(".nsys-jax-pipe-"),
        "temporary files left: {listing}"
    );
}

/// Every file of an output folder, its run record too, by relative path, sorted.
fn output_files_with_record(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(out)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(out).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// A cache folder on a read-only file system, empty or not there at all: one warning, and the
/// run goes on without the cache, with the outputs of a run without one.
#[test]
fn a_read_only_cache_is_one_warning_and_the_run_goes_on_in_memory() {
    let Some(()) = testutil::private_mounts() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = in_mount_namespace(
        d,
        r#"
        mkdir -p "$T/ro"
        mount -t tmpfs -o ro,size=64k none "$T/ro"
        "$BIN" analyze --no-cache -q -o "$T/reference" "$EXAMPLE" >/dev/null
        for c in ro ro/cache; do
            set +e
            "$BIN" analyze --cache-dir "$T/$c" -q -o "$T/out-$(basename $c)" "$EXAMPLE" \
                >/dev/null 2>"$T/err-$(basename $c)"
            echo $? >"$T/rc-$(basename $c)"
            set -e
        done
        "#,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let reference = output_files(&d.join("reference"));
    for (name, cache) in [("ro", d.join("ro")), ("cache", d.join("ro/cache"))] {
        let err = std::fs::read_to_string(d.join(format!("err-{name}"))).unwrap();
        let rc = std::fs::read_to_string(d.join(format!("rc-{name}"))).unwrap();
        assert_eq!(rc.trim(), "0", "{name}: {err}");
        let warning = format!(
            "nsys-jax-pipe: warning: cache {}: cannot use it (Read-only file system); continuing without caching",
            cache.display()
        );
        assert_eq!(
            err.lines().collect::<Vec<_>>(),
            vec![warning.as_str()],
            "{name}"
        );
        assert_eq!(
            output_files(&d.join(format!("out-{name}"))),
            reference,
            "{name}"
        );
    }
}
