//! The library's layers, checked from its source: each top-level module
//! may name (`crate::…`) only modules of lower layers, so no lower module
//! names a higher one and no import cycle can form. The CLI's modules are
//! checked the same way. Test modules (after `#[cfg(test)]`) are exempt.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The library's top-level modules, bottom layer first; a module may name
/// those of earlier rows only.
const LIBRARY: &[&[&str]] = &[
    // The vocabulary.
    &["error", "tunables"],
    &["element", "partial", "system"],
    &["matrix", "options"],
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
    &["context"],
    &["team", "audit"],
    &["info", "io", "selftest", "dev"],
    // Products across MPI ranks read and write files (`io`).
    &["cluster"],
];

/// The CLI's modules, likewise.
const CLI: &[&[&str]] = &[
    &["common", "interrupt"],
    &["run", "info", "selftest", "multiply", "accuracy"],
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

/// The top-level module a file belongs to (`None` for the crate root).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The top-level modules a file's code (not its tests) names through
/// `crate::`: single paths, and `use crate::{…}` groups over any lines.
fn named(text: &str) -> BTreeSet<String> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                out.extend(group.split(',').map(ident));
            }
            None => {
                out.insert(ident(rest));
            }
        }
    }
    out.remove("");
    out
}

fn check(src: &Path, layers: &[&[&str]]) {
    let layer = |module: &str| layers.iter().position(|row| row.contains(&module));
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let Some(module) = module_of(src, file) else {
            continue;
        };
        let Some(own) = layer(&module) else {
            problems.push(format!("{module} ({}) has no layer", file.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for other in named(&text) {
            if other == module {
                continue;
            }
            match layer(&other) {
                // Items of the crate root, e.g. the re-exports.
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
    check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), LIBRARY);
}

#[test]
fn the_cli_is_layered() {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fastmm-cli/src"),
        CLI,
    );
}

#[test]
fn the_parser_sees_single_paths_and_groups() {
    let text = "use crate::a::B;\nuse crate::{b, c::D};\nlet x = crate::d::f(); // crate::e\n";
    let names: Vec<String> = named(text).into_iter().collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
}
