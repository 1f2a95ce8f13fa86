//! `rcpt log prove`: one bundle (or tlog-proof), or every bundle of a range
//! into a directory.

use super::args::LogKeyArg;
use super::progress::Progress;
use crate::cli::{EXIT_OK, UsageError};
use anyhow::Context;
use rcpt::io::Target;
use rcpt::limits::MAX_ENVELOPE_BYTES;
use rcpt::log::Log;
use rcpt::receipt::dsse::Envelope;
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true)
    .args(["index", "receipt", "all", "range"])))]
#[command(after_help = "Examples:
  rcpt log prove log/ --receipt envelope.json -o bundle.json
  rcpt log prove log/ --index 3 --size 10 | rcpt verify --trust trust.json -
  rcpt log prove log/ --all --out-dir bundles/
  rcpt log prove log/ --all -o - | rcpt verify --trust trust.json -")]
pub struct ProveArgs {
    /// The log directory.
    dir: PathBuf,
    /// Leaf index of the entry to prove.
    #[arg(long)]
    index: Option<u64>,
    /// An envelope file whose entry is looked up in the log.
    #[arg(long)]
    receipt: Option<PathBuf>,
    /// Every entry of the tree: one bundle each, into --out-dir, or
    /// with `-o -` as JSON Lines (one bundle a line) on standard output.
    #[arg(long, requires = "dest")]
    all: bool,
    /// Entries A to B-1 (`A..B`): one bundle each, as --all.
    #[arg(long, value_name = "A..B", value_parser = parse_range, requires = "dest")]
    range: Option<std::ops::Range<u64>>,
    /// Tree size of the proof (default: the latest checkpoint).
    #[arg(long)]
    size: Option<u64>,
    /// Output file, written atomically; '-' or nothing for standard
    /// output (with --all or --range: '-' only, JSON Lines).
    #[arg(short = 'o', long = "out", value_name = "FILE", group = "dest")]
    out: Option<Target>,
    /// With --all or --range: an empty or new directory that receives
    /// one file per entry, `<index>.bundle.json` (or `<index>.tlog-proof`).
    #[arg(long = "out-dir", value_name = "DIR", group = "dest")]
    out_dir: Option<PathBuf>,
    /// `bundle` (rcpt JSON) or `tlog-proof` (C2SP tlog-proof@v1, the entry in `extra`).
    #[arg(long, value_enum, default_value = "bundle")]
    format: ProveFormat,
    #[command(flatten)]
    key: LogKeyArg,
}

/// `rcpt log prove`.
pub(super) fn run_prove(args: ProveArgs) -> anyhow::Result<u8> {
    let ProveArgs {
        dir,
        index,
        receipt,
        all,
        range,
        size,
        out,
        out_dir,
        format,
        key,
    } = args;
    let which = ProveWhich {
        index,
        receipt,
        all,
        range,
    };
    prove_which(&key.open(&dir)?, which, size, out, out_dir, format)
}

/// The log index of the envelope in `path`, found by its entry's leaf hash.
pub(super) fn index_of_receipt(log: &Log, path: &Path) -> anyhow::Result<u64> {
    let bytes =
        rcpt::io::read_path(path, MAX_ENVELOPE_BYTES).context("reading the --receipt envelope")?;
    let bytes = super::append::envelope_of_bundle(&path.display().to_string(), bytes);
    let env = Envelope::from_json(&bytes).with_context(|| format!("reading {}", path.display()))?;
    let leaf = rcpt::tlog::merkle::leaf_hash(&env.to_entry());
    log.find(&leaf)?.ok_or_else(|| {
        anyhow::anyhow!(
            "the receipt in {} is not in log {} (size {}); append it first",
            path.display(),
            log.origin(),
            log.size()
        )
    })
}

/// Which entries `rcpt log prove` proves: one by index or by envelope, or
/// every entry (`--all`) or a range.
pub(super) struct ProveWhich {
    pub(super) index: Option<u64>,
    pub(super) receipt: Option<PathBuf>,
    pub(super) all: bool,
    pub(super) range: Option<std::ops::Range<u64>>,
}

/// `rcpt log prove`: one bundle, or many into `--out-dir` or as JSON Lines
/// on `-o -`.
pub(super) fn prove_which(
    log: &Log,
    which: ProveWhich,
    size: Option<u64>,
    out: Option<Target>,
    out_dir: Option<PathBuf>,
    format: ProveFormat,
) -> anyhow::Result<u8> {
    let ProveWhich {
        index,
        receipt,
        all,
        range,
    } = which;
    match (all, range, out_dir, out) {
        (true, _, Some(d), _) => prove_many(log, None, size, &d, format),
        (false, Some(r), Some(d), _) => prove_many(log, Some(r), size, &d, format),
        (true, _, None, Some(o)) => prove_stream(log, None, size, &o, format),
        (false, Some(r), None, Some(o)) => prove_stream(log, Some(r), size, &o, format),
        (_, _, Some(_), _) => Err(UsageError("--out-dir goes with --all or --range".into()).into()),
        (_, _, None, out) => prove(log, index, receipt.as_deref(), size, out.as_ref(), format),
    }
}

pub(super) fn prove(
    log: &Log,
    index: Option<u64>,
    receipt: Option<&Path>,
    size: Option<u64>,
    out: Option<&Target>,
    format: ProveFormat,
) -> anyhow::Result<u8> {
    let index = match (index, receipt) {
        (Some(i), _) => i,
        (None, Some(path)) => index_of_receipt(log, path)?,
        (None, None) => return Err(UsageError("pass --index I or --receipt FILE".into()).into()),
    };
    let size = size.unwrap_or(log.size());
    if index >= size {
        let msg = format!("index {index} is not below the tree size {size}");
        return Err(UsageError(msg).into());
    }
    // A bundle needs the signed checkpoint of its size: refuse an
    // unpublished size before any proof work.
    let checkpoint = log.checkpoint_at(size)?;
    if format == ProveFormat::TlogProof {
        let proof = rcpt::tlog::proof::TlogProof::new(
            Some(log.entry(index)?),
            index,
            log.inclusion_proof(index, size)?,
            &checkpoint,
        )?;
        return emit(out, &proof.to_text());
    }
    let inclusion = log.inclusion_proof(index, size)?;
    let text = bundle_text(log, index, &log.entry(index)?, inclusion, size, &checkpoint)?;
    emit(out, &text)
}

/// `A..B` as a range of log indexes.
pub(super) fn parse_range(text: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("{text:?} is not A..B"))?;
    let (a, b): (u64, u64) = (
        a.parse().map_err(|e| format!("{a:?}: {e}"))?,
        b.parse().map_err(|e| format!("{b:?}: {e}"))?,
    );
    if a > b {
        return Err(format!("{text:?}: {a} is after {b}"));
    }
    Ok(a..b)
}

/// `--out-dir`: a new or empty directory, never one reached through a
/// link at its name; the bundles are written into it as one batch
/// (NewFiles).
fn empty_out_dir(out_dir: &Path) -> anyhow::Result<rcpt::io::Dir> {
    let dir = rcpt::io::Dir::create(out_dir, 0o755)
        .with_context(|| format!("creating {}", out_dir.display()))?;
    if !dir.names()?.is_empty() {
        let msg = format!(
            "{} is not empty; --out-dir needs an empty or new directory",
            out_dir.display()
        );
        return Err(UsageError(msg).into());
    }
    Ok(dir)
}

/// The range (default: every entry), the tree size (default: the latest)
/// and that size's signed checkpoint of a `--all` or `--range` proof; a
/// range past the size is refused.
fn range_at(
    log: &Log,
    range: Option<std::ops::Range<u64>>,
    size: Option<u64>,
) -> anyhow::Result<(std::ops::Range<u64>, u64, String)> {
    let size = size.unwrap_or(log.size());
    let range = range.unwrap_or(0..size);
    let checkpoint = log.checkpoint_at(size)?;
    if range.end > size {
        let msg = format!(
            "--range {}..{} reaches past the tree size {size}",
            range.start, range.end
        );
        return Err(UsageError(msg).into());
    }
    Ok((range, size, checkpoint))
}

/// One bundle (or tlog-proof) per entry of `range` (all: every entry) at
/// `size`, written to `out_dir` as `<index>.bundle.json` (`.tlog-proof`),
/// in parallel, as one batch: the files are synced together once, at the
/// end, before the command says it is done (spec/security.md "Outputs
/// written as a batch").
pub(super) fn prove_many(
    log: &Log,
    range: Option<std::ops::Range<u64>>,
    size: Option<u64>,
    out_dir: &Path,
    format: ProveFormat,
) -> anyhow::Result<u8> {
    let (range, size, checkpoint) = range_at(log, range, size)?;
    let dir = empty_out_dir(out_dir)?;
    let outputs = rcpt::io::NewFiles::new(dir, rcpt::io::OUTPUT_FILE_MODE);
    let progress = std::sync::Mutex::new(Progress::new(Some(range.end - range.start), "proving"));
    let done = std::sync::atomic::AtomicU64::new(0);
    log.prove_range(
        range.clone(),
        size,
        |index, entry, inclusion| -> anyhow::Result<()> {
            let (name, text) = match format {
                ProveFormat::TlogProof => {
                    let proof = rcpt::tlog::proof::TlogProof::new(
                        Some(entry.to_vec()),
                        index,
                        inclusion,
                        &checkpoint,
                    )?;
                    (format!("{index}.tlog-proof"), proof.to_text())
                }
                ProveFormat::Bundle => (
                    format!("{index}.bundle.json"),
                    bundle_text(log, index, entry, inclusion, size, &checkpoint)?,
                ),
            };
            outputs
                .write(&name, text.as_bytes())
                .with_context(|| format!("writing {}", out_dir.join(&name).display()))?;
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if n.is_multiple_of(4096)
                && let Ok(mut p) = progress.lock()
            {
                p.set(n);
            }
            Ok(())
        },
    )?;
    // Every bundle durable before the command says it wrote them.
    outputs.finish()?;
    if let Ok(p) = progress.lock() {
        p.finish();
    }
    println!(
        "wrote {} (entries {}..{} at tree size {size}) to {}",
        crate::cli::units::count(range.end - range.start, "bundle", "bundles"),
        range.start,
        range.end,
        out_dir.display()
    );
    Ok(EXIT_OK)
}

/// Entries proved per step of [`prove_stream`]: the lines of one step are
/// held, sorted into index order and written before the next step begins.
const STREAM_CHUNK_ENTRIES: u64 = 4096;

/// `--all -o -` / `--range A..B -o -`: every bundle of the range at `size`,
/// one compact bundle a line (JSON Lines), in index order, on standard
/// output (`rcpt verify -` reads them back).
pub(super) fn prove_stream(
    log: &Log,
    range: Option<std::ops::Range<u64>>,
    size: Option<u64>,
    out: &Target,
    format: ProveFormat,
) -> anyhow::Result<u8> {
    if !matches!(out, Target::Stdout) {
        let msg = "with --all or --range, -o takes '-' (JSON Lines on standard output; \
                   redirect it to a file) or use --out-dir DIR (one file per entry)";
        return Err(UsageError(msg.into()).into());
    }
    if format == ProveFormat::TlogProof {
        let msg = "--format tlog-proof is many lines per proof, so not JSON Lines: \
                   give --out-dir DIR for one file per entry";
        return Err(UsageError(msg.into()).into());
    }
    let (range, size, checkpoint) = range_at(log, range, size)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut start = range.start;
    while start < range.end {
        let end = range.end.min(start.saturating_add(STREAM_CHUNK_ENTRIES));
        let lines = std::sync::Mutex::new(Vec::new());
        log.prove_range(
            start..end,
            size,
            |index, entry, inclusion| -> anyhow::Result<()> {
                let text = bundle_text(log, index, entry, inclusion, size, &checkpoint)?;
                let line = compact_json(&text);
                if let Ok(mut lines) = lines.lock() {
                    lines.push((index, line));
                }
                Ok(())
            },
        )?;
        let mut lines = lines.into_inner().unwrap_or_default();
        lines.sort_unstable_by_key(|(index, _)| *index);
        for (_, line) in lines {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        start = end;
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// JSON text without the whitespace outside its strings: one line.
fn compact_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

/// The bundle JSON of entry `index` with its proof in the tree of `size`.
pub(super) fn bundle_text(
    log: &Log,
    index: u64,
    entry: &[u8],
    inclusion: Vec<rcpt::tlog::merkle::Hash>,
    size: u64,
    checkpoint: &str,
) -> anyhow::Result<String> {
    let mut text = log
        .bundle_from(index, entry, inclusion, size, checkpoint)?
        .to_json();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// The proof formats of `rcpt log prove`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProveFormat {
    /// The rcpt bundle (JSON).
    Bundle,
    /// C2SP tlog-proof@v1.
    TlogProof,
}

/// Write `text` to `out` (standard output when absent or '-'), atomically for a file.
pub(super) fn emit(out: Option<&Target>, text: &str) -> anyhow::Result<u8> {
    crate::cli::write_target(out.unwrap_or(&Target::Stdout), text.as_bytes())?;
    Ok(EXIT_OK)
}
