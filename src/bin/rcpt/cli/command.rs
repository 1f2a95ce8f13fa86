//! command: the command line of `rcpt`, its subcommands as clap parses them.

use super::{gate, key, log, receipt, trust, verify, witness};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rcpt",
    version = env!("RCPT_LONG_VERSION"),
    about = "Signed receipts checkable by anyone, offline",
    after_help = "Example:\n  rcpt verify --trust trust.json bundles/*.json"
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[derive(Subcommand)]
pub(super) enum Command {
    /// Generate and show Ed25519 keys.
    #[command(
        subcommand,
        after_help = "Examples:\n  rcpt key generate --name gate.example/ci --prefix gate\n  \
        rcpt key show gate.pub --name gate.example/ci --format vkey"
    )]
    Key(key::KeyCommand),
    /// Issue and inspect receipts.
    #[command(
        subcommand,
        after_help = "Examples:\n  rcpt receipt template --issuer gate.example/ci > payload.json\n  \
        rcpt receipt issue --key gate.key -o receipt.json payload.json\n  \
        rcpt receipt inspect receipt.json"
    )]
    Receipt(receipt::ReceiptCommand),
    /// Write and read a transparency log.
    #[command(
        subcommand,
        after_help = "Examples:\n  rcpt log init ./log --origin log.example/receipts --key logkey.key\n  \
        rcpt log append ./log receipt.json\n  \
        rcpt log prove ./log --receipt receipt.json -o bundle.json\n  \
        rcpt log check ./log"
    )]
    Log(log::LogCommand),
    /// Verify receipt bundles offline.
    Verify(Box<verify::VerifyArgs>),
    /// Write trust files (the keys a verifier trusts).
    #[command(
        subcommand,
        after_help = "Example:\n  rcpt trust new --issuer gate.vkey --log logkey.vkey -o trust.json"
    )]
    Trust(trust::TrustCommand),
    /// Print a shell completion script.
    #[command(
        after_help = "Example:\n  rcpt completions bash > ~/.local/share/bash-completion/completions/rcpt"
    )]
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff): rcpt(1), or a subcommand's, e.g. rcpt-log-append(1).
    #[command(
        after_help = "Examples:\n  rcpt man > rcpt.1 && man ./rcpt.1\n  rcpt man log append > rcpt-log-append.1"
    )]
    Man {
        /// The subcommand whose page to print (nothing for rcpt(1)).
        #[arg(value_name = "SUBCOMMAND")]
        command: Vec<String>,
    },
    /// Witness logs: cosign checkpoints that extend the last one cosigned.
    #[command(
        subcommand,
        after_help = "Examples:\n  rcpt witness init wdir --name witness.example/w1 --key w1.key --policy logs.policy\n  \
        rcpt witness serve wdir --listen 127.0.0.1:8081"
    )]
    Witness(witness::WitnessCommand),
    /// Receipts from a git work tree: the change's id, checks in a clean copy, evidence.
    #[command(
        subcommand,
        after_help = "Examples:\n  rcpt gate id\n  \
        rcpt gate check --policy gate.json --key gate.key --log ./log -o bundle.json\n  \
        rcpt gate show bundle.json"
    )]
    Gate(gate::GateCommand),
}
