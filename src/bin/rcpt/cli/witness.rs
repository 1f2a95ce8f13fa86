//! `rcpt witness`: a C2SP tlog-witness v1 witness, offline.
//!
//! `init` creates a witness directory; `cosign` runs the `add-checkpoint`
//! checks and state update from files, for a witness whose key stays on
//! an air-gapped machine, and prints the cosignature line. The checks, the
//! signing and the durable compare-and-swap are the library's
//! (`rcpt::witness`), the same an HTTP witness runs.

use super::{EXIT_OK, UsageError};
use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use clap::Subcommand;
use rcpt::limits::{MAX_NOTE_BYTES, MAX_POLICY_BYTES, MAX_PROOF_FILE_BYTES};
use rcpt::tlog::merkle::Hash;
use rcpt::witness::{AddCheckpointError, AddCheckpointRequest, Refusal, Witness, error_chain};
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum WitnessCommand {
    /// Create a witness directory (empty or absent) and print its verifier key.
    #[command(after_help = "Example:
  rcpt witness init w1/ --name witness.example/w1 --key w1.key --policy logs.policy")]
    Init {
        /// The witness directory to create (empty or absent).
        dir: PathBuf,
        /// The witness's key name (on its cosignature lines), e.g. witness.example/w1.
        #[arg(long)]
        name: String,
        /// The witness's private key (PKCS#8 PEM); its path is recorded.
        #[arg(long)]
        key: PathBuf,
        /// A tlog-policy file whose `log` lines are the logs to witness.
        #[arg(long)]
        policy: PathBuf,
    },
    /// Check a checkpoint against the witness's state and cosign it (offline add-checkpoint).
    #[command(after_help = "Example:
  rcpt log consistency log/ --from 10 --to 25 > proof.txt
  rcpt witness cosign w1/ --old-size 10 --proof proof.txt checkpoint >> cosigned-lines")]
    Cosign {
        /// The witness directory (made by `rcpt witness init`).
        dir: PathBuf,
        /// Size of the checkpoint the witness cosigned last for this log (0
        /// for none): the --from of the consistency proof.
        #[arg(long, alias = "from", value_name = "SIZE")]
        old_size: u64,
        /// Consistency proof from --old-size: one base64 hash per line (as
        /// `rcpt log consistency` prints), or its --json form. None from size 0.
        #[arg(long)]
        proof: Option<PathBuf>,
        /// The signed checkpoint to cosign.
        checkpoint: PathBuf,
        /// The private key, if not at the path recorded at init.
        #[arg(long)]
        key: Option<PathBuf>,
        /// Cosignature timestamp in POSIX seconds (default: now).
        #[arg(long)]
        time: Option<u64>,
    },
    /// Serve tlog-witness v1 `POST /add-checkpoint` over HTTP.
    #[cfg(feature = "net")]
    #[command(after_help = "Example:
  rcpt witness serve w1/ --listen 127.0.0.1:7380")]
    Serve {
        /// The witness directory (made by `rcpt witness init`).
        dir: PathBuf,
        /// Address to listen on (HOST:PORT; port 0 picks a free one, printed on stdout).
        #[arg(long)]
        listen: String,
        /// The private key, if not at the path recorded at init.
        #[arg(long)]
        key: Option<PathBuf>,
    },
    #[cfg(not(feature = "net"))]
    #[command(hide = true)]
    Serve(crate::cli::WithoutNet),
}

pub fn run(cmd: WitnessCommand) -> anyhow::Result<u8> {
    match cmd {
        WitnessCommand::Init {
            dir,
            name,
            key,
            policy,
        } => init(&dir, &name, &key, &policy),
        WitnessCommand::Cosign {
            dir,
            old_size,
            proof,
            checkpoint,
            key,
            time,
        } => cosign(
            &dir,
            old_size,
            proof.as_deref(),
            &checkpoint,
            key.as_deref(),
            time,
        ),
        #[cfg(feature = "net")]
        WitnessCommand::Serve { dir, listen, key } => serve(&dir, &listen, key.as_deref()),
        #[cfg(not(feature = "net"))]
        WitnessCommand::Serve(w) => w.refuse("witness serve"),
    }
}

fn open(dir: &Path, key: Option<&Path>) -> anyhow::Result<Witness> {
    // A witness directory that is not there is a bad invocation (exit 2).
    if !dir.join("settings.json").exists() {
        return Err(UsageError(format!(
            "{} is not a witness directory (no settings.json); make one with `rcpt witness \
             init {} --name NAME --key W.key --policy LOGS`",
            dir.display(),
            dir.display()
        ))
        .into());
    }
    match key {
        Some(k) => Witness::open_with_key(dir, read_key(k)?),
        None => Witness::open(dir),
    }
    .with_context(|| format!("opening witness {}", dir.display()))
}

/// `rcpt witness serve`: bind, print the address on stdout line 1, write
/// one JSON line per request on stderr, stop on SIGTERM or SIGINT.
#[cfg(feature = "net")]
fn serve(dir: &Path, listen: &str, key: Option<&Path>) -> anyhow::Result<u8> {
    use rcpt::net::server::witness::{RequestSink, WitnessServer};
    use std::io::Write as _;
    use std::sync::Arc;
    let witness = open(dir, key)?;
    let name = witness.name().to_owned();
    let server = WitnessServer::bind(witness, listen)?;
    let addr = server.local_addr()?;
    // The bound address, for whoever started the service (port 0 above).
    println!("listening on {addr}");
    std::io::stdout().flush()?;
    let sink: RequestSink = Arc::new(|line: &str| {
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    });
    sink(
        &serde_json::json!({"event": "listening", "addr": addr.to_string(), "witness": name})
            .to_string(),
    );
    let requests = server.run(Arc::clone(&sink))?;
    sink(&serde_json::json!({"event": "stopped", "requests": requests}).to_string());
    Ok(EXIT_OK)
}

/// Read at most `limit` bytes of the regular file `path`, refusing a
/// larger file (the crate's one capped reader).
fn read_limited(path: &Path, limit: usize) -> anyhow::Result<Vec<u8>> {
    Ok(rcpt::io::read_path(path, limit)?)
}

fn read_key(path: &Path) -> anyhow::Result<rcpt::keys::SigningKey> {
    let pem = rcpt::keys::read_key_file(path)?;
    rcpt::keys::signing_key_from_pem(&pem)
        .with_context(|| format!("reading the private key {}", path.display()))
}

fn init(dir: &Path, name: &str, key_path: &Path, policy: &Path) -> anyhow::Result<u8> {
    if !rcpt::keys::is_valid_key_name(name) {
        let msg =
            format!("witness name {name:?} is invalid: use a non-empty name without spaces or '+'");
        return Err(UsageError(msg).into());
    }
    let key = read_key(key_path)?;
    let policy_text = read_limited(policy, MAX_POLICY_BYTES)?;
    let witness = Witness::init(dir, name, &key, Some(key_path), &policy_text)
        .with_context(|| format!("creating witness {}", dir.display()))?;
    println!(
        "initialised witness {} at {}",
        witness.name(),
        witness.dir().display()
    );
    for log in witness.logs() {
        println!("witnessing log {}", log.name);
    }
    println!("witness verifier key: {}", witness.verifier());
    Ok(EXIT_OK)
}

/// A consistency proof file: base64 hashes one per line, or the JSON
/// `{"from": M, "to": N, "proof": [...]}` of `rcpt log consistency --json`
/// (whose `from` must be `old_size`).
fn read_proof(path: &Path, old_size: u64) -> anyhow::Result<Vec<Hash>> {
    let bytes = read_limited(path, MAX_PROOF_FILE_BYTES)?;
    let text =
        std::str::from_utf8(&bytes).with_context(|| format!("{} is not text", path.display()))?;
    let lines: Vec<String> = if text.trim_start().starts_with('{') {
        #[derive(serde::Deserialize)]
        struct Json {
            from: u64,
            proof: Vec<String>,
        }
        let json: Json =
            serde_json::from_str(text).with_context(|| format!("parsing {}", path.display()))?;
        if json.from != old_size {
            let msg = format!(
                "{} is a proof from size {}, not from --old-size {old_size}",
                path.display(),
                json.from
            );
            return Err(UsageError(msg).into());
        }
        json.proof
    } else {
        text.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let raw = STANDARD.decode(l.trim()).ok();
            raw.and_then(|r| Hash::try_from(r).ok()).with_context(|| {
                format!(
                    "{} line {}: not base64 of a 32-byte hash",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect()
}

fn now() -> anyhow::Result<u64> {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    Ok(d.as_secs())
}

fn cosign(
    dir: &Path,
    old_size: u64,
    proof: Option<&Path>,
    checkpoint: &Path,
    key: Option<&Path>,
    time: Option<u64>,
) -> anyhow::Result<u8> {
    let witness = open(dir, key)?;
    let proof = match proof {
        Some(p) => read_proof(p, old_size)?,
        None => Vec::new(),
    };
    let note = read_limited(checkpoint, MAX_NOTE_BYTES)?;
    let note = String::from_utf8(note)
        .with_context(|| format!("{} is not UTF-8", checkpoint.display()))?;
    // The same request body an HTTP client would send, through the same parser.
    let body = AddCheckpointRequest::to_body(old_size, &proof, &note);
    let now = match time {
        Some(t) => t,
        None => now()?,
    };
    match witness.add_checkpoint(body.as_bytes(), now) {
        Ok(cosigned) => {
            print!("{}", cosigned.lines);
            Ok(EXIT_OK)
        }
        Err(AddCheckpointError::Refused(r)) => Err(refused(&r, checkpoint)),
        Err(e) => Err(anyhow::Error::new(e).context("cosigning")),
    }
}

/// A refusal as a person reads it: the tlog-witness status and what to do.
fn refused(r: &Refusal, checkpoint: &Path) -> anyhow::Error {
    let hint = match r {
        Refusal::Conflict { size } => {
            format!("; run again with --old-size {size} and a consistency proof from size {size}")
        }
        Refusal::UnknownOrigin { .. } => "; add the log's key to the witness's policy".to_owned(),
        _ => String::new(),
    };
    anyhow::anyhow!(
        "refused {} ({} in tlog-witness terms): {}{hint}",
        checkpoint.display(),
        r.status(),
        error_chain(r)
    )
}
