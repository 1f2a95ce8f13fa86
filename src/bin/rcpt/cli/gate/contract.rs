//! `rcpt gate contract list|show|unbind|rebind|cancel --contracts DIR`:
//! the contracts of demonstrated runs (spec/gate-mcp.md "Contracts from a
//! demonstrated run").

use crate::cli::{EXIT_OK, UsageError};
use rcpt::mcp::contract::{Contract, Contracts, Status};
use rcpt::text::Escaped;
use std::io::Write as _;
use std::path::PathBuf;

/// `rcpt gate contract`.
#[derive(clap::Args)]
pub struct ContractArgs {
    #[command(subcommand)]
    action: ContractAction,
    /// The contracts directory (one NAME.json each).
    #[arg(long, value_name = "DIR", global = true)]
    contracts: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum ContractAction {
    /// List the contracts: name, version, bound, proven, calls.
    List,
    /// Print a contract's file.
    Show {
        /// The contract.
        name: String,
    },
    /// Stop enforcing a contract, keeping its file.
    Unbind {
        /// The contract.
        name: String,
    },
    /// Allow the next `gate mcp --record NAME` to replace it (at the next
    /// version); it keeps gating until then. Binds it again.
    Rebind {
        /// The contract.
        name: String,
    },
    /// Drop a recording of NAME (under way or left by a proxy that ended):
    /// the recording session writes nothing; saved contracts stay.
    Cancel {
        /// The contract.
        name: String,
    },
}

fn line(c: &Contract) -> String {
    let tools: Vec<&str> = c.calls.iter().map(|k| k.tool.as_str()).collect();
    format!(
        "{} v{} {} {} max_age={}s calls={} [{}]{}",
        Escaped(&c.name),
        c.version,
        if c.bound { "bound" } else { "unbound" },
        match c.status {
            Status::Proven => "proven",
            Status::Unproven => "unproven",
        },
        c.max_age,
        c.calls.len(),
        Escaped(&tools.join(" ")),
        if c.rebind { " (rebind asked)" } else { "" }
    )
}

pub fn run(args: &ContractArgs) -> anyhow::Result<u8> {
    let dir = args
        .contracts
        .clone()
        .ok_or_else(|| UsageError("--contracts DIR is required".into()))?;
    let contracts = Contracts::open(&dir)?;
    let mut out = std::io::stdout().lock();
    match &args.action {
        ContractAction::List => {
            for c in contracts.all()? {
                writeln!(out, "{}", line(&c))?;
            }
        }
        ContractAction::Show { name } => {
            let c = contracts.get(name)?;
            out.write_all(&c.to_bytes())?;
        }
        ContractAction::Unbind { name } => {
            let mut c = contracts.get(name)?;
            c.bound = false;
            contracts.write(&c)?;
            writeln!(out, "{}", line(&c))?;
        }
        ContractAction::Rebind { name } => {
            let mut c = contracts.get(name)?;
            c.rebind = true;
            c.bound = true;
            contracts.write(&c)?;
            writeln!(out, "{}", line(&c))?;
            writeln!(
                out,
                "re-demonstrate: rcpt gate mcp ... --contracts {} --record {} -- COMMAND...",
                Escaped(&dir.display().to_string()),
                Escaped(name)
            )?;
        }
        ContractAction::Cancel { name } => {
            if contracts.cancel(name)? {
                writeln!(out, "the recording of {} is cancelled", Escaped(name))?;
            } else {
                writeln!(out, "no recording of {} was under way", Escaped(name))?;
            }
        }
    }
    Ok(EXIT_OK)
}
