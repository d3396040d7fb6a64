//! Hashes every source file under src/ so that each graph node's version follows the code
//! that implements it: editing one analysis re-executes only the nodes built from that file.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let src = Path::new("src");
    println!("cargo:rerun-if-changed=src");
    let mut entries = Vec::new();
    collect(src, src, &mut entries);
    entries.sort();
    let mut out = String::from(
        "/// (path relative to src/, blake3 of its content)\npub const SOURCES: &[(&str, &str)] = &[\n",
    );
    for (rel, hash) in entries {
        writeln!(out, "    ({rel:?}, {hash:?}),").unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("source_hashes.rs");
    std::fs::write(dest, out).unwrap();
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let bytes = std::fs::read(&path).unwrap();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, blake3::hash(&bytes).to_hex().to_string()));
        }
    }
}
