//! Every kind of node the graph computes or keys, in one table: its name (the suffix of its
//! store entries, the name `--explain` and `pipeline-run.json` show) and the files that
//! implement it. A kind's version is the version of all the code those files reach
//! ([`super::versions`], derived from the module graph at build time): no list of source
//! files is kept by hand, and the engine checks, each time it computes a node, that the file
//! computing it is reached from the kind's files ([`super::Engine::compute`]).
//!
//! Kinds named per analysis, share or comparison family are [`Family`]s: the analysis's or
//! share's own file is added to the family's files.
//!
//! This module imports nothing but the version table: key types and value types live with
//! the code that computes them.

use super::versions;

/// A kind of node.
#[derive(Debug)]
pub struct Kind {
    pub name: &'static str,
    /// The files implementing it, relative to `src/`.
    pub roots: &'static [&'static str],
}

impl Kind {
    /// The version of the kind's code.
    pub fn version(&self) -> String {
        versions::of(self.roots)
    }
}

/// Kinds named `<prefix><name>` (an analysis, a share, a comparison family), implemented by
/// the family's files and, where it has one, the member's own file.
#[derive(Debug)]
pub struct Family {
    pub prefix: &'static str,
    pub roots: &'static [&'static str],
}

impl Family {
    /// The kind of the family's member `name`.
    pub fn kind(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The family's files with `more` (as `file!()` gives them, or relative to `src/`).
    pub fn roots_with(&self, more: &[&'static str]) -> Vec<&'static str> {
        let more = more.iter().map(|f| f.strip_prefix("src/").unwrap_or(f));
        let mut r: Vec<&'static str> = self.roots.iter().copied().chain(more).collect();
        r.sort_unstable();
        r.dedup();
        r
    }
}

macro_rules! catalogue {
    (
        kinds { $($(#[$doc:meta])* $id:ident = $name:literal in [$($root:literal),+];)* }
        families { $($(#[$fdoc:meta])* $fid:ident = $prefix:literal in [$($froot:literal),+];)* }
    ) => {
        $($(#[$doc])* pub const $id: Kind = Kind { name: $name, roots: &[$($root),+] };)*
        $($(#[$fdoc])* pub const $fid: Family = Family { prefix: $prefix, roots: &[$($froot),+] };)*
        /// Every kind of a fixed name.
        #[cfg(test)]
        pub const KINDS: &[&Kind] = &[$(&$id),*];
        /// Every family of kinds.
        #[cfg(test)]
        pub const FAMILIES: &[&Family] = &[$(&$fid),*];
        // Every file named is a file of the crate (checked when the crate is built).
        const _: () = {
            $($(assert!(versions::has($root), concat!("no source file ", $root));)+)*
            $($(assert!(versions::has($froot), concat!("no source file ", $froot));)+)*
        };
    };
}

catalogue! {
    kinds {
        /// The content keys of every member of a zip archive.
        MEMBER_KEYS = "member-keys" in ["graph/members.rs"];
        /// The content key of the members a capture makes (a key, not a stored node).
        CAPTURE_MEMBERS = "capture-members" in ["graph/members.rs"];
        /// The key of a capture input (a report with its dump), or of an archive folder.
        CAPTURE = "capture" in ["graph/inputs.rs"];
        FOLDER = "folder" in ["graph/inputs.rs"];
        /// The compiled protobuf schema that decodes HLO dumps.
        PROTOS = "protos" in ["graph/hlo.rs"];
        /// The decoding plan of a compiled schema.
        HLO_SCHEMA = "hlo-schema" in ["graph/hlo.rs"];
        /// One decoded dump file.
        HLO_MODULE = "hlo-module" in ["graph/hlo.rs"];
        /// The decoded after-optimizations HLO of every module a process dumped.
        PROGRAMS = "hlo" in ["graph/hlo.rs"];
        /// The file names of a process's HLO stack frames.
        SOURCE_NAMES = "source-names" in ["graph/hlo.rs"];
        /// Module and thunk frames of one process.
        GPU_FRAMES = "gpu-frames" in ["graph/frames.rs"];
        /// The GPU frames as placed in a run (a key: the frames and the process's position).
        PLACED_GPU_FRAMES = "placed-gpu-frames" in ["graph/frames.rs"];
        /// Whether a process's GPU frames have rows only its position in the run can place.
        UNPLACED = "unplaced-devices" in ["graph/frames.rs"];
        /// The compile frame of one process.
        COMPILE_FRAME = "compile-frame" in ["graph/frames.rs"];
        /// The (program id, module name) of each compilation in a compile frame.
        COMPILED_NAMES = "compiled-names" in ["graph/frames.rs"];
        /// Stable ids of the programs a process's profile compiles.
        COMPILED_PROGRAMS = "compiled-programs" in ["graph/frames.rs"];
        /// Whether one process communicates, and the programs it executes.
        PROCESS_FACTS = "process-facts" in ["graph/frames.rs"];
        /// What the warm-up split of every process of a run needs to know of the others.
        WARMUP_CONTEXT = "warmup-context" in ["graph/frames.rs"];
        /// The HTML report of a run.
        HTML_REPORT = "html-report" in ["graph/report.rs"];
        /// A run's frames as parquet files shaped as nsys-jax's.
        PANDAS_FRAMES = "pandas-frames" in ["graph/export.rs"];
        /// The tables `nsys export` writes of a report.
        NSYS_EXPORT = "nsys-export" in ["capture/mod.rs"];
        /// The members derived from an export, by producer.
        PROJECTION = "projection" in ["capture/mod.rs"];
        PUSHPOP = "pushpop" in ["capture/mod.rs"];
        METADATA = "metadata" in ["capture/mod.rs"];
        USER_EVENTS = "user-events" in ["capture/mod.rs"];
        /// The key of one derived member (a key, not a stored node).
        DERIVED_MEMBER = "derived-member" in ["capture/mod.rs"];
        /// One dump file, xz-compressed.
        DUMP_XZ = "dump-xz" in ["capture/mod.rs"];
        /// The import errors a report records.
        IMPORT_DIAGNOSTICS = "import-diagnostics" in ["capture/import_check.rs"];
        /// The content key of an archive the writer would make (a key).
        ARCHIVE = "archive" in ["formats/archive_writer.rs"];
        /// The content key of an output file that is part of a stored value (a key).
        OUTPUT_FILE = "output-file" in ["commands/analysis.rs"];
        /// The HTML page of a comparison.
        COMPARE_HTML = "compare-html" in ["commands/compare/html.rs"];
    }
    families {
        /// The output of a registered analysis: `analysis:<name>`, with the analysis's file
        /// and its shares' files.
        ANALYSIS = "analysis:" in ["analyses/mod.rs"];
        /// The output of an analysis script: `analysis-script:<name>`.
        ANALYSIS_SCRIPT = "analysis-script:" in ["graph/analyses.rs"];
        /// One process's share of an analysis (named by the share), with the share's file;
        /// the sum of a group of them is `<share>-group`.
        SHARE = "" in ["analyses/share.rs"];
        /// The comparison of one family of metrics: `compare:<family>`.
        COMPARISON = "compare:" in ["commands/compare/mod.rs"];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_names_are_unique_and_apart_from_the_families() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a kind name is declared twice");
        for k in KINDS {
            for f in FAMILIES.iter().filter(|f| !f.prefix.is_empty()) {
                assert!(
                    !k.name.starts_with(f.prefix),
                    "{} looks like a member of {}",
                    k.name,
                    f.prefix
                );
            }
            assert!(
                !k.name.is_empty() && !k.name.contains(['/', ' ']),
                "{:?}",
                k.name
            );
        }
    }
}
