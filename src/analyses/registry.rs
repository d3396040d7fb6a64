//! The built-in analyses, by name.

use super::{
    Registered, communication, compilation, diagnose, memory, ops, pgle, provenance, ranges,
    roofline, sources, stragglers, summary, whatif,
};

/// The built-in analyses. Adding one is a new file in this folder implementing [`super::Analysis`]
/// and a line here.
pub static REGISTRY: &[&dyn Registered] = &[
    &summary::SummaryAnalysis,
    &provenance::ProvenanceAnalysis,
    &communication::CommunicationAnalysis,
    &compilation::CompilationAnalysis,
    &stragglers::StragglersAnalysis,
    &ops::OpsAnalysis,
    &sources::SourcesAnalysis,
    &pgle::PgleAnalysis,
    &memory::MemoryAnalysis,
    &ranges::RangesAnalysis,
    &roofline::RooflineAnalysis,
    &diagnose::DiagnoseAnalysis,
    &whatif::WhatIfAnalysis,
    #[cfg(test)]
    &super::toy::ToyAnalysis,
];

/// The built-in analysis named `name`.
pub fn find(name: &str) -> Option<&'static dyn Registered> {
    REGISTRY.iter().copied().find(|a| a.name() == name)
}

/// The names of the built-in analyses, for messages.
pub fn builtin_names() -> String {
    REGISTRY
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::declared::DECLARED;
    use crate::engine::versions;
    use crate::testutil::{crate_files, crate_graph as graph};
    use modgraph::{Lock, ModGraph};
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Every kind of the catalogue and every analysis and share, with its files.
    fn every_kind() -> BTreeMap<String, Vec<&'static str>> {
        let mut out: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
        for (name, file, _) in DECLARED.iter().filter(|d| !d.2) {
            out.insert(name.to_string(), vec![*file]);
        }
        for a in REGISTRY {
            out.insert(
                format!("{}{}", super::super::ANALYSIS.prefix, a.name()),
                a.roots(),
            );
            for u in a
                .shares(&a.canonical_params(&serde_json::json!({})).unwrap())
                .unwrap()
            {
                out.insert(u.share.kind().to_string(), u.share.roots());
            }
        }
        out
    }

    fn versions_in(
        g: &ModGraph,
        kinds: &BTreeMap<String, Vec<&'static str>>,
    ) -> BTreeMap<String, String> {
        let lock = Lock::default();
        kinds
            .iter()
            .map(|(name, roots)| {
                let idx: Vec<usize> = roots.iter().map(|r| g.index(r).unwrap()).collect();
                (name.clone(), g.version(&idx, &lock, "toolchain"))
            })
            .collect()
    }

    #[test]
    fn kind_names_are_unique() {
        let mut names: Vec<String> = DECLARED
            .iter()
            .filter(|d| !d.2)
            .map(|d| d.0.to_string())
            .collect();
        // A share read by several analyses is one kind.
        let mut shares: BTreeSet<&str> = BTreeSet::new();
        for a in REGISTRY {
            names.push(format!("{}{}", super::super::ANALYSIS.prefix, a.name()));
            for u in a
                .shares(&a.canonical_params(&serde_json::json!({})).unwrap())
                .unwrap()
            {
                shares.insert(u.share.kind());
            }
        }
        for s in shares {
            names.extend([s.to_string(), format!("{s}-group")]);
        }
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "two kinds share a name: {names:?}");
    }

    #[test]
    fn the_built_table_is_the_module_graph_of_these_sources() {
        let files = crate_files();
        let g = graph(&files);
        let lock = Lock::parse(
            &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
                .unwrap(),
        );
        for (i, f) in g.files.iter().enumerate() {
            assert_eq!(
                g.version(&[i], &lock, versions::TOOLCHAIN),
                versions::of(&[f.as_str()]),
                "{f}: the build script and the module graph disagree"
            );
        }
    }

    /// The promise "edit one analysis, recompute only it", by construction: a shared table
    /// helper below the analyses that the summary and ops analyses call (their render's short
    /// ids) is edited in a copy of the sources; exactly the kinds whose code reaches it get
    /// new versions.
    #[test]
    fn an_edited_helper_changes_exactly_the_kinds_that_reach_it() {
        let files = crate_files();
        let before = graph(&files);
        let mut edited = crate_files();
        let summary = edited
            .iter_mut()
            .find(|f| f.path == "frames/program_ids.rs")
            .unwrap();
        let text = String::from_utf8(summary.bytes.clone()).unwrap();
        let at = text.find("fn tiny_id(").expect("the helper");
        let body = at + text[at..].find('{').unwrap() + 1;
        summary.bytes =
            format!("{}\n    let _edited = 1;{}", &text[..body], &text[body..]).into_bytes();
        let after = graph(&edited);
        let kinds = every_kind();
        let (v0, v1) = (versions_in(&before, &kinds), versions_in(&after, &kinds));
        let target = before.index("frames/program_ids.rs").unwrap();
        let reaching: BTreeSet<&String> = kinds
            .iter()
            .filter(|(_, roots)| {
                let idx: Vec<usize> = roots.iter().map(|r| before.index(r).unwrap()).collect();
                before.closure(&idx).contains(&target)
            })
            .map(|(k, _)| k)
            .collect();
        let changed: BTreeSet<&String> = kinds.keys().filter(|k| v0[*k] != v1[*k]).collect();
        assert_eq!(changed, reaching);
        // The ops and summary analyses reach it through their render's helper; the
        // communication analysis, the frames and the capture do not reach it at all.
        assert!(changed.contains(&"analysis:ops".to_string()), "{changed:?}");
        assert!(changed.contains(&"analysis:summary".to_string()));
        for unrelated in ["analysis:communication", "gpu-frames", "projection", "hlo"] {
            assert!(
                !changed.contains(&unrelated.to_string()),
                "{unrelated}: {changed:?}"
            );
        }
    }
}
