//! The bundles of `rcpt verify`'s command line: directories expanded, paths
//! checked before any output, and the bundles read in order (a file, a
//! JSON Lines file's lines, or standard input's bundles).

use super::UsageError;
use anyhow::Context as _;
use rayon::prelude::*;
use rcpt::io::{InputError, LineReader, RegularPath, Source};
use rcpt::limits::MAX_BUNDLE_BYTES;
use rcpt::text::escape;
use rcpt::verify::Verifier;
use std::io::BufReader;

/// Read buffer of a JSON Lines stream: a pipe's whole buffer per read.
const STREAM_BUFFER: usize = 64 * 1024;

/// The JSON files rcpt reads or writes that are never bundles, by name (a
/// whole name, or an end of a name starting with '.'): a directory's member
/// so named is skipped, and said to be (spec/verify.md "Bundles in a
/// directory"). Named on the command line, a file is read as a bundle.
const NOT_BUNDLES: [(&str, &str); 9] = [
    ("trust.json", "a trust file"),
    (".trust.json", "a trust file"),
    ("manifest.json", "a corpus manifest"),
    (".errata.json", "corpus errata"),
    ("settings.json", "settings"),
    ("policy.json", "a policy"),
    (".policy.json", "a policy"),
    ("gate.json", "a gate policy"),
    (".watch.json", "a monitor's watch file"),
];

/// What a file of a directory is by its name, when it is not a bundle.
fn not_a_bundle(name: &str) -> Option<&'static str> {
    NOT_BUNDLES
        .iter()
        .find(|(pattern, _)| {
            name == *pattern || (pattern.starts_with('.') && name.ends_with(pattern))
        })
        .map(|(_, what)| *what)
}

/// A directory among the bundles stands for its `*.json` and `*.jsonl`
/// files, in name order (not its subdirectories), less those whose names
/// say they are not bundles (each said on stderr); one with none is a bad
/// invocation.
pub(super) fn expand_dirs(bundles: &[Source]) -> anyhow::Result<Vec<Source>> {
    let mut out = Vec::with_capacity(bundles.len());
    for source in bundles {
        let Source::Path(dir) = source else {
            out.push(source.clone());
            continue;
        };
        if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            out.push(source.clone());
            continue;
        }
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading the directory {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json" || x == "jsonl"))
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                let what = name.as_deref().and_then(not_a_bundle);
                if let Some(what) = what {
                    eprintln!(
                        "rcpt: note: skipped {}: {what} by its name, not a bundle (name the file \
                         to verify it as one)",
                        escape(&p.display().to_string())
                    );
                }
                what.is_none()
            })
            .collect();
        if files.is_empty() {
            return Err(UsageError(format!(
                "{}: a directory with no *.json bundle files",
                dir.display()
            ))
            .into());
        }
        files.sort();
        out.extend(files.into_iter().map(Source::Path));
    }
    Ok(out)
}

/// Every bundle path must name an existing regular file: a missing one (an
/// unmatched glob in CI) is a bad invocation, found before any output.
/// The paths are looked at on every core; the first bad one in argument
/// order is the one reported.
pub(super) fn check_bundle_paths(bundles: &[Source]) -> anyhow::Result<Vec<RegularPath>> {
    let checked: Vec<Result<RegularPath, String>> = bundles
        .par_iter()
        .filter_map(|source| match source {
            Source::Path(path) => Some(path),
            Source::Stdin => None,
        })
        .map(|path| match std::fs::metadata(path) {
            Ok(meta) => RegularPath::new(path.clone(), &meta).ok_or_else(|| {
                let kind = rcpt::io::FileKind::of(&meta);
                format!("bundle {}: {kind}, not a bundle file", path.display())
            }),
            Err(e) => Err(format!(
                "bundle {}: {e} (a path that matched no file?)",
                path.display()
            )),
        })
        .collect();
    checked
        .into_iter()
        .map(|c| c.map_err(|msg| UsageError(msg).into()))
        .collect()
}

/// One bundle to verify: a file, or bytes read from standard input.
pub(super) struct Input {
    pub(super) name: String,
    what: InputKind,
}

enum InputKind {
    File(RegularPath),
    Read(Result<Vec<u8>, InputError>),
}

impl Input {
    pub(super) fn verify(&self, verifier: &Verifier) -> rcpt::verify::Report {
        match &self.what {
            InputKind::File(path) => verifier.verify_regular_file(path),
            InputKind::Read(Ok(bytes)) => verifier.verify_bytes(bytes),
            InputKind::Read(Err(e)) => verifier.report_input_error(e),
        }
    }
}

/// The bundles of the command line in order; `-` expands to the bundles of
/// standard input.
pub(super) struct Inputs {
    args: std::vec::IntoIter<Source>,
    /// The checked paths of `args`' paths, in order.
    paths: std::vec::IntoIter<RegularPath>,
    stdin: Option<StdinBundles>,
    /// The lines of a JSON Lines file (`*.jsonl`) being read, and its name.
    lines: Option<(String, LineReader<BufReader<std::fs::File>>)>,
}

impl Inputs {
    pub(super) fn new(args: Vec<Source>, paths: Vec<RegularPath>) -> Self {
        Inputs {
            args: args.into_iter(),
            paths: paths.into_iter(),
            stdin: None,
            lines: None,
        }
    }
}

impl Iterator for Inputs {
    type Item = Input;
    fn next(&mut self) -> Option<Input> {
        loop {
            if let Some(stdin) = &mut self.stdin {
                match stdin.next() {
                    Some(input) => return Some(input),
                    None => self.stdin = None,
                }
            }
            if let Some((name, lines)) = &mut self.lines {
                match lines.next() {
                    Some(line) => {
                        return Some(Input {
                            name: format!("{name}:{}", line.number),
                            what: InputKind::Read(line.bytes),
                        });
                    }
                    None => self.lines = None,
                }
            }
            match self.args.next()? {
                Source::Stdin => self.stdin = Some(StdinBundles::new()),
                Source::Path(path) if path.extension().is_some_and(|x| x == "jsonl") => {
                    let checked = self.paths.next()?;
                    let name = path.display().to_string();
                    match rcpt::io::open_regular(checked.path()) {
                        Ok((file, _)) => {
                            let reader = LineReader::new(
                                BufReader::with_capacity(STREAM_BUFFER, file),
                                &name,
                                MAX_BUNDLE_BYTES,
                            );
                            self.lines = Some((name, reader));
                        }
                        Err(e) => {
                            return Some(Input {
                                name,
                                what: InputKind::Read(Err(e)),
                            });
                        }
                    }
                }
                Source::Path(path) => {
                    let checked = self.paths.next()?;
                    return Some(Input {
                        name: path.display().to_string(),
                        what: InputKind::File(checked),
                    });
                }
            }
        }
    }
}

/// Bundles on standard input: JSON Lines when the first non-blank line is a
/// whole JSON value (each line one bundle, named `-:N`), else one bundle,
/// the whole input (named `-`). Every read is capped at the bundle limit.
enum StdinBundles {
    Start,
    Lines(LineReader<BufReader<std::io::Stdin>>),
    Done,
}

impl StdinBundles {
    fn new() -> Self {
        StdinBundles::Start
    }

    /// Read the first line and decide the mode.
    fn first(&mut self) -> Option<Input> {
        let stdin = BufReader::with_capacity(STREAM_BUFFER, std::io::stdin());
        let mut lines = LineReader::new(stdin, "-", MAX_BUNDLE_BYTES);
        let Some(line) = lines.next() else {
            *self = StdinBundles::Done;
            return Some(Input {
                name: "-".into(),
                what: InputKind::Read(Ok(Vec::new())),
            });
        };
        let whole_value = line
            .bytes
            .as_ref()
            .is_ok_and(|b| serde_json::from_slice::<serde::de::IgnoredAny>(b).is_ok());
        if whole_value || line.bytes.is_err() {
            *self = StdinBundles::Lines(lines);
            return Some(Input {
                name: format!("-:{}", line.number),
                what: InputKind::Read(line.bytes),
            });
        }
        *self = StdinBundles::Done;
        let mut doc = line.bytes.unwrap_or_default();
        doc.push(b'\n');
        let rest = MAX_BUNDLE_BYTES.saturating_sub(doc.len());
        let read = rcpt::io::read_capped(&Source::Stdin, rest, lines.into_inner())
            .map(|tail| {
                doc.extend_from_slice(&tail);
                doc
            })
            .map_err(|e| match e {
                InputError::TooLarge { .. } => InputError::TooLarge {
                    source_name: "-".into(),
                    limit: MAX_BUNDLE_BYTES,
                },
                other => other,
            });
        Some(Input {
            name: "-".into(),
            what: InputKind::Read(read),
        })
    }
}

impl Iterator for StdinBundles {
    type Item = Input;
    fn next(&mut self) -> Option<Input> {
        match self {
            StdinBundles::Start => self.first(),
            StdinBundles::Lines(lines) => {
                let line = lines.next()?;
                Some(Input {
                    name: format!("-:{}", line.number),
                    what: InputKind::Read(line.bytes),
                })
            }
            StdinBundles::Done => None,
        }
    }
}
