//! dsse: the DSSE envelope, PAE, Ed25519 signing and the trust rule for
//! envelope signatures; and the envelope's DAG-CBOR log-entry form (its
//! refusals are [`EntryError`], apart from the envelope's [`EnvelopeError`]).
//!
//! Boundary: bytes of an envelope (JSON or log entry) in, a typed
//! [`Envelope`] out; signatures made and checked over PAE with Ed25519
//! `verify_strict` only (never batch verification). What the payload means
//! is [`crate::receipt`]'s business; which keys are trusted is the caller's.
//! Spec: DSSE v1.0.2 (secure-systems-lab/dsse `envelope.md`, `protocol.md`).

use crate::constants::DSSE_PAE_PREFIX;
use crate::keys::{SigningKey, VerifyingKey, decode_base64_any, keyid};
use crate::limits::{MAX_ENTRY_BYTES, MAX_ENVELOPE_BYTES, MAX_ENVELOPE_SIGNATURES, MAX_JSON_DEPTH};
use crate::reason::Reason;
use crate::receipt::canonical::{Value, ValueRef, dagcbor};
use crate::strictjson::{self, StrictJsonError};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signer as _;
use std::collections::BTreeMap;

/// One DSSE signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// keyid hint; the empty string when absent.
    pub keyid: String,
    /// Raw signature bytes (64 for Ed25519; other lengths kept so they can be reported).
    pub sig: Vec<u8>,
}

/// A DSSE envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// `payloadType`: how to interpret the payload (authenticated by PAE).
    pub payload_type: String,
    /// The payload bytes (base64-decoded).
    pub payload: Vec<u8>,
    /// The signatures, in envelope order.
    pub signatures: Vec<Signature>,
}

/// Why an envelope was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// Envelope JSON over [`MAX_ENVELOPE_BYTES`].
    #[error("envelope is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Size found.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Not JSON, or not the DSSE shape (missing field, wrong type).
    #[error("envelope JSON is malformed: {0}")]
    Json(String),
    /// A JSON object names one key twice (readers would disagree on its value).
    #[error("envelope JSON repeats the key {0:?}; each key may appear once")]
    DuplicateKey(String),
    /// A base64 field that is neither standard nor URL-safe base64.
    #[error("envelope field {field} is not valid base64 (standard or URL-safe)")]
    Base64 {
        /// The field, e.g. `payload` or `signatures[1].sig`.
        field: String,
    },
    /// More signatures than [`MAX_ENVELOPE_SIGNATURES`].
    #[error("envelope has {count} signatures, over the limit of {limit}")]
    TooManySignatures {
        /// Count found.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// An envelope with an empty `signatures` list.
    #[error("envelope has no signatures; sign it before use")]
    NoSignatures,
}

/// Why a log entry (the envelope's DAG-CBOR form) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// A log entry over [`MAX_ENTRY_BYTES`].
    #[error("log entry is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Size found.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A log entry that is not strict canonical DAG-CBOR.
    #[error("log entry is not canonical DAG-CBOR")]
    Cbor(#[source] dagcbor::DecodeError),
    /// A log-entry field missing or of the wrong type.
    #[error("log entry field {field} is missing or not {expected}")]
    Field {
        /// The field path, e.g. `signatures[0].sig`.
        field: String,
        /// The expected type.
        expected: &'static str,
    },
    /// A log-entry map key that the entry format does not define.
    #[error("log entry has an unknown field {0:?}")]
    UnknownField(String),
    /// A log entry with an empty `signatures` list.
    #[error("log entry has no signatures")]
    NoSignatures,
    /// More signatures than [`MAX_ENVELOPE_SIGNATURES`].
    #[error("log entry has {count} signatures, over the limit of {limit}")]
    TooManySignatures {
        /// Count found.
        count: usize,
        /// The limit.
        limit: usize,
    },
}

impl EnvelopeError {
    /// Stable reason code: `envelope.too_large`, or `envelope.malformed`
    /// for every other refusal.
    pub fn reason_code(&self) -> Reason {
        match self {
            EnvelopeError::TooLarge { .. } => Reason::EnvelopeTooLarge,
            _ => Reason::EnvelopeMalformed,
        }
    }
}

/// DSSE v1 Pre-Authentication Encoding (DSSE `protocol.md`, "Signature
/// definition"):
///
/// ```text
/// PAE(type, body) = "DSSEv1" || SP || LEN(type) || SP || type || SP || LEN(body) || SP || body
/// SP        = 0x20 (one space)
/// LEN(s)    = ASCII decimal byte length of s, no leading zeros
/// ```
///
/// `type` is counted in UTF-8 bytes, not characters. The signature is made
/// over these bytes, so the payload type is authenticated with the payload.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let type_len = payload_type.len().to_string();
    let body_len = payload.len().to_string();
    let mut out = Vec::with_capacity(
        DSSE_PAE_PREFIX.len()
            + type_len.len()
            + payload_type.len()
            + body_len.len()
            + 4
            + payload.len(),
    );
    out.extend_from_slice(DSSE_PAE_PREFIX.as_bytes());
    for part in [
        type_len.as_bytes(),
        payload_type.as_bytes(),
        body_len.as_bytes(),
        payload,
    ] {
        out.push(b' ');
        out.extend_from_slice(part);
    }
    out
}

/// The JSON shape of an envelope as read; unknown fields are ignored
/// (DSSE `envelope.md`: "consumers MUST ignore unrecognized fields").
#[derive(serde::Deserialize)]
struct JsonEnvelope<'a> {
    #[serde(borrow)]
    payload: std::borrow::Cow<'a, str>,
    #[serde(rename = "payloadType")]
    payload_type: String,
    #[serde(borrow)]
    signatures: Vec<JsonSignature<'a>>,
}

/// One signature as read; a missing or null keyid becomes "".
#[derive(serde::Deserialize)]
struct JsonSignature<'a> {
    #[serde(default)]
    keyid: Option<String>,
    #[serde(borrow)]
    sig: std::borrow::Cow<'a, str>,
}

impl Envelope {
    /// Sign `payload` under `payload_type` with one key (keyid filled in).
    pub fn sign(payload_type: &str, payload: Vec<u8>, key: &SigningKey) -> Envelope {
        let sig = key.sign(&pae(payload_type, &payload));
        Envelope {
            payload_type: payload_type.to_owned(),
            payload,
            signatures: vec![Signature {
                keyid: keyid(&key.verifying_key()),
                sig: sig.to_bytes().to_vec(),
            }],
        }
    }

    /// Parse envelope JSON: size limit, then [`strictjson::from_slice`]
    /// (duplicate keys, depth, and an array where the envelope or a
    /// signature object is specified are refused), standard or URL-safe
    /// base64, unknown fields ignored.
    pub fn from_json(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        crate::limits::check_size(bytes, MAX_ENVELOPE_BYTES, |size, limit| {
            EnvelopeError::TooLarge { size, limit }
        })?;
        let raw: JsonEnvelope =
            strictjson::from_slice(bytes, MAX_JSON_DEPTH).map_err(|e| match e {
                StrictJsonError::DuplicateKey { key, .. } => EnvelopeError::DuplicateKey(key),
                other => EnvelopeError::Json(other.to_string()),
            })?;
        check_signature_count(raw.signatures.len())?;
        let payload = decode_field(&raw.payload, || "payload".to_owned())?;
        let signatures = raw
            .signatures
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                Ok(Signature {
                    keyid: s.keyid.unwrap_or_default(),
                    sig: decode_field(&s.sig, || format!("signatures[{i}].sig"))?,
                })
            })
            .collect::<Result<Vec<_>, EnvelopeError>>()?;
        Ok(Envelope {
            payload_type: raw.payload_type,
            payload,
            signatures,
        })
    }

    /// Envelope JSON with standard padded base64. An empty keyid is omitted
    /// (DSSE: keyid is optional).
    pub fn to_json(&self) -> String {
        let signatures: Vec<serde_json::Value> = self
            .signatures
            .iter()
            .map(|s| {
                let mut m = serde_json::Map::new();
                if !s.keyid.is_empty() {
                    m.insert("keyid".into(), s.keyid.clone().into());
                }
                m.insert("sig".into(), STANDARD.encode(&s.sig).into());
                serde_json::Value::Object(m)
            })
            .collect();
        serde_json::json!({
            "payload": STANDARD.encode(&self.payload),
            "payloadType": self.payload_type,
            "signatures": signatures,
        })
        .to_string()
    }

    /// The log entry: DAG-CBOR of `{"payload": bytes, "payload_type": text,
    /// "signatures": [{"keyid": text, "sig": bytes}]}`.
    pub fn to_entry(&self) -> Vec<u8> {
        let signatures = self
            .signatures
            .iter()
            .map(|s| {
                ValueRef::Map(vec![
                    ("keyid", ValueRef::Text(&s.keyid)),
                    ("sig", ValueRef::Bytes(&s.sig)),
                ])
            })
            .collect();
        let entry = ValueRef::Map(vec![
            ("payload", ValueRef::Bytes(&self.payload)),
            ("payload_type", ValueRef::Text(&self.payload_type)),
            ("signatures", ValueRef::Array(signatures)),
        ]);
        // Heads and keys take at most 9 + 13 bytes per item.
        let items: usize = self
            .signatures
            .iter()
            .map(|s| s.keyid.len() + s.sig.len() + 2 * 22)
            .sum();
        let mut out =
            Vec::with_capacity(self.payload.len() + self.payload_type.len() + items + 4 * 22);
        dagcbor::encode_into(&entry, &mut out);
        out
    }

    /// Parse a log entry (strict DAG-CBOR).
    pub fn from_entry(bytes: &[u8]) -> Result<Envelope, EntryError> {
        crate::limits::check_size(bytes, MAX_ENTRY_BYTES, |size, limit| EntryError::TooLarge {
            size,
            limit,
        })?;
        let value = dagcbor::decode(bytes).map_err(EntryError::Cbor)?;
        let mut map = take_map(value, "entry", &["payload", "payload_type", "signatures"])?;
        let payload = take_bytes(&mut map, "payload", "")?;
        let payload_type = take_text(&mut map, "payload_type", "")?;
        let Some(Value::Array(items)) = map.remove("signatures") else {
            return Err(field_error("signatures", "an array"));
        };
        match items.len() {
            0 => return Err(EntryError::NoSignatures),
            count if count > MAX_ENVELOPE_SIGNATURES => {
                return Err(EntryError::TooManySignatures {
                    count,
                    limit: MAX_ENVELOPE_SIGNATURES,
                });
            }
            _ => {}
        }
        let signatures = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| entry_signature(item, i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Envelope {
            payload_type,
            payload,
            signatures,
        })
    }
}

/// One `{"keyid": text, "sig": bytes}` map of a log entry.
fn entry_signature(item: Value, index: usize) -> Result<Signature, EntryError> {
    let path = format!("signatures[{index}].");
    let mut map = take_map(item, &format!("signatures[{index}]"), &["keyid", "sig"])?;
    Ok(Signature {
        keyid: take_text(&mut map, "keyid", &path)?,
        sig: take_bytes(&mut map, "sig", &path)?,
    })
}

/// A map holding exactly the keys `allowed` (no more; missing ones are
/// reported by the `take_*` that wants them).
fn take_map(
    value: Value,
    field: &str,
    allowed: &[&str],
) -> Result<BTreeMap<String, Value>, EntryError> {
    let Value::Map(map) = value else {
        return Err(field_error(field, "a map"));
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(EntryError::UnknownField(unknown.clone()));
    }
    Ok(map)
}

fn take_bytes(
    map: &mut BTreeMap<String, Value>,
    key: &str,
    path: &str,
) -> Result<Vec<u8>, EntryError> {
    match map.remove(key) {
        Some(Value::Bytes(b)) => Ok(b),
        _ => Err(field_error(&format!("{path}{key}"), "a byte string")),
    }
}

fn take_text(
    map: &mut BTreeMap<String, Value>,
    key: &str,
    path: &str,
) -> Result<String, EntryError> {
    match map.remove(key) {
        Some(Value::Text(t)) => Ok(t),
        _ => Err(field_error(&format!("{path}{key}"), "a text string")),
    }
}

fn field_error(field: &str, expected: &'static str) -> EntryError {
    EntryError::Field {
        field: field.to_owned(),
        expected,
    }
}

/// At least one signature, at most [`MAX_ENVELOPE_SIGNATURES`].
fn check_signature_count(count: usize) -> Result<(), EnvelopeError> {
    if count == 0 {
        return Err(EnvelopeError::NoSignatures);
    }
    if count > MAX_ENVELOPE_SIGNATURES {
        return Err(EnvelopeError::TooManySignatures {
            count,
            limit: MAX_ENVELOPE_SIGNATURES,
        });
    }
    Ok(())
}

/// DSSE `envelope.md`: "Either standard or URL-safe base64 encodings are
/// allowed. Signers may use either, and verifiers MUST accept either."
fn decode_field(text: &str, field: impl Fn() -> String) -> Result<Vec<u8>, EnvelopeError> {
    decode_base64_any(text).ok_or_else(|| EnvelopeError::Base64 { field: field() })
}

/// The outcome of the envelope-signature check (spec/envelope.md "The trust rule for envelope signatures").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignatureCheck {
    /// At least one trusted key verified and none attributed to a trusted key failed.
    Verified {
        /// keyids of the trusted keys that verified.
        keyids: Vec<String>,
    },
    /// A signature whose keyid names a trusted key did not verify under it.
    Failed {
        /// Position of the failing signature in the envelope.
        index: usize,
        /// Its keyid.
        keyid: String,
    },
    /// Nothing verified and nothing failed: no trusted key applies.
    NotEvaluated,
}

/// Strict Ed25519 verification of `sig` over PAE; a signature that is not
/// 64 bytes does not verify.
fn verifies(key: &VerifyingKey, message: &[u8], sig: &[u8]) -> bool {
    match ed25519_dalek::Signature::from_slice(sig) {
        Ok(sig) => key.verify_strict(message, &sig).is_ok(),
        Err(_) => false,
    }
}

/// Trusted keys with their keyids (hex SHA-256 of the key), computed once
/// for every envelope checked against them.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TrustedKeys {
    keys: Vec<(String, VerifyingKey)>,
}

impl TrustedKeys {
    /// The keys, each with its keyid.
    pub fn new(keys: &[VerifyingKey]) -> TrustedKeys {
        TrustedKeys {
            keys: keys.iter().map(|k| (keyid(k), *k)).collect(),
        }
    }

    /// The keyids, in the order of the keys given to [`TrustedKeys::new`].
    pub fn keyids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// Apply the trust rule to every signature of `envelope` (strict
    /// Ed25519 over PAE).
    ///
    /// spec/envelope.md "The trust rule for envelope signatures" (and
    /// spec/verify.md "Signature rule"):
    /// - a keyid naming a trusted key (keyid = hex SHA-256 of that key) must
    ///   verify under it, or the check is [`SignatureCheck::Failed`];
    /// - a keyid naming no trusted key: skipped (a hint for someone else);
    /// - an empty keyid: tried against every trusted key; verified if any
    ///   verifies, otherwise skipped like an unknown one;
    /// - [`SignatureCheck::Verified`] when at least one verified and none
    ///   failed; [`SignatureCheck::NotEvaluated`] when nothing verified and
    ///   nothing failed.
    pub fn check(&self, envelope: &Envelope) -> SignatureCheck {
        let message = pae(&envelope.payload_type, &envelope.payload);
        let mut verified: Vec<String> = Vec::new();
        for (index, s) in envelope.signatures.iter().enumerate() {
            let mut candidates = self
                .keys
                .iter()
                .filter(|(id, _)| s.keyid.is_empty() || *id == s.keyid)
                .peekable();
            let named = candidates.peek().is_some();
            match candidates.find(|(_, k)| verifies(k, &message, &s.sig)) {
                Some((id, _)) if !verified.contains(id) => verified.push(id.clone()),
                Some(_) => {}
                None if !s.keyid.is_empty() && named => {
                    return SignatureCheck::Failed {
                        index,
                        keyid: s.keyid.clone(),
                    };
                }
                None => {}
            }
        }
        if verified.is_empty() {
            SignatureCheck::NotEvaluated
        } else {
            SignatureCheck::Verified { keyids: verified }
        }
    }
}

/// [`TrustedKeys::check`] against `trusted` (keyids computed for this call;
/// hold a [`TrustedKeys`] to check many envelopes).
pub fn check_signatures(envelope: &Envelope, trusted: &[VerifyingKey]) -> SignatureCheck {
    TrustedKeys::new(trusted).check(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    #[test]
    fn pae_matches_the_spec_example() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn json_round_trips_and_refuses_duplicates() {
        let env = Envelope::sign("t", b"body".to_vec(), &key(1));
        assert_eq!(Envelope::from_json(env.to_json().as_bytes()).unwrap(), env);
        let dup = br#"{"payload":"","payload":"YQ==","payloadType":"t","signatures":[{"sig":""}]}"#;
        assert_eq!(
            Envelope::from_json(dup),
            Err(EnvelopeError::DuplicateKey("payload".into()))
        );
        let nested = br#"{"payload":"","payloadType":"t","signatures":[{"sig":"","sig":""}]}"#;
        assert!(matches!(
            Envelope::from_json(nested),
            Err(EnvelopeError::DuplicateKey(_))
        ));
        let trailing = br#"{"payload":"","payloadType":"t","signatures":[{"sig":""}]} x"#;
        assert!(matches!(
            Envelope::from_json(trailing),
            Err(EnvelopeError::Json(_))
        ));
    }

    #[test]
    fn limits_are_enforced() {
        let big = vec![b' '; MAX_ENVELOPE_BYTES + 1];
        assert!(matches!(
            Envelope::from_json(&big),
            Err(EnvelopeError::TooLarge { .. })
        ));
        let sigs = vec![r#"{"sig":""}"#; MAX_ENVELOPE_SIGNATURES + 1].join(",");
        let many = format!(r#"{{"payload":"","payloadType":"t","signatures":[{sigs}]}}"#);
        assert!(matches!(
            Envelope::from_json(many.as_bytes()),
            Err(EnvelopeError::TooManySignatures { .. })
        ));
        let none = br#"{"payload":"","payloadType":"t","signatures":[]}"#;
        assert_eq!(Envelope::from_json(none), Err(EnvelopeError::NoSignatures));
    }

    fn with_sigs(sigs: Vec<Signature>) -> Envelope {
        Envelope {
            payload_type: "t".into(),
            payload: b"body".to_vec(),
            signatures: sigs,
        }
    }

    fn good(k: &SigningKey, keyid: &str) -> Signature {
        let mut s = Envelope::sign("t", b"body".to_vec(), k)
            .signatures
            .remove(0);
        s.keyid = keyid.into();
        s
    }

    fn bad(keyid: &str) -> Signature {
        Signature {
            keyid: keyid.into(),
            sig: vec![7; 64],
        }
    }

    #[test]
    fn trust_rule_every_branch() {
        let (a, b) = (key(1), key(2));
        let (pa, pb) = (a.verifying_key(), b.verifying_key());
        let (ida, idb) = (keyid(&pa), keyid(&pb));
        let ok = |ids: &[&String]| SignatureCheck::Verified {
            keyids: ids.iter().map(|s| (*s).clone()).collect(),
        };
        // keyid names a trusted key and verifies.
        assert_eq!(
            check_signatures(&with_sigs(vec![good(&a, &ida)]), &[pa]),
            ok(&[&ida])
        );
        // keyid names a trusted key and fails: Failed, even beside a good one.
        let env = with_sigs(vec![good(&a, &ida), bad(&idb)]);
        assert_eq!(
            check_signatures(&env, &[pa, pb]),
            SignatureCheck::Failed {
                index: 1,
                keyid: idb.clone()
            }
        );
        // A short signature under a trusted keyid fails too.
        let short = Signature {
            keyid: ida.clone(),
            sig: vec![0; 10],
        };
        assert!(matches!(
            check_signatures(&with_sigs(vec![short]), &[pa]),
            SignatureCheck::Failed { index: 0, .. }
        ));
        // keyid naming no trusted key: skipped.
        let env = with_sigs(vec![bad("unknown"), good(&a, &ida)]);
        assert_eq!(check_signatures(&env, &[pa]), ok(&[&ida]));
        assert_eq!(
            check_signatures(&with_sigs(vec![bad("unknown")]), &[pa]),
            SignatureCheck::NotEvaluated
        );
        // Empty keyid: tried against every trusted key.
        assert_eq!(
            check_signatures(&with_sigs(vec![good(&b, "")]), &[pa, pb]),
            ok(&[&idb])
        );
        // Empty keyid that verifies under none: skipped, not failed.
        assert_eq!(
            check_signatures(&with_sigs(vec![bad("")]), &[pa, pb]),
            SignatureCheck::NotEvaluated
        );
        // A good signature under an untrusted key with its keyid: skipped.
        assert_eq!(
            check_signatures(&with_sigs(vec![good(&b, &idb)]), &[pa]),
            SignatureCheck::NotEvaluated
        );
        // No trusted keys at all.
        assert_eq!(
            check_signatures(&with_sigs(vec![good(&a, &ida)]), &[]),
            SignatureCheck::NotEvaluated
        );
        // Two trusted keys both verifying.
        let env = with_sigs(vec![good(&a, &ida), good(&b, ""), good(&a, "")]);
        assert_eq!(check_signatures(&env, &[pa, pb]), ok(&[&ida, &idb]));
    }

    #[test]
    fn payload_type_is_authenticated() {
        let a = key(3);
        let mut env = Envelope::sign("t", b"body".to_vec(), &a);
        env.payload_type = "u".into();
        assert!(matches!(
            check_signatures(&env, &[a.verifying_key()]),
            SignatureCheck::Failed { .. }
        ));
    }

    proptest::proptest! {
        #[test]
        fn json_and_entry_round_trip(
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
            payload_type in "[ -~é]{0,40}",
            seed in proptest::num::u8::ANY,
        ) {
            let k = key(seed);
            let env = Envelope::sign(&payload_type, payload, &k);
            proptest::prop_assert_eq!(&Envelope::from_json(env.to_json().as_bytes()).unwrap(), &env);
            proptest::prop_assert_eq!(&Envelope::from_entry(&env.to_entry()).unwrap(), &env);
            let ok = SignatureCheck::Verified { keyids: vec![keyid(&k.verifying_key())] };
            proptest::prop_assert_eq!(check_signatures(&env, &[k.verifying_key()]), ok);
        }
    }
}
