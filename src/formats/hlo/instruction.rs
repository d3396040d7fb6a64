//! One decoded HLO instruction. Its strings are not copied out of the decoded dump: each is a
//! span of the dump's bytes (which the instructions keep alive), read when asked for. Decoding
//! a module then touches the strings of an instruction only to sort the instructions by name;
//! copying six of them per instruction, in name order all over the dump, was about a quarter
//! of the module's analysis (xz aside). A string that the decoder had to build (a field given
//! twice, or the reflective decoder's) is copied into a block of the module's.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use super::decoded::CommunicationInfo;

/// The strings of one instruction, borrowed: what [`HloInstructionInfo::new`] copies.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InstructionText<'a> {
    pub name: &'a str,
    pub opcode: &'a str,
    pub op_type: &'a str,
    pub op_name: &'a str,
    pub source_file: &'a str,
    pub scheduling_name: &'a str,
    /// The library call or kernel it runs, where the HLO names one: a `custom-call`'s target
    /// (`__cudnn$fmhaSoftmax`, `__cublas$lt$matmul`), a custom fusion's kind (`__triton_gemm`,
    /// `__cudnn$fusion`); else empty.
    pub target: &'a str,
}

impl<'a> InstructionText<'a> {
    fn parts(&self) -> [&'a str; PARTS] {
        [
            self.name,
            self.opcode,
            self.op_type,
            self.op_name,
            self.source_file,
            self.scheduling_name,
            self.target,
        ]
    }
}

const PARTS: usize = 7;

/// Where the strings of a module's instructions are: the dump's bytes, then the strings
/// copied for the module, as one space of offsets. Each run of instructions holds its own
/// reference to it (`Arc`), so that threads building different runs share no counter.
#[derive(Clone)]
pub(super) struct RunText {
    dump: Bytes,
    copied: Bytes,
}

impl RunText {
    /// A reference for one run of instructions.
    pub(super) fn run(&self) -> RunRef {
        RunRef(Arc::new(self.clone()))
    }

    fn get(&self, (start, end): (u32, u32)) -> &[u8] {
        let (start, end) = (start as usize, end as usize);
        let n = self.dump.len();
        if end <= n {
            self.dump.get(start..end)
        } else {
            self.copied.get(start.saturating_sub(n)..end - n)
        }
        .unwrap_or_default()
    }
}

#[derive(Clone)]
pub struct HloInstructionInfo {
    text: Arc<RunText>,
    /// (start, end) of each string in `text`, in the order of [`InstructionText`]'s fields.
    spans: [(u32, u32); PARTS],
    pub source_line: i64,
    /// 1-based id into [`super::HloModuleInfo::stack_frames`]; 0 = none.
    pub stack_frame_id: i64,
    /// Set when the instruction is communication (docs/design.md, "Communication").
    pub communication: Option<CommunicationInfo>,
    /// The instructions of the computations it calls (one level down, in the order of the
    /// proto), as indices into [`super::HloModuleInfo::instructions`].
    pub called: Vec<u32>,
}

impl HloInstructionInfo {
    /// An instruction with a copy of its strings.
    pub fn new(
        text: InstructionText<'_>,
        source_line: i64,
        stack_frame_id: i64,
        communication: Option<CommunicationInfo>,
        called: Vec<u32>,
    ) -> HloInstructionInfo {
        let mut strings = ModuleText::new(&Bytes::new());
        let spans = strings.place(&text);
        let rest = Rest {
            source_line,
            stack_frame_id,
            communication,
            called,
        };
        HloInstructionInfo::from_parts(&strings.finish().run(), spans, rest)
    }

    pub(super) fn from_parts(text: &RunRef, spans: Spans, rest: Rest) -> HloInstructionInfo {
        HloInstructionInfo {
            text: text.0.clone(),
            spans: spans.0,
            source_line: rest.source_line,
            stack_frame_id: rest.stack_frame_id,
            communication: rest.communication,
            called: rest.called,
        }
    }

    /// The dump the instruction was decoded from (empty for one whose strings were copied).
    pub(super) fn dump(&self) -> &[u8] {
        &self.text.dump
    }

    /// The name's bytes: what the instructions are sorted by.
    pub(super) fn name_bytes(&self) -> &[u8] {
        self.text.get(self.spans[0])
    }

    /// The strings were UTF-8 when decoded (the decoder checks), so this never reads "".
    fn part(&self, i: usize) -> &str {
        std::str::from_utf8(self.text.get(self.spans[i])).unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.part(0)
    }

    pub fn opcode(&self) -> &str {
        self.part(1)
    }

    pub fn op_type(&self) -> &str {
        self.part(2)
    }

    pub fn op_name(&self) -> &str {
        self.part(3)
    }

    pub fn source_file(&self) -> &str {
        self.part(4)
    }

    pub fn scheduling_name(&self) -> &str {
        self.part(5)
    }

    /// See [`InstructionText::target`].
    pub fn target(&self) -> &str {
        self.part(6)
    }

    /// All of its strings.
    pub fn text(&self) -> InstructionText<'_> {
        InstructionText {
            name: self.name(),
            opcode: self.opcode(),
            op_type: self.op_type(),
            op_name: self.op_name(),
            source_file: self.source_file(),
            scheduling_name: self.scheduling_name(),
            target: self.target(),
        }
    }
}

/// Equal when every field reads the same, wherever the strings are kept.
impl PartialEq for HloInstructionInfo {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
            && self.source_line == other.source_line
            && self.stack_frame_id == other.stack_frame_id
            && self.communication == other.communication
            && self.called == other.called
    }
}

impl fmt::Debug for HloInstructionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// The same fields, strings read: shown as the struct with `String` fields was.
        #[derive(Debug)]
        #[allow(dead_code, reason = "read by the derived Debug only")]
        struct HloInstructionInfo<'a> {
            name: &'a str,
            opcode: &'a str,
            op_type: &'a str,
            op_name: &'a str,
            source_file: &'a str,
            source_line: i64,
            stack_frame_id: i64,
            scheduling_name: &'a str,
            target: &'a str,
            communication: &'a Option<CommunicationInfo>,
            called: &'a [u32],
        }
        HloInstructionInfo {
            name: self.name(),
            opcode: self.opcode(),
            op_type: self.op_type(),
            op_name: self.op_name(),
            source_file: self.source_file(),
            source_line: self.source_line,
            stack_frame_id: self.stack_frame_id,
            scheduling_name: self.scheduling_name(),
            target: self.target(),
            communication: &self.communication,
            called: &self.called,
        }
        .fmt(f)
    }
}

/// The spans of one instruction's strings (see [`ModuleText::place`]).
#[derive(Clone, Copy)]
pub(super) struct Spans([(u32, u32); PARTS]);

/// The strings of a module's instructions being placed: a string that lies in the dump is
/// kept as its span there; any other (one the decoder built) is copied.
pub(super) struct ModuleText {
    /// The dump, or nothing for one of 4 GiB or more (beyond 32-bit offsets), whose strings
    /// are then all copied.
    dump: Bytes,
    copied: String,
}

impl ModuleText {
    pub(super) fn new(dump: &Bytes) -> ModuleText {
        ModuleText {
            dump: match u32::try_from(dump.len()) {
                Ok(_) => dump.clone(),
                Err(_) => Bytes::new(),
            },
            copied: String::new(),
        }
    }

    pub(super) fn place(&mut self, text: &InstructionText<'_>) -> Spans {
        let mut spans = [(0, 0); PARTS];
        for (span, part) in spans.iter_mut().zip(text.parts()) {
            *span = match self.in_dump(part) {
                Some(span) => span,
                None => {
                    let at = self.dump.len() + self.copied.len();
                    self.copied.push_str(part);
                    match (u32::try_from(at), u32::try_from(at + part.len())) {
                        (Ok(start), Ok(end)) => (start, end),
                        // Past 4 GiB of copied strings: not reachable from a dump under the
                        // decompression cap; read as "".
                        _ => (0, 0),
                    }
                }
            };
        }
        Spans(spans)
    }

    /// The span of `s` in the dump, when it lies there.
    fn in_dump(&self, s: &str) -> Option<(u32, u32)> {
        let start = (s.as_ptr() as usize).checked_sub(self.dump.as_ptr() as usize)?;
        let end = start.checked_add(s.len())?;
        match end <= self.dump.len() {
            true => Some((u32::try_from(start).ok()?, u32::try_from(end).ok()?)),
            false => None,
        }
    }

    pub(super) fn finish(self) -> RunText {
        RunText {
            dump: self.dump,
            copied: Bytes::from(self.copied),
        }
    }
}

/// One run's reference to its module's strings.
pub(super) struct RunRef(Arc<RunText>);

/// An instruction's fields other than its strings.
pub(super) struct Rest {
    pub(super) source_line: i64,
    pub(super) stack_frame_id: i64,
    pub(super) communication: Option<CommunicationInfo>,
    pub(super) called: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_spans_of_the_dump_or_copies_and_read_back_the_same() {
        let dump = Bytes::from_static("..all-reduce.1|all-reduce|jit(f)/psum|/x/é.py".as_bytes());
        let at = |a: usize, b: usize| std::str::from_utf8(&dump[a..b]).unwrap();
        let built = String::from("psum");
        let texts = [
            InstructionText {
                name: at(2, 14),
                opcode: at(15, 25),
                op_type: &built,
                op_name: at(26, 37),
                source_file: at(38, dump.len()),
                scheduling_name: "",
                target: "",
            },
            InstructionText {
                name: "b",
                ..InstructionText::default()
            },
        ];
        let rest = |line| Rest {
            source_line: line,
            stack_frame_id: 2,
            communication: None,
            called: vec![1],
        };
        let mut strings = ModuleText::new(&dump);
        let spans: Vec<Spans> = texts.iter().map(|t| strings.place(t)).collect();
        let placed = strings.finish();
        let shared = placed.run();
        let run: Vec<_> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| HloInstructionInfo::from_parts(&shared, *s, rest(i as i64)))
            .collect();
        assert_eq!(run.len(), 2);
        assert!(Arc::ptr_eq(&run[0].text, &run[1].text));
        assert!(
            !Arc::ptr_eq(&run[0].text, &placed.run().0),
            "another run, its own counter"
        );
        assert_eq!(run[0].text(), texts[0]);
        assert_eq!(run[0].spans[0], (2, 14), "kept in the dump");
        assert_eq!(run[0].text.copied, "psumb", "only the others copied");
        assert_eq!(run[0].source_file(), "/x/é.py");
        assert_eq!(run[0].name_bytes(), b"all-reduce.1");
        assert_eq!(
            (run[1].name(), run[1].opcode(), run[1].op_name()),
            ("b", "", "")
        );
        let alone = HloInstructionInfo::new(texts[0], 0, 2, None, vec![1]);
        assert_eq!(alone, run[0]);
        assert_ne!(alone, run[1]);
        let mut other = alone.clone();
        other.source_line = 5;
        assert_ne!(alone, other);
        assert!(format!("{alone:?}").contains("name: \"all-reduce.1\""));
    }
}
