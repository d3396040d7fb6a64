//! The documentation: the README stays short, every page of the guide (docs/, an mdBook) is
//! in its summary, and every relative link in them leads somewhere: the file exists and, for
//! `file.md#anchor`, a heading of that file makes the anchor. (`.ci/run` builds the book with
//! mdBook too.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The anchor GitHub and mdBook give a heading: lower case, spaces to `-`, other punctuation
/// than `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of a markdown text outside its fenced code blocks.
fn prose_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchors of a markdown file's headings (outside code blocks), repeated ones numbered.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(&line[hashes..].replace('`', ""));
            let mut a = base.clone();
            let mut n = 1;
            while out.contains(&a) {
                a = format!("{base}-{n}");
                n += 1;
            }
            out.insert(a);
        }
    }
    out
}

/// The targets of inline links `[text](target)` outside code (blocks and spans).
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        // Code spans hold no links.
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Where `target`, linked from `from`, leads: the problem when it leads nowhere.
fn check(from: &Path, target: &str) -> Option<String> {
    if target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:")
    {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((f, a)) => (f, Some(a)),
        None => (target, None),
    };
    let path = if file.is_empty() {
        from.to_path_buf()
    } else {
        from.parent().unwrap().join(file)
    };
    if !path.exists() {
        return Some(format!("{target}: no file {}", path.display()));
    }
    if let Some(a) = anchor {
        if path.extension().is_some_and(|e| e == "md") {
            let found = anchors(&std::fs::read_to_string(&path).unwrap());
            if !found.contains(a) {
                return Some(format!("{target}: no heading makes #{a}"));
            }
        }
    }
    None
}

#[test]
fn the_readme_is_short_and_every_link_of_the_docs_leads_somewhere() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.len() <= 16 * 1024,
        "README.md is {} bytes",
        readme.len()
    );
    // The README leads with the two commands that do everything on a fresh machine.
    let first = readme.find("```").expect("a code block");
    let block = &readme[first..];
    assert!(
        block.contains("cargo run --release -- analyze examples/mlp-fsdp-2gpu.zip -o out/")
            && block.contains("cargo test --release --all-targets"),
        "the README's first code block is not the two commands"
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for target in links(&text) {
            checked += 1;
            if let Some(p) = check(&file, &target) {
                problems.push(format!("{}: {p}", file.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    assert!(checked > 50, "only {checked} links found");
    // Every page of the guide is in the book's summary.
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    for file in markdown_files().iter().skip(1) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if name != "SUMMARY.md" {
            assert!(
                listed.contains(&name),
                "docs/{name} is not in docs/SUMMARY.md"
            );
        }
    }
}

#[test]
fn anchors_and_links_are_read_as_the_renderers_do() {
    let text = "# The `cache`\n## Frames for pandas and polars\n```\n# not a heading [a](b)\n```\n\
                ## Frames for pandas and polars\nsee [x](other.md#y) and `[no](link)`\n";
    let a = anchors(text);
    assert!(a.contains("the-cache"), "{a:?}");
    assert!(a.contains("frames-for-pandas-and-polars-1"), "{a:?}");
    assert!(!a.contains("not-a-heading"));
    assert_eq!(links(text), ["other.md#y"]);
    assert_eq!(
        slug("What-if: the step's critical path"),
        "what-if-the-steps-critical-path"
    );
}
