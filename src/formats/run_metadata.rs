//! `nsys-jax-pipe/run-metadata.json`: what a run was, recorded by `run` when it profiled it
//! (docs/design.md, "Provenance"): the command, the working folder's git commit, the host,
//! the environment variables that steer JAX, XLA and NCCL as they were given, what each
//! Python process of the program imported (JAX, jaxlib, the CUDA plugin) and saw in its own
//! environment when it ended, the GPUs and driver, and the Nsight Systems that profiled it.
//!
//! [`facts`] flattens a record into named facts (one per version, variable and XLA flag), the
//! form that the overview shows and that two runs' records are compared in.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// The member.
pub const MEMBER: &str = "nsys-jax-pipe/run-metadata.json";
/// The format's version.
pub const FORMAT: u32 = 1;
/// A record larger than this is not one `run` wrote.
pub const MAX_BYTES: usize = 4 << 20;

/// Prefixes of the environment variables recorded (they steer JAX, XLA, NCCL and CUDA).
pub const ENV_PREFIXES: &[&str] = &[
    "JAX_", "XLA_", "NCCL_", "TF_CPP_", "CUDA_", "NVIDIA_", "CUDNN_", "CUBLAS", "NVTE_",
];

/// The packages whose versions each Python process reports, when installed.
pub const PACKAGES: &[&str] = &[
    "jax",
    "jaxlib",
    "jax-cuda12-plugin",
    "jax-cuda12-pjrt",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
    "flax",
    "optax",
    "orbax-checkpoint",
    "transformer-engine",
    "numpy",
    "nvtx",
];

/// Whether an environment variable is recorded.
pub fn recorded_variable(name: &str) -> bool {
    ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Git {
    pub commit: String,
    /// The branch, when HEAD is on one.
    pub branch: Option<String>,
    /// Whether tracked files differ from the commit.
    pub dirty: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Gpu {
    pub name: String,
    pub driver: Option<String>,
    pub memory_mib: Option<u64>,
}

/// The JAX backend as a Python process saw it (when it had initialised one).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Backend {
    pub platform: String,
    /// The plugin's own description (`PJRT C API`, CUDA and cuDNN versions).
    pub platform_version: String,
    pub devices: Vec<String>,
}

/// One Python process of the program, as it saw itself when it ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct PythonProcess {
    pub pid: i64,
    pub executable: String,
    pub python: String,
    /// Installed versions of [`PACKAGES`].
    pub packages: BTreeMap<String, String>,
    /// Those of them the program imported (module name -> `__version__`).
    pub imported: BTreeMap<String, String>,
    /// The recorded variables as the process saw them at its end (a program may set
    /// `XLA_FLAGS` itself before importing JAX).
    pub environment: BTreeMap<String, String>,
    pub backend: Option<Backend>,
}

/// The record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RunMetadata {
    pub format: u32,
    /// The version of nsys-jax-pipe that recorded it.
    pub tool: String,
    /// When the program started [s since the Unix epoch].
    pub started_unix_s: u64,
    pub command: Vec<String>,
    pub cwd: String,
    pub hostname: Option<String>,
    pub git: Option<Git>,
    /// The recorded variables as given to the program.
    pub environment: BTreeMap<String, String>,
    pub python: Vec<PythonProcess>,
    pub gpus: Vec<Gpu>,
    /// The CUDA version the driver supports.
    pub cuda_driver: Option<String>,
    pub nsys_version: Option<String>,
    /// What could not be recorded, and why.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// What a process's archive says of its run: the record `run` made (when it holds one, or
/// why it could not be read), and what the report itself records of the system and GPUs.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Provenance {
    pub record: Option<RunMetadata>,
    /// Why the archive's record could not be read.
    pub problem: Option<String>,
    /// The report's system entries (host name, driver and CUDA versions, ...).
    pub system: Vec<(String, String)>,
    /// The GPUs the report lists.
    pub gpus: Vec<String>,
}

/// Parse a record; errors say what is wrong in one line (the caller names the file).
pub fn read(bytes: &[u8]) -> Result<RunMetadata> {
    if bytes.len() > MAX_BYTES {
        bail!("{} bytes: too large for a run record", bytes.len());
    }
    let m: RunMetadata =
        serde_json::from_slice(bytes).map_err(|e| anyhow::anyhow!("not a run record ({e})"))?;
    if m.format != FORMAT {
        bail!(
            "run record format {} (this version reads {FORMAT})",
            m.format
        );
    }
    Ok(m)
}

/// The first Python process that imported JAX (else the first one).
pub fn main_python(m: &RunMetadata) -> Option<&PythonProcess> {
    m.python
        .iter()
        .find(|p| p.imported.contains_key("jax"))
        .or(m.python.first())
}

/// The flags of an `XLA_FLAGS` value: (`--name`, value; `true` for a bare flag).
pub fn xla_flags(value: &str) -> Vec<(String, String)> {
    value
        .split_whitespace()
        .map(|f| match f.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => (f.to_string(), "true".to_string()),
        })
        .collect()
}

/// What of a run is compared between runs, by name: versions, the environment (one fact per
/// XLA flag), GPUs and driver, the commit. The process id, the start time and the command's
/// working folder are left out (they differ between any two runs).
pub fn facts(m: &RunMetadata) -> BTreeMap<String, String> {
    let mut f = BTreeMap::new();
    f.insert("command".into(), m.command.join(" "));
    if let Some(h) = &m.hostname {
        f.insert("host".into(), h.clone());
    }
    if let Some(g) = &m.git {
        f.insert(
            "commit".into(),
            format!("{}{}", g.commit, if g.dirty { " (dirty)" } else { "" }),
        );
    }
    // The program's own view of its environment wins over what it was given.
    let mut env = m.environment.clone();
    if let Some(p) = main_python(m) {
        env.extend(p.environment.clone());
        f.insert("python".into(), p.python.clone());
        for (k, v) in &p.packages {
            f.insert(format!("package {k}"), v.clone());
        }
        for (k, v) in &p.imported {
            f.insert(format!("imported {k}"), v.clone());
        }
        if let Some(b) = &p.backend {
            f.insert(
                "backend".into(),
                format!("{} ({})", b.platform, b.platform_version),
            );
        }
    }
    for (k, v) in env {
        if k == "XLA_FLAGS" {
            for (flag, value) in xla_flags(&v) {
                // The dump folder is chosen per run.
                if flag != "--xla_dump_to" {
                    f.insert(format!("XLA flag {flag}"), value);
                }
            }
        } else {
            f.insert(format!("env {k}"), v);
        }
    }
    let mut gpus: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &m.gpus {
        *gpus.entry(g.name.as_str()).or_default() += 1;
    }
    if !gpus.is_empty() {
        f.insert(
            "GPUs".into(),
            gpus.iter()
                .map(|(n, k)| format!("{k} × {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    if let Some(d) = m.gpus.iter().find_map(|g| g.driver.clone()) {
        f.insert("driver".into(), d);
    }
    if let Some(c) = &m.cuda_driver {
        f.insert("CUDA (driver)".into(), c.clone());
    }
    if let Some(n) = &m.nsys_version {
        f.insert("Nsight Systems".into(), n.clone());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunMetadata {
        RunMetadata {
            format: FORMAT,
            tool: "nsys-jax-pipe 0".into(),
            command: vec!["python".into(), "train.py".into()],
            environment: [(
                "XLA_FLAGS".to_string(),
                "--xla_dump_to=/tmp/d --xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_hlo_as_proto"
                    .to_string(),
            )]
            .into(),
            python: vec![PythonProcess {
                pid: 7,
                imported: [("jax".to_string(), "0.11.2".to_string())].into(),
                environment: [("JAX_ENABLE_X64".to_string(), "1".to_string())].into(),
                ..Default::default()
            }],
            gpus: vec![
                Gpu {
                    name: "NVIDIA H200".into(),
                    driver: Some("580.1".into()),
                    memory_mib: None,
                },
                Gpu {
                    name: "NVIDIA H200".into(),
                    driver: Some("580.1".into()),
                    memory_mib: None,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn facts_name_each_flag_and_version() {
        let f = facts(&record());
        assert_eq!(
            f["XLA flag --xla_gpu_enable_latency_hiding_scheduler"],
            "true"
        );
        assert_eq!(f["XLA flag --xla_dump_hlo_as_proto"], "true");
        assert!(!f.contains_key("XLA flag --xla_dump_to"));
        assert_eq!(f["imported jax"], "0.11.2");
        assert_eq!(f["env JAX_ENABLE_X64"], "1");
        assert_eq!(f["GPUs"], "2 × NVIDIA H200");
        assert_eq!(f["driver"], "580.1");
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_refused() {
        let r = record();
        let bytes = serde_json::to_vec(&r).unwrap();
        assert_eq!(read(&bytes).unwrap(), r);
        assert!(
            read(b"{}")
                .unwrap_err()
                .to_string()
                .contains("not a run record")
        );
        let mut other = r.clone();
        other.format = 9;
        let e = read(&serde_json::to_vec(&other).unwrap()).unwrap_err();
        assert!(e.to_string().contains("format 9"), "{e}");
        assert!(read(&vec![b' '; MAX_BYTES + 1]).is_err());
    }
}
