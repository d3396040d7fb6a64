//! How errors reach the user: one line, naming the file and the problem, and an exit code.

/// Exit code for bad usage or bad input.
pub const EXIT_INPUT: i32 = 2;
/// Exit code for an internal error (a bug).
pub const EXIT_INTERNAL: i32 = 70;

/// Tell the user something they should know but that does not stop the run, on one line.
pub fn warn(msg: &str) {
    eprintln!("nsys-jax-pipe: warning: {}", msg.replace('\n', " "));
}

/// Render an error chain on one line: `outer: inner: root`.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in e.chain() {
        let s = c.to_string();
        // Avoid repeating a message that already contains its cause.
        if parts.last().is_some_and(|p| p.contains(&s)) {
            continue;
        }
        parts.push(s);
    }
    parts.join(": ").replace('\n', " ")
}

/// The run was interrupted by `signal`; the exit code is 128 + the signal.
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "interrupted ({}); no archive was written",
            crate::interrupt::signal_name(self.0)
        )
    }
}

impl std::error::Error for Interrupted {}
