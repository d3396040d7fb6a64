//! [`HloModuleInfo`]: what nsys-jax-pipe needs from one HLO module.

use std::sync::Arc;

use super::cost::ModuleCosts;
use super::decoded::StackFrameIndex;
use super::deps::Dependencies;
use super::heap::{HeapProfile, UsageSummary};
use super::instruction::HloInstructionInfo;

/// What nsys-jax-pipe needs from one HLO module.
#[derive(Debug, Clone, PartialEq)]
pub struct HloModuleInfo {
    pub name: String,
    pub id: i64,
    /// The module's `fingerprint_before_lhs` frontend attribute (docs/design.md, "Program ids").
    pub fingerprint: Option<String>,
    /// Every instruction of every computation, sorted by name (shared: a module that decodes
    /// like another, but for its frontend attributes, shares the other's instructions).
    pub instructions: Arc<Vec<HloInstructionInfo>>,
    pub stack_frames: Arc<StackFrameIndex>,
    /// The static heap from its buffer assignment (docs/design.md, "Memory"); filled by the
    /// reader of the dump, which also says why when it cannot be.
    pub heap: Option<HeapProfile>,
    pub heap_error: Option<String>,
    /// XLA's memory usage report of the module, when the dump has one.
    pub usage: Option<UsageSummary>,
    pub usage_error: Option<String>,
    /// What each instruction costs (docs/design.md, "Cost model"), found by the decoder
    /// (shared by the copies made of the module: other ranks' dumps that decode alike).
    pub costs: Option<Arc<ModuleCosts>>,
    /// What may run beside what (data and control edges), found by the decoder.
    pub deps: Option<Arc<Dependencies>>,
    /// The shapes of the entry computation's parameters, in order (`f32[8,64]`): what a
    /// caller passes, and what a new compilation of the same function usually changed.
    pub entry_parameters: Vec<String>,
}

impl HloModuleInfo {
    /// A module `m` (id 1) of these instructions and nothing else, for tests.
    #[cfg(test)]
    pub(crate) fn of_instructions(instructions: Vec<HloInstructionInfo>) -> HloModuleInfo {
        HloModuleInfo {
            name: "m".into(),
            id: 1,
            fingerprint: None,
            instructions: Arc::new(instructions),
            stack_frames: Default::default(),
            heap: None,
            heap_error: None,
            usage: None,
            usage_error: None,
            costs: None,
            deps: None,
            entry_parameters: Vec::new(),
        }
    }

    /// What each instruction costs; the error says why the module has no costs.
    pub fn costs(&self) -> Result<&ModuleCosts, &str> {
        self.costs
            .as_deref()
            .ok_or("the module was not decoded from a dump")
    }

    /// The instruction with this name.
    pub fn instruction(&self, name: &str) -> Option<&HloInstructionInfo> {
        self.position(name).map(|i| &self.instructions[i])
    }

    /// The index in [`HloModuleInfo::instructions`] of the instruction with this name.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.instructions
            .binary_search_by(|i| i.name_bytes().cmp(name.as_bytes()))
            .ok()
    }

    /// The Python stack of a 1-based frame id, outermost first, each frame written
    /// `file:line[:column][function]` (the column when known).
    pub fn frames(&self, frame_id: i64) -> Vec<String> {
        self.stack_with_columns(frame_id)
            .into_iter()
            .map(|(file, line, column, function)| match column {
                0 => format!("{file}:{line}[{function}]"),
                c => format!("{file}:{line}:{c}[{function}]"),
            })
            .collect()
    }

    /// The Python stack of a 1-based frame id as `(file, line, function)`, outermost first;
    /// empty for 0 or an unknown id.
    pub fn stack(&self, frame_id: i64) -> Vec<(String, i64, String)> {
        self.stack_with_columns(frame_id)
            .into_iter()
            .map(|(file, line, _, function)| (file, line, function))
            .collect()
    }

    /// The innermost frame of a 1-based frame id as `(file, line)` (None for 0, an unknown
    /// id or a frame without a location), without building the stack.
    pub fn innermost(&self, frame_id: i64) -> Option<(&str, i64)> {
        let nth = |len: usize, id: i64| {
            usize::try_from(id)
                .ok()?
                .checked_sub(1)
                .filter(|&i| i < len)
        };
        let index = &self.stack_frames;
        let frame = &index.frames[nth(index.frames.len(), frame_id)?];
        let loc = &index.file_locations[nth(index.file_locations.len(), frame.file_location_id)?];
        let file = &index.file_names[nth(index.file_names.len(), loc.file_name_id)?];
        Some((file.as_str(), loc.line))
    }

    fn stack_with_columns(&self, frame_id: i64) -> Vec<(String, i64, i64, String)> {
        fn nth<T>(items: &[T], id: i64) -> Option<&T> {
            usize::try_from(id)
                .ok()?
                .checked_sub(1)
                .and_then(|i| items.get(i))
        }
        let index = &self.stack_frames;
        let mut stack = Vec::new();
        let mut id = frame_id;
        // A well-formed index has no cycles; bound the walk anyway.
        while stack.len() < index.frames.len() {
            let Some(frame) = nth(&index.frames, id) else {
                break;
            };
            let (file, line, column, function) =
                match nth(&index.file_locations, frame.file_location_id) {
                    Some(loc) => (
                        nth(&index.file_names, loc.file_name_id)
                            .cloned()
                            .unwrap_or_default(),
                        loc.line,
                        loc.column,
                        nth(&index.function_names, loc.function_name_id)
                            .cloned()
                            .unwrap_or_default(),
                    ),
                    None => (String::new(), 0, 0, String::new()),
                };
            stack.push((file, line, column, function));
            id = frame.parent_frame_id;
        }
        stack.reverse();
        stack
    }
}
