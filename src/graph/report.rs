//! The HTML report of a run (`--html`): an overview of the run — its inputs, processes,
//! devices, GPUs and the span of module activity — then the sections each analysis drew, on
//! one page ([`crate::report`]). A node like every output: an unchanged run reads it back.

use crate::analyses::AnalysisOutput;
use crate::engine::Node;
use crate::engine::value::Bytes;
use crate::formats::{archive, metadata};
use crate::report::{Page, Section, escape, render_page};
use crate::units::duration_ns;
use anyhow::Result;
use std::collections::BTreeMap;

use super::frames::{facts_key, process_facts};
use super::keys::ReportNode;
use super::members::read_member;
use super::{Db, InputArchive, Out, Run, fail};

/// The report of `run` showing `outputs` (in that order) under `title`.
pub fn html_report(
    db: &Db,
    run: Run,
    title: &str,
    outputs: &[Out<AnalysisOutput>],
) -> Result<Out<Bytes>> {
    let mut facts = Vec::new();
    let mut archives: Vec<InputArchive> = Vec::new();
    for &p in run.processes(db) {
        facts.push(facts_key(db, p)?);
        if !archives.contains(&p.archive(db)) {
            archives.push(p.archive(db));
        }
    }
    let node = ReportNode {
        title: title.to_string(),
        outputs: outputs.iter().map(|o| o.key).collect(),
        facts,
        archives: archives.iter().map(|a| a.file_key(db)).collect(),
    };
    let (key, value) = fail(db.engine().compute(&node, "", || {
        let mut sections = vec![overview(db, run, outputs)?];
        for o in outputs {
            sections.extend(o.value.sections.iter().cloned());
        }
        let processes = run.processes(db).len();
        let page = Page {
            title: title.to_string(),
            subtitle: format!(
                "{} · {}",
                crate::table::count(processes, "process", "processes"),
                outputs
                    .iter()
                    .map(|o| o.value.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            sections,
        };
        let html = render_page(&page, |name| {
            outputs
                .iter()
                .flat_map(|o| o.value.files.iter())
                .find(|(n, _)| n == name)
                .map(|(_, c)| c.as_str())
        })?;
        Ok(Bytes(html.into_bytes()))
    }))?;
    debug_assert_eq!(key, node.key());
    Ok(Out { key, value })
}

/// System entries the overview shows, when the profile has them.
const SYSTEM_SHOWN: &[&str] = &["Hostname", "NvDriverVersion", "CudaDriverVersion", "OsName"];

/// The `overview` section: what was profiled, on what.
fn overview(db: &Db, run: Run, outputs: &[Out<AnalysisOutput>]) -> Result<Section> {
    let mut facts: Vec<(String, String)> = Vec::new();
    let processes = run.processes(db);
    let mut inputs: Vec<String> = Vec::new();
    for p in processes {
        let path = p.archive_ref(db).path.display().to_string();
        if !inputs.contains(&path) {
            inputs.push(path);
        }
    }
    facts.push(("Inputs".into(), inputs.join(", ")));
    let labels: Vec<String> = processes.iter().map(|p| p.label(db)).collect();
    facts.push((
        "Processes".into(),
        if labels.len() <= 16 {
            format!("{}: {}", labels.len(), labels.join(", "))
        } else {
            labels.len().to_string()
        },
    ));
    let mut devices = 0;
    let mut executions = 0;
    let mut longest_span: Option<i64> = None;
    let mut gpus: BTreeMap<String, usize> = BTreeMap::new();
    let mut system: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for &p in processes {
        let f = process_facts(db, p)?;
        devices += f.value.devices.len();
        executions += f.value.module_executions;
        if let Some((a, b)) = f.value.span_ns {
            longest_span = Some(longest_span.unwrap_or(0).max(b - a));
        }
        // The metadata files are small; a profile without them shows less, not nothing.
        if let Ok(names) =
            read_member(db, p, archive::DEVICE_METADATA).and_then(metadata::gpu_names)
        {
            for n in names {
                *gpus.entry(n).or_default() += 1;
            }
        }
        if let Ok(entries) =
            read_member(db, p, archive::SYSTEM_METADATA).and_then(metadata::system_entries)
        {
            for (n, v) in entries {
                if SYSTEM_SHOWN.contains(&n.as_str()) {
                    let values = system.entry(n).or_default();
                    if !values.contains(&v) {
                        values.push(v);
                    }
                }
            }
        }
    }
    facts.push((
        "Devices".into(),
        format!("{devices} with XLA module executions ({executions} executions)"),
    ));
    facts.push((
        "GPUs (as the profiles list them)".into(),
        if gpus.is_empty() {
            "not recorded".into()
        } else {
            gpus.iter()
                .map(|(n, k)| format!("{k} × {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
    ));
    facts.push((
        "Module activity".into(),
        match longest_span {
            Some(ns) => format!(
                "{} from the first module start to the last module end (longest over processes)",
                duration_ns(ns as f64)
            ),
            None => "no module executions".into(),
        },
    ));
    for name in SYSTEM_SHOWN {
        if let Some(v) = system.get(*name) {
            facts.push((name.to_string(), v.join(", ")));
        }
    }
    facts.push((
        "JAX / XLA versions".into(),
        "not recorded in the profile (neither nsys-jax archives nor Nsight Systems reports \
         carry them)"
            .into(),
    ));
    facts.push((
        "Analyses".into(),
        outputs
            .iter()
            .map(|o| o.value.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    ));
    let mut sec = Section::new("overview", "Overview");
    let mut html = String::from("<dl class=\"facts\">\n");
    for (k, v) in &facts {
        html.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", escape(k), escape(v)));
    }
    html.push_str("</dl>\n");
    sec.raw(&html);
    Ok(sec)
}
