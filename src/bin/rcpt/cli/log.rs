//! `rcpt log`: write and read a transparency log.
//!
//! The library (`rcpt::log`) owns the files and their durability; this file
//! reads inputs, admits envelopes through `rcpt::log::admit` (in
//! parallel), feeds the library batches of entry bytes, and prints what
//! happened.

use super::{EXIT_FAILED, EXIT_OK, UsageError};
use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use rcpt::io::{InputError, Source, Target};
use rcpt::keys::NoteVerifier;
use rcpt::keys::SigningKey;
use rcpt::limits::{
    MAX_APPEND_BATCH_BYTES, MAX_APPEND_BATCH_ENTRIES, MAX_ENVELOPE_BYTES, MAX_KEY_FILE_BYTES,
    MAX_STDIN_LINE_BYTES,
};
use rcpt::log::admit::{self, AcceptedIssuers, Admitted};
use rcpt::log::{HashedEntry, InitOptions, Log, LogError, LogWriter};
use rcpt::reason::Reason;
use rcpt::receipt::dsse::Envelope;
use rcpt::storage::Store;
use rcpt::storage::posix::PosixStore;
use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum LogCommand {
    /// Create an empty log.
    #[command(after_help = "Example:
  rcpt log init log/ --origin log.example/receipts --key logkey.key")]
    Init {
        /// The log directory to create (C2SP tlog-tiles layout).
        dir: PathBuf,
        /// Checkpoint origin line, also the log key's name.
        #[arg(long)]
        origin: String,
        /// The log's private key (PKCS#8 PEM), kept outside DIR.
        #[arg(long)]
        key: PathBuf,
        /// Trust file whose issuers the log accepts (kept in DIR/.rcpt/):
        /// append then refuses an envelope without a valid signature by
        /// the accepted issuer its receipt names.
        #[arg(long)]
        trust: Option<PathBuf>,
        #[command(flatten)]
        at: EndpointArg,
    },
    /// Append envelopes (.json files, or '-' for JSON Lines on stdin).
    #[command(after_help = "Example:
  rcpt log append log/ envelope.json")]
    Append {
        /// The log directory.
        dir: PathBuf,
        /// The log's private key (default: the key file given at init).
        #[arg(long)]
        key: Option<PathBuf>,
        /// Trust file whose issuers this append accepts (default: the one
        /// given at init; with neither, signatures are not checked).
        #[arg(long)]
        trust: Option<PathBuf>,
        /// One JSON object per line on stdout.
        #[arg(long)]
        json: bool,
        /// Wait for another writer to finish instead of failing at once.
        #[arg(long)]
        wait: bool,
        /// Most envelopes per durable batch (each batch is published before
        /// its lines are printed).
        #[arg(long, default_value_t = MAX_APPEND_BATCH_ENTRIES as u64,
              value_parser = clap::value_parser!(u64).range(1..=MAX_APPEND_BATCH_ENTRIES as u64))]
        batch: u64,
        /// Envelope files (.json), or '-' for JSON Lines of envelopes on standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        #[command(flatten)]
        at: EndpointArg,
    },
    /// Print the latest checkpoint.
    #[command(after_help = "Example:
  rcpt log checkpoint log/ > checkpoint.txt")]
    Checkpoint {
        /// The log directory.
        dir: PathBuf,
        #[command(flatten)]
        key: LogKeyArg,
    },
    /// Write the proof bundle of one receipt.
    #[command(group(clap::ArgGroup::new("which").required(true)
        .args(["index", "receipt", "all", "range"])))]
    #[command(after_help = "Examples:
  rcpt log prove log/ --receipt envelope.json -o bundle.json
  rcpt log prove log/ --index 3 --size 10 | rcpt verify --trust trust.json -
  rcpt log prove log/ --all --out-dir bundles/")]
    Prove {
        /// The log directory.
        dir: PathBuf,
        /// Leaf index of the entry to prove.
        #[arg(long)]
        index: Option<u64>,
        /// An envelope file whose entry is looked up in the log.
        #[arg(long)]
        receipt: Option<PathBuf>,
        /// Every entry of the tree: one bundle each, into --out-dir.
        #[arg(long, requires = "out_dir")]
        all: bool,
        /// Entries A to B-1 (`A..B`): one bundle each, into --out-dir.
        #[arg(long, value_name = "A..B", value_parser = parse_range, requires = "out_dir")]
        range: Option<std::ops::Range<u64>>,
        /// Tree size of the proof (default: the latest checkpoint).
        #[arg(long)]
        size: Option<u64>,
        /// Output file, written atomically; '-' or nothing for standard output.
        #[arg(short = 'o', long = "out", value_name = "FILE", conflicts_with_all = ["all", "range"])]
        out: Option<Target>,
        /// With --all or --range: an empty or new directory that receives
        /// one file per entry, `<index>.bundle.json` (or `<index>.tlog-proof`).
        #[arg(long = "out-dir", value_name = "DIR")]
        out_dir: Option<PathBuf>,
        /// `bundle` (rcpt JSON) or `tlog-proof` (C2SP tlog-proof@v1, the entry in `extra`).
        #[arg(long, value_enum, default_value = "bundle")]
        format: ProveFormat,
        #[command(flatten)]
        key: LogKeyArg,
    },
    /// Print a consistency proof between two tree sizes.
    #[command(after_help = "Example:
  rcpt log consistency log/ --from 3 --to 10 --json >> proofs.jsonl")]
    Consistency {
        /// The log directory.
        dir: PathBuf,
        /// The older tree size (a published checkpoint's size).
        #[arg(long)]
        from: u64,
        /// The newer tree size (default: the latest checkpoint's).
        #[arg(long)]
        to: Option<u64>,
        /// Print {"from", "to", "proof"} JSON, as `rcpt verify --consistency` reads.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        key: LogKeyArg,
    },
    /// Recompute every tile and the root; verify the checkpoint.
    #[command(after_help = "Example:
  rcpt log check log/")]
    Check {
        /// The log directory.
        dir: PathBuf,
        #[command(flatten)]
        key: LogKeyArg,
    },
    /// Serve the log over HTTP: tlog-tiles read API and POST /add.
    #[cfg(feature = "net")]
    Serve(super::serve::ServeArgs),
    /// Submit envelopes to a log service; verify and print each bundle's index.
    #[cfg(feature = "net")]
    Submit(super::serve::SubmitArgs),
    /// Copy a served log's public files, checked, into a local directory.
    #[cfg(feature = "net")]
    Mirror(super::serve::MirrorArgs),
    /// Watch a log: check that it only grows, check every entry, report what concerns you.
    Monitor(Box<super::monitor::MonitorArgs>),
}

/// How a reader finds the log key: the log's settings, or `--log-key`
/// for a copy of its public files.
#[derive(clap::Args)]
pub struct LogKeyArg {
    /// The log's verifier key (NAME+HASH+KEY), to read a copy of a log's
    /// public files that has no .rcpt/settings.json; checked against the
    /// settings when they exist. Always a key string, never a file name.
    #[arg(long = "log-key", value_name = "VKEY")]
    log_key: Option<String>,
    #[command(flatten)]
    at: EndpointArg,
}

/// Where an `s3://BUCKET/PREFIX` log's object store answers.
#[derive(clap::Args)]
pub struct EndpointArg {
    /// For a log at s3://BUCKET/PREFIX: the S3 endpoint, http://HOST:PORT
    /// (default: $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL). Credentials
    /// and region come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_SESSION_TOKEN and AWS_REGION.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// For a log at s3://: seconds a writer's lease lives without renewal
    /// (a standby takes over about this long after a writer dies).
    #[arg(long, value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    lease_ttl: u64,
}

impl EndpointArg {
    /// The store of the log at `dir`: an `s3://` location's bucket, else the directory.
    pub(crate) fn store(&self, dir: &Path) -> anyhow::Result<Arc<dyn Store>> {
        store_at(dir, self.endpoint.as_deref(), self.lease_ttl)
    }
}

/// The store at `dir`: an `s3://BUCKET/PREFIX` location (answering at
/// `endpoint`, leases of `lease_ttl` seconds), else the directory.
pub(crate) fn store_at(
    dir: &Path,
    endpoint: Option<&str>,
    lease_ttl: u64,
) -> anyhow::Result<Arc<dyn Store>> {
    match dir.to_str().filter(|d| d.starts_with("s3://")) {
        Some(location) => s3_store(location, endpoint, lease_ttl),
        None if endpoint.is_some() => Err(UsageError(format!(
            "--endpoint is for logs at s3://BUCKET/PREFIX, not the directory {}",
            dir.display()
        ))
        .into()),
        None => Ok(Arc::new(PosixStore::new(dir))),
    }
}

/// The S3 store at `location` (`s3://BUCKET/PREFIX`).
#[cfg(feature = "s3")]
fn s3_store(
    location: &str,
    endpoint: Option<&str>,
    lease_ttl: u64,
) -> anyhow::Result<Arc<dyn Store>> {
    use rcpt::storage::s3::{BlockingClient, LeaseConfig, Location, S3Store, Settings};
    let lease = LeaseConfig::new(std::time::Duration::from_secs(lease_ttl))
        .map_err(|e| UsageError(e.to_string()))?;
    let location = Location::parse(location).map_err(|e| UsageError(e.to_string()))?;
    let settings = Settings::from_env(endpoint).map_err(|e| UsageError(e.to_string()))?;
    let client = BlockingClient::new(settings, &location).context("starting the S3 client")?;
    Ok(Arc::new(S3Store::new(Arc::new(client), location, lease)))
}

#[cfg(not(feature = "s3"))]
fn s3_store(location: &str, _: Option<&str>, _: u64) -> anyhow::Result<Arc<dyn Store>> {
    Err(UsageError(format!(
        "{location}: this rcpt was built without object-storage support (cargo feature s3)"
    ))
    .into())
}

impl LogKeyArg {
    /// Open the log at `dir` with this key, if any.
    fn open(&self, dir: &Path) -> anyhow::Result<Log> {
        let key = match &self.log_key {
            Some(text) => Some(NoteVerifier::parse(text.trim()).map_err(|e| {
                UsageError(format!("--log-key {text:?} is not a verifier key: {e}"))
            })?),
            None => None,
        };
        Ok(Log::open_store(self.at.store(dir)?, key.as_ref())?)
    }
}

pub fn run(cmd: LogCommand) -> anyhow::Result<u8> {
    match cmd {
        LogCommand::Init {
            dir,
            origin,
            key,
            trust,
            at,
        } => init(&dir, &at, &origin, &key, trust.as_deref()),
        LogCommand::Append {
            dir,
            key,
            trust,
            json,
            wait,
            batch,
            files,
            at,
        } => {
            let opts = AppendOptions {
                key,
                trust,
                json,
                wait,
                max_batch: batch as usize,
            };
            append(&dir, &at.store(&dir)?, &opts, &files)
        }
        LogCommand::Checkpoint { dir, key } => {
            let log = key.open(&dir)?;
            write!(std::io::stdout().lock(), "{}", log.checkpoint())?;
            Ok(EXIT_OK)
        }
        LogCommand::Prove {
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
        } => {
            let log = key.open(&dir)?;
            match (all, range, out_dir) {
                (true, _, Some(d)) => prove_many(&log, None, size, &d, format),
                (false, Some(r), Some(d)) => prove_many(&log, Some(r), size, &d, format),
                (_, _, Some(_)) => {
                    Err(UsageError("--out-dir goes with --all or --range".into()).into())
                }
                _ => prove(&log, index, receipt.as_deref(), size, out.as_ref(), format),
            }
        }
        LogCommand::Consistency {
            dir,
            from,
            to,
            json,
            key,
        } => consistency(&key.open(&dir)?, from, to, json),
        LogCommand::Check { dir, key } => check(&key.open(&dir)?),
        #[cfg(feature = "net")]
        LogCommand::Serve(args) => super::serve::serve(args),
        #[cfg(feature = "net")]
        LogCommand::Submit(args) => super::serve::submit(args),
        #[cfg(feature = "net")]
        LogCommand::Mirror(args) => super::serve::mirror(args),
        LogCommand::Monitor(args) => super::monitor::run(*args),
    }
}

/// Read a PKCS#8 PEM signing key.
fn read_key(path: &Path) -> anyhow::Result<SigningKey> {
    let pem = rcpt::keys::read_key_file(path)?;
    rcpt::keys::signing_key_from_pem(&pem)
        .with_context(|| format!("reading the private key {}", path.display()))
}

/// Read a trust file and keep its issuers as the accepted ones.
fn read_accepted(path: &Path) -> anyhow::Result<AcceptedIssuers> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_KEY_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    AcceptedIssuers::from_json(&bytes).with_context(|| format!("trust file {}", path.display()))
}

fn init(
    dir: &Path,
    at: &EndpointArg,
    origin: &str,
    key_path: &Path,
    trust: Option<&Path>,
) -> anyhow::Result<u8> {
    let key = read_key(key_path)?;
    let accepted = trust.map(read_accepted).transpose()?;
    let log = if dir.to_str().is_some_and(|d| d.starts_with("s3://")) {
        // The key file's path is recorded as given, made absolute: it is
        // on this machine, the log is not.
        let key_file = std::path::absolute(key_path)
            .with_context(|| format!("reading the path {}", key_path.display()))?;
        Log::init_store(
            at.store(dir)?,
            origin,
            &key,
            Some(key_file),
            accepted.as_ref(),
        )?
    } else {
        at.store(dir)?; // refuses --endpoint with a directory
        let opts = InitOptions {
            key_file: Some(key_path),
            accepted: accepted.as_ref(),
        };
        Log::create_with(dir, origin, &key, opts)?
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "initialised log {} at {}",
        log.origin(),
        log.location()
    )?;
    writeln!(out, "verifier key: {}", log.verifier())?;
    match &accepted {
        Some(a) => writeln!(out, "accepted issuers: {}", issuer_names(a))?,
        None => writeln!(
            out,
            "accepted issuers: none (envelope signatures will not be checked)"
        )?,
    }
    Ok(EXIT_OK)
}

/// The accepted issuers' names, comma-separated.
fn issuer_names(accepted: &AcceptedIssuers) -> String {
    let names: Vec<&str> = accepted
        .issuers()
        .iter()
        .filter_map(|i| i.name.as_deref())
        .collect();
    names.join(", ")
}

/// A progress bar on stderr that appears only when stderr is a terminal and
/// the work has run longer than a moment.
struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: bool,
    terminal: bool,
}

impl Progress {
    fn new(total: Option<u64>, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
        let template = if total.is_some() {
            "{msg} {bar:40} {pos}/{len} ({per_sec}, {eta})"
        } else {
            "{msg} {pos} ({per_sec})"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        Progress {
            bar,
            start: Instant::now(),
            shown: false,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn set(&mut self, pos: u64) {
        if self.terminal && !self.shown && self.start.elapsed() > Duration::from_millis(500) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
        self.bar.set_position(pos);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// One input envelope: its name for reports and its bytes (or why it could
/// not be read).
struct Input {
    name: String,
    bytes: Result<Vec<u8>, Refusal>,
}

/// Why an input was refused: a stable reason code and a detail.
#[derive(Debug)]
struct Refusal {
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
fn read_file(path: &str) -> Result<Vec<u8>, Refusal> {
    rcpt::io::read_path(Path::new(path), MAX_ENVELOPE_BYTES).map_err(|e| match e {
        InputError::TooLarge { .. } => Refusal::new(Reason::EnvelopeTooLarge, e),
        _ => Refusal::new(Reason::InputUnreadable, rcpt::io::error_chain(&e)),
    })
}

/// Every file argument must name a regular file (a missing one is a bad
/// invocation, found before anything is appended); `-` at most once.
fn check_append_files(files: &[String]) -> anyhow::Result<()> {
    let sources: Vec<Source> = files
        .iter()
        .map(|f| Source::from(OsString::from(f)))
        .collect();
    super::stdin_at_most_once(&sources)?;
    for source in &sources {
        if let Source::Path(path) = source {
            rcpt::io::open_regular(path)?;
        }
    }
    Ok(())
}

/// The inputs of `append`, in order: each file argument, and each
/// non-empty line of stdin for `-`. Lines are read with a bound.
struct Inputs<'a> {
    files: std::slice::Iter<'a, String>,
    stdin: Option<StdinLines>,
}

/// Standard input read as lines: through a buffer of [`STDIN_BUFFER_BYTES`]
/// (a system call per 8 KiB, std's default, is 12,000 for 100 MB), each
/// line into a buffer sized like the line before.
struct StdinLines {
    reader: std::io::BufReader<std::io::StdinLock<'static>>,
    line_no: u64,
    last_len: usize,
}

/// Bytes read from standard input at a time by `append -` and `submit -`.
const STDIN_BUFFER_BYTES: usize = 1 << 20;

/// The most a line's buffer is sized for in advance from the line before.
const LINE_CAPACITY_HINT_MAX: usize = 64 << 10;

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
                bytes: read_file(file),
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
const ADMIT_CHUNK: usize = 4096;

/// How much of a durable batch has been gathered.
#[derive(Default)]
struct Gathered {
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
fn next_chunk(inputs: &mut Inputs<'_>, gathered: &mut Gathered, max: usize) -> Vec<Input> {
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
struct Checked {
    name: String,
    result: Result<Kept, Refusal>,
}

/// What the report of an admitted envelope needs.
struct Kept {
    receipt_id: String,
    signatures: &'static str,
}

/// One admitted chunk: each input's result, and the entry of each one admitted.
type AdmittedChunk = Vec<(Checked, Option<HashedEntry>)>;

/// Admit the inputs of one chunk on every core.
fn admit_chunk(chunk: Vec<Input>, accepted: Option<&AcceptedIssuers>) -> AdmittedChunk {
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
fn gather_batch(
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
struct AppendOptions {
    key: Option<PathBuf>,
    trust: Option<PathBuf>,
    json: bool,
    wait: bool,
    max_batch: usize,
}

fn append(
    dir: &Path,
    store: &Arc<dyn Store>,
    opts: &AppendOptions,
    files: &[String],
) -> anyhow::Result<u8> {
    let log = Log::open_store(store.clone(), None).map_err(|e| match e {
        LogError::NoLogKey { location } => LogError::NotWritable { location },
        e => e,
    })?;
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
    let (mut done, mut refused) = (0u64, 0u64);
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
                Err(r) => {
                    refused += 1;
                    report_refused(&mut out, opts.json, &c.name, r)?;
                }
            }
        }
        out.flush()?;
        done += checked.len() as u64;
        progress.set(done);
    }
    progress.finish();
    Ok(if refused > 0 { EXIT_FAILED } else { EXIT_OK })
}

fn report_ok(
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

fn report_refused(out: &mut impl Write, json: bool, name: &str, r: &Refusal) -> anyhow::Result<()> {
    if json {
        let v = serde_json::json!({"file": name, "error": r.reason, "detail": r.detail});
        writeln!(out, "{v}")?;
    }
    eprintln!("rcpt: refused {name}: {}: {}", r.reason, r.detail);
    Ok(())
}

/// The log index of the envelope in `path`, found by its entry's leaf hash.
fn index_of_receipt(log: &Log, path: &Path) -> anyhow::Result<u64> {
    let bytes =
        rcpt::io::read_path(path, MAX_ENVELOPE_BYTES).context("reading the --receipt envelope")?;
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

fn prove(
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
fn parse_range(text: &str) -> Result<std::ops::Range<u64>, String> {
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

/// One bundle (or tlog-proof) per entry of `range` (all: every entry) at
/// `size`, written to `out_dir` as `<index>.bundle.json` (`.tlog-proof`),
/// in parallel.
fn prove_many(
    log: &Log,
    range: Option<std::ops::Range<u64>>,
    size: Option<u64>,
    out_dir: &Path,
    format: ProveFormat,
) -> anyhow::Result<u8> {
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
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let not_empty = std::fs::read_dir(out_dir)
        .with_context(|| format!("reading {}", out_dir.display()))?
        .next()
        .is_some();
    if not_empty {
        let msg = format!(
            "{} is not empty; --out-dir needs an empty or new directory",
            out_dir.display()
        );
        return Err(UsageError(msg).into());
    }
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
            write_new(&out_dir.join(name), text.as_bytes())?;
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if n.is_multiple_of(4096)
                && let Ok(mut p) = progress.lock()
            {
                p.set(n);
            }
            Ok(())
        },
    )?;
    if let Ok(p) = progress.lock() {
        p.finish();
    }
    println!(
        "wrote {} bundles (entries {}..{} at tree size {size}) to {}",
        range.end - range.start,
        range.start,
        range.end,
        out_dir.display()
    );
    Ok(EXIT_OK)
}

/// The bundle JSON of entry `index` with its proof in the tree of `size`.
fn bundle_text(
    log: &Log,
    index: u64,
    entry: &[u8],
    inclusion: Vec<rcpt::tlog::merkle::Hash>,
    size: u64,
    checkpoint: &str,
) -> anyhow::Result<String> {
    let envelope =
        Envelope::from_entry(entry).with_context(|| format!("decoding entry {index}"))?;
    let (_, id) = rcpt::receipt::receipt_from_cbor(&envelope.payload)
        .with_context(|| format!("entry {index} holds no valid receipt"))?;
    let bundle = rcpt::bundle::Bundle {
        receipt_id: id.to_string(),
        envelope,
        log: rcpt::bundle::LogProof {
            origin: log.origin().to_string(),
            index,
            tree_size: size,
            inclusion,
            checkpoint: checkpoint.to_string(),
        },
    };
    let mut text = bundle.to_json();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// Write a new file, created exclusively (never over an existing file or
/// through a symlink planted at its name).
fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        f.write_all(bytes)
    };
    write().with_context(|| format!("writing {}", path.display()))
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
fn emit(out: Option<&Target>, text: &str) -> anyhow::Result<u8> {
    super::write_target(out.unwrap_or(&Target::Stdout), text.as_bytes())?;
    Ok(EXIT_OK)
}

fn consistency(log: &Log, from: u64, to: Option<u64>, json: bool) -> anyhow::Result<u8> {
    let to = to.unwrap_or(log.size());
    if from > to {
        return Err(UsageError(format!("--from {from} is after --to {to}")).into());
    }
    // A consistency proof links two signed roots: both sizes must be
    // published checkpoints (a verifier has nothing to check it against
    // otherwise).
    log.checkpoint_at(from)?;
    log.checkpoint_at(to)?;
    let proof = log.consistency_proof(from, to)?;
    let proof: Vec<String> = proof.iter().map(|h| STANDARD.encode(h)).collect();
    let mut out = std::io::stdout().lock();
    if json {
        let doc = serde_json::json!({"from": from, "to": to, "proof": proof});
        writeln!(out, "{doc}")?;
    } else {
        for h in proof {
            writeln!(out, "{h}")?;
        }
    }
    Ok(EXIT_OK)
}

fn check(log: &Log) -> anyhow::Result<u8> {
    let mut progress = Progress::new(None, "checking");
    let result = rcpt::log::check_log(log, |done, total| {
        progress.bar.set_length(total);
        progress.set(done);
    });
    progress.finish();
    let report = result?;
    writeln!(
        std::io::stdout().lock(),
        "ok: {} entries, {} hash tiles, {} checkpoints verified, root {}",
        report.size,
        report.tiles,
        report.checkpoints,
        STANDARD.encode(report.root)
    )?;
    if report.kept_tiles > 0 {
        writeln!(
            std::io::stdout().lock(),
            "ok: {} partial tiles and entry bundles kept for earlier sizes verified",
            report.kept_tiles
        )?;
    }
    for size in &report.unpublished_sizes {
        writeln!(
            std::io::stdout().lock(),
            "note: .rcpt/checkpoints/{size} is past the published size {} (left by an \
             interrupted append, never published, not part of the log); the next append removes it",
            report.size
        )?;
    }
    Ok(EXIT_OK)
}
