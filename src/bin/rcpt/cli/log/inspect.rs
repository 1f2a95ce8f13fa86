//! `rcpt log consistency` and `rcpt log check`: read-only questions to a log.

use super::progress::Progress;
use crate::cli::{EXIT_OK, UsageError};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcpt::log::Log;
use std::io::Write;

pub(super) fn consistency(log: &Log, from: u64, to: Option<u64>, json: bool) -> anyhow::Result<u8> {
    let to = to.unwrap_or(log.size());
    if from > to {
        return Err(UsageError(format!("--from {from} is after --to {to}")).into());
    }
    // A consistency proof links two signed roots: both sizes must be
    // published checkpoints (a verifier has nothing to check it against
    // otherwise).
    log.checkpoint_at(from)?;
    log.checkpoint_at(to)?;
    let proof = log.consistency_proof(from, to)?;
    let proof: Vec<String> = proof.iter().map(|h| STANDARD.encode(h)).collect();
    let mut out = std::io::stdout().lock();
    if json {
        let doc = serde_json::json!({"from": from, "to": to, "proof": proof});
        writeln!(out, "{doc}")?;
    } else {
        for h in proof {
            writeln!(out, "{h}")?;
        }
    }
    Ok(EXIT_OK)
}

pub(super) fn check(log: &Log) -> anyhow::Result<u8> {
    let mut progress = Progress::new(None, "checking");
    let result = rcpt::log::check_log(log, |done, total| {
        progress.bar.set_length(total);
        progress.set(done);
    });
    progress.finish();
    let report = result?;
    use crate::cli::units::count;
    writeln!(
        std::io::stdout().lock(),
        "ok: {}, {}, {} verified, root {}",
        count(report.size, "entry", "entries"),
        count(report.tiles, "hash tile", "hash tiles"),
        count(report.checkpoints, "checkpoint", "checkpoints"),
        STANDARD.encode(report.root)
    )?;
    if report.kept_tiles > 0 {
        writeln!(
            std::io::stdout().lock(),
            "ok: {} partial tiles and entry bundles kept for earlier sizes verified",
            report.kept_tiles
        )?;
    }
    for size in &report.unpublished_sizes {
        writeln!(
            std::io::stdout().lock(),
            "note: .rcpt/checkpoints/{size} is past the published size {} (left by an \
             interrupted append, never published, not part of the log); the next append removes it",
            report.size
        )?;
    }
    Ok(EXIT_OK)
}
