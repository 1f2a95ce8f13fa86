//! `rcpt log`: write and read a transparency log.
//!
//! The library (`rcpt::log`) owns the files and their durability; the
//! subcommands read inputs, call it and print what happened. This file
//! dispatches: the command line is `args` (and each command's own
//! arguments in its file), the store a command names is `store`, and one
//! file per subcommand does the rest (`append`, `init`, `inspect`,
//! `prove`, `serve`, `submit`, `mirror`, `monitor`, `ack`).

mod ack;
mod append;
mod args;
mod init;
mod inspect;
#[cfg(feature = "net")]
mod mirror;
mod monitor;
mod progress;
mod prove;
#[cfg(feature = "net")]
mod serve;
mod store;
#[cfg(feature = "net")]
mod submit;

use crate::cli::{EXIT_OK, UsageError};
use rcpt::log::Log;
use rcpt::log::intake::Location;
use std::io::Write as _;

pub use args::LogCommand;
pub(crate) use store::{endpoint_from_env, s3_hint};

use append::{AppendOptions, append};
use init::init;
use inspect::{check, consistency};

/// `rcpt log checkpoint`: the latest signed checkpoint, as stored.
fn print_checkpoint(log: &Log) -> anyhow::Result<u8> {
    write!(std::io::stdout().lock(), "{}", log.checkpoint())?;
    Ok(EXIT_OK)
}

/// `rcpt log append LOG FILES`: a directory or bucket through its intake,
/// a service's URL submitted to.
fn run_append(cmd: LogCommand) -> anyhow::Result<u8> {
    let LogCommand::Append {
        dir,
        key,
        trust,
        format,
        json,
        wait,
        batch,
        files,
        at,
        log_key,
        log_key_file,
    } = cmd
    else {
        return run(cmd);
    };
    let json = json || format == crate::cli::LineFormat::Json;
    if let Location::Service(url) = Location::of_path(&dir) {
        return append_to_service(url, files, log_key, log_key_file, json);
    }
    let opts = AppendOptions {
        key,
        trust,
        json,
        wait,
        max_batch: batch as usize,
    };
    append(&dir, &at.store(&dir)?, &opts, &files)
}

/// `rcpt log append URL`: submitted to the service, as `rcpt log submit` does.
#[cfg(feature = "net")]
fn append_to_service(
    url: String,
    files: Vec<String>,
    log_key: Option<String>,
    log_key_file: Option<std::path::PathBuf>,
    json: bool,
) -> anyhow::Result<u8> {
    if log_key.is_none() && log_key_file.is_none() {
        let msg = format!(
            "{}: a log service's answers are checked under its key: pass --log-key VKEY or \
             --log-key-file FILE",
            rcpt::text::Escaped(&url)
        );
        return Err(UsageError(msg).into());
    }
    submit::submit(submit::SubmitArgs::for_append(
        url,
        files,
        log_key,
        log_key_file,
        json,
    ))
}

/// Without `net` there is no HTTP client: a service's URL is refused.
#[cfg(not(feature = "net"))]
fn append_to_service(
    url: String,
    _: Vec<String>,
    _: Option<String>,
    _: Option<std::path::PathBuf>,
    _: bool,
) -> anyhow::Result<u8> {
    Err(UsageError(format!(
        "{}: a log service is reached over HTTP, and this rcpt is built without feature \
         `net`; give a log directory (object storage needs `net` too)",
        rcpt::text::Escaped(&url)
    ))
    .into())
}

pub fn run(cmd: LogCommand) -> anyhow::Result<u8> {
    match cmd {
        LogCommand::Init {
            dir,
            origin,
            key,
            trust,
            at,
        } => init(&dir, &at, &origin, &key, trust.as_deref()),
        append @ LogCommand::Append { .. } => run_append(append),
        LogCommand::Checkpoint { dir, key } => print_checkpoint(&key.open(&dir)?),
        LogCommand::Prove(args) => prove::run_prove(args),
        LogCommand::Consistency {
            dir,
            from,
            to,
            format,
            json,
            key,
        } => {
            let json = json || format == crate::cli::LineFormat::Json;
            consistency(&key.open(&dir)?, from, to, json)
        }
        LogCommand::Check { dir, key } => check(&key.open(&dir)?),
        #[cfg(feature = "net")]
        LogCommand::Serve(args) => serve::serve(args),
        #[cfg(feature = "net")]
        LogCommand::Submit(args) => submit::submit(args),
        #[cfg(feature = "net")]
        LogCommand::Mirror(args) => mirror::mirror(args),
        #[cfg(not(feature = "net"))]
        LogCommand::Serve(w) => w.refuse("log serve"),
        #[cfg(not(feature = "net"))]
        LogCommand::Submit(w) => w.refuse("log submit"),
        #[cfg(not(feature = "net"))]
        LogCommand::Mirror(w) => w.refuse("log mirror"),
        LogCommand::Monitor(args) => monitor::run(*args),
    }
}
