//! `rcpt key`: generate and show keys. STUB (helper B).

use clap::Subcommand;

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Write PREFIX.key (PKCS#8 PEM, mode 0600) and PREFIX.pub (SPKI PEM).
    Generate {
        /// Key name (for a log key: the log's origin).
        #[arg(long)]
        name: String,
        /// Output path prefix.
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Print the keyid of a .key or .pub file (and the verifier key with --name).
    Show {
        /// A .key or .pub PEM file.
        file: std::path::PathBuf,
        /// Key name, for the verifier key.
        #[arg(long)]
        name: Option<String>,
    },
}

pub fn run(cmd: KeyCommand) -> anyhow::Result<u8> {
    let _ = cmd;
    anyhow::bail!("not implemented")
}
