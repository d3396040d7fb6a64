//! The remote cache tier against a real S3-protocol server on localhost (moto's server, see
//! `scripts/install-s3-server.sh`): a second machine executes nothing, per-rank work done on
//! four machines is reused by the whole-run analysis, a server that stops mid-run, a damaged
//! object, a read-only bucket, and labels that travel with their inputs.

use crate::common::s3::{S3Server, env_for};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

const BUCKET: &str = "profiles";

fn url() -> String {
    format!("s3://{BUCKET}/ci")
}

/// Run the binary with the remote cache's environment.
fn run_env(args: &[std::ffi::OsString], env: &[(String, String)]) -> Output {
    std::process::Command::new(bin())
        .args(args)
        .env_remove("NSYS_JAX_PIPE_CACHE")
        .env_remove("NSYS_JAX_PIPE_CACHE_URL")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run nsys-jax-pipe")
}

/// `analyze` with a local cache, the remote one, and an output folder.
fn analyze_remote(
    env: &[(String, String)],
    cache: &Path,
    out: &Path,
    inputs: &[PathBuf],
) -> Output {
    let mut a = args![
        "analyze",
        "-q",
        "--cache-dir",
        cache,
        "-o",
        out,
        "--cache-url",
        url()
    ];
    a.extend(inputs.iter().map(|p| p.into()));
    run_env(&a, env)
}

fn executed(out: &Path) -> Vec<String> {
    json(&out.join("pipeline-run.json"))["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "executed")
        .map(|n| n["kind"].as_str().unwrap().to_string())
        .collect()
}

fn node_count(out: &Path) -> usize {
    json(&out.join("pipeline-run.json"))["nodes"]
        .as_array()
        .unwrap()
        .len()
}

fn assert_same_outputs(a: &Path, b: &Path) {
    let (x, y) = (output_files(a), output_files(b));
    assert!(!x.is_empty());
    assert_eq!(
        x.iter().map(|f| &f.0).collect::<Vec<_>>(),
        y.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (f, g) in x.iter().zip(&y) {
        assert!(f.1 == g.1, "{} differs", f.0);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn warnings(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.contains("warning: remote cache"))
        .map(str::to_string)
        .collect()
}

/// A server with an empty bucket, and the environment pointing at it.
fn server() -> Option<(S3Server, Vec<(String, String)>)> {
    let program = crate::common::testutil::s3_server()?;
    let s = S3Server::start(&program, &[]);
    s.create_bucket(BUCKET);
    let mut env = env_for(&s.endpoint(), "testing", "testing");
    // Lines naming temporary paths are not wrapped at the default width in these checks.
    env.push(("COLUMNS".into(), "1000".into()));
    Some((s, env))
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip")
}

#[test]
#[cfg_attr(
    not(test_s3),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3)"
)]
fn a_second_machine_executes_nothing_and_labels_travel() {
    let Some((s, env)) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("cache-a"), tmp.path().join("cache-b"));
    let (o1, o2) = (tmp.path().join("o1"), tmp.path().join("o2"));
    let mut first = args![
        "analyze",
        "-q",
        "--cache-dir",
        &a,
        "-o",
        &o1,
        "--label",
        "base-sha"
    ];
    first.push(example().into());
    let o = run_env(
        &first,
        &[env.clone(), vec![("NSYS_JAX_PIPE_CACHE_URL".into(), url())]].concat(),
    );
    assert_ok(&o);
    assert!(warnings(&o).is_empty(), "{}", stderr(&o));
    let uploaded = json(&o1.join("pipeline-run.json"))["remote"]["uploads"]
        .as_u64()
        .unwrap();
    assert!(uploaded > 10, "{uploaded} entries uploaded");
    assert!(s.keys(BUCKET, "ci/objects/").len() as u64 >= uploaded);
    // Another machine: an empty local cache, the same bucket.
    let o = analyze_remote(&env, &b, &o2, &[example()]);
    assert_ok(&o);
    assert_eq!(executed(&o2), Vec::<String>::new());
    assert_same_outputs(&o1, &o2);
    let hits = json(&o2.join("pipeline-run.json"))["remote"]["hits"]
        .as_u64()
        .unwrap();
    assert!(hits > 0);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains(&format!("remote cache: {hits} read, 0 uploaded")),
        "{said}"
    );
    // `cache stats` shows the remote tier's hits and what the bucket holds.
    let o = run_env(
        &args!["cache", "stats", "--cache-dir", &b, "--cache-url", url()],
        &env,
    );
    assert_ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("remote {}: {hits} hits", url())),
        "{out}"
    );
    assert!(out.contains(&format!("remote cache {}:", url())), "{out}");
    // The label made on the first machine names the run on a third one, whose cache and
    // disk have neither the label nor its input.
    let c = tmp.path().join("cache-c");
    let cmp = tmp.path().join("cmp");
    let o = run_env(
        &args![
            "compare",
            "-q",
            "--cache-dir",
            &c,
            "--cache-url",
            url(),
            "-o",
            &cmp,
            "base-sha",
            example()
        ],
        &env,
    );
    assert_ok(&o);
    // The labelled input was downloaded into the local cache, under its own name.
    let fetched: Vec<PathBuf> = walkdir::WalkDir::new(c.join("inputs"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    assert_eq!(fetched[0].file_name().unwrap(), "mlp-fsdp-2gpu.zip");
    assert_eq!(
        std::fs::read(&fetched[0]).unwrap(),
        std::fs::read(example()).unwrap()
    );
    // The sides' frames came from the shared cache: only what the comparison adds ran.
    let ran = executed(&cmp);
    for kind in [
        "gpu-frames",
        "compile-frame",
        "process-facts",
        "member-keys",
    ] {
        assert!(!ran.iter().any(|k| k == kind), "{kind} executed: {ran:?}");
    }
    assert!(ran.iter().any(|k| k.starts_with("compare:")), "{ran:?}");
}

#[test]
#[cfg_attr(
    not(all(test_s3, test_fixtures)),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3) and the shared fixtures"
)]
fn per_rank_work_done_elsewhere_is_reused_by_the_whole_run() {
    let Some(f) = fixtures() else { return };
    let Some((s, env)) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ranks = pax_archives(&f);
    // Four machines, one rank each, each with its own local cache.
    for (i, rank) in ranks.iter().enumerate() {
        let cache = tmp.path().join(format!("rank{i}-cache"));
        let out = tmp.path().join(format!("rank{i}-out"));
        assert_ok(&analyze_remote(
            &env,
            &cache,
            &out,
            std::slice::from_ref(rank),
        ));
    }
    // Each rank's archive was read whole where it ran, and its content key claimed.
    assert_eq!(s.keys(BUCKET, "ci/claims/").len(), ranks.len());
    // The reference: a cold run of the four ranks, without the remote cache.
    let cold = tmp.path().join("cold");
    assert_ok(&analyze(
        &tmp.path().join("cold-cache"),
        &cold,
        &["-q"],
        &ranks,
    ));
    let cold_executed = executed(&cold).len();
    // A fifth machine: the whole run from the shared cache.
    let all = tmp.path().join("all");
    let o = analyze_remote(&env, &tmp.path().join("all-cache"), &all, &ranks);
    assert_ok(&o);
    assert_same_outputs(&cold, &all);
    // The fifth machine took the archives' keys from the claims instead of reading them.
    assert_eq!(
        json(&all.join("pipeline-run.json"))["remote"]["claimed"],
        ranks.len() as u64
    );
    // The summary line is wrapped at the terminal's width: its words are compared.
    let said = String::from_utf8_lossy(&o.stdout);
    let words = said.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("4 inputs keyed unread"), "{said}");
    let ran = executed(&all);
    assert!(
        ran.len() * 5 <= cold_executed,
        "{} of a cold run's {cold_executed} nodes executed: {ran:?}",
        ran.len()
    );
    assert!(node_count(&all) > 0);
}

/// A server that accepts connections and never answers (no S3 server needed: a socket that
/// holds every connection): the run leaves it after its first request times out, with one
/// warning and the outputs of a run without a shared cache, within seconds (it was a minute,
/// one request timeout after another).
#[test]
fn a_server_that_never_answers_costs_seconds_not_minutes() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            keep.lock().unwrap().push(c);
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let reference = tmp.path().join("reference");
    assert_ok(&analyze(
        &tmp.path().join("ref-cache"),
        &reference,
        &["-q"],
        &[example()],
    ));
    let env = env_for(&endpoint, "testing", "testing");
    let out = tmp.path().join("out");
    let start = std::time::Instant::now();
    let o = analyze_remote(&env, &tmp.path().join("cache"), &out, &[example()]);
    let took = start.elapsed();
    assert_ok(&o);
    assert!(
        !held.lock().unwrap().is_empty(),
        "the server was never asked"
    );
    assert!(
        took < std::time::Duration::from_secs(15),
        "took {took:?}: {}",
        stderr(&o)
    );
    let w = warnings(&o);
    assert_eq!(w.len(), 1, "{}", stderr(&o));
    assert_same_outputs(&reference, &out);
}

/// A well-formed entry of one node copied over another's in a shared cache (`analysis:ops`
/// over `analysis:summary`; a shared folder here: the check is the same for every store): a
/// fresh machine refuses it with one warning naming it, computes the right value (the outputs
/// of the first run) and puts it back in place of the copy.
#[test]
fn an_entry_copied_under_another_key_is_refused_and_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let bucket = tmp.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    let analyze_shared = |cache: &Path, out: &Path| {
        let a = args![
            "analyze",
            "-q",
            "--cache-dir",
            cache,
            "-o",
            out,
            "--cache-url",
            url.as_str(),
            example()
        ];
        run_env(&a, &[])
    };
    let reference = tmp.path().join("reference");
    assert_ok(&analyze_shared(&tmp.path().join("cache-a"), &reference));
    let object = |kind: &str| -> PathBuf {
        let found: Vec<PathBuf> = std::fs::read_dir(bucket.join("objects"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == kind))
            .collect();
        assert_eq!(found.len(), 1, "{kind}: {found:?}");
        found[0].clone()
    };
    let (copied, victim) = (&object("analysis_ops"), &object("analysis_summary"));
    let original = std::fs::read(victim).unwrap();
    std::fs::copy(copied, victim).unwrap();
    let out = tmp.path().join("out");
    let o = analyze_shared(&tmp.path().join("cache-b"), &out);
    assert_ok(&o);
    let w = warnings(&o);
    assert_eq!(w.len(), 1, "{}", stderr(&o));
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    assert!(w[0].contains(&name) && w[0].contains("damaged"), "{w:?}");
    assert_same_outputs(&reference, &out);
    assert_eq!(
        std::fs::read(victim).unwrap(),
        original,
        "the copy was not replaced"
    );
}

#[test]
#[cfg_attr(
    not(all(test_s3, test_fixtures)),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3) and the shared fixtures"
)]
fn a_server_that_stops_mid_run_costs_one_warning() {
    let Some(f) = fixtures() else { return };
    let Some((s, _)) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ranks = pax_archives(&f);
    let reference = tmp.path().join("reference");
    assert_ok(&analyze(
        &tmp.path().join("ref-cache"),
        &reference,
        &["-q"],
        &ranks,
    ));
    // The binary talks to the server through a proxy that stops the server after the 25th
    // request: in the middle of the run's uploads and lookups.
    let proxy = crate::common::s3::StoppingProxy::start(s, 25);
    let env = env_for(&proxy.endpoint(), "testing", "testing");
    let out = tmp.path().join("out");
    let o = analyze_remote(&env, &tmp.path().join("cache"), &out, &ranks);
    assert_ok(&o);
    assert!(
        proxy.stopped(),
        "the server was still up at the end of the run"
    );
    let w = warnings(&o);
    assert_eq!(w.len(), 1, "{}", stderr(&o));
    assert!(w[0].contains("unavailable"), "{w:?}");
    assert_same_outputs(&reference, &out);
}

#[test]
#[cfg_attr(
    not(test_s3),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3)"
)]
fn a_damaged_object_is_recomputed_and_replaced() {
    let Some((s, env)) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let o1 = tmp.path().join("o1");
    assert_ok(&analyze_remote(
        &env,
        &tmp.path().join("c1"),
        &o1,
        &[example()],
    ));
    // Write over one stored analysis result in the bucket: one the run writes out (an
    // analysis only `diagnose` reads is not read again while diagnose's output is stored).
    let keys = s.keys(BUCKET, "ci/objects/");
    let target = keys
        .iter()
        .find(|k| k.contains(".analysis_summary"))
        .unwrap_or_else(|| panic!("no analysis entry among {keys:?}"));
    let python = crate::common::testutil::s3_server()
        .unwrap()
        .with_file_name("python");
    crate::common::s3::put_object(&python, &s.endpoint(), BUCKET, target, b"NJPSTOR1 garbage");
    let o2 = tmp.path().join("o2");
    let o = analyze_remote(&env, &tmp.path().join("c2"), &o2, &[example()]);
    assert_ok(&o);
    assert!(
        stderr(&o).contains("is damaged; recomputing it"),
        "{}",
        stderr(&o)
    );
    assert!(!executed(&o2).is_empty());
    assert_same_outputs(&o1, &o2);
    // The recomputed entry replaced the damaged object: a third machine reads it.
    let o3 = tmp.path().join("o3");
    let o = analyze_remote(&env, &tmp.path().join("c3"), &o3, &[example()]);
    assert_ok(&o);
    assert!(!stderr(&o).contains("damaged"), "{}", stderr(&o));
    assert_eq!(executed(&o3), Vec::<String>::new());
}

#[test]
#[cfg_attr(
    not(test_s3),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3)"
)]
fn a_read_only_bucket_is_read_and_warned_about() {
    let Some(program) = crate::common::testutil::s3_server() else {
        return;
    };
    // The server checks credentials and policies (IAM) after the set-up requests.
    let s = S3Server::start(&program, &[("INITIAL_NO_AUTH_ACTION_COUNT", "7")]);
    let python = program.parent().unwrap().join("python");
    let keys = crate::common::s3::reader_and_writer(&python, &s.endpoint(), BUCKET);
    let writer = env_for(&s.endpoint(), &keys.0.0, &keys.0.1);
    let reader = env_for(&s.endpoint(), &keys.1.0, &keys.1.1);
    let tmp = tempfile::tempdir().unwrap();
    let o1 = tmp.path().join("o1");
    let o = analyze_remote(&writer, &tmp.path().join("c1"), &o1, &[example()]);
    assert_ok(&o);
    assert!(warnings(&o).is_empty(), "{}", stderr(&o));
    // A reader on a fresh machine: everything comes from the bucket, nothing is refused.
    let o2 = tmp.path().join("o2");
    let o = analyze_remote(&reader, &tmp.path().join("c2"), &o2, &[example()]);
    assert_ok(&o);
    assert_eq!(executed(&o2), Vec::<String>::new());
    assert_same_outputs(&o1, &o2);
    // A reader with new work (an analysis not run before): computed, its upload refused: one warning.
    let o3 = tmp.path().join("o3");
    let mut a = args![
        "analyze",
        "-q",
        "--cache-dir",
        tmp.path().join("c3"),
        "-o",
        &o3,
        "--cache-url",
        url(),
        "--analysis",
        "pgle"
    ];
    a.push(example().into());
    let o = run_env(&a, &reader);
    assert_ok(&o);
    let w = warnings(&o);
    assert_eq!(w.len(), 1, "{}", stderr(&o));
    assert!(w[0].contains("cannot write"), "{w:?}");
    let o4 = tmp.path().join("o4");
    let mut a = args![
        "analyze",
        "-q",
        "--cache-dir",
        tmp.path().join("c4"),
        "-o",
        &o4,
        "--analysis",
        "pgle"
    ];
    a.push(example().into());
    assert_ok(&run_env(&a, &[]));
    assert_same_outputs(&o3, &o4);
}

#[test]
#[cfg_attr(
    not(all(test_s3, test_nsys)),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3) and Nsight Systems (scripts/install-nsys.sh)"
)]
fn an_archive_made_where_the_rank_ran_is_analysed_elsewhere_from_the_shared_cache() {
    let Some(nsys) = nsys() else { return };
    let Some((_s, env)) = server() else { return };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/command-buffers");
    let tmp = tempfile::tempdir().unwrap();
    let zip = tmp.path().join("rank0.zip");
    let env: Vec<(String, String)> =
        [env, vec![("NSYS".into(), nsys.display().to_string())]].concat();
    // Where the rank ran: its archive, and with the shared cache, its nodes for `analyze`.
    let o = run_env(
        &args![
            "archive",
            data.join("rep.nsys-rep"),
            "--dump",
            data.join("dump_rep"),
            "-o",
            &zip,
            "-q",
            "--cache-dir",
            tmp.path().join("node-cache"),
            "--cache-url",
            url()
        ],
        &env,
    );
    assert_ok(&o);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("its nodes for analyze, shared"), "{said}");
    // Elsewhere: nothing executes, and the outputs are those of a local analysis.
    let out = tmp.path().join("out");
    let o = analyze_remote(&env, &tmp.path().join("login-cache"), &out, &[zip.clone()]);
    assert_ok(&o);
    assert_eq!(executed(&out), Vec::<String>::new());
    let local = tmp.path().join("local");
    assert_ok(&analyze(
        &tmp.path().join("local-cache"),
        &local,
        &["-q"],
        &[zip],
    ));
    assert_same_outputs(&local, &out);
}

#[test]
#[cfg_attr(
    not(test_s3),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3)"
)]
fn cache_push_shares_what_was_computed_before() {
    let Some((_s, env)) = server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (a, o1) = (tmp.path().join("a"), tmp.path().join("o1"));
    // Computed with the local cache alone: nothing shared.
    assert_ok(&analyze(&a, &o1, &["-q"], &[example()]));
    let o = run_env(
        &args!["cache", "push", "--cache-dir", &a, "--cache-url", url()],
        &env,
    );
    assert_ok(&o);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(said.contains(" uploaded to "), "{said}");
    // Pushing again uploads nothing: every entry is there.
    let o = run_env(
        &args!["cache", "push", "--cache-dir", &a, "--cache-url", url()],
        &env,
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(", 0 uploaded"),
        "{o:?}"
    );
    let o2 = tmp.path().join("o2");
    assert_ok(&analyze_remote(
        &env,
        &tmp.path().join("b"),
        &o2,
        &[example()],
    ));
    assert_eq!(executed(&o2), Vec::<String>::new());
    assert_same_outputs(&o1, &o2);
    // Without a shared cache, push is refused in one line.
    let o = run_env(&args!["cache", "push", "--cache-dir", &a], &env);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains("--cache-url"), "{}", stderr(&o));
}

/// Signed entries: a writer signs what it uploads (`cache keygen`, the secret key given to
/// it); a reader that trusts that key takes the entries (it executes no analysis), one that
/// trusts only another key refuses them all with one warning and recomputes, as it does the
/// entries of a writer that signs nothing; with both keys trusted (a rotation), they are taken.
#[test]
fn only_entries_signed_by_a_trusted_key_are_used() {
    let tmp = tempfile::tempdir().unwrap();
    let keygen = |name: &str| -> (PathBuf, String) {
        let secret = tmp.path().join(format!("{name}.secret"));
        let o = run_env(&args!["cache", "keygen", name, "-o", &secret], &[]);
        assert_ok(&o);
        let public = String::from_utf8(o.stdout).unwrap().trim().to_string();
        assert!(public.starts_with(&format!("{name}:")), "{public}");
        (secret, public)
    };
    let (ci_secret, ci) = keygen("ci");
    let (_, laptop) = keygen("laptop");
    let again = run_env(&args!["cache", "keygen", "ci", "-o", &ci_secret], &[]);
    assert!(
        !again.status.success(),
        "an existing secret key was replaced"
    );
    let run = |bucket: &str, cache: &str, env: &[(&str, String)]| {
        let url = format!("file://{}", tmp.path().join(bucket).display());
        let out = tmp.path().join(format!("out-{cache}"));
        let a = args![
            "analyze",
            "-q",
            "--cache-dir",
            tmp.path().join(cache),
            "-o",
            &out,
            "--cache-url",
            url,
            example()
        ];
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let o = run_env(&a, &env);
        assert_ok(&o);
        (o, out)
    };
    let signing = (
        "NSYS_JAX_PIPE_CACHE_SIGNING_KEY",
        ci_secret.display().to_string(),
    );
    let trust = |keys: &str| ("NSYS_JAX_PIPE_CACHE_TRUSTED_KEYS", keys.to_string());
    let analyses = |out: &Path| {
        executed(out)
            .into_iter()
            .filter(|k| k.starts_with("analysis:"))
            .count()
    };
    let (_, reference) = run("signed", "writer", &[signing.clone(), trust(&ci)]);
    // Trusted: taken.
    let (o, out) = run("signed", "reader-1", &[trust(&ci)]);
    assert!(warnings(&o).is_empty(), "{}", stderr(&o));
    assert_eq!(analyses(&out), 0, "{:?}", executed(&out));
    assert_same_outputs(&reference, &out);
    // Another key only: refused, recomputed, one warning.
    let (o, out) = run("signed", "reader-2", &[trust(&laptop)]);
    let w = warnings(&o);
    assert_eq!(w.len(), 1, "{}", stderr(&o));
    assert!(w[0].contains("not signed by a trusted key"), "{w:?}");
    assert!(analyses(&out) > 0);
    assert_same_outputs(&reference, &out);
    // Rotation: both keys trusted.
    let (o, out) = run("signed", "reader-3", &[trust(&format!("{laptop} {ci}"))]);
    assert!(warnings(&o).is_empty(), "{}", stderr(&o));
    assert_eq!(analyses(&out), 0);
    // A writer without the key: its entries are refused by a reader that trusts the key.
    run("unsigned", "writer-2", &[]);
    let (o, out) = run("unsigned", "reader-4", &[trust(&ci)]);
    assert_eq!(warnings(&o).len(), 1, "{}", stderr(&o));
    assert!(analyses(&out) > 0);
    assert_same_outputs(&reference, &out);
}
