//! `rcpt gate`: receipts from a git work tree (spec/gate.md).
//!
//! `id` prints the change's identity; `check` runs the policy's checks in
//! a clean copy and issues the receipt (exit 0 admit, 1 deny, 3 no
//! verdict, 2 bad invocation); `show` prints a receipt's evidence from the
//! store, re-hashing every object.

use crate::cli::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError};
use anyhow::Context as _;
use clap::Subcommand;
use rcpt::gate::{self, GateError};
use rcpt::io::{Source, Target};
use rcpt::log::intake::{self, Intake, Location, StoreSettings};
use rcpt::receipt::Verdict;
use rcpt::receipt::dsse::Envelope;
use rcpt::storage::Store;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod apply;
mod approve;
mod check;
mod contract;
mod mcp;
mod rules;
mod show;

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
    /// Run the policy's checks on the change in a clean copy and issue the receipt.
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
    /// Approve (or refuse) an escalated change: an approval receipt by the approver's key.
    #[command(
        after_help = "Example:\n  rcpt gate approve escalated.json --key alice.key --gate-key-file gate.vkey -o approval.json\n\
        Exit status: 0 the approval (or refusal) issued, 1 refused (not an escalation \
        signed by the gate key), 2 bad invocation, 3 not evaluated."
    )]
    Approve(Box<ApproveArgs>),
    /// Evaluate a rules module (Rego, package rcpt) against an input, as the gate does.
    #[command(
        after_help = "Example:\n  rcpt gate rules gate.rego --input input.json\n\
        Prints {\"deny\": [...], \"escalate\": [...]}. Exit status: 0 evaluated, \
        2 the module is refused, 3 not evaluated (an error, a budget, the deadline)."
    )]
    Rules(RulesArgs),
    /// Gate an agent's tool calls: an MCP proxy that issues a receipt for every step (spec/gate-mcp.md).
    #[command(
        after_help = "Example:\n  rcpt gate mcp --policy agent.json --key gate.key --store .rcpt-store --root /work --log log/ \\\n      -- npx @modelcontextprotocol/server-filesystem /work"
    )]
    Mcp(Box<mcp::McpArgs>),
    /// The contracts of demonstrated runs: list, show, unbind, rebind, cancel a recording.
    #[command(
        after_help = "Example:\n  rcpt gate contract list --contracts contracts/\n  rcpt gate contract rebind deploy --contracts contracts/"
    )]
    Contract(contract::ContractArgs),
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
    /// The log the receipt goes to: a directory or s3://BUCKET/PREFIX (appended
    /// to with the key the log records), or a log service's URL (submitted to).
    #[arg(long, value_name = "DIR|S3|URL")]
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
    /// An approval receipt (bundle or envelope) of this change's escalation; repeatable.
    #[arg(long, value_name = "FILE")]
    approval: Vec<PathBuf>,
}

/// `rcpt gate approve`.
#[derive(clap::Args)]
pub struct ApproveArgs {
    /// The escalate receipt: a DSSE envelope or a bundle.
    #[arg(value_name = "RECEIPT")]
    receipt: Source,
    /// The gate's verifier key (NAME+HASH+KEY): the escalation must be signed by it.
    #[arg(
        long,
        value_name = "VKEY",
        conflicts_with = "gate_key_file",
        required_unless_present = "gate_key_file"
    )]
    gate_key: Option<String>,
    /// File holding the gate's verifier key (its .vkey).
    #[arg(long, value_name = "FILE")]
    gate_key_file: Option<PathBuf>,
    /// Refuse instead of approving (the change is then denied).
    #[arg(long, requires = "reason")]
    deny: bool,
    /// The refusal's reason (1 to 64 of a-z 0-9 . _ -), with --deny.
    #[arg(long, value_name = "R", requires = "deny")]
    reason: Option<String>,
    /// The approver's signing key (PKCS#8 PEM); its name is read from the .vkey beside it.
    #[arg(long, value_name = "APPROVER.key")]
    key: PathBuf,
    /// The approver's name, when no .vkey is beside the key (must match it when one is).
    #[arg(long, value_name = "NAME")]
    issuer: Option<String>,
    /// The log the approval goes to: a directory or s3://BUCKET/PREFIX (appended
    /// to with the key the log records), or a log service's URL (submitted to).
    #[arg(long, value_name = "DIR|S3|URL")]
    log: Option<String>,
    /// The log service's verifier key (with --log URL).
    #[arg(long, value_name = "VKEY", conflicts_with = "log_key_file")]
    log_key: Option<String>,
    /// File holding the log service's verifier key (with --log URL).
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<PathBuf>,
    /// The store to keep the approval in, where gate check|apply of that store find it;
    /// default .git/rcpt/store of the repository here (none outside a repository).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Write the bundle (with --log) or the envelope here; '-' for standard output.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<Target>,
}

/// `rcpt gate rules`.
#[derive(clap::Args)]
pub struct RulesArgs {
    /// The rules module (Rego, package rcpt).
    #[arg(value_name = "RULES", required_unless_present = "evaluator")]
    rules: Option<PathBuf>,
    /// The input document (JSON; '-' for standard input).
    #[arg(long, value_name = "FILE", required_unless_present = "evaluator")]
    input: Option<Source>,
    /// Be the confined evaluator process the gate starts (one request on standard input).
    #[arg(long, hide = true, conflicts_with_all = ["rules", "input"])]
    evaluator: bool,
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
    /// An approval receipt (bundle or envelope) of this change's escalation; repeatable.
    #[arg(long, value_name = "FILE")]
    approval: Vec<PathBuf>,
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
    /// The log the receipt goes to: a directory or s3://BUCKET/PREFIX (appended
    /// to with the key the log records), or a log service's URL (submitted to).
    #[arg(long, value_name = "DIR|S3|URL")]
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
    // Each command recovers an interrupted apply or undo once: apply and
    // undo under the store lock they hold (apply.rs), the others here.
    let result = match cmd {
        GateCommand::Id { base, json } => recover(None).and_then(|()| id(&base, json)),
        GateCommand::Check(args) => {
            recover(args.store.as_deref()).and_then(|()| check::check(&args))
        }
        GateCommand::Approve(args) => approve::approve(&args),
        GateCommand::Apply(args) => apply::apply(&args),
        GateCommand::Rules(args) => rules::run(&args),
        // A tool-proxy receipt is undone under its roots; the undo
        // recovers the store's journal under its own lock (mcp/undo.rs).
        GateCommand::Undo(args) if mcp::is_tool_proxy_undo(&args) => mcp::undo(&args),
        GateCommand::Undo(args) => apply::undo(&args),
        GateCommand::Mcp(args) => {
            recover(mcp::store_of(&args).as_deref()).and_then(|()| mcp::run(*args))
        }
        GateCommand::Contract(args) => contract::run(&args),
        GateCommand::Show { receipt, store } => {
            recover(store.as_deref()).and_then(|()| show::show(&receipt, store.as_deref()))
        }
    };
    // No verdict is exit 3, a bad invocation exit 2, a refusal to write
    // exit 1; each says why.
    result.or_else(|e| match e.downcast_ref::<GateError>() {
        Some(g) if g.is_usage() => Err(UsageError(format!("{e:#}")).into()),
        Some(g) if g.is_refusal() => {
            let _ = writeln!(std::io::stderr(), "rcpt: error: {e:#}");
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
            Ok(Some(tree)) => gate::store::default_dir(&tree),
            _ => return Ok(()),
        },
    };
    match gate::journal::recover_at(&dir).map_err(GateError::from)? {
        Some(r) => report_recovered(&r),
        None => Ok(()),
    }
}

/// Say what a recovery did, on standard error.
pub(super) fn report_recovered(r: &gate::journal::Recovered) -> anyhow::Result<()> {
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
    /// A log's store (a directory or `s3://BUCKET/PREFIX`): appended to
    /// through its intake, with the key the log records.
    Store(Arc<dyn Store>),
    /// A log service: submitted to, the answer checked under its key.
    #[cfg(feature = "net")]
    Url(String, Box<rcpt::keys::NoteVerifier>),
}

pub(super) fn log_target(args: &CheckArgs) -> anyhow::Result<Option<LogTarget>> {
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
    let location = Location::parse(log);
    if location.is_service() {
        return service_target(log, log_key, log_key_file).map(Some);
    }
    let store = location
        .store(&StoreSettings::default())
        .map_err(crate::cli::log::endpoint_from_env)?;
    // Refuse a log that cannot take the receipt before any check runs.
    intake::probe(Arc::clone(&store))?;
    Ok(Some(LogTarget::Store(store)))
}

/// A log service's URL and its key (`--log-key`, `--log-key-file`).
#[cfg(feature = "net")]
fn service_target(
    url: &str,
    log_key: &Option<String>,
    log_key_file: &Option<PathBuf>,
) -> anyhow::Result<LogTarget> {
    let text = match (log_key, log_key_file) {
        (Some(t), None) => t.clone(),
        (None, Some(f)) => String::from_utf8_lossy(&crate::cli::read_input(
            &Source::Path(f.clone()),
            rcpt::limits::MAX_KEY_FILE_BYTES,
            "log key file",
        )?)
        .into_owned(),
        _ => {
            let msg = "--log URL needs the log's key: --log-key VKEY or --log-key-file FILE";
            return Err(UsageError(msg.into()).into());
        }
    };
    let key = rcpt::keys::NoteVerifier::parse(&text)
        .map_err(|e| UsageError(format!("--log-key: {e}")))?;
    Ok(LogTarget::Url(url.to_string(), Box::new(key)))
}

/// Without `net` there is no HTTP client: a service's URL is refused.
#[cfg(not(feature = "net"))]
fn service_target(url: &str, _: &Option<String>, _: &Option<PathBuf>) -> anyhow::Result<LogTarget> {
    Err(UsageError(no_net(url)).into())
}

/// The refusal of a log service's URL by a build without `net`.
#[cfg(not(feature = "net"))]
pub(super) fn no_net(url: &str) -> String {
    format!(
        "--log {}: a log service is reached over HTTP, and this rcpt is built without \
         feature `net`; give a log directory (object storage needs `net` too)",
        rcpt::text::Escaped(url)
    )
}

/// A verdict for a person: its reasons, ticket or proof are the
/// receipt's text, escaped (`rcpt::text`).
pub(super) fn verdict_line(v: &Verdict) -> String {
    use rcpt::text::Escaped;
    match v {
        Verdict::Admit { proof } => format!("admit (proof {proof})"),
        Verdict::Deny { reasons } => format!("deny ({})", Escaped(&reasons.join(", "))),
        Verdict::Escalate { ticket } => format!("escalate (ticket {})", Escaped(ticket)),
    }
}

/// Hand the envelope to the log: through its intake (a directory or a
/// bucket), or submitted to a service; the bundle JSON.
pub(super) fn publish(target: &LogTarget, envelope: &Envelope) -> anyhow::Result<String> {
    let json = envelope.to_json();
    match target {
        LogTarget::Store(store) => {
            let mut intake = Intake::open(Arc::clone(store), intake::Options::recorded(true))?;
            let bundle = intake.append_for_bundle(json.as_bytes())?;
            let origin = rcpt::text::Escaped(&bundle.log.origin);
            eprintln!("log: {origin} index {}", bundle.log.index);
            let mut text = bundle.to_json();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            Ok(text)
        }
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
                rcpt::text::Escaped(&logged.bundle.log.origin),
                logged.bundle.log.index
            );
            Ok(String::from_utf8_lossy(&logged.json).into_owned())
        }
    }
}
