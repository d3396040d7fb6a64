//! XLA's `module_NNNN.<name>.thunk_metadata.pb` dump file (docs/design.md, "Command buffers"):
//! the module's thunks in emission order — a command buffer first, then the thunks it holds —
//! each with the HLO instruction it runs and its kind (`kCommandBuffer`, `kCustomKernel`,
//! `kAllGather`, ...). Field numbers from XLA's `thunk.proto`: `ThunkMetadataListProto
//! { repeated ThunkMetadataProto thunk_metadata = 1 }`, `ThunkMetadataProto { ThunkInfoProto
//! thunk_info = 1; string thunk_kind = 2 }`, `ThunkInfoProto { string profile_annotation = 1;
//! int64 thunk_id = 3 }`.

use anyhow::{Result, anyhow};
use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct ListProto {
    #[prost(message, repeated, tag = "1")]
    thunk_metadata: Vec<MetadataProto>,
}

#[derive(Clone, PartialEq, Message)]
struct MetadataProto {
    #[prost(message, optional, tag = "1")]
    thunk_info: Option<InfoProto>,
    #[prost(string, tag = "2")]
    thunk_kind: String,
}

#[derive(Clone, PartialEq, Message)]
struct InfoProto {
    #[prost(string, tag = "1")]
    profile_annotation: String,
    #[prost(int64, tag = "3")]
    thunk_id: i64,
}

/// One thunk of a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThunkEntry {
    /// The HLO instruction it runs (`command_buffer_N` for a command buffer; empty for the
    /// sequence a command buffer holds).
    pub name: String,
    /// `kCommandBuffer`, `kCustomKernel`, `kGemm`, `kAllGather`, ...
    pub kind: String,
}

/// Decodes a `thunk_metadata.pb`. Errors say what is wrong in one line; the caller names
/// the file.
pub fn decode(bytes: &[u8]) -> Result<Vec<ThunkEntry>> {
    let list = ListProto::decode(bytes).map_err(|e| anyhow!("not a thunk metadata list ({e})"))?;
    Ok(list
        .thunk_metadata
        .into_iter()
        .map(|m| ThunkEntry {
            name: m
                .thunk_info
                .map(|i| i.profile_annotation)
                .unwrap_or_default(),
            kind: m.thunk_kind,
        })
        .collect())
}

/// The module id of a `module_NNNN.<name>.thunk_metadata.pb[.xz]` file name (no folders).
pub fn module_id(file_name: &str) -> Option<i64> {
    let rest = file_name.strip_prefix("module_")?;
    let rest = rest.strip_suffix(".xz").unwrap_or(rest);
    rest.strip_suffix(".thunk_metadata.pb")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].starts_with('.') || file_name.contains('/') {
        return None;
    }
    rest[..digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str =
        "tests/data/command-buffers/dump_rep/module_4642.jit_train_step.thunk_metadata.pb";

    #[test]
    fn decodes_a_dump() {
        let entries = decode(&std::fs::read(DUMP).unwrap()).unwrap();
        let cb = entries
            .iter()
            .position(|e| e.name == "command_buffer_4")
            .unwrap();
        assert_eq!(entries[cb].kind, "kCommandBuffer");
        assert_eq!(entries[cb + 1].kind, "kSequential");
        assert_eq!(entries[cb + 2].name, "gemm_fusion_dot.7");
        assert_eq!(entries[cb + 2].kind, "kCustomKernel");
        assert_eq!(
            entries
                .iter()
                .filter(|e| e.kind == "kCommandBuffer")
                .count(),
            7
        );
    }

    #[test]
    fn refuses_other_bytes_and_names() {
        assert!(decode(b"\x0a\xff\xff\xff").is_err());
        assert_eq!(
            module_id("module_4642.jit_train_step.thunk_metadata.pb"),
            Some(4642)
        );
        assert_eq!(module_id("module_0007.f.thunk_metadata.pb.xz"), Some(7));
        assert_eq!(module_id("module_x.f.thunk_metadata.pb"), None);
        assert_eq!(module_id("module_1.f.hlo.pb"), None);
        assert_eq!(module_id("d/module_1.f.thunk_metadata.pb"), None);
    }
}
