//! What may run beside what in a module: its instructions' data edges (operands) and control
//! edges (control predecessors), per computation, and which instruction calls each
//! computation (docs/design.md, "HLO fields"). Two instructions of one computation can run
//! at the same time when neither reaches the other along these edges; an instruction of a
//! called computation is placed by the instruction that calls it.

use rustc_hash::{FxHashMap, FxHashSet};

use super::decoded::Computation;

const NONE: u32 = u32::MAX;

/// A module's dependency graph, by instruction name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dependencies {
    index: FxHashMap<Box<str>, u32>,
    /// Per instruction: its name.
    names: Vec<Box<str>>,
    /// Per instruction: its computation (position in the module), what it needs (operands
    /// and control predecessors in its computation), what needs it, and the instruction that
    /// calls its computation (`NONE` for the entry and unreached ones).
    computation: Vec<u32>,
    needs: Vec<Vec<u32>>,
    needed_by: Vec<Vec<u32>>,
    caller: Vec<u32>,
    /// An asynchronous op's other half: a `-done`'s `-start` and the start's done.
    pair: Vec<u32>,
}

/// What an instruction is tied to: per computation on its chain of callers, the instructions
/// that it (or the caller standing for it) reaches or is reached by, itself included.
#[derive(Debug, Clone, Default)]
pub struct Tied {
    computations: Vec<u32>,
    tied: FxHashSet<u32>,
}

impl Dependencies {
    pub(super) fn of(computations: &[Computation<'_>]) -> Dependencies {
        let total: usize = computations.iter().map(|c| c.instructions.len()).sum();
        let mut d = Dependencies {
            index: FxHashMap::default(),
            names: Vec::with_capacity(total),
            computation: Vec::with_capacity(total),
            needs: vec![Vec::new(); total],
            needed_by: vec![Vec::new(); total],
            caller: vec![NONE; total],
            pair: vec![NONE; total],
        };
        let mut by_id: FxHashMap<(usize, i64), u32> = FxHashMap::default();
        let mut computation_of: FxHashMap<i64, usize> = FxHashMap::default();
        // Each computation's instructions lie at `offsets[c]..offsets[c + 1]`.
        let mut offsets = vec![0u32];
        for (ci, c) in computations.iter().enumerate() {
            computation_of.insert(c.id, ci);
            for i in &c.instructions {
                let at = d.computation.len() as u32;
                d.index.insert(i.name.as_ref().into(), at);
                d.names.push(i.name.as_ref().into());
                by_id.insert((ci, i.id), at);
                d.computation.push(ci as u32);
            }
            offsets.push(d.computation.len() as u32);
        }
        let mut at = 0usize;
        for (ci, c) in computations.iter().enumerate() {
            for i in &c.instructions {
                let me = at as u32;
                let edges = i.operand_ids.as_slice().iter();
                for id in edges.chain(i.control_predecessor_ids.as_slice()) {
                    if let Some(&p) = by_id.get(&(ci, *id)) {
                        d.needs[at].push(p);
                        d.needed_by[p as usize].push(me);
                    }
                }
                if i.opcode.ends_with("-done")
                    && let Some(&start) = i
                        .operand_ids
                        .as_slice()
                        .first()
                        .and_then(|id| by_id.get(&(ci, *id)))
                {
                    d.pair[at] = start;
                    d.pair[start as usize] = me;
                }
                for cid in i.called_computation_ids.as_slice() {
                    if let Some(&callee) = computation_of.get(cid) {
                        for x in offsets[callee]..offsets[callee + 1] {
                            if d.caller[x as usize] == NONE {
                                d.caller[x as usize] = me;
                            }
                        }
                    }
                }
                at += 1;
            }
        }
        d
    }

    /// The instructions that the one named `name` needs (its operands and control
    /// predecessors), by name; empty for a name the module lacks.
    pub fn needs(&self, name: &str) -> Vec<&str> {
        self.edges(&self.needs, name)
    }

    /// The instructions that need the one named `name`, by name.
    pub fn needed_by(&self, name: &str) -> Vec<&str> {
        self.edges(&self.needed_by, name)
    }

    fn edges(&self, edges: &[Vec<u32>], name: &str) -> Vec<&str> {
        self.index.get(name).map_or_else(Vec::new, |&x| {
            edges[x as usize]
                .iter()
                .map(|&n| &*self.names[n as usize])
                .collect()
        })
    }

    /// What the instruction named `name` is tied to; None for a name the module lacks.
    pub fn tied(&self, name: &str) -> Option<Tied> {
        let mut x = *self.index.get(name)?;
        let mut out = Tied::default();
        loop {
            let mut seeds = vec![x];
            if self.pair[x as usize] != NONE {
                seeds.push(self.pair[x as usize]);
            }
            // What it needs, and what needs it, each walked on its own.
            for edges in [&self.needs, &self.needed_by] {
                let mut seen: FxHashSet<u32> = seeds.iter().copied().collect();
                let mut stack = seeds.clone();
                while let Some(n) = stack.pop() {
                    for &m in &edges[n as usize] {
                        if seen.insert(m) {
                            stack.push(m);
                        }
                    }
                }
                out.tied.extend(seen);
            }
            out.computations.push(self.computation[x as usize]);
            x = self.caller[x as usize];
            if x == NONE {
                return Some(out);
            }
        }
    }

    /// Whether the instruction named `name` can run beside the one `tied` describes: None when
    /// the module lacks the name or the two share no computation on their chains of callers.
    pub fn beside(&self, tied: &Tied, name: &str) -> Option<bool> {
        let mut x = *self.index.get(name)?;
        loop {
            if tied.computations.contains(&self.computation[x as usize]) {
                return Some(!tied.tied.contains(&x));
            }
            x = self.caller[x as usize];
            if x == NONE {
                return None;
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::decoded::{Computation, Instruction, IntList};
    use super::*;

    fn ints(v: &[i64]) -> IntList {
        let mut l = IntList::default();
        for &x in v {
            l.push(x);
        }
        l
    }

    /// (name, opcode, id, operands, control predecessors, called computations)
    pub(in super::super) type I = (
        &'static str,
        &'static str,
        i64,
        &'static [i64],
        &'static [i64],
        &'static [i64],
    );

    pub(in super::super) fn comp(id: i64, v: &[I]) -> Computation<'static> {
        Computation {
            id,
            instructions: v
                .iter()
                .map(|&(name, opcode, id, ops, ctrl, calls)| Instruction {
                    name: name.into(),
                    opcode: opcode.into(),
                    id,
                    operand_ids: ints(ops),
                    control_predecessor_ids: ints(ctrl),
                    called_computation_ids: ints(calls),
                    ..Default::default()
                })
                .collect(),
        }
    }

    /// The entry: p → gemm1 → ar-start → ar-done → gemm2; p → other (independent of the
    /// all-reduce) → fusion calling computation 2 (f1 → f2); `late` after the done by a
    /// control edge only.
    fn module() -> Dependencies {
        Dependencies::of(&[
            comp(
                1,
                &[
                    ("p", "parameter", 1, &[], &[], &[]),
                    ("gemm1", "custom-call", 2, &[1], &[], &[]),
                    ("ar-start", "all-reduce-start", 3, &[2], &[], &[]),
                    ("other", "custom-call", 4, &[1], &[], &[]),
                    ("fusion", "fusion", 5, &[4], &[], &[2]),
                    ("ar-done", "all-reduce-done", 6, &[3], &[], &[]),
                    ("gemm2", "custom-call", 7, &[6], &[], &[]),
                    ("late", "copy", 8, &[1], &[6], &[]),
                ],
            ),
            comp(
                2,
                &[
                    ("f1", "multiply", 1, &[], &[], &[]),
                    ("f2", "add", 2, &[1], &[], &[]),
                ],
            ),
        ])
    }

    #[test]
    fn what_neither_reaches_runs_beside_an_async_pair() {
        let d = module();
        let t = d.tied("ar-done").unwrap();
        // Its producer chain and consumers (through the start/done pair) are tied to it.
        for n in ["p", "gemm1", "ar-start", "gemm2"] {
            assert_eq!(d.beside(&t, n), Some(false), "{n}");
        }
        // A control edge ties as much as a data edge.
        assert_eq!(d.beside(&t, "late"), Some(false));
        assert_eq!(d.beside(&t, "other"), Some(true));
        // An instruction of a called computation stands where its caller does.
        assert_eq!(d.beside(&t, "f2"), Some(true));
        assert_eq!(d.beside(&t, "nowhere"), None);
        assert!(d.tied("nowhere").is_none());
    }

    #[test]
    fn inside_a_called_computation_its_own_edges_count_then_the_caller_s() {
        let d = module();
        let t = d.tied("f1").unwrap();
        assert_eq!(d.beside(&t, "f2"), Some(false));
        // In the entry, f1 is the fusion: `other` feeds it, the all-reduce does not.
        assert_eq!(d.beside(&t, "other"), Some(false));
        assert_eq!(d.beside(&t, "ar-start"), Some(true));
    }
}
