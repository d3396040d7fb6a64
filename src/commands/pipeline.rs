//! Pipeline files (`pipelines/*.toml`): which analyses to run, with their parameters.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

const DEFAULT: &str = include_str!("../../pipelines/default.toml");

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    analysis: Vec<Entry>,
    /// Settings of `compare` (see [`crate::compare::SettingsFile`]).
    compare: Option<crate::compare::SettingsFile>,
}

#[derive(Deserialize, Debug, Clone)]
struct Entry {
    name: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(flatten)]
    params: BTreeMap<String, toml::Value>,
}

/// One analysis to run.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisRequest {
    /// A built-in analysis name, or the path of an external script.
    pub name: String,
    /// Extra arguments (external scripts).
    pub args: Vec<String>,
    /// Canonical JSON of the parameters (sorted keys).
    pub params: String,
}

impl AnalysisRequest {
    /// A script, or a built-in analysis with its default parameters.
    pub fn new(name: &str, args: Vec<String>) -> AnalysisRequest {
        let params = crate::analyses::find(name)
            .and_then(|b| b.canonical_params(&serde_json::json!({})).ok())
            .unwrap_or_else(|| "{}".into());
        AnalysisRequest {
            name: name.to_string(),
            args,
            params,
        }
    }

    /// An analysis named on the command line with its `--analysis-arg`s: a built-in one
    /// takes them as `KEY=VALUE` parameters, checked against its parameter type; a script
    /// gets them as its arguments.
    pub fn from_command_line(name: &str, args: Vec<String>) -> Result<AnalysisRequest> {
        let Some(b) = crate::analyses::find(name) else {
            return Ok(AnalysisRequest::new(name, args));
        };
        let mut params = serde_json::Map::new();
        for a in &args {
            let Some((k, v)) = crate::analyses::parse_param(a) else {
                bail!(
                    "--analysis-arg {a}: the built-in analysis {name} takes parameters as KEY=VALUE"
                );
            };
            params.insert(k, v);
        }
        let params = b
            .canonical_params(&serde_json::Value::Object(params))
            .map_err(|e| anyhow::anyhow!("--analysis-arg for analysis {name}: {e}"))?;
        Ok(AnalysisRequest {
            name: name.to_string(),
            args: vec![],
            params,
        })
    }

    /// Whether `name` refers to a script file rather than a built-in analysis.
    pub fn is_script(&self) -> bool {
        self.name.contains('/') || self.name.ends_with(".py") || Path::new(&self.name).is_file()
    }
}

fn parse(text: &str, origin: &str) -> Result<Vec<AnalysisRequest>> {
    let f: File = toml::from_str(text).map_err(|e| anyhow::anyhow!("{origin}: {}", e.message()))?;
    if f.analysis.is_empty() {
        bail!("{origin}: no [[analysis]] entries");
    }
    f.analysis
        .into_iter()
        .map(|e| {
            let params: BTreeMap<String, serde_json::Value> = e
                .params
                .into_iter()
                .map(|(k, v)| Ok((k, serde_json::to_value(v)?)))
                .collect::<Result<_>>()?;
            let params = match crate::analyses::find(&e.name) {
                Some(b) => {
                    if !e.args.is_empty() {
                        bail!(
                            "{origin}: analysis {}: `args` are for scripts; a built-in analysis takes its parameters as keys",
                            e.name
                        );
                    }
                    b.canonical_params(&serde_json::to_value(&params)?)
                        .map_err(|m| anyhow::anyhow!("{origin}: analysis {}: {m}", e.name))?
                }
                None => serde_json::to_string(&params)?,
            };
            Ok(AnalysisRequest {
                name: e.name,
                args: e.args,
                params,
            })
        })
        .collect()
}

/// The `[compare]` table of a pipeline file, if it has one.
pub fn compare_settings(path: &Path) -> Result<Option<crate::compare::SettingsFile>> {
    crate::formats::archive::ensure_regular(path, "a pipeline file")?;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read pipeline file", path.display()))?;
    let f: File = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?;
    Ok(f.compare)
}

pub fn load(path: &Path) -> Result<Vec<AnalysisRequest>> {
    crate::formats::archive::ensure_regular(path, "a pipeline file")?;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read pipeline file", path.display()))?;
    parse(&text, &path.display().to_string())
}

pub fn default_pipeline() -> Vec<AnalysisRequest> {
    parse(DEFAULT, "pipelines/default.toml").expect("the default pipeline parses")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_params() {
        let d = default_pipeline();
        let names: Vec<&str> = d.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "summary",
                "provenance",
                "communication",
                "stragglers",
                "compilation",
                "ops",
                "sources",
                "memory",
                "roofline",
                "ranges",
                "diagnose",
                "whatif"
            ]
        );
        assert_eq!(d[4].params, r#"{"detail":false}"#);
        let p = parse("[[analysis]]\nname='x.py'\nargs=['--a']\nz=1\na='b'\n", "t").unwrap();
        assert_eq!(p[0].params, r#"{"a":"b","z":1}"#);
        assert!(p[0].is_script());
        assert!(
            parse("nonsense = [", "t")
                .unwrap_err()
                .to_string()
                .starts_with("t: ")
        );
        assert!(parse("", "t").is_err());
        // A misspelt or ill-typed parameter of a built-in analysis names the file, the
        // analysis and the key.
        let e = parse("[[analysis]]\nname='compilation'\ndetial=true\n", "p.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.toml: analysis compilation: ") && e.contains("detial"),
            "{e}"
        );
        assert!(parse("[[analysis]]\nname='compilation'\ndetail='yes'\n", "p.toml").is_err());
        assert!(parse("[[analysis]]\nname='summary'\nx=1\n", "p.toml").is_err());
        let r =
            AnalysisRequest::from_command_line("compilation", vec!["detail=true".into()]).unwrap();
        assert_eq!((r.params.as_str(), r.args.len()), (r#"{"detail":true}"#, 0));
        assert!(
            AnalysisRequest::from_command_line("compilation", vec!["detial=1".into()]).is_err()
        );
        assert!(AnalysisRequest::from_command_line("compilation", vec!["--x".into()]).is_err());
        let s = AnalysisRequest::from_command_line("x.py", vec!["--x".into()]).unwrap();
        assert_eq!(s.args, ["--x"]);
    }
}
