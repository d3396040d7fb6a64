//! The HTML report of a run (`--html`): an overview of the run — its inputs, processes,
//! devices, GPUs and the span of module activity, gathered here and drawn by
//! [`crate::report::overview`] — then the sections each analysis drew, on one page
//! ([`crate::report`]). A node like every output: an unchanged run reads it back.

use crate::analyses::AnalysisOutput;
use crate::analyses::headline::Headline;
use crate::engine::kinds::kind;
use crate::engine::value::Bytes;
use crate::engine::{Key, KeyBuilder, Node, node_kind};
use crate::formats::{archive, metadata};
use crate::report::overview::{self, RunOverview, SYSTEM_SHOWN};
use crate::report::{Page, Section, render_page};
use anyhow::Result;

use super::frames::{facts_key, process_facts};
use super::members::read_member;
use super::{Db, InputArchive, Out, Run, fail};

kind!(
    /// The HTML report of a run.
    HTML_REPORT = "html-report"
);
kind!(
    /// The headline of a run's analyses: its step, MFU, top finding and what fixing it buys.
    HEADLINE = "headline"
);

/// The headline, keyed by the outputs it reads (of the analyses that ran among
/// [`Headline::READS`]).
pub struct HeadlineNode {
    pub outputs: Vec<(String, Key)>,
}
node_kind!(HeadlineNode, HEADLINE, Stored, Headline);
impl HeadlineNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        self.outputs
            .iter()
            .fold(kb, |kb, (name, key)| kb.param("output", name).input(key))
    }
}

/// The headline of `outputs`: computed once per run, for the terminal and the page alike.
pub fn headline(db: &Db, outputs: &[Out<AnalysisOutput>]) -> Result<Out<Headline>> {
    let read: Vec<&Out<AnalysisOutput>> = outputs
        .iter()
        .filter(|o| Headline::READS.contains(&o.value.name.as_str()))
        .collect();
    let node = HeadlineNode {
        outputs: read.iter().map(|o| (o.value.name.clone(), o.key)).collect(),
    };
    let (key, value) = fail(db.engine().compute(&node, "", || {
        Ok(Headline::of(read.iter().map(|o| &*o.value)))
    }))?;
    Ok(Out { key, value })
}

/// The HTML report of a run: keyed by the analyses' outputs it shows and, for its overview,
/// each process's facts and each input's content.
pub struct ReportNode {
    pub title: String,
    pub outputs: Vec<Key>,
    pub facts: Vec<Key>,
    pub archives: Vec<Key>,
}
node_kind!(ReportNode, HTML_REPORT, Stored, Bytes);
impl ReportNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        let counts = format!(
            "{} {} {}",
            self.outputs.len(),
            self.facts.len(),
            self.archives.len()
        );
        kb.param("title", &self.title)
            .param("counts", counts)
            .inputs(self.outputs.iter())
            .inputs(self.facts.iter())
            .inputs(self.archives.iter())
    }
}

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
        // The findings (an analysis that leads) first, then what was profiled, then the rest.
        let leads = |o: &&Out<AnalysisOutput>| {
            crate::analyses::find(&o.value.name).is_some_and(|a| a.leads())
        };
        let mut sections = Vec::new();
        for o in outputs.iter().filter(leads) {
            sections.extend(o.value.sections.iter().cloned());
        }
        sections.push(overview(db, run, outputs)?);
        for o in outputs.iter().filter(|o| !leads(o)) {
            sections.extend(o.value.sections.iter().cloned());
        }
        let processes = run.processes(db).len();
        let file = |name: &str| AnalysisOutput::file_among(outputs.iter().map(|o| &*o.value), name);
        let headline = headline(db, outputs)?.value;
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
            headline: if headline.is_empty() {
                String::new()
            } else {
                headline.html()
            },
            sections,
        };
        let html = render_page(&page, file)?;
        Ok(Bytes(html.into_bytes()))
    }))?;
    debug_assert_eq!(key, node.key());
    Ok(Out { key, value })
}

/// The facts of the `overview` section: what was profiled, on what.
fn overview(db: &Db, run: Run, outputs: &[Out<AnalysisOutput>]) -> Result<Section> {
    let processes = run.processes(db);
    let mut o = RunOverview::default();
    for p in processes {
        let path = p.archive_ref(db).path.display().to_string();
        if !o.inputs.contains(&path) {
            o.inputs.push(path);
        }
    }
    o.processes = processes.iter().map(|p| p.label(db)).collect();
    for &p in processes {
        let f = process_facts(db, p)?;
        o.devices += f.value.devices.len();
        o.executions += f.value.module_executions;
        if let Some((a, b)) = f.value.span_ns {
            o.longest_span_ns = Some(o.longest_span_ns.unwrap_or(0).max(b - a));
        }
        // The metadata files are small; a profile without them shows less, not nothing.
        if let Ok(names) =
            read_member(db, p, archive::DEVICE_METADATA).and_then(metadata::gpu_names)
        {
            for n in names {
                *o.gpus.entry(n).or_default() += 1;
            }
        }
        if let Ok(entries) =
            read_member(db, p, archive::SYSTEM_METADATA).and_then(metadata::system_entries)
        {
            for (n, v) in entries {
                if SYSTEM_SHOWN.contains(&n.as_str()) {
                    let values = o.system.entry(n).or_default();
                    if !values.contains(&v) {
                        values.push(v);
                    }
                }
            }
        }
    }
    o.analyses = outputs.iter().map(|o| o.value.name.clone()).collect();
    Ok(overview::section(&o))
}
