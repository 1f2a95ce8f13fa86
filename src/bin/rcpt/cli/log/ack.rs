//! `rcpt log monitor ack`: close open alarms of a monitor's state
//! (spec/monitor.md "Alarms"); the library (`rcpt::monitor::alarms`) keeps
//! them and the acks.

use crate::cli::{EXIT_OK, UsageError};
use rcpt::monitor::AckError;
use rcpt::monitor::alarms::{Which, acknowledge, utc};
use rcpt::text::Escaped;
use std::io::Write as _;
use std::path::PathBuf;

/// `rcpt log monitor ack` arguments.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["all", "ids"])))]
#[command(
    after_help = "Acks are kept in DIR/acks/ (never removed): when, who, the note and the ids.

Examples:
  rcpt log monitor ack --state mon/ 3f9c0d2a71b4e856 --note \"rogue key revoked, INC-42\"
  rcpt log monitor ack --state mon/ --all --note \"reviewed after the migration\""
)]
pub struct AckArgs {
    /// The monitor's state directory.
    #[arg(long, value_name = "DIR")]
    state: PathBuf,
    /// Every alarm open now.
    #[arg(long, conflicts_with = "ids")]
    all: bool,
    /// Why they are closed (kept with the ack).
    #[arg(long, value_name = "TEXT")]
    note: String,
    /// The ids of the alarms to close (as the monitor prints them).
    #[arg(value_name = "EVENT-ID")]
    ids: Vec<String>,
}

/// The user running the command, as the ack records it.
fn who() -> String {
    let uid = rustix::process::getuid().as_raw();
    let name = ["USER", "LOGNAME"]
        .into_iter()
        .find_map(|v| std::env::var(v).ok().filter(|n| !n.is_empty()));
    match name {
        Some(n) => format!("{n} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// `rcpt log monitor ack`.
pub fn run(args: AckArgs) -> anyhow::Result<u8> {
    if args.note.trim().is_empty() {
        return Err(UsageError("--note must say why the alarms are closed".into()).into());
    }
    let which = if args.all {
        Which::All
    } else {
        Which::Ids(args.ids)
    };
    let ack = match acknowledge(&args.state, &which, &who(), &args.note) {
        Ok(a) => a,
        Err(e @ (AckError::NoState(_) | AckError::Unknown { .. } | AckError::Already { .. })) => {
            return Err(UsageError(e.to_string()).into());
        }
        Err(e) => return Err(e.into()),
    };
    let mut out = std::io::stdout().lock();
    match ack {
        None => writeln!(
            out,
            "no open alarm in {}: nothing acknowledged",
            Escaped(&args.state.display().to_string())
        )?,
        Some(a) => {
            for id in &a.ids {
                writeln!(out, "acknowledged {id}")?;
            }
            writeln!(
                out,
                "{} acknowledged at {} by {}: {}",
                crate::cli::units::count(a.ids.len() as u64, "alarm", "alarms"),
                utc(a.at),
                Escaped(&a.by),
                Escaped(&a.note)
            )?;
        }
    }
    Ok(EXIT_OK)
}
