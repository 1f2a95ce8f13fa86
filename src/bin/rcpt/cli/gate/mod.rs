//! `rcpt gate`: receipts from a git work tree (spec/gate.md).
//!
//! `id` prints the change's identity; `check` runs the policy's checks in
//! a clean copy and issues the receipt (exit 0 admit, 1 deny, 3 no
//! verdict, 2 bad invocation); `show` prints a receipt's evidence from the
//! store, re-hashing every object.
//!
//! This file dispatches and recovers an interrupted apply or undo before a
//! command; the command line is `args`, where a receipt goes `target`, and
//! each command's engine its own file (`check`, `apply` (and undo),
//! `approve`, `rules`, `show`, `mcp`, `contract`).

use crate::cli::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError};
use anyhow::Context as _;
use rcpt::gate::{self, GateError};
use rcpt::receipt::Verdict;
use std::io::Write as _;
use std::path::{Path, PathBuf};

mod apply;
mod approve;
mod args;
mod check;
mod contract;
mod mcp;
mod rules;
mod show;
mod target;

pub use args::{
    ApplyArgs, ApproveArgs, CheckArgs, GateCommand, IssueArgs, RulesArgs, ServiceKey, UndoArgs,
};
use target::{LogTarget, log_target, log_target_of, publish};

pub fn run(cmd: GateCommand) -> anyhow::Result<u8> {
    // Each command recovers an interrupted apply or undo once: apply and
    // undo under the store lock they hold (apply.rs), the others here.
    let result = match cmd {
        GateCommand::Id { base, json } => recover(None).and_then(|()| id(&base, json)),
        GateCommand::Check(args) => {
            recover(args.store.as_deref()).and_then(|()| check::check(&args))
        }
        GateCommand::Approve(args) => approve::approve(&args),
        GateCommand::Apply(args) => apply::apply(&args),
        GateCommand::Rules(args) => rules::run(&args),
        // A tool-proxy receipt is undone under its roots; the undo
        // recovers the store's journal under its own lock (mcp/undo.rs).
        GateCommand::Undo(args) if mcp::is_tool_proxy_undo(&args) => mcp::undo(&args),
        GateCommand::Undo(args) => apply::undo(&args),
        GateCommand::Mcp(args) => {
            recover(mcp::store_of(&args).as_deref()).and_then(|()| mcp::run(*args))
        }
        GateCommand::Contract(args) => contract::run(&args),
        GateCommand::Show { receipt, store } => {
            recover(store.as_deref()).and_then(|()| show::show(&receipt, store.as_deref()))
        }
    };
    // No verdict is exit 3, a bad invocation exit 2, a refusal to write
    // exit 1; each says why.
    result.or_else(|e| match e.downcast_ref::<GateError>() {
        Some(g) if g.is_usage() => Err(UsageError(format!("{e:#}")).into()),
        Some(g) if g.is_refusal() => {
            let _ = writeln!(std::io::stderr(), "rcpt: error: {e:#}");
            Ok(EXIT_FAILED)
        }
        Some(_) => {
            let _ = writeln!(std::io::stderr(), "rcpt: not evaluated: {e:#}");
            Ok(EXIT_NOT_EVALUATED)
        }
        None => Err(e),
    })
}

/// Finish or roll back an apply or undo a crash interrupted, before any
/// gate command, and say so.
fn recover(store: Option<&Path>) -> anyhow::Result<()> {
    let dir = match store {
        Some(d) => d.to_path_buf(),
        None => match rcpt::gate::git::WorkTree::discover(&here()?) {
            Ok(Some(tree)) => gate::store::default_dir(&tree),
            _ => return Ok(()),
        },
    };
    match gate::journal::recover_at(&dir).map_err(GateError::from)? {
        Some(r) => report_recovered(&r),
        None => Ok(()),
    }
}

/// Say what a recovery did, on standard error.
pub(super) fn report_recovered(r: &gate::journal::Recovered) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    if r.forward {
        writeln!(
            err,
            "rcpt: recovered an interrupted gate {}: rolled forward ({} files rewritten); \
             its receipt {} was issued (envelope: store object {})",
            r.entry.op, r.rewritten, r.entry.receipt, r.entry.envelope
        )?;
    } else {
        writeln!(
            err,
            "rcpt: recovered an interrupted gate {}: rolled back ({} files restored); \
             no receipt was issued",
            r.entry.op, r.rewritten
        )?;
    }
    for c in &r.conflicts {
        writeln!(
            err,
            "rcpt: {c}: edited by someone else meanwhile; left as it is"
        )?;
    }
    Ok(())
}

pub(super) fn here() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("reading the current directory")
}

fn id(base: &str, json: bool) -> anyhow::Result<u8> {
    let (_, change) = gate::identify(&here()?, base).map_err(GateError::from)?;
    let mut out = std::io::stdout().lock();
    if json {
        let doc = rcpt::receipt::canonical::json::to_json(&change.to_value());
        writeln!(out, "{doc:#}")?;
    } else {
        writeln!(out, "{}", change.id())?;
    }
    Ok(EXIT_OK)
}

/// A verdict for a person: its reasons, ticket or proof are the
/// receipt's text, escaped (`rcpt::text`).
pub(super) fn verdict_line(v: &Verdict) -> String {
    use rcpt::text::Escaped;
    match v {
        Verdict::Admit { proof } => format!("admit (proof {proof})"),
        Verdict::Deny { reasons } => format!("deny ({})", Escaped(&reasons.join(", "))),
        Verdict::Escalate { ticket } => format!("escalate (ticket {})", Escaped(ticket)),
    }
}
