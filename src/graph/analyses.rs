//! The analyses of a run: any registered analysis (its reduce over the shares of every
//! process; [`crate::analyses::Registered`]) and analysis scripts.

use crate::analyses::external::ScriptOutput;
use crate::analyses::{self, AnalysisNode, AnalysisOutput, Reads, Registered};
use crate::engine::kinds::family;
use crate::engine::{Keep, Key, KeyBuilder, Node};
use crate::formats::archive::Archive;
use anyhow::Result;
use std::sync::Arc;

use super::NONE;
use super::capture::archive_contents;
use super::frames::{compile_frame_key, compiled_key, gpu_frames_key};
use super::members::member_keys;
use super::shares::{GROUP, group_sum, share_any};
use super::{
    AnalysisSpec, Db, Graph, InputArchive, NodeError, NodeResult, Out, Run, ScriptSpec, fail,
};
use crate::analyses::share::AnyValue;
use crate::analyses::{AnyShare, RunShares};

family!(
    /// The output of an analysis script: `analysis-script:<name>`.
    ANALYSIS_SCRIPT = "analysis-script:"
);

/// The output of an analysis script: keyed by the script's content, its arguments and the
/// keys of the input archives (and, for captures, of what the archive is made from).
pub struct ScriptNode {
    /// `analysis-script:<name>`.
    pub kind: String,
    pub script: Key,
    pub args: String,
    pub inputs: Vec<Key>,
}

impl Node for ScriptNode {
    type Value = ScriptOutput;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        &self.kind
    }
    fn roots(&self) -> Vec<&'static str> {
        ANALYSIS_SCRIPT.roots.to_vec()
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.script)
            .param("args", &self.args)
            .inputs(self.inputs.iter())
    }
}

/// The node of analysis `a` on `run`: keyed by its parameters and, per process, the keys of
/// the frames its shares read and of the programs compiled in the process's profile, and by
/// the nodes of the analyses it reads.
fn analysis_node(
    db: &Db,
    run: Run,
    spec: AnalysisSpec,
    a: &dyn Registered,
) -> Result<AnalysisNode, NodeError> {
    analysis_node_of(db, run, a, spec.params(db))
}

/// As [`analysis_node`], for `a` with these (canonical) parameters.
pub(super) fn analysis_node_of(
    db: &Db,
    run: Run,
    a: &dyn Registered,
    params: &str,
) -> Result<AnalysisNode, NodeError> {
    let uses = fail(a.shares(params))?;
    let gpu = uses.iter().any(|u| u.share.reads() == Reads::Gpu);
    let compile = uses.iter().any(|u| u.share.reads() == Reads::Compile);
    let provenance = uses.iter().any(|u| u.share.reads() == Reads::Provenance);
    let mut inputs = Vec::new();
    for &p in run.processes(db) {
        if gpu {
            inputs.push(gpu_frames_key(db, p)?.unwrap_or(NONE));
        }
        if compile {
            inputs.push(compile_frame_key(db, p)?.unwrap_or(NONE));
        }
        if provenance {
            inputs.push(super::shares::provenance_key(db, p)?);
        }
        inputs.push(compiled_key(db, p)?);
    }
    for up in fail(a.upstream(params))? {
        inputs.push(analysis_node_of(db, run, up.analysis, &up.params)?.key());
    }
    Ok(AnalysisNode {
        kind: crate::analyses::ANALYSIS.kind(a.name()),
        roots: a.roots(),
        params: params.to_string(),
        inputs,
    })
}

fn registered(db: &Db, spec: AnalysisSpec) -> Result<&'static dyn Registered, NodeError> {
    analyses::find(spec.name(db)).ok_or_else(|| {
        NodeError::from(anyhow::anyhow!(
            "unknown analysis {:?} (built in: {}; or the path of a script)",
            spec.name(db),
            analyses::builtin_names()
        ))
    })
}

/// Whether the output of a registered analysis is stored (computes nothing).
pub fn analysis_is_stored(db: &Db, run: Run, spec: AnalysisSpec) -> Result<bool> {
    let Some(a) = analyses::find(spec.name(db)) else {
        return Ok(false);
    };
    Ok(db.engine().is_stored(&analysis_node(db, run, spec, a)?))
}

/// Run one registered analysis.
#[salsa::tracked(returns(clone))]
pub fn analysis(db: &dyn Graph, run: Run, spec: AnalysisSpec) -> NodeResult<AnalysisOutput> {
    let db = db.db();
    let a = registered(db, spec)?;
    let node = analysis_node(db, run, spec, a)?;
    let (key, value) = fail(a.output(db.engine(), &node, &RunView { db, run }))?;
    Ok(Out { key, value })
}

/// Run an external analysis script on the run's inputs (memoised on the script's content,
/// its arguments and the input archives' keys).
#[salsa::tracked(returns(clone))]
pub fn script_analysis(
    db: &dyn Graph,
    run: Run,
    spec: ScriptSpec,
) -> NodeResult<analyses::external::ScriptOutput> {
    let db = db.db();
    let mut archives: Vec<InputArchive> = Vec::new();
    for &p in run.processes(db) {
        if !archives.contains(&p.archive(db)) {
            archives.push(p.archive(db));
        }
    }
    let mut inputs = Vec::new();
    for a in &archives {
        inputs.push(a.file_key(db));
        if db.ctx.archive(a.index(db)).is_capture() {
            // What the script sees of a capture also depends on the nsys that exports it.
            inputs.push(member_keys(db, *a)?.key);
        }
    }
    let name = analyses::external::script_name(spec.path(db));
    let node = ScriptNode {
        kind: ANALYSIS_SCRIPT.kind(&name),
        script: spec.script_key(db),
        args: serde_json::to_string(spec.args(db)).unwrap_or_default(),
        inputs,
    };
    let (key, value) = fail(db.engine().compute(&node, "", || {
        let tmp = crate::tmpfiles::ScratchDir::new("script")?;
        // A capture is shown to the script as the archive it makes.
        let mut opened: Vec<Arc<Archive>> = Vec::new();
        for (i, a) in archives.iter().enumerate() {
            let archive = db.ctx.archive(a.index(db));
            if !archive.is_capture() {
                opened.push(archive);
                continue;
            }
            let p = *run
                .processes(db)
                .iter()
                .find(|p| p.archive(db) == *a)
                .expect("every archive has a process");
            let contents = archive_contents(db, p, true)?;
            let stem = archive
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| format!("capture{i}"));
            let dir = tmp.path().join("captures").join(&stem);
            crate::formats::archive_writer::write_dir(&contents.entries, &dir)?;
            opened.push(Arc::new(Archive::open(&dir)?));
        }
        let refs: Vec<&Archive> = opened.iter().map(|a| a.as_ref()).collect();
        let folder = analyses::external::materialize(&refs, &tmp.path().join("archive"))?;
        analyses::external::run_script(spec.path(db), spec.args(db), &folder)
    }))?;
    Ok(Out { key, value })
}

/// A run's shares, as a reduce reads them.
pub struct RunView<'a> {
    pub db: &'a Db,
    pub run: Run,
}

impl RunShares for RunView<'_> {
    fn processes(&self) -> usize {
        self.run.processes(self.db).len()
    }

    fn share(&self, share: &dyn AnyShare, param: &str, i: usize) -> Result<AnyValue> {
        let p = self.run.processes(self.db)[i];
        Ok(share_any(self.db, self.run, p, share, param)?.1)
    }

    fn group_sums(&self, share: &dyn AnyShare) -> Result<Vec<AnyValue>> {
        let groups = self.processes().div_ceil(GROUP);
        (0..groups)
            .map(|g| {
                group_sum(self.db, self.run, share, g)?.ok_or_else(|| {
                    anyhow::anyhow!("share {} does not add up (a bug)", share.kind())
                })
            })
            .collect()
    }

    fn upstream(&self, name: &str, params: &str) -> Result<Arc<AnalysisOutput>> {
        let a = crate::analyses::find(name)
            .ok_or_else(|| anyhow::anyhow!("no built-in analysis {name} (a bug)"))?;
        let node = analysis_node_of(self.db, self.run, a, params)?;
        Ok(a.output(self.db.engine(), &node, self)?.1)
    }
}
