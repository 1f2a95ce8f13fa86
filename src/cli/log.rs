//! `rcpt log`: write and read a transparency log. STUB (helper D).

use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum LogCommand {
    /// Create an empty log.
    Init {
        dir: PathBuf,
        #[arg(long)]
        origin: String,
        #[arg(long)]
        key: PathBuf,
    },
    /// Append envelopes (.json files, or '-' for JSON Lines on stdin).
    Append {
        dir: PathBuf,
        #[arg(long)]
        key: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Print the latest checkpoint.
    Checkpoint { dir: PathBuf },
    /// Write the proof bundle of one receipt.
    Prove {
        dir: PathBuf,
        #[arg(long, conflicts_with = "receipt", required_unless_present = "receipt")]
        index: Option<u64>,
        #[arg(long)]
        receipt: Option<PathBuf>,
        #[arg(long)]
        size: Option<u64>,
        #[arg(short = 'o', long = "out")]
        out: Option<PathBuf>,
    },
    /// Print a consistency proof between two tree sizes.
    Consistency {
        dir: PathBuf,
        #[arg(long)]
        from: u64,
        #[arg(long)]
        to: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Recompute every tile and the root; verify the checkpoint.
    Check { dir: PathBuf },
}

pub fn run(cmd: LogCommand) -> anyhow::Result<u8> {
    let _ = cmd;
    anyhow::bail!("not implemented")
}
