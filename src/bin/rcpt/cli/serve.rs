//! `rcpt log serve`, `rcpt log submit`, `rcpt log mirror`: the log over
//! HTTP (spec/service.md). The library (`rcpt::net`) does the work; this
//! file reads arguments and files, prints, and picks the exit status.

use super::{EXIT_FAILED, EXIT_OK, UsageError};
use anyhow::Context;
use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::log::Log;
use rcpt::log::admit::AcceptedIssuers;
use rcpt::net::serve::{ServeConfig, ServeError, Server};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Longest `--batch-wait`.
const MAX_BATCH_WAIT: Duration = Duration::from_secs(60);
/// Most submissions `log submit` has in flight at once.
const MAX_SUBMIT_CONCURRENCY: u64 = 1024;

/// Longest a request log line waits in memory before it is written.
const LOG_FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Request log bytes that trigger a write at once.
const LOG_CHUNK_BYTES: usize = 64 * 1024;

/// Request log lines on their way to stderr.
#[derive(Default)]
struct LogLines {
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
    #[arg(long)]
    trust: Option<PathBuf>,
    /// The log's private key (default: the key file given at init).
    #[arg(long)]
    key: Option<PathBuf>,
    /// Most entries in one batch (one durable append).
    #[arg(long, default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=rcpt::limits::MAX_APPEND_BATCH_ENTRIES as u64))]
    batch_max: u64,
    /// How long a batch stays open after its first entry (e.g. 250ms, 1s).
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    batch_wait: Duration,
    /// Most submissions in the service at once; one more gets 503.
    #[arg(long, default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=rcpt::net::serve::MAX_QUEUE as u64))]
    queue_max: u64,
    /// Stand by until the writer lock is free instead of failing at once (on
    /// s3://, take over when the serving sequencer's lease expires).
    #[arg(long)]
    wait: bool,
    /// A tlog-policy file naming witnesses (with URLs) and a quorum: each
    /// checkpoint is published, and submitters answered, only once a quorum
    /// of them cosigned it.
    #[arg(long, value_name = "FILE")]
    witness_policy: Option<PathBuf>,
    #[command(flatten)]
    at: super::log::EndpointArg,
}

/// The witnesses of `--witness-policy FILE`.
fn witnessing(path: &Path) -> anyhow::Result<Arc<rcpt::net::witnessing::Witnessing>> {
    use std::io::Read;
    let what = || format!("--witness-policy {}", path.display());
    let file = std::fs::File::open(path).with_context(what)?;
    let mut bytes = Vec::new();
    let max = rcpt::limits::MAX_POLICY_BYTES;
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(what)?;
    if bytes.len() > max {
        return Err(UsageError(format!("{} is over {max} bytes", what())).into());
    }
    let policy = rcpt::tlog::policy::Policy::parse(&bytes)
        .map_err(|e| UsageError(format!("{}: {:#}", what(), anyhow::Error::new(e))))?;
    let w = rcpt::net::witnessing::Witnessing::new(policy)
        .map_err(|e| UsageError(format!("{}: {:#}", what(), anyhow::Error::new(e))))?;
    Ok(Arc::new(w))
}

/// `250ms`, `2s` or `0s`, at most [`MAX_BATCH_WAIT`].
fn parse_duration(text: &str) -> Result<Duration, String> {
    let (digits, unit) = match text.strip_suffix("ms") {
        Some(d) => (d, 1),
        None => match text.strip_suffix('s') {
            Some(d) => (d, 1000),
            None => return Err("expected a duration like 250ms or 1s".to_string()),
        },
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| "expected a duration like 250ms or 1s".to_string())?;
    let d = Duration::from_millis(n.saturating_mul(unit));
    if d > MAX_BATCH_WAIT {
        return Err(format!("at most {}s", MAX_BATCH_WAIT.as_secs()));
    }
    Ok(d)
}

/// Read a small file (key, trust), refusing one over the key-file limit.
fn read_small(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let file =
        std::fs::File::open(path).with_context(|| format!("reading {what} {}", path.display()))?;
    let mut bytes = Vec::new();
    let max = rcpt::limits::MAX_KEY_FILE_BYTES;
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        anyhow::bail!("{what} {} is over {max} bytes", path.display());
    }
    Ok(bytes)
}

/// The log key from `--log-key VKEY` (always key text, never a file name:
/// a file planted under the key's name cannot replace it) or
/// `--log-key-file FILE` (spec/keys.md).
fn parse_log_key(text: Option<&str>, file: Option<&Path>) -> anyhow::Result<NoteVerifier> {
    let (text, what) = match (text, file) {
        (Some(t), None) => (t.trim().to_string(), format!("--log-key \"{t}\"")),
        (None, Some(f)) => (
            String::from_utf8_lossy(&read_small(f, "--log-key-file")?)
                .trim()
                .to_string(),
            format!("--log-key-file {}", f.display()),
        ),
        _ => {
            return Err(UsageError(
                "give the log's key: --log-key VKEY or --log-key-file FILE".into(),
            )
            .into());
        }
    };
    let hint = if Path::new(&text).exists() && file.is_none() {
        "; it names a file, and --log-key never reads files: use --log-key-file"
    } else {
        ""
    };
    Ok(NoteVerifier::parse(&text).map_err(|e| UsageError(format!("{what}: {e}{hint}")))?)
}

fn signing_key(
    dir: &Path,
    store: &Arc<dyn rcpt::storage::Store>,
    key: Option<&Path>,
) -> anyhow::Result<SigningKey> {
    let path = match key {
        Some(k) => k.to_path_buf(),
        None => Log::open_store(Arc::clone(store), None)?
            .key_file()
            .map(Path::to_path_buf)
            .ok_or_else(|| {
                UsageError(format!(
                    "{} records no key file; pass --key LOG.key",
                    dir.display()
                ))
            })?,
    };
    let pem = rcpt::keys::read_key_file(&path)?;
    rcpt::keys::signing_key_from_pem(&pem)
        .with_context(|| format!("reading the private key {}", path.display()))
}

pub fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let store = args.at.store(&args.dir)?;
    // Accepted issuers: --trust, else those the log was initialised with.
    let accepted = match &args.trust {
        Some(path) => {
            AcceptedIssuers::from_json(&read_small(path, "trust file")?).map_err(|e| {
                let e = anyhow::Error::new(e);
                UsageError(format!("trust file {}: {e:#}", path.display()))
            })?
        }
        None => Log::open_store(Arc::clone(&store), None)?
            .accepted_issuers()?
            .ok_or_else(|| {
                UsageError(format!(
                    "no accepted issuers: {} was initialised without --trust; pass --trust FILE \
                 with \"issuers\" (the service admits only receipts signed by an accepted \
                 issuer under its own name)",
                    args.dir.display()
                ))
            })?,
    };
    let config = ServeConfig {
        key: signing_key(&args.dir, &store, args.key.as_deref())?,
        dir: args.dir,
        store: Some(store),
        wait: args.wait,
        accepted,
        batch_max: args.batch_max as usize,
        batch_wait: args.batch_wait,
        queue_max: args.queue_max as usize,
        witnessing: match &args.witness_policy {
            Some(p) => Some(witnessing(p)?),
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
    let sink: rcpt::net::serve::RequestSink = Arc::new(move |line: &str| writer.line(line));
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
    for (name, bytes) in super::log::inputs(&args.files) {
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
fn report(
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

fn refused(
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

/// Write through a temporary file, fsync, rename: a reader never sees half a bundle.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().with_context(|| format!("writing {}", path.display()))
}

#[derive(clap::Args)]
#[command(after_help = "Example:
  rcpt log mirror http://log.example/ mirror/ --log-key-file log.vkey && rcpt log check mirror/
  rcpt log mirror http://log.example/ s3://bucket/mirror --endpoint http://127.0.0.1:9000 --log-key-file log.vkey")]
pub struct MirrorArgs {
    /// The log's URL (http://HOST[:PORT][/PREFIX]).
    url: String,
    /// The mirror: a directory (created), or s3://BUCKET/PREFIX in object
    /// storage; later runs bring it up to date.
    dir: PathBuf,
    /// For a mirror at s3://BUCKET/PREFIX: the S3 endpoint, http://HOST:PORT
    /// (default: $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL); credentials
    /// and region from the AWS_* variables, as for the log commands.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// The log's verifier key as text (NAME+HASH+KEY; never read as a file name).
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
}

pub fn mirror(args: MirrorArgs) -> anyhow::Result<u8> {
    let key = parse_log_key(args.log_key.as_deref(), args.log_key_file.as_deref())?;
    let client =
        rcpt::net::client::Client::new(&args.url).map_err(|e| UsageError(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = if args.dir.to_str().is_some_and(|d| d.starts_with("s3://")) {
        // Object storage: fetched files are staged in a local temporary
        // directory (spec/storage.md "Mirroring into object storage").
        let store = super::log::store_at(&args.dir, args.endpoint.as_deref(), 10)?;
        let stage = std::env::temp_dir().join(format!("rcpt-mirror-{}", std::process::id()));
        // Never resumed: whatever an earlier process of this pid left goes.
        let _ = std::fs::remove_dir_all(&stage);
        // `store` outlives the runtime's work: its client's own runtime is
        // dropped here, outside `block_on`.
        runtime.block_on(rcpt::net::mirror::mirror_into(
            &client, &store, &stage, &key,
        ))?
    } else {
        if args.endpoint.is_some() {
            return Err(UsageError(format!(
                "--endpoint is for a mirror at s3://BUCKET/PREFIX, not the directory {}",
                args.dir.display()
            ))
            .into());
        }
        runtime.block_on(rcpt::net::mirror::mirror(&client, &args.dir, &key))?
    };
    use base64::Engine;
    let root = base64::engine::general_purpose::STANDARD.encode(report.root);
    if report.new_size == report.old_size {
        println!("up to date: {} entries, root {root}", report.new_size);
    } else {
        println!(
            "mirrored {} entries (was {}), fetched {} files, root {root}",
            report.new_size, report.old_size, report.fetched
        );
    }
    Ok(EXIT_OK)
}
