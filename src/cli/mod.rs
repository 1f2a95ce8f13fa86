//! cli: argument parsing and dispatch. One file per subcommand; each
//! returns an exit status or an error, and only [`main`] prints errors.

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

mod key;
mod log;
mod receipt;
#[cfg(feature = "net")]
mod serve;
mod verify;

/// Exit status: success.
pub const EXIT_OK: u8 = 0;
/// Exit status: a check failed, an input was refused, or an operation failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad invocation.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: nothing failed, but something could not be evaluated.
pub const EXIT_NOT_EVALUATED: u8 = 3;

/// An error in how the command was called (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

#[derive(Parser)]
#[command(
    name = "rcpt",
    version,
    about = "Signed receipts checkable by anyone, offline"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate and show Ed25519 keys.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Issue and inspect receipts.
    #[command(subcommand)]
    Receipt(receipt::ReceiptCommand),
    /// Write and read a transparency log.
    #[command(subcommand)]
    Log(log::LogCommand),
    /// Verify receipt bundles offline.
    Verify(verify::VerifyArgs),
}

/// Parse arguments, run the command, print any error, pick the exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let result = match cli.command {
        Command::Key(cmd) => key::run(cmd),
        Command::Receipt(cmd) => receipt::run(cmd),
        Command::Log(cmd) => log::run(cmd),
        Command::Verify(args) => verify::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "rcpt: error: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::from(EXIT_FAILED)
            }
        }
    }
}
