//! What an archive carries for its reader, as nsys-jax's archives do: `install.sh`, which makes
//! a virtual environment with this version's Python package and JupyterLab, and
//! `Analysis.ipynb`, a notebook whose cells show the profile (nsys-jax's views from
//! `nsys_jax_pipe.load`, then findings and roofline). The test suite runs the notebook from an
//! archive, in the environment its own `install.sh` made.

use super::archive_writer::Entry;

/// The archive members, at the archive's top level.
pub const INSTALL_MEMBER: &str = "install.sh";
pub const NOTEBOOK_MEMBER: &str = "Analysis.ipynb";

const INSTALL: &str = include_str!("install.sh");
const NOTEBOOK: &str = include_str!("Analysis.ipynb");

/// `install.sh` for this version of the package.
pub fn install_script() -> String {
    INSTALL.replace("@VERSION@", env!("CARGO_PKG_VERSION"))
}

/// The two members, to add to an archive being written (an input's own copies, from an older
/// version or from nsys-jax, are left out in their favour: see [`is_ours`]).
pub fn entries() -> Vec<Entry> {
    vec![
        Entry::deflated(INSTALL_MEMBER, install_script().into_bytes()),
        Entry::deflated(NOTEBOOK_MEMBER, NOTEBOOK.as_bytes().to_vec()),
    ]
}

/// Whether an archive member is one of those [`entries`] writes.
pub fn is_ours(member: &str) -> bool {
    member == INSTALL_MEMBER || member == NOTEBOOK_MEMBER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_names_this_version_and_the_notebook_is_a_notebook() {
        let script = install_script();
        assert!(script.contains(&format!("nsys-jax-pipe=={}", env!("CARGO_PKG_VERSION"))));
        assert!(!script.contains("@VERSION@"));
        let nb: serde_json::Value = serde_json::from_str(NOTEBOOK).unwrap();
        assert_eq!(nb["nbformat"], 4);
        let code: Vec<String> = nb["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["cell_type"] == "code")
            .map(|c| {
                c["source"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap())
                    .collect()
            })
            .collect();
        assert!(code[0].contains("nsys_jax_pipe.load("), "{}", code[0]);
        // No outputs are shipped: the reader's run makes them.
        assert!(nb["cells"].as_array().unwrap().iter().all(|c| {
            c.get("outputs")
                .is_none_or(|o| o.as_array().unwrap().is_empty())
        }));
        assert_eq!(entries().len(), 2);
        assert!(is_ours("install.sh") && !is_ours("dump/install.sh"));
    }
}
