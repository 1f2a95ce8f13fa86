//! `rcpt receipt`: issue and inspect receipts.
//!
//! `issue` reads a payload's JSON form, checks it (schema and every
//! invariant), encodes it canonically, signs it and writes the DSSE
//! envelope; any refusal names its reason code and writes nothing.
//! `inspect` shows what an envelope holds and every problem with its
//! payload; it verifies no signature (that needs trust: `rcpt verify`).

use super::{UsageError, read_input};
use anyhow::Context;
use clap::Subcommand;
use rcpt::bundle::RawBundle;
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::io::{Source, Target};
use rcpt::keys;
use rcpt::limits::{MAX_BUNDLE_BYTES, MAX_KEY_FILE_BYTES, MAX_PAYLOAD_JSON_BYTES};
use rcpt::reason::Reason;
use rcpt::receipt::canonical::{dagcbor, identity, jcs, json};
use rcpt::receipt::dsse::Envelope;
use rcpt::receipt::require::VerdictArm;
use rcpt::receipt::{PayloadError, Receipt, payload_from_json};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum ReceiptCommand {
    /// Validate a payload JSON, encode it canonically, sign, write the envelope.
    #[command(after_help = "Example:
  rcpt receipt issue --key gate.key -o envelope.json payload.json")]
    Issue {
        /// Signing key file (PKCS#8 PEM, as `rcpt key generate` writes).
        #[arg(long, value_name = "KEY")]
        key: Source,
        /// Output file, written atomically; '-' or nothing for standard output.
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: Option<Target>,
        /// Payload JSON file, or '-' for standard input.
        #[arg(value_name = "PAYLOAD")]
        payload: Source,
    },
    /// Print the receipt id, interop digest, keyids and fields of an envelope.
    #[command(after_help = "Example:
  rcpt receipt inspect --format json envelope.json")]
    Inspect {
        /// Output: `human` lines, or `json`: one object.
        #[arg(long, value_enum, default_value = "human")]
        format: crate::cli::LineFormat,
        /// Old spelling of `--format json`.
        #[arg(long, hide = true)]
        json: bool,
        /// Envelope JSON file, or '-' for standard input. Given a bundle, the
        /// envelope inside it is shown.
        #[arg(value_name = "ENVELOPE")]
        envelope: Source,
    },
    /// Print a payload to fill in for `receipt issue`: each value to give
    /// starts "FILL IN:" and says what goes there.
    #[command(after_help = "Example:
  rcpt receipt template --issuer gate.example/ci > payload.json
  rcpt receipt issue --key gate.key -o envelope.json payload.json")]
    Template {
        /// The issuer's name (its key's .vkey name); default: to fill in.
        #[arg(long, value_name = "NAME")]
        issuer: Option<String>,
        /// The verdict arm: admit, deny or escalate.
        #[arg(long, value_name = "ARM", default_value = "admit",
              value_parser = |s: &str| VerdictArm::parse(s).map_err(|e| e.to_string()))]
        verdict: VerdictArm,
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
        ReceiptCommand::Issue { key, out, payload } => issue(&key, out.as_ref(), &payload),
        ReceiptCommand::Inspect {
            format,
            json,
            envelope,
        } => inspect(&envelope, json || format == crate::cli::LineFormat::Json),
        ReceiptCommand::Template { issuer, verdict } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let text = super::template::template_text(issuer.as_deref(), verdict, now);
            write!(std::io::stdout().lock(), "{text}")?;
            Ok(super::EXIT_OK)
        }
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
        return Err(UsageError(format!("--root {} is not a directory", root.display())).into());
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
    // A resource named on the command line that is not there, or a name
    // the rules refuse, is a bad invocation (exit 2), as a missing file is.
    let items = rcpt::fresh::read_set(root, substrate, alg, resources).map_err(|e| match e {
        rcpt::fresh::ReadSetError::Resource(r) if r.is_stale() => {
            anyhow::Error::new(UsageError(format!("{r} (under --root {})", root.display())))
        }
        rcpt::fresh::ReadSetError::Duplicate(_) | rcpt::fresh::ReadSetError::TooMany { .. } => {
            anyhow::Error::new(UsageError(e.to_string()))
        }
        other => anyhow::Error::new(other),
    })?;
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

/// `rcpt receipt issue`: check, encode, sign, then write (atomically).
fn issue(key_source: &Source, out: Option<&Target>, payload: &Source) -> anyhow::Result<u8> {
    super::stdin_at_most_once([key_source, payload])?;
    let pem = read_input(key_source, MAX_KEY_FILE_BYTES, "signing key")?;
    let pem = String::from_utf8(pem).context("key file is not text (PKCS#8 PEM expected)")?;
    let key = keys::signing_key_from_pem(&pem)
        .with_context(|| format!("cannot read signing key {key_source}"))?;
    let json = read_input(payload, MAX_PAYLOAD_JSON_BYTES, "payload")?;
    if let Some((at, text)) = super::template::unfilled(&json) {
        anyhow::bail!(
            "payload {payload}: {at} is still the template's {text:?}: fill in the real value"
        );
    }
    let valid = payload_from_json(&json).map_err(|e| refusal(&e))?;
    if let Source::Path(path) = key_source {
        warn_if_key_is_for_another(path, &key, &valid.receipt.issuer);
    }
    let envelope = Envelope::sign(RECEIPT_PAYLOAD_TYPE, valid.bytes, &key);
    let text = format!("{}\n", envelope.to_json());
    super::write_target(out.unwrap_or(&Target::Stdout), text.as_bytes())?;
    Ok(super::EXIT_OK)
}

/// Warn (and go on) when the `.vkey` beside the key names another issuer
/// than the payload's: a log's key used to sign a receipt, say. Without a
/// `.vkey` of that key nothing is said: no name is guessed.
fn warn_if_key_is_for_another(path: &std::path::Path, key: &keys::SigningKey, issuer: &str) {
    let Some(name) = super::keyarg::vkey_name_beside(path, &key.verifying_key()) else {
        return;
    };
    if name != issuer {
        eprintln!(
            "rcpt: warning: {} is the key of {name:?} (its .vkey says so), but the payload's \
             issuer is {issuer:?}: a verifier will refuse it (signature.issuer_mismatch) unless \
             it trusts this key under {issuer:?}; sign with the issuer's own key",
            path.display()
        );
    }
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

/// What `inspect` found about one envelope.
struct Inspection {
    receipt_id: String,
    interop_digest: Option<String>,
    payload_type: String,
    keyids: Vec<String>,
    payload: Option<serde_json::Value>,
    /// What the receipt is in the gate's terms, for an escalation or an
    /// approval (rcpt::receipt::require::describe).
    decision: Option<String>,
    problems: Vec<(Reason, String)>,
}

/// `rcpt receipt inspect`: exit 0 when the payload is a valid receipt, 1 otherwise.
fn inspect(source: &Source, as_json: bool) -> anyhow::Result<u8> {
    let bytes = read_input(source, MAX_BUNDLE_BYTES, "envelope")?;
    let envelope = match Envelope::from_json(&bytes) {
        Ok(envelope) => envelope,
        Err(e) => match RawBundle::parse(&bytes) {
            // A bundle: say so, name the commands, and show its envelope.
            Ok(bundle) => {
                eprintln!(
                    "rcpt: note: {source} is a proof bundle (written by `rcpt log prove`; \
                     `rcpt verify` checks it), not an envelope (written by `rcpt receipt \
                     issue`): showing the envelope inside it"
                );
                Envelope::from_json(bundle.envelope.get().as_bytes())
                    .with_context(|| format!("the envelope inside the bundle {source}"))?
            }
            Err(_) => {
                return Err(
                    anyhow::Error::new(e).context(format!("{source} is not a DSSE envelope"))
                );
            }
        },
    };
    let report = examine(&envelope);
    let text = if as_json {
        render_json(&report)
    } else {
        render_human(&report)
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
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
    let (mut interop_digest, mut payload, mut decision) = (None, None, None);
    match dagcbor::decode(&envelope.payload) {
        Err(e) => problems.push((e.reason_code(), e.to_string())),
        Ok(value) => {
            interop_digest = jcs::interop_digest(&value).map(|d| d.to_string());
            payload = Some(json::to_json(&value));
            match Receipt::from_value(&value) {
                Err(e) => problems.push((e.reason_code(), e.to_string())),
                Ok(r) => {
                    decision = rcpt::receipt::require::describe(&r);
                    problems.extend(
                        r.violations()
                            .into_iter()
                            .map(|v| (v.invariant.reason_code(), v.detail)),
                    )
                }
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
        decision,
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
        "decision": r.decision,
        "valid": r.problems.is_empty(),
        "problems": problems,
    });
    format!("{doc:#}\n")
}

/// Human output: identifiers first, then the fields, then the verdict.
/// Everything taken from the envelope (payload type, key ids, fields,
/// decision, problems' details) is escaped (`rcpt::text`).
fn render_human(r: &Inspection) -> String {
    use rcpt::text::Escaped;
    let mut s = format!("receipt id:     {}\n", r.receipt_id);
    let interop = r
        .interop_digest
        .as_deref()
        .unwrap_or("(none: payload not decodable)");
    s.push_str(&format!("interop digest: {interop}\n"));
    s.push_str(&format!("payload type:   {}\n", Escaped(&r.payload_type)));
    for k in &r.keyids {
        let k = if k.is_empty() { "(no keyid)" } else { k };
        s.push_str(&format!(
            "signature:      keyid {} (not verified: use rcpt verify)\n",
            Escaped(k)
        ));
    }
    if let Some(serde_json::Value::Object(fields)) = &r.payload {
        s.push_str("payload:\n");
        for (k, v) in fields {
            // JSON text escapes C0 controls itself; escape it again only
            // for what JSON leaves raw (DEL, C1, bidi overrides, LS/PS).
            let v = v.to_string();
            let raw = v.contains(|c| c != '\\' && rcpt::text::needs_escape(c));
            let v = if raw { rcpt::text::escape(&v) } else { v };
            s.push_str(&format!("  {}: {v}\n", Escaped(k)));
        }
    }
    if let Some(d) = &r.decision {
        s.push_str(&format!("decision:       {}\n", Escaped(d)));
    }
    if r.problems.is_empty() {
        s.push_str("valid:          yes (schema and invariants)\n");
    }
    for (reason, detail) in &r.problems {
        s.push_str(&format!("problem [{reason}]: {}\n", Escaped(detail)));
    }
    s
}
