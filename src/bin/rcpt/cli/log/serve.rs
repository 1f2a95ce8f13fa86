//! `rcpt log serve`, `rcpt log submit`, `rcpt log mirror`: the log over
//! HTTP (spec/service.md). The library (`rcpt::net`) does the work; this
//! file reads arguments and files, prints, and picks the exit status.

use crate::cli::{EXIT_OK, UsageError};
use anyhow::Context;
use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::log::Log;
use rcpt::log::admit::AcceptedIssuers;
use rcpt::net::server::log::{ServeConfig, ServeError, Server};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Most submissions `log submit` has in flight at once.
pub(super) const MAX_SUBMIT_CONCURRENCY: u64 = 1024;

/// Longest a request log line waits in memory before it is written.
pub(super) const LOG_FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Request log bytes that trigger a write at once.
pub(super) const LOG_CHUNK_BYTES: usize = 64 * 1024;

/// Request log lines on their way to stderr.
#[derive(Default)]
pub(super) struct LogLines {
    buf: std::sync::Mutex<Vec<u8>>,
}

impl LogLines {
    fn line(&self, line: &str) {
        let Ok(mut buf) = self.buf.lock() else { return };
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        if buf.len() >= LOG_CHUNK_BYTES {
            let _ = std::io::stderr().write_all(&buf);
            buf.clear();
        }
    }

    fn flush(&self) {
        let Ok(mut buf) = self.buf.lock() else { return };
        if !buf.is_empty() {
            let _ = std::io::stderr().write_all(&buf);
            buf.clear();
        }
    }
}

#[derive(clap::Args)]
#[command(after_help = "Example:
  rcpt log serve log/ --listen 127.0.0.1:8080 --trust trust.json --batch-wait 250ms")]
pub struct ServeArgs {
    /// The log directory (made by `rcpt log init`).
    dir: PathBuf,
    /// Address to listen on (HOST:PORT; port 0 picks a free one, printed on stdout).
    #[arg(long)]
    listen: String,
    /// Trust file whose "issuers" are the accepted issuers.
    /// The format `rcpt trust new` writes: {"issuers": [{"verifier_key": "NAME+HASH+KEY"}], "logs": [{"verifier_key": "ORIGIN+HASH+KEY"}]}.
    #[arg(long)]
    trust: Option<PathBuf>,
    /// The log's private key (default: the key file given at init).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Most entries in one batch (one durable append). The default is the
    /// default --queue-max: one append can take every queued submission
    /// (spec/performance.md, third round).
    #[arg(long, default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=rcpt::limits::MAX_APPEND_BATCH_ENTRIES as u64))]
    batch_max: u64,
    /// How long a batch stays open after its first entry (e.g. 250ms, 1s; at most 60s).
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = crate::cli::units::serve_wait)]
    batch_wait: Duration,
    /// Most submissions in the service at once; one more gets 503.
    #[arg(long, default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=rcpt::net::server::log::MAX_QUEUE as u64))]
    queue_max: u64,
    /// Stand by until the writer lock is free instead of failing at once (on
    /// s3://, take over when the serving sequencer's lease expires).
    #[arg(long)]
    wait: bool,
    /// A tlog-policy file naming witnesses (with URLs) and a quorum: each
    /// checkpoint is published, and submitters answered, only once a quorum
    /// of them cosigned it.
    #[arg(long = "policy", alias = "witness-policy", value_name = "FILE")]
    witness_policy: Option<PathBuf>,
    /// Once a quorum cosigned, how long the other witnesses of the policy
    /// are still waited for; their cosignatures are published too.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = crate::cli::units::serve_wait)]
    witness_grace: Duration,
    #[command(flatten)]
    at: super::args::EndpointArg,
}

/// The witnesses of `--policy FILE` (old spelling `--witness-policy`).
pub(super) fn witnessing(
    path: &Path,
    grace: Duration,
) -> anyhow::Result<Arc<rcpt::net::client::witnessing::Witnessing>> {
    let what = || format!("--policy {}", path.display());
    let max = rcpt::limits::MAX_POLICY_BYTES;
    let bytes = rcpt::io::read_path(path, max).map_err(|e| match e {
        rcpt::io::InputError::TooLarge { .. } => {
            anyhow::Error::new(UsageError(format!("{} is over {max} bytes", what())))
        }
        e => anyhow::Error::new(e).context(what()),
    })?;
    let policy = rcpt::tlog::policy::TlogPolicy::parse(&bytes).map_err(|e| {
        UsageError(format!(
            "{}: {}",
            what(),
            crate::cli::render_error(&anyhow::Error::new(e))
        ))
    })?;
    let w = rcpt::net::client::witnessing::Witnessing::new(policy).map_err(|e| {
        UsageError(format!(
            "{}: {}",
            what(),
            crate::cli::render_error(&anyhow::Error::new(e))
        ))
    })?;
    Ok(Arc::new(w.with_grace(grace)))
}

/// Read a small file (key, trust), refusing one over the key-file limit.
pub(super) fn read_small(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    // The one reader: regular files only, capped (a FIFO, /dev/zero: exit 2).
    rcpt::io::read_path(path, rcpt::limits::MAX_KEY_FILE_BYTES)
        .with_context(|| format!("reading {what} {}", path.display()))
}

/// The log key from `--log-key KEY` (always key text, never a file name:
/// a file planted under the key's name cannot replace it) or
/// `--log-key-file FILE`, in any form that carries the log's name
/// (spec/keys.md "Giving a key").
pub(super) fn parse_log_key(
    text: Option<&str>,
    file: Option<&Path>,
) -> anyhow::Result<NoteVerifier> {
    let file = file.map(|f| rcpt::io::Source::Path(f.to_path_buf()));
    crate::cli::keyarg::log_key("--log-key", text, file.as_ref())
}

/// The service's key: `--key`, else the key file the log records.
pub(super) fn signing_key(dir: &Path, log: &Log, key: Option<&Path>) -> anyhow::Result<SigningKey> {
    let path = match key {
        Some(k) => k,
        None => log.key_file().ok_or_else(|| {
            UsageError(format!(
                "{} records no key file; pass --key LOG.key",
                dir.display()
            ))
        })?,
    };
    let pem = rcpt::keys::read_key_file(path)?;
    rcpt::keys::signing_key_from_pem(&pem)
        .with_context(|| format!("reading the private key {}", path.display()))
}

/// Accepted issuers: --trust, else those the log was initialised with.
fn accepted_of(args: &ServeArgs, log: &Log) -> anyhow::Result<AcceptedIssuers> {
    Ok(match &args.trust {
        Some(path) => {
            AcceptedIssuers::from_json(&read_small(path, "trust file")?).map_err(|e| {
                let e = anyhow::Error::new(e);
                UsageError(format!(
                    "trust file {}: {}",
                    path.display(),
                    crate::cli::render_error(&e)
                ))
            })?
        }
        None => log.accepted_issuers()?.ok_or_else(|| {
            UsageError(format!(
                "no accepted issuers: {} was initialised without --trust; pass --trust FILE \
                 with \"issuers\" (the service admits only receipts signed by an accepted \
                 issuer under its own name)",
                args.dir.display()
            ))
        })?,
    })
}

pub fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let store = args.at.store(&args.dir)?;
    // Read once, for the key file and the issuers it records; the
    // service's writer is the intake's (`Server::bind`).
    let log = rcpt::log::intake::open_log(Arc::clone(&store))?;
    let accepted = accepted_of(&args, &log)?;
    let config = ServeConfig {
        key: signing_key(&args.dir, &log, args.key.as_deref())?,
        dir: args.dir,
        store: Some(store),
        wait: args.wait,
        accepted,
        batch_max: args.batch_max as usize,
        batch_wait: args.batch_wait,
        queue_max: args.queue_max as usize,
        witnessing: match &args.witness_policy {
            Some(p) => Some(witnessing(p, args.witness_grace)?),
            None => None,
        },
    };
    let server = match Server::bind(config, &args.listen) {
        Err(e @ ServeError::Setting(_)) => {
            return Err(UsageError(e.to_string()).into());
        }
        other => other?,
    };
    let addr = server.local_addr()?;
    // The bound address, for whoever started the service (port 0 above).
    println!("listening on {addr}");
    std::io::stdout().flush()?;
    let log = Arc::new(LogLines::default());
    let flusher = Arc::clone(&log);
    // Request lines are written in chunks, at least every LOG_FLUSH_EVERY:
    // one write per request would cost a system call each.
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(LOG_FLUSH_EVERY);
            flusher.flush();
        }
    });
    let writer = Arc::clone(&log);
    let sink: rcpt::net::server::log::RequestSink = Arc::new(move |line: &str| writer.line(line));
    sink(&serde_json::json!({"event": "listening", "addr": addr.to_string()}).to_string());
    log.flush();
    let summary = server.run(Arc::clone(&sink));
    if let Ok(summary) = &summary {
        sink(
            &serde_json::json!({"event": "drained", "requests": summary.requests,
                "batches": summary.batches, "integrated": summary.integrated})
            .to_string(),
        );
    }
    log.flush();
    summary?;
    Ok(EXIT_OK)
}
