//! cli: argument parsing and dispatch. One file per subcommand; each
//! returns an exit status or an error, and only [`main`] prints errors and
//! picks the exit status.
//!
//! One rule for `-` (spec/security.md "Inputs and outputs"): as an input it
//! is standard input, as an output (`-o -`) standard output; a file named
//! `-` is spelled `./-`. Standard input can be read once per command.

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, Subcommand};
use rcpt::io::{InputError, OutputError, Source, Target};
use std::io::Write;
use std::process::ExitCode;

mod corpus;
mod gate;
mod key;
mod keyarg;
mod log;
mod receipt;
mod template;
mod trust;
mod units;
mod verify;
mod witness;

/// Exit status: success.
pub const EXIT_OK: u8 = 0;
/// Exit status: a check failed, an input was refused, or an operation failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad invocation.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: nothing failed, but something could not be evaluated.
pub const EXIT_NOT_EVALUATED: u8 = 3;
/// Exit status of `rcpt gate check|apply`: the change is escalated (an
/// approval is needed; nothing was applied).
pub const EXIT_ESCALATED: u8 = 4;

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

/// An error in how the command was called (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

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

/// Standard input named more than once in one command.
#[derive(Debug, thiserror::Error)]
#[error("standard input ('-') is named {0} times: it can be read once per command")]
pub struct StdinTwice(usize);

#[derive(Parser)]
#[command(
    name = "rcpt",
    version = env!("RCPT_LONG_VERSION"),
    about = "Signed receipts checkable by anyone, offline",
    after_help = "Example:\n  rcpt verify --trust trust.json bundles/*.json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[derive(Subcommand)]
enum Command {
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

/// An error and its causes on one line, `outer: cause: cause`, each cause
/// said once: a cause whose text the message so far already holds (an
/// error whose own text repeats its source, `cannot listen on ADDR: E`
/// over `E`) is not said again.
pub fn render_error(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// The exit status of an error: 2 for a bad invocation (a usage error, or
/// an input named on the command line that does not exist or is not a
/// regular file), else 1.
fn exit_status_of(e: &anyhow::Error) -> u8 {
    let bad_invocation = e.chain().any(|c| {
        c.is::<UsageError>()
            || c.is::<StdinTwice>()
            || c.downcast_ref::<InputError>()
                .is_some_and(InputError::is_bad_path)
            || c.downcast_ref::<rcpt::log::LogError>()
                .is_some_and(rcpt::log::LogError::is_bad_path)
            || c.downcast_ref::<rcpt::log::intake::IntakeError>()
                .is_some_and(rcpt::log::intake::IntakeError::is_bad_invocation)
    });
    if bad_invocation {
        EXIT_USAGE
    } else {
        EXIT_FAILED
    }
}

/// True when the error is a write to a closed pipe.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<OutputError>()
                .is_some_and(OutputError::is_broken_pipe)
    })
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

/// `rcpt completions SHELL`.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "rcpt", &mut out);
    std::io::stdout().lock().write_all(&out)?;
    Ok(EXIT_OK)
}

/// `rcpt man [SUBCOMMAND...]`.
fn man(path: &[String]) -> anyhow::Result<u8> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut name = String::from("rcpt");
    for word in path {
        let sub = cmd
            .find_subcommand(word)
            .cloned()
            .ok_or_else(|| UsageError(format!("`{name}` has no subcommand `{word}`")))?;
        name = format!("{name}-{word}");
        cmd = sub;
    }
    let mut out = Vec::new();
    let source = format!("rcpt {}", env!("CARGO_PKG_VERSION"));
    let page = clap_mangen::Man::new(cmd.clone())
        .title(name)
        .source(source);
    page.render_title(&mut out)?;
    page.render_name_section(&mut out)?;
    page.render_synopsis_section(&mut out)?;
    page.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        page.render_options_section(&mut out)?;
    }
    if cmd.get_subcommands().any(|c| !c.is_hide_set()) {
        page.render_subcommands_section(&mut out)?;
    }
    let after = cmd.get_after_long_help().or(cmd.get_after_help());
    out.extend_from_slice(
        man_after_help(&after.map(ToString::to_string).unwrap_or_default()).as_bytes(),
    );
    out.extend_from_slice(MAN_EXIT_STATUS.as_bytes());
    if cmd.get_version().is_some() {
        page.render_version_section(&mut out)?;
    }
    std::io::stdout().lock().write_all(&out)?;
    Ok(EXIT_OK)
}

/// The EXIT STATUS section of every man page (spec/cli.md "Exit status").
const MAN_EXIT_STATUS: &str = ".SH \"EXIT STATUS\"
.TP
\\fB0\\fR
Everything asked was done, or verified.
.TP
\\fB1\\fR
A check failed, an input was refused, or an operation failed.
.TP
\\fB2\\fR
Bad invocation: an unknown or missing flag, a bad flag value, a named input that does not \
exist or is not a regular file, standard input named twice, a key in the wrong form.
.TP
\\fB3\\fR
Nothing failed, but something could not be evaluated (verify: no trusted key for a signer; \
log submit: the log unreachable, so inputs were not sent). When both 1 and 3 apply, 1 wins.
.TP
\\fB4\\fR
gate check and gate apply: the change is escalated (its receipt is issued, nothing is applied; \
an approver of the policy runs rcpt gate approve).
";

/// Text for roff: backslashes and dashes escaped, no line read as a request.
fn roff_escape(line: &str) -> String {
    let text = line.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text
    }
}

/// A command's after-help as man sections: its prose as NOTES (filled),
/// its `Example:`/`Examples:` lines as EXAMPLES, set without filling so a
/// command is never wrapped in the middle.
fn man_after_help(text: &str) -> String {
    let (notes, examples) = match text.find("Example") {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let mut out = String::new();
    if !notes.trim().is_empty() {
        out.push_str(".SH NOTES\n");
        for paragraph in notes.trim().split("\n\n") {
            out.push_str(".PP\n");
            for line in paragraph.lines() {
                out.push_str(&roff_escape(line.trim()));
                out.push('\n');
            }
        }
    }
    let lines: Vec<&str> = examples
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if !lines.is_empty() {
        out.push_str(".SH EXAMPLES\n.RS 4\n.nf\n");
        for line in lines {
            out.push_str(&roff_escape(line.strip_prefix("  ").unwrap_or(line)));
            out.push('\n');
        }
        out.push_str(".fi\n.RE\n");
    }
    out
}

#[cfg(test)]
mod render_tests {
    #![allow(clippy::unwrap_used)]
    use super::render_error;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot listen on 127.0.0.1:1: {source}")]
    struct Repeats {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        let e = anyhow::Error::new(Repeats { source: io });
        assert_eq!(
            render_error(&e),
            "cannot listen on 127.0.0.1:1: Address already in use"
        );
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(io).context("reading x");
        assert_eq!(render_error(&e), "reading x: no such file");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

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

    #[test]
    fn exit_status_of_errors() {
        let missing = rcpt::io::read_path(std::path::Path::new("/nonexistent/x"), 10).unwrap_err();
        assert!(missing.is_bad_path());
        let e = anyhow::Error::new(missing).context("reading the bundle");
        assert_eq!(exit_status_of(&e), EXIT_USAGE);
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(is_broken_pipe(&anyhow::Error::new(pipe).context("writing")));
        assert_eq!(exit_status_of(&anyhow::anyhow!("x")), EXIT_FAILED);
    }
}
