//! `toy`: a test analysis added the way every analysis is — this file and one registry line —
//! and run through `analyze`: the steady-state module executions of each process and in all.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::{Analysis, ProcessView, Reads, Reduced, RunShares, Share, ShareUse};

/// One process's steady-state module executions (device rows).
pub struct ToyShare;

impl Share for ToyShare {
    const KIND: &'static str = "toy-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    type Param = ();
    type Value = u64;

    fn map(&self, p: &ProcessView, _: &()) -> Result<u64> {
        Ok(p.steady.map_or(0, |s| s.module.num_rows() as u64))
    }
}

impl crate::engine::value::JsonValue for u64 {}

#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ToyParams {
    /// Multiply every count (to see a parameter reach the reduce).
    #[serde(default = "one")]
    pub scale: u64,
}

fn one() -> u64 {
    1
}

#[derive(Serialize, serde::Deserialize)]
pub struct Toy {
    pub per_process: Vec<u64>,
    pub total: u64,
}

pub struct ToyAnalysis;

impl Analysis for ToyAnalysis {
    const NAME: &'static str = "toy";
    const FILE: &'static str = file!();
    type Params = ToyParams;
    type Result = Toy;

    fn shares(&self, _: &ToyParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&ToyShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, p: &ToyParams) -> Result<Reduced<Toy>> {
        let per_process: Vec<u64> = run
            .all(&ToyShare, &())?
            .iter()
            .map(|n| **n * p.scale)
            .collect();
        Ok(Reduced {
            notes: vec![format!("{} processes", per_process.len())],
            result: Toy {
                total: per_process.iter().sum(),
                per_process,
            },
        })
    }

    fn render(&self, t: &Toy) -> String {
        format!("{} module executions\n", t.total)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn analyze(out: &Path, extra: &[&str]) -> i32 {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
        let mut argv: Vec<std::ffi::OsString> = ["nsys-jax-pipe", "analyze", "-q", "--no-cache"]
            .iter()
            .map(Into::into)
            .collect();
        argv.extend(extra.iter().map(Into::into));
        argv.extend([
            "-o".into(),
            out.as_os_str().to_owned(),
            example.into_os_string(),
        ]);
        crate::cli::main_with(argv)
    }

    fn json(path: &Path) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// The toy analysis runs through `analyze` like a built-in one, and counts what
    /// `summary` counts.
    #[test]
    fn registered_analysis_runs_through_analyze() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let code = analyze(
            &out,
            &[
                "--analysis",
                "toy",
                "--analysis-arg",
                "scale=2",
                "--analysis",
                "summary",
            ],
        );
        assert_eq!(code, 0);
        let toy = json(&out.join("toy.json"));
        let summary = json(&out.join("summary.json"));
        let executions: u64 = summary["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["executions"].as_u64().unwrap())
            .sum();
        assert!(executions > 0);
        assert_eq!(toy["total"].as_u64().unwrap(), 2 * executions);
        assert_eq!(toy["per_process"].as_array().unwrap().len(), 1);
        // An unknown parameter is an input error.
        assert_eq!(
            analyze(
                &tmp.path().join("bad"),
                &["--analysis", "toy", "--analysis-arg", "sclae=2"]
            ),
            crate::error::EXIT_INPUT
        );
        assert!(!tmp.path().join("bad/toy.json").exists());
    }
}
