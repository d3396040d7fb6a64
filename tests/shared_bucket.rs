//! A shared bucket that someone tampered with, against a real S3-protocol server on localhost
//! (moto's): entries copied over other entries, another job's entry, two ranks' entries and
//! claims swapped, a forged entry in a signed cache, a label's input replaced. (A local pack
//! index pointing at another entry: `engine::packs`'s unit tests.) In every case the outputs are those of a clean run (or,
//! for the label, the command refuses with one line), each bad object is named in a warning,
//! and the bucket holds the good object afterwards.

use crate::common::s3::{S3Server, env_for, get_objects, put_object};
use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

const BUCKET: &str = "profiles";

struct Bucket {
    server: S3Server,
    env: Vec<(String, String)>,
    python: PathBuf,
}

impl Bucket {
    fn start() -> Option<Bucket> {
        let program = crate::common::testutil::s3_server()?;
        let server = S3Server::start(&program, &[]);
        server.create_bucket(BUCKET);
        let env = env_for(&server.endpoint(), "testing", "testing");
        Some(Bucket {
            server,
            env,
            python: program.with_file_name("python"),
        })
    }

    fn url(prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    /// `analyze` of `inputs` into `out` with the local cache `cache` and the shared one under
    /// `prefix` (None: no shared cache), with `env` added.
    fn analyze(
        &self,
        prefix: Option<&str>,
        cache: &Path,
        out: &Path,
        inputs: &[PathBuf],
        env: &[(&str, String)],
    ) -> Output {
        let mut a = args!["analyze", "-q", "--cache-dir", cache, "-o", out];
        if let Some(p) = prefix {
            a.extend(args!["--cache-url", Bucket::url(p)]);
        }
        a.extend(inputs.iter().map(|p| p.into()));
        let o = self.command(&a, env);
        assert_ok(&o);
        o
    }

    /// The binary with `args`, the bucket's environment and `env`, and none of the cache
    /// variables of the machine running the tests.
    fn command(&self, args: &[std::ffi::OsString], env: &[(&str, String)]) -> Output {
        std::process::Command::new(bin())
            .args(args)
            .env_remove("NSYS_JAX_PIPE_CACHE")
            .env_remove("NSYS_JAX_PIPE_CACHE_URL")
            .env_remove("NSYS_JAX_PIPE_CACHE_SIGNING_KEY")
            .env_remove("NSYS_JAX_PIPE_CACHE_TRUSTED_KEYS")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .expect("run nsys-jax-pipe")
    }

    /// Every object under `prefix`, by key.
    fn objects(&self, prefix: &str) -> BTreeMap<String, Vec<u8>> {
        get_objects(
            &self.python,
            &self.server.endpoint(),
            BUCKET,
            &format!("{prefix}/"),
        )
    }

    fn put(&self, key: &str, body: &[u8]) {
        put_object(&self.python, &self.server.endpoint(), BUCKET, key, body);
    }
}

/// The key of the one object under `prefix` whose name ends in `.<kind>`, among `objects`.
fn one_of(objects: &BTreeMap<String, Vec<u8>>, kind: &str) -> String {
    let found: Vec<&String> = objects
        .keys()
        .filter(|k| k.ends_with(&format!(".{kind}")))
        .collect();
    assert_eq!(found.len(), 1, "{kind}: {found:?}");
    found[0].clone()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn warnings(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.contains("warning") || l.contains("WARN"))
        .map(str::to_string)
        .collect()
}

/// Each of `names` (object or entry file names) is named by exactly one warning, and no other
/// warning was given.
fn assert_warned_once_each(o: &Output, names: &[&str]) {
    let w = warnings(o);
    assert_eq!(w.len(), names.len(), "{names:?}\n{}", stderr(o));
    for n in names {
        let base = n.rsplit('/').next().unwrap();
        assert_eq!(
            w.iter().filter(|l| l.contains(base)).count(),
            1,
            "{base} not named once:\n{}",
            stderr(o)
        );
    }
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

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip")
}

/// The entries of the local cache `cache`, by file name.
fn local_entries(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache.join("objects"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// `analysis:ops` copied over `analysis:summary`, then another job's `analysis:summary` over
/// this job's: a fresh machine refuses each (one warning naming it), computes the clean run's
/// outputs and writes the good entry back; a third machine then executes no analysis.
#[test]
#[cfg_attr(
    not(all(test_s3, test_fixtures)),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3) and the shared fixtures"
)]
fn entries_copied_from_another_node_or_job_are_refused_and_replaced() {
    let Some(f) = fixtures() else { return };
    let Some(b) = Bucket::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let t = |n: &str| tmp.path().join(n);
    let reference = t("reference");
    b.analyze(Some("copy"), &t("writer"), &reference, &[example()], &[]);
    let other_job = &pax_archives(&f)[..1];
    b.analyze(Some("other"), &t("other"), &t("other-out"), other_job, &[]);
    let clean = b.objects("copy");
    let other = b.objects("other");
    let summary = one_of(&clean, "analysis_summary");
    let sources: [(&str, Vec<u8>); 2] = [
        (
            "another node's",
            clean[&one_of(&clean, "analysis_ops")].clone(),
        ),
        (
            "another job's",
            other[&one_of(&other, "analysis_summary")].clone(),
        ),
    ];
    for (i, (what, bytes)) in sources.iter().enumerate() {
        assert_ne!(bytes, &clean[&summary]);
        b.put(&summary, bytes);
        let out = t(&format!("out-{i}"));
        let o = b.analyze(
            Some("copy"),
            &t(&format!("reader-{i}")),
            &out,
            &[example()],
            &[],
        );
        assert_warned_once_each(&o, &[&summary]);
        assert!(stderr(&o).contains("damaged"), "{what}: {}", stderr(&o));
        assert_same_outputs(&reference, &out);
        assert_eq!(
            b.objects("copy")[&summary],
            clean[&summary],
            "{what} entry was not replaced"
        );
        let again = t(&format!("again-{i}"));
        let o = b.analyze(
            Some("copy"),
            &t(&format!("third-{i}")),
            &again,
            &[example()],
            &[],
        );
        assert!(warnings(&o).is_empty(), "{}", stderr(&o));
        assert!(
            !executed(&again).iter().any(|k| k.starts_with("analysis:")),
            "{:?}",
            executed(&again)
        );
    }
}

/// Two ranks' per-rank entries (`summary-partial`, `member-keys`) and their input files'
/// claims swapped in the bucket, which four machines filled with one rank each; a fresh
/// machine analysing the four ranks (whose reduce is not in the bucket) reads them all: each
/// swapped object is refused in one warning naming it, the outputs are a clean run's, and the
/// bucket holds the original objects again afterwards.
#[test]
#[cfg_attr(
    not(all(test_s3, test_fixtures)),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3) and the shared fixtures"
)]
fn swapped_rank_entries_and_claims_are_refused_and_replaced() {
    let Some(f) = fixtures() else { return };
    let Some(b) = Bucket::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let t = |n: &str| tmp.path().join(n);
    let ranks = pax_archives(&f);
    // Rank i's objects: its writer's local entries, and the claim its run added.
    let mut of_rank: Vec<BTreeMap<&str, String>> = Vec::new();
    for i in 0..2 {
        let cache = t(&format!("writer-{i}"));
        let before = b.objects("swap");
        b.analyze(
            Some("swap"),
            &cache,
            &t(&format!("w{i}")),
            &ranks[i..=i],
            &[],
        );
        let mut mine = BTreeMap::new();
        for kind in ["summary-partial", "member-keys"] {
            let names: Vec<String> = local_entries(&cache)
                .into_iter()
                .filter(|n| n.ends_with(&format!(".{kind}")))
                .collect();
            assert_eq!(names.len(), 1, "{kind}: {names:?}");
            mine.insert(kind, format!("swap/objects/{}", names[0]));
        }
        let claim: Vec<String> = b
            .objects("swap")
            .into_keys()
            .filter(|k| k.starts_with("swap/claims/") && !before.contains_key(k))
            .collect();
        assert_eq!(claim.len(), 1, "{claim:?}");
        mine.insert("claim", claim[0].clone());
        of_rank.push(mine);
    }
    for i in 2..4 {
        let cache = t(&format!("writer-{i}"));
        b.analyze(
            Some("swap"),
            &cache,
            &t(&format!("w{i}")),
            &ranks[i..=i],
            &[],
        );
    }
    let reference = t("reference");
    b.analyze(None, &t("local"), &reference, &ranks, &[]);
    let clean = b.objects("swap");
    let mut swapped: Vec<&str> = Vec::new();
    for what in ["summary-partial", "member-keys", "claim"] {
        let (x, y) = (&of_rank[0][what], &of_rank[1][what]);
        assert_ne!(clean[x], clean[y]);
        b.put(x, &clean[y]);
        b.put(y, &clean[x]);
        swapped.extend([x.as_str(), y.as_str()]);
    }
    let out = t("out");
    let o = b.analyze(Some("swap"), &t("reader"), &out, &ranks, &[]);
    assert_warned_once_each(&o, &swapped);
    assert_same_outputs(&reference, &out);
    let now = b.objects("swap");
    for k in &swapped {
        assert_eq!(now[*k], clean[*k], "{k} was not replaced");
    }
}

/// In a signed cache, an entry whose payload was changed and whose header was rewritten to
/// match (anyone who can write to the bucket can do that) is refused by a machine that trusts
/// the signing key; a fresh signing machine recomputes it and writes it back, after which
/// readers take it.
#[test]
#[cfg_attr(
    not(test_s3),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3)"
)]
fn a_forged_entry_in_a_signed_cache_is_refused_and_replaced() {
    let Some(b) = Bucket::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let t = |n: &str| tmp.path().join(n);
    let secret = t("ci.secret");
    let o = b.command(&args!["cache", "keygen", "ci", "-o", &secret], &[]);
    assert_ok(&o);
    let public = String::from_utf8(o.stdout).unwrap().trim().to_string();
    let signer = [
        (
            "NSYS_JAX_PIPE_CACHE_SIGNING_KEY",
            secret.display().to_string(),
        ),
        ("NSYS_JAX_PIPE_CACHE_TRUSTED_KEYS", public.clone()),
    ];
    let reader = [("NSYS_JAX_PIPE_CACHE_TRUSTED_KEYS", public.clone())];
    let reference = t("reference");
    b.analyze(
        Some("signed"),
        &t("writer"),
        &reference,
        &[example()],
        &signer,
    );
    let clean = b.objects("signed");
    let summary = one_of(&clean, "analysis_summary");
    let name = summary.strip_prefix("signed/").unwrap();
    // Flip a payload byte and rewrite the header's hash over the name and the new payload;
    // the signature trailer is kept.
    let mut forged = clean[&summary].clone();
    let len = u64::from_le_bytes(forged[8..16].try_into().unwrap()) as usize;
    forged[48 + len / 2] ^= 1;
    let mut h = blake3::Hasher::new_derive_key("nsys-jax-pipe cache entry 2");
    h.update(&(name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update(&forged[48..48 + len]);
    forged[16..48].copy_from_slice(h.finalize().as_bytes());
    b.put(&summary, &forged);
    let out = t("out");
    let o = b.analyze(Some("signed"), &t("reader"), &out, &[example()], &reader);
    assert_warned_once_each(&o, &[&summary]);
    assert!(
        stderr(&o).contains("not signed by a trusted key"),
        "{}",
        stderr(&o)
    );
    assert_same_outputs(&reference, &out);
    // A reader does not write (it signs nothing); a signing machine does.
    assert_eq!(b.objects("signed")[&summary], forged);
    let o = b.analyze(
        Some("signed"),
        &t("writer-2"),
        &t("out-2"),
        &[example()],
        &signer,
    );
    assert_warned_once_each(&o, &[&summary]);
    assert_ne!(b.objects("signed")[&summary], forged, "not replaced");
    let again = t("again");
    let o = b.analyze(
        Some("signed"),
        &t("reader-2"),
        &again,
        &[example()],
        &reader,
    );
    assert!(warnings(&o).is_empty(), "{}", stderr(&o));
    assert!(!executed(&again).iter().any(|k| k.starts_with("analysis:")));
    assert_same_outputs(&reference, &again);
}

/// A label's input in the bucket replaced by another archive: `compare` with that label on a
/// fresh machine refuses it in one line naming the label and the input and exits non-zero
/// (it cannot compare against what the label named), and keeps no copy of the wrong file.
#[test]
#[cfg_attr(
    not(all(test_s3, test_fixtures)),
    ignore = "needs an S3-protocol server (scripts/install-s3-server.sh .s3) and the shared fixtures"
)]
fn a_label_input_replaced_in_the_bucket_is_refused() {
    let Some(f) = fixtures() else { return };
    let Some(b) = Bucket::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let t = |n: &str| tmp.path().join(n);
    let ranks = pax_archives(&f);
    let mut a = args![
        "analyze",
        "-q",
        "--cache-dir",
        t("writer"),
        "-o",
        t("w-out"),
        "--cache-url",
        Bucket::url("labels"),
        "--label",
        "base"
    ];
    a.push(ranks[0].clone().into());
    let o = b.command(&a, &[]);
    assert_ok(&o);
    let inputs: Vec<String> = b
        .server
        .keys(BUCKET, "labels/inputs/")
        .into_iter()
        .collect();
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    b.put(&inputs[0], &std::fs::read(&ranks[1]).unwrap());
    let cache = t("reader");
    let mut a = args![
        "compare",
        "-q",
        "--cache-dir",
        &cache,
        "--cache-url",
        Bucket::url("labels"),
        "-o",
        t("cmp"),
        "base"
    ];
    a.push(ranks[0].clone().into());
    let o = b.command(&a, &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("label base") && err.contains("proc0.zip") && err.contains("content hash"),
        "{err}"
    );
    let kept: Vec<PathBuf> = walkdir::WalkDir::new(cache.join("inputs"))
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .filter(|p| p.is_file())
        .collect();
    assert!(kept.is_empty(), "{kept:?}");
}
