//! What a command says while it works: lines for the user, warnings and progress. The
//! commands never print; the front-end gives them a [`Ui`] (the terminal's draws spinners and
//! bars on stderr), tests give them one that records.

/// The user's side of a running command.
pub trait Ui: Sync {
    /// A line for the user, as it is (a note on which dump a report uses, a warning already
    /// worded).
    fn say(&self, line: &str);
    /// A warning: `what` is said after "nsys-jax-pipe: warning: ".
    fn warn(&self, what: &str) {
        self.say(&format!("nsys-jax-pipe: warning: {what}"));
    }
    /// A step that takes a while: `what` is done, `of` items when their number is known.
    /// The step ends when the returned value is dropped.
    fn step(&self, what: &str, of: Option<u64>) -> Box<dyn Step + '_>;
}

/// Which dump folder each report among `inputs` uses.
pub fn say_dump_notes(inputs: &[crate::graph::RunInput], ui: &dyn Ui) {
    for i in inputs {
        if let crate::graph::RunInput::Capture(c) = i {
            ui.say(&c.dump_note);
        }
    }
}

/// A step in progress (see [`Ui::step`]).
pub trait Step: Sync {
    /// One more item done.
    fn advance(&self) {}
}

/// A step nobody watches.
#[cfg(test)]
pub struct Unseen;

#[cfg(test)]
impl Step for Unseen {}

/// A [`Ui`] that keeps what was said.
#[cfg(test)]
#[derive(Default)]
pub struct Recorded {
    pub lines: std::sync::Mutex<Vec<String>>,
}

#[cfg(test)]
impl Ui for Recorded {
    fn say(&self, line: &str) {
        self.lines.lock().unwrap().push(line.to_string());
    }
    fn step(&self, _what: &str, _of: Option<u64>) -> Box<dyn Step + '_> {
        Box::new(Unseen)
    }
}
