//! Every kind of node the graph computes, declared once: a type holding what the node's key
//! is made of, with its value type, its name, the source files of its version and how its
//! values are kept ([`crate::engine::Node`]). The per-process shares of the analyses and
//! their group sums are the generic kinds of [`crate::analyses::share`]; the capture's
//! nodes are declared in [`crate::capture`].

use crate::analyses::AnalysisOutput;
use crate::analyses::external::ScriptOutput;
use crate::engine::value::{Bytes, Files, Tables};
use crate::engine::{Keep, Key, KeyBuilder, Node, node_kind};
use crate::formats::archive::MemberKeys;
use crate::formats::hlo::{HloModuleInfo, HloSchema};
use std::sync::Arc;

use super::frames::{CompiledNames, ProcessFacts, WarmupContext};

/// A key standing for "none" among a node's inputs (no compile frame, no GPU frames).
pub const NONE: Key = Key([0; 32]);

/// The content keys of every member of a zip archive (a folder's members are keyed file by
/// file, without a node).
pub struct MemberKeysNode {
    pub file: Key,
}
node_kind!(
    MemberKeysNode,
    "member-keys",
    ["formats/archive.rs"],
    Stored,
    MemberKeys
);
impl MemberKeysNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.file)
    }
}

/// The compiled protobuf schema that decodes a process's HLO dumps, from the `.proto` files
/// (path, content or content key).
pub struct ProtosNode {
    pub files: Vec<(String, Vec<u8>)>,
}
node_kind!(ProtosNode, "protos", ["formats/hlo/"], Stored, Bytes);
impl ProtosNode {
    fn feed(&self, mut kb: KeyBuilder) -> KeyBuilder {
        for (p, c) in &self.files {
            kb = kb.param(p, c);
        }
        kb
    }
}

/// The decoding plan of a compiled schema.
pub struct HloSchemaNode {
    pub protos: Key,
}
node_kind!(
    HloSchemaNode,
    "hlo-schema",
    ["formats/hlo/"],
    Transient,
    HloSchema
);
impl HloSchemaNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.protos)
    }
}

/// One decoded dump file, keyed by its content and the schema: a module dumped identically
/// by many ranks is decoded once. Decoding is faster than storing and re-reading the decoded
/// form, so it is kept in memory only; what is built from it is stored.
pub struct HloModuleNode {
    pub schema: Key,
    pub content: Key,
    /// The module's memory usage report.
    pub report: Option<Key>,
}
node_kind!(
    HloModuleNode,
    "hlo-module",
    ["formats/hlo/", "graph/hlo.rs"],
    Transient,
    std::sync::Arc<HloModuleInfo>
);
impl HloModuleNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.schema)
            .input(&self.content)
            .input(&self.report.unwrap_or(NONE))
    }
}

/// The decoded after-optimizations HLO of every module a process dumped (memoised by salsa;
/// its key is an input of what is built from the programs).
pub struct ProgramsNode {
    pub schema: Key,
    pub members: Vec<Key>,
}
node_kind!(
    ProgramsNode,
    "hlo",
    ["formats/hlo/", "graph/hlo.rs"],
    Transient,
    Vec<Arc<HloModuleInfo>>
);
impl ProgramsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.schema).inputs(self.members.iter())
    }
}

/// The file names of a process's HLO stack frames, sorted and distinct.
pub struct SourceNamesNode {
    pub programs: Key,
}
node_kind!(
    SourceNamesNode,
    "source-names",
    ["graph/hlo.rs"],
    Stored,
    Vec<String>
);
impl SourceNamesNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.programs)
    }
}

/// Module and thunk frames of one process, with the remarks made building them.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct GpuFramesNode {
    pub trace: Key,
    /// The graph operations member (None when the input has none).
    pub graph_ops: Option<Key>,
    /// The thunk metadata dumps.
    pub thunk_metadata: Vec<Key>,
    pub threads: Option<Key>,
    pub programs: Key,
}
node_kind!(
    GpuFramesNode,
    "gpu-frames",
    [
        "frames/gpu.rs",
        "frames/command_buffers.rs",
        "formats/trace.rs",
        "formats/graph_ops.rs",
        "formats/thunk_metadata.rs",
        "nvtx.rs"
    ],
    Volatile,
    Tables
);
impl GpuFramesNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.trace)
            .input(&self.graph_ops.unwrap_or(NONE))
            .param(
                "thunk-metadata",
                (self.thunk_metadata.len() as u64).to_le_bytes(),
            )
            .inputs(&self.thunk_metadata)
            .input(&self.threads.unwrap_or(NONE))
            .input(&self.programs)
    }
}

/// Whether a process's GPU frames have rows whose device only its position in the run can
/// give (see `graph::frames::gpu_frames`).
pub struct UnplacedNode {
    pub gpu_frames: Key,
}
node_kind!(
    UnplacedNode,
    "unplaced-devices",
    ["graph/frames.rs", "frames/gpu.rs", "frames/placement.rs"],
    Stored,
    bool
);
impl UnplacedNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.gpu_frames)
    }
}

/// The compile frame of one process, from its push/pop ranges.
pub struct CompileFrameNode {
    pub pushpop: Key,
}
node_kind!(
    CompileFrameNode,
    "compile-frame",
    ["frames/compile.rs", "formats/pushpop/"],
    Volatile,
    Tables
);
impl CompileFrameNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.pushpop)
    }
}

/// The (program id, module name) of each compilation in one process's compile frame.
pub struct CompiledNamesNode {
    pub compile_frame: Key,
}
node_kind!(
    CompiledNamesNode,
    "compiled-names",
    ["graph/frames.rs"],
    Stored,
    CompiledNames
);
impl CompiledNamesNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.compile_frame)
    }
}

/// Stable ids of the programs whose compilation one process's profile contains.
pub struct CompiledProgramsNode {
    pub compile_frame: Option<Key>,
    pub programs: Key,
}
node_kind!(
    CompiledProgramsNode,
    "compiled-programs",
    ["graph/frames.rs", "frames/gpu.rs"],
    Stored,
    Vec<String>
);
impl CompiledProgramsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.compile_frame.unwrap_or(NONE))
            .input(&self.programs)
    }
}

/// Whether one process communicates, and the programs it executes.
pub struct ProcessFactsNode {
    pub gpu_frames: Option<Key>,
}
node_kind!(
    ProcessFactsNode,
    "process-facts",
    ["graph/frames.rs", "frames/gpu.rs"],
    Stored,
    ProcessFacts
);
impl ProcessFactsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.gpu_frames.unwrap_or(NONE))
    }
}

/// What the warm-up split of every process of a run needs to know about the others, from
/// each process's facts and compiled programs (their keys, in process order).
pub struct WarmupContextNode {
    pub inputs: Vec<Key>,
}
node_kind!(
    WarmupContextNode,
    "warmup-context",
    ["graph/frames.rs"],
    Stored,
    WarmupContext
);
impl WarmupContextNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.inputs(self.inputs.iter())
    }
}

/// The output of a registered analysis on a run: keyed by its parameters and, per process,
/// the frames its shares read and the programs compiled in the run.
pub struct AnalysisNode {
    /// `analysis:<name>`.
    pub kind: String,
    /// The analysis's sources and those of its shares.
    pub sources: Vec<&'static str>,
    pub params: String,
    pub inputs: Vec<Key>,
}

impl Node for AnalysisNode {
    type Value = AnalysisOutput;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        &self.kind
    }
    fn sources(&self) -> &[&'static str] {
        &self.sources
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.param("params", &self.params).inputs(self.inputs.iter())
    }
}

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
    fn sources(&self) -> &[&'static str] {
        &["analyses/external.rs"]
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.script)
            .param("args", &self.args)
            .inputs(self.inputs.iter())
    }
}

/// The HTML report of a run: keyed by the analyses' outputs it shows and, for its overview,
/// each process's facts and each input's content.
pub struct ReportNode {
    pub title: String,
    pub outputs: Vec<Key>,
    pub facts: Vec<Key>,
    pub archives: Vec<Key>,
}
node_kind!(
    ReportNode,
    "html-report",
    [
        "graph/report.rs",
        "report/",
        "units.rs",
        "formats/metadata.rs"
    ],
    Stored,
    Bytes
);
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

/// The run's frames as parquet files shaped as nsys-jax's (`analyze --frames`): keyed by each
/// process's profile name, frames and decoded programs, in run order.
pub struct PandasFramesNode {
    pub processes: Vec<(String, Option<Key>, Option<Key>, Key)>,
}
node_kind!(
    PandasFramesNode,
    "pandas-frames",
    ["graph/export.rs", "frames/nsys_jax.rs", "formats/mod.rs"],
    Stored,
    Files
);
impl PandasFramesNode {
    fn feed(&self, mut kb: KeyBuilder) -> KeyBuilder {
        kb = kb.param("processes", self.processes.len().to_string());
        for (profile, gpu, compile, programs) in &self.processes {
            kb = kb
                .param("profile", profile)
                .input(&gpu.unwrap_or(NONE))
                .input(&compile.unwrap_or(NONE))
                .input(programs);
        }
        kb
    }
}
