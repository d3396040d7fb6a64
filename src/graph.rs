//! The query graph: every step of the pipeline is a salsa query whose value is a node of the
//! engine — keyed by blake3 over its kind, version, parameters and input keys, and read from
//! the persistent store when an intact entry exists.
//!
//! Keys are computed from keys only (down to the content keys of input files and archive
//! members), so a query whose result is in the store never loads its inputs: a second run of
//! the same command reads the stored analysis outputs and nothing else.

use crate::analyses;
use crate::capture::nsys::Nsys;
use crate::capture::{self, CaptureInput};
use crate::engine::value::{Bytes, JsonValue, Tables};
use crate::engine::{Engine, Key, KeyBuilder, versions};
use crate::formats::archive::{self, Archive, MemberKeys};
use crate::formats::hlo::{self, HloModuleInfo};
use crate::formats::{pushpop, trace};
use crate::frames;
use anyhow::{Context, Result};
use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A node's value as salsa sees it: equal when the content keys are equal.
#[derive(Clone, Debug)]
pub struct Out<T> {
    pub key: Key,
    pub value: Arc<T>,
}

impl<T> PartialEq for Out<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<T> Eq for Out<T> {}

/// An error as a salsa value (the message, with its context chain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeError(pub String);

impl From<anyhow::Error> for NodeError {
    fn from(e: anyhow::Error) -> Self {
        NodeError(format!("{e:#}"))
    }
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for NodeError {}

pub type NodeResult<T> = std::result::Result<Out<T>, NodeError>;

/// Everything outside salsa that queries need: the engine, the opened inputs and, for
/// captures, the Nsight Systems CLI (found when first needed).
pub struct GraphContext {
    pub engine: Engine,
    pub archives: Vec<Arc<Archive>>,
    pub nsys_flag: Option<PathBuf>,
    nsys: std::sync::OnceLock<std::result::Result<Nsys, String>>,
}

impl GraphContext {
    pub fn new(engine: Engine, archives: Vec<Arc<Archive>>, nsys_flag: Option<PathBuf>) -> Self {
        GraphContext {
            engine,
            archives,
            nsys_flag,
            nsys: std::sync::OnceLock::new(),
        }
    }

    /// The nsys that exports this run's captures.
    pub fn nsys(&self) -> Result<&Nsys> {
        self.nsys
            .get_or_init(|| {
                crate::capture::nsys::find(&self.engine, self.nsys_flag.as_deref())
                    .map_err(|e| crate::error::one_line(&e))
            })
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

#[salsa::db]
#[derive(Clone)]
pub struct Db {
    storage: salsa::Storage<Self>,
    pub ctx: Arc<GraphContext>,
}

#[salsa::db]
impl salsa::Database for Db {}

/// The database as tracked queries see it.
#[salsa::db]
pub trait Graph: salsa::Database {
    fn db(&self) -> &Db;
}

#[salsa::db]
impl Graph for Db {
    fn db(&self) -> &Db {
        self
    }
}

impl Db {
    pub fn new(ctx: GraphContext) -> Db {
        Db {
            storage: salsa::Storage::default(),
            ctx: Arc::new(ctx),
        }
    }

    fn engine(&self) -> &Engine {
        &self.ctx.engine
    }
}

/// One input archive (file or folder) and its content key.
#[salsa::input(debug)]
pub struct InputArchive {
    #[returns(copy)]
    pub index: usize,
    #[returns(copy)]
    pub file_key: Key,
}

/// One profiled process of the run: an archive and, for combined archives, the stem that
/// names this process's copies of differing files.
#[salsa::input(debug)]
pub struct Process {
    #[returns(copy)]
    pub archive: InputArchive,
    #[returns(ref)]
    pub stem: Option<String>,
    /// Position in the run; used only as the device of last resort.
    #[returns(copy)]
    pub position: u32,
}

/// One analysis to run, with its canonical parameters (JSON).
#[salsa::input(debug)]
pub struct AnalysisSpec {
    #[returns(ref)]
    pub name: String,
    #[returns(ref)]
    pub params: String,
}

/// The processes of one run.
#[salsa::input(debug)]
pub struct Run {
    #[returns(ref)]
    pub processes: Vec<Process>,
}

impl Process {
    pub fn archive_ref(self, db: &Db) -> Arc<Archive> {
        db.ctx.archives[self.archive(db).index(db)].clone()
    }

    /// A human label: the archive file name and stem.
    pub fn label(self, db: &Db) -> String {
        let a = self.archive_ref(db);
        let file = a
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        match self.stem(db) {
            Some(s) => format!("{file}:{s}"),
            None => file,
        }
    }

    fn resolve(self, db: &Db, path: &str) -> Option<String> {
        self.archive_ref(db).resolve(path, self.stem(db).as_deref())
    }
}

fn fail<T>(r: Result<T>) -> std::result::Result<T, NodeError> {
    r.map_err(NodeError::from)
}

// ---------------------------------------------------------------- archive members

impl JsonValue for Vec<String> {}

/// Content keys of every member of an archive.
#[salsa::tracked(returns(clone))]
pub fn member_keys(db: &dyn Graph, a: InputArchive) -> NodeResult<MemberKeys> {
    let db = db.db();
    let archive = db.ctx.archives[a.index(db)].clone();
    if archive.is_capture() {
        return capture_member_keys(db, &archive);
    }
    let key = KeyBuilder::new("member-keys", &versions::of(&["formats/archive.rs"]))
        .input(&a.file_key(db))
        .finish();
    let label = archive.path.display().to_string();
    let value = fail(db.engine().node("member-keys", &label, key, || {
        if archive.is_zip() {
            MemberKeys::compute_zip(&archive)
        } else {
            let mut out = std::collections::BTreeMap::new();
            for m in archive.members() {
                out.insert(m.to_string(), db.engine().file_key(&archive.path.join(m))?);
            }
            Ok(MemberKeys(out))
        }
    }))?;
    Ok(Out { key, value })
}

/// Member keys of a capture: content keys of the report and dump files, and the keys of the
/// members derived from the report (from the report's key and the nsys version; nothing is
/// exported here).
fn capture_member_keys(db: &Db, archive: &Archive) -> NodeResult<MemberKeys> {
    let engine = db.engine();
    let mut out = std::collections::BTreeMap::new();
    let mut kb = KeyBuilder::new("capture-members", "1");
    let report_key = fail(engine.file_key(&archive.path))?;
    let nsys = fail(db.ctx.nsys())?;
    let export = capture::export_key(&report_key, nsys);
    for m in archive.members() {
        let key = match archive.member_file(m) {
            Some(file) => fail(engine.file_key(&file))?,
            None => capture::derived_member_key(m, &export).expect("derived member"),
        };
        kb = kb.param(m, key.0);
        out.insert(m.to_string(), key);
    }
    Ok(Out {
        key: kb.finish(),
        value: Arc::new(MemberKeys(out)),
    })
}

fn member_key(
    db: &Db,
    p: Process,
    path: &str,
) -> std::result::Result<Option<(String, Key)>, NodeError> {
    let Some(m) = p.resolve(db, path) else {
        return Ok(None);
    };
    let keys = member_keys(db, p.archive(db))?;
    Ok(Some((m.clone(), fail(keys.value.get(&m))?)))
}

fn read_member(db: &Db, p: Process, member: &str) -> Result<Vec<u8>> {
    read_archive_member(db, &p.archive_ref(db), member)
}

/// The bytes of a member of an input: read from the archive, or for a member a capture
/// derives from its report, computed by the capture's nodes.
pub fn read_archive_member(db: &Db, archive: &Archive, member: &str) -> Result<Vec<u8>> {
    if archive.is_capture() && archive.member_file(member).is_none() {
        return Ok(derived_member(db, archive, member)?.unwrap_or_default());
    }
    archive.read(member)
}

/// A member derived from a capture's report (None when the capture has none, e.g. no GPU
/// projection for an NVTX-only capture; reading the trace then gives an empty one).
pub fn derived_member(db: &Db, archive: &Archive, member: &str) -> Result<Option<Vec<u8>>> {
    let engine = db.engine();
    let report_key = engine.file_key(&archive.path)?;
    let bytes =
        capture::derived_member(engine, db.ctx.nsys()?, &archive.path, &report_key, member)?;
    match (bytes, member) {
        (None, archive::TRACE) => Ok(Some(capture::empty_trace()?)),
        (b, _) => Ok(b),
    }
}

/// Attach the archive path and member to an error.
fn in_member<T>(db: &Db, p: Process, member: &str, r: Result<T>) -> Result<T> {
    r.with_context(|| format!("{}: {member}", p.archive_ref(db).path.display()))
}

// ---------------------------------------------------------------- protos and HLO

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

/// The key of an archive's compiled schema (computed from member keys; compiles nothing).
#[salsa::tracked(returns(clone))]
pub fn schema_key(db: &dyn Graph, a: InputArchive) -> std::result::Result<Key, NodeError> {
    let db = db.db();
    let archive = db.ctx.archives[a.index(db)].clone();
    let mut kb = KeyBuilder::new("protos", &versions::of(&["formats/hlo/"]));
    match proto_members(&archive) {
        None => {
            for (p, c) in hlo::builtin_proto_sources() {
                kb = kb.param(&p, c);
            }
        }
        Some(members) => {
            let keys = member_keys(db, a)?;
            for m in &members {
                kb = kb.param(m, fail(keys.value.get(m))?.0);
            }
        }
    }
    Ok(kb.finish())
}

/// The compiled protobuf schema used to decode a process's HLO dumps: the archive's own
/// `protos/` when it has one, else the project's.
#[salsa::tracked(returns(clone))]
pub fn schema(db: &dyn Graph, a: InputArchive) -> NodeResult<Bytes> {
    let db = db.db();
    let archive = db.ctx.archives[a.index(db)].clone();
    let key = schema_key(db, a)?;
    let value = fail(db.engine().node("protos", "", key, || {
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

/// The after-optimizations HLO dumps of a process: (member path, content key).
fn hlo_members(db: &Db, p: Process) -> std::result::Result<Vec<(String, Key)>, NodeError> {
    let keys = member_keys(db, p.archive(db))?;
    let mut out = Vec::new();
    for (file, member) in p.archive_ref(db).dump_files(p.stem(db).as_deref()) {
        let file = file.strip_suffix(".xz").unwrap_or(&file);
        if hlo::is_after_optimizations(file) && hlo::parse_dump_file_name(file).is_some() {
            out.push((member.clone(), fail(keys.value.get(&member))?));
        }
    }
    Ok(out)
}

fn programs_key(db: &Db, p: Process) -> std::result::Result<Key, NodeError> {
    let schema_key = schema_key(db, p.archive(db))?;
    let members = hlo_members(db, p)?;
    Ok(
        KeyBuilder::new("hlo", &versions::of(&["formats/hlo/", "graph.rs"]))
            .input(&schema_key)
            .inputs(members.iter().map(|(_, k)| k))
            .finish(),
    )
}

/// The decoding plan of an archive's schema (built once per schema content).
fn hlo_schema(db: &Db, a: InputArchive) -> std::result::Result<Arc<hlo::HloSchema>, NodeError> {
    let compiled = schema(db, a)?;
    let archive = db.ctx.archives[a.index(db)].clone();
    fail(db.engine().transient("hlo-schema", "", compiled.key, || {
        hlo::HloSchema::from_descriptor_set(&compiled.value.0)
            .with_context(|| format!("{}: protos/", archive.path.display()))
    }))
}

/// Decode one dump file: a node of its own, keyed by its content and the schema, so a module
/// dumped identically by many ranks is decoded once. Decoding is faster than storing and
/// re-reading the decoded form, so these nodes live in memory only; what is built from them
/// is stored.
fn decode_dump(
    engine: &Engine,
    archive: &Archive,
    schema: &hlo::HloSchema,
    schema_key: &Key,
    member: &str,
    content: &Key,
) -> Result<Arc<HloModuleInfo>> {
    let key = KeyBuilder::new("hlo-module", &versions::of(&["formats/hlo/", "graph.rs"]))
        .input(schema_key)
        .input(content)
        .finish();
    let file = member
        .rsplit('/')
        .find(|s| s.contains(".hlo.pb"))
        .unwrap_or(member);
    engine.transient("hlo-module", file, key, || {
        let raw = archive.read(member)?;
        let bytes = if member.contains(".xz") {
            crate::formats::limits::xz_decompress(&raw)
        } else {
            Ok(raw)
        };
        bytes
            .and_then(|b| hlo::decode_hlo(schema, &b))
            .with_context(|| format!("{}: {member}", archive.path.display()))
    })
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
            .map(|(member, content)| {
                let schema = schema.as_ref().expect("members imply a schema");
                decode_dump(engine, &archive, schema, &schema_key, member, content)
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
    let key = KeyBuilder::new("source-names", &versions::of(&["graph.rs"]))
        .input(&programs_key(db, p)?)
        .finish();
    let label = p.label(db);
    let value = fail(db.engine().node("source-names", &label, key, || {
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

fn programs_map(infos: &[Arc<HloModuleInfo>]) -> frames::gpu::Programs {
    let mut p = frames::gpu::Programs::default();
    for m in infos {
        p.by_id.insert(m.id, m.clone());
    }
    p
}

// ---------------------------------------------------------------- GPU frames

fn gpu_frames_key(db: &Db, p: Process) -> std::result::Result<Option<Key>, NodeError> {
    let Some((_, trace_key)) = member_key(db, p, archive::TRACE)? else {
        return Ok(None);
    };
    let threads = member_key(db, p, archive::THREAD_METADATA)?;
    Ok(Some(
        KeyBuilder::new(
            "gpu-frames",
            &versions::of(&["frames/gpu.rs", "formats/trace.rs", "nvtx.rs"]),
        )
        .input(&trace_key)
        .input(&threads.map(|t| t.1).unwrap_or(Key([0; 32])))
        .input(&programs_key(db, p)?)
        .param("position", p.position(db).to_le_bytes())
        .finish(),
    ))
}

/// Module and thunk frames of one process (None for an NVTX-only capture). A volatile node:
/// not memoised beyond its holders, so that only the frames of the processes being worked on
/// are in memory (the small per-process results computed from them are memoised).
pub fn gpu_frames(db: &Db, p: Process) -> std::result::Result<Option<Out<Tables>>, NodeError> {
    let Some(key) = gpu_frames_key(db, p)? else {
        return Ok(None);
    };
    let label = p.label(db);
    let value = fail(db.engine().volatile_node("gpu-frames", &label, key, || {
        let member = p.resolve(db, archive::TRACE).expect("key found it");
        let ranges = in_member(db, p, &member, trace::read(read_member(db, p, &member)?))?;
        let threads = match p.resolve(db, archive::THREAD_METADATA) {
            Some(m) => in_member(
                db,
                p,
                &m,
                trace::read_thread_metadata(read_member(db, p, &m)?),
            )?,
            None => trace::ThreadNames {
                pid: vec![],
                tid: vec![],
                name: vec![],
            },
        };
        let progs = programs(db, p)?;
        let mut map = programs_map(&progs.value);
        let archive = p.archive_ref(db);
        map.dump = match archive.capture_dump() {
            Some(d) => Some(d.display().to_string()),
            None if !archive.dump_files(p.stem(db).as_deref()).is_empty() => {
                Some(format!("{}: dump/", archive.path.display()))
            }
            None => None,
        };
        let f = match frames::gpu::build(&ranges, &threads, &map, p.position(db) as i32) {
            // Names the dump already.
            Err(e) if e.is::<frames::gpu::DumpMismatch>() => Err(e),
            r => in_member(db, p, &member, r),
        }?;
        Ok(Tables(vec![
            ("module".into(), f.module),
            ("thunk".into(), f.thunk),
            ("notes".into(), notes_batch(&f.notes.0)),
        ]))
    }))?;
    Ok(Some(Out { key, value }))
}

pub fn notes_batch(notes: &[String]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![(
        "note",
        Arc::new(StringArray::from_iter_values(notes.iter())) as _,
    )])
    .expect("one string column")
}

pub fn notes_of(t: &Tables) -> Vec<String> {
    t.get("notes")
        .map(|b| {
            b.column(0)
                .as_string::<i32>()
                .iter()
                .flatten()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------- compile frame

fn pushpop_member(db: &Db, p: Process) -> std::result::Result<Option<(String, Key)>, NodeError> {
    if let Some(m) = member_key(db, p, archive::PUSHPOP_PARQUET)? {
        return Ok(Some(m));
    }
    member_key(db, p, archive::PUSHPOP_CSV_XZ)
}

fn compile_frame_key(db: &Db, p: Process) -> std::result::Result<Option<Key>, NodeError> {
    Ok(pushpop_member(db, p)?.map(|(_, k)| {
        KeyBuilder::new(
            "compile-frame",
            &versions::of(&["frames/compile.rs", "formats/pushpop.rs"]),
        )
        .input(&k)
        .finish()
    }))
}

/// The compile frame of one process (None without push/pop ranges). Volatile, as
/// [`gpu_frames`].
pub fn compile_frame(db: &Db, p: Process) -> std::result::Result<Option<Out<Tables>>, NodeError> {
    let Some(key) = compile_frame_key(db, p)? else {
        return Ok(None);
    };
    let label = p.label(db);
    let value = fail(db.engine().volatile_node("compile-frame", &label, key, || {
        let (member, _) = pushpop_member(db, p)?.expect("key found it");
        let bytes = read_member(db, p, &member)?;
        let raw = in_member(
            db,
            p,
            &member,
            // In a combined archive the member is `report_nvtx_pushpop_trace.csv.xz/<stem>`.
            if member.starts_with(archive::PUSHPOP_CSV_XZ) {
                pushpop::read_csv_xz(&bytes)
            } else {
                pushpop::read_parquet(&bytes)
            },
        )?;
        let frame = in_member(db, p, &member, frames::compile::build_compile_frame(&raw))?;
        Ok(Tables(vec![("compile".into(), frame)]))
    }))?;
    Ok(Some(Out { key, value }))
}

fn compiled_key(db: &Db, p: Process) -> std::result::Result<Key, NodeError> {
    Ok(KeyBuilder::new(
        "compiled-programs",
        &versions::of(&["graph.rs", "frames/gpu.rs"]),
    )
    .input(&compile_frame_key(db, p)?.unwrap_or(Key([0; 32])))
    .input(&programs_key(db, p)?)
    .finish())
}

/// Stable ids of the programs whose compilation one process's profile contains.
#[salsa::tracked(returns(clone))]
pub fn compiled_programs(db: &dyn Graph, p: Process) -> NodeResult<Vec<String>> {
    let db = db.db();
    let key = compiled_key(db, p)?;
    let label = p.label(db);
    let value = fail(db.engine().node("compiled-programs", &label, key, || {
        let Some(cf) = compile_frame(db, p)? else {
            return Ok(vec![]);
        };
        let progs = programs(db, p)?;
        let map = programs_map(&progs.value);
        let b = cf.value.get("compile").expect("compile table");
        let ids = b
            .column_by_name("ProgramId")
            .context("compile frame has no ProgramId")?;
        let ids = arrow::compute::cast(ids, &arrow::datatypes::DataType::Int64)?;
        let ids = ids.as_primitive::<arrow::datatypes::Int64Type>().clone();
        let names = b
            .column_by_name("ProgramName")
            .context("compile frame has no ProgramName")?;
        let names = names.as_string::<i32>();
        let mut set = BTreeSet::new();
        for i in 0..b.num_rows() {
            if ids.is_valid(i) && ids.value(i) >= 0 {
                set.insert(map.stable_id(Some(ids.value(i)), names.value(i)));
            }
        }
        Ok(set.into_iter().collect())
    }))?;
    Ok(Out { key, value })
}

// ---------------------------------------------------------------- per-process analysis shares

/// What the warm-up split of every process needs to know about the others: the programs
/// compiled in any process's profile, and whether any process communicates (design.md "Formulas").
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct WarmupContext {
    pub compiled: BTreeSet<String>,
    pub has_communication: bool,
}
impl JsonValue for WarmupContext {}

/// Whether one process's profile has communication (small, stored: the context of a run
/// with one more process is known without loading the others' frames).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProcessFacts {
    pub has_communication: bool,
    /// The programs this process executes.
    pub programs: BTreeSet<String>,
}
impl JsonValue for ProcessFacts {}

fn facts_key(db: &Db, p: Process) -> std::result::Result<Key, NodeError> {
    Ok(KeyBuilder::new(
        "process-facts",
        &versions::of(&["graph.rs", "frames/gpu.rs"]),
    )
    .input(&gpu_frames_key(db, p)?.unwrap_or(Key([0; 32])))
    .finish())
}

#[salsa::tracked(returns(clone))]
pub fn process_facts(db: &dyn Graph, p: Process) -> NodeResult<ProcessFacts> {
    let db = db.db();
    let key = facts_key(db, p)?;
    let value = fail(db.engine().node("process-facts", &p.label(db), key, || {
        let Some(g) = gpu_frames(db, p)? else {
            return Ok(ProcessFacts {
                has_communication: false,
                programs: BTreeSet::new(),
            });
        };
        let thunk = g.value.get("thunk").expect("thunk frame");
        let module = g.value.get("module").expect("module frame");
        let has_communication = thunk
            .column_by_name(frames::gpu::COMMUNICATION)
            .expect("communication column")
            .as_boolean()
            .true_count()
            > 0;
        let ids = module
            .column_by_name(frames::gpu::PROGRAM_ID)
            .expect("program id column")
            .as_string::<i32>();
        let programs = ids.iter().flatten().map(str::to_string).collect();
        Ok(ProcessFacts {
            has_communication,
            programs,
        })
    }))?;
    Ok(Out { key, value })
}

#[salsa::tracked(returns(clone))]
pub fn warmup_context(db: &dyn Graph, run: Run) -> NodeResult<WarmupContext> {
    let db = db.db();
    let mut kb = KeyBuilder::new("warmup-context", &versions::of(&["graph.rs"]));
    for &p in run.processes(db) {
        kb = kb.input(&facts_key(db, p)?).input(&compiled_key(db, p)?);
    }
    let key = kb.finish();
    let value = fail(db.engine().node("warmup-context", "", key, || {
        let mut ctx = WarmupContext::default();
        for &p in run.processes(db) {
            ctx.has_communication |= process_facts(db, p)?.value.has_communication;
            ctx.compiled
                .extend(compiled_programs(db, p)?.value.iter().cloned());
        }
        Ok(ctx)
    }))?;
    Ok(Out { key, value })
}

/// The steady-state frames of one process, split with the run's warm-up context.
fn steady_frames(
    db: &Db,
    run: Run,
    p: Process,
) -> std::result::Result<Option<frames::warmup::Steady>, NodeError> {
    let Some(g) = gpu_frames(db, p)? else {
        return Ok(None);
    };
    let ctx = warmup_context(db, run)?;
    let mut steady = fail(frames::warmup::steady_state_in(
        g.value.get("module").expect("module frame"),
        g.value.get("thunk").expect("thunk frame"),
        &ctx.value.compiled,
        ctx.value.has_communication,
    ))?;
    let label = p.label(db);
    steady.notes = steady
        .notes
        .iter()
        .map(|n| format!("{label}: {n}"))
        .collect();
    Ok(Some(steady))
}

/// The remarks made while building one process's frames, prefixed with the process.
fn frame_notes(db: &Db, p: Process) -> std::result::Result<Vec<String>, NodeError> {
    let label = p.label(db);
    Ok(match gpu_frames(db, p)? {
        Some(g) => notes_of(&g.value)
            .into_iter()
            .map(|n| format!("{label}: {n}"))
            .collect(),
        None => vec![],
    })
}

fn partial_key(
    db: &Db,
    run: Run,
    p: Process,
    kind: &str,
    sources: &[&str],
) -> std::result::Result<Key, NodeError> {
    // Only what the warm-up split of this process depends on (whether the run communicates,
    // which of the programs it executes were compiled in the run's profiles), not the
    // context's key: a process joining the run changes the key but rarely this.
    let ctx = warmup_context(db, run)?;
    let facts = process_facts(db, p)?;
    let relevant: Vec<&String> = ctx
        .value
        .compiled
        .intersection(&facts.value.programs)
        .collect();
    let ctx = Key::of_bytes(
        &serde_json::to_vec(&(ctx.value.has_communication, relevant)).expect("plain data"),
    );
    // The label: shares carry notes naming their process.
    Ok(KeyBuilder::new(kind, &versions::of(sources))
        .input(&gpu_frames_key(db, p)?.unwrap_or(Key([0; 32])))
        .input(&ctx)
        .param("label", p.label(db))
        .finish())
}

/// One process's share of an analysis: the stored node `kind` computing `map` on the
/// process's steady-state frames, or `without_gpu` when it has none.
fn share<T: crate::engine::value::Value>(
    db: &Db,
    run: Run,
    p: Process,
    kind: &str,
    sources: &[&str],
    map: impl FnOnce(&frames::warmup::Steady) -> Result<T>,
    without_gpu: impl FnOnce(&str) -> T,
) -> NodeResult<T> {
    let key = partial_key(db, run, p, kind, sources)?;
    let label = p.label(db);
    let value = fail(
        db.engine()
            .node(kind, &label, key, || match steady_frames(db, run, p)? {
                Some(steady) => map(&steady),
                None => Ok(without_gpu(&label)),
            }),
    )?;
    Ok(Out { key, value })
}

/// One process's share of `summary` (its map step).
#[salsa::tracked(returns(clone))]
pub fn summary_partial(
    db: &dyn Graph,
    run: Run,
    p: Process,
) -> NodeResult<analyses::summary::SummaryPartial> {
    let db = db.db();
    share(
        db,
        run,
        p,
        "summary-partial",
        &SUMMARY_SOURCES,
        |steady| {
            let mut part = analyses::summary::partial(steady);
            let mut notes = frame_notes(db, p)?;
            notes.append(&mut part.notes);
            part.notes = notes;
            Ok(part)
        },
        |label| analyses::summary::SummaryPartial {
            notes: vec![format!(
                "{label}: no GPU projection (an NVTX-only capture?): no GPU tables, compile-time results only"
            )],
            ..Default::default()
        },
    )
}

/// One process's share of `stragglers` (its map step).
#[salsa::tracked(returns(clone))]
pub fn stragglers_partial(
    db: &dyn Graph,
    run: Run,
    p: Process,
) -> NodeResult<analyses::stragglers::StragglersPartial> {
    let db = db.db();
    share(
        db,
        run,
        p,
        "stragglers-partial",
        &STRAGGLERS_SOURCES,
        |steady| Ok(analyses::stragglers::partial(steady)),
        |_| Default::default(),
    )
}

const THUNK_SOURCES: [&str; 3] = ["compare/samples.rs", "frames/warmup.rs", "stats.rs"];

/// One process's thunk and op-type durations per module execution (the map step of
/// `compare`'s thunk and op comparisons).
#[salsa::tracked(returns(clone))]
pub fn thunk_partial(
    db: &dyn Graph,
    run: Run,
    p: Process,
) -> NodeResult<crate::compare::samples::ThunkPartial> {
    let db = db.db();
    share(
        db,
        run,
        p,
        "thunk-partial",
        &THUNK_SOURCES,
        |steady| {
            let infos = programs(db, p)?;
            let map = programs_map(&infos.value);
            let by_stable: std::collections::BTreeMap<String, &HloModuleInfo> = infos
                .value
                .iter()
                .map(|m| (map.stable_id(Some(m.id), &m.name), m.as_ref()))
                .collect();
            Ok(crate::compare::samples::thunk_partial(steady, |id| {
                by_stable.get(id).copied()
            }))
        },
        |_| Default::default(),
    )
}

/// One process's share of `communication` (its map step).
#[salsa::tracked(returns(clone))]
pub fn communication_partial(
    db: &dyn Graph,
    run: Run,
    p: Process,
) -> NodeResult<analyses::communication::CommunicationPartial> {
    let db = db.db();
    share(
        db,
        run,
        p,
        "communication-partial",
        &COMMUNICATION_SOURCES,
        |steady| Ok(analyses::communication::partial(steady)),
        |_| Default::default(),
    )
}

// ---------------------------------------------------------------- analyses

fn compile_share_key(
    db: &Db,
    p: Process,
    kind: &str,
    detail: bool,
) -> std::result::Result<Key, NodeError> {
    Ok(KeyBuilder::new(kind, &versions::of(&COMPILATION_SOURCES))
        .input(&compile_frame_key(db, p)?.unwrap_or(Key([0; 32])))
        .param("detail", [detail as u8])
        .param("label", p.label(db))
        .finish())
}

/// One process's share of the compilation summary tables (time per range name).
pub fn compile_sums(db: &Db, p: Process) -> NodeResult<analyses::compilation::RangeSums> {
    let key = compile_share_key(db, p, "compile-sums", false)?;
    let value =
        fail(db.engine().node("compile-sums", &p.label(db), key, || {
            match compile_frame(db, p)? {
                Some(c) => analyses::compilation::range_sums(c.value.get("compile").unwrap()),
                None => Ok(Default::default()),
            }
        }))?;
    Ok(Out { key, value })
}

/// How many consecutive processes' compile sums are added up into one stored group: the
/// summary's reduce reads one stored sum per group instead of one share per process, so a run
/// with one more process reads its groups (all but the last unchanged) and the new share.
const COMPILE_GROUP: usize = 16;

/// The compile sums of processes `[16 g, 16 g + 16)` of a run, added up in process order.
fn compile_sums_group(
    db: &Db,
    run: Run,
    g: usize,
) -> Result<Arc<analyses::compilation::RangeSums>> {
    let procs = run.processes(db);
    let members = &procs[g * COMPILE_GROUP..procs.len().min((g + 1) * COMPILE_GROUP)];
    let mut kb = KeyBuilder::new("compile-sums-group", &versions::of(&COMPILATION_SOURCES));
    for &p in members {
        kb = kb.input(&compile_share_key(db, p, "compile-sums", false)?);
    }
    let label = format!(
        "processes {}–{}",
        g * COMPILE_GROUP,
        g * COMPILE_GROUP + members.len() - 1
    );
    db.engine()
        .node("compile-sums-group", &label, kb.finish(), || {
            let shares = members
                .iter()
                .map(|&p| Ok(compile_sums(db, p)?.value.as_ref().clone()))
                .collect::<std::result::Result<Vec<_>, NodeError>>()?;
            Ok(analyses::compilation::add_up(&shares))
        })
}

/// One process's compilations, each with its breakdown (the share of `compilation`).
pub fn compilations(
    db: &Db,
    p: Process,
    detail: bool,
) -> NodeResult<analyses::compilation::Compilations> {
    let key = compile_share_key(db, p, "compilations", detail)?;
    let label = p.label(db);
    let value = fail(db.engine().node("compilations", &label, key, || {
        Ok(analyses::compilation::Compilations(
            match compile_frame(db, p)? {
                Some(c) => analyses::compilation::per_compilation(
                    &[(label.clone(), c.value.get("compile").unwrap().clone())],
                    detail,
                )?,
                None => vec![],
            },
        ))
    }))?;
    Ok(Out { key, value })
}

/// The result of one analysis: its JSON document, its terminal text, and extra files.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AnalysisOutput {
    pub name: String,
    /// File name -> content, written under OUTDIR (e.g. `summary.json`).
    pub files: Vec<(String, String)>,
    pub text: String,
}
impl JsonValue for AnalysisOutput {}

/// The source files each built-in analysis is made of (its node version).
const SUMMARY_SOURCES: [&str; 5] = [
    "analyses/summary.rs",
    "analyses/compilation.rs",
    "table.rs",
    "frames/warmup.rs",
    "stats.rs",
];
const COMMUNICATION_SOURCES: [&str; 4] = [
    "analyses/communication.rs",
    "table.rs",
    "frames/warmup.rs",
    "stats.rs",
];
const COMPILATION_SOURCES: [&str; 3] = ["analyses/compilation.rs", "table.rs", "graph.rs"];
const STRAGGLERS_SOURCES: [&str; 3] = ["analyses/stragglers.rs", "table.rs", "frames/warmup.rs"];

fn analysis_key(
    db: &Db,
    run: Run,
    spec: AnalysisSpec,
    sources: &[&str],
    needs_gpu: bool,
    needs_compile: bool,
) -> std::result::Result<Key, NodeError> {
    let mut kb = KeyBuilder::new(
        &format!("analysis:{}", spec.name(db)),
        &versions::of(sources),
    )
    .param("params", spec.params(db));
    for &p in run.processes(db) {
        if needs_gpu {
            kb = kb.input(&gpu_frames_key(db, p)?.unwrap_or(Key([0; 32])));
        }
        if needs_compile {
            kb = kb.input(&compile_frame_key(db, p)?.unwrap_or(Key([0; 32])));
        }
        kb = kb.input(&compiled_key(db, p)?);
    }
    Ok(kb.finish())
}

/// Key the members of every input archive, in parallel (top level, outside any query).
pub fn prepare_archives(db: &Db, run: Run) -> Result<()> {
    use rayon::prelude::*;
    let mut archives: Vec<InputArchive> = Vec::new();
    for &p in run.processes(db) {
        if !archives.contains(&p.archive(db)) {
            archives.push(p.archive(db));
        }
    }
    archives
        .par_iter()
        .map_with(db.clone(), |db, &a| member_keys(db, a).map(|_| ()))
        .collect::<std::result::Result<Vec<()>, _>>()?;
    Ok(())
}

/// Compute the per-process nodes of a run in parallel (one thread per process). Called at the
/// top level, outside any query, before analyses whose results are not stored; the analyses
/// then find these values memoised.
pub fn prepare_processes(
    db: &Db,
    run: Run,
    needs: Needs,
    on_done: &(dyn Fn() + Sync),
) -> Result<()> {
    use rayon::prelude::*;
    let procs = run.processes(db).clone();
    // First, in one flat parallel pass, the work that would otherwise make ranks wait for each
    // other: decoding the HLO dumps (each distinct dump once, largest first) of the ranks whose
    // frames are not stored yet, and building the compile frames.
    let store = db.engine().store();
    let stored = |kind: &str, key: Option<Key>| {
        key.is_some_and(|k| store.is_some_and(|s| s.contains(kind, &k)))
    };
    enum Task {
        Decode(Arc<Archive>, Arc<hlo::HloSchema>, Key, String, Key, u64),
        Compile(Process),
    }
    let mut tasks = Vec::new();
    let mut seen = BTreeSet::new();
    for &p in &procs {
        if !stored("gpu-frames", gpu_frames_key(db, p)?) {
            let members = hlo_members(db, p)?;
            if !members.is_empty() {
                let schema = hlo_schema(db, p.archive(db))?;
                let schema_key = schema_key(db, p.archive(db))?;
                let archive = p.archive_ref(db);
                for (m, content) in members {
                    if seen.insert((schema_key, content)) {
                        let size = archive.member_size(&m);
                        tasks.push(Task::Decode(
                            archive.clone(),
                            schema.clone(),
                            schema_key,
                            m,
                            content,
                            size,
                        ));
                    }
                }
            }
        }
        if !stored("compile-frame", compile_frame_key(db, p)?) {
            tasks.push(Task::Compile(p));
        }
    }
    tasks.sort_by_key(|t| {
        std::cmp::Reverse(match t {
            Task::Decode(.., size) => *size,
            Task::Compile(_) => u64::MAX,
        })
    });
    let engine = db.engine();
    tasks
        .par_iter()
        .map_with(db.clone(), |db, t| -> std::result::Result<(), NodeError> {
            match t {
                Task::Decode(archive, schema, schema_key, member, content, _) => {
                    fail(decode_dump(
                        engine, archive, schema, schema_key, member, content,
                    ))?;
                }
                Task::Compile(p) => {
                    // Everything read from the compile frame while it is in memory.
                    let _frame = compile_frame(db, *p)?;
                    compiled_programs(db, *p)?;
                    if needs.compile_sums {
                        compile_sums(db, *p)?;
                    }
                    if needs.compilations {
                        compilations(db, *p, false)?;
                    }
                }
            }
            Ok(())
        })
        .collect::<std::result::Result<Vec<()>, _>>()?;
    // Then what the warm-up context of the run needs from each process (small and stored:
    // a process whose facts are stored is not loaded), the context, and each process's
    // shares of the analyses (a stored share is not recomputed, and its process's frames are
    // not loaded).
    procs
        .par_iter()
        .map_with(db.clone(), |db, &p| -> std::result::Result<(), NodeError> {
            process_facts(db, p)?;
            compiled_programs(db, p)?;
            Ok(())
        })
        .collect::<std::result::Result<Vec<()>, _>>()?;
    warmup_context(db, run)?;
    procs
        .par_iter()
        .map_with(db.clone(), |db, &p| -> std::result::Result<(), NodeError> {
            // The process's frames are loaded once for its missing shares (and not at all
            // when they are stored), and let go before the next process.
            let missing = |kind: &str, sources: &[&str]| -> std::result::Result<bool, NodeError> {
                let key = partial_key(db, run, p, kind, sources)?;
                Ok(!stored(kind, Some(key)))
            };
            let _frames = if (needs.summary && missing("summary-partial", &SUMMARY_SOURCES)?)
                || (needs.thunks && missing("thunk-partial", &THUNK_SOURCES)?)
                || (needs.communication
                    && missing("communication-partial", &COMMUNICATION_SOURCES)?)
                || (needs.stragglers && missing("stragglers-partial", &STRAGGLERS_SOURCES)?)
            {
                gpu_frames(db, p)?
            } else {
                None
            };
            if needs.summary {
                summary_partial(db, run, p)?;
            }
            if needs.communication {
                communication_partial(db, run, p)?;
            }
            if needs.stragglers {
                stragglers_partial(db, run, p)?;
            }
            if needs.thunks {
                thunk_partial(db, run, p)?;
            }
            // Stored compile shares are left in the store: the reduces read them (or the
            // stored sums of whole groups of processes) when they need them.
            if needs.compile_sums
                && !stored(
                    "compile-sums",
                    Some(compile_share_key(db, p, "compile-sums", false)?),
                )
            {
                compile_sums(db, p)?;
            }
            if needs.compilations
                && !stored(
                    "compilations",
                    Some(compile_share_key(db, p, "compilations", false)?),
                )
            {
                compilations(db, p, false)?;
            }
            on_done();
            Ok(())
        })
        .collect::<std::result::Result<Vec<()>, _>>()?;
    Ok(())
}

/// Whether every per-process share that `needs` names is stored for every process of the
/// run (then nothing needs preparing, and no frames are loaded).
pub fn shares_stored(db: &Db, run: Run, needs: Needs) -> Result<bool> {
    let Some(store) = db.engine().store() else {
        return Ok(false);
    };
    for &p in run.processes(db) {
        let mut wanted: Vec<(&str, Key)> = Vec::new();
        let mut share = |on: bool, kind: &'static str, src: &[&str]| -> Result<()> {
            if on {
                wanted.push((kind, partial_key(db, run, p, kind, src)?));
            }
            Ok(())
        };
        share(needs.summary, "summary-partial", &SUMMARY_SOURCES)?;
        share(
            needs.communication,
            "communication-partial",
            &COMMUNICATION_SOURCES,
        )?;
        share(needs.stragglers, "stragglers-partial", &STRAGGLERS_SOURCES)?;
        share(needs.thunks, "thunk-partial", &THUNK_SOURCES)?;
        if needs.compile_sums {
            wanted.push((
                "compile-sums",
                compile_share_key(db, p, "compile-sums", false)?,
            ));
        }
        if needs.compilations {
            wanted.push((
                "compilations",
                compile_share_key(db, p, "compilations", false)?,
            ));
        }
        if !wanted.iter().all(|(kind, key)| store.contains(kind, key)) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Which per-process work the requested analyses need.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    pub summary: bool,
    pub communication: bool,
    pub stragglers: bool,
    /// The compile-time summary shares.
    pub compile_sums: bool,
    /// The per-compilation breakdowns (without detail).
    pub compilations: bool,
    /// The thunk and op-type durations `compare` reads.
    pub thunks: bool,
}

impl Needs {
    /// For the built-in analyses named; scripts read the archive itself.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Needs {
        let mut n = Needs::default();
        for name in names {
            match name {
                "summary" => {
                    n.summary = true;
                    n.compile_sums = true;
                }
                "communication" => n.communication = true,
                "stragglers" => n.stragglers = true,
                "compilation" => n.compilations = true,
                _ => {}
            }
        }
        n
    }
}

/// The node key of a built-in analysis (without computing anything).
pub fn analysis_is_stored(db: &Db, run: Run, spec: AnalysisSpec) -> Result<bool> {
    let (gpu, compile, src): (bool, bool, &[&str]) = match spec.name(db).as_str() {
        "summary" => (true, true, &SUMMARY_SOURCES),
        "communication" => (true, false, &COMMUNICATION_SOURCES),
        "compilation" => (false, true, &COMPILATION_SOURCES),
        "stragglers" => (true, false, &STRAGGLERS_SOURCES),
        _ => return Ok(false),
    };
    let key = analysis_key(db, run, spec, src, gpu, compile)?;
    Ok(db
        .engine()
        .store()
        .is_some_and(|s| s.contains(&format!("analysis:{}", spec.name(db)), &key)))
}

/// Run one built-in analysis.
#[salsa::tracked(returns(clone))]
pub fn analysis(db: &dyn Graph, run: Run, spec: AnalysisSpec) -> NodeResult<AnalysisOutput> {
    let db = db.db();
    let name = spec.name(db).clone();
    let params: serde_json::Value = serde_json::from_str(spec.params(db)).unwrap_or_default();
    let (key, compute): (Key, Box<dyn FnOnce() -> Result<AnalysisOutput>>) = match name.as_str() {
        "summary" => {
            let key = analysis_key(db, run, spec, &SUMMARY_SOURCES, true, true)?;
            (
                key,
                Box::new(move || {
                    let mut partials = Vec::new();
                    for &p in run.processes(db) {
                        partials.push(summary_partial(db, run, p)?.value.as_ref().clone());
                    }
                    let groups = run.processes(db).len().div_ceil(COMPILE_GROUP);
                    let compile = (0..groups)
                        .map(|g| Ok(compile_sums_group(db, run, g)?.as_ref().clone()))
                        .collect::<Result<Vec<_>>>()?;
                    let s = analyses::summary::Summary {
                        modules: analyses::summary::module_rows(&partials),
                        compilation: analyses::compilation::reduce_summary(&compile),
                    };
                    let mut text = String::new();
                    for n in partials.iter().flat_map(|p| &p.notes) {
                        text.push_str(&format!("note: {n}\n"));
                    }
                    text.push_str(&analyses::summary::render(&s));
                    Ok(AnalysisOutput {
                        name: name.clone(),
                        files: vec![("summary.json".into(), serde_json::to_string_pretty(&s)?)],
                        text,
                    })
                }),
            )
        }
        "communication" => {
            let key = analysis_key(db, run, spec, &COMMUNICATION_SOURCES, true, false)?;
            (
                key,
                Box::new(move || {
                    let partials: Vec<analyses::communication::CommunicationPartial> = run
                        .processes(db)
                        .iter()
                        .map(|&p| Ok(communication_partial(db, run, p)?.value.as_ref().clone()))
                        .collect::<std::result::Result<_, NodeError>>()?;
                    let mut c = analyses::communication::reduce(&partials);
                    c.notes
                        .extend(partials.iter().flat_map(|p| p.notes.iter().cloned()));
                    let processes = partials.len();
                    if processes > 1 {
                        c.notes.push(format!(
                        "{processes} processes: bandwidths use durations only, so no cross-process clock alignment is needed"
                    ));
                    } else {
                        c.notes.push("one process: no cross-process clock alignment (not needed for bandwidth)".into());
                    }
                    Ok(AnalysisOutput {
                        name: name.clone(),
                        text: analyses::communication::render(&c),
                        files: vec![(
                            "communication.json".into(),
                            serde_json::to_string_pretty(&c)?,
                        )],
                    })
                }),
            )
        }
        "compilation" => {
            let key = analysis_key(db, run, spec, &COMPILATION_SOURCES, false, true)?;
            let detail = fail(
                serde_json::from_value::<analyses::compilation::Params>(params.clone())
                    .map_err(|e| anyhow::anyhow!("analysis compilation: {e}")),
            )?
            .detail;
            (
                key,
                Box::new(move || {
                    let mut entries = Vec::new();
                    for &p in run.processes(db) {
                        entries.extend(compilations(db, p, detail)?.value.0.iter().cloned());
                    }
                    let text = analyses::compilation::render(&entries);
                    Ok(AnalysisOutput {
                        name: name.clone(),
                        text,
                        files: vec![(
                            "compilation.json".into(),
                            serde_json::to_string_pretty(
                                &serde_json::json!({ "compilations": entries }),
                            )?,
                        )],
                    })
                }),
            )
        }
        "stragglers" => {
            let key = analysis_key(db, run, spec, &STRAGGLERS_SOURCES, true, false)?;
            (
                key,
                Box::new(move || {
                    let partials: Vec<analyses::stragglers::StragglersPartial> = run
                        .processes(db)
                        .iter()
                        .map(|&p| Ok(stragglers_partial(db, run, p)?.value.as_ref().clone()))
                        .collect::<std::result::Result<_, NodeError>>()?;
                    let s = analyses::stragglers::reduce(&partials);
                    Ok(AnalysisOutput {
                        name: name.clone(),
                        text: analyses::stragglers::render(&s),
                        files: vec![("stragglers.json".into(), serde_json::to_string_pretty(&s)?)],
                    })
                }),
            )
        }
        other => {
            return Err(NodeError(format!(
                "unknown analysis {other:?} (built in: {}; or the path of a script)",
                analyses::builtin_names()
            )));
        }
    };
    let value = fail(
        db.engine()
            .node(&format!("analysis:{}", spec.name(db)), "", key, compute),
    )?;
    Ok(Out { key, value })
}

/// One input of a run: an nsys-jax archive (zip or folder) or a capture.
#[derive(Clone, Debug)]
pub enum RunInput {
    Archive(PathBuf),
    Capture(CaptureInput),
}

impl RunInput {
    pub fn path(&self) -> &Path {
        match self {
            RunInput::Archive(p) => p,
            RunInput::Capture(c) => &c.report,
        }
    }
}

/// Sort command-line inputs into archives and captures; `dumps` are the `--dump` folders,
/// matched in order with the reports.
pub fn classify_inputs(paths: &[PathBuf], dumps: &[PathBuf]) -> Result<Vec<RunInput>> {
    input_paths_exist(paths)?;
    let reports = paths.iter().filter(|p| capture::is_report(p)).count();
    if !dumps.is_empty() && dumps.len() != reports {
        anyhow::bail!(
            "{} --dump folder(s) for {reports} report(s): give one --dump per report, in the same order, or none",
            dumps.len()
        );
    }
    let mut dumps = dumps.iter();
    paths
        .iter()
        .map(|p| {
            Ok(if capture::is_report(p) {
                RunInput::Capture(capture::find_dump(p, dumps.next().map(PathBuf::as_path))?)
            } else {
                RunInput::Archive(p.clone())
            })
        })
        .collect()
}

/// Open the inputs of one run and register them with a new database.
pub fn open_run(
    engine: Engine,
    inputs: &[RunInput],
    nsys_flag: Option<PathBuf>,
) -> Result<(Db, Run)> {
    let (db, mut runs) = open_runs(engine, &[inputs.to_vec()], nsys_flag)?;
    Ok((db, runs.remove(0)))
}

/// Open the inputs of several runs (e.g. the two sides of a comparison) and register them
/// with one database, so that they share every node.
pub fn open_runs(
    engine: Engine,
    runs: &[Vec<RunInput>],
    nsys_flag: Option<PathBuf>,
) -> Result<(Db, Vec<Run>)> {
    let inputs: Vec<&RunInput> = runs.iter().flatten().collect();
    let archives: Vec<Arc<Archive>> = inputs
        .iter()
        .map(|i| match i {
            RunInput::Archive(p) => Archive::open(p).map(Arc::new),
            RunInput::Capture(c) => capture::open(c).map(Arc::new),
        })
        .collect::<Result<_>>()?;
    let mut file_keys = Vec::new();
    for a in &archives {
        file_keys.push(if a.is_zip() {
            engine.file_key(&a.path)?
        } else {
            // A folder's or capture's key is that of its files, keyed one by one (a capture's
            // derived members follow from its report).
            let mut kb = KeyBuilder::new(if a.is_capture() { "capture" } else { "folder" }, "1");
            for m in a.members() {
                if let Some(file) = a.member_file(m) {
                    kb = kb.param(m, engine.file_key(&file)?.0);
                }
            }
            kb.finish()
        });
    }
    let stems: Vec<Vec<Option<String>>> = archives
        .iter()
        .map(|a| a.process_stems())
        .collect::<Result<_>>()?;
    let db = Db::new(GraphContext::new(engine, archives, nsys_flag));
    let mut out = Vec::new();
    let mut stems = stems.into_iter().enumerate();
    for run in runs {
        // Positions count within each run: a run's nodes are those of the same inputs
        // analysed alone.
        let mut processes = Vec::new();
        for (i, stems) in stems.by_ref().take(run.len()) {
            let a = InputArchive::new(&db, i, file_keys[i]);
            for s in stems {
                let pos = processes.len() as u32;
                processes.push(Process::new(&db, a, s, pos));
            }
        }
        out.push(Run::new(&db, processes));
    }
    Ok((db, out))
}

pub fn input_paths_exist(paths: &[PathBuf]) -> Result<()> {
    for p in paths {
        if !Path::new(p).exists() {
            anyhow::bail!("{}: no such file or folder", p.display());
        }
    }
    Ok(())
}

/// An external analysis script and its extra arguments.
#[salsa::input(debug)]
pub struct ScriptSpec {
    #[returns(ref)]
    pub path: PathBuf,
    #[returns(ref)]
    pub args: Vec<String>,
    #[returns(copy)]
    pub script_key: Key,
}

/// Run an external analysis script on the run's inputs (memoised on the script's content,
/// its arguments and the input archives' keys).
#[salsa::tracked(returns(clone))]
pub fn script_analysis(
    db: &dyn Graph,
    run: Run,
    spec: ScriptSpec,
) -> NodeResult<analyses::external::ScriptOutput> {
    let db = db.db();
    let mut archives: Vec<InputArchive> = Vec::new();
    for &p in run.processes(db) {
        if !archives.contains(&p.archive(db)) {
            archives.push(p.archive(db));
        }
    }
    let mut kb = KeyBuilder::new("analysis-script", &versions::of(&["analyses/external.rs"]))
        .input(&spec.script_key(db))
        .param(
            "args",
            serde_json::to_string(spec.args(db)).unwrap_or_default(),
        );
    for a in &archives {
        kb = kb.input(&a.file_key(db));
        if db.ctx.archives[a.index(db)].is_capture() {
            // What the script sees of a capture also depends on the nsys that exports it.
            kb = kb.input(&member_keys(db, *a)?.key);
        }
    }
    let key = kb.finish();
    let name = analyses::external::script_name(spec.path(db));
    let value = fail(
        db.engine()
            .node(&format!("analysis-script:{name}"), "", key, || {
                let tmp = crate::tmpfiles::ScratchDir::new("script")?;
                // A capture is shown to the script as the archive it makes.
                let mut opened: Vec<Arc<Archive>> = Vec::new();
                for (i, a) in archives.iter().enumerate() {
                    let archive = db.ctx.archives[a.index(db)].clone();
                    if !archive.is_capture() {
                        opened.push(archive);
                        continue;
                    }
                    let p = *run
                        .processes(db)
                        .iter()
                        .find(|p| p.archive(db) == *a)
                        .expect("every archive has a process");
                    let contents = capture::archive_contents(db, p, true)?;
                    let stem = archive
                        .path
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| format!("capture{i}"));
                    let dir = tmp.path().join("captures").join(&stem);
                    crate::formats::archive_writer::write_dir(&contents.entries, &dir)?;
                    opened.push(Arc::new(Archive::open(&dir)?));
                }
                let refs: Vec<&Archive> = opened.iter().map(|a| a.as_ref()).collect();
                let folder = analyses::external::materialize(&refs, &tmp.path().join("archive"))?;
                analyses::external::run_script(spec.path(db), spec.args(db), &folder)
            }),
    )?;
    Ok(Out { key, value })
}
