//! cli: argument parsing and dispatch. One file per subcommand; each
//! returns an exit status or an error, and only [`main`] prints errors and
//! picks the exit status.
//!
//! One rule for `-` (spec/security.md "Inputs and outputs"): as an input it
//! is standard input, as an output (`-o -`) standard output; a file named
//! `-` is spelled `./-`. Standard input can be read once per command.

use anyhow::Context as _;
use clap::Parser;
use rcpt::io::{Source, Target};
use std::io::Write;
use std::process::ExitCode;

mod command;
mod corpus;
mod exit;
mod gate;
mod inputs;
mod key;
mod keyarg;
mod log;
mod man;
mod receipt;
mod template;
mod trust;
mod units;
mod verify;
mod witness;

use command::{Cli, Command};
pub use exit::{
    EXIT_ESCALATED, EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, EXIT_USAGE, StdinTwice, UsageError,
    render_error, usage,
};
use exit::{exit_status_of, is_broken_pipe};
use man::{completions, man};

/// `--format` of the commands that print a line per input (`log append`,
/// `log submit`, `log consistency`, `receipt inspect`): `human`, or `json`
/// (JSON; one object a line). The old spelling `--json` is kept, hidden.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LineFormat {
    /// Lines for people (`log consistency`: the text form, a hash a line).
    #[value(alias = "text")]
    Human,
    /// JSON: one object a line.
    Json,
}

/// A command of the `net` feature, called in a build without it: hidden,
/// it takes any arguments (`--help` too) and says what this build lacks,
/// rather than clap's "did you mean" another command.
#[cfg(not(feature = "net"))]
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct WithoutNet {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<String>,
}

#[cfg(not(feature = "net"))]
impl WithoutNet {
    /// The bad invocation: `command` (e.g. "log serve") is not in this build.
    pub fn refuse(&self, command: &str) -> anyhow::Result<u8> {
        Err(UsageError(format!(
            "this build has no `rcpt {command}` (built without the net feature: \
             cargo build --features net)"
        ))
        .into())
    }
}

/// Parse arguments, run the command, print any error, pick the exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and --version go to stdout as clap writes them; a usage
        // error carries the `rcpt: ` prefix of every other error.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(EXIT_OK);
        }
        Err(e) => {
            let _ = write!(std::io::stderr(), "rcpt: {}", e.render());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result = match cli.command {
        Command::Key(cmd) => key::run(cmd),
        Command::Receipt(cmd) => receipt::run(cmd),
        Command::Log(cmd) => log::run(cmd),
        Command::Verify(args) => verify::run(*args),
        Command::Trust(cmd) => trust::run(cmd),
        Command::Completions { shell } => completions(shell),
        Command::Man { command } => man(&command),
        Command::Witness(cmd) => witness::run(cmd),
        Command::Gate(cmd) => gate::run(cmd),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // A closed standard output (`rcpt verify ... | head -1`) is not a
        // failed check: stop quietly.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_OK),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "rcpt: error: {}", render_error(&e));
            ExitCode::from(exit_status_of(&e))
        }
    }
}

/// Refuse a command line that names standard input more than once.
pub fn stdin_at_most_once<'a>(sources: impl IntoIterator<Item = &'a Source>) -> anyhow::Result<()> {
    let count = sources.into_iter().filter(|s| **s == Source::Stdin).count();
    if count > 1 {
        return Err(StdinTwice(count).into());
    }
    Ok(())
}

/// Read an input named on the command line with the capped reader
/// (`-` is standard input). `what` names it in errors.
pub fn read_input(source: &Source, limit: usize, what: &str) -> anyhow::Result<Vec<u8>> {
    rcpt::io::read_capped(source, limit, std::io::stdin().lock())
        .with_context(|| format!("reading the {what}"))
}

/// Write an output file named on the command line (`-` is standard output).
pub fn write_target(target: &Target, bytes: &[u8]) -> anyhow::Result<()> {
    Ok(rcpt::io::write_output(
        target,
        bytes,
        std::io::stdout().lock(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    /// Every command, with its path from `rcpt`.
    fn commands(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let p = format!("{path} {}", sub.get_name());
            commands(sub, p, out);
        }
        out.push((path, cmd.clone()));
    }

    #[test]
    fn every_argument_has_help_and_every_command_an_example() {
        Cli::command().debug_assert();
        let mut all = Vec::new();
        commands(&Cli::command(), "rcpt".into(), &mut all);
        for (path, cmd) in &all {
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                assert!(
                    builtin || arg.get_help().is_some(),
                    "{path}: argument {} has no description",
                    arg.get_id()
                );
            }
            // Leaves and groups alike: `rcpt log --help` ends with examples too.
            if cmd.get_name() != "help" {
                let after = cmd
                    .get_after_help()
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                assert!(
                    after.contains("Example") && after.contains("rcpt "),
                    "{path}: help ends with no example"
                );
            }
        }
    }
}
