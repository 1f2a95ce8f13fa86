//! The checkpoint's checks: the note verified once per (origin, text)
//! under the log keys named for the origin (cached), and `--since`
//! consistency.

use super::{
    CHECKPOINT_CACHE_ENTRIES, VerifiedCheckpoint, Verifier, fail, name, not_passing, skipped,
};
use crate::tlog::note::{self, Checkpoint, Note};
use crate::verify::log_checks::{extends, note_check, witnesses_check};
use crate::verify::{CheckResult, CheckVerdict, ConsistencyInput, Failure, NotEvaluated, Reason};
use std::sync::Arc;

impl Verifier {
    /// Verify a checkpoint note for `origin`, once per distinct
    /// (origin, text) pair.
    pub(super) fn checkpoint(&self, origin: &str, text: &str) -> Arc<VerifiedCheckpoint> {
        let key = cache_key(origin, text);
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return hit;
        }
        let verified = Arc::new(self.verify_checkpoint(origin, text));
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CHECKPOINT_CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(key, Arc::clone(&verified));
        }
        verified
    }

    /// Parse the note, apply the trust rule with the keys named `origin`, parse the body.
    fn verify_checkpoint(&self, origin: &str, text: &str) -> VerifiedCheckpoint {
        let note = match Note::parse(text.as_bytes()) {
            Ok(note) => note,
            Err(e) => {
                let f = Failure {
                    reason: Reason::CheckpointMalformed,
                    detail: format!("checkpoint note: {e}"),
                };
                return VerifiedCheckpoint {
                    signature: Ok(CheckVerdict::Fail(f.clone())),
                    witnesses: self
                        .policy
                        .as_ref()
                        .map(|_| Err(skipped(name::CHECKPOINT_SIGNATURE))),
                    body: Err(f),
                };
            }
        };
        let keys = self.trust.log_keys_for(origin);
        let signature = if keys.is_empty() {
            Err(NotEvaluated {
                reason: Reason::LogUntrusted,
                detail: format!(
                    "no trusted log key for origin \"{origin}\": add its verifier key with \
                     --log-key or to the trust file{}",
                    self.issuer_key_as_log_hint(origin)
                ),
            })
        } else {
            note_check(note::check(&note, &keys), origin, &keys, &note)
        };
        let body = Checkpoint::parse(&note.text).map_err(|e| Failure {
            reason: Reason::CheckpointMalformed,
            detail: format!("checkpoint body: {e}"),
        });
        // A checkpoint check 13 failed (an impersonation among them: the
        // policy's logs are trusted log keys) leaves check 13w nothing to
        // add: not run, never a second "not evaluated".
        let witnesses = self
            .policy
            .as_ref()
            .map(|p| match witnesses_check(p, &note) {
                Err(e) if e.reason == Reason::LogUntrusted && signature_failed(&signature) => {
                    Err(skipped(name::CHECKPOINT_SIGNATURE))
                }
                w => w,
            });
        VerifiedCheckpoint {
            signature,
            witnesses,
            body,
        }
    }

    /// When no log key is named `origin`, what was trusted instead: an
    /// issuer key of that name (the keys swapped), or the log keys' names.
    fn issuer_key_as_log_hint(&self, origin: &str) -> String {
        if self
            .trust
            .issuers
            .iter()
            .any(|i| i.name.as_deref() == Some(origin))
        {
            return format!(
                "; a key named \"{origin}\" is trusted as an issuer key, not as a log key: are \
                 the issuer and log keys swapped?"
            );
        }
        let mut names: Vec<&str> = self.trust.logs.iter().map(|l| l.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            return String::new();
        }
        format!(
            " (the log keys trusted are named \"{}\")",
            names.join("\", \"")
        )
    }

    /// `--since`: the old checkpoint is of this bundle's log, is trusted, and
    /// a proof links its size to this bundle's tree size.
    ///
    /// The origin is compared first, from the old checkpoint's body: a
    /// checkpoint of another log fails `consistency.origin_mismatch`
    /// whether or not that log is trusted (its signature is never looked
    /// up under this bundle's log keys).
    pub(super) fn consistency(
        &self,
        since: &ConsistencyInput,
        old_body: &Result<Checkpoint, Failure>,
        tree_size: u64,
        body: &Checkpoint,
    ) -> CheckResult {
        let old_body = match old_body {
            Ok(b) => b,
            Err(f) => return Ok(CheckVerdict::Fail(f.clone())),
        };
        if old_body.origin != body.origin {
            return fail(
                Reason::ConsistencyOriginMismatch,
                format!(
                    "--since checkpoint is for \"{}\", the bundle's log is \"{}\": give a \
                     --since checkpoint of the bundle's log",
                    old_body.origin, body.origin
                ),
            );
        }
        let old = self.checkpoint(&body.origin, &since.old_checkpoint);
        if let Some(not_passed) = not_passing(&old.signature, "the --since checkpoint") {
            return not_passed;
        }
        if old_body.size > tree_size {
            return fail(
                Reason::ConsistencySizeMismatch,
                format!(
                    "the --since checkpoint (tree size {}) is newer than the bundle's checkpoint \
                     (tree size {tree_size}): --since takes an older checkpoint of the log, of \
                     size {tree_size} or less (or `rcpt log prove` the receipt again, for a \
                     bundle at least as new)",
                    old_body.size
                ),
            );
        }
        let Some(proof) = since.proofs.iter().find(|p| p.to == tree_size) else {
            return self.unsized_consistency(since, old_body, tree_size, body);
        };
        if proof.from != old_body.size {
            return fail(
                Reason::ConsistencySizeMismatch,
                format!(
                    "proof is from {} to {}, but the --since checkpoint has size {}: prove \
                     consistency from exactly that size",
                    proof.from, proof.to, old_body.size
                ),
            );
        }
        extends(proof.from, proof.to, &proof.proof, old_body, body)
    }

    /// No sized proof to `tree_size`: a text-form proof (sizes not named)
    /// that links the `--since` size to it, else a failure saying what to add.
    fn unsized_consistency(
        &self,
        since: &ConsistencyInput,
        old_body: &Checkpoint,
        tree_size: u64,
        body: &Checkpoint,
    ) -> CheckResult {
        let add = format!(
            "add `rcpt log consistency LOG --from {} --to {tree_size}` (text or --json form)",
            old_body.size
        );
        if since.unsized_proofs.is_empty() {
            let sizes: Vec<String> = since.proofs.iter().map(|p| p.to.to_string()).collect();
            return fail(
                Reason::ConsistencySizeMismatch,
                format!(
                    "no --consistency proof to the bundle's tree size {tree_size} (proofs given \
                     to: {}): {add}",
                    sizes.join(", ")
                ),
            );
        }
        let linked = since.unsized_proofs.iter().any(|p| {
            extends(old_body.size, tree_size, &p.proof, old_body, body)
                .is_ok_and(|v| v == CheckVerdict::Pass)
        });
        if linked {
            return Ok(CheckVerdict::Pass);
        }
        let files: Vec<&str> = since
            .unsized_proofs
            .iter()
            .map(|p| p.file.as_str())
            .collect();
        fail(
            Reason::ConsistencyInvalid,
            format!(
                "no --consistency proof links the --since checkpoint (size {}) to the bundle's \
                 (size {tree_size}): the text-form proofs ({}) name no sizes and none verifies \
                 between these two; {add}",
                old_body.size,
                files.join(", ")
            ),
        )
    }
}

/// The checkpoint cache key: SHA-256 over the length-prefixed pair,
/// `u64be(len(origin)) || origin || text`, so no two (origin, text) pairs
/// share a key whatever bytes either holds.
fn cache_key(origin: &str, text: &str) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update((origin.len() as u64).to_be_bytes());
    h.update(origin.as_bytes());
    h.update(text.as_bytes());
    h.finalize().into()
}

/// Whether a check result is a failure.
fn signature_failed(result: &CheckResult) -> bool {
    matches!(result, Ok(CheckVerdict::Fail(_)))
}
