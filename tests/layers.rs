//! The library's layers (spec/architecture.md, the crate doc of src/lib.rs)
//! hold: no `crate::` path in a module names a module of a higher layer,
//! or of a sibling it must not know (the tlog specs never know the
//! receipt, and the reverse). The verifier side runs no process: only the
//! issuing gate and the binary may use `std::process`.
//!
//! The check reads the source text: every `crate::a::b` path, in `use`
//! lines and in expressions, outside comments and test modules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A layer: the module paths (under `crate::`) it holds, and its rank.
/// A module may use modules of its own rank group only where `allowed`
/// says, and any module of a lower rank.
struct Layer {
    name: &'static str,
    rank: u8,
    modules: &'static [&'static str],
}

/// Lower rank = lower layer. Two layers of one rank (the receipt and the
/// tlog specs) must not use each other.
const LAYERS: &[Layer] = &[
    Layer {
        name: "basics",
        rank: 0,
        modules: &[
            "constants",
            "digest",
            "io",
            "keys",
            "limits",
            "reason",
            "strictjson",
            "text",
        ],
    },
    Layer {
        name: "receipt",
        rank: 1,
        modules: &["receipt"],
    },
    Layer {
        name: "tlog",
        rank: 1,
        modules: &["tlog"],
    },
    Layer {
        name: "meet",
        rank: 2,
        modules: &["bundle", "trust", "fresh"],
    },
    Layer {
        name: "storage",
        rank: 3,
        modules: &["storage"],
    },
    Layer {
        name: "log",
        rank: 4,
        modules: &["log", "witness"],
    },
    Layer {
        name: "verify",
        rank: 5,
        modules: &["verify"],
    },
    Layer {
        name: "net",
        rank: 6,
        modules: &["net"],
    },
    Layer {
        name: "gate",
        rank: 7,
        modules: &["gate"],
    },
    Layer {
        name: "monitor",
        rank: 7,
        modules: &["monitor"],
    },
    Layer {
        name: "mcp",
        rank: 8,
        modules: &["mcp"],
    },
];

/// Pairs (from layer, to layer) allowed although the ranks say no: none
/// today. (A later exception must be named here, with its reason.)
const EXCEPTIONS: &[(&str, &str)] = &[];

/// Modules that may use `std::process` (running programs): the issuing
/// gate (its checks), the monitor (its hook) and the tool-call proxy (the
/// MCP server it stands in front of). The verifier never does.
const MAY_RUN_PROCESSES: &[&str] = &["gate", "monitor", "mcp"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layer_of_module(first: &str) -> Option<&'static Layer> {
    LAYERS.iter().find(|l| l.modules.contains(&first))
}

/// The top-level module a library file belongs to (`src/tlog/note.rs` →
/// `tlog`, `src/io/read.rs` → `io`, `src/digest.rs` → `digest`); `None` for lib.rs and the binary.
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    if first == "bin" || first == "lib.rs" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_string())
}

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

/// The file's code lines before its `#[cfg(test)]` module, comments cut.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        out.push((n + 1, code.to_string()));
    }
    out
}

/// Every top-level module named by a `crate::NAME` path in `code`, also
/// inside `use crate::{a, b::c}` groups.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push(name);
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
        rest = after;
    }
    found
}

fn allowed(from: &Layer, to: &Layer) -> bool {
    from.name == to.name || to.rank < from.rank || EXCEPTIONS.contains(&(from.name, to.name))
}

#[test]
fn no_use_crosses_a_layer_the_wrong_way() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut unknown = BTreeSet::new();
    for file in &files {
        let Some(module) = module_of(file) else {
            continue;
        };
        let Some(from) = layer_of_module(&module) else {
            unknown.insert(module);
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_lines(&text) {
            for target in crate_paths(&line) {
                let Some(to) = layer_of_module(&target) else {
                    unknown.insert(target);
                    continue;
                };
                if !allowed(from, to) {
                    wrong.push(format!(
                        "{}:{n}: {} ({}) uses crate::{target} ({})",
                        file.strip_prefix(src()).unwrap().display(),
                        module,
                        from.name,
                        to.name
                    ));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules with no layer (add them to LAYERS and spec/architecture.md): {unknown:?}"
    );
    assert!(
        wrong.is_empty(),
        "uses that cross a layer the wrong way:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn only_the_issuing_side_runs_processes() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let Some(module) = module_of(file) else {
            continue;
        };
        if MAY_RUN_PROCESSES.contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_lines(&text) {
            if line.contains("std::process::Command") || line.contains("process::Command") {
                wrong.push(format!("{}:{n}", file.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a library module outside the issuing gate runs a process: {wrong:?}"
    );
}

/// The most lines a file of `src/` may hold before its test module
/// (issue 19: a file that grows past it is split by what it does).
const MAX_FILE_LINES: usize = 600;

#[test]
fn no_file_in_src_is_over_600_lines_besides_its_test_module() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let n = text
            .lines()
            .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
            .count();
        if n > MAX_FILE_LINES {
            long.push(format!("{}: {n} lines", f.display()));
        }
    }
    assert!(
        files.len() > 100,
        "found only {} files under src/",
        files.len()
    );
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines before their test module:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checker_sees_what_it_claims() {
    // The path reader itself: a group, a nested path and a comment.
    assert_eq!(
        crate_paths("use crate::{digest::Digest, limits};"),
        vec!["digest", "limits"]
    );
    assert_eq!(
        crate_paths("let x = crate::tlog::merkle::root(&h);"),
        vec!["tlog"]
    );
    let lines = code_lines("use crate::io; // crate::net\n#[cfg(test)]\nuse crate::net;");
    assert_eq!(lines.len(), 1);
    assert_eq!(crate_paths(&lines[0].1), vec!["io"]);
    // And the rule: tlog may not use the receipt, storage may not use the log.
    let tlog = layer_of_module("tlog").unwrap();
    let receipt = layer_of_module("receipt").unwrap();
    let storage = layer_of_module("storage").unwrap();
    let log = layer_of_module("log").unwrap();
    assert!(!allowed(tlog, receipt) && !allowed(receipt, tlog));
    assert!(!allowed(storage, log) && allowed(log, storage));
}
