//! `provenance`: what the run was — the command, the commit, JAX and its plugins, the XLA
//! flags and the JAX/XLA/NCCL variables, the GPUs, driver and CUDA, the Nsight Systems that
//! profiled it — from the record `run` stores in its archives (`formats::run_metadata`;
//! docs/design.md, "Provenance"), and, for any archive, what its report records of the host,
//! driver and GPUs. An archive without the record says so.
//!
//! Each process's facts ([`crate::formats::run_metadata::facts`]) are reduced to those every
//! process agrees on and those that differ between processes. `compare` diffs two runs' facts.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analyses::{
    Analysis, NoParams, ProcessView, Reads, Reduced, RunShares, Share, ShareUse,
};
use crate::formats::run_metadata::{self, RunMetadata};
use crate::report::Section;

/// The report's system entries taken as facts, under the names a record uses.
const FROM_REPORT: &[(&str, &str)] = &[
    ("Hostname", "host"),
    ("NvDriverVersion", "driver"),
    ("CudaDriverVersion", "CUDA (driver)"),
];

/// The report's CUDA driver version as `nvidia-smi` writes it (`13000` → `13.0`).
fn cuda_version(entry: &str, v: &str) -> String {
    match v.parse::<u32>() {
        Ok(n) if entry == "CudaDriverVersion" && n >= 1000 => {
            format!("{}.{}", n / 1000, (n % 1000) / 10)
        }
        _ => v.to_string(),
    }
}

/// One process's facts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ProvenancePartial {
    /// The record `run` stored, when the archive holds one.
    pub record: Option<RunMetadata>,
    /// Why the archive's record could not be read.
    pub problem: Option<String>,
    /// Named facts: the record's, completed by what the report says.
    pub facts: BTreeMap<String, String>,
}

impl crate::engine::value::JsonValue for ProvenancePartial {}

/// The facts of one process (see the module's documentation).
pub fn partial(p: &run_metadata::Provenance) -> ProvenancePartial {
    let mut facts = p
        .record
        .as_ref()
        .map(run_metadata::facts)
        .unwrap_or_default();
    for (entry, name) in FROM_REPORT {
        // A machine without the NVIDIA driver reports version 0.
        if let Some((_, v)) = p
            .system
            .iter()
            .find(|(k, v)| k == entry && !v.is_empty() && v != "0")
        {
            facts
                .entry(name.to_string())
                .or_insert_with(|| cuda_version(entry, v));
        }
    }
    if !p.gpus.is_empty() && !facts.contains_key("GPUs") {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for g in &p.gpus {
            *count.entry(g).or_default() += 1;
        }
        let listed: Vec<String> = count.iter().map(|(n, k)| format!("{k} × {n}")).collect();
        facts.insert("GPUs".into(), listed.join(", "));
    }
    ProvenancePartial {
        record: p.record.clone(),
        problem: p.problem.clone(),
        facts,
    }
}

/// A run's provenance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Provenance {
    pub processes: usize,
    /// Processes whose archive holds `run`'s record.
    pub recorded: usize,
    /// Facts every process that has them agrees on.
    pub facts: BTreeMap<String, String>,
    /// Facts that differ between processes: each value with the processes that have it.
    pub differing: BTreeMap<String, Vec<(String, Vec<usize>)>>,
    /// The first process's record, for what the facts leave out (working folder, notes).
    pub record: Option<RunMetadata>,
    pub notes: Vec<String>,
}

impl Provenance {
    /// The facts of the run as one map: agreed facts, and for differing ones the values
    /// joined (`a | b`).
    pub fn merged(&self) -> BTreeMap<String, String> {
        let mut out = self.facts.clone();
        for (k, vs) in &self.differing {
            let values: Vec<&str> = vs.iter().map(|(v, _)| v.as_str()).collect();
            out.insert(k.clone(), values.join(" | "));
        }
        out
    }
}

pub fn reduce(parts: &[&ProvenancePartial]) -> Provenance {
    let mut values: BTreeMap<&str, BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
    for (i, p) in parts.iter().enumerate() {
        for (k, v) in &p.facts {
            values.entry(k).or_default().entry(v).or_default().push(i);
        }
    }
    let mut out = Provenance {
        processes: parts.len(),
        recorded: parts.iter().filter(|p| p.record.is_some()).count(),
        record: parts.iter().find_map(|p| p.record.clone()),
        ..Default::default()
    };
    for (k, vs) in values {
        if vs.len() == 1 {
            let v = vs.into_keys().next().expect("one value");
            out.facts.insert(k.to_string(), v.to_string());
        } else {
            out.differing.insert(
                k.to_string(),
                vs.into_iter().map(|(v, ps)| (v.to_string(), ps)).collect(),
            );
        }
    }
    out.notes
        .extend(parts.iter().filter_map(|p| p.problem.clone()));
    if out.recorded == 0 {
        out.notes.push(
            "not recorded: the archive was not made by `nsys-jax-pipe run` (JAX, XLA flags and the commit are unknown; host, driver and GPUs are the report's)"
                .into(),
        );
    } else if out.recorded < out.processes {
        out.notes.push(format!(
            "recorded for {} of {} processes",
            out.recorded, out.processes
        ));
    }
    out
}

/// The facts in the order people read them, each with its label.
fn ordered(facts: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let first = [
        "command",
        "commit",
        "host",
        "imported jax",
        "imported jaxlib",
        "backend",
        "GPUs",
        "driver",
        "CUDA (driver)",
        "Nsight Systems",
        "python",
    ];
    let mut out: Vec<(String, String)> = first
        .iter()
        .filter_map(|k| facts.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    let rank = |k: &str| {
        if k.starts_with("package ") {
            0
        } else if k.starts_with("XLA flag ") {
            1
        } else if k.starts_with("env ") {
            2
        } else {
            3
        }
    };
    let mut rest: Vec<(&String, &String)> = facts
        .iter()
        .filter(|(k, _)| !first.contains(&k.as_str()))
        .collect();
    rest.sort_by_key(|(k, _)| (rank(k), k.to_string()));
    out.extend(rest.into_iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// Cut `s` to `n` characters (an ellipsis says so).
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `words` after a label, wrapped to the text width (continuation lines indented).
fn wrapped(out: &mut String, label: &str, words: &[String]) {
    const LABEL: usize = 16;
    let width = super::TEXT_WIDTH - LABEL - 3;
    let mut lines: Vec<String> = vec![String::new()];
    for w in words {
        let w = cut(w, width);
        let last = lines.last_mut().expect("a line");
        if !last.is_empty() && last.chars().count() + 1 + w.chars().count() > width {
            lines.push(w);
        } else {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(&w);
        }
    }
    for (i, l) in lines.iter().enumerate() {
        let shown = if i == 0 { label } else { "" };
        out.push_str(&format!("  {shown:<LABEL$} {l}\n"));
    }
}

pub fn render(r: &Provenance) -> String {
    let mut out = String::new();
    if r.recorded == 0 {
        let known: Vec<String> = ["host", "driver", "CUDA (driver)", "GPUs"]
            .iter()
            .filter_map(|k| r.facts.get(*k).map(|v| format!("{k} {v}")))
            .collect();
        out.push_str("Provenance: not recorded (the archive was not made by `nsys-jax-pipe run`)");
        if !known.is_empty() {
            out.push_str(&format!(
                "\n  from the report: {}",
                cut(&known.join(", "), super::TEXT_WIDTH - 19)
            ));
        }
        out.push('\n');
        return out;
    }
    out.push_str(&format!(
        "Provenance (recorded by `nsys-jax-pipe run`, {} of {}):\n",
        r.recorded,
        crate::table::count(r.processes, "process", "processes")
    ));
    let f = &r.facts;
    let one = |k: &str| f.get(k).map(|v| vec![v.clone()]);
    let with_prefix = |prefix: &str, join: &str| -> Vec<String> {
        f.iter()
            .filter_map(|(k, v)| k.strip_prefix(prefix).map(|n| format!("{n}{join}{v}")))
            .collect()
    };
    let lines: Vec<(&str, Option<Vec<String>>)> = vec![
        ("command", one("command")),
        ("commit", one("commit")),
        ("host", one("host")),
        ("imported", Some(with_prefix("imported ", " "))),
        ("backend", one("backend")),
        ("GPUs", one("GPUs")),
        ("driver", one("driver")),
        ("CUDA (driver)", one("CUDA (driver)")),
        ("Nsight Systems", one("Nsight Systems")),
        ("XLA flags", Some(with_prefix("XLA flag ", "="))),
        ("environment", Some(with_prefix("env ", "="))),
    ];
    for (label, words) in lines {
        if let Some(w) = words.filter(|w| !w.is_empty()) {
            wrapped(&mut out, label, &w);
        }
    }
    for (k, vs) in &r.differing {
        wrapped(
            &mut out,
            "differs",
            &[format!("{k}: {} values across processes", vs.len())],
        );
    }
    out
}

fn section(r: &Provenance) -> Section {
    let mut sec = Section::new("provenance", "Provenance");
    if r.recorded == 0 {
        sec.para(
            "Not recorded: the archive was not made by `nsys-jax-pipe run`. JAX's version, the \
             XLA flags and the commit are unknown; what follows is what the report records.",
        );
    }
    let mut facts = ordered(&r.facts);
    for (k, vs) in &r.differing {
        let values: Vec<String> = vs
            .iter()
            .map(|(v, ps)| {
                format!(
                    "{v} ({})",
                    crate::table::count(ps.len(), "process", "processes")
                )
            })
            .collect();
        facts.push((k.clone(), values.join("; ")));
    }
    if let Some(rec) = &r.record {
        facts.push(("working folder".into(), rec.cwd.clone()));
        facts.push(("recorded by".into(), rec.tool.clone()));
    }
    sec.raw(&crate::report::facts_list(&facts));
    sec
}

/// The share `provenance` reads (and `compare`, for the environment diff).
pub struct ProvenanceShare;

impl Share for ProvenanceShare {
    const KIND: &'static str = "provenance-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Provenance;
    type Param = ();
    type Value = ProvenancePartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<ProvenancePartial> {
        Ok(p.provenance.map(partial).unwrap_or_default())
    }
}

/// The `provenance` analysis.
pub struct ProvenanceAnalysis;

impl Analysis for ProvenanceAnalysis {
    const NAME: &'static str = "provenance";
    const FILE: &'static str = file!();
    type Params = NoParams;
    type Result = Provenance;

    fn shares(&self, _: &NoParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&ProvenanceShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, _: &NoParams) -> Result<Reduced<Provenance>> {
        let parts = run.all(&ProvenanceShare, &())?;
        let refs: Vec<&ProvenancePartial> = parts.iter().map(|p| p.as_ref()).collect();
        let result = reduce(&refs);
        // Said in the text itself when nothing was recorded.
        let notes = result
            .notes
            .iter()
            .filter(|n| !n.starts_with("not recorded"))
            .cloned()
            .collect();
        Ok(Reduced { notes, result })
    }

    fn render(&self, r: &Provenance) -> String {
        render(r)
    }

    fn sections(&self, r: &Provenance) -> Result<Vec<Section>> {
        Ok(vec![section(r)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::run_metadata::{FORMAT, Gpu, PythonProcess};

    fn recorded(host: &str) -> run_metadata::Provenance {
        run_metadata::Provenance {
            record: Some(RunMetadata {
                format: FORMAT,
                command: vec!["python".into(), "train.py".into()],
                hostname: Some(host.into()),
                environment: [("XLA_FLAGS".to_string(), "--xla_foo=1".to_string())].into(),
                python: vec![PythonProcess {
                    imported: [("jax".to_string(), "0.11.2".to_string())].into(),
                    ..Default::default()
                }],
                gpus: vec![Gpu {
                    name: "NVIDIA H200".into(),
                    driver: Some("580.95".into()),
                    memory_mib: None,
                }],
                ..Default::default()
            }),
            system: vec![
                ("Hostname".into(), "report-host".into()),
                ("CudaDriverVersion".into(), "13000".into()),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn agreed_and_differing_facts() {
        let a = partial(&recorded("n1"));
        let b = partial(&recorded("n2"));
        // The record's host wins over the report's; the report completes what it lacks.
        assert_eq!(a.facts["host"], "n1");
        assert_eq!(a.facts["CUDA (driver)"], "13.0");
        let r = reduce(&[&a, &b]);
        assert_eq!(r.recorded, 2);
        assert_eq!(r.facts["imported jax"], "0.11.2");
        assert_eq!(r.facts["XLA flag --xla_foo"], "1");
        assert_eq!(r.differing["host"].len(), 2);
        let text = render(&r);
        assert!(text.contains("jax 0.11.2"), "{text}");
        assert!(text.contains("host"), "{text}");
        assert!(
            text.lines()
                .all(|l| l.chars().count() <= super::super::TEXT_WIDTH),
            "{text}"
        );
    }

    #[test]
    fn an_archive_without_a_record_says_so() {
        let p = partial(&run_metadata::Provenance {
            system: vec![("NvDriverVersion".into(), "535.1".into())],
            gpus: vec!["A100".into(), "A100".into()],
            ..Default::default()
        });
        let r = reduce(&[&p]);
        assert_eq!(r.recorded, 0);
        let text = render(&r);
        assert!(text.starts_with("Provenance: not recorded"), "{text}");
        assert!(
            text.contains("driver 535.1") && text.contains("2 × A100"),
            "{text}"
        );
    }
}
