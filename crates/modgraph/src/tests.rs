use super::lex::{Tok, tokens};
use super::*;

fn graph(files: &[(&str, &str)]) -> ModGraph {
    let files: Vec<SourceFile> = files
        .iter()
        .map(|(p, t)| SourceFile {
            path: p.to_string(),
            bytes: t.as_bytes().to_vec(),
        })
        .collect();
    let externals: BTreeSet<String> = ["serde", "std"].iter().map(|s| s.to_string()).collect();
    ModGraph::build(&files, &externals, "mycrate")
}

fn reaches(g: &ModGraph, from: &str) -> Vec<String> {
    let i = g.index(from).unwrap();
    g.closure(&[i])
        .into_iter()
        .filter(|&j| j != i)
        .map(|j| g.files[j].clone())
        .collect()
}

#[test]
fn lexer_drops_comments_strings_and_lifetimes() {
    let t = tokens(
        "/* a /* nested */ crate::x */ fn f<'a>(c: char) -> &'a str { let _ = 'x'; let _ = '\\''; \
         // crate::y\n r#\"crate::z\"# ; b\"q\"; r#type; 1..2; \"s\\\"t\" }",
    );
    assert!(
        !t.iter()
            .any(|t| matches!(t, Tok::Ident(w) if w == "crate" || w == "a" || w == "x"))
    );
    assert!(t.contains(&Tok::Str("crate::z".into())));
    assert!(t.contains(&Tok::Str("q".into())));
    assert!(t.contains(&Tok::Str("s\"t".into())));
    assert!(t.contains(&Tok::Ident("type".into())));
    assert!(t.contains(&Tok::Ident("str".into())));
}

#[test]
fn items_are_found_where_they_are_defined() {
    let g = graph(&[
        ("lib.rs", "pub mod a; pub mod b; pub mod c;"),
        // A hub: declares its children and re-exports one item of each.
        (
            "a/mod.rs",
            "pub mod x; pub mod y; pub use x::X; pub use y::Y as Why; pub fn here() {}",
        ),
        ("a/x.rs", "pub struct X;"),
        ("a/y.rs", "pub struct Y;"),
        // Uses X through the hub: reaches x.rs, not y.rs, and not the hub's own code.
        ("b.rs", "use crate::a::X; fn f(_: X) {}"),
        // Names the hub's own function and y through its alias.
        (
            "c.rs",
            "use crate::a::{self, Why}; fn g(_: Why) { a::here() }",
        ),
    ]);
    assert_eq!(reaches(&g, "b.rs"), ["a/x.rs"]);
    assert_eq!(reaches(&g, "c.rs"), ["a/mod.rs", "a/y.rs"]);
    // The hub's re-exports are not its code: its own code uses none of them.
    assert!(reaches(&g, "a/mod.rs").is_empty());
}

#[test]
fn a_method_of_a_re_exported_name_does_not_use_it() {
    let g = graph(&[
        ("lib.rs", "pub mod a; pub mod b;"),
        // The hub calls `.find(..)` on an iterator and builds a value with `..fill()`.
        (
            "a/mod.rs",
            "pub mod x; pub mod y; pub use x::find; pub use y::fill;\n\
             pub fn here(v: &[u8]) -> S { v.iter().find(|_| true); S { ..fill() } }",
        ),
        ("a/x.rs", "pub fn find() {}"),
        ("a/y.rs", "pub fn fill() -> super::S { todo!() }"),
        ("b.rs", "use crate::a::find; fn f() { find() }"),
    ]);
    assert_eq!(reaches(&g, "a/mod.rs"), ["a/y.rs"]);
    assert_eq!(reaches(&g, "b.rs"), ["a/x.rs"]);
}

#[test]
fn unused_imports_test_code_and_externals() {
    let g = graph(&[
        ("lib.rs", "mod p; mod q; mod r;"),
        ("p.rs", "pub fn helper() {}"),
        ("q.rs", "pub fn other() {}"),
        (
            "r.rs",
            "use serde::Serialize; use std::fmt;\n\
             pub fn run() { super::p::helper() }\n\
             #[cfg(test)]\nmod tests { use crate::q::other; #[test] fn t() { other() } }",
        ),
    ]);
    assert_eq!(reaches(&g, "r.rs"), ["p.rs"]);
    let r = g.index("r.rs").unwrap();
    assert_eq!(
        g.crates[r].iter().cloned().collect::<Vec<_>>(),
        Vec::<String>::new(),
        "imports never used name no crate"
    );
    let g = graph(&[
        ("lib.rs", "mod s;"),
        (
            "s.rs",
            "use serde::Serialize; #[derive(Serialize)] struct S; fn f() { std::mem::drop(1) }",
        ),
    ]);
    let s = g.index("s.rs").unwrap();
    assert_eq!(
        g.crates[s].iter().cloned().collect::<Vec<_>>(),
        ["serde", "std"]
    );
}

#[test]
fn impl_blocks_belong_to_their_type_or_trait() {
    let g = graph(&[
        ("lib.rs", "mod t; mod u; mod v; mod w;"),
        ("t.rs", "pub struct T; pub trait Tr { fn go(&self); }"),
        // An inherent impl elsewhere, and a local trait for a foreign type.
        ("u.rs", "impl crate::t::T { pub fn more(&self) {} }"),
        (
            "v.rs",
            "use crate::t::Tr; impl Tr for String { fn go(&self) {} } impl<X: Clone> Tr for Vec<X> { fn go(&self) {} }",
        ),
        ("w.rs", "use crate::t::T; pub fn f(t: T) { t.more() }"),
    ]);
    assert_eq!(reaches(&g, "w.rs"), ["t.rs", "u.rs", "v.rs"]);
}

#[test]
fn inline_modules_macros_and_includes() {
    let g = graph(&[
        ("lib.rs", "pub mod e; pub mod f;"),
        (
            "e/mod.rs",
            "pub mod inner { pub fn deep() { super::top() } }\n pub fn top() {}\n\
             macro_rules! m { () => { $crate::f::g() } }\n pub(crate) use m;",
        ),
        (
            "f.rs",
            "pub fn g() { let _ = include_str!(\"../assets/page.css\"); }",
        ),
        ("../assets/page.css", "body {}"),
        ("main.rs", "fn main() { mycrate::e::inner::deep() }"),
    ]);
    assert_eq!(reaches(&g, "f.rs"), ["../assets/page.css"]);
    assert_eq!(
        reaches(&g, "main.rs"),
        ["../assets/page.css", "e/mod.rs", "f.rs"]
    );
}

#[test]
fn cycles_are_reported() {
    let g = graph(&[
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a.rs", "pub fn fa() { crate::b::fb() }"),
        ("b.rs", "pub fn fb() { crate::a::fa() }"),
        ("c.rs", "pub fn fc() { crate::a::fa() }"),
    ]);
    let names: Vec<Vec<&str>> = g
        .cycles()
        .iter()
        .map(|c| c.iter().map(|&i| g.files[i].as_str()).collect())
        .collect();
    assert_eq!(names, [["a.rs", "b.rs"]]);
}

#[test]
fn versions_follow_reachable_code_and_locked_crates() {
    let lock = Lock::parse(
        "[[package]]\nname = \"serde\"\nversion = \"1.0.1\"\ndependencies = [\n \"serde_derive\",\n]\n\n\
         [[package]]\nname = \"serde_derive\"\nversion = \"1.0.1\"\n",
    );
    let base = [
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a.rs", "pub fn fa() {}"),
        ("b.rs", "pub fn fb() { crate::a::fa() }"),
        ("c.rs", "pub fn fc() { serde::x() }"),
    ];
    let v = |files: &[(&str, &str)], lock: &Lock, root: &str| {
        let g = graph(files);
        g.version(&[g.index(root).unwrap()], lock, "rustc 1")
    };
    let mut edited = base;
    edited[1].1 = "pub fn fa() { /* changed */ let _ = 1; }";
    assert_ne!(v(&base, &lock, "b.rs"), v(&edited, &lock, "b.rs"));
    assert_eq!(v(&base, &lock, "c.rs"), v(&edited, &lock, "c.rs"));
    let bumped = Lock::parse(
        "[[package]]\nname = \"serde\"\nversion = \"1.0.1\"\ndependencies = [\n \"serde_derive\",\n]\n\n\
         [[package]]\nname = \"serde_derive\"\nversion = \"1.0.2\"\n",
    );
    assert_ne!(v(&base, &lock, "c.rs"), v(&base, &bumped, "c.rs"));
    assert_eq!(v(&base, &lock, "b.rs"), v(&base, &bumped, "b.rs"));
}
