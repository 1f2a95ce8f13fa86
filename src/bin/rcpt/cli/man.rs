//! man: `rcpt man` (a page per command, with its notes, examples and
//! exit statuses) and `rcpt completions`.

use super::command::Cli;
use super::{EXIT_OK, UsageError};
use clap::CommandFactory as _;
use std::io::Write;

/// `rcpt completions SHELL`.
pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "rcpt", &mut out);
    std::io::stdout().lock().write_all(&out)?;
    Ok(EXIT_OK)
}

/// `rcpt man [SUBCOMMAND...]`.
pub(super) fn man(path: &[String]) -> anyhow::Result<u8> {
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
