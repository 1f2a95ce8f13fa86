//! `rcpt log append`: read envelopes (files or JSON Lines on standard input),
//! admit them in parallel through `rcpt::log::admit`, append them in durable
//! batches, and report each in input order.

use crate::cli::{EXIT_FAILED, EXIT_OK, UsageError};
use anyhow::Context;
use rayon::prelude::*;
use rcpt::io::{InputError, Source};
use rcpt::limits::MAX_REFUSAL_LINES;
use rcpt::limits::{
    MAX_APPEND_BATCH_BYTES, MAX_APPEND_BATCH_ENTRIES, MAX_ENVELOPE_BYTES, MAX_STDIN_LINE_BYTES,
};
use rcpt::log::admit::{self, AcceptedIssuers, Admitted};
use rcpt::log::{HashedEntry, Log, LogError, LogWriter};
use rcpt::reason::Reason;
use rcpt::storage::Store;
use rcpt::text::Escaped;
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;

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

/// Inputs read and admitted at a time while a batch is gathered: the
/// envelope bytes of one chunk are all that is held besides the entries.
pub(super) const ADMIT_CHUNK: usize = 4096;

/// How much of a durable batch has been gathered.
#[derive(Default)]
pub(super) struct Gathered {
    inputs: usize,
    bytes: usize,
}

impl Gathered {
    /// Room for another input: at most `max` (and
    /// `MAX_APPEND_BATCH_ENTRIES`) inputs, and about
    /// `MAX_APPEND_BATCH_BYTES` of input.
    fn room(&self, max: usize) -> bool {
        self.inputs < max.min(MAX_APPEND_BATCH_ENTRIES) && self.bytes < MAX_APPEND_BATCH_BYTES / 2
    }
}

/// Take the next chunk of inputs of the batch being `gathered`: at most
/// [`ADMIT_CHUNK`], within the batch limits of [`Gathered::room`].
pub(super) fn next_chunk(
    inputs: &mut Inputs<'_>,
    gathered: &mut Gathered,
    max: usize,
) -> Vec<Input> {
    let mut chunk = Vec::new();
    while chunk.len() < ADMIT_CHUNK && gathered.room(max) {
        let Some(input) = inputs.next() else { break };
        gathered.inputs += 1;
        gathered.bytes += input.bytes.as_ref().map_or(0, Vec::len);
        chunk.push(input);
    }
    chunk
}

/// What is kept of one input of a batch until the batch is durable: its
/// name and what admission said (the entry itself goes to the writer).
pub(super) struct Checked {
    name: String,
    result: Result<Kept, Refusal>,
}

/// What the report of an admitted envelope needs.
pub(super) struct Kept {
    receipt_id: String,
    signatures: &'static str,
}

/// One admitted chunk: each input's result, and the entry of each one admitted.
type AdmittedChunk = Vec<(Checked, Option<HashedEntry>)>;

/// Admit the inputs of one chunk on every core.
pub(super) fn admit_chunk(chunk: Vec<Input>, accepted: Option<&AcceptedIssuers>) -> AdmittedChunk {
    chunk
        .into_par_iter()
        .map(|input| {
            let result = input
                .bytes
                .and_then(|b| admit::admit(&b, accepted).map_err(Refusal::from));
            let (result, entry) = match result {
                Ok(Admitted {
                    entry,
                    receipt_id,
                    signatures,
                    ..
                }) => (
                    Ok(Kept {
                        receipt_id,
                        signatures: signatures.as_str(),
                    }),
                    Some(HashedEntry::new(entry)),
                ),
                Err(r) => (Err(r), None),
            };
            let name = input.name;
            (Checked { name, result }, entry)
        })
        .collect()
}

/// Read and admit (in parallel, a chunk at a time) the inputs of the next
/// durable batch: the entries to append and every input's result, in
/// input order. The next chunk is read while the last one is admitted on
/// another thread; the envelope bytes are dropped as soon as their chunk
/// is admitted, so memory holds the entries of one batch, not its input.
pub(super) fn gather_batch(
    inputs: &mut Inputs<'_>,
    max: usize,
    accepted: Option<&AcceptedIssuers>,
) -> anyhow::Result<(Vec<HashedEntry>, Vec<Checked>)> {
    let mut gathered = Gathered::default();
    let (mut entries, mut checked) = (Vec::new(), Vec::new());
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let mut pending: Option<std::thread::ScopedJoinHandle<'_, AdmittedChunk>> = None;
        loop {
            let chunk = next_chunk(inputs, &mut gathered, max);
            if let Some(admitting) = pending.take() {
                let admitted = admitting
                    .join()
                    .map_err(|_| anyhow::anyhow!("the admission thread failed"))?;
                for (c, entry) in admitted {
                    checked.push(c);
                    entries.extend(entry);
                }
            }
            if chunk.is_empty() {
                return Ok(());
            }
            pending = Some(scope.spawn(move || admit_chunk(chunk, accepted)));
        }
    })?;
    Ok((entries, checked))
}

/// How `append` runs.
pub(super) struct AppendOptions {
    pub(super) key: Option<PathBuf>,
    pub(super) trust: Option<PathBuf>,
    pub(super) json: bool,
    pub(super) wait: bool,
    pub(super) max_batch: usize,
}

pub(super) fn append(
    dir: &Path,
    store: &Arc<dyn Store>,
    opts: &AppendOptions,
    files: &[String],
) -> anyhow::Result<u8> {
    let log = Log::open_store(store.clone(), None)
        .map_err(|e| match e {
            LogError::NoLogKey { location } => LogError::NotWritable { location },
            e => e,
        })
        .map_err(|e| super::s3_hint(dir, e))?;
    let key_path = match &opts.key {
        Some(k) => k.clone(),
        None => log.key_file().map(Path::to_path_buf).ok_or_else(|| {
            UsageError(format!(
                "{} records no key file; pass --key LOG.key",
                dir.display()
            ))
        })?,
    };
    check_append_files(files)?;
    let accepted = match &opts.trust {
        Some(path) => Some(read_accepted(path)?),
        None => log.accepted_issuers()?,
    };
    drop(log);
    if accepted.is_none() {
        eprintln!(
            "rcpt: note: {} has no accepted issuers (no --trust here or at init): \
             envelope signatures are not checked",
            dir.display()
        );
    }
    let mut writer = LogWriter::open_store(store.clone(), &read_key(&key_path)?, opts.wait)?;
    let has_stdin = files.iter().any(|f| f == "-");
    let mut inputs = Inputs {
        files: files.iter(),
        stdin: None,
    };
    let mut progress = Progress::new((!has_stdin).then_some(files.len() as u64), "appending");
    let mut done = 0u64;
    let mut refused = RefusalLines::default();
    // Buffered: one write per batch, not one per line (the batch is
    // flushed once it is durable and reported).
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    loop {
        let (entries, checked) = gather_batch(&mut inputs, opts.max_batch, accepted.as_ref())?;
        if checked.is_empty() {
            break;
        }
        let mut appended = writer.append_hashed(entries)?.into_iter();
        // The batch is durable and published: now report it, in input order.
        for c in &checked {
            match &c.result {
                Ok(kept) => {
                    let a = appended.next().context("append returned too few results")?;
                    report_ok(&mut out, opts.json, &c.name, a, kept)?;
                }
                Err(r) => refused.report(&mut out, opts.json, &c.name, r)?,
            }
        }
        out.flush()?;
        done += checked.len() as u64;
        progress.set(done);
    }
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
    valid: &Kept,
) -> anyhow::Result<()> {
    let (index, id) = (appended.index, &valid.receipt_id);
    if json {
        let v = serde_json::json!({"file": name, "index": index, "receipt_id": id,
            "new": appended.new, "signature": valid.signatures});
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
