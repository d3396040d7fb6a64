//! What a cuDNN fused attention call costs (`custom-call` to `__cudnn$fmha…`: forward,
//! backward, FP8 variants; docs/design.md, "Cost model"). Its FLOPs are nowhere in the HLO's
//! shapes: they come from its backend config (`cudnn_fmha_backend_config`) and its operands.
//!
//! - The score matrix is `intermediate_tensor_shape` = [B, H, Sq, Skv] (H: the query heads,
//!   so grouped-query attention counts by its query heads). Its (query, key) pairs computed:
//!   all Sq·Skv without a mask (a padding mask's lengths are not in the HLO: the whole
//!   rectangle, said in a note); with a causal mask the lower triangle, aligned at the top
//!   left as cuDNN's is, Σᵢ min(i + 1, Skv); with a sliding window of W keys as well,
//!   Σᵢ min(i + 1, W, Skv).
//! - Head sizes from the operands q, k, v (the first three of forward and backward calls):
//!   Dqk = |q| / (B·Sq·H), the key/value heads Hkv = |k| / (B·Skv·Dqk), Dv = |v| / (B·Skv·Hkv);
//!   operands whose sizes do not divide so contradict the target's layout: no cost, a note.
//! - Forward: Q·Kᵀ and P·V, 2·(Dqk + Dv) per pair and (batch, head): 4·B·H·pairs·D when
//!   Dqk = Dv = D (FlashAttention's count, Dao 2022).
//! - Backward: dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q — twice the forward, the model's
//!   FLOPs — and a flash kernel also recomputes S = Q·Kᵀ: 2.5 × the forward executed. The
//!   extra half forward is recomputed work (hardware FLOPs, not model FLOPs).

use anyhow::{Result, anyhow, bail};
use serde_json::Value;

use super::decoded::Shape;

/// What one call costs: the FLOPs it executes and, of those, the model's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct AttentionCost {
    pub flops: f64,
    pub model_flops: f64,
}

/// Whether a custom-call target is cuDNN fused attention.
pub(super) fn is_fused_attention(target: &str) -> bool {
    target.starts_with("__cudnn$fmha")
}

fn number(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        v => v.as_i64(),
    }
}

/// The cost of a call to `target` with this backend config and operands (q, k, v first).
pub(super) fn cost(target: &str, config: &[u8], operands: &[&Shape]) -> Result<AttentionCost> {
    let v: Value = serde_json::from_slice(config)
        .map_err(|e| anyhow!("a fused attention call without a readable config ({e})"))?;
    let c = &v["cudnn_fmha_backend_config"];
    let dims: Vec<i64> = c["intermediate_tensor_shape"]["dimensions"]
        .as_array()
        .map(|a| a.iter().filter_map(number).collect())
        .unwrap_or_default();
    let [b, h, sq, skv] = dims[..] else {
        bail!("a fused attention call without its score shape [B, H, Sq, Skv]");
    };
    if [b, h, sq, skv].iter().any(|&d| d <= 0) {
        bail!("a fused attention score shape with empty dimensions {dims:?}");
    }
    let [q, k, vv, ..] = operands else {
        bail!("a fused attention call without q, k and v operands");
    };
    let count = |s: &Shape| -> Result<i64> {
        s.dimensions
            .as_slice()
            .iter()
            .try_fold(1i64, |n, &d| n.checked_mul(d).filter(|_| d >= 0))
            .ok_or_else(|| anyhow!("an operand with negative dimensions"))
    };
    // A size that a product of known dimensions must divide exactly.
    let per = |total: i64, by: i64, what: &str| -> Result<i64> {
        if by > 0 && total % by == 0 && total / by > 0 {
            Ok(total / by)
        } else {
            bail!(
                "operands that contradict the score shape {dims:?} ({what}: {total} elements not a multiple of {by})"
            )
        }
    };
    let dqk = per(count(q)?, b * sq * h, "q")?;
    let hkv = per(count(k)?, b * skv * dqk, "k")?;
    let dv = per(count(vv)?, b * skv * hkv, "v")?;
    let mask = c["mask_type"].as_str().unwrap_or("NO_MASK");
    let window = number(&c["sliding_window_length"]).unwrap_or(0);
    let causal = mask.contains("CAUSAL");
    let pairs = if causal || window > 0 {
        let limit = if window > 0 { window.min(skv) } else { skv };
        causal_pairs(sq, limit)
    } else {
        (sq * skv) as f64
    };
    let forward = 2.0 * (b * h) as f64 * pairs * (dqk + dv) as f64;
    Ok(if target.contains("Backward") {
        AttentionCost {
            flops: 2.5 * forward,
            model_flops: 2.0 * forward,
        }
    } else {
        AttentionCost {
            flops: forward,
            model_flops: forward,
        }
    })
}

/// Σ_{i < sq} min(i + 1, limit): the pairs of a top-left causal mask with at most `limit`
/// keys a query.
fn causal_pairs(sq: i64, limit: i64) -> f64 {
    let full = sq.min(limit); // rows before the limit is reached: 1, 2, …, full
    let ramp = (full as f64) * (full as f64 + 1.0) / 2.0;
    ramp + ((sq - full).max(0) as f64) * limit as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(dims: &[i64]) -> Shape {
        let mut s = Shape::default();
        s.dimensions = dims.to_vec().into();
        s.decoded = true;
        s
    }

    fn config(dims: [i64; 4], mask: &str, window: i64) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"cudnn_fmha_backend_config": {
            "intermediate_tensor_shape": {"dimensions": dims.map(|d| d.to_string())},
            "mask_type": mask,
            "sliding_window_length": window.to_string(),
        }}))
        .unwrap()
    }

    /// The GPT capture's attention (`tests/data/models/gpt-cudnn/README.md`): B=8, S=2048,
    /// 16 heads of 128, causal: 1.375061e11 forward, 2.750121e11 backward model FLOPs and
    /// 3.437652e11 executed; without a mask, the whole rectangle.
    #[test]
    fn causal_attention_counts_the_lower_triangle() {
        let qkv = shape(&[8, 2048, 16, 128]);
        let ops = [&qkv, &qkv, &qkv];
        let dims = [8, 16, 2048, 2048];
        let f = cost("__cudnn$fmhaSoftmax", &config(dims, "CAUSAL", 0), &ops).unwrap();
        assert_eq!(f.flops, 4.0 * 8.0 * 16.0 * 128.0 * 2048.0 * 2049.0 / 2.0);
        assert_eq!(format!("{:.6e}", f.flops), "1.375061e11");
        let bwd = cost(
            "__cudnn$fmhaSoftmaxBackward",
            &config(dims, "CAUSAL", 0),
            &ops,
        )
        .unwrap();
        assert_eq!(format!("{:.6e}", bwd.model_flops), "2.750121e11");
        assert_eq!(format!("{:.6e}", bwd.flops), "3.437652e11");
        let full = cost("__cudnn$fmhaSoftmax", &config(dims, "NO_MASK", 0), &ops).unwrap();
        assert_eq!(full.flops, 4.0 * 8.0 * 16.0 * 128.0 * 2048.0 * 2048.0);
    }

    /// Grouped-query attention counts by its query heads; the key/value heads only size k
    /// and v. A sliding window of 256 keys counts a band.
    #[test]
    fn grouped_query_attention_and_a_sliding_window() {
        let q = shape(&[8, 2048, 16, 128]);
        let kv = shape(&[8, 2048, 4, 128]);
        let dims = [8, 16, 2048, 2048];
        let gqa = cost(
            "__cudnn$fmhaSoftmax",
            &config(dims, "CAUSAL", 0),
            &[&q, &kv, &kv],
        )
        .unwrap();
        assert_eq!(gqa.flops, 4.0 * 8.0 * 16.0 * 128.0 * 2048.0 * 2049.0 / 2.0);
        let band = cost(
            "__cudnn$fmhaSoftmax",
            &config(dims, "CAUSAL", 256),
            &[&q, &kv, &kv],
        )
        .unwrap();
        let pairs = 256.0 * 257.0 / 2.0 + (2048.0 - 256.0) * 256.0;
        assert_eq!(band.flops, 4.0 * 8.0 * 16.0 * 128.0 * pairs);
        assert_eq!(causal_pairs(4, 10), 10.0);
        assert_eq!(causal_pairs(4, 2), 1.0 + 2.0 + 2.0 + 2.0);
    }

    #[test]
    fn operands_that_contradict_the_layout_are_not_costed() {
        let q = shape(&[8, 2048, 16, 100]);
        let k = shape(&[8, 2048, 3, 128]);
        let dims = [8, 16, 2048, 2048];
        let e = cost(
            "__cudnn$fmhaSoftmax",
            &config(dims, "CAUSAL", 0),
            &[&q, &k, &k],
        )
        .unwrap_err();
        assert!(e.to_string().contains("contradict the score shape"), "{e}");
        let e = cost("__cudnn$fmhaSoftmax", b"{}", &[&q, &q, &q]).unwrap_err();
        assert!(e.to_string().contains("score shape"), "{e}");
        assert!(cost("__cudnn$fmhaSoftmax", b"not json", &[&q, &q, &q]).is_err());
    }
}
