//! `rcpt gate contract list|show|unbind|rebind|cancel --contracts DIR`:
//! the contracts of demonstrated runs (spec/gate-mcp.md "Contracts from a
//! demonstrated run").

use crate::cli::{EXIT_OK, UsageError};
use rcpt::mcp::contract::{Contract, Contracts, DEFAULT_MAX_AGE, MAX_MAX_AGE, Status};
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
    #[command(after_help = "Example:\n  rcpt gate contract list --contracts contracts/")]
    List,
    /// Print a contract's file.
    #[command(after_help = "Example:\n  rcpt gate contract show deploy --contracts contracts/")]
    Show {
        /// The contract.
        name: String,
    },
    /// Stop enforcing a contract, keeping its file.
    #[command(after_help = "Example:\n  rcpt gate contract unbind deploy --contracts contracts/")]
    Unbind {
        /// The contract.
        name: String,
    },
    /// Allow the next `gate mcp --record NAME` to replace it (at the next
    /// version); it keeps gating until then. Binds it again.
    #[command(after_help = "Example:\n  rcpt gate contract rebind deploy --contracts contracts/")]
    Rebind {
        /// The contract.
        name: String,
    },
    /// A contract from the last K steps the store kept (admitted and applied),
    /// printing what it took: check the scope before relying on it.
    #[command(
        after_help = "Example:\n  rcpt gate contract learn deploy --last 2 --store store/ --contracts contracts/"
    )]
    Learn {
        /// The contract.
        name: String,
        /// How many of the last steps (1 to 100).
        #[arg(long, value_name = "K")]
        last: usize,
        /// The gate store the proxy kept its steps in.
        #[arg(long, value_name = "DIR")]
        store: PathBuf,
        /// Seconds a read counts as fresh (default 60).
        #[arg(long = "max-age", value_name = "SECONDS")]
        max_age: Option<u64>,
    },
    /// Drop a recording of NAME (under way or left by a proxy that ended):
    /// the recording session writes nothing; saved contracts stay.
    #[command(after_help = "Example:\n  rcpt gate contract cancel deploy --contracts contracts/")]
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
        ContractAction::Learn {
            name,
            last,
            store,
            max_age,
        } => learn(&contracts, name, *last, store, *max_age, &mut out)?,
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

fn learn(
    contracts: &Contracts,
    name: &str,
    last: usize,
    store: &std::path::Path,
    max_age: Option<u64>,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    rcpt::mcp::contract::check_name(name)?;
    let max_age = max_age.unwrap_or(DEFAULT_MAX_AGE);
    if max_age == 0 || max_age > MAX_MAX_AGE {
        return Err(UsageError(format!("--max-age {max_age}: 1 to {MAX_MAX_AGE} s")).into());
    }
    let version = match contracts.find(name)? {
        Some(c) if !c.rebind => {
            return Err(UsageError(format!(
                "the contract {name} exists (version {}): `rcpt gate contract rebind {name}` first",
                c.version
            ))
            .into());
        }
        Some(c) => c.version + 1,
        None => 1,
    };
    let store = rcpt::gate::store::GateStore::open(store)?;
    let steps = rcpt::mcp::learn::last_steps(&store, last)?;
    let Some(first) = steps.first() else {
        return Err(UsageError(format!(
            "the store {} kept no admitted and applied step",
            store.dir().display()
        ))
        .into());
    };
    let server = first.server.clone();
    if let Some(other) = steps.iter().find(|s| s.server != server) {
        return Err(UsageError(format!(
            "the last {last} steps are of two servers ({} and {}): take fewer",
            Escaped(&server),
            Escaped(&other.server)
        ))
        .into());
    }
    writeln!(
        out,
        "took the last {} steps of {}:",
        steps.len(),
        Escaped(&server)
    )?;
    for (i, s) in steps.iter().enumerate() {
        writeln!(
            out,
            "  call {i}: step {} at {} {} {} after {}",
            Escaped(&s.step),
            s.decided_at,
            Escaped(&s.call.tool),
            Escaped(&cut(&s.call.arguments.to_string())),
            if s.reads_known {
                format!("{} reads", s.call.reads.len())
            } else {
                "no reads known (decided without --contracts): it will need none".to_string()
            }
        )?;
    }
    let calls = steps.into_iter().map(|s| s.call).collect();
    let c = Contract::new(name, version, &server, max_age, calls);
    contracts.write(&c)?;
    writeln!(out, "{}", line(&c))?;
    Ok(())
}

/// A value shown cut to 200 characters.
fn cut(s: &str) -> String {
    if s.chars().count() <= 200 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(200).collect::<String>())
    }
}
