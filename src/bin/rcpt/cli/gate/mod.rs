//! `rcpt gate`: receipts from a git work tree (spec/gate.md).
//!
//! `id` prints the change's identity; `check` runs the policy's checks in
//! a clean worktree and issues the receipt (exit 0 admit, 1 deny, 3 no
//! verdict, 2 bad invocation); `show` prints a receipt's evidence from the
//! store, re-hashing every object.

use crate::cli::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError, read_input};
use anyhow::Context as _;
use clap::Subcommand;
use rcpt::gate::{self, GateError, policy::Policy, store::GateStore};
use rcpt::io::{Source, Target};
use rcpt::keys::NoteVerifier;
use rcpt::limits::{MAX_BUNDLE_BYTES, MAX_KEY_FILE_BYTES};
use rcpt::receipt::Verdict;
use rcpt::receipt::dsse::Envelope;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

mod apply;
mod mcp;

#[derive(Subcommand)]
pub enum GateCommand {
    /// Print the change_id of the work tree against a base commit.
    #[command(
        after_help = "Example:\n  rcpt verify --change-id \"$(rcpt gate id)\" --fresh . bundle.json"
    )]
    Id {
        /// The base revision.
        #[arg(long, default_value = "HEAD", value_name = "REV")]
        base: String,
        /// Print the change record (JSON) instead of its identity.
        #[arg(long)]
        json: bool,
    },
    /// Run the policy's checks on the change in a clean worktree and issue the receipt.
    #[command(
        after_help = "Example:\n  rcpt gate check --policy gate.json --key gate.key --log log/ -o bundle.json\n\
        Exit status: 0 admit, 1 deny, 3 no verdict (a check could not run), 2 bad invocation."
    )]
    Check(Box<CheckArgs>),
    /// Apply a patch (git diff format) if the policy admits it: inverse stored first, compare and swap, a receipt.
    #[command(
        after_help = "Example:\n  rcpt gate apply change.patch --policy gate.json --key gate.key --log log/ -o bundle.json\n\
        Exit status: 0 admitted and applied, 1 deny (nothing written) or a file moved (nothing written), \
        3 no verdict (the patch does not apply, a check could not run, a limit), 2 bad invocation."
    )]
    Apply(Box<ApplyArgs>),
    /// Undo an applied receipt of this gate: the current state stored first, the files restored, a receipt.
    #[command(
        after_help = "Example:\n  rcpt gate undo bundle.json --key gate.key -o undo.json\n\
        Exit status: 0 undone, 1 refused (not this gate's, not applied, a file moved; nothing written), \
        3 not evaluated (the store lacks an object), 2 bad invocation."
    )]
    Undo(Box<UndoArgs>),
    /// Gate an agent's tool calls: an MCP proxy that issues a receipt for every step (spec/gate-mcp.md).
    #[command(
        after_help = "Example:\n  rcpt gate mcp --policy agent.json --key gate.key --store .rcpt-store --root /work --log log/ \\\n      -- npx @modelcontextprotocol/server-filesystem /work"
    )]
    Mcp(Box<mcp::McpArgs>),
    /// Print the evidence of a receipt (commands, exits, outputs) from the store, re-hashing every object.
    #[command(after_help = "Example:\n  rcpt gate show bundle.json")]
    Show {
        /// The receipt: a DSSE envelope or a bundle.
        #[arg(value_name = "RECEIPT")]
        receipt: Source,
        /// The store; default .git/rcpt/store of the repository here.
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
    },
}

/// `rcpt gate check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// The policy file (JSON).
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// The gate's signing key (PKCS#8 PEM); its name is read from the .vkey beside it.
    #[arg(long, value_name = "GATE.key")]
    key: PathBuf,
    /// The issuer name, when no .vkey is beside the key (must match it when one is).
    #[arg(long, value_name = "NAME")]
    issuer: Option<String>,
    /// The base revision.
    #[arg(long, default_value = "HEAD", value_name = "REV")]
    base: String,
    /// Append the receipt to a log directory, or submit it to a log service URL.
    #[arg(long, value_name = "DIR|URL")]
    log: Option<String>,
    /// The log service's verifier key (with --log URL).
    #[arg(long, value_name = "VKEY", conflicts_with = "log_key_file")]
    log_key: Option<String>,
    /// File holding the log service's verifier key (with --log URL).
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<PathBuf>,
    /// The store; default .git/rcpt/store of the repository.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Write the bundle (with --log) or the envelope here; '-' for standard output.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<Target>,
}

/// `rcpt gate apply`.
#[derive(clap::Args)]
pub struct ApplyArgs {
    /// The patch (git diff or git format-patch output).
    #[arg(value_name = "PATCH")]
    patch: PathBuf,
    /// The policy file (JSON).
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    #[command(flatten)]
    issue: IssueArgs,
}

/// `rcpt gate undo`.
#[derive(clap::Args)]
pub struct UndoArgs {
    /// The receipt to undo: a DSSE envelope or a bundle.
    #[arg(value_name = "RECEIPT")]
    receipt: Source,
    #[command(flatten)]
    issue: IssueArgs,
    /// A tool-proxy receipt (`rcpt gate mcp`): the roots its files lie under (repeatable).
    #[arg(long, value_name = "DIR")]
    root: Vec<PathBuf>,
}

/// What issuing a receipt takes (apply, undo).
#[derive(clap::Args)]
pub struct IssueArgs {
    /// The gate's signing key (PKCS#8 PEM); its name is read from the .vkey beside it.
    #[arg(long, value_name = "GATE.key")]
    key: PathBuf,
    /// The issuer name, when no .vkey is beside the key (must match it when one is).
    #[arg(long, value_name = "NAME")]
    issuer: Option<String>,
    /// Append the receipt to a log directory, or submit it to a log service URL.
    #[arg(long, value_name = "DIR|URL")]
    log: Option<String>,
    /// The log service's verifier key (with --log URL).
    #[arg(long, value_name = "VKEY", conflicts_with = "log_key_file")]
    log_key: Option<String>,
    /// File holding the log service's verifier key (with --log URL).
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<PathBuf>,
    /// The store; default .git/rcpt/store of the repository.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Write the bundle (with --log) or the envelope here; '-' for standard output.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<Target>,
}

pub fn run(cmd: GateCommand) -> anyhow::Result<u8> {
    let store = match &cmd {
        GateCommand::Check(a) => a.store.clone(),
        GateCommand::Apply(a) => a.issue.store.clone(),
        GateCommand::Undo(a) => a.issue.store.clone(),
        GateCommand::Show { store, .. } => store.clone(),
        GateCommand::Id { .. } => None,
        GateCommand::Mcp(a) => mcp::store_of(a),
    };
    let result = recover(store.as_deref()).and_then(|()| match cmd {
        GateCommand::Id { base, json } => id(&base, json),
        GateCommand::Check(args) => check(&args),
        GateCommand::Apply(args) => apply::apply(&args),
        GateCommand::Undo(args) if mcp::is_tool_proxy_undo(&args) => mcp::undo(&args),
        GateCommand::Undo(args) => apply::undo(&args),
        GateCommand::Mcp(args) => mcp::run(*args),
        GateCommand::Show { receipt, store } => show(&receipt, store.as_deref()),
    });
    // No verdict is exit 3, a bad invocation exit 2, a refusal to write
    // exit 1; each says why.
    result.or_else(|e| match e.downcast_ref::<GateError>() {
        Some(g) if g.is_usage() => Err(UsageError(format!("{e:#}")).into()),
        Some(g) if g.is_refusal() => {
            let _ = writeln!(std::io::stderr(), "rcpt: {e:#}");
            Ok(EXIT_FAILED)
        }
        Some(_) => {
            let _ = writeln!(std::io::stderr(), "rcpt: not evaluated: {e:#}");
            Ok(EXIT_NOT_EVALUATED)
        }
        None => Err(e),
    })
}

/// Finish or roll back an apply or undo a crash interrupted, before any
/// gate command, and say so.
fn recover(store: Option<&Path>) -> anyhow::Result<()> {
    let dir = match store {
        Some(d) => d.to_path_buf(),
        None => match rcpt::gate::git::WorkTree::discover(&here()?) {
            Ok(Some(tree)) => gate::default_store(&tree),
            _ => return Ok(()),
        },
    };
    let Some(r) = gate::journal::recover_at(&dir).map_err(GateError::from)? else {
        return Ok(());
    };
    let mut err = std::io::stderr().lock();
    if r.forward {
        writeln!(
            err,
            "rcpt: recovered an interrupted gate {}: rolled forward ({} files rewritten); \
             its receipt {} was issued (envelope: store object {})",
            r.entry.op, r.rewritten, r.entry.receipt, r.entry.envelope
        )?;
    } else {
        writeln!(
            err,
            "rcpt: recovered an interrupted gate {}: rolled back ({} files restored); \
             no receipt was issued",
            r.entry.op, r.rewritten
        )?;
    }
    for c in &r.conflicts {
        writeln!(
            err,
            "rcpt: {c}: edited by someone else meanwhile; left as it is"
        )?;
    }
    Ok(())
}

pub(super) fn here() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("reading the current directory")
}

fn id(base: &str, json: bool) -> anyhow::Result<u8> {
    let (_, change) = gate::identify(&here()?, base).map_err(GateError::from)?;
    let mut out = std::io::stdout().lock();
    if json {
        let doc = rcpt::receipt::canonical::json::to_json(&change.to_value());
        writeln!(out, "{doc:#}")?;
    } else {
        writeln!(out, "{}", change.id())?;
    }
    Ok(EXIT_OK)
}

/// Where `--log` sends the receipt.
pub(super) enum LogTarget {
    Dir(PathBuf),
    #[cfg(feature = "net")]
    Url(String, Box<NoteVerifier>),
}

fn log_target(args: &CheckArgs) -> anyhow::Result<Option<LogTarget>> {
    log_target_of(&args.log, &args.log_key, &args.log_key_file)
}

pub(super) fn log_target_of(
    log: &Option<String>,
    log_key: &Option<String>,
    log_key_file: &Option<PathBuf>,
) -> anyhow::Result<Option<LogTarget>> {
    let Some(log) = log else {
        return Ok(None);
    };
    if log.starts_with("http://") || log.starts_with("https://") {
        let text = match (log_key, log_key_file) {
            (Some(t), None) => t.clone(),
            (None, Some(f)) => String::from_utf8_lossy(&read_input(
                &Source::Path(f.clone()),
                MAX_KEY_FILE_BYTES,
                "log key file",
            )?)
            .into_owned(),
            _ => {
                let msg = "--log URL needs the log's key: --log-key VKEY or --log-key-file FILE";
                return Err(UsageError(msg.into()).into());
            }
        };
        let key = NoteVerifier::parse(&text).map_err(|e| UsageError(format!("--log-key: {e}")))?;
        #[cfg(feature = "net")]
        return Ok(Some(LogTarget::Url(log.clone(), Box::new(key))));
        #[cfg(not(feature = "net"))]
        {
            let _ = key;
            return Err(UsageError("this rcpt is built without feature `net`".into()).into());
        }
    }
    let dir = PathBuf::from(log);
    // Refuse a log that cannot take the receipt before any check runs.
    let opened = rcpt::log::Log::open(&dir).with_context(|| format!("opening the log {log}"))?;
    if opened.key_file().is_none() {
        let msg = format!("the log {log} records no key file to append with");
        return Err(UsageError(msg).into());
    }
    Ok(Some(LogTarget::Dir(dir)))
}

fn check(args: &CheckArgs) -> anyhow::Result<u8> {
    let policy = Policy::read(&args.policy)
        .map_err(|e| UsageError(format!("{:#}", anyhow::Error::new(e))))?;
    let pem = rcpt::keys::read_key_file(&args.key)
        .with_context(|| format!("reading the gate key {}", args.key.display()))
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let key = rcpt::keys::signing_key_from_pem(&pem)
        .map_err(|e| UsageError(format!("the gate key {}: {e}", args.key.display())))?;
    let issuer = gate::issuer_name(&args.key, &key, args.issuer.as_deref())
        .map_err(|e| UsageError(format!("{:#}", anyhow::Error::new(e))))?;
    let log = log_target(args)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("installing the interrupt handler")?;
    }
    let request = gate::Request {
        dir: &here()?,
        base: &args.base,
        policy: &policy,
        store: args.store.as_deref(),
        interrupted: &interrupted,
    };
    let decision = gate::evaluate(&request)?;
    let mut err = std::io::stderr().lock();
    writeln!(err, "change_id: {}", decision.change_id)?;
    writeln!(err, "policy_id: {}", policy.id)?;
    for c in &decision.evidence.checks {
        writeln!(
            err,
            "check {}: exit {} in {} ms",
            c.name, c.exit, c.duration_ms
        )?;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let receipt = decision.receipt(&issuer, now);
    let (valid, envelope) = gate::issue(&receipt, &key, &decision.store, &decision.evidence_id)?;
    writeln!(err, "verdict: {}", verdict_line(&receipt.verdict))?;
    writeln!(err, "evidence: {}", decision.evidence_id)?;
    writeln!(err, "receipt_id: {}", valid.id)?;
    drop(err);
    let text = match &log {
        None => format!("{}\n", envelope.to_json()),
        Some(target) => publish(target, &envelope)
            .context("the receipt was issued (it is in the store) but not logged")?,
    };
    if let Some(out) = &args.out {
        crate::cli::write_target(out, text.as_bytes())?;
    }
    Ok(match receipt.verdict {
        Verdict::Admit { .. } => EXIT_OK,
        _ => EXIT_FAILED,
    })
}

pub(super) fn verdict_line(v: &Verdict) -> String {
    match v {
        Verdict::Admit { proof } => format!("admit (proof {proof})"),
        Verdict::Deny { reasons } => format!("deny ({})", reasons.join(", ")),
        Verdict::Escalate { ticket } => format!("escalate ({ticket})"),
    }
}

/// Append to a log directory or submit to a service; the bundle JSON.
pub(super) fn publish(target: &LogTarget, envelope: &Envelope) -> anyhow::Result<String> {
    let json = envelope.to_json();
    match target {
        LogTarget::Dir(dir) => append(dir, json.as_bytes()),
        #[cfg(feature = "net")]
        LogTarget::Url(url, key) => {
            let client =
                rcpt::net::client::Client::new(url).map_err(|e| UsageError(e.to_string()))?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let logged = runtime.block_on(rcpt::net::client::submit::submit(
                &client,
                json.into_bytes().into(),
                key,
            ))?;
            eprintln!(
                "log: {} index {}",
                logged.bundle.log.origin, logged.bundle.log.index
            );
            Ok(String::from_utf8_lossy(&logged.json).into_owned())
        }
    }
}

/// Append one envelope to the log at `dir` (checked as `log append` checks
/// it) and build its bundle at the new size.
fn append(dir: &Path, json: &[u8]) -> anyhow::Result<String> {
    let log = rcpt::log::Log::open(dir)?;
    let key_file = log
        .key_file()
        .map(Path::to_path_buf)
        .context("the log records no key file")?;
    let admitted = rcpt::log::admit::admit(json, log.accepted_issuers()?.as_ref())?;
    drop(log);
    let pem = rcpt::keys::read_key_file(&key_file)?;
    let log_key = rcpt::keys::signing_key_from_pem(&pem)
        .with_context(|| format!("reading the log key {}", key_file.display()))?;
    let mut writer = rcpt::log::LogWriter::open(dir, &log_key, true)?;
    let index = writer
        .append(std::slice::from_ref(&admitted.entry))?
        .first()
        .map(|a| a.index)
        .context("append returned nothing")?;
    drop(writer);
    let log = rcpt::log::Log::open(dir)?;
    let size = log.size();
    let bundle = rcpt::bundle::Bundle {
        receipt_id: admitted.receipt_id.clone(),
        envelope: Envelope::from_entry(&admitted.entry)?,
        log: rcpt::bundle::LogProof {
            origin: log.origin().to_string(),
            index,
            tree_size: size,
            inclusion: log.inclusion_proof(index, size)?,
            checkpoint: log.checkpoint_at(size)?,
        },
    };
    eprintln!("log: {} index {index}", log.origin());
    let mut text = bundle.to_json();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

fn show(source: &Source, store: Option<&Path>) -> anyhow::Result<u8> {
    let bytes = read_input(source, MAX_BUNDLE_BYTES, "receipt")?;
    let envelope = match rcpt::bundle::RawBundle::parse(&bytes) {
        Ok(b) => Envelope::from_json(b.envelope.get().as_bytes())?,
        Err(_) => Envelope::from_json(&bytes)
            .with_context(|| format!("{source} is neither a bundle nor an envelope"))?,
    };
    let (receipt, receipt_id) = rcpt::receipt::receipt_from_cbor(&envelope.payload)?;
    let dir = match store {
        Some(d) => d.to_path_buf(),
        None => {
            // Only the repository is needed: showing works mid-merge too.
            let here = here()?;
            let tree = rcpt::gate::git::WorkTree::discover(&here)
                .map_err(|e| GateError::from(rcpt::gate::change::ChangeError::from(e)))?
                .ok_or_else(|| {
                    GateError::from(rcpt::gate::change::ChangeError::NotAWorkTree(here))
                })?;
            gate::default_store(&tree)
        }
    };
    let store = GateStore::open(&dir)?;
    let gate::Shown {
        id: evidence_id,
        evidence,
        outputs,
    } = gate::show(&store, &receipt, &receipt_id)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "receipt_id: {receipt_id}")?;
    writeln!(out, "verdict: {}", verdict_line(&receipt.verdict))?;
    writeln!(out, "evidence: {evidence_id}")?;
    writeln!(out, "base: {}", evidence.base)?;
    writeln!(out, "change_id: {}", evidence.change_id)?;
    writeln!(out, "policy: {} ({})", evidence.policy, evidence.policy_id)?;
    for (c, (stdout, stderr)) in evidence.checks.iter().zip(&outputs) {
        writeln!(
            out,
            "check {}: {:?} exit {} in {} ms",
            c.name, c.run, c.exit, c.duration_ms
        )?;
        for (label, digest, bytes) in [("stdout", &c.stdout, stdout), ("stderr", &c.stderr, stderr)]
        {
            writeln!(out, "--- {label} ({} bytes, {digest})", bytes.len())?;
            out.write_all(bytes)?;
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                writeln!(out)?;
            }
        }
    }
    writeln!(out, "ok: every object re-hashed")?;
    Ok(EXIT_OK)
}
