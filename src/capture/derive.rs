//! A report turned into archive members, as nodes: the export of a report by one nsys (kept
//! in memory while used), the members derived from it by producer, and the xz-compressed
//! dump files. Each kind is declared here with its key type and its compute.

use super::early::EarlyExport;
use super::nsys::Nsys;
use super::projection;
use crate::engine::kinds::kind;
use crate::engine::value::{Bytes, Files, Tables, Value};
use crate::engine::{Engine, Keep, Key, KeyBuilder, Node, node_kind};
use crate::formats::archive;
use crate::formats::archive::{
    DEVICE_METADATA, GRAPH_OPS, MEMORY_USAGE, PUSHPOP_PARQUET, SYSTEM_METADATA, THREAD_METADATA,
    TRACE, TRANSFERS, USER_NVTX,
};
use crate::formats::nsys_export::{self, ExportTables};
use crate::formats::{
    gpu_transfers as transfers, graph_ops, memory_usage, metadata, pushpop, trace, user_nvtx,
};
use anyhow::{Context, Result, bail};
use arrow::array::RecordBatch;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;

kind!(
    /// The tables `nsys export` writes of a report.
    NSYS_EXPORT = "nsys-export"
);

kind!(
    /// The members derived from an export, by producer.
    PROJECTION = "projection"
);

kind!(PUSHPOP = "pushpop");

kind!(METADATA = "metadata");

kind!(USER_EVENTS = "user-events");

kind!(
    /// The key of one derived member (a key, not a stored node).
    DERIVED_MEMBER = "derived-member"
);

kind!(
    /// One dump file, xz-compressed.
    DUMP_XZ = "dump-xz"
);

/// The tables `nsys export` writes of a report, by this nsys (its version key). Kept in
/// memory only, and only while the members derived from them are made (see
/// [`derive_all`]): the members are stored, writing the tables too (tens of megabytes)
/// cost a cold capture more than a later export of the same report would, and they are the
/// largest thing a capture's archive holds.
pub struct ExportNode {
    pub report: Key,
    pub nsys_version: Key,
}
node_kind!(ExportNode, NSYS_EXPORT, Held, Tables);
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
    pub fn kind(self) -> &'static crate::engine::kinds::Kind {
        match self {
            Producer::Projection => &PROJECTION,
            Producer::Pushpop => &PUSHPOP,
            Producer::Metadata => &METADATA,
            Producer::Events => &USER_EVENTS,
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
node_kind!(DumpXzNode, DUMP_XZ, Stored, Bytes);
impl DumpXzNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.param("preset", self.preset.to_le_bytes())
            .input(&self.content)
    }
}

/// The export node of a report (content key `report`) by this nsys.
fn export_node(report: &Key, nsys: &Nsys) -> ExportNode {
    ExportNode {
        report: *report,
        nsys_version: nsys.version_key,
    }
}

/// The key of the export of a report (content key `report`) by this nsys.
pub fn export_key(report: &Key, nsys: &Nsys) -> Key {
    export_node(report, nsys).key()
}

/// The node that produces a derived member.
pub(super) fn producer(member: &str, export: &Key) -> Option<DerivedNode> {
    Some(DerivedNode {
        producer: Producer::of(member)?,
        export: *export,
    })
}

/// The content key of a derived member (computed from keys only).
pub fn derived_member_key(member: &str, export: &Key) -> Option<Key> {
    let node = producer(member, export)?;
    Some(
        KeyBuilder::of(&DERIVED_MEMBER)
            .param("member", member)
            .input(&node.key())
            .finish(),
    )
}

/// The exported tables of a report, from `early` when it is this report's export by this
/// nsys (an export not taken is stopped).
pub fn export_tables(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
    early: Option<EarlyExport>,
) -> Result<Arc<Tables>> {
    let label = file_label(report);
    let (_, tables) = engine.compute(&export_node(report_key, nsys), &label, || {
        let (_tmp, out) = match early.filter(|e| e.is_for(nsys, report)) {
            Some(e) => e.finish()?,
            None => {
                let tmp = crate::tmpfiles::ScratchDir::new("export")?;
                let out = tmp.path().join("tables");
                nsys_export::export(&nsys.path, report, &out)?;
                (tmp, out)
            }
        };
        let tables = nsys_export::read_export_dir(&out)
            .with_context(|| format!("reading the export of {}", report.display()))?;
        Ok(Tables(tables.to_named()))
    })?;
    Ok(tables)
}

/// The bytes of a derived member of a capture (`None` when the capture has no such member:
/// the GPU projection of a capture without GPU activity).
pub fn derived_member(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
    member: &str,
) -> Result<Option<Vec<u8>>> {
    let derived = derived(engine, nsys, report, report_key, member)?;
    Ok(derived.files.get(member).map(|b| b.to_vec()))
}

/// The table of a derived member as reading it gives it, when it was derived in this process
/// and no one took the table before (see [`Derived`]); read the member's bytes
/// otherwise.
pub fn derived_table(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
    member: &str,
) -> Result<Option<arrow::array::RecordBatch>> {
    Ok(derived(engine, nsys, report, report_key, member)?.take_table(member))
}

/// The value of the node that derives `member`: at hand (in this process or stored), else
/// made with all the report's producers together (see [`derive_all`]).
fn derived(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
    member: &str,
) -> Result<Arc<Derived>> {
    let Some(node) = producer(member, &export_key(report_key, nsys)) else {
        bail!("{member}: not a member derived from the report");
    };
    if engine.has_value(&node) {
        // (Exported after all should a stored value turn out unreadable.)
        let export = || export_tables(engine, nsys, report, report_key, None);
        return Ok(derive(engine, &node, report, &export)?.1);
    }
    let all = derive_all(engine, nsys, report, report_key, None)?;
    Ok(all
        .into_iter()
        .find(|(p, _)| *p == node.producer)
        .expect("every producer is made")
        .1)
}

/// The members of every producer of a report ([`Producer::ALL`]), made from one export that
/// is held while they are made and let go after (taken from `early` when that is it): the
/// export's tables are the largest thing a capture's archive holds, and nothing else reads
/// them. The producers run side by side, on threads of their own (the caller may be a graph
/// query, which must not lend its thread to rayon's other work while it waits).
pub(super) fn derive_all(
    engine: &Engine,
    nsys: &Nsys,
    report: &Path,
    report_key: &Key,
    early: Option<EarlyExport>,
) -> Result<Vec<(Producer, Arc<Derived>)>> {
    let export = export_key(report_key, nsys);
    let nodes = Producer::ALL.map(|producer| DerivedNode { producer, export });
    if nodes.iter().all(|n| engine.has_value(n)) {
        // (Exported after all should a stored value turn out unreadable.)
        let export = || export_tables(engine, nsys, report, report_key, None);
        return nodes
            .iter()
            .map(|n| derive(engine, n, report, &export))
            .collect();
    }
    // The export first: threads waiting for it inside a member could not help read it.
    let held = export_tables(engine, nsys, report, report_key, early)?;
    let export = || Ok(held.clone());
    std::thread::scope(|s| {
        let running: Vec<_> = (nodes.iter())
            .map(|n| s.spawn(|| derive(engine, n, report, &export)))
            .collect();
        running
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("deriving a member panicked")))
            })
            .collect()
    })
}

/// The value of `node`: its members made from the tables `export` gives, when not at hand.
fn derive(
    engine: &Engine,
    node: &DerivedNode,
    report: &Path,
    export: &(dyn Fn() -> Result<Arc<Tables>> + Sync),
) -> Result<(Producer, Arc<Derived>)> {
    let (_, derived) = engine.compute(node, &file_label(report), || {
        produce(
            node.producer,
            &ExportTables::from_named(&export()?.0)?,
            report,
        )
    })?;
    Ok((node.producer, derived))
}

/// The members `producer` derives from the export `t` of `report`.
fn produce(producer: Producer, t: &ExportTables, report: &Path) -> Result<Derived> {
    let what = |step: &str| format!("{}: {step}", report.display());
    let mut tables = Vec::new();
    let files = match producer {
        Producer::Projection => {
            if t.has_gpu_activity() {
                let (p, graph) = projection::project_with_graph_ops(t)
                    .with_context(|| what("NVTX projection"))?;
                let table = trace::classic_table(&p, 0)?;
                drop(p);
                let mut files = vec![(TRACE.to_string(), trace::write_classic_table(&table)?)];
                // Kept as reading the member gives it: the columns the frames read.
                tables.push((TRACE.to_string(), trace::from_table(&table)?));
                drop(table);
                if let Some(g) = graph {
                    files.push((GRAPH_OPS.to_string(), graph_ops::write(&g)?));
                }
                if let Some(c) =
                    transfers::from_export(t).with_context(|| what("copies and sets"))?
                {
                    files.push((TRANSFERS.to_string(), transfers::write(&c)?));
                }
                files
            } else {
                vec![]
            }
        }
        Producer::Pushpop => {
            // Not kept: the compile frame reads only the compilations' rows of the member.
            let p = projection::pushpop(t).with_context(|| what("push/pop trace"))?;
            vec![(PUSHPOP_PARQUET.to_string(), pushpop::write_parquet(&p)?)]
        }
        Producer::Metadata => metadata::metadata_files(t).with_context(|| what("metadata"))?,
        Producer::Events => {
            let user = projection::user_nvtx(t).with_context(|| what("user NVTX ranges"))?;
            let mut files = vec![(USER_NVTX.to_string(), user_nvtx::write(&user)?)];
            if let Some(m) = memory_usage::from_export(t).with_context(|| what("memory usage"))? {
                files.push((MEMORY_USAGE.to_string(), memory_usage::write(&m)?));
            }
            files
        }
    };
    Ok(Derived {
        files: Files(files.into_iter().map(|(n, b)| (n, b.into())).collect()),
        tables: std::sync::Mutex::new(tables),
    })
}

/// A classic-layout `trace.parquet` without rows: what a capture without GPU activity is
/// read as.
pub fn empty_trace() -> Result<Vec<u8>> {
    let empty = arrow::array::RecordBatch::new_empty(projection::projection_schema());
    trace::write_classic(&empty, 0)
}

/// xz preset of the dump files (nsys-jax used Python's default, 6).
pub(super) const XZ_PRESET: u32 = 6;

/// The xz-compressed bytes of one dump file (content key `content`).
pub fn dump_xz(engine: &Engine, file: &Path, content: &Key) -> Result<Arc<Bytes>> {
    let node = DumpXzNode {
        content: *content,
        preset: XZ_PRESET,
    };
    let (_, xz) = engine.compute(&node, &file_label(file), || {
        let raw = std::fs::read(file)
            .map_err(|e| anyhow::anyhow!("{}: {}", file.display(), archive::io_reason(&e)))?;
        Ok(Bytes(xz_compress(&raw)?))
    })?;
    Ok(xz)
}

/// xz at [`XZ_PRESET`], with the dictionary no larger than the input: the same output size
/// as the preset's 8 MiB dictionary for the small files of a dump, without allocating and
/// clearing the encoder's ~90 MiB for each (which took most of the time on them).
pub(super) fn xz_compress(raw: &[u8]) -> Result<Vec<u8>> {
    use liblzma::stream::{Check, Filters, LzmaOptions, Stream};
    use std::io::Write;
    let mut options = LzmaOptions::new_preset(XZ_PRESET)?;
    // liblzma's smallest dictionary is 4 KiB; the preset's is the largest worth having.
    let dict = (raw.len().min(8 << 20) as u32)
        .next_power_of_two()
        .clamp(4096, 8 << 20);
    options.dict_size(dict);
    let mut filters = Filters::new();
    filters.lzma2(&options);
    let stream = Stream::new_stream_encoder(&filters, Check::Crc64)?;
    let mut enc = liblzma::write::XzEncoder::new_stream(Vec::with_capacity(raw.len() / 3), stream);
    enc.write_all(raw)?;
    Ok(enc.finish()?)
}

pub(super) fn file_label(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn xz_with_a_fitted_dictionary() {
        use std::io::Read;
        let raw: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("fusion.{} = f32[{}] ", i % 977, i % 131).into_bytes())
            .collect();
        let small = super::xz_compress(&raw).unwrap();
        let mut back = Vec::new();
        liblzma::read::XzDecoder::new(&small[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, raw);
        let mut preset = liblzma::write::XzEncoder::new(Vec::new(), super::XZ_PRESET);
        std::io::Write::write_all(&mut preset, &raw).unwrap();
        let preset = preset.finish().unwrap();
        assert!(
            small.len() <= preset.len() + 64,
            "{} vs {}",
            small.len(),
            preset.len()
        );
        assert!(!super::xz_compress(b"").unwrap().is_empty());
    }

    use super::*;
    use crate::engine::value::Tables;
    use std::sync::Arc;

    #[test]
    fn the_export_is_kept_only_while_held() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let engine = Engine::new(None).unwrap();
        let node = ExportNode {
            report: Key::of_bytes(b"report"),
            nsys_version: Key::of_bytes(b"nsys"),
        };
        let runs = AtomicUsize::new(0);
        let compute = || {
            runs.fetch_add(1, SeqCst);
            Ok(Tables(vec![]))
        };
        let (_, a) = engine.compute(&node, "r", compute).unwrap();
        let (_, b) = engine.compute(&node, "r", compute).unwrap();
        assert!(Arc::ptr_eq(&a, &b) && runs.load(SeqCst) == 1);
        assert!(engine.has_value(&node));
        drop((a, b));
        // Let go by its last holder: gone, and made again when asked for.
        assert!(!engine.has_value(&node));
        let (_, _c) = engine.compute(&node, "r", compute).unwrap();
        assert_eq!(runs.load(SeqCst), 2);
    }
}
