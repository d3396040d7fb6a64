//! What else differs between two runs (their provenance), and why a module was compiled into
//! another program between them (docs/compare.md, "Why a
//! module was recompiled"): its program before XLA's optimizations compared, and the facts
//! that change what XLA compiles.

use serde::{Deserialize, Serialize};

use std::collections::BTreeSet;

use anyhow::Result;

use crate::analyses::provenance::{self, ProvenancePartial, ProvenanceShare};
use crate::graph::{self, Db, Run};

/// One fact of the runs that differs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct EnvChange {
    pub what: String,
    pub base: Option<String>,
    pub head: Option<String>,
}

/// What else differs between the runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct EnvDiff {
    /// Whether each side's archives hold `run`'s record (else only the report's facts).
    pub base_recorded: bool,
    pub head_recorded: bool,
    pub changes: Vec<EnvChange>,
}

/// The facts of each side's runs, diffed.
pub fn environment(db: &Db, base: Run, head: Run) -> Result<EnvDiff> {
    let side = |run: Run| -> Result<provenance::Provenance> {
        let parts = graph::run_shares(db, run, &ProvenanceShare, &())?;
        let refs: Vec<&ProvenancePartial> = parts.iter().map(|p| p.value.as_ref()).collect();
        Ok(provenance::reduce(&refs))
    };
    let (b, h) = (side(base)?, side(head)?);
    let (bf, hf) = (b.merged(), h.merged());
    let keys: BTreeSet<&String> = bf.keys().chain(hf.keys()).collect();
    let changes = keys
        .into_iter()
        .filter(|k| bf.get(*k) != hf.get(*k))
        .map(|k| EnvChange {
            what: k.clone(),
            base: bf.get(k).cloned(),
            head: hf.get(k).cloned(),
        })
        .collect();
    Ok(EnvDiff {
        base_recorded: b.recorded > 0,
        head_recorded: h.recorded > 0,
        changes,
    })
}

/// Why a module's HLO differs between the runs: its program before XLA's optimizations
/// (the `before_optimizations` dump) compared, and the compiler's settings.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Recompiled {
    /// The same program, flags and versions: XLA's autotuner chose other kernels (it times
    /// candidates on the GPU; near-equal ones swap between runs).
    Autotuning,
    /// The same program, compiled with other XLA flags or JAX/CUDA versions or for another
    /// GPU (named under "what else changed").
    CompilerSettings,
    /// The program itself differs: the code, its shapes, dtypes or shardings.
    Program,
}

impl Recompiled {
    pub fn phrase(self) -> &'static str {
        match self {
            Recompiled::Autotuning => {
                "same program before optimization, same flags and versions: XLA's autotuner \
                 chose other kernels. For comparisons that show the code's changes only, fix its \
                 choices: a persisted autotune cache (`--xla_gpu_per_fusion_autotune_cache_dir=DIR` \
                 for both runs) or `--xla_gpu_autotune_level=0`"
            }
            Recompiled::CompilerSettings => {
                "same program before optimization: compiled differently because XLA flags, \
                 versions or the GPU changed (see what else changed)"
            }
            Recompiled::Program => {
                "the program before optimization differs: the code, its shapes, dtypes or \
                 shardings changed (its ops are told by source line and library call; an \
                 instruction name pairs two ops only where it is the same op on both sides)"
            }
        }
    }
}

/// Whether a fact that differs between the runs changes what XLA compiles: its flags, the
/// versions of JAX and the CUDA libraries, the driver, the GPU model.
pub fn compiler_setting(c: &EnvChange) -> bool {
    let w = c.what.as_str();
    let model = |v: &Option<String>| {
        v.as_deref()
            .map(|s| s.split_once(" × ").map_or(s, |(_, m)| m).to_string())
    };
    w.starts_with("XLA flag")
        || w.starts_with("env XLA_")
        || w.starts_with("package jax")
        || w.starts_with("imported jax")
        || w.starts_with("package nvidia-")
        || matches!(w, "driver" | "CUDA (driver)" | "backend")
        || (w == "GPUs" && model(&c.base) != model(&c.head))
}

/// The cause, from whether both sides' programs before optimization are the same (None:
/// unknown, a dump lacks them) and what else differs between the runs.
pub fn classify(same_before_optimization: Option<bool>, env: &EnvDiff) -> Option<Recompiled> {
    Some(if !same_before_optimization? {
        Recompiled::Program
    } else if env.changes.iter().any(compiler_setting) {
        Recompiled::CompilerSettings
    } else {
        Recompiled::Autotuning
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(what: &str, base: &str, head: &str) -> EnvChange {
        EnvChange {
            what: what.into(),
            base: Some(base.into()),
            head: Some(head.into()),
        }
    }

    #[test]
    fn the_cause_follows_the_program_and_the_compiler_s_settings() {
        let env = |c: Vec<EnvChange>| EnvDiff {
            base_recorded: true,
            head_recorded: true,
            changes: c,
        };
        let commit = change("commit", "a", "b");
        let gpus = change("GPUs", "2 × NVIDIA H200", "1 × NVIDIA H200");
        assert_eq!(classify(None, &env(vec![])), None);
        assert_eq!(
            classify(Some(false), &env(vec![])),
            Some(Recompiled::Program)
        );
        // Another commit and fewer GPUs of the same model: the autotuner.
        assert_eq!(
            classify(Some(true), &env(vec![commit.clone(), gpus])),
            Some(Recompiled::Autotuning)
        );
        for c in [
            change("XLA flag --xla_gpu_enable_triton_gemm", "", "false"),
            change("package jaxlib", "0.11.1", "0.11.2"),
            change("GPUs", "1 × NVIDIA H100", "1 × NVIDIA H200"),
            change("env XLA_PYTHON_CLIENT_MEM_FRACTION", ".8", ".9"),
        ] {
            assert_eq!(
                classify(Some(true), &env(vec![commit.clone(), c.clone()])),
                Some(Recompiled::CompilerSettings),
                "{c:?}"
            );
        }
    }
}
