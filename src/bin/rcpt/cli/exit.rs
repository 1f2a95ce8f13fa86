//! exit: errors mapped to exit statuses, in one place (spec/cli.md "Exit
//! status"), and an error said on one line.

use rcpt::io::{InputError, OutputError};

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

/// An error in how the command was called (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A bad invocation (exit 2) with a cause of its own: `what` is said first
/// and the cause kept beneath it as a typed source, never flattened into
/// the text (the error's chain prints both).
pub fn usage(what: impl std::fmt::Display, cause: impl Into<anyhow::Error>) -> anyhow::Error {
    cause.into().context(UsageError(what.to_string()))
}

/// Standard input named more than once in one command.
#[derive(Debug, thiserror::Error)]
#[error("standard input ('-') is named {0} times: it can be read once per command")]
pub struct StdinTwice(pub(super) usize);

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
pub(super) fn exit_status_of(e: &anyhow::Error) -> u8 {
    // A context of `usage` is found by downcasting the error itself.
    let bad_invocation = e.downcast_ref::<UsageError>().is_some()
        || e.chain().any(|c| {
            c.is::<UsageError>()
                || c.is::<StdinTwice>()
                || c.downcast_ref::<InputError>()
                    .is_some_and(InputError::is_bad_path)
                || c.downcast_ref::<rcpt::log::LogError>()
                    .is_some_and(rcpt::log::LogError::is_bad_path)
                || c.downcast_ref::<rcpt::mcp::contract::ContractError>()
                    .is_some_and(rcpt::mcp::contract::ContractError::is_usage)
                || c.downcast_ref::<rcpt::mcp::learn::LearnError>()
                    .is_some_and(rcpt::mcp::learn::LearnError::is_usage)
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
pub(super) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<OutputError>()
                .is_some_and(OutputError::is_broken_pipe)
    })
}

#[cfg(test)]
mod render_tests {
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
    use super::*;

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
