//! The programs of each process: its HLO dumps decoded with the archive's protobuf schema
//! (each distinct dump once), and the Python source files their stack frames name.

use super::NONE;
use crate::engine::kinds::kind;
use crate::engine::value::Bytes;
use crate::engine::{Engine, Key, KeyBuilder, Node, node_kind};
use crate::error::Place;
use crate::formats::archive::Archive;
use crate::formats::hlo::HloSchema;
use crate::formats::hlo::{self, HloModuleInfo};
use crate::frames;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::sync::Arc;

use super::members::member_keys;
use super::{Db, Graph, InputArchive, NodeError, NodeResult, Out, Process, fail};

kind!(
    /// The compiled protobuf schema that decodes HLO dumps.
    PROTOS = "protos"
);

kind!(
    /// The decoding plan of a compiled schema.
    HLO_SCHEMA = "hlo-schema"
);

kind!(
    /// One decoded dump file.
    HLO_MODULE = "hlo-module"
);

kind!(
    /// The decoded after-optimizations HLO of every module a process dumped.
    PROGRAMS = "hlo"
);

kind!(
    /// The file names of a process's HLO stack frames.
    SOURCE_NAMES = "source-names"
);

/// The compiled protobuf schema that decodes a process's HLO dumps, from the `.proto` files
/// (path, content or content key).
pub struct ProtosNode {
    pub files: Vec<(String, Vec<u8>)>,
}
node_kind!(ProtosNode, PROTOS, Stored, Bytes);
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
node_kind!(HloSchemaNode, HLO_SCHEMA, Transient, HloSchema);
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
    HLO_MODULE,
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
node_kind!(ProgramsNode, PROGRAMS, Transient, Vec<Arc<HloModuleInfo>>);
impl ProgramsNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.schema).inputs(self.members.iter())
    }
}

/// The file names of a process's HLO stack frames, sorted and distinct.
pub struct SourceNamesNode {
    pub programs: Key,
}
node_kind!(SourceNamesNode, SOURCE_NAMES, Stored, Vec<String>);
impl SourceNamesNode {
    fn feed(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.input(&self.programs)
    }
}

/// The `.proto` sources that decode an archive's HLO dumps: the archive's own `protos/` when
/// it has one (member paths), else the project's (None).
fn proto_members(archive: &Archive) -> Option<Vec<String>> {
    let m: Vec<String> = archive
        .members_under("protos")
        .filter(|m| m.ends_with(".proto"))
        .map(str::to_string)
        .collect();
    (!m.is_empty()).then_some(m)
}

/// The node of an archive's compiled schema: the project's `.proto` files by content, or the
/// archive's by member key.
fn protos_node(db: &Db, a: InputArchive, archive: &Archive) -> Result<ProtosNode, NodeError> {
    let files = match proto_members(archive) {
        None => hlo::builtin_proto_sources(),
        Some(members) => {
            let keys = member_keys(db, a)?;
            members
                .iter()
                .map(|m| Ok((m.clone(), fail(keys.value.get(m))?.0.to_vec())))
                .collect::<Result<_, NodeError>>()?
        }
    };
    Ok(ProtosNode { files })
}

/// The key of an archive's compiled schema (computed from member keys; compiles nothing).
#[salsa::tracked(returns(clone))]
pub fn schema_key(db: &dyn Graph, a: InputArchive) -> std::result::Result<Key, NodeError> {
    let db = db.db();
    let archive = db.ctx.archive(a.index(db));
    Ok(protos_node(db, a, &archive)?.key())
}

/// The compiled protobuf schema used to decode a process's HLO dumps: the archive's own
/// `protos/` when it has one, else the project's.
#[salsa::tracked(returns(clone))]
pub fn schema(db: &dyn Graph, a: InputArchive) -> NodeResult<Bytes> {
    let db = db.db();
    let archive = db.ctx.archive(a.index(db));
    let node = protos_node(db, a, &archive)?;
    let (key, value) = fail(db.engine().compute(&node, "", || {
        let files = match proto_members(&archive) {
            None => hlo::builtin_proto_sources(),
            Some(members) => members
                .iter()
                .map(|m| Ok((m["protos/".len()..].to_string(), archive.read(m)?)))
                .collect::<Result<Vec<_>>>()?,
        };
        hlo::compile_protos(&files)
            .map(Bytes)
            .with_context(|| format!("{}: protos/", archive.path.display()))
    }))?;
    Ok(Out { key, value })
}

/// One after-optimizations HLO dump of a process, with XLA's memory usage report of the
/// same module when the dump has one.
#[derive(Clone)]
pub(super) struct HloMember {
    pub member: String,
    pub content: Key,
    pub report: Option<(String, Key)>,
}

/// The after-optimizations HLO dumps of a process.
pub(super) fn hlo_members(db: &Db, p: Process) -> std::result::Result<Vec<HloMember>, NodeError> {
    let keys = member_keys(db, p.archive(db))?;
    let files = p.archive_ref(db).dump_files(p.stem(db).as_deref());
    let by_file: std::collections::BTreeMap<&str, &str> = files
        .iter()
        .map(|(f, m)| (f.strip_suffix(".xz").unwrap_or(f), m.as_str()))
        .collect();
    let mut out = Vec::new();
    for (file, member) in &files {
        let file = file.strip_suffix(".xz").unwrap_or(file);
        if hlo::is_after_optimizations(file) && hlo::parse_dump_file_name(file).is_some() {
            let report_file = file.replace(".hlo.pb", "-memory-usage-report.pb");
            let report = match by_file.get(report_file.as_str()) {
                Some(m) => Some((m.to_string(), fail(keys.value.get(m))?)),
                None => None,
            };
            out.push(HloMember {
                member: member.clone(),
                content: fail(keys.value.get(member))?,
                report,
            });
        }
    }
    Ok(out)
}

pub fn programs_key(db: &Db, p: Process) -> std::result::Result<Key, NodeError> {
    Ok(ProgramsNode {
        schema: schema_key(db, p.archive(db))?,
        members: hlo_members(db, p)?
            .into_iter()
            .flat_map(|m| [Some(m.content), m.report.map(|r| r.1)])
            .flatten()
            .collect(),
    }
    .key())
}

/// The decoding plan of an archive's schema (built once per schema content).
pub(super) fn hlo_schema(
    db: &Db,
    a: InputArchive,
) -> std::result::Result<Arc<hlo::HloSchema>, NodeError> {
    let compiled = schema(db, a)?;
    let archive = db.ctx.archive(a.index(db));
    let node = HloSchemaNode {
        protos: compiled.key,
    };
    let (_, schema) = fail(db.engine().compute_transient(&node, "", || {
        hlo::HloSchema::from_descriptor_set(&compiled.value.0)
            .with_context(|| format!("{}: protos/", archive.path.display()))
    }))?;
    Ok(schema)
}

/// What must be equal for one dump to be its twin's module (the dumps' bytes are then
/// compared): the schema, the member's name (said in its errors) and the memory report.
type TwinKey = (Key, String, Option<Key>);

/// The modules this process decoded, by [`TwinKey`], so that a dump that decodes alike takes
/// its twin's module instead of decoding (ranks whose dumps differ only in what their
/// autotuners chose; `formats/hlo/alike.rs`). Weak: it keeps no module alive.
static DECODED: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<TwinKey, Vec<std::sync::Weak<HloModuleInfo>>>>,
> = std::sync::LazyLock::new(Default::default);

/// A module decoded from a dump that decodes like `bytes`, if this process holds one.
fn twin_of(twin: &TwinKey, schema: &hlo::HloSchema, bytes: &[u8]) -> Option<Arc<HloModuleInfo>> {
    let candidates: Vec<Arc<HloModuleInfo>> = DECODED
        .lock()
        .unwrap()
        .get(twin)?
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    candidates
        .iter()
        .find_map(|m| crate::formats::hlo::decode_like(m, schema, bytes))
}

fn remember(twin: TwinKey, module: &Arc<HloModuleInfo>) {
    let mut decoded = DECODED.lock().unwrap();
    decoded.retain(|_, v| {
        v.retain(|w| w.strong_count() > 0);
        !v.is_empty()
    });
    decoded
        .entry(twin)
        .or_default()
        .push(Arc::downgrade(module));
}

/// Decode one dump file (an [`HloModuleNode`]): the module, its heap and its memory usage
/// report. A heap or report that cannot be read is said in the module, not an error. A dump
/// that decodes like one already decoded (see [`DECODED`]) takes that module.
pub(super) fn decode_dump(
    engine: &Engine,
    archive: &Archive,
    schema: &hlo::HloSchema,
    schema_key: &Key,
    dump: &HloMember,
) -> Result<Arc<HloModuleInfo>> {
    let member = dump.member.as_str();
    let node = HloModuleNode {
        schema: *schema_key,
        content: dump.content,
        report: dump.report.as_ref().map(|r| r.1),
    };
    let file = member
        .rsplit('/')
        .find(|s| s.contains(".hlo.pb"))
        .unwrap_or(member);
    let (_, module) = engine.compute_transient(&node, file, || {
        let raw = archive.read(member)?;
        let bytes = if member.contains(".xz") {
            crate::formats::xz::decompress_member(&raw, archive.xz_check())
        } else {
            Ok(raw)
        };
        let bytes = bytes::Bytes::from(bytes.context(Place::member(&archive.path, member))?);
        let twin = (*schema_key, member.to_string(), node.report);
        if let Some(module) = twin_of(&twin, schema, &bytes) {
            return Ok(module);
        }
        let mut module = hlo::decode_hlo_shared(schema, bytes.clone())
            .context(Place::member(&archive.path, member))?;
        match hlo::heap::profile(&bytes) {
            Ok(h) => module.heap = h,
            Err(e) => module.heap_error = Some(format!("{member}: {e}")),
        }
        if let Some((report, _)) = &dump.report {
            let summary = read_xz_member(archive, report).and_then(|b| hlo::heap::usage_report(&b));
            match summary {
                Ok(s) => module.usage = Some(s),
                Err(e) => {
                    module.usage_error = Some(format!("{report}: {}", crate::error::one_line(&e)))
                }
            }
        }
        let module = Arc::new(module);
        remember(twin, &module);
        Ok(module)
    })?;
    Ok((*module).clone())
}

/// A member's bytes, xz-decompressed when its name says so.
pub(crate) fn read_xz_member(archive: &Archive, member: &str) -> Result<Vec<u8>> {
    let raw = archive.read(member)?;
    if member.contains(".xz") {
        crate::formats::xz::decompress_member(&raw, archive.xz_check())
    } else {
        Ok(raw)
    }
}

/// The decoded after-optimizations HLO of every module a process dumped.
#[salsa::tracked(returns(clone))]
pub fn programs(db: &dyn Graph, p: Process) -> NodeResult<Vec<Arc<HloModuleInfo>>> {
    use rayon::prelude::*;
    let db = db.db();
    let key = programs_key(db, p)?;
    let schema_key = schema_key(db, p.archive(db))?;
    let members = hlo_members(db, p)?;
    let archive = p.archive_ref(db);
    let schema = if members.is_empty() {
        None
    } else {
        Some(hlo_schema(db, p.archive(db))?)
    };
    let engine = db.engine();
    let value: Vec<Arc<HloModuleInfo>> = fail(
        members
            .par_iter()
            .map(|dump| {
                let schema = schema.as_ref().expect("members imply a schema");
                decode_dump(engine, &archive, schema, &schema_key, dump)
            })
            .collect::<Result<Vec<_>>>(),
    )?;
    Ok(Out {
        key,
        value: Arc::new(value),
    })
}

/// The file names of a process's HLO stack frames (the Python sources of its programs),
/// sorted and distinct.
#[salsa::tracked(returns(clone))]
pub fn source_file_names(db: &dyn Graph, p: Process) -> NodeResult<Vec<String>> {
    let db = db.db();
    let node = SourceNamesNode {
        programs: programs_key(db, p)?,
    };
    let label = p.label(db);
    let (key, value) = fail(db.engine().compute(&node, &label, || {
        let progs = programs(db, p)?;
        let names: BTreeSet<String> = progs
            .value
            .iter()
            .flat_map(|m| m.stack_frames.file_names.iter().cloned())
            .collect();
        Ok(names.into_iter().collect())
    }))?;
    Ok(Out { key, value })
}

pub(super) fn programs_map(infos: &[Arc<HloModuleInfo>]) -> frames::gpu::Programs {
    let mut p = frames::gpu::Programs::default();
    for m in infos {
        p.by_id.insert(m.id, m.clone());
    }
    p
}
