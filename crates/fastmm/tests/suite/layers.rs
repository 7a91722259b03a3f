//! The library's layers, checked from its source: each top-level module
//! may name (`crate::…`) only modules of lower layers, so no lower module
//! names a higher one and no import cycle can form. The CLI's modules are
//! checked the same way, and so is the absence of circles two levels down
//! (`cuda::gemm` and `cuda::device`, say). Test items (the item after
//! `#[cfg(test)]`, to its closing brace) are exempt; code after them is
//! read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The library's top-level modules, bottom layer first; a module may name
/// those of earlier rows only.
const LIBRARY: &[&[&str]] = &[
    // The vocabulary.
    &["error", "tunables"],
    &["element", "partial", "system"],
    &["matrix", "options"],
    &["gemm"],
    &[
        "tuning",
        "threads",
        "random",
        "interop",
        "distributed",
        "emulation",
    ],
    &["config", "verify", "accuracy"],
    // Kernels and backends.
    &["strassen"],
    &["cpu", "cuda"],
    // Dispatch and the public API.
    &["plan"],
    &["executor"],
    &["context", "complex"],
    &["team", "audit"],
    &["info", "io", "selftest", "dev"],
    // Products across MPI ranks read and write files (`io`).
    &["cluster"],
    // The executor value over a device, a team and a cluster.
    &["machine"],
];

/// The CUDA backend's layers: the runtime (the only code that calls the
/// driver's, NCCL's and cuBLAS's raw functions), the kernels and their
/// launch, and the products over them.
const CUDA: &[&[&str]] = &[&["tunables"], &["runtime"], &["kernels"], &["products"]];

/// The CLI's modules, likewise.
const CLI: &[&[&str]] = &[
    &["common", "interrupt"],
    &["measurement"],
    &["run", "info", "selftest", "multiply", "accuracy", "exec"],
    &["tune", "bench", "demo"],
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code without comments and without its test items: each
/// `#[cfg(test)]` item is cut out up to its closing brace (or its `;`),
/// and the code after it is kept.
fn code_of(text: &str) -> String {
    let mut out = Vec::new();
    let mut depth = 0i64;
    // The brace depth a test item started at, while inside one.
    let mut skipping: Option<i64> = None;
    let mut test_next = false;
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim();
        let change = code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if let Some(start) = skipping {
            depth += change;
            if depth <= start {
                skipping = None;
            }
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            test_next = true;
            continue;
        }
        if test_next && !trimmed.is_empty() && !trimmed.starts_with("#[") {
            test_next = false;
            if change > 0 {
                skipping = Some(depth);
                depth += change;
            }
            continue;
        }
        depth += change;
        out.push(code);
    }
    out.join("\n")
}

/// The module a file is (`src/cuda/gemm/fast.rs`: cuda, gemm, fast; a
/// `mod.rs` is its folder's module; the crate root is empty).
fn file_module(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The modules a file's code names: every `crate::`, `super::` and
/// `self::` path (and each member of a `use …::{…}` group), resolved
/// from the file's own module to an absolute module path. Items are
/// told from modules by case: module names are lower case.
fn named_modules(code: &str, here: &[String]) -> BTreeSet<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let resolve = |parts: &[String]| -> Vec<String> {
        let (mut module, rest) = match parts.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &parts[1..]),
            _ => (here.to_vec(), parts),
        };
        let mut rest = rest;
        while let Some(first) = rest.first() {
            match first.as_str() {
                "super" => {
                    module.pop();
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        module.extend(
            rest.iter()
                .filter(|p| p.starts_with(|c: char| c.is_ascii_lowercase()))
                .cloned(),
        );
        module
    };
    let bytes = code.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(root) {
            let at_word_start = i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'_'
                    || bytes[i - 1] == b':');
            if !at_word_start {
                continue;
            }
            // The path's segments up to a group or its end.
            let mut parts = vec![root.trim_end_matches("::").to_string()];
            let mut rest = &code[i + root.len()..];
            loop {
                let segment = ident(rest);
                if segment.is_empty() {
                    break;
                }
                rest = &rest[segment.len()..];
                parts.push(segment);
                match rest.strip_prefix("::") {
                    Some(more) => rest = more,
                    None => break,
                }
            }
            match rest.strip_prefix('{') {
                Some(group) => {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for member in group.split(',') {
                        let mut path = parts.clone();
                        path.extend(
                            member
                                .trim()
                                .split("::")
                                .map(ident)
                                .filter(|s| !s.is_empty() && s != "self"),
                        );
                        out.insert(resolve(&path));
                    }
                }
                None => {
                    out.insert(resolve(&parts));
                }
            }
        }
    }
    out
}

/// The top-level modules the code of a file at the crate root names.
fn named(text: &str) -> BTreeSet<String> {
    named_modules(&code_of(text), &[])
        .into_iter()
        .filter_map(|path| path.into_iter().next())
        .collect()
}

/// Every group of modules, cut to `depth` components, that reach each
/// other through the paths their code names (a strongly connected
/// component of more than one), with one file that makes each edge.
fn circles(src: &Path, depth: usize) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let cut = |path: &[String]| path[..path.len().min(depth)].join("::");
    let mut edges: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> =
        Default::default();
    for file in &files {
        let here = file_module(src, file);
        let from = cut(&here);
        let text = std::fs::read_to_string(file).unwrap();
        for path in named_modules(&code_of(&text), &here) {
            let to = cut(&path);
            let nested =
                |x: &str, y: &str| x.is_empty() || y.is_empty() || x.starts_with(&format!("{y}::"));
            if to != from && !nested(&to, &from) && !nested(&from, &to) {
                edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| file.display().to_string());
            }
        }
    }
    // Which modules each reaches, then the groups that reach each other.
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_string()];
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let mut reported = BTreeSet::new();
    let mut out = Vec::new();
    for m in edges.keys() {
        if reported.contains(m) {
            continue;
        }
        let from_m = reach(m);
        let group: Vec<String> = from_m
            .iter()
            .filter(|other| *other == m || reach(other).contains(m))
            .cloned()
            .collect();
        if group.len() > 1 {
            let lines: Vec<String> = group
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|(b, _)| group.contains(b))
                        .map(move |(b, file)| format!("  {a} -> {b} ({file})"))
                })
                .collect();
            out.push(format!("{}\n{}", group.join(", "), lines.join("\n")));
            reported.extend(group);
        }
    }
    out
}

/// Checks the modules directly inside `within` (a module path from the
/// crate root; empty for the crate's top-level modules) against `layers`:
/// each may name only the modules of earlier rows among its siblings.
fn check(src: &Path, within: &[&str], layers: &[&[&str]]) {
    let layer = |module: &str| layers.iter().position(|row| row.contains(&module));
    let depth = within.len();
    let mut files = Vec::new();
    rust_files(
        &within.iter().fold(src.to_path_buf(), |dir, m| dir.join(m)),
        &mut files,
    );
    let mut problems = Vec::new();
    for file in &files {
        let here = file_module(src, file);
        // The crate root, or `within`'s own mod.rs.
        let Some(module) = here.get(depth).cloned() else {
            continue;
        };
        let Some(own) = layer(&module) else {
            problems.push(format!("{module} ({}) has no layer", file.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let siblings: BTreeSet<String> = named_modules(&code_of(&text), &here)
            .into_iter()
            .filter(|path| path.len() > depth && path[..depth].iter().eq(within.iter()))
            .map(|path| path[depth].clone())
            .collect();
        for other in siblings {
            if other == module {
                continue;
            }
            match layer(&other) {
                // Items of the parent module, e.g. the crate root's
                // re-exports.
                None => {}
                Some(theirs) if theirs < own => {}
                Some(_) => problems.push(format!(
                    "{} ({module}) names {other}, which is not below it",
                    file.display()
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_library_is_layered() {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        LIBRARY,
    );
}

#[test]
fn the_cuda_backend_is_layered() {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &["cuda"],
        CUDA,
    );
}

#[test]
fn the_cli_is_layered() {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fastmm-cli/src"),
        &[],
        CLI,
    );
}

#[test]
fn the_parser_sees_single_paths_and_groups() {
    let text = "use crate::a::B;\nuse crate::{b, c::D};\nlet x = crate::d::f(); // crate::e\n";
    let names: Vec<String> = named(text).into_iter().collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
}

#[test]
fn the_parser_reads_past_test_modules_and_resolves_super() {
    let text = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::t;\n    fn f() {}\n}\n\
                #[cfg(test)]\nuse crate::u;\nfn g() { crate::b::h(); }\nuse super::{c, d::E};\n";
    let names: Vec<String> = named(text).into_iter().collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    let here = ["x".to_string(), "y".to_string()];
    let paths: Vec<String> = named_modules(&code_of(text), &here)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    // `h` could be a module as far as a path's spelling tells.
    assert_eq!(paths, ["a", "b::h", "x::c", "x::d"]);
}

/// A circle two levels down is found, through `super::` and a group,
/// and one inside a test module is not.
#[test]
fn circles_are_found() {
    let src = std::env::temp_dir().join(format!("fastmm-layers-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let file = src.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write("lib.rs", "pub mod top;\n");
    write("top/mod.rs", "mod a;\nmod b;\nmod c;\n");
    write("top/a.rs", "use super::{b::Thing, c};\n");
    write(
        "top/b.rs",
        "pub struct Thing;\nfn f() { crate::top::a::g(); }\n",
    );
    write(
        "top/c.rs",
        "#[cfg(test)]\nmod tests {\n    use super::super::a;\n}\n",
    );
    let found = circles(&src, 2);
    std::fs::remove_dir_all(&src).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("top::a, top::b\n"), "{}", found[0]);
}

/// No circle among the modules two levels down (`cuda::gemm`,
/// `cpu::packed`, …), in the library or the CLI: each backend is
/// layered inside too.
#[test]
fn no_module_circle_two_levels_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in [root.join("src"), root.join("../fastmm-cli/src")] {
        for depth in [1, 2] {
            let found = circles(&src, depth);
            assert!(
                found.is_empty(),
                "{} at depth {depth}:\n{}",
                src.display(),
                found.join("\n")
            );
        }
    }
}
