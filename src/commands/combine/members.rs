//! Combining the per-process archives of one run into one archive, in the layout of
//! nsys-jax-combine (docs/design.md, "Archive layout"): a member the same in every input that has
//! it is stored once, a member that differs is stored as `path/<input stem>` for each input;
//! `.nsys-rep` reports are kept for the first input, all, or none.
//!
//! A member present in only some inputs is stored once only under `sources/` and `protos/`
//! (files that mean the same for every process); per-process data present in some inputs
//! only (a trace, a module's dump) is stored per input, so that readers never take one
//! process's data for another's.
//!
//! Before anything is written the inputs are checked; what cannot be one run is an error
//! naming the inputs: the same input stem twice, an input that is already combined, the same
//! profile twice (identical traces or reports), inputs from different programs (no XLA
//! module in common), inputs written with different XLA schemas (`protos/` differ). What is
//! merely unusual (different GPU architectures) is a warning.

use crate::formats::archive_writer::Entry;
use anyhow::{Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Which reports to keep (`--keep-nsys-rep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KeepReports {
    All,
    First,
    None,
}

/// One input: its path (for messages), its stem (the name of its members in the combined
/// layout) and its members.
pub struct Input {
    pub path: PathBuf,
    pub stem: String,
    pub entries: Vec<Entry>,
}

/// The combined archive's members, and warnings about unusual inputs.
pub struct Combined {
    pub entries: Vec<Entry>,
    pub warnings: Vec<String>,
}

/// Prefixes whose members mean the same for every process, stored once when identical
/// wherever present.
const SHARED_PREFIXES: [&str; 2] = ["sources/", "protos/"];

/// Members that identify one process's profile.
const PROFILE_MEMBERS: [&str; 2] = [
    crate::formats::archive::TRACE,
    crate::formats::archive::PUSHPOP_PARQUET,
];

fn is_report(name: &str) -> bool {
    !name.contains('/') && (name.ends_with(".nsys-rep") || name.ends_with(".qdrep"))
}

/// The program names of an input's dump (`dump/module_0012.jit_step.…` → `jit_step`).
fn program_names(entries: &[Entry]) -> BTreeSet<String> {
    entries
        .iter()
        .filter_map(|e| e.name.strip_prefix("dump/module_"))
        .filter_map(|rest| {
            let (_, after_id) = rest.split_once('.')?;
            let name = after_id.split('.').next()?;
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// The GPU architectures named by an input's dump stages (`sm_9.0a_gpu_after_optimizations`).
fn gpu_archs(entries: &[Entry]) -> BTreeSet<String> {
    entries
        .iter()
        .filter(|e| e.name.starts_with("dump/"))
        .filter_map(|e| {
            let i = e.name.find(".sm_")?;
            let rest = &e.name[i + 1..];
            let end = rest.find("_gpu")?;
            Some(rest[..end].to_string())
        })
        .collect()
}

/// Check the inputs and lay out the combined archive.
pub fn combine(inputs: Vec<Input>, keep: KeepReports) -> Result<Combined> {
    // One input is rewritten as this version's archive (with install.sh and the notebook).
    if inputs.is_empty() {
        bail!("nothing to combine: no inputs");
    }
    let mut warnings = Vec::new();
    let labels: Vec<String> = inputs
        .iter()
        .map(|i| i.path.display().to_string())
        .collect();
    let label = |i: usize| labels[i].clone();
    let stems: Vec<String> = inputs.iter().map(|i| i.stem.clone()).collect();

    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, input) in inputs.iter().enumerate() {
        if let Some(j) = seen.insert(stems[i].as_str(), i) {
            bail!(
                "{} and {} have the same name {:?}: their members would collide in the combined archive (rename one)",
                label(j),
                label(i),
                input.stem
            );
        }
        let trace_prefix = format!("{}/", crate::formats::archive::TRACE);
        if input
            .entries
            .iter()
            .any(|e| e.name.starts_with(&trace_prefix))
        {
            bail!(
                "{}: already a combined archive (give the per-process archives)",
                label(i)
            );
        }
    }

    // name -> [(input, hash, entry index)]
    let mut by_name: BTreeMap<String, Vec<(usize, [u8; 32], usize)>> = BTreeMap::new();
    for (i, input) in inputs.iter().enumerate() {
        for (k, e) in input.entries.iter().enumerate() {
            by_name
                .entry(e.name.clone())
                .or_default()
                .push((i, e.content_hash(), k));
        }
    }

    // The same profile twice.
    for name in by_name
        .keys()
        .filter(|n| PROFILE_MEMBERS.contains(&n.as_str()) || is_report(n))
    {
        let copies = &by_name[name];
        for (a, x) in copies.iter().enumerate() {
            if let Some(y) = copies[a + 1..].iter().find(|y| y.1 == x.1) {
                bail!(
                    "{} and {} hold the same profile (identical {name}): the same process given twice?",
                    label(x.0),
                    label(y.0)
                );
            }
        }
    }
    // Reports are named after their input: identical report bytes under different names are
    // the same capture too.
    let mut reports: BTreeMap<[u8; 32], usize> = BTreeMap::new();
    for (i, input) in inputs.iter().enumerate() {
        for e in input.entries.iter().filter(|e| is_report(&e.name)) {
            if let Some(j) = reports.insert(e.content_hash(), i)
                && j != i
            {
                bail!(
                    "{} and {} hold the same report ({}): the same process given twice?",
                    label(j),
                    label(i),
                    e.name
                );
            }
        }
    }

    // Different programs: the processes of one run compile (nearly) the same XLA modules;
    // small utility modules (jit_convert_element_type, ...) are common to any two programs,
    // so fewer than half of the smaller set in common means different programs.
    let programs: Vec<BTreeSet<String>> =
        inputs.iter().map(|i| program_names(&i.entries)).collect();
    for a in 0..inputs.len() {
        for b in a + 1..inputs.len() {
            let common = programs[a].intersection(&programs[b]).count();
            let smaller = programs[a].len().min(programs[b].len());
            if smaller > 0 && common * 2 < smaller {
                let only = |x: usize, y: usize| {
                    programs[x]
                        .difference(&programs[y])
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                bail!(
                    "{} and {} profile different programs: {common} of their XLA modules in common ({} only in the first; {} only in the second)",
                    label(a),
                    label(b),
                    only(a, b),
                    only(b, a)
                );
            }
        }
    }
    // Different XLA versions: the schema the dumps were written with differs.
    for (name, copies) in by_name.iter().filter(|(n, _)| n.starts_with("protos/")) {
        if let Some(other) = copies.iter().find(|c| c.1 != copies[0].1) {
            bail!(
                "{} and {} come from different XLA versions ({name} differs)",
                label(copies[0].0),
                label(other.0)
            );
        }
    }
    let archs: Vec<BTreeSet<String>> = inputs.iter().map(|i| gpu_archs(&i.entries)).collect();
    let all_archs: BTreeSet<&String> = archs.iter().flatten().collect();
    if all_archs.len() > 1 {
        warnings.push(format!(
            "the inputs were compiled for different GPU architectures ({}); fine for a heterogeneous job, unusual otherwise",
            all_archs.into_iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }

    let n = inputs.len();
    let mut slots: Vec<Vec<Option<Entry>>> = inputs
        .into_iter()
        .map(|i| i.entries.into_iter().map(Some).collect())
        .collect();
    let mut entries = Vec::new();
    for (name, copies) in by_name {
        let mut take =
            |input: usize, k: usize| slots[input][k].take().expect("each entry taken once");
        if is_report(&name) {
            let copies: Vec<_> = copies
                .into_iter()
                .filter(|c| match keep {
                    KeepReports::All => true,
                    KeepReports::First => c.0 == 0,
                    KeepReports::None => false,
                })
                .collect();
            let single = copies.len() == 1;
            for (i, _, k) in copies {
                let e = take(i, k);
                entries.push(if single {
                    e
                } else {
                    e.renamed(format!("{name}/{}", stems[i]))
                });
            }
            continue;
        }
        let same = copies.iter().all(|c| c.1 == copies[0].1);
        let everywhere = copies.len() == n;
        let shared = SHARED_PREFIXES.iter().any(|p| name.starts_with(p));
        if same && (everywhere || shared) {
            let (i, _, k) = copies[0];
            entries.push(take(i, k));
        } else {
            for (i, _, k) in copies {
                entries.push(take(i, k).renamed(format!("{name}/{}", stems[i])));
            }
        }
    }
    Ok(Combined { entries, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(stem: &str, members: &[(&str, &str)]) -> Input {
        Input {
            path: PathBuf::from(format!("{stem}.zip")),
            stem: stem.into(),
            entries: members
                .iter()
                .map(|(n, c)| Entry::by_name(*n, c.as_bytes().to_vec()))
                .collect(),
        }
    }

    fn names(c: &Combined) -> Vec<&str> {
        c.entries.iter().map(|e| e.name.as_str()).collect()
    }

    const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";

    #[test]
    fn layout_rules() {
        let a = input(
            "r0",
            &[
                ("r0.nsys-rep", "rep0"),
                (TRACE, "t0"),
                ("dump/module_0001.jit_step.hlo.pb.xz", "same"),
                ("dump/module_0002.jit_init.hlo.pb.xz", "only here"),
                ("sources/opt/a.py", "src"),
                ("protos/x.proto", "p"),
            ],
        );
        let b = input(
            "r1",
            &[
                ("r1.nsys-rep", "rep1"),
                (TRACE, "t1"),
                ("dump/module_0001.jit_step.hlo.pb.xz", "same"),
                ("protos/x.proto", "p"),
            ],
        );
        let c = combine(vec![a, b], KeepReports::First).unwrap();
        assert_eq!(
            names(&c),
            [
                "dump/module_0001.jit_step.hlo.pb.xz",
                "dump/module_0002.jit_init.hlo.pb.xz/r0",
                "nvtx_gpu_proj_trace/trace.parquet/r0",
                "nvtx_gpu_proj_trace/trace.parquet/r1",
                "protos/x.proto",
                "r0.nsys-rep",
                "sources/opt/a.py",
            ]
        );
        assert!(c.warnings.is_empty());
        let all = |k| {
            let a = input("r0", &[("r0.nsys-rep", "rep0"), (TRACE, "t0")]);
            let b = input("r1", &[("r1.nsys-rep", "rep1"), (TRACE, "t1")]);
            combine(vec![a, b], k).unwrap()
        };
        assert_eq!(
            names(&all(KeepReports::All))[2..],
            ["r0.nsys-rep", "r1.nsys-rep"]
        );
        assert_eq!(names(&all(KeepReports::None)).len(), 2);
    }

    #[test]
    fn inputs_that_are_not_one_run() {
        let err = |inputs: Vec<Input>| {
            combine(inputs, KeepReports::First)
                .err()
                .unwrap()
                .to_string()
        };
        let e = err(vec![
            input("r0", &[(TRACE, "t")]),
            input("r0", &[(TRACE, "u")]),
        ]);
        assert!(e.contains("the same name \"r0\""), "{e}");
        let e = err(vec![
            input("a", &[(TRACE, "t")]),
            input("b", &[(TRACE, "t")]),
        ]);
        assert!(e.contains("a.zip and b.zip hold the same profile"), "{e}");
        let e = err(vec![
            input("a", &[("a.nsys-rep", "R"), (TRACE, "t")]),
            input("b", &[("b.nsys-rep", "R"), (TRACE, "u")]),
        ]);
        assert!(e.contains("same report"), "{e}");
        let e = err(vec![
            input(
                "a",
                &[(TRACE, "t"), ("dump/module_0001.jit_train.x.pb.xz", "1")],
            ),
            input(
                "b",
                &[(TRACE, "u"), ("dump/module_0001.jit_eval.x.pb.xz", "2")],
            ),
        ]);
        assert!(
            e.contains("different programs") && e.contains("jit_train"),
            "{e}"
        );
        let e = err(vec![
            input("a", &[(TRACE, "t"), ("protos/xla/hlo.proto", "v1")]),
            input("b", &[(TRACE, "u"), ("protos/xla/hlo.proto", "v2")]),
        ]);
        assert!(
            e.contains("different XLA versions") && e.contains("protos/xla/hlo.proto"),
            "{e}"
        );
        let e = err(vec![
            input("a", &[(&format!("{TRACE}/x"), "t")]),
            input("b", &[(TRACE, "u")]),
        ]);
        assert!(e.contains("a.zip: already a combined archive"), "{e}");
        // One input is rewritten as it is; none is nothing to do.
        assert!(combine(vec![input("a", &[(TRACE, "t")])], KeepReports::First).is_ok());
        assert!(combine(vec![], KeepReports::First).is_err());
        let c = combine(
            vec![
                input(
                    "a",
                    &[
                        (TRACE, "t"),
                        (
                            "dump/module_0001.jit_s.sm_8.0_gpu_after_optimizations.hlo.pb.xz",
                            "1",
                        ),
                    ],
                ),
                input(
                    "b",
                    &[
                        (TRACE, "u"),
                        (
                            "dump/module_0001.jit_s.sm_9.0a_gpu_after_optimizations.hlo.pb.xz",
                            "2",
                        ),
                    ],
                ),
            ],
            KeepReports::First,
        )
        .unwrap();
        assert!(
            c.warnings[0].contains("sm_8.0, sm_9.0a"),
            "{:?}",
            c.warnings
        );
    }
}
