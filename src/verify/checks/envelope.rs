//! The envelope's checks: payload type, the signature rule over the
//! trusted issuer keys and the issuer binding, the payload, its
//! invariants and its id.

use super::{PayloadState, Verifier, fail, keyid_list, name, not_evaluated, pass, skip_all};
use crate::constants;
use crate::receipt::Receipt;
use crate::receipt::canonical;
use crate::receipt::dsse::{Envelope, SignatureCheck};
use crate::verify::payload_checks::{payload_chain, payload_checks, receipt_id_check};
use crate::verify::{Check, CheckResult, CheckVerdict, NotEvaluated, Reason};

impl Verifier {
    /// Payload type, signature, payload, invariants, id. Returns the
    /// computed id and what became of the payload.
    pub(super) fn envelope_checks(
        &self,
        env: &Envelope,
        claimed: &str,
        checks: &mut Vec<Check>,
    ) -> (Option<String>, PayloadState) {
        if env.payload_type != constants::RECEIPT_PAYLOAD_TYPE {
            checks.push(not_evaluated(
                name::PAYLOAD_TYPE,
                Reason::EnvelopePayloadTypeUnsupported,
                format!(
                    "payload type \"{}\" is not {}: not evaluated",
                    env.payload_type,
                    constants::RECEIPT_PAYLOAD_TYPE
                ),
            ));
            skip_all(checks, &payload_chain(), name::PAYLOAD_TYPE);
            return (None, PayloadState::Unread(name::PAYLOAD_TYPE));
        }
        checks.push(pass(name::PAYLOAD_TYPE));
        // The payload is decoded first so that the signature check can bind
        // the key that verified to the payload's issuer; the report keeps
        // its fixed order (signature before the payload checks).
        let mut payload_part = Vec::new();
        let payload = payload_checks(&env.payload, &mut payload_part);
        let receipt = match &payload {
            PayloadState::Decoded(r) => Some(r.as_ref()),
            _ => None,
        };
        checks.push(Check {
            name: name::SIGNATURE,
            result: self.signature(env, receipt),
        });
        checks.append(&mut payload_part);
        let id = canonical::identity(&env.payload);
        checks.push(Check {
            name: name::RECEIPT_ID,
            result: receipt_id_check(claimed, &id),
        });
        (Some(id.to_string()), payload)
    }

    /// The signature rule over the trusted issuer keys (spec/verify.md),
    /// then the issuer binding (spec/gate.md): a key that verified must be
    /// trusted under the name the payload gives as its `issuer`. Without a
    /// decoded payload the binding cannot be looked at; the payload checks
    /// then decide the outcome.
    fn signature(&self, env: &Envelope, receipt: Option<&Receipt>) -> CheckResult {
        match self.issuer_keys.check(env) {
            SignatureCheck::Verified { keyids } => match receipt {
                Some(r) => self.issuer_binding(&keyids, &r.issuer),
                None => Ok(CheckVerdict::Pass),
            },
            SignatureCheck::Failed { index, keyid } => fail(
                Reason::SignatureInvalid,
                format!(
                    "signature {index} names trusted key {keyid} but does not verify under it: \
                     the envelope was altered or signed by another key"
                ),
            ),
            SignatureCheck::NotEvaluated => match receipt {
                Some(r) if self.names_trusted(&r.issuer) => self.impersonation(env, &r.issuer),
                _ => Err(NotEvaluated {
                    reason: Reason::SignatureUntrusted,
                    detail: format!(
                        "no signature is by a trusted issuer key (keyids: {}){}: add the \
                         issuer's public key with --issuer-key or to the trust file if you \
                         trust it{}",
                        keyid_list(env),
                        receipt
                            .map(|r| format!(
                                ", and no key is trusted for the issuer {:?}",
                                r.issuer
                            ))
                            .unwrap_or_default(),
                        self.log_key_as_issuer_hint(env)
                    ),
                }),
            },
        }
    }

    /// Whether some trusted issuer key is bound to `issuer`.
    fn names_trusted(&self, issuer: &str) -> bool {
        self.issuer_names
            .iter()
            .any(|(_, n)| n.as_deref() == Some(issuer))
    }

    /// Nothing verified, and the payload claims a name the trust set binds
    /// to its own keys: a forgery (the monitor's `receipt.impersonation`),
    /// failed. The hint never suggests trusting the signing key: the trust
    /// set already names another key for this name.
    fn impersonation(&self, env: &Envelope, issuer: &str) -> CheckResult {
        let mut trusted: Vec<&str> = self
            .issuer_names
            .iter()
            .filter(|(_, n)| n.as_deref() == Some(issuer))
            .map(|(k, _)| k.as_str())
            .collect();
        trusted.dedup();
        fail(
            Reason::SignatureImpersonation,
            format!(
                "the receipt claims the issuer {issuer:?} but no signature verifies under its \
                 keys (trusted keyids: {}; the envelope's keyids: {}): an impersonation, not an \
                 unknown issuer. Do not add the signing key: the trust set names another key \
                 for {issuer:?}",
                trusted.join(", "),
                keyid_list(env)
            ),
        )
    }

    /// When an envelope's keyid is that of a trusted log key, say so: the
    /// issuer and log keys were likely given the other way round.
    fn log_key_as_issuer_hint(&self, env: &Envelope) -> String {
        for sig in env.signatures.iter().filter(|s| !s.keyid.is_empty()) {
            if let Some(log) = self
                .trust
                .logs
                .iter()
                .find(|l| crate::keys::keyid(&l.key) == sig.keyid)
            {
                return format!(
                    "; keyid {} is the key of {:?}, trusted as a log key, not as an issuer key: \
                     are the issuer and log keys swapped?",
                    sig.keyid, log.name
                );
            }
        }
        String::new()
    }

    /// The names the key with this keyid is trusted under.
    fn names_of_keyid<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.issuer_names
            .iter()
            .filter(move |(k, _)| k == id)
            .filter_map(|(_, n)| n.as_deref())
    }

    /// Pass when a key that verified is trusted under the name `issuer`.
    fn issuer_binding(&self, keyids: &[String], issuer: &str) -> CheckResult {
        if keyids
            .iter()
            .any(|id| self.names_of_keyid(id).any(|n| n == issuer))
        {
            return Ok(CheckVerdict::Pass);
        }
        let mut names: Vec<&str> = keyids
            .iter()
            .flat_map(|id| self.names_of_keyid(id))
            .collect();
        names.sort_unstable();
        names.dedup();
        let signer = if names.is_empty() {
            "a trusted key given without a name, which binds no issuer name (give the \
             issuer's .vkey file, --issuer-key NAME=KEY, or a trust file entry with its name)"
                .to_string()
        } else {
            format!("the trusted key of \"{}\"", names.join("\", \""))
        };
        fail(
            Reason::SignatureIssuerMismatch,
            format!("the payload's issuer is \"{issuer}\", but it verified only under {signer}"),
        )
    }
}
