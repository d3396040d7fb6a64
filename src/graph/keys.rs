//! Every kind of node the graph computes, declared once: a type holding what the node's key
//! is made of, with its value type, its name, the source files of its version and how its
//! values are kept ([`crate::engine::Node`]). The per-process shares of the analyses and
//! their group sums are the generic kinds of [`crate::analyses::share`]; the capture's
//! nodes are declared in [`crate::capture`].

use crate::analyses::external::ScriptOutput;
use crate::engine::value::{Bytes, Files, Tables};
use crate::engine::{Keep, Key, KeyBuilder, Node, kinds, node_kind};
use crate::formats::archive::keys::MemberKeys;
use crate::formats::hlo::{HloModuleInfo, HloSchema};
use std::sync::Arc;

use crate::frames::facts::{CompiledNames, ProcessFacts, WarmupContext};

/// A key standing for "none" among a node's inputs (no compile frame, no GPU frames).
pub const NONE: Key = Key([0; 32]);

/// The content keys of every member of a zip archive (a folder's members are keyed file by
/// file, without a node).
pub struct MemberKeysNode {
    pub file: Key,
}
node_kind!(MemberKeysNode, kinds::MEMBER_KEYS, Stored, MemberKeys);
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
node_kind!(ProtosNode, kinds::PROTOS, Stored, Bytes);
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
node_kind!(HloSchemaNode, kinds::HLO_SCHEMA, Transient, HloSchema);
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
    kinds::HLO_MODULE,
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
    kinds::PROGRAMS,
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
node_kind!(SourceNamesNode, kinds::SOURCE_NAMES, Stored, Vec<String>);
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
    /// The copies and sets outside CUDA graphs (None when the input has none).
    pub transfers: Option<Key>,
    /// The program's own NVTX ranges and marks (None when the input has none).
    pub user_nvtx: Option<Key>,
    /// The memory allocations and frees over time (None when the input has none).
    pub memory_usage: Option<Key>,
}
node_kind!(GpuFramesNode, kinds::GPU_FRAMES, Volatile, Tables);
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
            .input(&self.transfers.unwrap_or(NONE))
            .input(&self.user_nvtx.unwrap_or(NONE))
            .input(&self.memory_usage.unwrap_or(NONE))
    }
}

/// Whether a process's GPU frames have rows whose device only its position in the run can
/// give (see `graph::frames::gpu_frames`).
pub struct UnplacedNode {
    pub gpu_frames: Key,
}
node_kind!(UnplacedNode, kinds::UNPLACED, Stored, bool);
impl UnplacedNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.gpu_frames)
    }
}

/// The compile frame of one process, from its push/pop ranges.
pub struct CompileFrameNode {
    pub pushpop: Key,
}
node_kind!(CompileFrameNode, kinds::COMPILE_FRAME, Volatile, Tables);
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
    kinds::COMPILED_NAMES,
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
    kinds::COMPILED_PROGRAMS,
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
node_kind!(ProcessFactsNode, kinds::PROCESS_FACTS, Stored, ProcessFacts);
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
    kinds::WARMUP_CONTEXT,
    Stored,
    WarmupContext
);
impl WarmupContextNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.inputs(self.inputs.iter())
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
    fn roots(&self) -> Vec<&'static str> {
        kinds::ANALYSIS_SCRIPT.roots.to_vec()
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
node_kind!(ReportNode, kinds::HTML_REPORT, Stored, Bytes);
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
node_kind!(PandasFramesNode, kinds::PANDAS_FRAMES, Stored, Files);
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
