//! What each HLO instruction of a module costs: floating-point operations, transcendental
//! operations and the bytes its kernel moves (docs/design.md, "Cost model"), read from the
//! after-optimizations `HloProto` as the module's decoder reads it (the fields it plans for the
//! cost model: windows, dimension numbers, library call targets and configs, precisions;
//! docs/design.md, "HLO fields").
//!
//! - cuDNN fused attention (`custom-call` to `__cudnn$fmha…`): from its score shape, mask
//!   and operands (`super::attention`); a backward call's recomputed scores are
//!   [`Cost::recomputed_flops`].
//! - `dot`: 2 × result elements × the product of the left operand's contracting dimensions
//!   (2·B·M·N·K). cuBLAS calls (`custom-call` to `__cublas$…`) the same, with their dimension
//!   numbers and precision from the GEMM backend config (their result is a tuple: the output,
//!   then a workspace, which is not counted).
//! - Convolutions (`convolution`, and cuDNN calls `__cudnn$conv…`): what the forward
//!   convolution costs, 2 × its output's elements × the filter's elements per output feature
//!   (window × input features per group); cuDNN's backward calls keep the forward dimension
//!   numbers, their operands say which shape is the forward output and which the filter.
//!   Padding is not subtracted, as textbook counts do not.
//! - Elementwise arithmetic: one per result element; transcendentals (exp, log, tanh,
//!   logistic, trigonometry, roots, powers, erf) counted apart, not as FLOPs; `reduce`: one
//!   per input element; `reduce-window`: one per result element and window position.
//! - Fusions and calls: the sum over their computations. Data movement (copy, transpose,
//!   slice, broadcast, ...) costs no FLOPs.
//! - Bytes: the instruction's operands plus its result (for a library call, the result's
//!   first element), i.e. the HBM traffic of one kernel that reads its inputs once.
//! - The unit the matmul FLOPs run on ([`Math`]): the operands' type and precision: bf16,
//!   f16, fp8 and int8 tensor cores; f32 at the default precision on TF32 tensor cores, at
//!   `HIGHEST` on the FP32 units.
//!
//! A shape that is absent or does not add up gives no cost for that instruction and a note,
//! never a guessed count.

use std::collections::HashMap;

use anyhow::{Result, anyhow, bail};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use super::decoded::{Computation, Instruction, Shape};

/// The units a matmul's FLOPs run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Math {
    Fp8,
    Int8,
    Bf16,
    F16,
    Tf32,
    F32,
    F64,
}

/// Why an op executes FLOPs beyond the model's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Beyond {
    /// Recomputed as a whole (XLA's rematerialisation, `jax.checkpoint`).
    Rematerialised,
    /// A flash attention backward's recomputed scores.
    AttentionScores,
    /// A ragged dot computed against all of its groups' weights (`super::ragged`).
    DenseGroups,
    /// A ragged dot's lowering whose groups its shapes do not show: counted as executed.
    UnknownGroups,
}

impl Beyond {
    /// What the extra FLOPs are, in a user's words.
    pub fn describe(self) -> &'static str {
        match self {
            Beyond::Rematerialised => {
                "recomputed by rematerialisation (jax.checkpoint, XLA's remat)"
            }
            Beyond::AttentionScores => "flash attention backward recomputing its scores",
            Beyond::DenseGroups => {
                "ragged_dot lowered to dense GEMMs over all groups (every row times every \
                 group's weights, masked)"
            }
            Beyond::UnknownGroups => "ragged_dot GEMMs whose groups the HLO shapes do not show",
        }
    }
}

/// What one instruction costs per execution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Floating-point operations (matmul and convolution ones included).
    pub flops: f64,
    /// Those of matmuls and convolutions, run on [`Cost::math`].
    pub matmul_flops: f64,
    pub transcendentals: f64,
    /// Of `matmul_flops`, those the op executes beyond the model's ([`Cost::beyond`] says
    /// why): hardware FLOPs, not model FLOPs.
    #[serde(default)]
    pub recomputed_flops: f64,
    /// Why the op executes more than the model's FLOPs, when it does by construction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond: Option<Beyond>,
    /// A kernel whose FLOPs nothing in the HLO says (a Pallas, Triton or Mosaic custom call,
    /// a foreign function): `flops` is 0 and not a count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flops_unknown: bool,
    /// Operands read plus result written.
    pub bytes: f64,
    pub math: Option<Math>,
    /// A kernel that only changes its operand's element type (a `convert`, or a fusion of
    /// nothing else but bitcasts and reshapes): bits per element read and written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cast_bits: Option<(u32, u32)>,
}

impl Cost {
    fn add(&mut self, o: &Cost) {
        self.flops += o.flops;
        self.matmul_flops += o.matmul_flops;
        self.transcendentals += o.transcendentals;
        self.recomputed_flops += o.recomputed_flops;
        self.beyond = self.beyond.or(o.beyond);
        self.flops_unknown |= o.flops_unknown;
        // The unit of the largest matmul share decides.
        if o.math.is_some() && (self.math.is_none() || o.matmul_flops > self.matmul_flops / 2.0) {
            self.math = o.math;
        }
    }
}

/// The costs of a module's instructions, by name, and what could not be costed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleCosts {
    pub by_instruction: HashMap<String, Cost>,
    pub notes: Vec<String>,
}

/// How many elements a shape holds (a tuple: all of its elements'); None for a negative
/// dimension.
fn elements(s: &Shape) -> Option<f64> {
    if !s.tuple_shapes.is_empty() {
        return s.tuple_shapes.iter().map(elements).sum();
    }
    s.dimensions
        .as_slice()
        .iter()
        .try_fold(1f64, |n, &d| (d >= 0).then(|| n * d as f64))
}

fn size_in_bytes(s: &Shape) -> Option<f64> {
    if !s.tuple_shapes.is_empty() {
        return s.tuple_shapes.iter().map(size_in_bytes).sum();
    }
    Some((elements(s)? * bits(s.element_type)? as f64 / 8.0).ceil())
}

/// The result a library call produces: its first element when it returns a tuple.
fn output(s: &Shape) -> &Shape {
    s.tuple_shapes.first().unwrap_or(s)
}

/// Bits per element of an XLA `PrimitiveType` (None: a token, tuple or unknown type).
fn bits(ty: i32) -> Option<u32> {
    Some(match ty {
        1 | 2 | 6 => 8,              // PRED, S8, U8
        3 | 7 | 10 | 16 => 16,       // S16, U16, F16, BF16
        4 | 8 | 11 => 32,            // S32, U32, F32
        5 | 9 | 12 | 15 => 64,       // S64, U64, F64, C64
        18 => 128,                   // C128
        19 | 20 | 23 | 24 | 25 => 8, // F8 variants
        21 | 22 => 4,                // S4, U4
        26 | 27 => 2,                // S2, U2
        28..=31 => 8,                // newer F8/F4 storage, counted as a byte
        _ => return None,
    })
}

/// Custom-call targets that do no floating-point work: sorts, random bits, layout and
/// placement markers.
const NO_FLOPS_TARGETS: &[&str] = &[
    "__cub$DeviceRadixSort",
    "cu_threefry2x32",
    "SliceToDynamic",
    "PadToStatic",
    "Sharding",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "MoveToHost",
    "MoveToDevice",
    "AllocateBuffer",
    "LayoutConstraint",
    "annotate_device_placement",
    "X64Combine",
    "X64SplitLow",
    "X64SplitHigh",
];

/// Instructions that never run as a kernel of their own: no cost is kept for them.
const NO_KERNEL: &[&str] = &[
    "parameter",
    "constant",
    "get-tuple-element",
    "tuple",
    "bitcast",
];

/// The cost of every instruction of a module, from its decoded computations.
pub(super) fn costs(computations: &[Computation<'_>]) -> ModuleCosts {
    let model = Model {
        shapes: computations
            .iter()
            .flat_map(|c| c.instructions.iter().map(|i| (i.id, &i.shape)))
            .collect(),
        computations: computations
            .iter()
            .map(|c| (c.id, c.instructions.as_slice()))
            .collect(),
        bitcasts: computations
            .iter()
            .flat_map(|c| c.instructions.iter())
            .filter(|i| i.opcode == "bitcast" || i.opcode == "reshape")
            .filter_map(|i| Some((i.id, *i.operand_ids.as_slice().first()?)))
            .collect(),
    };
    // Only instructions that can be a kernel of their own are kept: those of computations
    // run as such (the entry, loop bodies, branches, command buffers), not the parts of a
    // fusion or the combiners of reductions, which are costed within their caller.
    let inner: FxHashSet<i64> = computations
        .iter()
        .flat_map(|c| c.instructions.iter())
        .filter(|i| INLINED_CALLERS.contains(&&*i.opcode))
        .flat_map(|i| i.called_computation_ids.as_slice().iter().copied())
        .collect();
    let mut out = ModuleCosts::default();
    for c in computations.iter().filter(|c| !inner.contains(&c.id)) {
        for i in c.instructions.iter() {
            if NO_KERNEL.contains(&&*i.opcode) {
                continue;
            }
            match model.cost(i, 0) {
                Ok(mut c) => {
                    c.cast_bits = model.cast_bits(i);
                    out.by_instruction.insert(i.name.to_string(), c);
                }
                Err(e) => out.notes.push(format!("{}: {e}", i.name)),
            }
        }
    }
    out.notes.sort();
    out
}

/// Opcodes whose called computations are parts of their kernel, never kernels of their own.
pub const INLINED_CALLERS: &[&str] = &[
    "fusion",
    "reduce",
    "reduce-window",
    "scatter",
    "select-and-scatter",
    "sort",
    "map",
    "all-reduce",
    "all-reduce-start",
    "reduce-scatter",
];

struct Model<'m, 'a> {
    shapes: FxHashMap<i64, &'m Shape>,
    computations: FxHashMap<i64, &'m [Instruction<'a>]>,
    /// A bitcast's or reshape's operand, by the instruction's id.
    bitcasts: FxHashMap<i64, i64>,
}

const ELEMENTWISE: &[&str] = &[
    "add",
    "subtract",
    "multiply",
    "divide",
    "remainder",
    "maximum",
    "minimum",
    "negate",
    "abs",
    "sign",
    "compare",
    "select",
    "clamp",
    "and",
    "or",
    "xor",
    "not",
    "floor",
    "ceil",
    "round-nearest-afz",
    "round-nearest-even",
    "is-finite",
    "real",
    "imag",
    "complex",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "popcnt",
    "count-leading-zeros",
    "stochastic-convert",
];
const TRANSCENDENTAL: &[&str] = &[
    "exponential",
    "exponential-minus-one",
    "log",
    "log-plus-one",
    "tanh",
    "logistic",
    "sine",
    "cosine",
    "tan",
    "atan2",
    "sqrt",
    "rsqrt",
    "cbrt",
    "power",
    "erf",
];

/// The opcodes a fusion that only casts holds besides its converts: they move no data.
const CAST_ONLY: &[&str] = &["parameter", "convert", "bitcast", "reshape"];

impl Model<'_, '_> {
    /// Bits per element read and written by an instruction that only casts its one operand:
    /// a `convert`, or a fusion of converts, bitcasts and reshapes of one parameter.
    fn cast_bits(&self, i: &Instruction<'_>) -> Option<(u32, u32)> {
        let from = match &*i.opcode {
            "convert" => self.shape(*i.operand_ids.as_slice().first()?).ok()?,
            "fusion" => {
                let &[called] = i.called_computation_ids.as_slice() else {
                    return None;
                };
                let body = self.computations.get(&called)?;
                let only = body.iter().all(|x| CAST_ONLY.contains(&&*x.opcode));
                let mut params = body.iter().filter(|x| x.opcode == "parameter");
                let (Some(p), None) = (params.next(), params.next()) else {
                    return None;
                };
                if !only || !body.iter().any(|x| x.opcode == "convert") || !p.shape.decoded {
                    return None;
                }
                &p.shape
            }
            _ => return None,
        };
        if !from.tuple_shapes.is_empty() || !i.shape.tuple_shapes.is_empty() {
            return None;
        }
        Some((bits(from.element_type)?, bits(i.shape.element_type)?))
    }

    fn shape(&self, id: i64) -> Result<&Shape> {
        self.shapes
            .get(&id)
            .copied()
            .filter(|s| s.decoded)
            .ok_or_else(|| anyhow!("operand {id} has no shape"))
    }

    fn cost(&self, i: &Instruction<'_>, depth: u32) -> Result<Cost> {
        if depth > 16 {
            bail!("computations nested too deeply");
        }
        if !i.shape.decoded {
            bail!("no shape");
        }
        let mut c = Cost::default();
        let result = output(&i.shape);
        let result_elements =
            || elements(result).ok_or_else(|| anyhow!("a shape with negative dimensions"));
        let op = &*i.opcode;
        let target = &*i.cost.target;
        if op == "dot" || (op == "custom-call" && target.starts_with("__cublas$")) {
            let dims = if op == "dot" {
                GemmDims {
                    contracting: i
                        .cost
                        .lhs_contracting
                        .clone()
                        .ok_or_else(|| anyhow!("a dot without dimension numbers"))?,
                    batch: Vec::new(),
                    precision: i.cost.precision.clone(),
                }
            } else {
                gemm_config(&i.cost.backend_config)?
            };
            let operand = |k: usize| i.operand_ids.as_slice().get(k).copied();
            let lhs = self.shape(operand(0).ok_or_else(|| anyhow!("no operands"))?)?;
            let size = |ds: &[i64]| {
                ds.iter().try_fold(1f64, |k, &d| {
                    usize::try_from(d)
                        .ok()
                        .and_then(|d| lhs.dimensions.as_slice().get(d))
                        .map(|&n| k * n as f64)
                        .ok_or_else(|| anyhow!("dimension {d} not in the left operand"))
                })
            };
            let k = size(&dims.contracting)?;
            c.flops = 2.0 * result_elements()? * k;
            c.matmul_flops = c.flops;
            c.math = math(lhs.element_type, &dims.precision);
            let batch: Vec<i64> = dims
                .batch
                .iter()
                .filter_map(|&d| usize::try_from(d).ok())
                .filter_map(|d| lhs.dimensions.as_slice().get(d).copied())
                .collect();
            let source = |k: usize| {
                let from = self.bitcasts.get(&operand(k)?)?;
                self.shape(*from).ok()
            };
            match super::ragged::groups(&i.op_name, &batch, k, [source(0), source(1)]) {
                super::ragged::Groups::None => {}
                super::ragged::Groups::Dense(g) => {
                    c.recomputed_flops = c.flops * (1.0 - 1.0 / f64::from(g));
                    c.beyond = Some(Beyond::DenseGroups);
                }
                super::ragged::Groups::Unknown => c.beyond = Some(Beyond::UnknownGroups),
            }
        } else if op == "convolution" || (op == "custom-call" && target.starts_with("__cudnn$conv"))
        {
            // Every form costs what its forward convolution does: 2 × the forward output's
            // elements × the filter's elements per output feature (window × input features
            // per group). cuDNN's backward calls keep the forward window and dimension
            // numbers: the data gradient reads the forward output's gradient (operand 0)
            // and the filter; the filter gradient reads the input and the forward output's
            // gradient (operand 1) and writes the filter.
            let operand = |k: usize| -> Result<&Shape> {
                self.shape(
                    *i.operand_ids
                        .as_slice()
                        .get(k)
                        .ok_or_else(|| anyhow!("operand {k} missing"))?,
                )
            };
            let (forward_out, filter) = if target.contains("BackwardInput") {
                (operand(0)?, operand(1)?)
            } else if target.contains("BackwardFilter") {
                (operand(1)?, result)
            } else {
                (result, operand(1)?)
            };
            let out_features = i
                .cost
                .kernel_output_feature
                .and_then(|d| usize::try_from(d).ok())
                .and_then(|d| filter.dimensions.as_slice().get(d))
                .filter(|&&n| n > 0)
                .ok_or_else(|| anyhow!("a convolution without dimension numbers"))?;
            let per_output = elements(filter)
                .ok_or_else(|| anyhow!("a shape with negative dimensions"))?
                / *out_features as f64;
            let out =
                elements(forward_out).ok_or_else(|| anyhow!("a shape with negative dimensions"))?;
            c.flops = 2.0 * out * per_output;
            c.matmul_flops = c.flops;
            let lhs = operand(0)?;
            c.math = math(lhs.element_type, &i.cost.precision);
        } else if op == "custom-call" && super::attention::is_fused_attention(target) {
            let operands = i
                .operand_ids
                .as_slice()
                .iter()
                .take(3)
                .map(|&o| self.shape(o))
                .collect::<Result<Vec<&Shape>>>()?;
            let a = super::attention::cost(target, &i.cost.backend_config, &operands)?;
            c.flops = a.flops;
            c.matmul_flops = a.flops;
            c.recomputed_flops = a.flops - a.model_flops;
            if c.recomputed_flops > 0.0 {
                c.beyond = Some(Beyond::AttentionScores);
            }
            c.math = operands.first().and_then(|q| math(q.element_type, &[]));
        } else if op == "ragged-dot" {
            // A grouped GEMM of XLA's own: its dimension numbers are not read.
            bail!("a ragged-dot: its FLOPs are not counted (dimension numbers not read)");
        } else if op == "custom-call" && !NO_FLOPS_TARGETS.iter().any(|t| target.starts_with(t)) {
            // A kernel of the user's or of a library the model does not know: its bytes from
            // its operands, its FLOPs unknown (never a guess).
            c.flops_unknown = true;
        } else if op == "fusion" || op == "call" || op == "async-start" {
            for comp in i.called_computation_ids.as_slice() {
                for inner in self.computations.get(comp).copied().unwrap_or_default() {
                    c.add(&self.cost(inner, depth + 1)?);
                }
            }
        } else if ELEMENTWISE.contains(&op) {
            c.flops = result_elements()?;
        } else if TRANSCENDENTAL.contains(&op) {
            c.transcendentals = result_elements()?;
        } else if op == "reduce" {
            let first = i.operand_ids.as_slice().first();
            let input = self.shape(*first.ok_or_else(|| anyhow!("no operands"))?)?;
            c.flops = elements(input).unwrap_or(0.0);
        } else if op == "reduce-window" {
            c.flops = result_elements()?
                * i.cost
                    .window
                    .iter()
                    .map(|&w| w.max(1) as f64)
                    .product::<f64>();
        }
        // Bytes moved by the instruction's own kernel (inside a fusion, what the fusion
        // reads and writes counts, not its parts).
        if depth == 0 {
            // A library call's extra results are its scratch space, not data it writes.
            let written = if op == "custom-call" {
                result
            } else {
                &i.shape
            };
            let mut bytes = size_in_bytes(written).unwrap_or(0.0);
            for o in i.operand_ids.as_slice() {
                bytes += self.shape(*o).ok().and_then(size_in_bytes).unwrap_or(0.0);
            }
            c.bytes = bytes;
        }
        Ok(c)
    }
}

/// The unit a matmul of operands of type `ty` at `precision` runs on.
fn math(ty: i32, precision: &[i64]) -> Option<Math> {
    Some(match ty {
        16 => Math::Bf16,
        10 => Math::F16,
        19 | 20 | 23 | 24 | 25 | 28..=31 => Math::Fp8,
        2 | 6 => Math::Int8,
        11 if precision.contains(&2) => Math::F32,
        11 => Math::Tf32,
        12 => Math::F64,
        _ => return None,
    })
}

/// A GEMM's dimension numbers and operand precisions.
struct GemmDims {
    /// The left operand's contracting and batch dimensions.
    contracting: Vec<i64>,
    batch: Vec<i64>,
    precision: Vec<i64>,
}

/// A cuBLAS call's dimension numbers and operand precisions, from its backend config (JSON:
/// `gemm_backend_config.dot_dimension_numbers`, `.precision_config`).
fn gemm_config(config: &[u8]) -> Result<GemmDims> {
    #[derive(Deserialize)]
    struct Outer {
        gemm_backend_config: Gemm,
    }
    #[derive(Deserialize)]
    struct Gemm {
        dot_dimension_numbers: Dims,
        #[serde(default)]
        precision_config: Option<Precision>,
    }
    #[derive(Deserialize)]
    struct Dims {
        #[serde(default)]
        lhs_contracting_dimensions: Vec<serde_json::Value>,
        #[serde(default)]
        lhs_batch_dimensions: Vec<serde_json::Value>,
    }
    #[derive(Deserialize)]
    struct Precision {
        #[serde(default)]
        operand_precision: Vec<String>,
    }
    let o: Outer = serde_json::from_slice(config)
        .map_err(|e| anyhow!("a cuBLAS call without a readable GEMM config ({e})"))?;
    let ints = |vs: &[serde_json::Value]| {
        vs.iter()
            .map(|v| match v {
                serde_json::Value::String(s) => s.parse().ok(),
                v => v.as_i64(),
            })
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| anyhow!("a cuBLAS call with unreadable dimension numbers"))
    };
    let d = &o.gemm_backend_config.dot_dimension_numbers;
    let precision = o
        .gemm_backend_config
        .precision_config
        .map(|p| {
            p.operand_precision
                .iter()
                .map(|s| match s.as_str() {
                    "HIGHEST" => 2,
                    "HIGH" => 1,
                    _ => 0,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(GemmDims {
        contracting: ints(&d.lhs_contracting_dimensions)?,
        batch: ints(&d.lhs_batch_dimensions)?,
        precision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::encoding::WireType;
    use std::path::Path;

    /// A length-delimited protobuf field.
    fn field(f: u32, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::encode_key(f, WireType::LengthDelimited, &mut out);
        prost::encoding::encode_varint(body.len() as u64, &mut out);
        out.extend_from_slice(body);
        out
    }

    /// A varint protobuf field.
    fn int(f: u32, v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::encode_key(f, WireType::Varint, &mut out);
        prost::encoding::encode_varint(v, &mut out);
        out
    }

    /// The costs the module decoder gives a dump, with the project's own schema.
    fn module_costs(pb: &[u8]) -> Result<ModuleCosts> {
        let schema = super::super::HloSchema::builtin()?;
        let module = super::super::decode_hlo(&schema, pb)?;
        Ok(module.costs().map_err(|e| anyhow!("{e}"))?.clone())
    }

    fn costs_of(capture: &str) -> ModuleCosts {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(capture)
            .join("dump_rep");
        let pb = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with("after_optimizations.hlo.pb"))
            .unwrap();
        module_costs(&std::fs::read(pb).unwrap()).unwrap()
    }

    /// Four 8192³ bf16 GEMMs (cuBLASLt custom calls) and their tanh fusions: exactly
    /// 2·8192³ each, on bf16 tensor cores; a tanh per element, counted apart.
    #[test]
    fn a_bf16_gemm_chain_counts_2mnk_per_matmul() {
        for capture in ["gemm-bf16-cmdbuf", "gemm-bf16-nocmdbuf"] {
            let c = costs_of(capture);
            let n = 8192f64;
            for cc in [
                "custom-call.0",
                "custom-call.1",
                "custom-call.2",
                "custom-call.3",
            ] {
                let g = &c.by_instruction[cc];
                assert_eq!(g.flops, 2.0 * n * n * n, "{capture} {cc}");
                assert_eq!(g.math, Some(Math::Bf16));
                // Two 8192² bf16 operands read, one written.
                assert_eq!(g.bytes, 3.0 * n * n * 2.0, "{capture} {cc}");
            }
            let total: f64 = [
                "custom-call.0",
                "custom-call.1",
                "custom-call.2",
                "custom-call.3",
            ]
            .iter()
            .map(|n| c.by_instruction[*n].matmul_flops)
            .sum();
            assert_eq!(total, 4.398046511104e12);
            let tanh = &c.by_instruction["gemm_fusion_dot_general.4"];
            assert_eq!((tanh.transcendentals, tanh.matmul_flops), (n * n, 0.0));
        }
    }

    /// The mixed step (tests/data/mixed-cmdbuf/README.md): a cuDNN convolution, an f32 GEMM at
    /// the default precision (TF32) and at HIGHEST (FP32), a batched bf16 GEMM.
    #[test]
    fn convolutions_and_precisions_follow_the_textbook() {
        let c = costs_of("mixed-nocmdbuf");
        let conv = &c.by_instruction["cudnn-conv.1"];
        assert_eq!(conv.flops, 2.0 * 64.0 * 56.0 * 56.0 * 128.0 * 128.0 * 9.0);
        assert_eq!(conv.math, Some(Math::Bf16));
        let f32 = 2.0 * 4096f64.powi(3);
        assert_eq!(c.by_instruction["custom-call.2"].flops, f32);
        assert_eq!(c.by_instruction["custom-call.2"].math, Some(Math::Tf32));
        assert_eq!(c.by_instruction["custom-call.3"].flops, f32);
        assert_eq!(c.by_instruction["custom-call.3"].math, Some(Math::F32));
        assert_eq!(
            c.by_instruction["custom-call.4"].flops,
            2.0 * 32.0 * 1024f64.powi(3)
        );
        assert_eq!(c.by_instruction["custom-call.4"].math, Some(Math::Bf16));
        assert!(c.notes.is_empty(), "{:?}", c.notes);
        // A fusion writing a tuple writes every element: y (2^28 f32) and the partial sums,
        // after reading x: 2 GiB and the partials.
        let y = &c.by_instruction["input_add_reduce_fusion"];
        assert!(
            y.bytes >= 2.0 * 1024f64.powi(3) && y.bytes < 2.0 * 1024f64.powi(3) + 1e6,
            "{}",
            y.bytes
        );
    }

    /// The CNN step's eleven cuDNN convolutions (tests/data/convnet-nocmdbuf/README.md):
    /// forward, data-gradient and filter-gradient calls each cost their forward convolution,
    /// 2·N·H·W·Cout·Cin·KH·KW, 4.735201e11 FLOP a step.
    #[test]
    fn backward_convolutions_cost_their_forward_convolution() {
        let c = costs_of("convnet-nocmdbuf");
        let conv = |cin: f64, cout: f64| 2.0 * 64.0 * 56.0 * 56.0 * cout * cin * 9.0;
        for (names, want) in [
            (
                &["cudnn-conv.4", "cudnn-conv-bw-filter.4"][..],
                conv(64.0, 64.0),
            ),
            (
                &[
                    "cudnn-conv.5",
                    "cudnn-conv-bw-filter.5",
                    "cudnn-conv-bw-input.5",
                ][..],
                conv(64.0, 128.0),
            ),
            (
                &[
                    "cudnn-conv.6",
                    "cudnn-conv-bw-filter.6",
                    "cudnn-conv-bw-input.4",
                ][..],
                conv(128.0, 128.0),
            ),
            (
                &[
                    "cudnn-conv.7",
                    "cudnn-conv-bw-filter.7",
                    "cudnn-conv-bw-input.3",
                ][..],
                conv(128.0, 128.0),
            ),
        ] {
            for n in names {
                let got = c.by_instruction[*n].flops;
                assert!((got - want).abs() <= 1e-9 * want, "{n}: {got} != {want}");
                assert_eq!(c.by_instruction[*n].math, Some(Math::Bf16), "{n}");
            }
        }
        let total: f64 = c
            .by_instruction
            .iter()
            .filter(|(n, _)| n.starts_with("cudnn-conv"))
            .map(|(_, c)| c.flops)
            .sum();
        assert!((total - 4.735201e11).abs() < 1e-6 * 4.735201e11, "{total}");
    }

    #[test]
    fn damaged_or_shapeless_dumps_give_notes_or_errors_never_counts() {
        let pb = std::fs::read(
            std::fs::read_dir(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/data/gemm-bf16-nocmdbuf/dump_rep"),
            )
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with("after_optimizations.hlo.pb"))
            .unwrap(),
        )
        .unwrap();
        // Truncated anywhere: an error or fewer costs, never a panic.
        for cut in (0..pb.len()).step_by(pb.len() / 97 + 1) {
            let _ = module_costs(&pb[..cut]);
        }
        assert!(module_costs(b"\x0a\xff\xff\xff\x0f").is_err());
        // A dot whose shape is absent, and one whose operand has none: notes naming them.
        let shape = [int(2, 16), int(3, 8), int(3, 8)].concat();
        let dims = field(1, &int(1, 1)[1..]);
        let no_shape = [
            field(1, b"dot.1"),
            field(2, b"dot"),
            field(30, &dims),
            int(35, 1),
        ]
        .concat();
        let no_operand = [
            field(1, b"dot.2"),
            field(2, b"dot"),
            field(3, &shape),
            field(30, &dims),
            int(35, 2),
            int(36, 7),
        ]
        .concat();
        let comp = [field(2, &no_shape), field(2, &no_operand), int(5, 1)].concat();
        let hlo = field(1, &field(3, &comp));
        let c = module_costs(&hlo).unwrap();
        assert!(c.by_instruction.is_empty(), "{:?}", c.by_instruction);
        assert_eq!(
            c.notes,
            ["dot.1: no shape", "dot.2: operand 7 has no shape"]
        );
    }

    /// A custom kernel's FLOPs are unknown (its bytes counted); a ragged-dot of XLA's own is a
    /// note; a dense lowering of `ragged_dot` counts its groups (the model corpus's MoE).
    #[test]
    fn custom_kernels_ragged_dots_and_their_dense_lowering() {
        let shape = [int(2, 16), int(3, 1024), int(3, 1024)].concat();
        let param = [
            field(1, b"p"),
            field(2, b"parameter"),
            field(3, &shape),
            int(35, 1),
        ]
        .concat();
        let pallas = [
            field(1, b"custom-call.1"),
            field(2, b"custom-call"),
            field(3, &shape),
            field(28, b"__gpu$xla.gpu.triton"),
            int(35, 2),
            int(36, 1),
        ]
        .concat();
        let sort = [
            field(1, b"custom-call.2"),
            field(2, b"custom-call"),
            field(3, &shape),
            field(28, b"__cub$DeviceRadixSort"),
            int(35, 3),
            int(36, 1),
        ]
        .concat();
        let ragged = [
            field(1, b"ragged-dot.1"),
            field(2, b"ragged-dot"),
            field(3, &shape),
            int(35, 4),
            int(36, 1),
        ]
        .concat();
        let comp = [
            field(2, &param),
            field(2, &pallas),
            field(2, &sort),
            field(2, &ragged),
            int(5, 1),
        ]
        .concat();
        let c = module_costs(&field(1, &field(3, &comp))).unwrap();
        let kernel = &c.by_instruction["custom-call.1"];
        assert!(kernel.flops_unknown && kernel.flops == 0.0, "{kernel:?}");
        assert_eq!(kernel.bytes, 4.0 * 1024.0 * 1024.0);
        assert!(!c.by_instruction["custom-call.2"].flops_unknown);
        assert_eq!(
            c.notes,
            ["ragged-dot.1: a ragged-dot: its FLOPs are not counted (dimension numbers not read)"]
        );
        // The MoE of the model corpus: 18 expert GEMMs over 8 groups, the routed FLOPs left.
        let ragged: Vec<Cost> = costs_of("models/moe-ragged")
            .by_instruction
            .into_values()
            .filter(|c| c.beyond.is_some())
            .collect();
        assert_eq!(ragged.len(), 18);
        for c in ragged {
            assert_eq!(c.beyond, Some(Beyond::DenseGroups));
            assert!((c.flops - 5.497558e11).abs() < 1e6, "{c:?}");
            assert!(
                (c.flops - c.recomputed_flops - 5.497558e11 / 8.0).abs() < 1e6,
                "{c:?}"
            );
        }
    }

    /// Every module of the H200 captures (2026 XLA) is costed without a note, and the train
    /// steps' matmuls are counted.
    #[test]
    fn the_h200_captures_are_costed_whole() {
        let Some(f) = crate::testutil::fixtures_dir() else {
            return;
        };
        let mut steps = 0;
        for e in walkdir::WalkDir::new(f.join("h200")) {
            let p = e.unwrap().into_path();
            if !p.to_string_lossy().ends_with("after_optimizations.hlo.pb") {
                continue;
            }
            let c = module_costs(&std::fs::read(&p).unwrap()).unwrap();
            assert!(c.notes.is_empty(), "{}: {:?}", p.display(), c.notes);
            let matmul: f64 = c.by_instruction.values().map(|c| c.matmul_flops).sum();
            if p.to_string_lossy().contains("train_step") {
                assert!(matmul > 0.0, "{}", p.display());
                steps += 1;
            }
        }
        assert!(steps > 0);
    }
}
