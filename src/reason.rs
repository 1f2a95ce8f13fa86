//! reason: every stable reason code `rcpt` reports, as one enum.
//!
//! Issuing (`rcpt receipt issue`, `inspect`), logging (`rcpt log append`),
//! verifying (`rcpt verify`) and the frozen corpus manifest all speak this
//! one vocabulary. [`Reason::as_str`] is the stable code; serde reads and
//! writes a reason as that code, so a manifest's `"reason"` deserialises to
//! the typed value and an unknown code is refused where it is read.
//!
//! The table of codes with their meaning is spec/reasons.md; a test
//! (`tests/reasons_spec.rs`) holds that table against [`Reason::ALL`].
//! A code, once published, never changes its spelling: frozen manifests and
//! CI scripts match on it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Defines [`Reason`], [`Reason::ALL`] and [`Reason::as_str`] from one list,
/// so a variant cannot exist without its code or its place in `ALL`.
macro_rules! reasons {
    ($( $(#[doc = $doc:literal])+ $variant:ident = $code:literal, )+) => {
        /// A stable reason code (spec/reasons.md).
        #[non_exhaustive]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl Reason {
            /// Every reason, in spec/reasons.md order.
            pub const ALL: &'static [Reason] = &[ $( Reason::$variant, )+ ];

            /// The stable code, e.g. `payload.schema`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Reason::$variant => $code, )+
                }
            }
        }
    };
}

reasons! {
    /// An input file could not be opened or read.
    InputUnreadable = "input.unreadable",
    /// A bundle over `MAX_BUNDLE_BYTES`.
    BundleTooLarge = "bundle.too_large",
    /// Not a v1 bundle: bad JSON, duplicate key, wrong shape, unknown or
    /// missing field, an origin a checkpoint cannot carry.
    BundleMalformed = "bundle.malformed",
    /// Another bundle media type (not evaluated).
    BundleUnsupported = "bundle.unsupported",
    /// A DSSE envelope over `MAX_ENVELOPE_BYTES`.
    EnvelopeTooLarge = "envelope.too_large",
    /// The DSSE envelope is not well formed.
    EnvelopeMalformed = "envelope.malformed",
    /// The envelope's `payloadType` is not an rcpt v1 receipt.
    EnvelopePayloadTypeUnsupported = "envelope.payload_type_unsupported",
    /// A signature naming a trusted key does not verify under it.
    SignatureInvalid = "signature.invalid",
    /// No signature by a trusted issuer key (not evaluated).
    SignatureUntrusted = "signature.untrusted",
    /// The payload claims an issuer name the trust set trusts, and no
    /// trusted key of that name signed: a forgery.
    SignatureImpersonation = "signature.impersonation",
    /// The signature that verified is by a trusted key not named as the
    /// payload's `issuer`.
    SignatureIssuerMismatch = "signature.issuer_mismatch",
    /// A payload over `MAX_PAYLOAD_BYTES`.
    PayloadTooLarge = "payload.too_large",
    /// Well-formed CBOR that is not in canonical form.
    PayloadNonCanonical = "payload.non_canonical",
    /// Not a value of the data model.
    PayloadMalformed = "payload.malformed",
    /// Not a version-1 receipt: a field missing, unknown or mistyped.
    PayloadSchema = "payload.schema",
    /// A receipt version this rcpt does not read (not evaluated).
    PayloadVersionUnsupported = "payload.version_unsupported",
    /// Invariant 1: `inverse_delta_id` non-null exactly when `reversibility` is true.
    InvariantReversibility = "invariant.reversibility",
    /// Invariant 2: deny reasons non-empty, sorted, unique; ticket non-empty.
    InvariantVerdict = "invariant.verdict",
    /// Invariant 3: `applied` only with admit.
    InvariantApplied = "invariant.applied",
    /// Invariant 4: `read_set` sorted by resource, without repeats.
    InvariantReadSet = "invariant.read_set",
    /// Invariant 5: `replay` in the combining function's normal form.
    InvariantReplay = "invariant.replay",
    /// The claimed receipt id is not BLAKE3 of the payload.
    ReceiptIdMismatch = "receipt_id.mismatch",
    /// The claimed receipt id is not a digest string.
    ReceiptIdMalformed = "receipt_id.malformed",
    /// A log entry over the entry limit.
    EntryTooLarge = "entry.too_large",
    /// The checkpoint is not a signed note, or its body not a checkpoint.
    CheckpointMalformed = "checkpoint.malformed",
    /// A trusted log key's checkpoint signature does not verify.
    CheckpointSignatureInvalid = "checkpoint.signature_invalid",
    /// No trusted log key for the origin signed the checkpoint (not evaluated).
    LogUntrusted = "log.untrusted",
    /// The bundle names an origin the trust set trusts, and no trusted log
    /// key of that origin signed the checkpoint: a forgery.
    LogImpersonation = "log.impersonation",
    /// The checkpoint is for another origin than the bundle says.
    CheckpointOriginMismatch = "checkpoint.origin_mismatch",
    /// The checkpoint's size is not the bundle's `tree_size`.
    CheckpointSizeMismatch = "checkpoint.size_mismatch",
    /// `--policy`: the valid cosignatures of listed witnesses do not meet
    /// the policy's quorum.
    CheckpointQuorum = "checkpoint.quorum",
    /// `--policy`: a cosignature line of a listed witness (its name and key
    /// ID) does not verify over this checkpoint.
    CheckpointCosignature = "checkpoint.cosignature",
    /// An inclusion proof hash is not base64 of 32 bytes, or too many.
    InclusionMalformed = "inclusion.malformed",
    /// The inclusion proof does not reach the checkpoint root.
    InclusionInvalid = "inclusion.invalid",
    /// The `--since` checkpoint is for another log.
    ConsistencyOriginMismatch = "consistency.origin_mismatch",
    /// No consistency proof between the `--since` size and the bundle's size.
    ConsistencySizeMismatch = "consistency.size_mismatch",
    /// The bundle's checkpoint does not extend the `--since` checkpoint.
    ConsistencyInvalid = "consistency.invalid",
    /// `--mirror DIR`: the mirror's tiles give another root at the
    /// bundle's size, or another entry at its index: a fork.
    ConsistencyFork = "consistency.fork",
    /// `--mirror DIR`: the bundle's tree is larger than the mirror's.
    ConsistencyMirrorBehind = "consistency.mirror_behind",
    /// Required verdict arm not met (`--require-verdict`).
    PolicyVerdict = "policy.verdict",
    /// Required issuer not met (`--issuer`).
    PolicyIssuer = "policy.issuer",
    /// Required change id not met (`--change-id`).
    PolicyChangeId = "policy.change_id",
    /// Required policy id not met (`--policy-id`).
    PolicyPolicyId = "policy.policy_id",
    /// Required `applied` not met (`--applied`).
    PolicyApplied = "policy.applied",
    /// Receipt older than `--max-age`, or issued in the future.
    PolicyAge = "policy.age",
    /// The read set is stale under `--fresh ROOT`.
    PolicyFresh = "policy.fresh",
    /// The read set could not be re-read (not evaluated).
    PolicyFreshUnsupported = "policy.fresh_unsupported",
    /// Not run because a check it needs did not pass (not evaluated).
    CheckSkipped = "check.skipped",
}

impl Reason {
    /// The reason whose code is `code`, if any.
    pub fn from_code(code: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == code)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code that is not in [`Reason::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown reason code {0:?} (spec/reasons.md lists every code)")]
pub struct UnknownReason(pub String);

impl std::str::FromStr for Reason {
    type Err = UnknownReason;
    fn from_str(code: &str) -> Result<Reason, UnknownReason> {
        Reason::from_code(code).ok_or_else(|| UnknownReason(code.to_owned()))
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        let code = std::borrow::Cow::<'de, str>::deserialize(d)?;
        code.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_dotted_and_round_trip() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            let code = r.as_str();
            assert!(
                code.split_once('.')
                    .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty()),
                "{code} is not area.detail"
            );
            assert!(
                code.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_'),
                "{code}"
            );
            assert_eq!(Reason::from_code(code), Some(*r));
            assert!(!Reason::ALL[..i].contains(r), "{code} listed twice");
            let json = serde_json::to_string(r).unwrap();
            assert_eq!(json, format!("\"{code}\""));
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), *r);
        }
        let unknown = serde_json::from_str::<Reason>("\"malformed_envelope\"").unwrap_err();
        assert!(
            unknown.to_string().contains("malformed_envelope"),
            "{unknown}"
        );
    }
}
