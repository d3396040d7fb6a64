//! How errors reach the user: one line, naming the file and the problem, and an exit code.

/// Exit code for bad usage or bad input.
pub const EXIT_INPUT: i32 = 2;
/// Exit code for an internal error (a bug).
pub const EXIT_INTERNAL: i32 = 70;

/// Tell the user something they should know but that does not stop the run, on one line.
pub fn warn(msg: &str) {
    eprintln!("nsys-jax-pipe: warning: {}", msg.replace('\n', " "));
}

/// An operating system's reason without the `(os error N)` the standard library appends.
pub fn without_os_code(reason: String) -> String {
    match reason.find(" (os error ") {
        Some(i) => reason[..i].to_string(),
        None => reason,
    }
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

/// Where in the inputs a problem is: a file, and the archive member when there is one.
/// Attached to an error as context, it is kept by [`Failure`] through the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub file: std::path::PathBuf,
    pub member: Option<String>,
}

impl Place {
    pub fn member(file: &std::path::Path, member: &str) -> Place {
        Place {
            file: file.to_path_buf(),
            member: Some(member.to_string()),
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.member {
            Some(m) => write!(f, "{}: {m}", self.file.display()),
            None => write!(f, "{}", self.file.display()),
        }
    }
}

impl std::error::Error for Place {}

/// What kind of failure: the inputs (or the environment) are wrong, or the run was
/// interrupted by a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    Input,
    Interrupted(i32),
}

/// An error as the graph passes it on: cloneable (a node's failure is that of every node
/// built on it) and typed — its kind, the file and member it concerns, and the one-line
/// message the user reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub place: Option<Place>,
    /// The whole error on one line (place included, as [`one_line`] writes it).
    pub message: String,
}

impl Failure {
    /// The failure an error chain describes: the innermost [`Place`] and the kind of a
    /// [`Failure`] or [`Interrupted`] found in it are kept.
    pub fn of(e: &anyhow::Error) -> Failure {
        // A place attached as context is found by downcasting the error (anyhow looks through
        // its context layers); failures and interruptions are errors of the chain.
        let mut place = e.downcast_ref::<Place>().cloned();
        let mut kind = match e.downcast_ref::<Interrupted>() {
            Some(i) => FailureKind::Interrupted(i.0),
            None => FailureKind::Input,
        };
        for c in e.chain() {
            if let Some(f) = c.downcast_ref::<Failure>() {
                kind = f.kind;
                place = place.or_else(|| f.place.clone());
            } else if let Some(i) = c.downcast_ref::<Interrupted>() {
                kind = FailureKind::Interrupted(i.0);
            }
        }
        Failure {
            kind,
            place,
            message: one_line(e),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        // An error that is only a failure (no context around it) stays that failure.
        if e.chain().count() == 1 {
            match e.downcast::<Failure>() {
                Ok(f) => f,
                Err(e) => Failure::of(&e),
            }
        } else {
            Failure::of(&e)
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The exit code of a command that failed with `e`: 128 + the signal when interrupted,
/// else [`EXIT_INPUT`].
pub fn exit_code(e: &anyhow::Error) -> i32 {
    match Failure::of(e).kind {
        FailureKind::Interrupted(signal) => 128 + signal,
        FailureKind::Input => EXIT_INPUT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn failures_keep_kind_and_place() {
        let e = Err::<(), _>(anyhow::anyhow!("truncated"))
            .context(Place::member(std::path::Path::new("p.zip"), "dump/a.pb"))
            .context("building frames")
            .unwrap_err();
        let f = Failure::from(e);
        assert_eq!(f.message, "building frames: p.zip: dump/a.pb: truncated");
        assert_eq!(
            f.place.as_ref().unwrap().member.as_deref(),
            Some("dump/a.pb")
        );
        assert_eq!(f.kind, FailureKind::Input);
        // Through another node: the same failure, more context.
        let again = anyhow::Error::from(f.clone()).context("analysis summary");
        let g = Failure::from(again);
        assert_eq!(g.place, f.place);
        assert!(
            g.message
                .starts_with("analysis summary: building frames: p.zip")
        );
        assert_eq!(Failure::from(anyhow::Error::from(f.clone())), f);

        let i = anyhow::Error::from(Interrupted(2)).context("exporting");
        let f = Failure::from(i);
        assert_eq!(f.kind, FailureKind::Interrupted(2));
        assert_eq!(exit_code(&anyhow::Error::from(f)), 130);
        assert_eq!(exit_code(&anyhow::anyhow!("bad")), EXIT_INPUT);
    }
}
