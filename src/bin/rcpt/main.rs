//! The `rcpt` command. `main` is the only place that prints errors and
//! picks the exit status.

// No function of the binary over 80 lines (clippy.toml sets the threshold).
#![deny(clippy::too_many_lines)]

use std::process::ExitCode;

mod cli;

fn main() -> ExitCode {
    cli::main()
}
