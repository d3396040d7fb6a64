//! `history`: the labelled runs of the cache, in order, as one series per metric with its
//! change points (the series and their explanation: [`crate::compare::history`]).

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::commands::Ui;
use crate::compare::history::{History, build, points, render};
use crate::engine::Engine;
use crate::graph;
use crate::stats::changepoint::Params;

/// What `history` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct HistoryRequest {
    /// Labels, in order; or, when empty, every label starting with `prefix`, oldest first.
    pub labels: Vec<String>,
    pub prefix: Option<String>,
    /// Families (`module`) or metrics (`module:jit_step`) to follow; all when empty.
    pub metrics: Vec<String>,
    pub params: Params,
    /// The folder for `history.json` and `history.md`.
    pub output: PathBuf,
    pub html: Option<PathBuf>,
    pub nsys: Option<PathBuf>,
}

/// The labels of the request, resolved.
fn labels_of(req: &HistoryRequest, engine: &Engine) -> Result<Vec<String>> {
    let Some(store) = engine.store() else {
        bail!("history reads labelled runs from the cache: give a cache (not --no-cache)");
    };
    let labels = match (&req.prefix, req.labels.is_empty()) {
        (Some(p), true) => {
            let l = crate::commands::labels::list(store.root(), store.remote(), p)?;
            if l.is_empty() {
                bail!("no labelled run starts with {p:?} (label runs with `analyze --label NAME`)");
            }
            l
        }
        (None, false) => req.labels.clone(),
        _ => bail!("give labels, or --label-prefix P (not both)"),
    };
    let mut seen = BTreeSet::new();
    for l in &labels {
        if !seen.insert(l) {
            bail!("label {l} is given twice");
        }
    }
    Ok(labels)
}

/// What `history` did.
pub struct Histories {
    pub history: History,
    pub record: crate::engine::RunRecord,
    pub output: PathBuf,
    /// The HTML page written.
    pub page: Option<PathBuf>,
}

impl Histories {
    pub fn summary(&self) -> String {
        super::wrote_line(
            &self.output.display().to_string(),
            &self.record,
            self.page.as_deref(),
        )
    }
}

/// `history`: the series of the labelled runs, written to `req.output`.
pub fn history(engine: Engine, req: &HistoryRequest, ui: &dyn Ui) -> Result<Histories> {
    for m in &req.metrics {
        if !points::FAMILIES.contains(&points::family(m)) {
            bail!(
                "--metric {m}: unknown (families: {}; or family:name)",
                points::FAMILIES.join(", ")
            );
        }
    }
    let labels = labels_of(req, &engine)?;
    let cache = engine.store().expect("checked").root().to_path_buf();
    let remote = engine.store().and_then(|s| s.remote());
    let mut sides = Vec::new();
    for l in &labels {
        let Some(found) = crate::commands::labels::find(&cache, remote, l)? else {
            bail!("{l}: no run labelled so in the cache (label runs with `analyze --label {l}`)");
        };
        sides.push(graph::classify_inputs(&found.inputs, &found.dumps)?);
    }
    let (db, runs) = graph::open_runs(engine, &sides, req.nsys.clone())?;
    for &run in &runs {
        graph::prepare_archives(&db, run)?;
    }
    let needs = points::needs();
    let mut stored = true;
    for &run in &runs {
        stored &= graph::shares_stored(&db, run, &needs)?;
    }
    if !stored {
        let n = runs.iter().map(|r| r.processes(&db).len()).sum::<usize>() as u64;
        let bar = ui.step("loading profiles", Some(n));
        runs.iter()
            .try_for_each(|&run| graph::prepare_processes(&db, run, &needs, &|| bar.advance()))?;
    }
    let history = build(&db, &runs, &labels, &req.metrics, &req.params)?;
    let html = match &req.html {
        Some(_) => Some(render::html(&history)?),
        None => None,
    };
    let record = db.ctx.engine.finish();
    crate::tmpfiles::write_atomic(
        &req.output.join("history.json"),
        &serde_json::to_vec_pretty(&history)?,
    )?;
    crate::tmpfiles::write_atomic(
        &req.output.join("history.md"),
        render::markdown(&history).as_bytes(),
    )?;
    if let (Some(path), Some(page)) = (&req.html, html) {
        crate::tmpfiles::write_atomic(path, page.as_bytes())?;
    }
    Ok(Histories {
        history,
        record,
        output: req.output.clone(),
        page: req.html.clone(),
    })
}
