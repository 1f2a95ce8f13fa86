//! `rcpt log submit`: send envelopes to a log service, check each answer, write bundles.

use super::serve::*;
use crate::cli::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError};
use anyhow::Context;
use rcpt::net::client::submit::{SubmitError, SubmitOptions};
use rcpt::text::Escaped;
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32};

#[derive(clap::Args)]
#[command(
    after_help = "Results are printed in the order of the inputs. When the log cannot be \
reached (every attempt of one submission a refused connection or a timeout), the run stops: \
what was not sent is reported as such, and the exit status is 3 (nothing refused) or 1.

Examples:
  rcpt log submit http://127.0.0.1:8080 receipts/*.json --log-key-file logkey.vkey --out-dir bundles/
  rcpt log submit http://127.0.0.1:8080 receipt.json --log-key-file logkey.vkey --timeout 30s --retries 2"
)]
pub struct SubmitArgs {
    /// The log's URL (http://HOST[:PORT][/PREFIX]).
    url: String,
    /// Envelope files (.json), or '-' for JSON Lines on stdin.
    #[arg(required = true)]
    files: Vec<String>,
    /// The log's key as text (NAME+HASH+KEY, or ORIGIN=KEY; never read as a
    /// file name): every bundle must verify under it.
    #[arg(
        long,
        value_name = "VKEY",
        required_unless_present = "log_key_file",
        conflicts_with = "log_key_file"
    )]
    log_key: Option<String>,
    /// A file holding the log's key (its .vkey).
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<PathBuf>,
    /// Write each receipt's bundle into this directory, as
    /// <index>.bundle.json (the rule of `log prove --out-dir`).
    #[arg(long = "out-dir", alias = "bundle-dir", value_name = "DIR")]
    bundle_dir: Option<PathBuf>,
    /// Most submissions in flight at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=MAX_SUBMIT_CONCURRENCY))]
    concurrency: u64,
    /// Output: `human` lines (index and receipt id), or `json`: one JSON
    /// object a line.
    #[arg(long, value_enum, default_value = "human")]
    format: crate::cli::LineFormat,
    /// Old spelling of `--format json`.
    #[arg(long, hide = true)]
    json: bool,
    /// A deadline for the whole run (250ms, 30s, 5m, 1h; a bare number is
    /// seconds): what is not logged by then is reported not sent.
    #[arg(long, value_name = "DURATION", value_parser = crate::cli::units::parse_duration)]
    timeout: Option<std::time::Duration>,
    /// Most retries of one submission (after a 503, a 5xx, a refused
    /// connection or a timeout).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(rcpt::net::client::submit::MAX_ATTEMPTS - 1)))]
    retries: u32,
    /// Most retries of the whole run, all submissions together.
    #[arg(long = "retry-budget", value_name = "N", default_value_t = 64)]
    retry_budget: u32,
}

impl SubmitArgs {
    /// `rcpt log append URL FILES`: the submission `rcpt log submit`
    /// makes, with its defaults and the output `append` asked for.
    pub(super) fn for_append(
        url: String,
        files: Vec<String>,
        log_key: Option<String>,
        log_key_file: Option<PathBuf>,
        json: bool,
    ) -> SubmitArgs {
        SubmitArgs {
            url,
            files,
            log_key,
            log_key_file,
            bundle_dir: None,
            concurrency: 16,
            format: crate::cli::LineFormat::Human,
            json,
            timeout: None,
            retries: 3,
            retry_budget: 64,
        }
    }
}

type Submitted = Result<rcpt::net::client::submit::Logged, SubmitError>;

/// How a run ended, counted.
#[derive(Default)]
struct Tally {
    failed: u64,
    not_sent: Vec<String>,
    /// The log was found unreachable (else: the deadline passed).
    unreachable: bool,
    /// The first unreachable or late submission was told in full.
    told: bool,
}

pub fn submit(mut args: SubmitArgs) -> anyhow::Result<u8> {
    args.json |= args.format == crate::cli::LineFormat::Json;
    // A missing input is a bad invocation, found before anything is sent.
    super::append::check_append_files(&args.files)?;
    let key = parse_log_key(args.log_key.as_deref(), args.log_key_file.as_deref())?;
    let client =
        rcpt::net::client::Client::new(&args.url).map_err(|e| UsageError(e.to_string()))?;
    if let Some(d) = &args.bundle_dir {
        rcpt::io::Dir::create(d, 0o755).with_context(|| format!("creating {}", d.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let opts = SubmitOptions {
        max_attempts: args.retries + 1,
        deadline: args.timeout.map(|t| tokio::time::Instant::now() + t),
        retry_budget: Arc::new(AtomicU32::new(args.retry_budget)),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let mut tally = Tally::default();
    let mut out = std::io::stdout().lock();
    let mut pending: VecDeque<(String, tokio::task::JoinHandle<Submitted>)> = VecDeque::new();
    let key = Arc::new(key);
    for (name, bytes) in super::append::inputs(&args.files) {
        while pending.len() >= args.concurrency as usize {
            if let Some((n, h)) = pending.pop_front() {
                report(&mut out, &args, &n, runtime.block_on(h), &mut tally)?;
            }
        }
        let bytes = match bytes {
            Ok(b) => b,
            Err((reason, detail)) => {
                tally.failed += 1;
                refused(&mut out, args.json, &name, reason, &detail)?;
                continue;
            }
        };
        let (client, key, opts) = (client.clone(), Arc::clone(&key), opts.clone());
        let task = runtime.spawn(async move {
            rcpt::net::client::submit::submit_with(&client, bytes.into(), &key, &opts).await
        });
        pending.push_back((name, task));
    }
    for (n, h) in pending {
        report(&mut out, &args, &n, runtime.block_on(h), &mut tally)?;
    }
    summarise_not_sent(&args, &tally);
    Ok(if tally.failed > 0 {
        EXIT_FAILED
    } else if !tally.not_sent.is_empty() {
        EXIT_NOT_EVALUATED
    } else {
        EXIT_OK
    })
}

/// One line for everything not logged for want of the log: how many,
/// the first and the last, and why.
fn summarise_not_sent(args: &SubmitArgs, tally: &Tally) {
    let (Some(first), Some(last)) = (tally.not_sent.first(), tally.not_sent.last()) else {
        return;
    };
    let n = tally.not_sent.len();
    let which = match n {
        1 => first.clone(),
        2 => format!("{first} and {last}"),
        _ => format!("{first} ... {last}"),
    };
    let why = if tally.unreachable {
        format!("the log at {} could not be reached", args.url)
    } else {
        "the --timeout deadline passed".to_string()
    };
    eprintln!(
        "rcpt: {n} {} not logged ({which}): {why}; submit {} again once the log answers",
        if n == 1 { "input" } else { "inputs" },
        if n == 1 { "it" } else { "them" },
    );
}

/// Print one result and count it.
fn report(
    out: &mut impl Write,
    args: &SubmitArgs,
    name: &str,
    joined: Result<Submitted, tokio::task::JoinError>,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let logged = match joined {
        Ok(Ok(l)) => l,
        Ok(Err(e)) if e.not_evaluated() => {
            let code = match &e {
                SubmitError::Unreachable { .. } => "unreachable",
                SubmitError::Deadline { .. } => "deadline",
                _ => "not_sent",
            };
            // The first unreachable or late one is told in full; the rest
            // are counted in the summary (and listed with --json).
            if !tally.told && code != "not_sent" {
                eprintln!("rcpt: {}: {}", Escaped(name), Escaped(&e.to_string()));
                tally.told = true;
            }
            if code == "unreachable" {
                tally.unreachable = true;
            }
            if args.json {
                let v = serde_json::json!({"file": name, "error": code, "detail": e.to_string()});
                writeln!(out, "{v}")?;
            }
            tally.not_sent.push(name.to_string());
            return Ok(());
        }
        Ok(Err(e)) => {
            tally.failed += 1;
            return refused(
                out,
                args.json,
                name,
                "submit_failed",
                &rcpt::io::error_chain(&e),
            );
        }
        Err(e) => {
            tally.failed += 1;
            return refused(out, args.json, name, "submit_failed", &e.to_string());
        }
    };
    let b = &logged.bundle;
    if let Some(dir) = &args.bundle_dir {
        // One rule with `log prove --out-dir` (spec/cli.md): by log index.
        let path = dir.join(format!("{}.bundle.json", b.log.index));
        write_atomic(&path, &logged.json)?;
    }
    if args.json {
        let v = serde_json::json!({"file": name, "index": b.log.index, "receipt_id": b.receipt_id,
            "tree_size": b.log.tree_size});
        writeln!(out, "{v}")?;
    } else {
        writeln!(out, "{} {}", b.log.index, b.receipt_id)?;
    }
    out.flush()?;
    Ok(())
}

pub(super) fn refused(
    out: &mut impl Write,
    json: bool,
    name: &str,
    reason: &str,
    detail: &str,
) -> anyhow::Result<()> {
    if json {
        let v = serde_json::json!({"file": name, "error": reason, "detail": detail});
        writeln!(out, "{v}")?;
    }
    eprintln!("rcpt: {}: {}", Escaped(name), Escaped(detail));
    Ok(())
}

/// Write with the crate's one atomic writer: a temporary file under an
/// unpredictable name created `O_CREAT | O_EXCL | O_NOFOLLOW` (a link
/// planted in the directory is never followed), fsync, rename, directory
/// fsync: a reader never sees half a bundle.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    rcpt::io::write_atomic(path, bytes, rcpt::io::OUTPUT_FILE_MODE)
        .with_context(|| format!("writing {}", path.display()))
}
