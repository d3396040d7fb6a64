//! The capture's node kinds, declared once: the export of a report, the members derived from
//! it, the compressed dump files and the import diagnostics a report records.

use crate::engine::value::{Bytes, Files, Tables, Value};
use crate::engine::{Keep, Key, KeyBuilder, Node, kinds, node_kind};
use crate::formats::archive::{
    DEVICE_METADATA, GRAPH_OPS, MEMORY_USAGE, PUSHPOP_PARQUET, SYSTEM_METADATA, THREAD_METADATA,
    TRACE, TRANSFERS, USER_NVTX,
};
use arrow::array::RecordBatch;
use std::sync::Mutex;

/// The tables `nsys export` writes of a report, by this nsys (its version key). Kept in
/// memory only, and only while the members derived from them are made (see
/// [`super::derive_all`]): the members are stored, writing the tables too (tens of megabytes)
/// cost a cold capture more than a later export of the same report would, and they are the
/// largest thing a capture's archive holds.
pub struct ExportNode {
    pub report: Key,
    pub nsys_version: Key,
}
node_kind!(ExportNode, kinds::NSYS_EXPORT, Held, Tables);
impl ExportNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.param("nsys-version", self.nsys_version.0)
            .input(&self.report)
    }
}

/// What builds a derived member from the export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Producer {
    /// NVTX ranges projected onto the GPU → the trace, and the operations of CUDA graph
    /// launches with their ranges.
    Projection,
    /// CPU push/pop ranges.
    Pushpop,
    /// Thread, system and device metadata.
    Metadata,
    /// The program's own NVTX ranges and marks, and its memory allocations over time.
    Events,
}

impl Producer {
    /// Every producer, in the order they are made.
    pub const ALL: [Producer; 4] = [
        Producer::Projection,
        Producer::Pushpop,
        Producer::Metadata,
        Producer::Events,
    ];

    /// The kind of the members it derives.
    pub fn kind(self) -> &'static kinds::Kind {
        match self {
            Producer::Projection => &kinds::PROJECTION,
            Producer::Pushpop => &kinds::PUSHPOP,
            Producer::Metadata => &kinds::METADATA,
            Producer::Events => &kinds::USER_EVENTS,
        }
    }

    /// The producer of a derived member (None for a member that is not derived).
    pub fn of(member: &str) -> Option<Producer> {
        match member {
            TRACE | GRAPH_OPS | TRANSFERS => Some(Producer::Projection),
            PUSHPOP_PARQUET => Some(Producer::Pushpop),
            THREAD_METADATA | SYSTEM_METADATA | DEVICE_METADATA => Some(Producer::Metadata),
            USER_NVTX | MEMORY_USAGE => Some(Producer::Events),
            _ => None,
        }
    }
}

/// The members one producer derived (by file name), and, when it ran in this process, the
/// trace as reading trace.parquet gives it (`formats::trace::read`: the columns the frames
/// read, names as a dictionary), for its first reader to take instead of decoding the file
/// again. The tables are never stored: a value read from the store has none.
#[derive(Debug, Default)]
pub struct Derived {
    pub files: Files,
    pub tables: Mutex<Vec<(String, RecordBatch)>>,
}

impl Derived {
    /// The table of `member`, if this value still holds it (then no longer).
    pub fn take_table(&self, member: &str) -> Option<RecordBatch> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let i = tables.iter().position(|(n, _)| n == member)?;
        Some(tables.swap_remove(i).1)
    }
}

impl Value for Derived {
    fn encode(&self) -> anyhow::Result<Vec<u8>> {
        self.files.encode()
    }

    fn decode(bytes: &[u8]) -> anyhow::Result<Self> {
        Self::decode_shared(bytes::Bytes::copy_from_slice(bytes))
    }

    fn decode_shared(bytes: bytes::Bytes) -> anyhow::Result<Self> {
        Ok(Derived {
            files: Files::decode_shared(bytes)?,
            tables: Mutex::default(),
        })
    }

    fn encode_owned(self) -> anyhow::Result<(bytes::Bytes, Self)> {
        let (bytes, files) = self.files.encode_owned()?;
        Ok((
            bytes,
            Derived {
                files,
                tables: self.tables,
            },
        ))
    }
}

/// The members one producer derives from an export (by file name).
pub struct DerivedNode {
    pub producer: Producer,
    pub export: Key,
}

impl Node for DerivedNode {
    type Value = Derived;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        self.producer.kind().name
    }
    fn roots(&self) -> Vec<&'static str> {
        self.producer.kind().roots.to_vec()
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.export)
    }
}

/// One dump file, xz-compressed at a preset.
pub struct DumpXzNode {
    pub content: Key,
    pub preset: u32,
}
node_kind!(DumpXzNode, kinds::DUMP_XZ, Stored, Bytes);
impl DumpXzNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.param("preset", self.preset.to_le_bytes())
            .input(&self.content)
    }
}

/// The import errors a report records (JSON list of strings), read by this nsys.
pub struct ImportDiagnosticsNode {
    pub report: Key,
    pub nsys_version: Key,
}
node_kind!(
    ImportDiagnosticsNode,
    kinds::IMPORT_DIAGNOSTICS,
    Stored,
    Bytes
);
impl ImportDiagnosticsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.param("nsys-version", self.nsys_version.0)
            .input(&self.report)
    }
}
