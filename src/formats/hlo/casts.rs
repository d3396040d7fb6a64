//! The casts an f32 matmul costs (docs/whatif.md, "precision"): a matmul that reads bf16
//! values in f32 needs them widened first, and one whose f32 result is wanted in bf16 needs
//! it narrowed after; with bf16 operands the matmul reads the narrow values and writes the
//! narrow result itself (f32 accumulation), and those kernels go. A cast is one only when
//! every kernel on its other side is such a matmul: a widened value another op also reads
//! stays.

use rustc_hash::FxHashSet;

use super::HloModuleInfo;
use super::cost::{Cost, Math, ModuleCosts};
use super::deps::Dependencies;

/// Ops that launch no kernel: a value passes through them unchanged.
const PASS_THROUGH: &[&str] = &["get-tuple-element", "tuple", "bitcast"];

/// The names of the module's kernels that only cast values to or from f32 for matmuls on
/// the FP32 units, sorted; empty without costs or edges.
pub fn casts_around_f32_matmuls(m: &HloModuleInfo) -> Vec<String> {
    let (Ok(costs), Some(deps)) = (m.costs(), m.deps.as_deref()) else {
        return Vec::new();
    };
    let through = |n: &str| {
        m.instruction(n)
            .is_some_and(|i| PASS_THROUGH.contains(&i.opcode()))
    };
    casts(costs, deps, through)
}

fn f32_matmul(c: &Cost) -> bool {
    c.math == Some(Math::F32) && c.matmul_flops > 0.0
}

/// The kernels that the instruction `name` reads from (`up`) or that read it, seen through
/// the ops that launch none.
fn kernels<'d>(
    deps: &'d Dependencies,
    name: &str,
    up: bool,
    through: &impl Fn(&str) -> bool,
) -> Vec<&'d str> {
    let next = |n: &str| {
        if up { deps.needs(n) } else { deps.needed_by(n) }
    };
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    let mut stack = next(name);
    let mut out = Vec::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        if through(n) {
            stack.extend(next(n));
        } else {
            out.push(n);
        }
    }
    out
}

fn casts(costs: &ModuleCosts, deps: &Dependencies, through: impl Fn(&str) -> bool) -> Vec<String> {
    let is = |n: &str, f: &dyn Fn(&Cost) -> bool| costs.by_instruction.get(n).is_some_and(f);
    let matmul = |n: &str| is(n, &f32_matmul);
    let mut out: Vec<String> = Vec::new();
    let mut gemms: Vec<&str> = costs
        .by_instruction
        .iter()
        .filter(|(_, c)| f32_matmul(c))
        .map(|(n, _)| n.as_str())
        .collect();
    gemms.sort_unstable();
    for g in gemms {
        // Operands widened to f32 for it (and for nothing but such matmuls)…
        for p in kernels(deps, g, true, &through) {
            let widens = |c: &Cost| c.cast_bits.is_some_and(|(a, b)| a < b && b == 32);
            if is(p, &widens) && kernels(deps, p, false, &through).iter().all(|&u| matmul(u)) {
                out.push(p.to_string());
            }
        }
        // …and its result narrowed from f32 (a result of such matmuls alone).
        for u in kernels(deps, g, false, &through) {
            let narrows = |c: &Cost| c.cast_bits.is_some_and(|(a, b)| a == 32 && b < a);
            if is(u, &narrows) && kernels(deps, u, true, &through).iter().all(|&p| matmul(p)) {
                out.push(u.to_string());
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::super::deps::tests::comp;
    use super::*;

    fn cost(math: Option<Math>, matmul_flops: f64, cast_bits: Option<(u32, u32)>) -> Cost {
        Cost {
            flops: matmul_flops,
            matmul_flops,
            math,
            cast_bits,
            ..Default::default()
        }
    }

    /// x (bf16) → widen → gemm (f32) → gte → narrow → out; the weight w (f32) read as it is;
    /// `shared` widens y for the f32 gemm2 and for an add too; gemm3 (bf16) has a widened
    /// operand of its own; gemm2's result is narrowed by a fusion that also reads y.
    #[test]
    fn only_casts_that_serve_f32_matmuls_alone_go() {
        let deps = Dependencies::of(&[comp(
            1,
            &[
                ("x", "parameter", 1, &[], &[], &[]),
                ("w", "parameter", 2, &[], &[], &[]),
                ("widen", "fusion", 3, &[1], &[], &[]),
                ("gemm", "custom-call", 4, &[3, 2], &[], &[]),
                ("gte", "get-tuple-element", 5, &[4], &[], &[]),
                ("narrow", "fusion", 6, &[5], &[], &[]),
                ("y", "parameter", 7, &[], &[], &[]),
                ("shared", "fusion", 8, &[7], &[], &[]),
                ("gemm2", "custom-call", 9, &[8, 2], &[], &[]),
                ("add", "fusion", 10, &[8], &[], &[]),
                ("narrow2", "fusion", 11, &[9, 7], &[], &[]),
                ("widen3", "fusion", 12, &[1], &[], &[]),
                ("gemm3", "custom-call", 13, &[12, 2], &[], &[]),
            ],
        )]);
        let mut costs = ModuleCosts::default();
        let widen = Some((16, 32));
        for (n, c) in [
            ("widen", cost(None, 0.0, widen)),
            ("gemm", cost(Some(Math::F32), 1e9, None)),
            ("narrow", cost(None, 0.0, Some((32, 16)))),
            ("shared", cost(None, 0.0, widen)),
            ("gemm2", cost(Some(Math::F32), 1e9, None)),
            ("add", cost(None, 0.0, None)),
            ("narrow2", cost(None, 0.0, None)),
            ("widen3", cost(None, 0.0, widen)),
            ("gemm3", cost(Some(Math::Bf16), 1e9, None)),
        ] {
            costs.by_instruction.insert(n.into(), c);
        }
        let through = |n: &str| n == "gte";
        assert_eq!(casts(&costs, &deps, through), ["narrow", "widen"]);
        // A widening the other way round (f32 to f64) is not one the matmul makes.
        costs.by_instruction.get_mut("widen").unwrap().cast_bits = Some((32, 64));
        assert_eq!(casts(&costs, &deps, through), ["narrow"]);
    }
}
