//! A changed module's time by what survives a recompilation: the line of the user's Python
//! code each op comes from (its innermost frame) and the JAX op path around it, with the op
//! classes and library calls of each side below (docs/compare.md, "Why"). HLO instruction
//! names do not survive: `custom-call.9` is another op in each program once the HLO changes,
//! so each side's ops are placed by that side's own HLO and the groups are matched by line.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{FamilyComparison, Row};
use crate::formats::hlo::HloModuleInfo;
use crate::formats::hlo::library::{OpClass, describe, op_class};

/// How many groups a module's explanation keeps.
pub const GROUPS: usize = 8;

/// What one side runs for a group, by kind: `cuDNN fused attention` ×4, 2.1 ms.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Kind {
    /// [`describe`]'s words.
    pub what: String,
    pub class: OpClass,
    /// The custom-call targets or fusion kinds among them (`__cudnn$fmhaSoftmax`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    pub ops: usize,
    /// Their median time per module execution, summed [ms].
    pub ms: f64,
}

/// The ops of one source line (or, without one, of one op class XLA added) on both sides.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SourceChange {
    /// `file:line` of the innermost Python frame (the file's name), or `(no source line)`.
    pub source: String,
    /// The frame's file as the HLO names it, and its line (empty, 0 without one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    #[serde(default)]
    pub line: i64,
    /// The line's code, from the archive's copy of the file (empty when it has none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub code: String,
    /// The JAX op path its ops share, without the `jit(…)` wrappers and transformations
    /// (`attn/dot_product_attention`); empty when they share none.
    pub op: String,
    pub base_ms: f64,
    pub head_ms: f64,
    pub delta_ms: f64,
    pub base: Vec<Kind>,
    pub head: Vec<Kind>,
}

/// A component of an op path without its transformations (`transpose(jvp(attn))` → `attn`);
/// None for a `jit(…)`/`pjit(…)` wrapper, which is the module itself.
fn component(c: &str) -> Option<&str> {
    if c.starts_with("jit(") || c.starts_with("pjit(") {
        return None;
    }
    let mut c = c;
    while let Some(open) = c.find('(')
        && c.ends_with(')')
        && c[..open]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        c = &c[open + 1..c.len() - 1];
    }
    (!c.is_empty()).then_some(c)
}

fn path(op_name: &str) -> Vec<&str> {
    op_name.split('/').filter_map(component).collect()
}

/// The path all of `names` share.
fn common<'a>(names: &[Vec<&'a str>]) -> Vec<&'a str> {
    let Some(first) = names.first() else {
        return Vec::new();
    };
    let n = names
        .iter()
        .map(|p| p.iter().zip(first).take_while(|(a, b)| a == b).count())
        .min()
        .unwrap_or(0);
    first[..n].to_vec()
}

const NO_LINE: &str = "(no source line)";

/// Where an op comes from: its innermost Python frame, else the source file and line its
/// metadata gives, as a key (`/path/gpt.py:133`), and its op path.
fn source_of(m: &HloModuleInfo, name: &str) -> Option<(String, String)> {
    let i = m.instruction(name)?;
    let loc = m
        .innermost(i.stack_frame_id)
        .map(|(f, l)| (f.to_string(), l))
        .or_else(|| {
            (!i.source_file().is_empty()).then(|| (i.source_file().to_string(), i.source_line))
        });
    let key = match loc {
        Some((f, l)) => format!("{f}:{l}"),
        None => NO_LINE.into(),
    };
    Some((key, i.op_name().to_string()))
}

/// The instruction names that name the same op in two programs of a module: the same
/// opcode, `custom_call_target`, JAX op (`op_name`, not empty) and source line
/// ([`source_of`]) on each side, and the same FLOPs and bytes (so the same shapes) where both
/// sides' costs are known. XLA numbers instructions anew when a program changes: other names
/// pair unrelated ops.
pub fn same_ops(base: &HloModuleInfo, head: &HloModuleInfo) -> BTreeSet<String> {
    let cost = |m: &HloModuleInfo, name: &str| {
        m.costs()
            .ok()
            .and_then(|c| c.by_instruction.get(name))
            .map(|c| (c.flops, c.bytes))
    };
    base.instructions
        .iter()
        .filter(|i| !i.op_name().is_empty())
        .filter(|i| {
            head.instruction(i.name()).is_some_and(|j| {
                j.opcode() == i.opcode()
                    && j.target() == i.target()
                    && source_of(head, j.name()) == source_of(base, i.name())
                    && match (cost(base, i.name()), cost(head, j.name())) {
                        (Some(a), Some(b)) => a == b,
                        _ => true,
                    }
            })
        })
        .map(|i| i.name().to_string())
        .collect()
}

#[derive(Default)]
struct Side {
    ms: f64,
    kinds: BTreeMap<String, Kind>,
    paths: Vec<String>,
}

/// One side's ops of a module, with their median time per execution [ms], into groups.
fn place(
    groups: &mut BTreeMap<String, (Side, Side)>,
    m: &HloModuleInfo,
    ops: &[(&str, f64)],
    head: bool,
) {
    for &(name, ms) in ops {
        let (source, op_name, what, class, target) = match (source_of(m, name), m.instruction(name))
        {
            (Some((s, o)), Some(i)) => {
                let (code, t) = (i.opcode(), i.target());
                (s, o, describe(code, t), op_class(code, t), t.to_string())
            }
            // Not an instruction of the module (a command buffer, a kernel XLA names itself).
            _ => (
                NO_LINE.into(),
                String::new(),
                format!("`{name}`"),
                OpClass::Other,
                String::new(),
            ),
        };
        // Ops without a line group by what they are: XLA added them (copies, collectives).
        let key = if source == NO_LINE {
            format!("{source} {what}")
        } else {
            source
        };
        let g = groups.entry(key).or_default();
        let side = if head { &mut g.1 } else { &mut g.0 };
        side.ms += ms;
        side.paths.push(op_name);
        let k = side.kinds.entry(what.clone()).or_insert(Kind {
            what,
            class,
            targets: Vec::new(),
            ops: 0,
            ms: 0.0,
        });
        k.ops += 1;
        k.ms += ms;
        if !target.is_empty() && !k.targets.contains(&target) {
            k.targets.push(target);
        }
    }
}

/// Each side's ops of the module `row` (by instruction name) with their median time per
/// execution: the ops both sides have by name and those one side has.
fn sides<'a>(
    row: &Row,
    thunks: &'a FamilyComparison,
) -> (Vec<(&'a str, f64)>, Vec<(&'a str, f64)>) {
    let (mut base, mut head) = (Vec::new(), Vec::new());
    for t in thunks
        .rows
        .iter()
        .filter(|t| t.module == row.module && t.program_id == row.program_id)
    {
        if let Some(b) = t.stat.base_median {
            base.push((t.key.as_str(), b));
        }
        if let Some(h) = t.stat.head_median {
            head.push((t.key.as_str(), h));
        }
    }
    let ids = [row.program_id.as_ref(), row.head_program_id.as_ref()];
    for o in thunks
        .one_sided
        .iter()
        .filter(|o| o.module == row.module && ids.contains(&o.program_id.as_ref()))
    {
        let m = o.median.unwrap_or(0.0);
        if o.head {
            head.push((o.key.as_str(), m));
        } else {
            base.push((o.key.as_str(), m));
        }
    }
    (base, head)
}

/// The module's changes by source line, the largest first; groups whose time changed by
/// less than `floor_ms` are left out.
pub fn by_source(
    row: &Row,
    thunks: &FamilyComparison,
    base: &HloModuleInfo,
    head: &HloModuleInfo,
    floor_ms: f64,
) -> Vec<SourceChange> {
    let (b, h) = sides(row, thunks);
    let mut groups: BTreeMap<String, (Side, Side)> = BTreeMap::new();
    place(&mut groups, base, &b, false);
    place(&mut groups, head, &h, true);
    let mut out: Vec<SourceChange> = groups
        .into_iter()
        .map(|(key, (b, h))| {
            let all: Vec<Vec<&str>> = b.paths.iter().chain(&h.paths).map(|p| path(p)).collect();
            let kinds = |s: Side| -> Vec<Kind> {
                let mut v: Vec<Kind> = s.kinds.into_values().collect();
                v.sort_by(|a, b| b.ms.total_cmp(&a.ms));
                v
            };
            let (file, line) = match key.rsplit_once(':') {
                Some((f, l)) if !key.starts_with(NO_LINE) => {
                    (f.to_string(), l.parse().unwrap_or(0))
                }
                _ => (String::new(), 0),
            };
            let source = match file.rsplit('/').next() {
                Some(short) if !file.is_empty() => format!("{short}:{line}"),
                _ => NO_LINE.into(),
            };
            SourceChange {
                source,
                file,
                line,
                code: String::new(),
                op: common(&all).join("/"),
                base_ms: b.ms,
                head_ms: h.ms,
                delta_ms: h.ms - b.ms,
                base: kinds(b),
                head: kinds(h),
            }
        })
        .filter(|g| g.delta_ms.abs() >= floor_ms)
        .collect();
    out.sort_by(|a, b| b.delta_ms.abs().total_cmp(&a.delta_ms.abs()));
    out.truncate(GROUPS);
    out
}

/// Kinds as words: `cuDNN fused attention ×4 (`__cudnn$fmhaSoftmax`)`; with `was` (the
/// other side's counts by kind), a count that changed as `Triton matmul ×4 → ×14`.
fn kinds_phrase(kinds: &[&Kind], was: &[Kind], forward: bool) -> String {
    let parts: Vec<String> = kinds
        .iter()
        .take(4)
        .map(|k| {
            let other = was.iter().find(|w| w.what == k.what).map_or(0, |w| w.ops);
            let mut s = match (other, forward) {
                (0, _) => format!("{} ×{}", k.what, k.ops),
                (o, true) => format!("{} ×{o} → ×{}", k.what, k.ops),
                (o, false) => format!("{} ×{} → ×{o}", k.what, k.ops),
            };
            if !k.targets.is_empty() && k.class != OpClass::Elementwise {
                s.push_str(&format!(
                    " ({})",
                    k.targets
                        .iter()
                        .take(2)
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            s
        })
        .collect();
    let more = kinds.len().saturating_sub(4);
    if more > 0 {
        format!("{} and {more} more kinds", parts.join(", "))
    } else {
        parts.join(", ")
    }
}

/// One group as a line: `gpt.py:133 dot_product_attention: +13.2 ms per execution — cuDNN
/// fused attention ×4 (…) replaced by Triton elementwise ×6, Triton matmul ×4`.
pub fn phrase(g: &SourceChange) -> String {
    let mut s = g.source.clone();
    if !g.code.is_empty() {
        s.push_str(&format!(" `{}`", g.code));
    } else if let Some(last) = g.op.rsplit('/').next().filter(|l| !l.is_empty()) {
        s.push_str(&format!(" `{last}`"));
    }
    s.push_str(&format!(
        ": {} per execution ({} → {})",
        crate::units::signed_ms(g.delta_ms),
        crate::units::duration_ms(g.base_ms),
        crate::units::duration_ms(g.head_ms)
    ));
    let count = |v: &[Kind], what: &str| v.iter().find(|k| k.what == what).map_or(0, |k| k.ops);
    // Kinds of which the head runs fewer, and more.
    let fewer: Vec<&Kind> = g
        .base
        .iter()
        .filter(|k| count(&g.head, &k.what) < k.ops)
        .collect();
    let more: Vec<&Kind> = g
        .head
        .iter()
        .filter(|k| count(&g.base, &k.what) < k.ops)
        .collect();
    if g.base.is_empty() {
        s.push_str(&format!(" — new: {}", kinds_phrase(&more, &g.base, true)));
    } else if g.head.is_empty() {
        s.push_str(&format!(
            " — gone: {}",
            kinds_phrase(&fewer, &g.head, false)
        ));
    } else if !fewer.is_empty() && !more.is_empty() {
        s.push_str(&format!(
            " — {} replaced by {}",
            kinds_phrase(&fewer, &g.head, false),
            kinds_phrase(&more, &g.base, true)
        ));
    } else if !fewer.is_empty() {
        s.push_str(&format!(
            " — fewer: {}",
            kinds_phrase(&fewer, &g.head, false)
        ));
    } else if !more.is_empty() {
        s.push_str(&format!(" — more: {}", kinds_phrase(&more, &g.base, true)));
    } else {
        // The same kinds of op, as many: the one whose time changed most.
        let top = g
            .head
            .iter()
            .map(|h| {
                let b = g
                    .base
                    .iter()
                    .find(|b| b.what == h.what)
                    .map_or(0.0, |b| b.ms);
                (h, h.ms - b)
            })
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()));
        if let Some((k, d)) = top {
            s.push_str(&format!(
                " — {} ×{} {}",
                k.what,
                k.ops,
                crate::units::signed_ms(d)
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_paths_lose_their_wrappers_and_transformations() {
        assert_eq!(
            path("jit(step)/jit(main)/transpose(jvp(loss_fn))/attn/dot_product_attention/exp"),
            vec!["loss_fn", "attn", "dot_product_attention", "exp"]
        );
        assert_eq!(
            common(&[
                path("jit(step)/jvp(loss_fn)/dot_product_attention/dot_general"),
                path("jit(step)/transpose(jvp(loss_fn))/dot_product_attention/exp"),
            ]),
            vec!["loss_fn", "dot_product_attention"]
        );
        assert_eq!(component("jit(step)"), None);
        assert_eq!(component("reduce_sum"), Some("reduce_sum"));
        // Parentheses that are not a transformation's stay.
        assert_eq!(component("a (b)"), Some("a (b)"));
    }

    #[test]
    fn a_group_replaced_by_other_kinds_says_what_replaced_what() {
        let k = |what: &str, class, ops, ms, t: &str| Kind {
            what: what.into(),
            class,
            targets: if t.is_empty() { vec![] } else { vec![t.into()] },
            ops,
            ms,
        };
        let mut g = SourceChange {
            source: "gpt.py:133".into(),
            file: "/w/gpt.py".into(),
            line: 133,
            code: String::new(),
            op: "loss_fn/dot_product_attention".into(),
            base_ms: 5.0,
            head_ms: 18.0,
            delta_ms: 13.0,
            base: vec![k(
                "cuDNN fused attention",
                OpClass::Attention,
                4,
                5.0,
                "__cudnn$fmhaSoftmax",
            )],
            head: vec![
                k(
                    "Triton elementwise",
                    OpClass::Elementwise,
                    6,
                    10.0,
                    "__triton",
                ),
                k(
                    "Triton matmul",
                    OpClass::Matmul,
                    4,
                    8.0,
                    "__triton_nested_gemm_fusion",
                ),
            ],
        };
        let mut moved = g.clone();
        moved
            .base
            .push(k("Triton matmul", OpClass::Matmul, 1, 1.0, ""));
        let p = phrase(&moved);
        assert!(
            p.contains("replaced by Triton elementwise ×6, Triton matmul ×1 → ×4 ("),
            "{p}"
        );
        let p = phrase(&g);
        assert!(
            p.starts_with("gpt.py:133 `dot_product_attention`: +13.0 ms per execution"),
            "{p}"
        );
        assert!(
            p.contains("cuDNN fused attention ×4 (`__cudnn$fmhaSoftmax`) replaced by Triton elementwise ×6, Triton matmul ×4"),
            "{p}"
        );
        g.code = "a = jax.nn.dot_product_attention(q, k, v)".into();
        assert!(
            phrase(&g).starts_with("gpt.py:133 `a = jax.nn.dot_product_attention(q, k, v)`: "),
            "{}",
            phrase(&g)
        );
    }
}
