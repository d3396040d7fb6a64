//! Schema compilation: `.proto` sources to a descriptor set, and the loaded [`HloSchema`].

use super::decoded::field;
use super::plan::FieldPlan;
use std::collections::HashMap;

use anyhow::{Result, anyhow};
use prost_reflect::{DescriptorPool, EnumDescriptor, MessageDescriptor};

/// The project's own schema, embedded at build time: `(path relative to protos/, contents)`,
/// laid out as XLA's files so that archives carrying it open in nsys-jax's Python loader.
pub fn builtin_proto_sources() -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "xla/xla_data.proto".to_string(),
            include_bytes!("../../../protos/xla/xla_data.proto").to_vec(),
        ),
        (
            "xla/service/hlo.proto".to_string(),
            include_bytes!("../../../protos/xla/service/hlo.proto").to_vec(),
        ),
    ]
}

/// Resolves imports among in-memory `.proto` sources, keyed by their import path.
pub(super) struct MemoryResolver {
    pub(super) sources: HashMap<String, String>,
}

impl protox::file::FileResolver for MemoryResolver {
    fn open_file(&self, name: &str) -> std::result::Result<protox::file::File, protox::Error> {
        match self.sources.get(name) {
            Some(source) => protox::file::File::from_source(name, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// Normalises a path relative to the protos root into protobuf's import form.
pub(super) fn import_name(path: &str) -> String {
    let path = path.replace('\\', "/");
    let mut path = path.as_str();
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path.trim_start_matches('/').to_string()
}

/// Compiles `.proto` sources into an encoded `google.protobuf.FileDescriptorSet`.
///
/// `files` are `(path relative to the protos root, contents)`, e.g. `("xla/service/hlo.proto",
/// ...)`. Imports resolve among the given files and protobuf's well-known types
/// (`google/protobuf/*.proto`). When some files define `xla.HloProto`, the set holds those
/// and everything they import; else every given file and everything it imports.
/// Errors name the offending `.proto` file and say what is wrong, on one line.
pub fn compile_protos(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut sources = HashMap::with_capacity(files.len());
    for (path, bytes) in files {
        let name = import_name(path);
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| anyhow!("{name}: .proto source is not valid UTF-8"))?;
        sources.insert(name, text);
    }
    // The files defining `xla.HloProto` are all a decode needs (their imports come with
    // them): an archive's `protos/` holds some seventy files, most unrelated. Without such a
    // file, every file is compiled (and the schema says what it lacks).
    let mut names: Vec<String> = sources
        .iter()
        .filter(|(_, text)| defines_hlo_proto(text))
        .map(|(name, _)| name.clone())
        .collect();
    if names.is_empty() {
        names = sources.keys().cloned().collect();
    }
    names.sort();

    let mut resolver = protox::file::ChainFileResolver::new();
    resolver.add(MemoryResolver { sources });
    resolver.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true).include_source_info(false);
    for name in &names {
        compiler
            .open_file(name)
            .map_err(|e| anyhow!("{}", protox_error_line(&e, name)))?;
    }
    Ok(compiler.encode_file_descriptor_set())
}

/// Whether a `.proto` source declares `package xla;` and a top-level `message HloProto`.
pub(super) fn defines_hlo_proto(text: &str) -> bool {
    let mut package = false;
    let mut message = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("package") {
            package |= rest.trim().trim_end_matches(';').trim() == "xla";
        } else if let Some(rest) = line.strip_prefix("message") {
            let rest = rest.trim_start();
            message |= rest
                .strip_prefix("HloProto")
                .is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', '{']));
        }
    }
    package && message
}

/// One line naming the file at fault (as `file[:line:column]: message`).
pub(super) fn protox_error_line(err: &protox::Error, opened: &str) -> String {
    // protox's Debug form carries `file:line:column:` where it knows them; Display does not.
    let detailed = format!("{err:?}");
    let file = err.file().unwrap_or(opened);
    let mut line = if detailed.contains(file) {
        detailed
    } else {
        format!("{file}: {detailed}")
    };
    if file != opened && !line.contains(opened) {
        line = format!("{line} (while compiling {opened})");
    }
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A compiled schema able to decode `xla.HloProto`, with the field plan of [`decode_hlo`].
#[derive(Debug, Clone)]
pub struct HloSchema {
    pub(super) pool: DescriptorPool,
    pub(super) hlo_proto: MessageDescriptor,
    /// `xla.HloModuleProto`, and `xla.HloComputationProto` when the module's field 3 is one
    /// (read by the reflective decoder of the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) module: MessageDescriptor,
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) computation: Option<MessageDescriptor>,
    pub(super) primitive_type: Option<EnumDescriptor>,
    /// The fields [`decode_hlo`] reads, resolved in this schema.
    pub(super) plan: FieldPlan,
}

impl HloSchema {
    /// Loads an encoded `FileDescriptorSet` (as from [`compile_protos`]); it must define
    /// `xla.HloProto`. Errors when a field that [`decode_hlo`] reads has a type it cannot read
    /// (naming the field and its message); fields that the schema lacks are fine.
    pub fn from_descriptor_set(bytes: &[u8]) -> Result<HloSchema> {
        let pool = DescriptorPool::decode(bytes)
            .map_err(|e| anyhow!("loading protobuf descriptor set: {e}"))?;
        let hlo_proto = pool
            .get_message_by_name("xla.HloProto")
            .ok_or_else(|| anyhow!("the protobuf schema does not define xla.HloProto"))?;
        let module = hlo_proto
            .get_field(field::HLO_MODULE)
            .filter(|f| !f.is_list() && !f.is_map())
            .and_then(|f| f.kind().as_message().cloned())
            .filter(|m| m.full_name() == "xla.HloModuleProto")
            .ok_or_else(|| {
                anyhow!("xla.HloProto field 1 is not an xla.HloModuleProto in this protobuf schema")
            })?;
        let computation = module
            .get_field(field::MODULE_COMPUTATIONS)
            .filter(|f| f.is_list())
            .and_then(|f| f.kind().as_message().cloned())
            .filter(|m| m.full_name() == "xla.HloComputationProto");
        let primitive_type = pool.get_enum_by_name("xla.PrimitiveType");
        let plan = FieldPlan::resolve(&hlo_proto)?;
        Ok(HloSchema {
            pool,
            hlo_proto,
            module,
            computation,
            primitive_type,
            plan,
        })
    }

    /// The project's own schema ([`builtin_proto_sources`]), compiled.
    pub fn builtin() -> Result<HloSchema> {
        let set = compile_protos(&builtin_proto_sources())?;
        HloSchema::from_descriptor_set(&set)
    }

    /// The descriptor pool the schema was loaded into.
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    /// The `xla.HloProto` message descriptor.
    pub fn hlo_proto(&self) -> &MessageDescriptor {
        &self.hlo_proto
    }

    /// The name this schema gives a `PrimitiveType` number, if it knows it.
    pub(super) fn primitive_type_name(&self, number: i32) -> Option<String> {
        self.primitive_type
            .as_ref()?
            .get_value(number)
            .map(|v| v.name().to_string())
    }
}
