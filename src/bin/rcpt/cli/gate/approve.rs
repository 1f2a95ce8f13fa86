//! `rcpt gate approve`: an approval (or refusal) receipt for an escalated
//! change (spec/gate.md "Approval").

use super::check::{envelope_of, key_and_issuer, now};
use super::{ApproveArgs, here, log_target_of, publish, verdict_line};
use crate::cli::{EXIT_OK, UsageError, read_input, write_target};
use anyhow::Context as _;
use rcpt::gate::approval::{self, ApprovalError, ApproveRequest, Approved};
use rcpt::gate::store::{self, GateStore};
use rcpt::gate::{GateError, Signer};
use rcpt::io::Source;
use rcpt::keys::NoteVerifier;
use rcpt::limits::MAX_KEY_FILE_BYTES;
use std::io::Write as _;

/// The gate key the escalation must be signed by.
fn gate_key(args: &ApproveArgs) -> anyhow::Result<NoteVerifier> {
    let text = match (&args.gate_key, &args.gate_key_file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => String::from_utf8_lossy(&read_input(
            &Source::Path(f.clone()),
            MAX_KEY_FILE_BYTES,
            "gate key file",
        )?)
        .into_owned(),
        (None, None) => {
            return Err(UsageError("give --gate-key VKEY or --gate-key-file FILE".into()).into());
        }
    };
    NoteVerifier::parse(text.trim())
        .map_err(|e| crate::cli::usage("--gate-key (the gate's .vkey: NAME+HASH+KEY)", e))
}

/// The store to keep the approval in: `--store`, else the repository's
/// here, else none.
fn store_of(args: &ApproveArgs) -> anyhow::Result<Option<GateStore>> {
    let dir = match &args.store {
        Some(d) => d.clone(),
        None => match rcpt::gate::git::WorkTree::discover(&here()?) {
            Ok(Some(tree)) => store::default_dir(&tree),
            _ => return Ok(None),
        },
    };
    Ok(Some(GateStore::open(&dir).map_err(GateError::from)?))
}

/// What was issued, on standard error.
fn report(approved: &Approved, store: Option<&GateStore>) -> anyhow::Result<()> {
    let receipt = &approved.signed.valid;
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "approves: {} (ticket {})",
        approved.escalated, approved.ticket
    )?;
    writeln!(err, "change_id: {}", receipt.receipt.change_id)?;
    writeln!(err, "verdict: {}", verdict_line(&receipt.receipt.verdict))?;
    writeln!(err, "receipt_id: {}", receipt.id)?;
    match store {
        Some(s) => writeln!(
            err,
            "store: {} (gate check|apply of this store find it)",
            s.dir().display()
        )?,
        None => writeln!(
            err,
            "store: none (outside a repository; give the receipt with --approval)"
        )?,
    }
    Ok(())
}

pub(super) fn approve(args: &ApproveArgs) -> anyhow::Result<u8> {
    let gate_key = gate_key(args)?;
    let (key, issuer) = key_and_issuer(&args.key, args.issuer.as_deref(), "approver key")?;
    let log = log_target_of(&args.log, &args.service)?;
    let escalation = envelope_of(&args.receipt, "receipt to approve")?;
    let request = ApproveRequest {
        escalation: &escalation,
        gate_key: &gate_key,
        signer: Signer {
            key: &key,
            issuer: &issuer,
            now: now(),
        },
        refusal: args
            .deny
            .then_some(args.reason.as_deref().unwrap_or_default()),
    };
    let approved = match approval::approve(&request) {
        Ok(a) => a,
        Err(e @ ApprovalError::Reason(_)) => return Err(UsageError(e.to_string()).into()),
        Err(ApprovalError::Refused(why)) => {
            return Err(GateError::Refused(format!("{why}; nothing was issued")).into());
        }
        Err(e) => return Err(e.into()),
    };
    let store = store_of(args)?;
    if let Some(s) = &store {
        approval::keep(s, &approved).map_err(GateError::from)?;
    }
    report(&approved, store.as_ref())?;
    let envelope = &approved.signed.envelope;
    let text = match &log {
        None => format!("{}\n", envelope.to_json()),
        Some(target) => {
            publish(target, envelope).context("the approval was issued but not logged")?
        }
    };
    if let Some(out) = &args.out {
        write_target(out, text.as_bytes())?;
    }
    Ok(EXIT_OK)
}
