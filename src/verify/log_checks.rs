//! log_checks: the checks of a bundle's log part (checkpoint signature
//! and witnesses, checkpoint match, inclusion, consistency), as free
//! functions the [`super::Verifier`] calls (spec/verify.md "Checks").

use super::checks::{fail, name, skipped};
use super::{CheckResult, CheckVerdict, Failure, NotEvaluated, Reason};
use crate::bundle::RawBundle;
use crate::digest::to_hex;
use crate::keys::NoteVerifier;
use crate::receipt::dsse::Envelope;
use crate::tlog::cosig::CosigStatus;
use crate::tlog::merkle::{self, Hash};
use crate::tlog::note::{Checkpoint, Note, NoteCheck};
use crate::tlog::policy::{Evaluation, LogStatus, Member, Quorum, QuorumVerdict, TlogPolicy};

/// Does `proof` show the checkpoint `body` (size `to`) extends `old_body`
/// (size `from`)?
pub(super) fn extends(
    from: u64,
    to: u64,
    proof: &[Hash],
    old_body: &Checkpoint,
    body: &Checkpoint,
) -> CheckResult {
    match merkle::verify_consistency(from, to, proof, &old_body.root_hash, &body.root_hash) {
        Ok(()) => Ok(CheckVerdict::Pass),
        Err(e) => fail(
            Reason::ConsistencyInvalid,
            format!("the bundle's checkpoint does not extend the --since checkpoint: {e}"),
        ),
    }
}

/// `checkpoint.witnesses`: the note weighed against the policy
/// (spec/witness.md "Verifying with a policy"), most serious first.
///
/// - a listed witness's line does not verify: failed `checkpoint.cosignature`
///   (even when the quorum is met without it);
/// - the quorum is not met: failed `checkpoint.quorum`;
/// - a listed log's line does not verify: not run (`checkpoint.signature`
///   fails on it, since the policy's logs are trusted log keys);
/// - no log the policy lists for the origin signed: not evaluated,
///   `log.untrusted`;
/// - a body that is not a checkpoint: not run (`checkpoint.match` fails on it).
///
/// Lines of keys the policy does not list (other witnesses, grease) are
/// ignored; the note's 100-line cap was applied when it was parsed.
pub(super) fn witnesses_check(policy: &TlogPolicy, note: &Note) -> CheckResult {
    let Ok(eval) = policy.evaluate(note) else {
        return Err(skipped(name::CHECKPOINT_MATCH));
    };
    let origin = &eval.checkpoint.origin;
    match eval.verdict() {
        QuorumVerdict::Verified => Ok(CheckVerdict::Pass),
        QuorumVerdict::LogFailed => Err(skipped(name::CHECKPOINT_SIGNATURE)),
        QuorumVerdict::CosignatureFailed(failed) => fail(
            Reason::CheckpointCosignature,
            cosignature_failures(policy, &eval, &failed),
        ),
        QuorumVerdict::QuorumNotMet => fail(Reason::CheckpointQuorum, quorum_detail(policy, &eval)),
        QuorumVerdict::LogNotEvaluated => Err(NotEvaluated {
            reason: Reason::LogUntrusted,
            detail: match eval.log {
                LogStatus::UnknownOrigin => format!(
                    "the --policy file lists no log for origin \"{origin}\": add its `log` line \
                     if you trust that log"
                ),
                _ => format!(
                    "no log the --policy file lists for origin \"{origin}\" signed this checkpoint"
                ),
            },
        }),
    }
}

/// What each failed listed witness's line showed.
pub(super) fn cosignature_failures(
    policy: &TlogPolicy,
    eval: &Evaluation,
    failed: &[usize],
) -> String {
    let each: Vec<String> = failed
        .iter()
        .filter_map(
            |&i| match (policy.witnesses.get(i), eval.witnesses.get(i)) {
                (Some(w), Some(CosigStatus::Failed(e))) => {
                    Some(format!("witness {} ({}): {e}", w.name, w.verifier.name))
                }
                _ => None,
            },
        )
        .collect();
    format!(
        "{}; a listed witness's cosignature that does not verify is refused (was the \
         checkpoint altered, or the line copied from another checkpoint?)",
        each.join("; ")
    )
}

/// Which listed witnesses cosigned, against the quorum.
pub(super) fn quorum_detail(policy: &TlogPolicy, eval: &Evaluation) -> String {
    let cosigned: Vec<String> = policy
        .witnesses
        .iter()
        .zip(&eval.witnesses)
        .filter(|(_, s)| matches!(s, CosigStatus::Verified { .. }))
        .map(|(w, _)| w.name.to_string())
        .collect();
    let quorum = match &policy.quorum {
        Quorum::None => Some("none".to_string()),
        Quorum::Member(Member::Witness(i)) => policy.witnesses.get(*i).map(|w| w.name.to_string()),
        Quorum::Member(Member::Group(g)) => policy.groups.get(*g).map(|g| g.name.to_string()),
    }
    .unwrap_or_default();
    format!(
        "{} of the {} listed witnesses cosigned ({}); the policy's quorum \"{quorum}\" is not \
         met (cosignatures by witnesses the policy does not list do not count)",
        cosigned.len(),
        policy.witnesses.len(),
        if cosigned.is_empty() {
            "none".to_string()
        } else {
            cosigned.join(", ")
        }
    )
}

/// The body of the `--since` checkpoint note, or why it is malformed.
pub(super) fn since_body(text: &str) -> Result<Checkpoint, Failure> {
    let malformed = |detail: String| Failure {
        reason: Reason::CheckpointMalformed,
        detail,
    };
    let note = Note::parse(text.as_bytes())
        .map_err(|e| malformed(format!("the --since checkpoint note: {e}")))?;
    Checkpoint::parse(&note.text)
        .map_err(|e| malformed(format!("the --since checkpoint body: {e}")))
}

/// The checkpoint is for this bundle's origin and tree size.
pub(super) fn checkpoint_match(raw: &RawBundle, body: &Checkpoint) -> CheckResult {
    if body.origin != raw.log.origin {
        return fail(
            Reason::CheckpointOriginMismatch,
            format!(
                "checkpoint origin \"{}\" differs from the bundle's origin \"{}\"",
                body.origin, raw.log.origin
            ),
        );
    }
    if body.size != raw.log.tree_size {
        return fail(
            Reason::CheckpointSizeMismatch,
            format!(
                "checkpoint tree size {} differs from the bundle's tree_size {}",
                body.size, raw.log.tree_size
            ),
        );
    }
    Ok(CheckVerdict::Pass)
}

/// RFC 9162 2.1.3.2: the entry's leaf hash at `index` reaches the checkpoint root.
pub(super) fn inclusion(raw: &RawBundle, env: Option<&Envelope>, body: &Checkpoint) -> CheckResult {
    let Some(env) = env else {
        return Err(skipped(name::ENVELOPE));
    };
    let proof = match raw.inclusion_hashes() {
        Ok(p) => p,
        Err(e) => return fail(Reason::InclusionMalformed, e.to_string()),
    };
    let leaf = merkle::leaf_hash(&env.to_entry());
    match merkle::verify_inclusion(
        &leaf,
        raw.log.index,
        raw.log.tree_size,
        &proof,
        &body.root_hash,
    ) {
        Ok(()) => Ok(CheckVerdict::Pass),
        Err(e) => fail(
            Reason::InclusionInvalid,
            format!(
                "entry {} of tree size {} does not reach the checkpoint root: {e}",
                raw.log.index, raw.log.tree_size
            ),
        ),
    }
}

/// At most this many of a note's signature lines are named in a message.
const SIGNERS_NAMED: usize = 8;

/// Map the note trust rule onto a check result; `keys` are the trusted
/// log keys of `origin` (at least one: an origin nobody trusts is
/// `log.untrusted` before the note is looked at).
pub(super) fn note_check(
    check: NoteCheck,
    origin: &str,
    keys: &[NoteVerifier],
    note: &Note,
) -> CheckResult {
    match check {
        NoteCheck::Verified { .. } => Ok(CheckVerdict::Pass),
        NoteCheck::Failed { name, key_hash } => fail(
            Reason::CheckpointSignatureInvalid,
            format!(
                "checkpoint signature by trusted key {name}+{} does not verify: the checkpoint was altered",
                to_hex(&key_hash)
            ),
        ),
        NoteCheck::NotEvaluated => {
            let trusted: Vec<String> = keys
                .iter()
                .map(|k| format!("{}+{}", k.name, to_hex(&k.key_hash)))
                .collect();
            let mut lines: Vec<String> = note
                .signatures
                .iter()
                .take(SIGNERS_NAMED)
                .map(|s| format!("{:?}+{}", s.name, to_hex(&s.key_hash)))
                .collect();
            if note.signatures.len() > SIGNERS_NAMED {
                lines.push(format!(
                    "and {} more",
                    note.signatures.len() - SIGNERS_NAMED
                ));
            }
            fail(
                Reason::LogImpersonation,
                format!(
                    "the checkpoint claims the origin {origin:?} but no signature verifies \
                     under its keys (trusted log keys: {}; the note's signature lines: {}): an \
                     impersonation, not an unknown log. Do not add the signing key: the trust \
                     set names another key for {origin:?}",
                    trusted.join(", "),
                    if lines.is_empty() {
                        "none".to_string()
                    } else {
                        lines.join(", ")
                    }
                ),
            )
        }
    }
}
