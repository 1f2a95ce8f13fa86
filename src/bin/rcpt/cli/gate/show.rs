//! `rcpt gate show`: a receipt's evidence from the store, every object
//! re-hashed: the rules' result, the checks and their outputs, the
//! approvals that decided, an escalation's record, an approval's record.

use super::check::envelope_of;
use super::{here, verdict_line};
use crate::cli::EXIT_OK;
use rcpt::gate::approval::is_approval;
use rcpt::gate::store::GateStore;
use rcpt::gate::{self, GateError};
use rcpt::io::Source;
use rcpt::text::Escaped;
use std::io::Write as _;
use std::path::Path;

/// The store: `--store`, or the repository's here (showing works
/// mid-merge too: only the repository is needed).
fn store_at(store: Option<&Path>) -> anyhow::Result<GateStore> {
    let dir = match store {
        Some(d) => d.to_path_buf(),
        None => {
            let here = here()?;
            let tree = rcpt::gate::git::WorkTree::discover(&here)
                .map_err(|e| GateError::from(rcpt::gate::change::ChangeError::from(e)))?
                .ok_or_else(|| {
                    GateError::from(rcpt::gate::change::ChangeError::NotAWorkTree(here))
                })?;
            rcpt::gate::store::default_dir(&tree)
        }
    };
    Ok(GateStore::open(&dir)?)
}

pub(super) fn show(source: &Source, store: Option<&Path>) -> anyhow::Result<u8> {
    let envelope = envelope_of(source, "receipt")?;
    let (receipt, receipt_id) = rcpt::receipt::receipt_from_cbor(&envelope.payload)?;
    let store = store_at(store)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "receipt_id: {receipt_id}")?;
    writeln!(out, "issuer: {}", Escaped(&receipt.issuer))?;
    writeln!(out, "verdict: {}", verdict_line(&receipt.verdict))?;
    if is_approval(&receipt) {
        let a = gate::show_approval(&store, &receipt, &receipt_id)?;
        writeln!(
            out,
            "approval of: {} (ticket {})",
            Escaped(&a.approves.to_string()),
            Escaped(&a.ticket.to_string())
        )?;
        writeln!(out, "record: {}", Escaped(&a.record.to_string()))?;
        writeln!(out, "change_id: {}", receipt.change_id)?;
        writeln!(out, "ok: every object re-hashed")?;
        return Ok(EXIT_OK);
    }
    let shown = gate::show(&store, &receipt, &receipt_id)?;
    let evidence = &shown.evidence;
    writeln!(out, "evidence: {}", shown.id)?;
    writeln!(out, "base: {}", evidence.base)?;
    writeln!(out, "change_id: {}", evidence.change_id)?;
    writeln!(
        out,
        "policy: {} ({})",
        Escaped(&evidence.policy.to_string()),
        evidence.policy_id
    )?;
    super::check::print_rules(&mut out, evidence.rules.as_ref())?;
    print_checks(&mut out, &shown)?;
    for a in &evidence.approvals {
        let word = if a.refused {
            "refused by"
        } else {
            "approved by"
        };
        writeln!(
            out,
            "approval {}: {word} {}",
            a.receipt,
            Escaped(&a.approver.to_string())
        )?;
    }
    if let Some(e) = &shown.escalation {
        writeln!(
            out,
            "escalation: ticket {} for [{}] over {} reads",
            Escaped(&e.ticket.to_string()),
            Escaped(&e.reasons.join(", ")),
            e.reads
        )?;
    }
    writeln!(out, "ok: every object re-hashed")?;
    Ok(EXIT_OK)
}

/// Each check of `shown`: how it ran, and its outputs as stored.
fn print_checks(out: &mut impl std::io::Write, shown: &gate::Shown) -> std::io::Result<()> {
    for (c, (stdout, stderr)) in shown.evidence.checks.iter().zip(&shown.outputs) {
        writeln!(
            out,
            "check {}: {:?} exit {} in {} ms",
            Escaped(&c.name),
            c.run,
            c.exit,
            c.duration_ms
        )?;
        for (label, digest, bytes) in [("stdout", &c.stdout, stdout), ("stderr", &c.stderr, stderr)]
        {
            writeln!(out, "--- {label} ({} bytes, {digest})", bytes.len())?;
            out.write_all(bytes)?;
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                writeln!(out)?;
            }
        }
    }
    Ok(())
}
