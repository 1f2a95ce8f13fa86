//! `rcpt receipt`: issue and inspect receipts.
//!
//! `issue` reads a payload's JSON form, checks it (schema and every
//! invariant), encodes it canonically, signs it and writes the DSSE
//! envelope; any refusal names its reason code and writes nothing.
//! `inspect` shows what an envelope holds and every problem with its
//! payload; it verifies no signature (that needs trust: `rcpt verify`).

use anyhow::{Context, bail};
use clap::Subcommand;
use rcpt::canonical::{dagcbor, identity, jcs, json};
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::dsse::Envelope;
use rcpt::keys;
use rcpt::limits::{MAX_ENVELOPE_BYTES, MAX_KEY_FILE_BYTES, MAX_PAYLOAD_JSON_BYTES};
use rcpt::reason::Reason;
use rcpt::receipt::{PayloadError, Receipt, payload_from_json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum ReceiptCommand {
    /// Validate a payload JSON, encode it canonically, sign, write the envelope.
    Issue {
        /// Signing key (PKCS#8 PEM).
        #[arg(long)]
        key: std::path::PathBuf,
        /// Output file (stdout without it).
        #[arg(short = 'o', long = "out")]
        out: Option<std::path::PathBuf>,
        /// Payload JSON file, or '-' for stdin.
        payload: String,
    },
    /// Print the receipt id, interop digest, keyids and fields of an envelope.
    Inspect {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Envelope JSON file, or '-' for stdin.
        envelope: String,
    },
    /// Print the sorted `read_set` of RESOURCEs read now under ROOT (the rules `verify --fresh` checks by).
    #[command(
        after_help = "Example:\n  rcpt receipt read-set --root . --substrate git refs/heads/main Cargo.lock src/lib.rs"
    )]
    ReadSet {
        /// Directory the resources are relative to (a git work tree for git refs).
        #[arg(long)]
        root: PathBuf,
        /// Digest algorithm of each item.
        #[arg(long, value_enum, default_value = "blake3")]
        alg: ReadSetAlg,
        /// Substrate whose rules apply: `git` reads names under refs/ as refs; default: git when ROOT has a .git, else filesystem.
        #[arg(long, value_enum)]
        substrate: Option<ReadSetSubstrate>,
        /// Resources: relative paths under ROOT, or (git) ref names under refs/.
        #[arg(required = true)]
        resources: Vec<String>,
    },
}

/// `--alg` of `receipt read-set`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ReadSetAlg {
    /// `blake3:` digests.
    Blake3,
    /// `sha256:` digests.
    Sha256,
}

/// `--substrate` of `receipt read-set`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ReadSetSubstrate {
    /// Files under ROOT.
    Filesystem,
    /// Files under ROOT, and refs of the repository at ROOT.
    Git,
}

pub fn run(cmd: ReceiptCommand) -> anyhow::Result<u8> {
    match cmd {
        ReceiptCommand::Issue { key, out, payload } => issue(&key, out.as_deref(), &payload),
        ReceiptCommand::Inspect { json, envelope } => inspect(&envelope, json),
        ReceiptCommand::ReadSet {
            root,
            alg,
            substrate,
            resources,
        } => read_set(&root, alg, substrate, &resources),
    }
}

/// `rcpt receipt read-set`: the items as the payload's `read_set` array (JSON).
fn read_set(
    root: &Path,
    alg: ReadSetAlg,
    substrate: Option<ReadSetSubstrate>,
    resources: &[String],
) -> anyhow::Result<u8> {
    use rcpt::digest::Algorithm;
    use rcpt::receipt::Substrate;
    if !root.is_dir() {
        return Err(crate::cli::UsageError(format!(
            "--root {} is not a directory",
            root.display()
        ))
        .into());
    }
    let substrate = match substrate {
        Some(ReadSetSubstrate::Git) => Substrate::Git,
        Some(ReadSetSubstrate::Filesystem) => Substrate::Filesystem,
        None if root.join(".git").exists() => Substrate::Git,
        None => Substrate::Filesystem,
    };
    let alg = match alg {
        ReadSetAlg::Blake3 => Algorithm::Blake3,
        ReadSetAlg::Sha256 => Algorithm::Sha256,
    };
    let items = rcpt::gate::fresh::read_set(root, substrate, alg, resources)?;
    #[derive(serde::Serialize)]
    struct Item {
        resource: String,
        digest: String,
    }
    let array: Vec<Item> = items
        .into_iter()
        .map(|i| Item {
            resource: i.resource,
            digest: i.digest.to_string(),
        })
        .collect();
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &array)?;
    writeln!(out)?;
    Ok(crate::cli::EXIT_OK)
}

/// Read a file (or stdin for `-`), refusing more than `limit` bytes
/// without reading past the limit.
fn read_limited(source: &str, limit: usize, what: &str) -> anyhow::Result<Vec<u8>> {
    let reader: Box<dyn Read> = if source == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file =
            std::fs::File::open(source).with_context(|| format!("cannot open {what} {source}"))?;
        Box::new(file)
    };
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {what} {source}"))?;
    if bytes.len() > limit {
        bail!("{what} {source} is over the limit of {limit} bytes");
    }
    Ok(bytes)
}

/// `rcpt receipt issue`: check, encode, sign, then write (atomically).
fn issue(key_path: &Path, out: Option<&Path>, payload: &str) -> anyhow::Result<u8> {
    let json = read_limited(payload, MAX_PAYLOAD_JSON_BYTES, "payload")?;
    let valid = payload_from_json(&json).map_err(|e| refusal(&e))?;
    let pem = read_limited(&key_path.to_string_lossy(), MAX_KEY_FILE_BYTES, "key file")?;
    let pem = String::from_utf8(pem).context("key file is not text (PKCS#8 PEM expected)")?;
    let key = keys::signing_key_from_pem(&pem)
        .with_context(|| format!("cannot read signing key {}", key_path.display()))?;
    let envelope = Envelope::sign(RECEIPT_PAYLOAD_TYPE, valid.bytes, &key);
    let text = format!("{}\n", envelope.to_json());
    match out {
        Some(path) => write_atomic(path, text.as_bytes())?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    Ok(super::EXIT_OK)
}

/// The refusal: reason code and what failed; for invariants, one line per
/// broken invariant.
fn refusal(e: &PayloadError) -> anyhow::Error {
    let PayloadError::Invariants(list) = e else {
        return anyhow::anyhow!("payload refused [{}]: {e}", e.reason_code());
    };
    let lines: Vec<String> = list
        .iter()
        .map(|v| {
            format!(
                "payload refused [{}]: {}",
                v.invariant.reason_code(),
                v.detail
            )
        })
        .collect();
    anyhow::anyhow!(lines.join("\n"))
}

/// Write `bytes` to `path` via a temporary file in the same directory,
/// synced, then renamed over `path`: a reader sees the old file or the
/// whole new one, never a part.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.with_context(|| format!("output path {} names no file", path.display()))?;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = write_and_rename(&tmp, path, bytes);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Create `tmp` (never an existing file), write, sync, rename to `path`.
fn write_and_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(tmp, path)
}

/// What `inspect` found about one envelope.
struct Inspection {
    receipt_id: String,
    interop_digest: Option<String>,
    payload_type: String,
    keyids: Vec<String>,
    payload: Option<serde_json::Value>,
    problems: Vec<(Reason, String)>,
}

/// `rcpt receipt inspect`: exit 0 when the payload is a valid receipt, 1 otherwise.
fn inspect(source: &str, as_json: bool) -> anyhow::Result<u8> {
    let bytes = read_limited(source, MAX_ENVELOPE_BYTES, "envelope")?;
    let envelope =
        Envelope::from_json(&bytes).with_context(|| format!("{source} is not a DSSE envelope"))?;
    let report = examine(&envelope);
    let text = if as_json {
        render_json(&report)
    } else {
        render_human(&report)
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(if report.problems.is_empty() {
        super::EXIT_OK
    } else {
        super::EXIT_FAILED
    })
}

/// Everything that can be shown, and every problem, in checking order.
fn examine(envelope: &Envelope) -> Inspection {
    let mut problems = Vec::new();
    if envelope.payload_type != RECEIPT_PAYLOAD_TYPE {
        let detail = format!(
            "payloadType is {:?}, expected {RECEIPT_PAYLOAD_TYPE:?}",
            envelope.payload_type
        );
        problems.push((Reason::EnvelopePayloadTypeUnsupported, detail));
    }
    let (mut interop_digest, mut payload) = (None, None);
    match dagcbor::decode(&envelope.payload) {
        Err(e) => problems.push((e.reason_code(), e.to_string())),
        Ok(value) => {
            interop_digest = jcs::interop_digest(&value).map(|d| d.to_string());
            payload = Some(json::to_json(&value));
            match Receipt::from_value(&value) {
                Err(e) => problems.push((e.reason_code(), e.to_string())),
                Ok(r) => problems.extend(
                    r.violations()
                        .into_iter()
                        .map(|v| (v.invariant.reason_code(), v.detail)),
                ),
            }
        }
    }
    Inspection {
        receipt_id: identity(&envelope.payload).to_string(),
        interop_digest,
        payload_type: envelope.payload_type.clone(),
        keyids: envelope
            .signatures
            .iter()
            .map(|s| s.keyid.clone())
            .collect(),
        payload,
        problems,
    }
}

/// `--json`: one object, keys as documented in spec/receipt.md.
fn render_json(r: &Inspection) -> String {
    let problems: Vec<serde_json::Value> = r
        .problems
        .iter()
        .map(|(reason, detail)| serde_json::json!({"reason": reason, "detail": detail}))
        .collect();
    let signatures: Vec<serde_json::Value> = r
        .keyids
        .iter()
        .map(|k| serde_json::json!({"keyid": k}))
        .collect();
    let doc = serde_json::json!({
        "receipt_id": r.receipt_id,
        "interop_digest": r.interop_digest,
        "payload_type": r.payload_type,
        "signatures": signatures,
        "payload": r.payload,
        "valid": r.problems.is_empty(),
        "problems": problems,
    });
    format!("{doc:#}\n")
}

/// Human output: identifiers first, then the fields, then the verdict.
fn render_human(r: &Inspection) -> String {
    let mut s = format!("receipt id:     {}\n", r.receipt_id);
    let interop = r
        .interop_digest
        .as_deref()
        .unwrap_or("(none: payload not decodable)");
    s.push_str(&format!("interop digest: {interop}\n"));
    s.push_str(&format!("payload type:   {}\n", r.payload_type));
    for k in &r.keyids {
        let k = if k.is_empty() { "(no keyid)" } else { k };
        s.push_str(&format!(
            "signature:      keyid {k} (not verified: use rcpt verify)\n"
        ));
    }
    if let Some(serde_json::Value::Object(fields)) = &r.payload {
        s.push_str("payload:\n");
        for (k, v) in fields {
            s.push_str(&format!("  {k}: {v}\n"));
        }
    }
    if r.problems.is_empty() {
        s.push_str("valid:          yes (schema and invariants)\n");
    }
    for (reason, detail) in &r.problems {
        s.push_str(&format!("problem [{reason}]: {detail}\n"));
    }
    s
}
