//! The stand-in nsys (`tests/data/standin-nsys.sh`) set up for running `run` end to end: a
//! folder with the stand-in first on PATH, a log, a working folder and a TMPDIR.

use super::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The example archive's report and its dump, decompressed, as a program under nsys leaves
/// them.
pub fn example_capture() -> &'static (PathBuf, PathBuf) {
    static CAPTURE: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    let c = CAPTURE.get_or_init(|| {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let zip_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
        let mut z = zip::ZipArchive::new(std::fs::File::open(&zip_path).unwrap()).unwrap();
        let report = dir.path().join("example.nsys-rep");
        let dump = dir.path().join("dump");
        for i in 0..z.len() {
            let mut f = z.by_index(i).unwrap();
            let name = f.name().unwrap().into_owned();
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).unwrap();
            let (dest, bytes) = if name.ends_with(".nsys-rep") {
                (report.clone(), bytes)
            } else if let Some(rel) = name
                .strip_prefix("dump/")
                .and_then(|n| n.strip_suffix(".xz"))
            {
                let mut out = Vec::new();
                liblzma::read::XzDecoder::new(&bytes[..])
                    .read_to_end(&mut out)
                    .unwrap();
                (dump.join(rel), out)
            } else {
                continue;
            };
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::write(dest, bytes).unwrap();
        }
        let (r, d) = (report.clone(), dump.clone());
        (dir, r, d)
    });
    // Leak-free view of the paths (the folder lives as long as the test process).
    static PATHS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PATHS.get_or_init(|| (c.1.clone(), c.2.clone()))
}

/// A folder with the stand-in nsys in `bin/`, a log, a working folder and a TMPDIR.
pub struct Bench {
    pub dir: tempfile::TempDir,
    pub real_nsys: PathBuf,
    pub report: Option<PathBuf>,
    pub dump: Option<PathBuf>,
}

impl Bench {
    /// `None` (loudly) without a real nsys for the export.
    pub fn new() -> Option<Bench> {
        let real_nsys = nsys()?;
        let (report, dump) = example_capture();
        Some(Bench::with_capture(real_nsys, report, dump))
    }

    pub fn with_capture(real_nsys: PathBuf, report: &Path, dump: &Path) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["bin", "work", "tmp"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/standin-nsys.sh");
        let dest = dir.path().join("bin/nsys");
        std::fs::copy(&script, &dest).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755)).unwrap();
        Bench {
            dir,
            real_nsys,
            report: Some(report.to_path_buf()),
            dump: Some(dump.to_path_buf()),
        }
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The temporary folders `run` left behind in its TMPDIR.
    pub fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(self.dir.path().join("tmp"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.work())
            .env_remove("NSYS")
            .env_remove("XLA_FLAGS")
            .env_remove("JAX_TRACEBACK_IN_LOCATIONS_LIMIT")
            .env_remove("JAX_ENABLE_COMPILATION_CACHE")
            .env("PATH", path)
            .env("TMPDIR", self.dir.path().join("tmp"))
            .env("REAL_NSYS", &self.real_nsys)
            .env("STANDIN_LOG", self.dir.path().join("log"));
        if let Some(r) = &self.report {
            c.env("STANDIN_REPORT", r);
        }
        if let Some(d) = &self.dump {
            c.env("STANDIN_DUMP", d);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().expect("run nsys-jax-pipe")
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

impl Bench {
    /// Run through a link named `nsys-jax` (made in `bin/` on first use), as nsys-jax's
    /// command line.
    pub fn nsys_jax(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let link = self.dir.path().join("bin/nsys-jax");
        // Cases run in parallel: whichever makes the link first, the others find it.
        match std::os::unix::fs::symlink(bin(), &link) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => panic!("{e}"),
            _ => {}
        }
        let c = self.command(args, env);
        Command::new(&link)
            .args(c.get_args())
            .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .env_remove("NSYS")
            .current_dir(self.work())
            .output()
            .expect("run nsys-jax")
    }
}
