//! Whether two dumps decode alike. The ranks of one SPMD program dump after-optimizations HLO
//! that often differs only where each rank's autotuner chose differently (the backend config
//! of a fusion: tile sizes, stages, warps), a field the decoder skips. Such a dump decodes to
//! exactly what its twin did, and is not decoded again (docs/design.md, "The cold path").
//!
//! The test is exact, not a guess: both dumps have the same length, and every byte where they
//! differ lies inside the payload of one length-delimited field that nothing reads (not in the
//! plan; the heap profile reads only `HloProto.buffer_assignment`, which must not differ), or
//! inside the module's frontend attributes, of which only the fingerprint is read (and is then
//! read again from the new dump: the latency-hiding scheduler's input differs with the
//! autotuner's choices, and so does its fingerprint). Tags and lengths are then identical in
//! both, so both parse into the same fields at the same offsets, and every other field that is
//! read holds the same bytes in both.

use super::plan::{ComputationField, FieldPlan, InstructionField, ModuleField, WIRE_LEN};
use super::wire::Reader;

/// Runs of differing bytes looked at before giving up (decoding is then the cheaper way).
const MAX_STRETCHES: usize = 4096;
/// Bytes compared at a time.
const BLOCK: usize = 64;

/// How decoding one dump compares with decoding another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alike {
    /// Everything read is the same.
    Same,
    /// Everything read is the same but the module's frontend attributes (its fingerprint).
    ButAttributes,
}

/// Whether decoding `new` gives what decoding `old` gave (see the module's comment).
pub fn decode_alike(plan: &FieldPlan, old: &[u8], new: &[u8]) -> Option<Alike> {
    if old.len() != new.len() {
        return None;
    }
    let mut alike = Alike::Same;
    for (a, b) in differing(old, new)? {
        match unread(plan, new, a, b)? {
            Where::Unread => {}
            Where::Attributes => alike = Alike::ButAttributes,
            Where::Read => return None,
        }
    }
    Some(alike)
}

/// Where a differing stretch lies.
enum Where {
    Unread,
    Attributes,
    Read,
}

/// The runs of bytes `[a, b]` (inclusive) where the two differ; None when there are too many.
/// Blocks are compared whole; only a block that differs is looked at byte by byte.
fn differing(old: &[u8], new: &[u8]) -> Option<Vec<(usize, usize)>> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (k, (x, y)) in old.chunks(BLOCK).zip(new.chunks(BLOCK)).enumerate() {
        if x == y {
            continue;
        }
        for (i, _) in x.iter().zip(y).enumerate().filter(|(_, (p, q))| p != q) {
            let at = k * BLOCK + i;
            match out.last_mut() {
                Some(run) if run.1 + 1 == at => run.1 = at,
                _ => out.push((at, at)),
            }
        }
        if out.len() > MAX_STRETCHES {
            return None;
        }
    }
    Some(out)
}

/// The field of the message `bytes[start..end]` whose payload holds all of `[a, b]`: its
/// number and payload range. None when `[a, b]` touches a field's key or length, lies in
/// a field that is not length-delimited, or spans fields.
fn field_holding(
    bytes: &[u8],
    (start, end): (usize, usize),
    a: usize,
    b: usize,
) -> Option<(u32, (usize, usize))> {
    let mut r = Reader::new(bytes.get(start..end)?);
    while !r.at_end() {
        let (number, wire) = r.key().ok()?;
        if wire == WIRE_LEN {
            let len = r.varint().ok()?;
            let payload = start + r.pos;
            r.take(len).ok()?;
            let stop = start + r.pos;
            if a < stop {
                return (a >= payload && b < stop).then_some((number, (payload, stop)));
            }
        } else {
            r.skip(wire, number, 0).ok()?;
            if a < start + r.pos {
                return None;
            }
        }
    }
    None
}

/// Where `[a, b]` of the dump lies: in the payload of a field that is not read (inside the
/// module, a computation or an instruction, a field their plans do not name), in the module's
/// frontend attributes, or elsewhere (None when it touches a key or a length).
fn unread(plan: &FieldPlan, bytes: &[u8], a: usize, b: usize) -> Option<Where> {
    // HloProto: only the module may differ (the buffer assignment is the heap profile's).
    let (number, module) = field_holding(bytes, (0, bytes.len()), a, b)?;
    plan.hlo_proto.get(number)?;
    let (number, computation) = field_holding(bytes, module, a, b)?;
    match plan.module.get(number).map(|s| s.action) {
        None => return Some(Where::Unread),
        Some(ModuleField::FrontendAttributes) => return Some(Where::Attributes),
        Some(ModuleField::Computations) => {}
        Some(_) => return Some(Where::Read),
    }
    let (number, instruction) = field_holding(bytes, computation, a, b)?;
    match plan.computation.get(number).map(|s| s.action) {
        None => return Some(Where::Unread),
        Some(ComputationField::Instructions) => {}
        Some(_) => return Some(Where::Read),
    }
    let (number, _) = field_holding(bytes, instruction, a, b)?;
    Some(match plan.instruction.get(number).map(|s| s.action) {
        // Autotuning writes its choices (tiles, algorithms) into backend configs; of them the
        // cost model reads only what the program fixes, a GEMM's contracting dimensions and
        // operand precision, which the ranks of one program share.
        None | Some(InstructionField::BackendConfig) => Where::Unread,
        Some(_) => Where::Read,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn field(number: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint(u64::from(number) << 3 | u64::from(WIRE_LEN), &mut out);
        varint(payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    /// An HloProto with one computation of one instruction named `name` whose unread field
    /// (backend config, 43 in XLA's proto) is `config`, and a module fingerprint.
    fn dump(name: &str, config: &str, fingerprint: &str) -> Vec<u8> {
        let mut instruction = field(1, name.as_bytes()); // name
        instruction.extend(field(2, b"fusion")); // opcode
        instruction.extend(field(43, config.as_bytes())); // backend_config: unread
        let computation = field(2, &instruction); // instructions
        let mut module = field(1, b"jit_step"); // name
        module.extend(field(3, &computation)); // computations
        let mut entry = field(1, b"fingerprint_before_lhs");
        entry.extend(field(2, fingerprint.as_bytes()));
        module.extend(field(19, &field(1, &entry))); // frontend_attributes.map
        field(1, &module) // hlo_module
    }

    fn plan() -> FieldPlan {
        let schema = super::super::HloSchema::builtin().expect("the project's protos compile");
        schema.plan
    }

    #[test]
    fn only_differences_in_unread_fields_decode_alike() {
        let plan = plan();
        let (x, y) = (
            r#"{"block_m":"128","num_warps":"4"}"#,
            r#"{"block_m":"256","num_warps":"8"}"#,
        );
        let a = dump("fusion.1", x, "0123");
        let b = dump("fusion.1", y, "0123");
        assert_eq!(decode_alike(&plan, &a, &a), Some(Alike::Same));
        assert_eq!(decode_alike(&plan, &a, &b), Some(Alike::Same));
        // The fingerprint differs too: alike but for the attributes.
        let g = dump("fusion.1", y, "4567");
        assert_eq!(decode_alike(&plan, &a, &g), Some(Alike::ButAttributes));
        // A read field differs: the instruction's name.
        let c = dump("fusion.2", x, "0123");
        assert_eq!(decode_alike(&plan, &a, &c), None);
        // Different lengths, or bytes that are not a module at all.
        let d = dump("fusion.1", r#"{"block_m":"1024","num_warps":"4"}"#, "0123");
        assert_eq!(decode_alike(&plan, &a, &d), None);
        let mut e = a.clone();
        e[0] ^= 0xff;
        assert_eq!(decode_alike(&plan, &a, &e), None);
        // A changed length prefix never counts as payload.
        let mut f = b.clone();
        let at = f.windows(y.len()).position(|w| w == y.as_bytes()).unwrap() - 1;
        f[at] ^= 1;
        assert_eq!(decode_alike(&plan, &b, &f), None);
    }
}
