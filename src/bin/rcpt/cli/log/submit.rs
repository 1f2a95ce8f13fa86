//! `rcpt log submit`: send envelopes to a log service, check each answer, write bundles.

use super::serve::*;
use crate::cli::{EXIT_FAILED, EXIT_OK, UsageError};
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args)]
#[command(after_help = "Example:
  rcpt log submit http://127.0.0.1:8080 receipts/*.json --log-key-file log.vkey --bundle-dir bundles/")]
pub struct SubmitArgs {
    /// The log's URL (http://HOST[:PORT][/PREFIX]).
    url: String,
    /// Envelope files (.json), or '-' for JSON Lines on stdin.
    #[arg(required = true)]
    files: Vec<String>,
    /// The log's verifier key as text (NAME+HASH+KEY; never read as a file
    /// name): every bundle must verify under it.
    #[arg(
        long,
        value_name = "VKEY",
        required_unless_present = "log_key_file",
        conflicts_with = "log_key_file"
    )]
    log_key: Option<String>,
    /// A file holding the log's verifier key.
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<PathBuf>,
    /// Write each receipt's bundle here as <receipt hex>.bundle.json.
    #[arg(long)]
    bundle_dir: Option<PathBuf>,
    /// Most submissions in flight at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=MAX_SUBMIT_CONCURRENCY))]
    concurrency: u64,
    /// One JSON object per line on stdout.
    #[arg(long)]
    json: bool,
}

type Submitted = Result<rcpt::net::submit::Logged, String>;

pub fn submit(args: SubmitArgs) -> anyhow::Result<u8> {
    let key = parse_log_key(args.log_key.as_deref(), args.log_key_file.as_deref())?;
    let client =
        rcpt::net::client::Client::new(&args.url).map_err(|e| UsageError(e.to_string()))?;
    if let Some(d) = &args.bundle_dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut failed = 0u64;
    let mut out = std::io::stdout().lock();
    let mut pending: std::collections::VecDeque<(String, tokio::task::JoinHandle<Submitted>)> =
        std::collections::VecDeque::new();
    let key = Arc::new(key);
    for (name, bytes) in super::inputs(&args.files) {
        while pending.len() >= args.concurrency as usize {
            if let Some((n, h)) = pending.pop_front() {
                failed += u64::from(!report(&mut out, &args, &n, runtime.block_on(h))?);
            }
        }
        let bytes = match bytes {
            Ok(b) => b,
            Err((reason, detail)) => {
                failed += 1;
                refused(&mut out, args.json, &name, reason, &detail)?;
                continue;
            }
        };
        let (client, key) = (client.clone(), Arc::clone(&key));
        let task = runtime.spawn(async move {
            rcpt::net::submit::submit(&client, bytes.into(), &key)
                .await
                .map_err(|e| e.to_string())
        });
        pending.push_back((name, task));
    }
    for (n, h) in pending {
        failed += u64::from(!report(&mut out, &args, &n, runtime.block_on(h))?);
    }
    Ok(if failed > 0 { EXIT_FAILED } else { EXIT_OK })
}

/// Print one result; false when it failed.
pub(super) fn report(
    out: &mut impl Write,
    args: &SubmitArgs,
    name: &str,
    joined: Result<Submitted, tokio::task::JoinError>,
) -> anyhow::Result<bool> {
    let logged = match joined {
        Ok(Ok(l)) => l,
        Ok(Err(detail)) => {
            refused(out, args.json, name, "submit_failed", &detail)?;
            return Ok(false);
        }
        Err(e) => {
            refused(out, args.json, name, "submit_failed", &e.to_string())?;
            return Ok(false);
        }
    };
    let b = &logged.bundle;
    if let Some(dir) = &args.bundle_dir {
        let hex = b
            .receipt_id
            .strip_prefix("blake3:")
            .unwrap_or(&b.receipt_id);
        let path = dir.join(format!("{hex}.bundle.json"));
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
    Ok(true)
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
    eprintln!("rcpt: {name}: {detail}");
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
