//! What could hide a collective's exposed time (docs/whatif.md): computation of the same
//! module execution that neither needs the collective nor is needed by it (the HLO's data and
//! control edges), and, for a collective that only its own producer and consumer surround,
//! the half of them a split into two micro-batches would run beside it.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::formats::hlo::{HloModuleInfo, library};
use crate::frames::views::ThunkView;

/// Of one execution's collectives' exposed time [ns].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overlap {
    /// What computation independent of each collective could hide (up to its own time).
    pub hideable_ns: i64,
    /// Of the rest, what a split into two micro-batches could hide: per collective, half of
    /// its producer's and half of its consumer's time, each up to what is left exposed.
    pub split_ns: i64,
    /// The exposed time of collectives whose edges are unknown (no HLO, a name it lacks).
    pub unknown_ns: i64,
}

/// Whether thunk `i` is a collective: as its program's HLO says, or, without the HLO (`hlo`
/// false), by its instruction's name: XLA names an instruction after its opcode
/// (`all-reduce-start.3`).
pub fn collective(t: &ThunkView, i: usize, hlo: bool) -> bool {
    t.communication.value(i) || (!hlo && named_collective(t.name.value(i)))
}

fn named_collective(name: &str) -> bool {
    const OPS: [&str; 9] = [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "ragged-all-to-all",
        "collective-permute",
        "collective-broadcast",
        "send",
        "recv",
    ];
    let base = name.split('.').next().unwrap_or(name);
    OPS.iter().any(|op| {
        base.strip_prefix(op)
            .is_some_and(|r| r.is_empty() || r == "-start" || r == "-done")
    })
}

/// What a thunk runs, found once per (program id, thunk) and then looked up.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// Whether its program's HLO is known.
    pub hlo: bool,
    /// Its op class and library in a few words ([`OpSets::kind`]).
    kind: u32,
    matmul: bool,
}

/// The steady thunks met so far, as (program id, thunk): what each runs.
#[derive(Default)]
pub struct OpSets<'a> {
    seen: FxHashMap<(&'a str, &'a str), Op>,
    kinds: Vec<String>,
}

impl<'a> OpSets<'a> {
    /// What thunk `thunk` of program `program` runs (`module_of`: a program's HLO).
    pub fn of<'m>(
        &mut self,
        program: &'a str,
        thunk: &'a str,
        module_of: &impl Fn(&str) -> Option<&'m HloModuleInfo>,
    ) -> Op {
        if let Some(&op) = self.seen.get(&(program, thunk)) {
            return op;
        }
        let m = module_of(program);
        let i = m.and_then(|m| m.instruction(thunk));
        let kind = match i {
            Some(i) => library::describe(i.opcode(), i.target()),
            None if m.is_none() => "[no HLO]".into(),
            None => "[not an instruction]".into(),
        };
        let at = match self.kinds.iter().position(|k| *k == kind) {
            Some(at) => at,
            None => {
                self.kinds.push(kind);
                self.kinds.len() - 1
            }
        };
        let op = Op {
            hlo: m.is_some(),
            kind: at as u32,
            matmul: i.is_some_and(|i| {
                library::op_class(i.opcode(), i.target()) == library::OpClass::Matmul
            }),
        };
        self.seen.insert((program, thunk), op);
        op
    }

    /// What an op runs, in a few words ([`library::describe`]: `cuDNN fused attention`,
    /// `NCCL all-reduce`; `[no HLO]` without its program's HLO).
    pub fn kind(&self, op: Op) -> &str {
        &self.kinds[op.kind as usize]
    }

    /// The matmuls met, and the casts their programs' f32 matmuls cost (once per program),
    /// sorted.
    #[allow(clippy::type_complexity)]
    pub fn finish<'m>(
        self,
        module_of: impl Fn(&str) -> Option<&'m HloModuleInfo>,
    ) -> (Vec<(String, String)>, Vec<(String, String)>) {
        let own = |(p, t): (&str, &str)| (p.to_string(), t.to_string());
        let mut matmuls: Vec<(String, String)> = Vec::new();
        let mut programs: Vec<&str> = Vec::new();
        for (&(p, t), op) in &self.seen {
            if op.matmul {
                matmuls.push(own((p, t)));
            }
            if op.hlo {
                programs.push(p);
            }
        }
        programs.sort_unstable();
        programs.dedup();
        matmuls.sort_unstable();
        let casts = programs
            .into_iter()
            .filter_map(|p| Some((p, module_of(p)?)))
            .flat_map(|(p, m)| {
                crate::formats::hlo::casts::casts_around_f32_matmuls(m)
                    .into_iter()
                    .map(move |t| (p.to_string(), t))
            })
            .collect();
        (matmuls, casts)
    }
}

/// How one collective relates to the computation of its program, by the program's interned
/// thunk names: those it could run beside and those it is tied to.
struct Relation {
    beside: Vec<u32>,
    tied: FxHashSet<u32>,
}

/// Per module execution (device, program id, execution). The relations between a program's
/// collectives and its computation are worked out once per program, not per execution: per
/// execution only the durations are summed.
pub fn overlaps<'a, 'm>(
    t: &ThunkView<'a>,
    module_of: impl Fn(&str) -> Option<&'m HloModuleInfo>,
) -> BTreeMap<(i32, &'a str, i32), Overlap> {
    let mut groups: BTreeMap<(i32, &str, i32), Vec<usize>> = BTreeMap::new();
    for i in 0..t.rows {
        let key = (
            t.device.value(i),
            t.program_id.value(i),
            t.program_execution.value(i),
        );
        groups.entry(key).or_default().push(i);
    }
    let exposed = |i: usize| (t.dur.value(i) - t.dur_hidden.value(i)).max(0);
    // Per program: whether it has its HLO, and its computation thunks' names, interned.
    let mut hlo: FxHashMap<&str, bool> = FxHashMap::default();
    let mut names: FxHashMap<&str, FxHashMap<&str, u32>> = FxHashMap::default();
    for (&(_, program, _), rows) in &groups {
        let known = *hlo
            .entry(program)
            .or_insert_with(|| module_of(program).is_some());
        let ids = names.entry(program).or_default();
        for &i in rows {
            if !collective(t, i, known) {
                let n = ids.len() as u32;
                ids.entry(t.name.value(i)).or_insert(n);
            }
        }
    }
    let mut relations: FxHashMap<(&str, &str), Option<Relation>> = FxHashMap::default();
    let mut out = BTreeMap::new();
    let mut dur: Vec<i64> = Vec::new();
    for (key, mut rows) in groups {
        let program = key.1;
        let known = hlo[program];
        let coll = |i: usize| collective(t, i, known);
        if !rows.iter().any(|&i| coll(i) && exposed(i) > 0) {
            continue;
        }
        rows.sort_by_key(|&i| t.start.value(i));
        let ids = &names[program];
        // This execution's computation time per interned name.
        dur.clear();
        dur.resize(ids.len(), 0);
        for &i in rows.iter().filter(|&&i| !coll(i)) {
            dur[ids[t.name.value(i)] as usize] += t.dur.value(i);
        }
        let deps = module_of(program).and_then(|m| m.deps.as_deref());
        let mut o = Overlap::default();
        for (k, &c) in rows.iter().enumerate() {
            let e = exposed(c);
            if !coll(c) || e == 0 {
                continue;
            }
            let name = t.name.value(c);
            let relation = relations.entry((program, name)).or_insert_with(|| {
                let deps = deps?;
                let tie = deps.tied(name)?;
                let mut r = Relation {
                    beside: Vec::new(),
                    tied: FxHashSet::default(),
                };
                for (n, &id) in ids {
                    match deps.beside(&tie, n) {
                        Some(true) => r.beside.push(id),
                        Some(false) => {
                            r.tied.insert(id);
                        }
                        None => {}
                    }
                }
                Some(r)
            });
            let Some(r) = relation.as_ref() else {
                o.unknown_ns += e;
                continue;
            };
            let free: i64 = r.beside.iter().map(|&id| dur[id as usize]).sum();
            let hidden = e.min(free);
            o.hideable_ns += hidden;
            let rest = e - hidden;
            if rest == 0 {
                continue;
            }
            // The nearest computation before it that it needs, and after it that needs it.
            let tied = |i: &&usize| !coll(**i) && r.tied.contains(&ids[t.name.value(**i)]);
            let producer = rows[..k]
                .iter()
                .rev()
                .find(tied)
                .map_or(0, |&i| t.dur.value(i));
            let consumer = rows[k + 1..]
                .iter()
                .find(tied)
                .map_or(0, |&i| t.dur.value(i));
            o.split_ns += (rest.min(producer) + rest.min(consumer)) / 2;
        }
        out.insert(key, o);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::named_collective;

    #[test]
    fn collectives_are_known_by_their_opcode_s_name() {
        for n in [
            "all-reduce.3",
            "all-reduce-start",
            "all-gather-done.12",
            "send.1",
            "recv-done",
        ] {
            assert!(named_collective(n), "{n}");
        }
        for n in [
            "fusion.3",
            "all-reducer",
            "sender.2",
            "custom-call.9",
            "all-reduce_fusion",
        ] {
            assert!(!named_collective(n), "{n}");
        }
    }
}
