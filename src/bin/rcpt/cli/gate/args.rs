//! `rcpt gate`'s command line: the subcommands and their arguments (the
//! engines read them in their own files).

use super::{contract, mcp};
use clap::Subcommand;
use rcpt::io::{Source, Target};
use std::path::PathBuf;

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
    pub(super) policy: PathBuf,
    /// The gate's signing key (PKCS#8 PEM); its name is read from the .vkey beside it.
    #[arg(long, value_name = "GATE.key")]
    pub(super) key: PathBuf,
    /// The issuer name, when no .vkey is beside the key (must match it when one is).
    #[arg(long, value_name = "NAME")]
    pub(super) issuer: Option<String>,
    /// The base revision.
    #[arg(long, default_value = "HEAD", value_name = "REV")]
    pub(super) base: String,
    /// The log the receipt goes to: a directory or s3://BUCKET/PREFIX (appended
    /// to with the key the log records), or a log service's URL (submitted to).
    #[arg(long, value_name = "DIR|S3|URL")]
    pub(super) log: Option<String>,
    #[command(flatten)]
    pub(super) service: ServiceKey,
    /// The store; default .git/rcpt/store of the repository.
    #[arg(long, value_name = "DIR")]
    pub(super) store: Option<PathBuf>,
    /// Write the bundle (with --log) or the envelope here; '-' for standard output.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub(super) out: Option<Target>,
    /// An approval receipt (bundle or envelope) of this change's escalation; repeatable.
    #[arg(long, value_name = "FILE")]
    pub(super) approval: Vec<PathBuf>,
}

/// `rcpt gate approve`.
#[derive(clap::Args)]
pub struct ApproveArgs {
    /// The escalate receipt: a DSSE envelope or a bundle.
    #[arg(value_name = "RECEIPT")]
    pub(super) receipt: Source,
    /// The gate's verifier key (NAME+HASH+KEY): the escalation must be signed by it.
    #[arg(
        long,
        value_name = "VKEY",
        conflicts_with = "gate_key_file",
        required_unless_present = "gate_key_file"
    )]
    pub(super) gate_key: Option<String>,
    /// File holding the gate's verifier key (its .vkey).
    #[arg(long, value_name = "FILE")]
    pub(super) gate_key_file: Option<PathBuf>,
    /// Refuse instead of approving (the change is then denied).
    #[arg(long, requires = "reason")]
    pub(super) deny: bool,
    /// The refusal's reason (1 to 64 of a-z 0-9 . _ -), with --deny.
    #[arg(long, value_name = "R", requires = "deny")]
    pub(super) reason: Option<String>,
    /// The approver's signing key (PKCS#8 PEM); its name is read from the .vkey beside it.
    #[arg(long, value_name = "APPROVER.key")]
    pub(super) key: PathBuf,
    /// The approver's name, when no .vkey is beside the key (must match it when one is).
    #[arg(long, value_name = "NAME")]
    pub(super) issuer: Option<String>,
    /// The log the approval goes to: a directory or s3://BUCKET/PREFIX (appended
    /// to with the key the log records), or a log service's URL (submitted to).
    #[arg(long, value_name = "DIR|S3|URL")]
    pub(super) log: Option<String>,
    #[command(flatten)]
    pub(super) service: ServiceKey,
    /// The store to keep the approval in, where gate check|apply of that store find it;
    /// default .git/rcpt/store of the repository here (none outside a repository).
    #[arg(long, value_name = "DIR")]
    pub(super) store: Option<PathBuf>,
    /// Write the bundle (with --log) or the envelope here; '-' for standard output.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub(super) out: Option<Target>,
}

/// `rcpt gate rules`.
#[derive(clap::Args)]
pub struct RulesArgs {
    /// The rules module (Rego, package rcpt).
    #[arg(value_name = "RULES", required_unless_present = "evaluator")]
    pub(super) rules: Option<PathBuf>,
    /// The input document (JSON; '-' for standard input).
    #[arg(long, value_name = "FILE", required_unless_present = "evaluator")]
    pub(super) input: Option<Source>,
    /// Be the confined evaluator process the gate starts (one request on standard input).
    #[arg(long, hide = true, conflicts_with_all = ["rules", "input"])]
    pub(super) evaluator: bool,
}

/// `rcpt gate apply`.
#[derive(clap::Args)]
pub struct ApplyArgs {
    /// The patch (git diff or git format-patch output).
    #[arg(value_name = "PATCH")]
    pub(super) patch: PathBuf,
    /// The policy file (JSON).
    #[arg(long, value_name = "FILE")]
    pub(super) policy: PathBuf,
    /// An approval receipt (bundle or envelope) of this change's escalation; repeatable.
    #[arg(long, value_name = "FILE")]
    pub(super) approval: Vec<PathBuf>,
    #[command(flatten)]
    pub(super) issue: IssueArgs,
}

/// `rcpt gate undo`.
#[derive(clap::Args)]
pub struct UndoArgs {
    /// The receipt to undo: a DSSE envelope or a bundle.
    #[arg(value_name = "RECEIPT")]
    pub(super) receipt: Source,
    #[command(flatten)]
    pub(super) issue: IssueArgs,
    /// A tool-proxy receipt (`rcpt gate mcp`): the roots its files lie under (repeatable).
    #[arg(long, value_name = "DIR")]
    pub(super) root: Vec<PathBuf>,
}

/// What issuing a receipt takes (apply, undo).
#[derive(clap::Args)]
pub struct IssueArgs {
    /// The gate's signing key (PKCS#8 PEM); its name is read from the .vkey beside it.
    #[arg(long, value_name = "GATE.key")]
    pub(super) key: PathBuf,
    /// The issuer name, when no .vkey is beside the key (must match it when one is).
    #[arg(long, value_name = "NAME")]
    pub(super) issuer: Option<String>,
    /// The log the receipt goes to: a directory or s3://BUCKET/PREFIX (appended
    /// to with the key the log records), or a log service's URL (submitted to).
    #[arg(long, value_name = "DIR|S3|URL")]
    pub(super) log: Option<String>,
    #[command(flatten)]
    pub(super) service: ServiceKey,
    /// The store; default .git/rcpt/store of the repository.
    #[arg(long, value_name = "DIR")]
    pub(super) store: Option<PathBuf>,
    /// Write the bundle (with --log) or the envelope here; '-' for standard output.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub(super) out: Option<Target>,
}

/// The key of a log service that `--log URL` submits to (check, approve,
/// apply, undo, mcp).
#[derive(clap::Args, Default)]
pub struct ServiceKey {
    /// The log service's verifier key (with --log URL).
    #[arg(long, value_name = "VKEY", conflicts_with = "log_key_file")]
    pub(super) log_key: Option<String>,
    /// File holding the log service's verifier key (with --log URL).
    #[arg(long, value_name = "FILE")]
    pub(super) log_key_file: Option<PathBuf>,
}
