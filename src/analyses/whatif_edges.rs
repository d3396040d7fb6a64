//! What could hide a collective's exposed time (docs/whatif.md): computation of the same
//! module execution that neither needs the collective nor is needed by it (the HLO's data and
//! control edges), and, for a collective that only its own producer and consumer surround,
//! the half of them a split into two micro-batches would run beside it.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::formats::hlo::{HloInstructionInfo, HloModuleInfo};
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

/// The steady thunks that are matmuls, and the programs they ran in, as (program id, thunk).
#[derive(Default)]
pub struct OpSets<'a> {
    matmuls: std::collections::BTreeSet<(&'a str, &'a str)>,
    programs: std::collections::BTreeSet<&'a str>,
}

impl<'a> OpSets<'a> {
    /// A steady thunk of `program` (`hlo`: whether its HLO is known), its instruction `i`.
    pub fn add(
        &mut self,
        hlo: bool,
        i: Option<&HloInstructionInfo>,
        program: &'a str,
        thunk: &'a str,
    ) {
        if !hlo {
            return;
        }
        self.programs.insert(program);
        if let Some(i) = i
            && crate::formats::hlo::library::op_class(i.opcode(), i.target())
                == crate::formats::hlo::library::OpClass::Matmul
        {
            self.matmuls.insert((program, thunk));
        }
    }

    /// The matmuls, and the casts the programs' f32 matmuls cost (once per program).
    #[allow(clippy::type_complexity)]
    pub fn finish<'m>(
        self,
        module_of: impl Fn(&str) -> Option<&'m HloModuleInfo>,
    ) -> (Vec<(String, String)>, Vec<(String, String)>) {
        let own = |(p, t): (&str, &str)| (p.to_string(), t.to_string());
        let casts = self
            .programs
            .iter()
            .filter_map(|&p| Some((p, module_of(p)?)))
            .flat_map(|(p, m)| {
                crate::formats::hlo::casts::casts_around_f32_matmuls(m)
                    .into_iter()
                    .map(move |t| (p.to_string(), t))
            })
            .collect();
        (self.matmuls.into_iter().map(own).collect(), casts)
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
