//! The terminal's [`Ui`]: lines on stderr, a spinner or a bar for steps that take a while.

use crate::commands::{Step, Ui};

/// What a command says goes to stderr; its steps are drawn there (indicatif hides them when
/// stderr is not a terminal).
pub(super) struct Terminal;

impl Ui for Terminal {
    fn say(&self, line: &str) {
        eprintln!("{line}");
    }

    fn step(&self, what: &str, of: Option<u64>) -> Box<dyn Step + '_> {
        let bar = match of {
            Some(n) => indicatif::ProgressBar::new(n).with_style(
                indicatif::ProgressStyle::with_template(&format!(
                    "{{spinner}} {what} {{pos}}/{{len}} [{{elapsed}}]"
                ))
                .expect("valid template"),
            ),
            None => indicatif::ProgressBar::new_spinner().with_style(
                indicatif::ProgressStyle::with_template(&format!(
                    "{{spinner}} {what} [{{elapsed}}]"
                ))
                .expect("valid template"),
            ),
        };
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Box::new(Drawn(bar))
    }
}

/// A step drawn on the terminal, cleared when it ends.
struct Drawn(indicatif::ProgressBar);

impl Step for Drawn {
    fn advance(&self) {
        self.0.inc(1);
    }
}

impl Drop for Drawn {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
