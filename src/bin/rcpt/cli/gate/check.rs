//! `rcpt gate check`, and what check and apply print about rules,
//! approvals and escalations (spec/gate.md).

use super::{CheckArgs, here, log_target, publish, verdict_line};
use crate::cli::{EXIT_ESCALATED, EXIT_FAILED, EXIT_OK, UsageError, read_input, write_target};
use anyhow::Context as _;
use rcpt::gate;
use rcpt::gate::approval::{Candidate, Judged, Standing};
use rcpt::gate::policy::Policy;
use rcpt::gate::rules::RuleOutcome;
use rcpt::io::Source;
use rcpt::keys::SigningKey;
use rcpt::limits::MAX_BUNDLE_BYTES;
use rcpt::receipt::Verdict;
use rcpt::receipt::dsse::Envelope;
use rcpt::text::Escaped;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The policy file, refused as a bad invocation.
pub(super) fn read_policy(path: &std::path::Path) -> anyhow::Result<Policy> {
    Policy::read(path).map_err(|e| UsageError(format!("{:#}", anyhow::Error::new(e))).into())
}

/// The key at `path` and its issuer name (`--issuer`, or the `.vkey` beside it).
pub(super) fn key_and_issuer(
    path: &std::path::Path,
    given: Option<&str>,
    what: &str,
) -> anyhow::Result<(SigningKey, String)> {
    let pem = rcpt::keys::read_key_file(path)
        .with_context(|| format!("reading the {what} {}", path.display()))
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let key = rcpt::keys::signing_key_from_pem(&pem)
        .map_err(|e| crate::cli::usage(format!("the {what} {}", path.display()), e))?;
    let issuer = gate::issuer_name(path, &key, given)
        .map_err(|e| UsageError(format!("{:#}", anyhow::Error::new(e))))?;
    Ok((key, issuer))
}

/// The envelope in a bundle or envelope file.
pub(super) fn envelope_of(source: &Source, what: &str) -> anyhow::Result<Envelope> {
    let bytes = read_input(source, MAX_BUNDLE_BYTES, what)?;
    Ok(match rcpt::bundle::RawBundle::parse(&bytes) {
        Ok(b) => Envelope::from_json(b.envelope.get().as_bytes())?,
        Err(_) => Envelope::from_json(&bytes)
            .with_context(|| format!("{source} is neither a bundle nor an envelope"))?,
    })
}

/// The approvals given with `--approval` (bundles or envelopes).
pub(super) fn offered(files: &[PathBuf]) -> anyhow::Result<Vec<Candidate>> {
    files
        .iter()
        .map(|f| {
            let source = Source::Path(f.clone());
            let envelope = envelope_of(&source, "approval")
                .map_err(|e| UsageError(format!("--approval {}: {e:#}", f.display())))?;
            Ok(Candidate {
                source: f.display().to_string(),
                envelope,
            })
        })
        .collect()
}

/// Turn SIGINT and SIGTERM into a flag the gate reads between steps.
pub(super) fn interrupt_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("installing the interrupt handler")?;
    }
    Ok(interrupted)
}

/// Seconds since the epoch now.
pub(super) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

pub(super) fn check(args: &CheckArgs) -> anyhow::Result<u8> {
    let policy = read_policy(&args.policy)?;
    let (key, issuer) = key_and_issuer(&args.key, args.issuer.as_deref(), "gate key")?;
    let log = log_target(args)?;
    let approvals = offered(&args.approval)?;
    let interrupted = interrupt_flag()?;
    let evaluator = super::rules::evaluator()?;
    let now = now();
    let request = gate::Request {
        dir: &here()?,
        base: &args.base,
        policy: &policy,
        store: args.store.as_deref(),
        interrupted: &interrupted,
        issuer: &issuer,
        now,
        evaluator: &evaluator,
        approvals: &approvals,
    };
    let decision = gate::evaluate(&request)?;
    let mut err = std::io::stderr().lock();
    writeln!(err, "change_id: {}", decision.change_id)?;
    writeln!(err, "policy_id: {}", policy.id)?;
    print_rules(&mut err, decision.evidence.rules.as_ref())?;
    for c in &decision.evidence.checks {
        writeln!(
            err,
            "check {}: exit {} in {} ms",
            c.name, c.exit, c.duration_ms
        )?;
    }
    print_approvals(&mut err, &decision.approvals)?;
    let receipt = decision.receipt(&issuer, now);
    let (valid, envelope) = gate::issue(&receipt, &key, &decision.store, &decision.evidence_id)?;
    writeln!(err, "verdict: {}", verdict_line(&receipt.verdict))?;
    writeln!(err, "evidence: {}", decision.evidence_id)?;
    writeln!(err, "receipt_id: {}", valid.id)?;
    print_escalated(
        &mut err,
        &receipt.verdict,
        &policy,
        args.out.as_ref(),
        args.store.as_deref(),
    )?;
    drop(err);
    let text = match &log {
        None => format!("{}\n", envelope.to_json()),
        Some(target) => publish(target, &envelope)
            .context("the receipt was issued (it is in the store) but not logged")?,
    };
    if let Some(out) = &args.out {
        write_target(out, text.as_bytes())?;
    }
    Ok(exit_of(&receipt.verdict))
}

/// 0 admit, 1 deny, 4 escalate.
pub(super) fn exit_of(verdict: &Verdict) -> u8 {
    match verdict {
        Verdict::Admit { .. } => EXIT_OK,
        Verdict::Deny { .. } => EXIT_FAILED,
        Verdict::Escalate { .. } => EXIT_ESCALATED,
    }
}

/// `rules: deny [..] escalate [..]`, when the policy has rules.
pub(super) fn print_rules(
    out: &mut impl std::io::Write,
    rules: Option<&RuleOutcome>,
) -> anyhow::Result<()> {
    if let Some(r) = rules {
        let list = |s: &std::collections::BTreeSet<String>| {
            s.iter().cloned().collect::<Vec<_>>().join(", ")
        };
        writeln!(
            out,
            "rules: deny [{}] escalate [{}]",
            Escaped(&list(&r.deny)),
            Escaped(&list(&r.escalate))
        )?;
    }
    Ok(())
}

/// One line per approval offered: whether it counts, and why not.
pub(super) fn print_approvals(
    out: &mut impl std::io::Write,
    judged: &[Judged],
) -> anyhow::Result<()> {
    for j in judged {
        let id = j
            .receipt_id
            .map(|d| d.to_string())
            .unwrap_or_else(|| "?".into());
        let who = Escaped(j.approver.as_deref().unwrap_or("?"));
        let source = Escaped(&j.source);
        match &j.standing {
            Standing::Counts => writeln!(out, "approval {source} ({id}): counts, by {who}")?,
            Standing::Refuses => writeln!(out, "approval {source} ({id}): refused by {who}")?,
            Standing::Void(why) => writeln!(
                out,
                "approval {source} ({id}): does not count: {}",
                Escaped(&why.to_string())
            )?,
        }
    }
    Ok(())
}

/// For an escalation: who may approve, and the command.
pub(super) fn print_escalated(
    out: &mut impl std::io::Write,
    verdict: &Verdict,
    policy: &Policy,
    receipt_file: Option<&rcpt::io::Target>,
    store: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    if !matches!(verdict, Verdict::Escalate { .. }) {
        return Ok(());
    }
    if policy.approvers.is_empty() {
        writeln!(
            out,
            "escalated: the policy names no approvers; nothing can approve it"
        )?;
        return Ok(());
    }
    let names: Vec<&str> = policy.approvers.iter().map(|k| k.name.as_str()).collect();
    writeln!(
        out,
        "escalated: {} approval(s) needed from {}",
        policy.approvals_required,
        names.join(", ")
    )?;
    let file = match receipt_file {
        Some(rcpt::io::Target::Path(p)) => p.display().to_string(),
        _ => "RECEIPT".into(),
    };
    let store = store
        .map(|d| format!(" --store {}", d.display()))
        .unwrap_or_default();
    writeln!(
        out,
        "approve with: rcpt gate approve {file} --key APPROVER.key --gate-key-file GATE.vkey{store}"
    )?;
    Ok(())
}
