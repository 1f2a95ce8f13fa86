//! `rcpt log`: write and read a transparency log.
//!
//! The library (`rcpt::log`) owns the files and their durability; this file
//! reads inputs, admits envelopes through `rcpt::log::admit` (in
//! parallel), feeds the library batches of entry bytes, and prints what
//! happened.

mod ack;
mod append;
mod init;
mod inspect;
#[cfg(feature = "net")]
mod mirror;
mod monitor;
mod progress;
mod prove;
#[cfg(feature = "net")]
mod serve;
#[cfg(feature = "net")]
mod submit;

use crate::cli::{EXIT_OK, UsageError};
use clap::Subcommand;
use rcpt::io::Target;
use rcpt::limits::MAX_APPEND_BATCH_ENTRIES;
use rcpt::log::Log;
use rcpt::log::intake::{Location, StoreSettings};
use rcpt::storage::Store;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use append::*;
use init::*;
use inspect::*;
use progress::Progress;
use prove::*;

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
        /// The format `rcpt trust new` writes: {"issuers": [{"verifier_key":
        /// "NAME+HASH+KEY"}], "logs": [{"verifier_key": "ORIGIN+HASH+KEY"}]}.
        #[arg(long)]
        trust: Option<PathBuf>,
        #[command(flatten)]
        at: EndpointArg,
    },
    /// Append envelopes (.json files, or '-' for JSON Lines on stdin).
    #[command(after_help = "Examples:
  rcpt log append log/ envelope.json
  rcpt log append s3://bucket/log envelope.json --endpoint http://127.0.0.1:7480
  rcpt log append http://127.0.0.1:8080 envelope.json --log-key-file logkey.vkey")]
    Append {
        /// The log: a directory, s3://BUCKET/PREFIX, or a log service's
        /// http(s):// URL (submitted to, as `rcpt log submit` does).
        dir: PathBuf,
        /// With a log service's URL: its key as text (NAME+HASH+KEY):
        /// every answer must verify under it.
        #[arg(long, value_name = "VKEY", conflicts_with = "log_key_file")]
        log_key: Option<String>,
        /// With a log service's URL: a file holding its key (its .vkey).
        #[arg(long, value_name = "FILE")]
        log_key_file: Option<PathBuf>,
        /// The log's private key (default: the key file given at init).
        #[arg(long)]
        key: Option<PathBuf>,
        /// Trust file whose issuers this append accepts (default: the one
        /// given at init; with neither, signatures are not checked).
        /// The format `rcpt trust new` writes: {"issuers": [{"verifier_key":
        /// "NAME+HASH+KEY"}], "logs": [{"verifier_key": "ORIGIN+HASH+KEY"}]}.
        #[arg(long)]
        trust: Option<PathBuf>,
        /// Output: `human` lines, or `json`: one JSON object a line.
        #[arg(long, value_enum, default_value = "human")]
        format: crate::cli::LineFormat,
        /// Old spelling of `--format json`.
        #[arg(long, hide = true)]
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
  rcpt log prove log/ --all --out-dir bundles/
  rcpt log prove log/ --all -o - | rcpt verify --trust trust.json -")]
    Prove {
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
    },
    /// Print a consistency proof between two tree sizes.
    #[command(after_help = "Example:
  rcpt log consistency log/ --from 3 --to 10 --format json >> proofs.jsonl")]
    Consistency {
        /// The log directory.
        dir: PathBuf,
        /// The older tree size (a published checkpoint's size).
        #[arg(long)]
        from: u64,
        /// The newer tree size (default: the latest checkpoint's).
        #[arg(long)]
        to: Option<u64>,
        /// Output: `human` (also `text`): one base64 hash a line; `json`:
        /// {"from", "to", "proof"}. `rcpt verify --consistency` reads both.
        #[arg(long, value_enum, default_value = "human")]
        format: crate::cli::LineFormat,
        /// Old spelling of `--format json`.
        #[arg(long, hide = true)]
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
    Serve(serve::ServeArgs),
    /// Submit envelopes to a log service; verify and print each bundle's index.
    #[cfg(feature = "net")]
    Submit(submit::SubmitArgs),
    /// Copy a served log's public files, checked, into a local directory.
    #[cfg(feature = "net")]
    Mirror(mirror::MirrorArgs),
    #[cfg(not(feature = "net"))]
    #[command(hide = true)]
    Serve(crate::cli::WithoutNet),
    #[cfg(not(feature = "net"))]
    #[command(hide = true)]
    Submit(crate::cli::WithoutNet),
    #[cfg(not(feature = "net"))]
    #[command(hide = true)]
    Mirror(crate::cli::WithoutNet),
    /// Watch a log: check that it only grows, check every entry, report what concerns you.
    Monitor(Box<monitor::MonitorArgs>),
}

/// How a reader finds the log key: the log's settings, or `--log-key`
/// for a copy of its public files.
#[derive(clap::Args)]
pub struct LogKeyArg {
    /// The log's key (NAME+HASH+KEY, or ORIGIN=KEY), to read a copy of a
    /// log's public files that has no .rcpt/settings.json; checked against
    /// the settings when they exist. Always key text, never a file name.
    #[arg(long = "log-key", value_name = "VKEY", conflicts_with = "log_key_file")]
    log_key: Option<String>,
    /// A file holding the log's key (its .vkey), instead of --log-key.
    #[arg(long = "log-key-file", value_name = "FILE")]
    log_key_file: Option<PathBuf>,
    #[command(flatten)]
    at: ReadEndpointArg,
}

/// Where an `s3://BUCKET/PREFIX` log's object store answers, for a command
/// that only reads (no writer lease).
#[derive(clap::Args)]
#[command(next_help_heading = "Object storage (logs at s3://BUCKET/PREFIX)")]
pub struct ReadEndpointArg {
    /// The S3 endpoint, http://HOST:PORT (default: $AWS_ENDPOINT_URL_S3,
    /// then $AWS_ENDPOINT_URL). Credentials and region come from
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and
    /// AWS_REGION.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Accepted and ignored (a reader takes no lease): scripts written when
    /// every log command listed it keep working. Hidden.
    #[arg(long, value_name = "DURATION", hide = true,
          value_parser = crate::cli::units::lease_ttl)]
    lease_ttl: Option<std::time::Duration>,
}

/// Where an `s3://BUCKET/PREFIX` log's object store answers, and the
/// writer's lease.
#[derive(clap::Args)]
#[command(next_help_heading = "Object storage (logs at s3://BUCKET/PREFIX)")]
pub struct EndpointArg {
    /// The S3 endpoint, http://HOST:PORT (default: $AWS_ENDPOINT_URL_S3,
    /// then $AWS_ENDPOINT_URL). Credentials and region come from
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and
    /// AWS_REGION.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// How long a writer's lease lives without renewal, 1s to 600s (a
    /// standby takes over about this long after a writer dies).
    #[arg(long, value_name = "DURATION", default_value = "10s",
          value_parser = crate::cli::units::lease_ttl)]
    lease_ttl: std::time::Duration,
}

/// The lease of a command that writes nothing (never taken).
const READ_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

impl EndpointArg {
    /// The store of the log at `dir`: an `s3://` location's bucket, else the directory.
    pub(crate) fn store(&self, dir: &Path) -> anyhow::Result<Arc<dyn Store>> {
        store_at(dir, self.endpoint.as_deref(), self.lease_ttl)
    }
}

impl ReadEndpointArg {
    /// The store of the log at `dir`, to read.
    pub(crate) fn store(&self, dir: &Path) -> anyhow::Result<Arc<dyn Store>> {
        // A given --lease-ttl is parsed (a bad value is still refused) and
        // has nothing to govern here.
        let _ignored = self.lease_ttl;
        store_at(dir, self.endpoint.as_deref(), READ_LEASE_TTL)
    }
}

/// The store at `dir`: an `s3://BUCKET/PREFIX` location (answering at
/// `endpoint`, leases of `lease_ttl`), else the directory; the one way
/// a log's store is opened (`rcpt::log::intake::Location`).
pub(crate) fn store_at(
    dir: &Path,
    endpoint: Option<&str>,
    lease_ttl: std::time::Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    let settings = StoreSettings {
        endpoint,
        lease_ttl,
    };
    Ok(Location::of_path(dir).store(&settings)?)
}

impl LogKeyArg {
    /// Open the log at `dir` with this key, if any.
    fn open(&self, dir: &Path) -> anyhow::Result<Log> {
        let file = self.log_key_file.clone().map(rcpt::io::Source::Path);
        let key = match (&self.log_key, &file) {
            (None, None) => None,
            (text, file) => Some(crate::cli::keyarg::log_key(
                "--log-key",
                text.as_deref(),
                file.as_ref(),
            )?),
        };
        Log::open_store(self.at.store(dir)?, key.as_ref()).map_err(|e| s3_hint(dir, e))
    }
}

/// A log error, with what to check when the log is on object storage: a
/// bucket that does not exist reads as one holding no log.
pub(crate) fn s3_hint(dir: &Path, e: rcpt::log::LogError) -> anyhow::Error {
    let on_s3 = dir.to_str().is_some_and(|d| d.starts_with("s3://"));
    if on_s3 && matches!(e, rcpt::log::LogError::NotALog { .. }) {
        return anyhow::anyhow!(
            "{e}; on object storage, also check that the bucket exists and that --endpoint \
             (or AWS_ENDPOINT_URL_S3) names the right store"
        );
    }
    e.into()
}

/// `rcpt log append URL`: submitted to the service, as `rcpt log submit` does.
#[cfg(feature = "net")]
fn append_to_service(
    url: String,
    files: Vec<String>,
    log_key: Option<String>,
    log_key_file: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<u8> {
    if log_key.is_none() && log_key_file.is_none() {
        let msg = format!(
            "{}: a log service's answers are checked under its key: pass --log-key VKEY or \
             --log-key-file FILE",
            rcpt::text::Escaped(&url)
        );
        return Err(UsageError(msg).into());
    }
    submit::submit(submit::SubmitArgs::for_append(
        url,
        files,
        log_key,
        log_key_file,
        json,
    ))
}

/// Without `net` there is no HTTP client: a service's URL is refused.
#[cfg(not(feature = "net"))]
fn append_to_service(
    url: String,
    _: Vec<String>,
    _: Option<String>,
    _: Option<PathBuf>,
    _: bool,
) -> anyhow::Result<u8> {
    Err(UsageError(format!(
        "{}: a log service is reached over HTTP, and this rcpt is built without feature \
         `net`; give a log directory (object storage needs `net` too)",
        rcpt::text::Escaped(&url)
    ))
    .into())
}

/// `rcpt log checkpoint`: the latest signed checkpoint, as stored.
fn print_checkpoint(log: &Log) -> anyhow::Result<u8> {
    write!(std::io::stdout().lock(), "{}", log.checkpoint())?;
    Ok(EXIT_OK)
}

/// `rcpt log append LOG FILES`: a directory or bucket through its intake,
/// a service's URL submitted to.
fn run_append(cmd: LogCommand) -> anyhow::Result<u8> {
    match cmd {
        LogCommand::Append {
            dir,
            key,
            trust,
            format,
            json,
            wait,
            batch,
            files,
            at,
            log_key,
            log_key_file,
        } => {
            let json = json || format == crate::cli::LineFormat::Json;
            if let Location::Service(url) = Location::of_path(&dir) {
                return append_to_service(url, files, log_key, log_key_file, json);
            }
            let opts = AppendOptions {
                key,
                trust,
                json,
                wait,
                max_batch: batch as usize,
            };
            append(&dir, &at.store(&dir)?, &opts, &files)
        }
        other => run(other),
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
        append @ LogCommand::Append { .. } => run_append(append),
        LogCommand::Checkpoint { dir, key } => print_checkpoint(&key.open(&dir)?),
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
            let which = ProveWhich {
                index,
                receipt,
                all,
                range,
            };
            prove_which(&key.open(&dir)?, which, size, out, out_dir, format)
        }
        LogCommand::Consistency {
            dir,
            from,
            to,
            format,
            json,
            key,
        } => {
            let json = json || format == crate::cli::LineFormat::Json;
            consistency(&key.open(&dir)?, from, to, json)
        }
        LogCommand::Check { dir, key } => check(&key.open(&dir)?),
        #[cfg(feature = "net")]
        LogCommand::Serve(args) => serve::serve(args),
        #[cfg(feature = "net")]
        LogCommand::Submit(args) => submit::submit(args),
        #[cfg(feature = "net")]
        LogCommand::Mirror(args) => mirror::mirror(args),
        #[cfg(not(feature = "net"))]
        LogCommand::Serve(w) => w.refuse("log serve"),
        #[cfg(not(feature = "net"))]
        LogCommand::Submit(w) => w.refuse("log submit"),
        #[cfg(not(feature = "net"))]
        LogCommand::Mirror(w) => w.refuse("log mirror"),
        LogCommand::Monitor(args) => monitor::run(*args),
    }
}
