//! `rcpt gate apply` and `rcpt gate undo` (spec/gate.md "The apply
//! protocol", "Undo").

use super::check::{
    exit_of, interrupt_flag, key_and_issuer, now, offered, print_approvals, print_escalated,
    print_rules, read_policy,
};
use super::{
    ApplyArgs, IssueArgs, UndoArgs, here, log_target_of, publish, report_recovered, verdict_line,
};
use crate::cli::{EXIT_FAILED, read_input, write_target};
use anyhow::Context as _;
use rcpt::gate::apply::{ApplyRequest, Outcome};
use rcpt::gate::journal::{Locked, lock_and_recover};
use rcpt::gate::undo::UndoRequest;
use rcpt::gate::{self, GateError, Signer};
use rcpt::limits::MAX_BUNDLE_BYTES;
use rcpt::receipt::Verdict;
use rcpt::receipt::dsse::Envelope;
use std::io::Write as _;
use std::path::Path;

/// Fault injection of the crash trials (spec/gate.md), compiled only with
/// the cargo feature `fault-injection` (the tests enable it; a release
/// build has no such hook): `RCPT_GATE_CRASH_AFTER=N` makes the process
/// SIGKILL itself right after durable write step N.
#[cfg(feature = "fault-injection")]
fn crash_hook() -> impl Fn(u32) {
    let at: Option<u32> = std::env::var("RCPT_GATE_CRASH_AFTER")
        .ok()
        .and_then(|v| v.parse().ok());
    move |step| {
        if Some(step) == at {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }
}

/// Without the feature `fault-injection`: no hook.
#[cfg(not(feature = "fault-injection"))]
fn crash_hook() -> impl Fn(u32) {
    |_| {}
}

/// The store of `given` (`--store`) or of the work tree here, locked, with
/// an interrupted apply or undo recovered and reported: the command's one
/// recovery.
fn locked_store(given: Option<&Path>) -> anyhow::Result<Locked> {
    let dir = match given {
        Some(d) => d.to_path_buf(),
        None => {
            let here = here()?;
            let tree = rcpt::gate::change::work_tree(&here).map_err(GateError::from)?;
            rcpt::gate::store::default_dir(&tree)
        }
    };
    let (locked, recovered) = lock_and_recover(&dir).map_err(GateError::from)?;
    if let Some(r) = &recovered {
        report_recovered(r)?;
    }
    Ok(locked)
}

pub fn apply(args: &ApplyArgs) -> anyhow::Result<u8> {
    let policy = read_policy(&args.policy)?;
    let (key, issuer) = key_and_issuer(&args.issue.key, args.issue.issuer.as_deref(), "gate key")?;
    let approvals = offered(&args.approval)?;
    let evaluator = super::rules::evaluator()?;
    let log = log_target_of(&args.issue.log, &args.issue.service)?;
    let interrupted = interrupt_flag()?;
    let crash = crash_hook();
    let locked = locked_store(args.issue.store.as_deref())?;
    let request = ApplyRequest {
        dir: &here()?,
        patch: &args.patch,
        policy: &policy,
        store: &locked,
        interrupted: &interrupted,
        signer: Signer {
            key: &key,
            issuer: &issuer,
            now: now(),
        },
        evaluator: &evaluator,
        approvals: &approvals,
        crash: &crash,
    };
    let outcome = gate::apply::apply(&request)?;
    report(&outcome, &policy.id.to_string())?;
    print_escalated(
        &mut std::io::stderr().lock(),
        &outcome.signed.valid.receipt.verdict,
        &policy,
        args.issue.out.as_ref(),
        args.issue.store.as_deref(),
    )?;
    finish(&outcome, log.as_ref(), &args.issue)
}

pub fn undo(args: &UndoArgs) -> anyhow::Result<u8> {
    let (key, issuer) = key_and_issuer(&args.issue.key, args.issue.issuer.as_deref(), "gate key")?;
    let log = log_target_of(&args.issue.log, &args.issue.service)?;
    let bytes = read_input(&args.receipt, MAX_BUNDLE_BYTES, "receipt")?;
    let envelope = match rcpt::bundle::RawBundle::parse(&bytes) {
        Ok(b) => Envelope::from_json(b.envelope.get().as_bytes())?,
        Err(_) => Envelope::from_json(&bytes)
            .with_context(|| format!("{} is neither a bundle nor an envelope", args.receipt))?,
    };
    let crash = crash_hook();
    let locked = locked_store(args.issue.store.as_deref())?;
    let request = UndoRequest {
        dir: &here()?,
        envelope: &envelope,
        store: &locked,
        signer: Signer {
            key: &key,
            issuer: &issuer,
            now: now(),
        },
        crash: &crash,
    };
    let outcome = gate::undo::undo(&request)?;
    report(&outcome, &outcome.concluded.evidence.policy_id.to_string())?;
    finish(&outcome, log.as_ref(), &args.issue)
}

fn report(o: &Outcome, policy_id: &str) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "change_id: {}", o.change_id)?;
    writeln!(err, "policy_id: {policy_id}")?;
    print_rules(&mut err, o.concluded.evidence.rules.as_ref())?;
    for c in &o.concluded.evidence.checks {
        writeln!(
            err,
            "check {}: exit {} in {} ms",
            c.name, c.exit, c.duration_ms
        )?;
    }
    print_approvals(&mut err, &o.concluded.approvals)?;
    let receipt = &o.signed.valid;
    writeln!(err, "verdict: {}", verdict_line(&receipt.receipt.verdict))?;
    match o.inverse {
        Some(id) => writeln!(err, "inverse_delta_id: {id} (reversibility true)")?,
        None => writeln!(
            err,
            "inverse_delta_id: null (reversibility false: over the store's limits, allowed by the policy)"
        )?,
    }
    for t in &o.record.files {
        let word = match (t.pre, t.post) {
            (None, _) => "create",
            (_, None) => "delete",
            _ => "modify",
        };
        let done = if o.applied { "written" } else { "not written" };
        writeln!(err, "{word} {} ({done})", t.path)?;
    }
    writeln!(err, "applied: {}", o.applied)?;
    writeln!(err, "receipt_id: {}", receipt.id)?;
    Ok(())
}

fn finish(o: &Outcome, log: Option<&super::LogTarget>, args: &IssueArgs) -> anyhow::Result<u8> {
    let text = match log {
        None => format!("{}\n", o.signed.envelope.to_json()),
        Some(target) => publish(target, &o.signed.envelope)
            .context("the receipt was issued (it is in the store) but not logged")?,
    };
    if let Some(out) = &args.out {
        write_target(out, text.as_bytes())?;
    }
    Ok(match o.signed.valid.receipt.verdict {
        Verdict::Admit { .. } if !o.applied => EXIT_FAILED,
        ref v => exit_of(v),
    })
}
