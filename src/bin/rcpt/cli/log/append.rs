//! `rcpt log append`: read envelopes (files or JSON Lines on standard input),
//! hand them to the log's intake (`rcpt::log::intake`: admitted in
//! parallel, appended in durable batches, published), and report each in
//! input order.

use crate::cli::{EXIT_FAILED, EXIT_OK, UsageError};
use rcpt::io::{InputError, Source};
use rcpt::limits::MAX_REFUSAL_LINES;
use rcpt::limits::{MAX_ENVELOPE_BYTES, MAX_STDIN_LINE_BYTES};
use rcpt::log::admit;
use rcpt::log::intake::{Intake, IntakeError, KeyChoice, Offered, Options, Outcome, Reopen};
use rcpt::reason::Reason;
use rcpt::storage::Store;
use rcpt::text::Escaped;
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::init::read_accepted;
use super::progress::Progress;

/// One input envelope: its name for reports and its bytes (or why it could
/// not be read).
pub(super) struct Input {
    name: String,
    bytes: Result<Vec<u8>, Refusal>,
}

/// Why an input was refused: a stable reason code and a detail.
#[derive(Debug)]
pub(super) struct Refusal {
    reason: Reason,
    detail: String,
}

impl Refusal {
    fn new(reason: Reason, detail: impl std::fmt::Display) -> Refusal {
        Refusal {
            reason,
            detail: detail.to_string(),
        }
    }
}

impl From<admit::Refusal> for Refusal {
    fn from(r: admit::Refusal) -> Refusal {
        Refusal::new(r.reason(), &r)
    }
}

/// Read an envelope file with the capped reader (a regular file, at most
/// the envelope limit).
pub(super) fn read_file(path: &str) -> Result<Vec<u8>, Refusal> {
    rcpt::io::read_path(Path::new(path), MAX_ENVELOPE_BYTES).map_err(|e| match e {
        InputError::TooLarge { .. } => Refusal::new(Reason::EnvelopeTooLarge, e),
        _ => Refusal::new(Reason::InputUnreadable, rcpt::io::error_chain(&e)),
    })
}

/// A bundle (what `rcpt log prove` writes) where an envelope belongs: its
/// envelope, said once on stderr; any other input as it is. Only input
/// that names the bundle media type is parsed as a bundle.
pub(super) fn envelope_of_bundle(name: &str, bytes: Vec<u8>) -> Vec<u8> {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    static MARKER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| {
            memchr::memmem::Finder::new(rcpt::constants::BUNDLE_MEDIA_TYPE.as_bytes())
        });
    if MARKER.find(&bytes).is_none() {
        return bytes;
    }
    let Ok(bundle) = rcpt::bundle::Bundle::from_json(&bytes) else {
        return bytes;
    };
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "rcpt: note: {name} is a bundle (what `rcpt log prove` writes), not an envelope: \
             the envelope it holds is used (for every bundle given)"
        );
    }
    let mut json = bundle.envelope.to_json().into_bytes();
    json.push(b'\n');
    json
}

/// Every file argument must name a regular file (a missing one is a bad
/// invocation, found before anything is appended); `-` at most once.
pub(super) fn check_append_files(files: &[String]) -> anyhow::Result<()> {
    let sources: Vec<Source> = files
        .iter()
        .map(|f| Source::from(OsString::from(f)))
        .collect();
    crate::cli::stdin_at_most_once(&sources)?;
    for source in &sources {
        if let Source::Path(path) = source {
            rcpt::io::open_regular(path)?;
        }
    }
    Ok(())
}

/// The inputs of `append`, in order: each file argument, and each
/// non-empty line of stdin for `-`. Lines are read with a bound.
pub(super) struct Inputs<'a> {
    files: std::slice::Iter<'a, String>,
    stdin: Option<StdinLines>,
}

/// Standard input read as lines: through a buffer of [`STDIN_BUFFER_BYTES`]
/// (a system call per 8 KiB, std's default, is 12,000 for 100 MB), each
/// line into a buffer sized like the line before.
pub(super) struct StdinLines {
    reader: std::io::BufReader<std::io::StdinLock<'static>>,
    line_no: u64,
    last_len: usize,
}

/// Bytes read from standard input at a time by `append -` and `submit -`.
pub(super) const STDIN_BUFFER_BYTES: usize = 1 << 20;

/// The most a line's buffer is sized for in advance from the line before.
pub(super) const LINE_CAPACITY_HINT_MAX: usize = 64 << 10;

impl Inputs<'_> {
    /// The next stdin line (bounded by `MAX_STDIN_LINE_BYTES`), or `None` at end of input.
    fn next_line(&mut self) -> Option<Input> {
        let StdinLines {
            reader: stdin,
            line_no,
            last_len,
        } = self.stdin.as_mut()?;
        loop {
            *line_no += 1;
            let name = format!("-:{line_no}");
            // Room for a line like the last one without growing (an
            // envelope is about 1 KiB; a longer line grows as it must).
            let mut line =
                Vec::with_capacity(last_len.saturating_add(64).min(LINE_CAPACITY_HINT_MAX));
            let limit = MAX_STDIN_LINE_BYTES as u64 + 1;
            let read = stdin.by_ref().take(limit).read_until(b'\n', &mut line);
            match read {
                Err(e) => {
                    return Some(Input {
                        name,
                        bytes: Err(Refusal::new(Reason::InputUnreadable, e)),
                    });
                }
                Ok(0) => return None,
                Ok(_) => {}
            }
            if line.len() as u64 == limit && line.last() != Some(&b'\n') {
                // Skip the rest of the over-long line, in bounded reads.
                let mut sink = Vec::new();
                while matches!(stdin.by_ref().take(limit).read_until(b'\n', &mut sink), Ok(n) if n > 0)
                    && sink.last() != Some(&b'\n')
                {
                    sink.clear();
                }
                let detail = format!("line is over the {MAX_STDIN_LINE_BYTES}-byte limit");
                return Some(Input {
                    name,
                    bytes: Err(Refusal::new(Reason::EnvelopeTooLarge, detail)),
                });
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            *last_len = line.len();
            let line = envelope_of_bundle(&name, line);
            return Some(Input {
                name,
                bytes: Ok(line),
            });
        }
    }
}

impl Iterator for Inputs<'_> {
    type Item = Input;
    fn next(&mut self) -> Option<Input> {
        loop {
            if self.stdin.is_some() {
                if let Some(input) = self.next_line() {
                    return Some(input);
                }
                self.stdin = None;
            }
            let file = self.files.next()?;
            if file == "-" {
                self.stdin = Some(StdinLines {
                    reader: std::io::BufReader::with_capacity(
                        STDIN_BUFFER_BYTES,
                        std::io::stdin().lock(),
                    ),
                    line_no: 0,
                    last_len: 0,
                });
                continue;
            }
            return Some(Input {
                name: file.clone(),
                bytes: read_file(file).map(|b| envelope_of_bundle(file, b)),
            });
        }
    }
}

/// The inputs of `append` (each file, and each non-empty stdin line for
/// `-`), as (name, bytes or (reason, detail)): `log submit` reads the same way.
#[cfg(feature = "net")]
pub(super) fn inputs(
    files: &[String],
) -> impl Iterator<Item = (String, Result<Vec<u8>, (&'static str, String)>)> + '_ {
    let inputs = Inputs {
        files: files.iter(),
        stdin: None,
    };
    inputs.map(|i| (i.name, i.bytes.map_err(|r| (r.reason.as_str(), r.detail))))
}

/// How `append` runs.
pub(super) struct AppendOptions {
    pub(super) key: Option<PathBuf>,
    pub(super) trust: Option<PathBuf>,
    pub(super) json: bool,
    pub(super) wait: bool,
    pub(super) max_batch: usize,
}

/// Open the intake of the log at `dir` for `append`: the key given or
/// recorded, the issuers of `--trust` or those recorded.
fn open_intake(dir: &Path, store: &Arc<dyn Store>, opts: &AppendOptions) -> anyhow::Result<Intake> {
    let accepted = match &opts.trust {
        Some(path) => Some(read_accepted(path)?),
        None => None,
    };
    let options = Options {
        key: match &opts.key {
            Some(k) => KeyChoice::File(k.clone()),
            None => KeyChoice::Recorded,
        },
        accepted,
        reopen: Reopen::OnDemand { wait: opts.wait },
    };
    Intake::open(Arc::clone(store), options).map_err(|e| match e {
        IntakeError::Log(e) => super::s3_hint(dir, e),
        IntakeError::NoKeyFile { .. } => UsageError(format!(
            "{} records no key file; pass --key LOG.key",
            dir.display()
        ))
        .into(),
        e => e.into(),
    })
}

pub(super) fn append(
    dir: &Path,
    store: &Arc<dyn Store>,
    opts: &AppendOptions,
    files: &[String],
) -> anyhow::Result<u8> {
    check_append_files(files)?;
    let mut intake = open_intake(dir, store, opts)?;
    if intake.accepted().is_none() {
        eprintln!(
            "rcpt: note: {} has no accepted issuers (no --trust here or at init): \
             envelope signatures are not checked",
            dir.display()
        );
    }
    intake.ready()?;
    let has_stdin = files.iter().any(|f| f == "-");
    let inputs = Inputs {
        files: files.iter(),
        stdin: None,
    };
    let offered = inputs.map(|i| Offered {
        tag: i.name,
        envelope: i.bytes,
    });
    let mut progress = Progress::new((!has_stdin).then_some(files.len() as u64), "appending");
    let mut done = 0u64;
    let mut refused = RefusalLines::default();
    // Buffered: one write per batch, not one per line (the batch is
    // flushed once it is durable and reported).
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    intake.append_stream(offered, opts.max_batch, |batch| -> anyhow::Result<()> {
        // The batch is durable and published: now report it, in input order.
        let count = batch.len() as u64;
        for (name, outcome) in batch {
            match outcome {
                Outcome::Logged {
                    appended,
                    receipt_id,
                    signatures,
                } => report_ok(
                    &mut out,
                    opts.json,
                    &name,
                    appended,
                    &receipt_id,
                    signatures,
                )?,
                Outcome::Refused(r) => refused.report(&mut out, opts.json, &name, &r.into())?,
                Outcome::Unread(r) => refused.report(&mut out, opts.json, &name, &r)?,
                _ => {}
            }
        }
        out.flush()?;
        done += count;
        progress.set(done);
        Ok(())
    })?;
    progress.finish();
    refused.summarise();
    Ok(if refused.count > 0 {
        EXIT_FAILED
    } else {
        EXIT_OK
    })
}

/// The refusals of one run: the first [`MAX_REFUSAL_LINES`] said in full
/// on stderr, the rest counted by reason and said in one line at the end
/// (`--format json` still lists every one on stdout).
#[derive(Default)]
pub(super) struct RefusalLines {
    count: u64,
    /// Refusals past the cap, by reason code.
    unsaid: std::collections::BTreeMap<&'static str, u64>,
    first_unsaid: Option<String>,
    last_unsaid: String,
}

impl RefusalLines {
    fn report(
        &mut self,
        out: &mut impl Write,
        json: bool,
        name: &str,
        r: &Refusal,
    ) -> anyhow::Result<()> {
        self.count += 1;
        if self.count <= MAX_REFUSAL_LINES {
            return report_refused(out, json, name, r);
        }
        if json {
            let v = serde_json::json!({"file": name, "error": r.reason, "detail": r.detail});
            writeln!(out, "{v}")?;
        }
        *self.unsaid.entry(r.reason.as_str()).or_default() += 1;
        self.first_unsaid.get_or_insert_with(|| name.to_string());
        name.clone_into(&mut self.last_unsaid);
        Ok(())
    }

    /// The one line for the refusals not said.
    fn summarise(&self) {
        let Some(first) = &self.first_unsaid else {
            return;
        };
        let n: u64 = self.unsaid.values().sum();
        let reasons: Vec<String> = self
            .unsaid
            .iter()
            .map(|(reason, k)| format!("{reason}: {}", crate::cli::units::grouped(*k)))
            .collect();
        let range = if n == 1 {
            first.clone()
        } else {
            format!("{first} ... {}", self.last_unsaid)
        };
        eprintln!(
            "rcpt: {} more refused, not listed ({range}; {}); {} refused in all",
            crate::cli::units::grouped(n),
            reasons.join(", "),
            crate::cli::units::grouped(self.count)
        );
    }
}

pub(super) fn report_ok(
    out: &mut impl Write,
    json: bool,
    name: &str,
    appended: rcpt::log::Appended,
    id: &str,
    signatures: &str,
) -> anyhow::Result<()> {
    let index = appended.index;
    if json {
        let v = serde_json::json!({"file": name, "index": index, "receipt_id": id,
            "new": appended.new, "signature": signatures});
        writeln!(out, "{v}")?;
    } else {
        writeln!(out, "{index} {id}")?;
    }
    Ok(())
}

pub(super) fn report_refused(
    out: &mut impl Write,
    json: bool,
    name: &str,
    r: &Refusal,
) -> anyhow::Result<()> {
    if json {
        let v = serde_json::json!({"file": name, "error": r.reason, "detail": r.detail});
        writeln!(out, "{v}")?;
    }
    eprintln!(
        "rcpt: refused {}: {}: {}",
        Escaped(name),
        r.reason,
        Escaped(&r.detail)
    );
    Ok(())
}
