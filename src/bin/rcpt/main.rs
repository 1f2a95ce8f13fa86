//! The `rcpt` command. `main` is the only place that prints errors and
//! picks the exit status.

use std::process::ExitCode;

mod cli;

fn main() -> ExitCode {
    cli::main()
}
