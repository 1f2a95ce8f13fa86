//! cosig: C2SP tlog-cosignature `cosignature/v1`, the Ed25519 witness
//! cosignature (signature type 0x04).
//!
//! Boundary: witness verifier keys, the cosignature key ID, the signed
//! message, signing one cosignature line and checking the lines of a note
//! against witness keys. No I/O and no state: whether a witness *should*
//! cosign a checkpoint is [`crate::witness`]'s question, and whether enough
//! witnesses did is [`crate::tlog::policy`]'s. Formats: `spec/witness.md`.

use crate::constants::{COSIGNATURE_V1_HEADER, NOTE_COSIGNATURE_TYPE};
use crate::digest::to_hex;
use crate::keys::{KeyError, SigningKey, VerifyingKey, is_valid_key_name, parse_hash_hex};
use crate::tlog::note::{Checkpoint, Note, NoteError, NoteSignature, signature_line};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signer as _;

/// Largest timestamp a cosignature may carry: "It MUST NOT exceed 2^63 - 1".
pub const MAX_TIMESTAMP: u64 = i64::MAX as u64;
/// Bytes of a `timestamped_signature` for Ed25519: u64 timestamp, 64-byte signature.
pub const TIMESTAMPED_SIGNATURE_LEN: usize = 8 + 64;

/// Why a witness key, a cosignature or a cosigning request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CosigError {
    /// Key material that [`crate::keys`] refuses (weak, not on the curve, ...).
    #[error("witness key for {name}")]
    Key {
        /// Key name.
        name: String,
        /// What was wrong with the key.
        #[source]
        source: KeyErrorText,
    },
    /// A key name that is empty or holds a space or `+`.
    #[error("witness key name {0:?} is invalid: it must be non-empty, without spaces or '+'")]
    BadName(String),
    /// A verifier key string not of the form `NAME+HASH+KEY`.
    #[error("witness verifier key must be NAME+<8 hex>+<base64(0x04 || key)>, got {0:?}")]
    VerifierFormat(String),
    /// A verifier key whose type byte is not 0x04.
    #[error(
        "verifier key for {name} has signature type 0x{found:02x}; a witness (cosignature/v1) \
         key has type 0x04 (a log key, type 0x01, cannot cosign)"
    )]
    NotWitnessKey {
        /// Key name.
        name: String,
        /// The type byte found.
        found: u8,
    },
    /// The key ID in the string does not match name and key.
    #[error(
        "witness verifier key for {name}: key ID {found} does not match the computed {expected}"
    )]
    KeyIdMismatch {
        /// Key name.
        name: String,
        /// Key ID in the string.
        found: String,
        /// Key ID computed from name and key.
        expected: String,
    },
    /// A signature line whose bytes after the key ID are not 72 long.
    #[error(
        "cosignature by {name} holds {got} bytes after its key ID; cosignature/v1 has \
         8 (timestamp) + 64 (Ed25519)"
    )]
    Length {
        /// Key name.
        name: String,
        /// Bytes found.
        got: usize,
    },
    /// A timestamp over 2^63 - 1.
    #[error("cosignature timestamp {0} exceeds 2^63 - 1")]
    TimestampTooLarge(u64),
    /// Signing with timestamp zero: tlog-witness forbids omitting it.
    #[error("a cosignature timestamp must not be zero (tlog-witness); pass the current time")]
    TimestampZero,
    /// The text to cosign is not a checkpoint.
    #[error("only a checkpoint can be cosigned")]
    NotCheckpoint(#[source] NoteError),
    /// The Ed25519 signature does not verify (strict).
    #[error("cosignature by {name} (key ID {key_id}) does not verify over this checkpoint")]
    Invalid {
        /// Key name.
        name: String,
        /// Key ID, 8 hex digits.
        key_id: String,
    },
}

/// A [`KeyError`] kept as text: `KeyError` holds I/O errors and is not `Clone`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyErrorText(pub String);

impl KeyErrorText {
    fn of(e: &KeyError) -> KeyErrorText {
        KeyErrorText(e.to_string())
    }
}

/// tlog-cosignature "Format": the key ID of an Ed25519 cosigner is
/// `SHA-256(<name> || "\n" || 0x04 || 32-byte Ed25519 cosigner public key)[:4]`.
pub fn key_id(name: &str, key: &VerifyingKey) -> [u8; 4] {
    crate::keys::typed_key_id(name, NOTE_COSIGNATURE_TYPE, key)
}

/// A witness (cosigner) verifier key: `NAME+<8 hex key ID>+<base64(0x04||pub)>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WitnessVerifier {
    /// Key name: the name on the witness's signature lines.
    pub name: String,
    /// [`key_id`] of name and key.
    pub key_id: [u8; 4],
    /// The witness's Ed25519 public key.
    pub key: VerifyingKey,
}

impl WitnessVerifier {
    /// Verifier for `key` under `name`; weak and non-canonical keys are refused.
    pub fn new(name: &str, key: VerifyingKey) -> Result<WitnessVerifier, CosigError> {
        if !is_valid_key_name(name) {
            return Err(CosigError::BadName(name.to_owned()));
        }
        let key =
            crate::keys::verifying_key_from_bytes(key.as_bytes()).map_err(|e| CosigError::Key {
                name: name.to_owned(),
                source: KeyErrorText::of(&e),
            })?;
        Ok(WitnessVerifier {
            name: name.to_owned(),
            key_id: key_id(name, &key),
            key,
        })
    }

    /// Parse a witness vkey (C2SP signed-note "Verifier keys", type 0x04),
    /// splitting on the first two `+` only (base64 may contain `+`).
    pub fn parse(text: &str) -> Result<WitnessVerifier, CosigError> {
        let text = text.trim();
        let mut parts = text.splitn(3, '+');
        let (Some(name), Some(hash), Some(b64)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(CosigError::VerifierFormat(text.to_owned()));
        };
        let bad = || CosigError::VerifierFormat(text.to_owned());
        let found = parse_hash_hex(hash).map_err(|_| bad())?;
        let raw = STANDARD.decode(b64).map_err(|_| bad())?;
        let Some((&kind, public)) = raw.split_first() else {
            return Err(bad());
        };
        if kind != NOTE_COSIGNATURE_TYPE {
            return Err(CosigError::NotWitnessKey {
                name: name.to_owned(),
                found: kind,
            });
        }
        let key = crate::keys::verifying_key_from_bytes(public).map_err(|e| CosigError::Key {
            name: name.to_owned(),
            source: KeyErrorText::of(&e),
        })?;
        let verifier = WitnessVerifier::new(name, key)?;
        if verifier.key_id != found {
            return Err(CosigError::KeyIdMismatch {
                name: name.to_owned(),
                found: hash.to_owned(),
                expected: to_hex(&verifier.key_id),
            });
        }
        Ok(verifier)
    }

    /// Whether a signature line names this witness: same key name and key ID.
    pub fn matches(&self, line: &NoteSignature) -> bool {
        line.name == self.name && line.key_hash == self.key_id
    }
}

impl std::fmt::Display for WitnessVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::keys::write_vkey(
            f,
            &self.name,
            &self.key_id,
            NOTE_COSIGNATURE_TYPE,
            &self.key,
        )
    }
}

/// tlog-cosignature "Ed25519 signed message": two newline-terminated lines,
/// `cosignature/v1` and `time <timestamp>` (ASCII decimal, no leading
/// zeros), then "the whole note body of the cosigned checkpoint (including
/// the final newline, but not including any signature lines)".
pub fn signed_message(body: &str, timestamp: u64) -> Vec<u8> {
    let mut msg = format!("{COSIGNATURE_V1_HEADER}\ntime {timestamp}\n").into_bytes();
    msg.extend_from_slice(body.as_bytes());
    msg
}

/// A decoded `timestamped_signature` (tlog-cosignature "Format").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cosignature {
    /// POSIX seconds at which the witness cosigned.
    pub timestamp: u64,
    /// The Ed25519 signature over [`signed_message`].
    pub signature: [u8; 64],
}

impl Cosignature {
    /// Decode the bytes after the key ID: `u64 timestamp (big-endian) ||
    /// opaque ed25519_signature[64]`, exactly 72 bytes, timestamp at most
    /// 2^63 - 1.
    pub fn decode(line: &NoteSignature) -> Result<Cosignature, CosigError> {
        let length = || CosigError::Length {
            name: line.name.clone(),
            got: line.sig.len(),
        };
        let raw: &[u8; TIMESTAMPED_SIGNATURE_LEN] =
            line.sig.as_slice().try_into().map_err(|_| length())?;
        let (ts, sig) = raw.split_at(8);
        let timestamp = u64::from_be_bytes(ts.try_into().map_err(|_| length())?);
        if timestamp > MAX_TIMESTAMP {
            return Err(CosigError::TimestampTooLarge(timestamp));
        }
        Ok(Cosignature {
            timestamp,
            signature: sig.try_into().map_err(|_| length())?,
        })
    }
}

/// Cosign a checkpoint body as witness `name` at `timestamp`: the signature
/// line `— <name> base64(key ID || u64be timestamp || signature)`, ending in
/// a newline, as a tlog-witness `add-checkpoint` answer carries it.
///
/// The body must be a checkpoint (C2SP tlog-checkpoint); the timestamp must
/// be non-zero (tlog-witness: "The cosignature MUST NOT omit the timestamp")
/// and at most 2^63 - 1.
pub fn sign(
    body: &str,
    name: &str,
    key: &SigningKey,
    timestamp: u64,
) -> Result<String, CosigError> {
    Checkpoint::parse(body).map_err(CosigError::NotCheckpoint)?;
    if !is_valid_key_name(name) {
        return Err(CosigError::BadName(name.to_owned()));
    }
    if timestamp == 0 {
        return Err(CosigError::TimestampZero);
    }
    if timestamp > MAX_TIMESTAMP {
        return Err(CosigError::TimestampTooLarge(timestamp));
    }
    let signature = key.sign(&signed_message(body, timestamp)).to_bytes();
    let mut timestamped = Vec::with_capacity(TIMESTAMPED_SIGNATURE_LEN);
    timestamped.extend_from_slice(&timestamp.to_be_bytes());
    timestamped.extend_from_slice(&signature);
    Ok(signature_line(
        name,
        key_id(name, &key.verifying_key()),
        &timestamped,
    ))
}

/// Verify one signature line of `witness` over the note text `body`
/// (strict Ed25519); the cosignature's timestamp on success.
///
/// The caller has matched the line to the witness ([`WitnessVerifier::matches`]).
pub fn verify(
    body: &str,
    line: &NoteSignature,
    witness: &WitnessVerifier,
) -> Result<u64, CosigError> {
    let cosig = Cosignature::decode(line)?;
    let sig = ed25519_dalek::Signature::from_bytes(&cosig.signature);
    witness
        .key
        .verify_strict(&signed_message(body, cosig.timestamp), &sig)
        .map_err(|_| CosigError::Invalid {
            name: witness.name.clone(),
            key_id: to_hex(&witness.key_id),
        })?;
    Ok(cosig.timestamp)
}

/// What one witness's lines on a note showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CosigStatus {
    /// Every line of the witness verified; the first one's timestamp.
    Verified {
        /// POSIX seconds of the (first) verified cosignature.
        timestamp: u64,
    },
    /// A line with the witness's name and key ID did not verify (or was
    /// malformed): C2SP signed-note, "If the key name and ID match a known
    /// key, verifiers MUST verify the signature."
    Failed(CosigError),
    /// No line carries the witness's name and key ID.
    Absent,
}

/// Check `note`'s signature lines against each witness, in order: one
/// status per witness. Lines of other keys (the log's, unknown witnesses',
/// grease) are ignored. The note text is taken as the cosigned body; the
/// caller checks it is a checkpoint.
pub fn check(note: &Note, witnesses: &[WitnessVerifier]) -> Vec<CosigStatus> {
    witnesses
        .iter()
        .map(|w| {
            let mut status = CosigStatus::Absent;
            for line in note.signatures.iter().filter(|l| w.matches(l)) {
                match verify(&note.text, line, w) {
                    Ok(timestamp) if status == CosigStatus::Absent => {
                        status = CosigStatus::Verified { timestamp };
                    }
                    Ok(_) => {}
                    Err(e) => return CosigStatus::Failed(e),
                }
            }
            status
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "example.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn witness(name: &str, k: &SigningKey) -> WitnessVerifier {
        WitnessVerifier::new(name, k.verifying_key()).unwrap()
    }

    fn note_with(lines: &[String]) -> Note {
        let text = format!("{BODY}\n{}", lines.concat());
        Note::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn sign_then_check() {
        let k = key(3);
        let line = sign(BODY, "w.example", &k, 1_700_000_000).unwrap();
        let note = note_with(&[line]);
        let w = witness("w.example", &k);
        assert_eq!(
            check(&note, &[w]),
            vec![CosigStatus::Verified {
                timestamp: 1_700_000_000
            }]
        );
    }

    #[test]
    fn vkey_round_trip_and_refusals() {
        let w = witness("w.example/1", &key(4));
        let text = w.to_string();
        assert_eq!(WitnessVerifier::parse(&text).unwrap(), w);
        // A log key (type 0x01) of the same name and key is not a witness key.
        let log = crate::keys::NoteVerifier::new("w.example/1", key(4).verifying_key()).unwrap();
        assert!(matches!(
            WitnessVerifier::parse(&log.to_string()),
            Err(CosigError::NotWitnessKey { found: 0x01, .. })
        ));
        let mut wrong = text.clone();
        wrong.replace_range(12..20, "00000000");
        assert!(matches!(
            WitnessVerifier::parse(&wrong),
            Err(CosigError::KeyIdMismatch { .. })
        ));
        assert!(WitnessVerifier::parse("w.example").is_err());
        assert!(WitnessVerifier::new("a b", key(4).verifying_key()).is_err());
    }

    #[test]
    fn tampering_fails_and_strangers_are_ignored() {
        let (a, b) = (key(5), key(6));
        let line = sign(BODY, "w", &a, 7).unwrap();
        // Another checkpoint under the same line: Failed.
        let other =
            Note::parse(format!("o\n1\n{}\n\n{line}", STANDARD.encode([1u8; 32])).as_bytes())
                .unwrap();
        assert!(matches!(
            check(&other, &[witness("w", &a)])[..],
            [CosigStatus::Failed(CosigError::Invalid { .. })]
        ));
        // Same name, other key: other key ID, so the line is not this witness's.
        let note = note_with(std::slice::from_ref(&line));
        assert_eq!(check(&note, &[witness("w", &b)]), vec![CosigStatus::Absent]);
        // A good line and a bad one of the same witness: Failed.
        let mut bad = note.signatures[0].clone();
        bad.sig[20] ^= 1;
        let mut both = note.clone();
        both.signatures.push(bad);
        assert!(matches!(
            check(&both, &[witness("w", &a)])[..],
            [CosigStatus::Failed(_)]
        ));
        // Wrong length after the key ID: Failed with Length.
        let mut short = note.clone();
        short.signatures[0].sig.truncate(71);
        assert!(matches!(
            check(&short, &[witness("w", &a)])[..],
            [CosigStatus::Failed(CosigError::Length { got: 71, .. })]
        ));
    }

    #[test]
    fn timestamps_are_bounded() {
        let k = key(7);
        assert_eq!(sign(BODY, "w", &k, 0), Err(CosigError::TimestampZero));
        assert_eq!(
            sign(BODY, "w", &k, MAX_TIMESTAMP + 1),
            Err(CosigError::TimestampTooLarge(MAX_TIMESTAMP + 1))
        );
        assert!(sign(BODY, "w", &k, MAX_TIMESTAMP).is_ok());
        // A line claiming 2^63 is refused before any signature work.
        let mut line = note_with(&[sign(BODY, "w", &k, 9).unwrap()]).signatures[0].clone();
        line.sig[0] = 0x80;
        assert!(matches!(
            Cosignature::decode(&line),
            Err(CosigError::TimestampTooLarge(_))
        ));
        assert!(matches!(
            sign("not a checkpoint\n", "w", &k, 9),
            Err(CosigError::NotCheckpoint(_))
        ));
    }
}
