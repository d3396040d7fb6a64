//! The report's first section: what was profiled, on what. The graph gathers the facts
//! ([`RunOverview`]); this draws them.

use super::Section;
use crate::units::duration_ns;
use std::collections::BTreeMap;

/// System entries the overview shows, when the profile has them.
pub const SYSTEM_SHOWN: &[&str] = &["Hostname", "NvDriverVersion", "CudaDriverVersion", "OsName"];

/// A [`SYSTEM_SHOWN`] entry as people name it.
fn human(entry: &str) -> &str {
    match entry {
        "Hostname" => "Host",
        "NvDriverVersion" => "NVIDIA driver",
        "CudaDriverVersion" => "CUDA (driver)",
        "OsName" => "Operating system",
        other => other,
    }
}

/// A [`SYSTEM_SHOWN`] value as people write it (`13000` → `13.0` for the CUDA driver).
fn human_value(entry: &str, v: &str) -> String {
    match v.parse::<u32>() {
        Ok(n) if entry == "CudaDriverVersion" && n >= 1000 => {
            format!("{}.{}", n / 1000, (n % 1000) / 10)
        }
        _ => v.to_string(),
    }
}

/// What the overview says of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOverview {
    /// The input files, each once.
    pub inputs: Vec<String>,
    /// The processes' labels.
    pub processes: Vec<String>,
    /// Devices with XLA module executions, summed over processes, and those executions.
    pub devices: usize,
    pub executions: u64,
    /// The longest span, over processes, from the first module start to the last module end.
    pub longest_span_ns: Option<i64>,
    /// GPUs as the profiles list them, with how many.
    pub gpus: BTreeMap<String, usize>,
    /// The [`SYSTEM_SHOWN`] entries found, each with its distinct values.
    pub system: BTreeMap<String, Vec<String>>,
    /// The analyses shown, in order.
    pub analyses: Vec<String>,
}

/// The `overview` section.
pub fn section(o: &RunOverview) -> Section {
    let mut facts: Vec<(String, String)> = Vec::new();
    facts.push(("Inputs".into(), o.inputs.join(", ")));
    let labels = &o.processes;
    facts.push((
        "Processes".into(),
        if labels.len() <= 16 {
            format!("{}: {}", labels.len(), labels.join(", "))
        } else {
            labels.len().to_string()
        },
    ));
    facts.push((
        "Devices".into(),
        format!(
            "{} with XLA module executions ({} executions)",
            o.devices, o.executions
        ),
    ));
    // The devices each process's profile lists, summed over the processes (Provenance
    // lists what the machine had, which can be more than a process sees).
    let listed: usize = o.gpus.values().sum();
    facts.push((
        "GPUs the processes used".into(),
        if o.gpus.is_empty() {
            "not recorded".into()
        } else {
            let each = if labels.len() > 1 && listed % labels.len() == 0 {
                format!(" ({} per process)", listed / labels.len())
            } else {
                String::new()
            };
            o.gpus
                .iter()
                .map(|(n, k)| format!("{k} × {n}"))
                .collect::<Vec<_>>()
                .join(", ")
                + &each
        },
    ));
    facts.push((
        "Module activity".into(),
        match o.longest_span_ns {
            Some(ns) => format!(
                "{} from the first module start to the last module end (longest over processes)",
                duration_ns(ns as f64)
            ),
            None => "no module executions".into(),
        },
    ));
    for name in SYSTEM_SHOWN {
        if let Some(v) = o.system.get(*name) {
            let values: Vec<String> = v.iter().map(|x| human_value(name, x)).collect();
            facts.push((human(name).to_string(), values.join(", ")));
        }
    }
    facts.push(("Analyses".into(), o.analyses.join(", ")));
    let mut sec = Section::new("overview", "Overview");
    sec.raw(&super::facts_list(&facts));
    sec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_processes_are_counted_and_missing_facts_said() {
        let o = RunOverview {
            inputs: vec!["a.zip".into()],
            processes: (0..17).map(|i| format!("p{i}")).collect(),
            analyses: vec!["summary".into()],
            ..Default::default()
        };
        let html = section(&o).html;
        assert!(html.contains("<dd>17</dd>"), "{html}");
        assert!(html.contains("<dd>not recorded</dd>"), "{html}");
        assert!(html.contains("<dd>no module executions</dd>"), "{html}");
        assert!(!html.contains("Hostname"), "{html}");
    }
}
