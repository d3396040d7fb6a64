//! The groups a GEMM lowered from `jax.lax.ragged_dot` multiplies out (docs/design.md, "Cost
//! model"). A ragged dot multiplies each row of its left operand by the weights of the one
//! group it belongs to: 2·R·K·N model FLOPs for R rows, whatever the split into groups. Where
//! XLA has no grouped GEMM for it (XLA 0.11 on Hopper), it lowers the ragged dot to dense
//! cuBLAS GEMMs against every group's weights, the other groups' contributions masked to
//! zero: G times the model's FLOPs executed. The GEMMs keep JAX's op name
//! (`…/ragged_dot_general`, forward and `transpose(jvp(…))` alike), and their shapes say G:
//!
//! - batched over the groups (the weight gradient: [G, R, K]·[G, R, N] → [G, K, N]): G is
//!   the product of the batch dimensions;
//! - otherwise the rows widened to G blocks ([R, G·K]·[G·K, N]): the contraction is G·K, and
//!   one operand is a bitcast of [.., G, K] rows or of [G, K, N] weights, which says G.
//!
//! A ragged GEMM whose groups these shapes do not show keeps its executed FLOPs as the
//! model's, and the roofline says so.

use super::decoded::Shape;

/// What the shapes say of a GEMM with JAX's `ragged_dot_general` op name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Groups {
    /// Not a ragged dot's lowering.
    None,
    /// Computed densely over this many groups.
    Dense(u32),
    /// A ragged dot's lowering whose groups the shapes do not show.
    Unknown,
}

/// Whether an op name is JAX's `ragged_dot_general` primitive (its last path component).
pub(super) fn is_ragged(op_name: &str) -> bool {
    op_name.rsplit('/').next() == Some("ragged_dot_general")
}

fn dims(s: &Shape) -> &[i64] {
    s.dimensions.as_slice()
}

/// The groups of a GEMM with op name `op_name`: `batch` the sizes of the left operand's batch
/// dimensions, `contraction` the product of its contracting dimensions, `sources` the shapes
/// its two operands are bitcasts of (None: not a bitcast).
pub(super) fn groups(
    op_name: &str,
    batch: &[i64],
    contraction: f64,
    sources: [Option<&Shape>; 2],
) -> Groups {
    if !is_ragged(op_name) {
        return Groups::None;
    }
    let found = if !batch.is_empty() {
        let g: i64 = batch.iter().product();
        Some(g)
    } else {
        let [lhs, rhs] = sources.map(|s| s.map(dims));
        // Rows [.., G, K] seen as [.., G·K]: the two last dimensions multiply to the
        // contraction.
        let from_rows = lhs.and_then(|d| match d {
            [.., g, k] if d.len() >= 3 && (g * k) as f64 == contraction => Some(*g),
            _ => None,
        });
        // Weights [G, K, N] seen as [G·K, N].
        let from_weights = rhs.and_then(|d| match d {
            [g, k, _] if (g * k) as f64 == contraction => Some(*g),
            _ => None,
        });
        match (from_rows, from_weights) {
            (Some(a), Some(b)) if a != b => None,
            (a, b) => a.or(b),
        }
    };
    match found.and_then(|g| u32::try_from(g).ok()).filter(|&g| g > 1) {
        Some(g) => Groups::Dense(g),
        None => Groups::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::hlo::decoded::IntList;

    fn shape(d: &[i64]) -> Shape {
        Shape {
            element_type: 16,
            dimensions: IntList::from(d.to_vec()),
            decoded: true,
            ..Default::default()
        }
    }

    const FWD: &str = "jit(step)/jvp()/ragged_dot_general";
    const BWD: &str = "jit(step)/transpose(jvp())/ragged_dot_general";

    /// The three GEMMs XLA makes of one ragged dot of 16384 rows, 8 groups, 1024 → 2048.
    #[test]
    fn the_dense_lowering_shows_its_groups() {
        let rows = shape(&[16384, 8, 1024]);
        let weights = shape(&[8, 1024, 2048]);
        assert_eq!(
            groups(FWD, &[], 8192.0, [Some(&rows), Some(&weights)]),
            Groups::Dense(8)
        );
        // The data gradient: the weights transposed, seen through their bitcast only.
        let transposed = shape(&[8, 2048, 1024]);
        assert_eq!(
            groups(BWD, &[], 16384.0, [None, Some(&transposed)]),
            Groups::Dense(8)
        );
        // The weight gradient, batched over the groups.
        assert_eq!(groups(BWD, &[8], 16384.0, [None, None]), Groups::Dense(8));
        // Shapes that say nothing, or contradict each other.
        assert_eq!(groups(FWD, &[], 8192.0, [None, None]), Groups::Unknown);
        assert_eq!(
            groups(
                FWD,
                &[],
                8192.0,
                [Some(&shape(&[16384, 4, 2048])), Some(&weights)]
            ),
            Groups::Unknown
        );
        assert_eq!(groups(FWD, &[1], 8192.0, [None, None]), Groups::Unknown);
        // Not a ragged dot.
        assert_eq!(
            groups("jit(step)/dot_general", &[8], 1.0, [None, None]),
            Groups::None
        );
        assert!(!is_ragged("jit(step)/ragged_dot_general_extra"));
    }
}
