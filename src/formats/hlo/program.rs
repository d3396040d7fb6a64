//! What a program is, apart from when it was compiled: the hash of a module dump without the
//! module's `id`, a counter of the modules the process had compiled before it (docs/design.md
//! "HLO fields": `HloProto.hlo_module` 1, `HloModuleProto.id` 5). Two runs of one program that
//! compiled other modules first (a warm-up, a data pipeline) dump it with other ids and
//! otherwise the same bytes.

use super::wire::{Reader, Wire, wire_error};

/// `HloProto.hlo_module`.
const HLO_MODULE: u64 = 1;
/// `HloModuleProto.id`.
const MODULE_ID: u64 = 5;

/// The blake3 hash of an `HloProto` dump (`*.hlo.pb`) with its module's `id` left out; of the
/// bytes as they are where they do not parse as protobuf.
pub fn program_hash(bytes: &[u8]) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    match hash_without_id(bytes, &mut h) {
        Ok(()) => h.finalize(),
        Err(_) => blake3::hash(bytes),
    }
}

/// Feeds `h` the dump's fields as they are, but the module's, which it feeds without `id`.
fn hash_without_id(bytes: &[u8], h: &mut blake3::Hasher) -> Wire<()> {
    each_field(bytes, |number, raw, payload| {
        match (number, payload) {
            (HLO_MODULE, Some(module)) => {
                h.update(b"module");
                each_field(module, |number, raw, _| {
                    if number != MODULE_ID {
                        h.update(raw);
                    }
                    Ok(())
                })?;
            }
            _ => {
                h.update(raw);
            }
        }
        Ok(())
    })
}

/// Calls `f(field number, the field's bytes with its tag, its payload if length-delimited)`
/// for each field of a message.
fn each_field<'a>(
    bytes: &'a [u8],
    mut f: impl FnMut(u64, &'a [u8], Option<&'a [u8]>) -> Wire<()>,
) -> Wire<()> {
    let mut r = Reader::new(bytes);
    while !r.at_end() {
        let start = r.pos;
        let tag = r.varint()?;
        let payload = match tag & 7 {
            0 => {
                r.varint()?;
                None
            }
            1 => {
                r.take(8)?;
                None
            }
            2 => {
                let len = r.varint()?;
                Some(r.take(len)?)
            }
            5 => {
                r.take(4)?;
                None
            }
            _ => return wire_error("a wire type this reader does not know"),
        };
        f(tag >> 3, &bytes[start..r.pos], payload)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tag and a varint, or a tag and length-delimited bytes.
    fn varint_field(number: u64, v: u64) -> Vec<u8> {
        let mut out = vec![(number << 3) as u8];
        let mut v = v;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }
    fn bytes_field(number: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((number << 3) | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }
    fn dump(id: u64, name: &str) -> Vec<u8> {
        let mut module = bytes_field(1, name.as_bytes());
        module.extend(bytes_field(3, b"computation"));
        module.extend(varint_field(MODULE_ID, id));
        module.extend(varint_field(6, 3));
        bytes_field(HLO_MODULE, &module)
    }

    #[test]
    fn the_module_id_does_not_change_the_program() {
        assert_eq!(
            program_hash(&dump(4642, "jit_train_step")),
            program_hash(&dump(22, "jit_train_step"))
        );
        assert_ne!(
            program_hash(&dump(22, "jit_train_step")),
            program_hash(&dump(22, "jit_eval_step"))
        );
        // Not protobuf: the bytes as they are.
        assert_eq!(program_hash(&[0xff]), blake3::hash(&[0xff]));
    }
}
