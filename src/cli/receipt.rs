//! `rcpt receipt`: issue and inspect receipts. STUB (helper A).

use clap::Subcommand;

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
}

pub fn run(cmd: ReceiptCommand) -> anyhow::Result<u8> {
    let _ = cmd;
    anyhow::bail!("not implemented")
}
