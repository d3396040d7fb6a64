//! Analyses: one file per analysis, each implementing [`Analysis`] (its name, typed
//! parameters, the per-process [`Share`]s it reads, its reduce, terminal text and files), and
//! the [`REGISTRY`] of the built-in ones ([`registry`]: the one file that names them all, so
//! that an analysis's version reaches its own code and not the others'). The graph runs any
//! registered analysis the same way; no other module names one.
pub mod communication;
pub mod compilation;
pub mod diagnose;
pub mod diagnose_rules;
pub mod external;
pub mod headline;
pub mod memory;
pub mod memory_timeline;
pub mod op_times;
pub mod ops;
mod output;
pub mod pgle;
pub mod provenance;
pub mod range_sums;
pub mod ranges;
pub mod registry;
pub mod roofline;
pub mod roofline_flops;
pub mod roofline_model;
pub mod share;
pub mod sources;
pub mod steady_copies;
pub mod stragglers;
pub mod summary;
pub mod thunks;
#[cfg(test)]
mod toy;
pub mod whatif;
pub mod whatif_edges;
pub mod whatif_model;
pub mod whatif_path;
pub mod whatif_result;
pub mod whatif_scenarios;
pub mod whatif_user;

use crate::engine::kinds::family;
use crate::engine::value::Text;
use crate::engine::{Engine, Keep, Key, KeyBuilder, Node};
use crate::report::Section;
use anyhow::{Result, anyhow};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use output::AnalysisOutput;
pub use registry::{REGISTRY, builtin_names, find};
pub use share::{AnyShare, ProcessView, Reads, RunShares, Share};

family!(
    /// The output of a registered analysis: `analysis:<name>`, with the analysis's file
    /// and its shares' files.
    ANALYSIS = "analysis:"
);

/// An analysis: a reduce over the per-process [`Share`]s it reads, its terminal text and
/// its output files.
pub trait Analysis: Sync + 'static {
    /// The name pipelines and command lines use.
    const NAME: &'static str;
    /// The file implementing it (`file!()`): its version is that of the code this file
    /// reaches, with its shares' and the registry's analysis code.
    const FILE: &'static str;
    /// Its parameters: unknown keys are refused (`#[serde(deny_unknown_fields)]`), missing
    /// ones take their defaults.
    type Params: Serialize + DeserializeOwned + Default;
    /// What it finds, as its JSON file holds it.
    type Result: Serialize + DeserializeOwned;

    /// The shares the reduce reads with these parameters (computed for every process, in
    /// parallel, before the reduce).
    fn shares(&self, params: &Self::Params) -> Vec<ShareUse>;
    /// The other analyses whose outputs the reduce reads ([`RunShares::upstream`]), with
    /// their parameters: none unless it says otherwise. Their shares are computed with this
    /// analysis's, and their outputs and code are part of its key.
    fn upstream(&self, params: &Self::Params) -> Vec<Upstream> {
        let _ = params;
        Vec::new()
    }
    /// Whether its text and report sections go before the other analyses' (a summary of
    /// them).
    const LEADS: bool = false;
    fn reduce(&self, run: &dyn RunShares, params: &Self::Params) -> Result<Reduced<Self::Result>>;
    fn render(&self, result: &Self::Result) -> String;
    /// Its sections of the HTML report (`crate::report`), drawn from its result; none unless
    /// it says otherwise. The notes of its reduce are listed at the top of the first.
    fn sections(&self, result: &Self::Result) -> Result<Vec<Section>> {
        let _ = result;
        Ok(Vec::new())
    }
    /// Its files, written under the output folder: `<name>.json` unless it says otherwise.
    fn files(&self, result: &Self::Result) -> Result<Vec<(String, String)>> {
        Ok(vec![(
            format!("{}.json", Self::NAME),
            serde_json::to_string_pretty(result)?,
        )])
    }
    /// Its result read back from the files [`Analysis::files`] wrote (`<name>.json` unless
    /// it says otherwise): how another analysis reads this one's output, typed.
    fn result_of(&self, files: &[(String, Text)]) -> Result<Self::Result> {
        json_file(&format!("{}.json", Self::NAME), files)
    }
}

/// The result of the upstream analysis `a` on `run` with these parameters (one the asking
/// analysis names in its [`Analysis::upstream`]), read back typed from its files.
pub fn upstream_result<A: Analysis>(
    run: &dyn RunShares,
    a: &A,
    params: &A::Params,
) -> Result<A::Result> {
    let out = run.upstream(A::NAME, &serde_json::to_string(params)?)?;
    a.result_of(&out.files)
}

/// [`upstream_result`], or None and a note naming the analysis, what failed and `then` (what
/// the reader does without it).
pub fn upstream_or_note<A: Analysis>(
    run: &dyn RunShares,
    a: &A,
    params: &A::Params,
    then: &str,
    notes: &mut Vec<String>,
) -> Option<A::Result> {
    upstream_result(run, a, params)
        .map_err(|e| {
            notes.push(format!(
                "{}: {} ({then})",
                A::NAME,
                crate::error::one_line(&e)
            ))
        })
        .ok()
}

/// The result in the JSON file `file` among an analysis's files.
pub fn json_file<R: DeserializeOwned>(file: &str, files: &[(String, Text)]) -> Result<R> {
    let (_, text) = files
        .iter()
        .find(|(n, _)| n == file)
        .ok_or_else(|| anyhow!("no {file} among the analysis's files"))?;
    serde_json::from_str(text.as_str()).map_err(|e| anyhow!("{file}: {e}"))
}

/// The width analyses keep their terminal text within.
pub const TEXT_WIDTH: usize = 100;

/// What a reduce finds, and the notes to print before its table.
pub struct Reduced<R> {
    pub result: R,
    pub notes: Vec<String>,
}

/// One share an analysis reads, with its parameters (canonical JSON).
pub struct ShareUse {
    pub share: &'static dyn AnyShare,
    pub param: String,
}

impl ShareUse {
    pub fn of<S: Share>(share: &'static S, param: &S::Param) -> ShareUse {
        ShareUse {
            share,
            param: serde_json::to_string(param).expect("plain parameters"),
        }
    }
}

/// An analysis whose output another reads, with its parameters (canonical JSON).
pub struct Upstream {
    pub analysis: &'static dyn Registered,
    pub params: String,
}

impl Upstream {
    /// `analysis` with these parameters (its defaults for the keys they lack).
    pub fn of(analysis: &'static dyn Registered, params: serde_json::Value) -> Upstream {
        let params = analysis
            .canonical_params(&params)
            .expect("an analysis's own parameters for another are valid");
        Upstream { analysis, params }
    }
}

/// An analysis with its types erased, as the registry holds it and the graph runs it.
pub trait Registered: Sync {
    fn name(&self) -> &'static str;
    /// The files implementing it and every share it may read (the version of its outputs).
    fn roots(&self) -> Vec<&'static str>;
    /// Check parameters (a JSON object) against the parameter type and write them
    /// canonically (every key, defaults filled in); the error names the key and the problem.
    fn canonical_params(&self, params: &serde_json::Value) -> Result<String, String>;
    /// The shares it reads with these (canonical) parameters, its upstream analyses' with
    /// its own.
    fn shares(&self, params: &str) -> Result<Vec<ShareUse>>;
    /// The analyses whose outputs it reads ([`Analysis::upstream`]).
    fn upstream(&self, params: &str) -> Result<Vec<Upstream>>;
    /// Whether its text and sections go first ([`Analysis::LEADS`]).
    fn leads(&self) -> bool;
    /// Its files written again from the result read back from them ([`Analysis::result_of`]):
    /// the same files when its output reads back whole.
    fn rewritten(&self, files: &[(String, Text)]) -> Result<Vec<(String, String)>>;
    /// Reduce and render.
    fn run(&self, run: &dyn RunShares, params: &str) -> Result<AnalysisOutput>;
    /// The stored output of `node`, or the one [`Registered::run`] computes, then stored.
    fn output(
        &self,
        engine: &Engine,
        node: &AnalysisNode,
        run: &dyn RunShares,
    ) -> Result<(Key, std::sync::Arc<AnalysisOutput>)> {
        engine.compute(node, "", || self.run(run, &node.params))
    }
}

/// The output of a registered analysis on a run: keyed by its parameters and, per process,
/// the frames its shares read and the programs compiled in the run.
pub struct AnalysisNode {
    /// `analysis:<name>`.
    pub kind: String,
    /// The files implementing the analysis and its shares ([`Registered::roots`]).
    pub roots: Vec<&'static str>,
    pub params: String,
    pub inputs: Vec<Key>,
}

impl Node for AnalysisNode {
    type Value = AnalysisOutput;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        &self.kind
    }
    fn roots(&self) -> Vec<&'static str> {
        self.roots.clone()
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.param("params", &self.params).inputs(self.inputs.iter())
    }
}

fn typed<P: DeserializeOwned>(name: &str, params: &str) -> Result<P> {
    serde_json::from_str(params).map_err(|e| anyhow!("analysis {name}: {e}"))
}

impl<A: Analysis> Registered for A {
    fn name(&self) -> &'static str {
        A::NAME
    }
    fn roots(&self) -> Vec<&'static str> {
        let mut s: Vec<&'static str> = vec![A::FILE];
        let defaults = self
            .canonical_params(&serde_json::json!({}))
            .unwrap_or_default();
        for u in Registered::shares(self, &defaults).unwrap_or_default() {
            s.extend(u.share.roots());
        }
        for u in Registered::upstream(self, &defaults).unwrap_or_default() {
            s.extend(u.analysis.roots());
        }
        s.sort_unstable();
        s.dedup();
        ANALYSIS.roots_with(&s)
    }
    fn canonical_params(&self, params: &serde_json::Value) -> Result<String, String> {
        let p: A::Params = serde_json::from_value(params.clone()).map_err(|e| e.to_string())?;
        serde_json::to_string(&p).map_err(|e| e.to_string())
    }
    fn shares(&self, params: &str) -> Result<Vec<ShareUse>> {
        let typed = typed::<A::Params>(A::NAME, params)?;
        let mut uses = Analysis::shares(self, &typed);
        for u in Analysis::upstream(self, &typed) {
            uses.extend(u.analysis.shares(&u.params)?);
        }
        Ok(uses)
    }
    fn upstream(&self, params: &str) -> Result<Vec<Upstream>> {
        Ok(Analysis::upstream(
            self,
            &typed::<A::Params>(A::NAME, params)?,
        ))
    }
    fn leads(&self) -> bool {
        A::LEADS
    }
    fn rewritten(&self, files: &[(String, Text)]) -> Result<Vec<(String, String)>> {
        self.files(&self.result_of(files)?)
    }
    fn run(&self, run: &dyn RunShares, params: &str) -> Result<AnalysisOutput> {
        let r = self.reduce(run, &typed::<A::Params>(A::NAME, params)?)?;
        let mut text = String::new();
        for n in &r.notes {
            text.push_str(&crate::units::wrap(&format!("note: {n}"), TEXT_WIDTH, 6));
            text.push('\n');
        }
        text.push_str(&self.render(&r.result));
        let mut sections = self.sections(&r.result)?;
        if let Some(first) = sections.first_mut()
            && !r.notes.is_empty()
        {
            let mut notes = Section::new("", "");
            notes.notes(&r.notes);
            first.html.insert_str(0, &notes.html);
        }
        Ok(AnalysisOutput {
            name: A::NAME.to_string(),
            files: self
                .files(&r.result)?
                .into_iter()
                .map(|(n, c)| (n, c.into()))
                .collect(),
            text,
            sections,
        })
    }
}

/// The parameters of an analysis that takes none.
#[derive(Serialize, Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A parameter given on the command line as `KEY=VALUE`: `true`/`false`, a number, or text.
pub fn parse_param(arg: &str) -> Option<(String, serde_json::Value)> {
    let (k, v) = arg.split_once('=')?;
    let k = k.trim();
    if k.is_empty() {
        return None;
    }
    let v = v.trim();
    let value = match v {
        "true" => serde_json::Value::Bool(true),
        "false" => serde_json::Value::Bool(false),
        _ => match v.parse::<i64>() {
            Ok(n) => n.into(),
            Err(_) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() => x.into(),
                _ => serde_json::Value::String(v.to_string()),
            },
        },
    };
    Some((k.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_typed() {
        let c = find("compilation").unwrap();
        assert_eq!(
            c.canonical_params(&serde_json::json!({"detail": true})),
            Ok(r#"{"detail":true}"#.to_string())
        );
        // Defaults are written out: equal parameters, equal keys.
        assert_eq!(
            c.canonical_params(&serde_json::json!({})),
            Ok(r#"{"detail":false}"#.to_string())
        );
        let e = c
            .canonical_params(&serde_json::json!({"detial": true}))
            .unwrap_err();
        assert!(e.contains("detial"), "{e}");
        let e = c
            .canonical_params(&serde_json::json!({"detail": "yes"}))
            .unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        let s = find("summary").unwrap();
        assert!(s.canonical_params(&serde_json::json!({"x": 1})).is_err());
        assert!(find("nope").is_none());
        // Names are unique.
        let mut names: Vec<&str> = REGISTRY.iter().map(|a| a.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        assert_eq!(
            parse_param("detail=true"),
            Some(("detail".into(), true.into()))
        );
        assert_eq!(parse_param("n=3"), Some(("n".into(), 3.into())));
        assert_eq!(parse_param("s=abc"), Some(("s".into(), "abc".into())));
        assert_eq!(parse_param("--flag"), None);
    }
}
