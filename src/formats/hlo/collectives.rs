//! Communication analysis: classifying collectives and host-offload copies, and their sizes.

use super::decoded::{
    CommunicationInfo, Computation, HOST_MEMORY_SPACE, Instruction, ModuleParts, PRIMITIVE_BUFFER,
    PRIMITIVE_TUPLE, Shape,
};
use super::instruction::{HloInstructionInfo, InstructionText};
use super::instruction::{ModuleText, Rest, RunRef};
use super::module::HloModuleInfo;
use super::schema::HloSchema;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};

/// Classifies communication and assembles the summary; with `parallel`, sorts and copies on
/// rayon's threads.
pub(super) fn module_info(
    schema: &HloSchema,
    dump: &bytes::Bytes,
    parts: ModuleParts<'_>,
    parallel: bool,
) -> Result<HloModuleInfo> {
    use rayon::prelude::*;

    let ModuleParts {
        name,
        id,
        computations,
        stack_frames,
        fingerprint,
    } = parts;

    let costs = Arc::new(super::cost::costs(&computations));
    let total = computations.iter().map(|c| c.instructions.len()).sum();
    let mut communication = Vec::with_capacity(total);
    // Per instruction (flat index, computation by computation): the flat indices of the
    // instructions of the computations it calls, one level down, in proto order.
    let mut called: Vec<Vec<u32>> = Vec::with_capacity(total);
    {
        let analysis = Analysis::new(schema, &name, &computations);
        let mut offsets = Vec::with_capacity(computations.len());
        let mut at = 0u32;
        for c in &computations {
            offsets.push(at);
            at = at.saturating_add(u32::try_from(c.instructions.len()).unwrap_or(u32::MAX));
        }
        for instr in computations.iter().flat_map(|c| &c.instructions) {
            let mut list = Vec::new();
            for cid in instr.called_computation_ids.as_slice() {
                if let Some(&ci) = analysis.computation_index.get(cid) {
                    let n = u32::try_from(computations[ci].instructions.len()).unwrap_or(0);
                    list.extend(offsets[ci]..offsets[ci].saturating_add(n));
                }
            }
            called.push(list);
        }
        for (ci, computation) in computations.iter().enumerate() {
            for (ii, instr) in computation.instructions.iter().enumerate() {
                communication.push(
                    analysis.communication(Ref { ci, ii }).with_context(|| {
                        format!("HLO module {name}, instruction {}", instr.name)
                    })?,
                );
            }
        }
    }

    // The order by name (then position), from small keys rather than the instructions. The
    // first 16 bytes of a name (zero-padded, as a number) order names as the names do, and
    // settle most comparisons without reading the name.
    let order: Vec<u32> = {
        let mut keys: Vec<(u128, &str, u32)> = Vec::with_capacity(total);
        for instr in computations.iter().flat_map(|c| &c.instructions) {
            let mut prefix = [0u8; 16];
            let len = instr.name.len().min(prefix.len());
            prefix[..len].copy_from_slice(&instr.name.as_bytes()[..len]);
            let index = u32::try_from(keys.len()).unwrap_or(u32::MAX);
            keys.push((u128::from_be_bytes(prefix), &instr.name, index));
        }
        if parallel {
            keys.par_sort_unstable();
        } else {
            keys.sort_unstable();
        }
        keys.into_iter().map(|(_, _, i)| i).collect()
    };
    // Where each instruction (by its position in the computations) lands in the order.
    let mut position = vec![0u32; total];
    for (sorted, &i) in order.iter().enumerate() {
        if let Some(p) = position.get_mut(i as usize) {
            *p = sorted as u32;
        }
    }
    // First, in the computations' order (reading each instruction once, in memory order): the
    // spans of its strings in `dump` (the bytes `parts` borrow from), and its other scalars.
    let mut strings = ModuleText::new(dump);
    let mut placed = Vec::with_capacity(total);
    for instr in computations.iter().flat_map(|c| &c.instructions) {
        let text = InstructionText {
            name: &instr.name,
            opcode: &instr.opcode,
            op_type: &instr.op_type,
            op_name: &instr.op_name,
            source_file: &instr.source_file,
            scheduling_name: &instr.scheduling_name,
            target: match instr.opcode.as_ref() {
                "fusion" => super::library::fusion_kind(&instr.cost.backend_config),
                _ => &instr.cost.target,
            },
        };
        placed.push((
            strings.place(&text),
            instr.source_line,
            instr.stack_frame_id,
        ));
    }
    let strings = strings.finish();
    // Then each instruction in its place in the name order, straight into the result, from
    // those compact records; each run of instructions with its own reference to the strings.
    let runs: Vec<RunRef> = (0..total.div_ceil(RUN)).map(|_| strings.run()).collect();
    let info = |(k, &i): (usize, &u32)| {
        let i = i as usize;
        let (spans, source_line, stack_frame_id) = placed[i];
        let rest = Rest {
            source_line,
            stack_frame_id,
            communication: communication[i].clone(),
            called: called[i].iter().map(|&f| position[f as usize]).collect(),
        };
        HloInstructionInfo::from_parts(&runs[k / RUN], spans, rest)
    };
    let instructions: Vec<HloInstructionInfo> = if parallel {
        order.par_iter().enumerate().map(info).collect()
    } else {
        order.iter().enumerate().map(info).collect()
    };

    Ok(HloModuleInfo {
        name,
        id,
        fingerprint,
        instructions: Arc::new(instructions),
        stack_frames: Arc::new(stack_frames),
        heap: None,
        heap_error: None,
        usage: None,
        usage_error: None,
        costs: Some(costs),
        deps: Some(Arc::new(super::deps::Dependencies::of(&computations))),
        entry_parameters: entry_parameters(&computations),
    })
}

/// The shapes of the entry computation's parameters: the computation no other calls (the last
/// such in proto order, where XLA puts the entry), its `parameter` instructions in the order
/// of the number in their names (`Arg_0.1`, `param_1`), else in proto order.
fn entry_parameters(computations: &[Computation<'_>]) -> Vec<String> {
    let called: HashSet<i64> = computations
        .iter()
        .flat_map(|c| c.instructions.iter())
        .flat_map(|i| i.called_computation_ids.as_slice().iter().copied())
        .collect();
    let Some(entry) = computations.iter().rev().find(|c| !called.contains(&c.id)) else {
        return Vec::new();
    };
    let mut params: Vec<(Option<u64>, String)> = entry
        .instructions
        .iter()
        .filter(|i| i.opcode == "parameter")
        .map(|i| {
            (
                parameter_number(&i.name),
                super::decoded::shape_text(&i.shape),
            )
        })
        .collect();
    let numbers: HashSet<u64> = params.iter().filter_map(|p| p.0).collect();
    if numbers.len() == params.len() {
        params.sort_by_key(|p| p.0);
    }
    params.into_iter().map(|p| p.1).collect()
}

/// The number a parameter's name carries: `Arg_3.17` → 3, `param_2` → 2, `p1.5` → 1.
fn parameter_number(name: &str) -> Option<u64> {
    let stem = name.split('.').next().unwrap_or(name);
    let digits: String = stem
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// Instructions per run: runs enough to share between threads, each with a reference count of
/// its own to the strings.
const RUN: usize = 4096;

/// A fast hasher for the analysis' integer keys (ids and indices).
#[derive(Default, Clone, Copy)]
pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub(super) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
pub(super) type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// Opcodes that are communication by themselves.
pub(super) const COMMUNICATION_OPCODES: &[&str] = &[
    "all-gather",
    "all-reduce",
    "all-to-all",
    "collective-broadcast",
    "collective-permute",
    "reduce-scatter",
    "all-gather-start",
    "all-reduce-start",
    "collective-permute-start",
];

/// Position of an instruction: computation index, instruction index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ref {
    pub(super) ci: usize,
    pub(super) ii: usize,
}

pub(super) struct Analysis<'a, 's> {
    pub(super) schema: &'a HloSchema,
    pub(super) module_name: &'a str,
    pub(super) computations: &'a [Computation<'s>],
    /// Computation id → index.
    pub(super) computation_index: IdMap<i64, usize>,
    /// (computation index, instruction id) → instruction index.
    pub(super) local: IdMap<(usize, i64), usize>,
    /// Instruction id → first instruction with it anywhere in the module.
    pub(super) global: IdMap<i64, Ref>,
}

impl<'a, 's> Analysis<'a, 's> {
    pub(super) fn new(
        schema: &'a HloSchema,
        module_name: &'a str,
        computations: &'a [Computation<'s>],
    ) -> Self {
        let total = computations.iter().map(|c| c.instructions.len()).sum();
        let mut local = IdMap::with_capacity_and_hasher(total, Default::default());
        let mut global = IdMap::with_capacity_and_hasher(total, Default::default());
        for (ci, c) in computations.iter().enumerate() {
            for (ii, instr) in c.instructions.iter().enumerate() {
                local.insert((ci, instr.id), ii);
                global.entry(instr.id).or_insert(Ref { ci, ii });
            }
        }
        let mut computation_index =
            IdMap::with_capacity_and_hasher(computations.len(), Default::default());
        for (ci, c) in computations.iter().enumerate() {
            computation_index.entry(c.id).or_insert(ci);
        }
        Analysis {
            schema,
            module_name,
            computations,
            computation_index,
            local,
            global,
        }
    }

    pub(super) fn get(&self, r: Ref) -> &'a Instruction<'s> {
        &self.computations[r.ci].instructions[r.ii]
    }

    /// Operand `k` of an instruction, found by id (its own computation first, then the module).
    pub(super) fn operand(&self, r: Ref, k: usize) -> Result<&'a Instruction<'s>> {
        let instr = self.get(r);
        let id = *instr
            .operand_ids
            .as_slice()
            .get(k)
            .ok_or_else(|| anyhow!("{} has no operand {k}", instr.opcode))?;
        let found = self
            .local
            .get(&(r.ci, id))
            .map(|&ii| Ref { ci: r.ci, ii })
            .or_else(|| self.global.get(&id).copied())
            .ok_or_else(|| anyhow!("operand id {id} is not an instruction of the module"))?;
        Ok(self.get(found))
    }

    /// `Some(is_device_to_host)` when the instruction is a host-offload copy.
    pub(super) fn host_offload(&self, r: Ref) -> Result<Option<bool>> {
        let instr = self.get(r);
        match instr.opcode.as_ref() {
            "dynamic-slice" => {
                let source = self.operand(r, 0)?;
                Ok((instr.shape.memory_space != source.shape.memory_space)
                    .then_some(instr.shape.memory_space == HOST_MEMORY_SPACE))
            }
            "dynamic-update-slice" => {
                let buffer = self.operand(r, 0)?;
                let update = self.operand(r, 1)?;
                let space = instr.shape.memory_space;
                Ok(
                    (space == buffer.shape.memory_space && update.shape.memory_space != space)
                        .then_some(space == HOST_MEMORY_SPACE),
                )
            }
            _ => Ok(None),
        }
    }

    pub(super) fn is_communication_itself(&self, r: Ref) -> Result<bool> {
        let instr = self.get(r);
        Ok(COMMUNICATION_OPCODES.contains(&instr.opcode.as_ref())
            || self.host_offload(r)?.is_some())
    }

    /// Collects communication instructions in the computations called by `r`, recursively;
    /// stops once two are found.
    pub(super) fn find_nested(
        &self,
        r: Ref,
        visited: &mut IdSet<usize>,
        found: &mut Vec<Ref>,
    ) -> Result<()> {
        for &cid in self.get(r).called_computation_ids.as_slice() {
            let ci = *self
                .computation_index
                .get(&cid)
                .ok_or_else(|| anyhow!("called computation id {cid} is not in the module"))?;
            if !visited.insert(ci) {
                continue;
            }
            for ii in 0..self.computations[ci].instructions.len() {
                let inner = Ref { ci, ii };
                if self.is_communication_itself(inner)? {
                    found.push(inner);
                }
                if found.len() > 1 {
                    return Ok(());
                }
                self.find_nested(inner, visited, found)?;
                if found.len() > 1 {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    pub(super) fn communication(&self, r: Ref) -> Result<Option<CommunicationInfo>> {
        let instr = self.get(r);
        if let Some(to_host) = self.host_offload(r)? {
            return self.host_offload_info(r, to_host).map(Some);
        }
        if COMMUNICATION_OPCODES.contains(&instr.opcode.as_ref()) {
            return self.collective_info(r).map(Some);
        }
        if instr.opcode != "async-start" && instr.opcode != "fusion" {
            return Ok(None);
        }
        let mut found = Vec::new();
        self.find_nested(r, &mut IdSet::default(), &mut found)?;
        match found.as_slice() {
            [] => Ok(None),
            [inner] => {
                let inner_instr = self.get(*inner);
                let info = match self.host_offload(*inner)? {
                    Some(to_host) => self.host_offload_info(*inner, to_host),
                    None => self.collective_info(*inner),
                };
                info.map(Some)
                    .with_context(|| format!("wrapped instruction {}", inner_instr.name))
            }
            [first, second, ..] => bail!(
                "{} {} in module {} wraps more than one communication instruction ({} and {})",
                instr.opcode,
                instr.name,
                self.module_name,
                self.get(*first).name,
                self.get(*second).name
            ),
        }
    }

    pub(super) fn host_offload_info(&self, r: Ref, to_host: bool) -> Result<CommunicationInfo> {
        let instr = self.get(r);
        let moved = if instr.opcode == "dynamic-update-slice" {
            &self.operand(r, 1)?.shape
        } else {
            &instr.shape
        };
        Ok(CommunicationInfo {
            collective: if to_host {
                "device-to-host"
            } else {
                "host-to-device"
            }
            .to_string(),
            message_size_bytes: self.shape_bytes(moved)?,
            collective_size: 1,
            bandwidth_correction: 1.0,
            bus_correction: 1.0,
        })
    }

    pub(super) fn collective_info(&self, r: Ref) -> Result<CommunicationInfo> {
        let instr = self.get(r);
        let collective = instr.opcode.strip_suffix("-start").unwrap_or(&instr.opcode);
        let size = collective_size(instr)?;
        let mut message_size_bytes = 0u64;
        for k in 0..instr.operand_ids.as_slice().len() {
            let bytes = self.shape_bytes(&self.operand(r, k)?.shape)?;
            message_size_bytes += if collective == "reduce-scatter" {
                bytes / u64::from(size)
            } else {
                bytes
            };
        }
        let n = f64::from(size);
        let (bandwidth_correction, bus_correction) = match collective {
            "all-gather" | "reduce-scatter" => (n, (n - 1.0) / n),
            "all-reduce" => (1.0, 2.0 * (n - 1.0) / n),
            "all-to-all" => (1.0, (n - 1.0) / n),
            _ => (1.0, 1.0),
        };
        Ok(CommunicationInfo {
            collective: collective.to_string(),
            message_size_bytes,
            collective_size: size,
            bandwidth_correction,
            bus_correction,
        })
    }

    /// Bytes of an array or tuple shape.
    pub(super) fn shape_bytes(&self, shape: &Shape) -> Result<u64> {
        if shape.element_type == PRIMITIVE_TUPLE || shape.element_type == PRIMITIVE_BUFFER {
            let mut total = 0u64;
            for element in &shape.tuple_shapes {
                total += self.shape_bytes(element)?;
            }
            return Ok(total);
        }
        let bits = element_bits(shape.element_type)
            .or_else(|| {
                self.schema
                    .primitive_type_name(shape.element_type)
                    .and_then(|name| bits_from_type_name(&name))
            })
            .ok_or_else(|| {
                let name = self
                    .schema
                    .primitive_type_name(shape.element_type)
                    .unwrap_or_else(|| "not in the schema".to_string());
                anyhow!(
                    "unknown element type {} ({name}): its size in bits is not known",
                    shape.element_type
                )
            })?;
        let mut elements = 1u128;
        for &d in shape.dimensions.as_slice() {
            let d = u128::try_from(d).map_err(|_| anyhow!("negative dimension {d}"))?;
            elements = elements.saturating_mul(d);
        }
        let bytes = elements.saturating_mul(bits.into()).div_ceil(8);
        Ok(u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

/// Size of the collective's groups (docs/design.md, "Formulas").
pub(super) fn collective_size(instr: &Instruction<'_>) -> Result<u32> {
    if instr.opcode.starts_with("collective-permute") {
        return Ok(2);
    }
    let size = instr
        .groups
        .size()
        .with_context(|| format!("{} {}", instr.opcode, instr.name))?;
    if size <= 0 {
        bail!("{} {} has collective size {size}", instr.opcode, instr.name);
    }
    u32::try_from(size).map_err(|_| anyhow!("collective size {size} is too large"))
}

/// Bits per element of an `xla.PrimitiveType` number; `None` when unknown.
pub(super) fn element_bits(element_type: i32) -> Option<u32> {
    Some(match element_type {
        1 => 8,                                     // PRED
        30 | 31 => 1,                               // S1, U1
        26 | 27 => 2,                               // S2, U2
        21 | 22 | 32 => 4,                          // S4, U4, F4E2M1FN
        35 | 36 => 6,                               // F6E3M2FN, F6E2M3FN
        2 | 6 => 8,                                 // S8, U8
        19 | 20 | 23 | 24 | 25 | 28 | 29 | 33 => 8, // F8*
        3 | 7 | 10 | 16 => 16,                      // S16, U16, F16, BF16
        4 | 8 | 11 => 32,                           // S32, U32, F32
        5 | 9 | 12 | 15 => 64,                      // S64, U64, F64, C64
        18 => 128,                                  // C128
        17 => 0,                                    // TOKEN: no data
        _ => return None,
    })
}

/// Bits per element from a type name that a newer schema knows (`F8…` → 8, `BF16` → 16,
/// `S4` → 4, ...): the digits after the leading letters.
pub(super) fn bits_from_type_name(name: &str) -> Option<u32> {
    if name == "PRED" || name.starts_with("F8") {
        return Some(8);
    }
    let digits: String = name
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|&b| b > 0)
}
